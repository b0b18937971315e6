/* token_convert.h — token files (token_corpus.h) into data.h5 rows, streaming.
 *
 * The input files, in order, are one sequence of tokens t[0 .. total). Row i holds the
 * T+1 tokens t[i*S .. i*S+T] (S, the stride, defaults to T: consecutive rows share one
 * token); tokens after the last whole row are checked but not used — the rules of
 * `ppdl-data text`, which is this with every byte a token.
 *
 * Validation (val_fraction F > 0): of the n rows the whole sequence would give, the last
 * ceil(F*n) are held back. They are cut from the end of the sequence — the region
 * t[P .. total) with P = total - ((n_val-1)*S + T+1) — and the training rows from
 * t[0 .. P) alone, so no token is in both sets.
 *
 * Memory: the read block (1 MiB), one row, and a buffer of rows (about 4 MiB, whole HDF5
 * chunks), whatever the corpus size. Every token of every file is checked against
 * [0, vocab), also those no row uses.
 */
#ifndef PPDL_TOKEN_CONVERT_H
#define PPDL_TOKEN_CONVERT_H

#include <stddef.h>

typedef struct ppdl_tok_convert_opts {
    const char *const *inputs;     /* files, in order */
    int n_inputs;
    int format;                    /* PPDL_TOK_* (AUTO: per file) */
    int raw_width;                 /* raw files: 2 (uint16) or 4 (uint32) */
    long vocab_size;               /* 0: the one the files' format implies (llm.c) */
    const char *vocab_what;        /* where vocab_size came from, for messages (NULL:
                                    * "--vocab-size", or the format's) */
    const char *unit;              /* what a token is, for messages (NULL: "tokens") */
    const char *name;              /* the corpus in messages (NULL: the inputs' names) */
    long T, S;                     /* row length T+1, stride S */
    double val_fraction;           /* 0: no validation set */
    const char *output, *val_output;
    int compress;                  /* gzip level, 0: none */
    int progress;                  /* 1: progress lines on stderr (conversions over ~2 s) */
} ppdl_tok_convert_opts;

typedef struct ppdl_tok_convert_result {
    long long tokens;              /* in all files */
    long rows, val_rows;
    long vocab_size;               /* the one used */
    long long read_bytes;          /* of all files */
    double seconds;
} ppdl_tok_convert_result;

/* Probe every file, then write output (and val_output) whole, or nothing: on any error
 * no output file exists that did not before, and an existing one is unchanged. */
int ppdl_tok_convert(const ppdl_tok_convert_opts *o, ppdl_tok_convert_result *res, char *err,
                     size_t errlen);

#endif
