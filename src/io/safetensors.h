/* safetensors.h — the safetensors file format (Hugging Face), read and written one
 * tensor at a time.
 *
 * Layout (docs/interop.md "safetensors"):
 *   8 bytes      N, the header's length, unsigned little-endian
 *   N bytes      a JSON object: per tensor name {"dtype": "F32", "shape": [..],
 *                "data_offsets": [begin, end]} (offsets from the end of the header);
 *                optionally "__metadata__": {string: string}
 *   the data     each tensor's bytes, row-major, little-endian
 *
 * The reader validates everything before any tensor is read and names the file and the
 * tensor: a header longer than the file or not a JSON object, an unknown dtype, a shape
 * whose size times the dtype's is not the tensor's bytes, offsets out of the data or
 * overlapping, data not covered by the tensors, a name given twice. It reads F32, F16
 * and BF16 into float32 (pread, one tensor, no copy of the file in memory).
 *
 * The writer writes F32: the header first (every tensor's name and shape given up
 * front, in that order in the data), then each tensor with pwrite, in any order.
 */
#ifndef PPDL_SAFETENSORS_H
#define PPDL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define PPDL_ST_MAX_DIMS 8

enum { PPDL_ST_F32, PPDL_ST_F16, PPDL_ST_BF16 };

typedef struct ppdl_st_tensor {
    char *name;
    int dtype;                       /* PPDL_ST_* */
    int ndim;
    int64_t shape[PPDL_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;             /* bytes, from the start of the data */
} ppdl_st_tensor;

typedef struct ppdl_st_file {
    char *path;
    int fd;
    int writing;
    uint64_t data_start;             /* 8 + header length */
    int n;
    ppdl_st_tensor *t;               /* [n] in header order (reader) or the writer's order */
} ppdl_st_file;

/* Open and validate path. -1 with a message naming the file (and the tensor). */
int ppdl_st_open(const char *path, ppdl_st_file *f, char *err, size_t errlen);
/* the tensor called name, or NULL */
const ppdl_st_tensor *ppdl_st_find(const ppdl_st_file *f, const char *name);
/* name of dtype d: "F32", "F16", "BF16" */
const char *ppdl_st_dtype_name(int d);
/* Read tensor t into out[t->numel] as float32. Fails on a short read and on a
 * non-finite value, naming the file and the tensor. */
int ppdl_st_read(const ppdl_st_file *f, const ppdl_st_tensor *t, float *out, char *err, size_t errlen);

/* Create path (truncated) for n F32 tensors, names[i] of ndims[i] dims shapes[i][..],
 * laid out in this order; writes the header. The caller writes every tensor with
 * ppdl_st_write and ends with ppdl_st_close_write. */
int ppdl_st_create(const char *path, ppdl_st_file *f, int n, char *const *names, const int *ndims,
                   const int64_t (*shapes)[PPDL_ST_MAX_DIMS], char *err, size_t errlen);
int ppdl_st_write(ppdl_st_file *f, int i, const float *data, char *err, size_t errlen);
/* fsync and close a file being written; -1 (with a message) if either fails */
int ppdl_st_close_write(ppdl_st_file *f, char *err, size_t errlen);
/* release everything (a reader, or a writer after an error: the file stays, the caller
 * removes it) */
void ppdl_st_close(ppdl_st_file *f);

#endif
