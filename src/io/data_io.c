/* data_io.c — read and write data.h5 (layout and contract: data_io.h, docs/formats.md).
 *
 * Plain serial HDF5. ppdl_data_open checks the file against the model once (the kind
 * of data for the family, shapes, dtypes, N >= 1); ppdl_data_read then reads `count`
 * consecutive samples with one hyperslab, or two when the range wraps past N, and
 * checks every token or label against its range, naming the file, dataset and row.
 *
 * dtypes: tokens and labels may be stored as any integer type (ppdl-data writes tokens
 * as uint16 where vocab_size <= 65536, else int32, and labels as int32; numpy's default
 * int64 is accepted and range-checked after conversion);
 * features and images as float32 (or float64, converted on reading).
 */
#include "io/data_io.h"
#include "io/h5util.h"
#include "core/error.h"
#include "core/util.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ------------------------------------------------------------------------------------ */
/* messages start with the file name */
#define FAIL(...) ppdl_h5_fail(&(ppdl_h5_ctx){path, err, errlen}, __VA_ARGS__)

static const char *article(const char *family) { return !strcmp(family, "mlp") ? "an" : "a"; }

/* Open dataset `name`, check its type class (H5T_INTEGER or H5T_FLOAT) and fetch its
 * shape. Returns the dataset or -1 with a message. */
static hid_t open_dataset(const char *path, hid_t f, const char *name, H5T_class_t want_class,
                          const char *want_type, int *ndim, hsize_t *dims, char *err, size_t errlen)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), type = -1, space = -1;
    if (d < 0) {
        FAIL("/%s is not a dataset", name);
        return -1;
    }
    type = H5Dget_type(d);
    if (type < 0 || H5Tget_class(type) != want_class) {
        char tn[64] = "an unreadable type";
        if (type >= 0) ppdl_h5_type_name(type, tn, sizeof tn);
        FAIL("/%s must hold %s, found %s", name, want_type, tn);
        goto bad;
    }
    space = H5Dget_space(d);
    *ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (*ndim < 0 || *ndim > H5S_MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        FAIL("/%s: cannot read its shape", name);
        goto bad;
    }
    ppdl_h5_close(&space, H5Sclose);
    ppdl_h5_close(&type, H5Tclose);
    return d;
bad:
    ppdl_h5_close(&space, H5Sclose);
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&d, H5Dclose);
    return -1;
}

static int read_vocab_attr(const char *path, hid_t f, long long *v, char *err, size_t errlen)
{
    if (H5Aexists(f, "vocab_size") <= 0)
        return FAIL("root attribute 'vocab_size' is missing (the number of distinct tokens)");
    int rc = -1;
    hid_t a = H5Aopen(f, "vocab_size", H5P_DEFAULT), type = -1, space = -1;
    if (a < 0) return FAIL("root attribute 'vocab_size' cannot be opened");
    type = H5Aget_type(a);
    space = H5Aget_space(a);
    if (type < 0 || H5Tget_class(type) != H5T_INTEGER) {
        FAIL("root attribute 'vocab_size' must be an integer");
        goto out;
    }
    if (space < 0 || H5Sget_simple_extent_npoints(space) != 1) {
        FAIL("root attribute 'vocab_size' must hold one value");
        goto out;
    }
    if (H5Aread(a, H5T_NATIVE_LLONG, v) < 0) {
        FAIL("root attribute 'vocab_size' cannot be read");
        goto out;
    }
    rc = 0;
out:
    ppdl_h5_close(&space, H5Sclose);
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&a, H5Aclose);
    return rc;
}

static int has_link(hid_t f, const char *name) { return H5Lexists(f, name, H5P_DEFAULT) > 0; }

/* ------------------------------------------------------------------------------------ */
/* opening: check the data against the model */

static int open_tokens(const char *path, hid_t f, const ppdl_model *m, ppdl_data *d, char *err,
                       size_t errlen)
{
    if (strcmp(m->family, "gpt"))
        return FAIL("holds tokens (language modelling) but the model is %s %s (it needs %s)",
                    article(m->family), m->family, !strcmp(m->family, "mlp") ? "features" : "images");
    int ndim;
    hsize_t dims[H5S_MAX_RANK];
    hid_t ds = open_dataset(path, f, "tokens", H5T_INTEGER, "integer tokens (int32)", &ndim, dims, err, errlen);
    if (ds < 0) return -1;
    H5Dclose(ds);
    if (ndim != 2) return FAIL("/tokens must be 2-D [N, seq_len+1], found %d dimensions", ndim);
    if (dims[0] == 0) return FAIL("/tokens holds no samples (N = 0)");
    if (dims[1] != (hsize_t)m->seq_len + 1)
        return FAIL("/tokens rows hold %llu tokens (seq_len %lld) but the model's seq_len is %d "
                    "(rows must hold seq_len+1 = %d; remake the data with ppdl-data text --seq-len %d)",
                    (unsigned long long)dims[1], (long long)dims[1] - 1, m->seq_len, m->seq_len + 1,
                    m->seq_len);
    long long vocab;
    if (read_vocab_attr(path, f, &vocab, err, errlen)) return -1;
    if (vocab < 1) return FAIL("root attribute 'vocab_size' is %lld, expected >= 1", vocab);
    if (vocab > m->vocab_size)
        return FAIL("vocab_size %lld is larger than the model's (%d)", vocab, m->vocab_size);
    d->kind = PPDL_DATA_TOKENS;
    d->n = (long)dims[0];
    d->T = m->seq_len;
    d->vocab_size = (int)vocab;
    return 0;
}

static int open_classif(const char *path, hid_t f, const char *name, const ppdl_model *m, ppdl_data *d,
                        char *err, size_t errlen)
{
    int images = !strcmp(name, "images");
    if (!strcmp(m->family, "gpt"))
        return FAIL("holds %s (classification) but the model is a gpt (it needs tokens)", name);
    int ndim;
    hsize_t dims[H5S_MAX_RANK];
    char got[128];
    hid_t ds = open_dataset(path, f, name, H5T_FLOAT, "float32 values", &ndim, dims, err, errlen);
    if (ds < 0) return -1;
    H5Dclose(ds);
    ppdl_h5_fmt_dims(got, sizeof got, ndim, dims);
    if (ndim != (images ? 4 : 2))
        return FAIL("/%s must be %s, found shape %s", name, images ? "[N, C, H, W]" : "[N, D]", got);
    if (dims[0] == 0) return FAIL("/%s holds no samples (N = 0)", name);
    hsize_t per_sample = 1;
    for (int i = 1; i < ndim; i++) per_sample *= dims[i];
    if (!strcmp(m->family, "mlp")) {
        /* an mlp takes D = in_features; images flatten row-major into exactly that */
        if (per_sample != (hsize_t)m->in_features)
            return FAIL("/%s has shape %s: %llu values per sample, but the mlp's in_features is %d", name,
                        got, (unsigned long long)per_sample, m->in_features);
    } else {
        if (!images)
            return FAIL("holds features [N, D] but the model is a cnn: it needs images [N, %d, %d, %d] "
                        "(ppdl-data csv --image %d,%d,%d)", m->in_channels, m->height, m->width,
                        m->in_channels, m->height, m->width);
        if (dims[1] != (hsize_t)m->in_channels || dims[2] != (hsize_t)m->height ||
            dims[3] != (hsize_t)m->width)
            return FAIL("/images has shape %s but the cnn takes [N, %d, %d, %d] (in_channels, height, width)",
                        got, m->in_channels, m->height, m->width);
    }
    if (!has_link(f, "labels")) return FAIL("/labels is missing (int32 [N], one class per sample)");
    int lnd;
    hsize_t ldims[H5S_MAX_RANK];
    ds = open_dataset(path, f, "labels", H5T_INTEGER, "integer class ids (int32)", &lnd, ldims, err, errlen);
    if (ds < 0) return -1;
    H5Dclose(ds);
    if (lnd != 1 || ldims[0] != dims[0]) {
        ppdl_h5_fmt_dims(got, sizeof got, lnd, ldims);
        return FAIL("/labels has shape %s but /%s holds %llu samples (expected [%llu])", got, name,
                    (unsigned long long)dims[0], (unsigned long long)dims[0]);
    }
    d->kind = images ? PPDL_DATA_IMAGES : PPDL_DATA_FEATURES;
    d->n = (long)dims[0];
    d->sample_floats = (long)per_sample;
    return 0;
}

int ppdl_data_open(const char *path, const ppdl_model *m, ppdl_data *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->file = -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (strlen(path) >= sizeof d->path) return FAIL("path too long");
    snprintf(d->path, sizeof d->path, "%s", path);
    if (access(path, R_OK) != 0) return FAIL("cannot read: %s", strerror(errno));
    if (H5Fis_hdf5(path) <= 0) return FAIL("not an HDF5 file (or truncated)");
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return FAIL("%s", PPDL_H5_OPEN_FAILED);

    const char *names[3] = {"tokens", "features", "images"};
    int found[3], n_found = 0, rc;
    for (int i = 0; i < 3; i++) n_found += found[i] = has_link(f, names[i]);
    if (n_found == 0) {
        rc = has_link(f, "layers")
                 ? FAIL("this is a model file, not data (make data with ppdl-data)")
                 : FAIL("holds none of the datasets tokens, features or images (make one with ppdl-data)");
    } else if (n_found > 1) {
        rc = FAIL("holds more than one of tokens, features and images; keep one");
    } else if (found[0]) {
        rc = open_tokens(path, f, m, d, err, errlen);
    } else {
        rc = open_classif(path, f, found[1] ? "features" : "images", m, d, err, errlen);
    }
    if (rc) {
        H5Fclose(f);
        d->kind = 0;
        return -1;
    }
    d->file = (long long)f;
    d->n_classes = ppdl_model_classes(m);
    return 0;
}

void ppdl_data_close(ppdl_data *d)
{
    if (d->file >= 0) H5Fclose((hid_t)d->file);
    d->file = -1;
}

/* ------------------------------------------------------------------------------------ */
/* reading */

/* Read rows [row0, row0+rows) of a dataset whose samples have `per_row` values into buf
 * (memory type mem_type). */
static int read_rows(const char *path, hid_t ds, const char *name, int ndim, long row0, long rows,
                     hid_t mem_type, void *buf, char *err, size_t errlen)
{
    hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
    hid_t fspace = H5Dget_space(ds), mspace = -1;
    int rc = -1;
    if (fspace < 0 || H5Sget_simple_extent_dims(fspace, count, NULL) < 0) goto out;
    start[0] = (hsize_t)row0;
    count[0] = (hsize_t)rows;
    if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0) goto out;
    mspace = H5Screate_simple(ndim, count, NULL);
    if (mspace < 0) goto out;
    if (H5Dread(ds, mem_type, mspace, fspace, H5P_DEFAULT, buf) < 0) goto out;
    rc = 0;
out:
    ppdl_h5_close(&mspace, H5Sclose);
    ppdl_h5_close(&fspace, H5Sclose);
    if (rc) FAIL("/%s: cannot read rows %ld..%ld (damaged file?)", name, row0, row0 + rows - 1);
    return rc;
}

/* rows [row0, row0+rows) of /tokens into inputs/targets at sample offset `at` */
static int read_tokens(ppdl_data *d, hid_t ds, long row0, long rows, long at, int32_t *inputs,
                       int32_t *targets, char *err, size_t errlen)
{
    const char *path = d->path;
    int T = d->T;
    int32_t *buf = ppdl_xmalloc((size_t)rows * (size_t)(T + 1) * sizeof *buf); /* [rows, T+1] */
    int rc = read_rows(path, ds, "tokens", 2, row0, rows, H5T_NATIVE_INT32, buf, err, errlen);
    for (long r = 0; r < rows && !rc; r++) {
        const int32_t *row = buf + (size_t)r * (T + 1);
        for (int t = 0; t <= T; t++)
            if (row[t] < 0 || row[t] >= d->vocab_size) {
                rc = FAIL("/tokens row %ld, position %d: token %d is outside [0, %d) (vocab_size)",
                          row0 + r, t, row[t], d->vocab_size);
                break;
            }
        if (rc) break;
        if (inputs) memcpy(inputs + (size_t)(at + r) * T, row, (size_t)T * sizeof *row);
        if (targets) memcpy(targets + (size_t)(at + r) * T, row + 1, (size_t)T * sizeof *row);
    }
    free(buf);
    return rc;
}

/* rows [row0, row0+rows) of /features or /images and /labels */
static int read_classif(ppdl_data *d, hid_t xs, hid_t ls, long row0, long rows, long at, float *inputs,
                        int32_t *targets, char *err, size_t errlen)
{
    const char *path = d->path;
    const char *name = d->kind == PPDL_DATA_IMAGES ? "images" : "features";
    int ndim = d->kind == PPDL_DATA_IMAGES ? 4 : 2;
    if (inputs) {
        float *x = inputs + (size_t)at * d->sample_floats; /* [rows, sample_floats] */
        if (read_rows(path, xs, name, ndim, row0, rows, H5T_NATIVE_FLOAT, x, err, errlen)) return -1;
        for (size_t i = 0; i < (size_t)rows * d->sample_floats; i++)
            if (!isfinite(x[i]))
                return FAIL("/%s row %ld holds a non-finite value at position %zu", name,
                            row0 + (long)(i / d->sample_floats), i % d->sample_floats);
    }
    if (targets) {
        int32_t *y = targets + at;
        if (read_rows(path, ls, "labels", 1, row0, rows, H5T_NATIVE_INT32, y, err, errlen)) return -1;
        for (long r = 0; r < rows; r++)
            if (y[r] < 0 || y[r] >= d->n_classes)
                return FAIL("/labels row %ld: label %d is outside [0, %d) (the model's classes)", row0 + r,
                            y[r], d->n_classes);
    }
    return 0;
}

/* Read `count` samples into inputs/targets: rows[0..count-1] when rows is given, else
 * the rows from `start` on (wrapping mod N). Consecutive rows are read with one
 * hyperslab each stretch. */
static int read_samples(ppdl_data *d, long start, const long *rows, int count, void *inputs, int32_t *targets,
                        char *err, size_t errlen)
{
    const char *path = d->path;
    if (d->file < 0 || d->n < 1) return FAIL("data file is not open");
    if (count < 0) return FAIL("cannot read %d samples", count);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = (hid_t)d->file, xs = -1, ls = -1;
    const char *xname = d->kind == PPDL_DATA_TOKENS ? "tokens" : d->kind == PPDL_DATA_IMAGES ? "images" : "features";
    int rc = -1;
    xs = H5Dopen2(f, xname, H5P_DEFAULT);
    if (xs < 0) {
        FAIL("/%s cannot be opened", xname);
        goto out;
    }
    if (d->kind != PPDL_DATA_TOKENS && (ls = H5Dopen2(f, "labels", H5P_DEFAULT)) < 0) {
        FAIL("/labels cannot be opened");
        goto out;
    }
    long pos = start % d->n;
    if (pos < 0) pos += d->n;
    for (long done = 0; done < count;) {
        long n_rows;
        if (rows) { /* the longest run of consecutive rows of the list */
            pos = rows[done];
            if (pos < 0 || pos >= d->n) {
                FAIL("row %ld is outside 0..%ld", pos, d->n - 1);
                goto out;
            }
            for (n_rows = 1; done + n_rows < count && rows[done + n_rows] == pos + n_rows; n_rows++) {}
        } else { /* up to the end of the file's rows: two stretches when wrapping once */
            n_rows = count - done < d->n - pos ? count - done : d->n - pos;
        }
        int st = d->kind == PPDL_DATA_TOKENS
                     ? read_tokens(d, xs, pos, n_rows, done, inputs, targets, err, errlen)
                     : read_classif(d, xs, ls, pos, n_rows, done, inputs, targets, err, errlen);
        if (st) goto out;
        done += n_rows;
        pos = 0;
    }
    rc = 0;
out:
    ppdl_h5_close(&ls, H5Dclose);
    ppdl_h5_close(&xs, H5Dclose);
    return rc;
}

int ppdl_data_read(ppdl_data *d, long start, int count, void *inputs, int32_t *targets, char *err,
                   size_t errlen)
{
    return read_samples(d, start, NULL, count, inputs, targets, err, errlen);
}

int ppdl_data_read_rows(ppdl_data *d, const long *rows, int count, void *inputs, int32_t *targets, char *err,
                        size_t errlen)
{
    return read_samples(d, 0, rows, count, inputs, targets, err, errlen);
}

/* ------------------------------------------------------------------------------------ */
/* writing: path.tmp, then rename */

static int write_dataset(hid_t f, const char *name, hid_t file_type, hid_t mem_type, int ndim,
                         const hsize_t *dims, const void *buf)
{
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = space >= 0 ? H5Dcreate2(f, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int rc = ds >= 0 && H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 ? 0 : -1;
    ppdl_h5_close(&ds, H5Dclose);
    ppdl_h5_close(&space, H5Sclose);
    return rc;
}

static int write_root_attr(hid_t f, const char *name, hid_t file_type, hid_t mem_type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = space >= 0 ? H5Acreate2(f, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int rc = a >= 0 && H5Awrite(a, mem_type, v) >= 0 ? 0 : -1;
    ppdl_h5_close(&a, H5Aclose);
    ppdl_h5_close(&space, H5Sclose);
    return rc;
}

/* ppdl_format = "ppdl-data" (variable-length UTF-8, as h5py writes), ppdl_version = 1 */
static int write_header(hid_t f)
{
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    H5Tset_cset(str, H5T_CSET_UTF8);
    const char *fmt = "ppdl-data";
    int one = 1;
    int rc = write_root_attr(f, "ppdl_format", str, str, &fmt);
    H5Tclose(str);
    return rc ? rc : write_root_attr(f, "ppdl_version", H5T_STD_I32LE, H5T_NATIVE_INT, &one);
}

/* create path.tmp (tmp[tmplen] receives its name) as an HDF5 file with the ppdl-data
 * header; -1 with a message, nothing left behind */
static hid_t create_tmp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (snprintf(tmp, tmplen, "%s.tmp", path) >= (int)tmplen) return FAIL("path too long");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* for errno's reason */
    if (fd < 0) return FAIL("cannot create %s: %s", tmp, strerror(errno));
    close(fd);
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        unlink(tmp);
        return FAIL("cannot create %s as an HDF5 file", tmp);
    }
    if (write_header(f)) {
        H5Fclose(f);
        unlink(tmp);
        return FAIL("cannot write %s (disk full?)", tmp);
    }
    return f;
}

typedef int (*write_body_fn)(hid_t f, const void *ctx);

/* create path.tmp, let body fill it, close, rename; on failure remove path.tmp */
static int write_file(const char *path, write_body_fn body, const void *ctx, char *err, size_t errlen)
{
    char tmp[4096 + 8];
    hid_t f = create_tmp(path, tmp, sizeof tmp, err, errlen);
    if (f < 0) return -1;
    int rc = body(f, ctx) ? -1 : 0;
    if (H5Fclose(f) < 0) rc = -1;
    if (rc) FAIL("cannot write %s (disk full?)", tmp);
    if (!rc && rename(tmp, path) != 0) rc = FAIL("cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

/* ---- tokens, a piece at a time ---- */

struct ppdl_tokens_out {
    char path[4096], tmp[4096 + 8];
    hid_t file, ds;
    long n;
    int T;
    int narrow;                /* 1: stored as uint16 (vocab_size <= 65536) */
    uint16_t *u16;             /* the rows narrowed for one write, u16_cap tokens */
    size_t u16_cap;
};

/* Token ids of a vocabulary of at most 65536 fit in uint16: half the bytes of int32 on
 * disk and to write (GPT-2's 50257 does; Llama 3's 128256 stays int32). Readers take any
 * integer type, so the choice is the writer's. */
#define TOKENS_U16_MAX_VOCAB 65536

/* rows per HDF5 chunk: about 256 KiB (small enough for HDF5's 1 MiB chunk cache when
 * training reads a few rows of a compressed file), at least one row */
static long chunk_rows(long n, int T, int narrow)
{
    long r = (256L << 10) / (((long)T + 1) * (narrow ? 2 : 4));
    return r < 1 ? 1 : r > n ? n : r;
}

long ppdl_tokens_out_chunk_rows(const ppdl_tokens_out *w) { return chunk_rows(w->n, w->T, w->narrow); }

ppdl_tokens_out *ppdl_tokens_out_begin(const char *path, long n, int T, int vocab_size, int compress,
                                       char *err, size_t errlen)
{
    if (n < 1 || T < 1 || vocab_size < 1) {
        FAIL("not written: need N >= 1 rows, T >= 1 and vocab_size >= 1 (got %ld, %d, %d)", n, T, vocab_size);
        return NULL;
    }
    if (compress > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) {
        FAIL("not written: this HDF5 library has no gzip (deflate) filter for the compression asked for");
        return NULL;
    }
    if (strlen(path) >= sizeof ((ppdl_tokens_out *)0)->path) {
        FAIL("path too long");
        return NULL;
    }
    ppdl_tokens_out *w = ppdl_xcalloc(1, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->n = n;
    w->T = T;
    w->narrow = vocab_size <= TOKENS_U16_MAX_VOCAB;
    w->ds = -1;
    w->file = create_tmp(path, w->tmp, sizeof w->tmp, err, errlen);
    if (w->file < 0) {
        free(w);
        return NULL;
    }
    /* contiguous unless compressed: each write is then one pwrite of the rows, with no
     * pass through HDF5's chunk cache */
    hsize_t dims[2] = {(hsize_t)n, (hsize_t)T + 1}, chunk[2] = {(hsize_t)chunk_rows(n, T, w->narrow), (hsize_t)T + 1};
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = space >= 0 && dcpl >= 0 && H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
             (compress <= 0 || (H5Pset_chunk(dcpl, 2, chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0 &&
                                H5Pset_deflate(dcpl, (unsigned)compress) >= 0));
    if (ok)
        w->ds = H5Dcreate2(w->file, "tokens", w->narrow ? H5T_STD_U16LE : H5T_STD_I32LE, space, H5P_DEFAULT, dcpl,
                           H5P_DEFAULT);
    ppdl_h5_close(&dcpl, H5Pclose);
    ppdl_h5_close(&space, H5Sclose);
    if (w->ds < 0 || write_root_attr(w->file, "vocab_size", H5T_STD_I32LE, H5T_NATIVE_INT, &vocab_size)) {
        FAIL("cannot write %s (disk full?)", w->tmp);
        ppdl_tokens_out_discard(w);
        return NULL;
    }
    return w;
}

int ppdl_tokens_out_rows(ppdl_tokens_out *w, long row0, long rows, const int32_t *tok, char *err,
                         size_t errlen)
{
    const char *path = w->path;
    if (row0 < 0 || rows < 1 || row0 + rows > w->n || w->ds < 0)
        return FAIL("internal: rows %ld..%ld of %ld", row0, row0 + rows - 1, w->n);
    hsize_t start[2] = {(hsize_t)row0, 0}, count[2] = {(hsize_t)rows, (hsize_t)w->T + 1};
    const void *buf = tok;
    hid_t mtype = H5T_NATIVE_INT32;
    if (w->narrow) {  /* narrowed here, not by HDF5's conversion: one pass, no scratch of its own */
        size_t k = (size_t)rows * (size_t)(w->T + 1);
        if (k > w->u16_cap) {
            free(w->u16);
            w->u16 = ppdl_xmalloc(k * sizeof *w->u16);
            w->u16_cap = k;
        }
        for (size_t i = 0; i < k; i++) {
            if ((uint32_t)tok[i] >= TOKENS_U16_MAX_VOCAB)
                return FAIL("internal: token %d of row %ld does not fit the uint16 dataset", tok[i],
                            row0 + (long)(i / (size_t)(w->T + 1)));
            w->u16[i] = (uint16_t)tok[i];
        }
        buf = w->u16;
        mtype = H5T_NATIVE_UINT16;
    }
    hid_t fspace = H5Dget_space(w->ds), mspace = H5Screate_simple(2, count, NULL);
    int rc = fspace >= 0 && mspace >= 0 &&
                     H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
                     H5Dwrite(w->ds, mtype, mspace, fspace, H5P_DEFAULT, buf) >= 0
                 ? 0
                 : -1;
    ppdl_h5_close(&mspace, H5Sclose);
    ppdl_h5_close(&fspace, H5Sclose);
    if (rc) FAIL("cannot write %s (disk full?)", w->tmp);
    return rc;
}

int ppdl_tokens_out_close(ppdl_tokens_out *w, char *err, size_t errlen)
{
    const char *path = w->path;
    int rc = 0;
    if (w->ds >= 0 && H5Dclose(w->ds) < 0) rc = -1;
    if (w->file >= 0 && H5Fclose(w->file) < 0) rc = -1;
    w->ds = w->file = -1;
    if (rc) FAIL("cannot write %s (disk full?)", w->tmp);
    return rc;
}

int ppdl_tokens_out_commit(ppdl_tokens_out *w, char *err, size_t errlen)
{
    const char *path = w->path;
    int rc = w->file >= 0 ? FAIL("internal: committed before it was closed") : 0;
    if (!rc && rename(w->tmp, w->path) != 0)
        rc = FAIL("cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
    if (rc) ppdl_tokens_out_discard(w);
    else {
        free(w->u16);
        free(w);
    }
    return rc;
}

void ppdl_tokens_out_discard(ppdl_tokens_out *w)
{
    if (!w) return;
    ppdl_h5_close(&w->ds, H5Dclose);
    ppdl_h5_close(&w->file, H5Fclose);
    unlink(w->tmp);
    free(w->u16);
    free(w);
}

int ppdl_data_write_tokens(const char *path, const int32_t *tokens, long n, int T, int vocab_size,
                           char *err, size_t errlen)
{
    if (n < 1 || T < 1 || vocab_size < 1)
        return FAIL("not written: need N >= 1 rows, T >= 1 and vocab_size >= 1 (got %ld, %d, %d)", n, T,
                    vocab_size);
    size_t total = (size_t)n * (size_t)(T + 1);
    for (size_t i = 0; i < total; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab_size)
            return FAIL("not written: token %d at row %zu is outside [0, %d)", tokens[i], i / (size_t)(T + 1),
                        vocab_size);
    ppdl_tokens_out *w = ppdl_tokens_out_begin(path, n, T, vocab_size, 0, err, errlen);
    if (!w) return -1;
    if (ppdl_tokens_out_rows(w, 0, n, tokens, err, errlen) || ppdl_tokens_out_close(w, err, errlen)) {
        ppdl_tokens_out_discard(w);
        return -1;
    }
    return ppdl_tokens_out_commit(w, err, errlen);
}

typedef struct classif_ctx {
    const float *x;
    const int32_t *labels;
    long n;
    int ndim;
    const long *shape;
} classif_ctx;

static int classif_body(hid_t f, const void *p)
{
    const classif_ctx *c = p;
    hsize_t dims[4] = {(hsize_t)c->n, 0, 0, 0}, ldims[1] = {(hsize_t)c->n};
    for (int i = 0; i < c->ndim; i++) dims[1 + i] = (hsize_t)c->shape[i];
    const char *name = c->ndim == 3 ? "images" : "features";
    return write_dataset(f, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1 + c->ndim, dims, c->x) ||
           write_dataset(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, ldims, c->labels);
}

int ppdl_data_write_classif(const char *path, const float *x, const int32_t *labels, long n, int ndim,
                            const long *sample_shape, char *err, size_t errlen)
{
    if (ndim != 1 && ndim != 3)
        return FAIL("not written: a sample is [D] (features) or [C, H, W] (images), not %d-D", ndim);
    if (n < 1) return FAIL("not written: no samples");
    size_t per = 1;
    for (int i = 0; i < ndim; i++) {
        if (sample_shape[i] < 1) return FAIL("not written: sample dimension %d is %ld", i, sample_shape[i]);
        per *= (size_t)sample_shape[i];
    }
    for (long i = 0; i < n; i++)
        if (labels[i] < 0) return FAIL("not written: label %d of sample %ld is negative", labels[i], i);
    for (size_t i = 0; i < (size_t)n * per; i++)
        if (!isfinite(x[i]))
            return FAIL("not written: sample %zu holds a non-finite value at position %zu", i / per, i % per);
    classif_ctx c = {x, labels, n, ndim, sample_shape};
    return write_file(path, classif_body, &c, err, errlen);
}
