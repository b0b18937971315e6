/* h5util.h — the small HDF5 helpers the three file readers share (model.h5, data.h5,
 * checkpoints): an error context whose every message starts with the file name, handle
 * closing that is safe on -1, and the words and shapes used in messages.
 */
#ifndef PPDL_IO_H5UTIL_H
#define PPDL_IO_H5UTIL_H

#include "core/error.h"

#include <hdf5.h>
#include <stddef.h>

/* HDF5 knows the signature but cannot open the file: usually a truncated copy; rarely a
 * complete file on a file system without the locks HDF5 1.10 takes */
#define PPDL_H5_OPEN_FAILED "not an HDF5 file (or truncated); if the file is complete, its file " \
                            "system may lack locking: try HDF5_USE_FILE_LOCKING=FALSE"

/* where messages go: "<path>: <message>" into err[errlen] */
typedef struct ppdl_h5_ctx {
    const char *path;
    char *err;
    size_t errlen;
} ppdl_h5_ctx;

/* Formats "<path>: <fmt...>" into c->err; returns -1 (the readers' failure value). */
PPDL_PRINTF(2, 3) int ppdl_h5_fail(ppdl_h5_ctx *c, const char *fmt, ...);

/* Closes *h with closer (H5Aclose, H5Dclose, ...) when it is open, then sets it to -1. */
void ppdl_h5_close(hid_t *h, herr_t (*closer)(hid_t));

/* "int32", "uint8", "float64", "strings", ... for "expected X, found Y" messages */
const char *ppdl_h5_type_name(hid_t type, char *buf, size_t len);

/* "[192, 64]" */
void ppdl_h5_fmt_dims(char *buf, size_t len, int ndim, const hsize_t *dims);

/* Opens attribute `name` of obj and checks that it holds exactly one value; on failure
 * the message names `where` ("root", "/layers/00003", ...) and the attribute, and -1 is
 * returned with nothing left open. */
hid_t ppdl_h5_open_scalar_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name);

/* Are the paths a and b (from loc) the same object, as an HDF5 hard link makes them
 * (h5py: f[a] == f[b])? 1 yes, 0 no, -1 when either is missing or cannot be read. */
int ppdl_h5_same_object(hid_t loc, const char *a, const char *b);

#endif
