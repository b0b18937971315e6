/* data_io.h — data.h5: what the model trains on.
 *
 * Layout (contract: docs/formats.md "data.h5"):
 *   language modelling: tokens int32 [N, T+1] (inputs [:, :T], targets [:, 1:]),
 *                       root attribute vocab_size (int32)
 *   classification:     features float32 [N, D]  or  images float32 [N, C, H, W],
 *                       and labels int32 [N]
 * Step k uses samples k*B ... k*B+B-1 (mod N); the caller computes the start.
 */
#ifndef PPDL_DATA_IO_H
#define PPDL_DATA_IO_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"

enum { PPDL_DATA_TOKENS = 1, PPDL_DATA_FEATURES = 2, PPDL_DATA_IMAGES = 3 };

typedef struct ppdl_data {
    char path[4096];
    long long file;                /* hid_t of the open file */
    int kind;                      /* PPDL_DATA_* */
    long n;                        /* samples */
    int T;                         /* tokens: sequence length (row length T+1) */
    int vocab_size;                /* tokens */
    long sample_floats;            /* features/images: floats per sample */
    int n_classes;                 /* the model's classes (targets are checked against it) */
} ppdl_data;

/* Open and validate against the model: the right kind of data set for the family,
 * vocab_size <= the model's, T equal to seq_len, feature/image shape equal to the
 * model's input, N >= 1. */
int ppdl_data_open(const char *path, const ppdl_model *m, ppdl_data *d, char *err, size_t errlen);

/* Read `count` samples starting at `start` (wrapping mod N).
 * inputs (may be NULL): int32 tokens [count, T] or float [count, sample_floats];
 * targets (may be NULL): int32 [count, T] (next tokens) or [count] labels.
 * Fails, naming the file and dataset, on a token or label out of range. */
int ppdl_data_read(ppdl_data *d, long start, int count, void *inputs, int32_t *targets,
                   char *err, size_t errlen);
/* The same for the samples of rows[0..count-1] (each in 0..N-1), in that order. */
int ppdl_data_read_rows(ppdl_data *d, const long *rows, int count, void *inputs, int32_t *targets, char *err,
                        size_t errlen);
void ppdl_data_close(ppdl_data *d);

/* Writers used by ppdl-data (and tests). Write to path.tmp, then rename. */
int ppdl_data_write_tokens(const char *path, const int32_t *tokens, long n, int T, int vocab_size,
                           char *err, size_t errlen);
/* data.h5 of tokens written a piece at a time (corpora larger than memory): `tokens`
 * int32 [n, T+1] in chunks of about 256 KiB (gzip level `compress` 1-9 with the shuffle
 * filter, 0: none), attribute vocab_size. Written to path.tmp; nothing is at path until
 * ppdl_tokens_out_commit. The caller checks the tokens against vocab_size.
 *   begin -> rows (any order, each row once) -> close -> commit (rename to path)
 *   discard (at any point): remove path.tmp and free the writer */
typedef struct ppdl_tokens_out ppdl_tokens_out;
ppdl_tokens_out *ppdl_tokens_out_begin(const char *path, long n, int T, int vocab_size, int compress,
                                       char *err, size_t errlen);
/* tok: int32 [rows, T+1], the rows row0 .. row0+rows-1; writes of whole chunks (a
 * multiple of ppdl_tokens_out_chunk_rows, from a multiple of it) are the fast ones */
int ppdl_tokens_out_rows(ppdl_tokens_out *w, long row0, long rows, const int32_t *tok, char *err,
                         size_t errlen);
long ppdl_tokens_out_chunk_rows(const ppdl_tokens_out *w);
int ppdl_tokens_out_close(ppdl_tokens_out *w, char *err, size_t errlen);
/* rename path.tmp to path and free w (on failure path.tmp is removed, w freed) */
int ppdl_tokens_out_commit(ppdl_tokens_out *w, char *err, size_t errlen);
void ppdl_tokens_out_discard(ppdl_tokens_out *w);

int ppdl_data_write_classif(const char *path, const float *x, const int32_t *labels, long n,
                            int ndim, const long *sample_shape, char *err, size_t errlen);

#endif
