/* safetensors.c — see safetensors.h. */
#include "config.h"

#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"

/* a header larger than this is refused before it is read (GPT-2 XL's is ~60 KB) */
#define MAX_HEADER (100u << 20)

static const char *const dtype_names[] = {"F32", "F16", "BF16"};
static const size_t dtype_bytes[] = {4, 2, 2};

const char *ppdl_st_dtype_name(int d)
{
    return d >= 0 && d < 3 ? dtype_names[d] : "?";
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ppdl_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void ppdl_st_close(ppdl_st_file *f)
{
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->path);
    f->t = NULL;
    f->path = NULL;
    f->n = 0;
}

const ppdl_st_tensor *ppdl_st_find(const ppdl_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

static int by_begin(const void *a, const void *b)
{
    const ppdl_st_tensor *x = *(ppdl_st_tensor *const *)a, *y = *(ppdl_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* one tensor's entry of the header */
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_len, ppdl_st_tensor *t,
                       char *err, size_t errlen)
{
    if (!json_is_object(v)) return ppdl_errf(err, errlen, "%s: tensor %s: its header entry is not a JSON object", path, name);
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return ppdl_errf(err, errlen, "%s: tensor %s: unknown field \"%s\" (expected dtype, shape, data_offsets)",
                             path, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return ppdl_errf(err, errlen, "%s: tensor %s: dtype missing or not a string", path, name);
    t->dtype = -1;
    for (int d = 0; d < 3; d++)
        if (!strcmp(json_string_value(dt), dtype_names[d])) t->dtype = d;
    if (t->dtype < 0)
        return ppdl_errf(err, errlen, "%s: tensor %s: dtype %s is not one ppdl reads (F32, F16, BF16)", path, name,
                         json_string_value(dt));
    if (!json_is_array(sh) || json_array_size(sh) > PPDL_ST_MAX_DIMS)
        return ppdl_errf(err, errlen, "%s: tensor %s: shape missing, not an array or over %d dimensions", path, name,
                         PPDL_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1LL << 40))
            return ppdl_errf(err, errlen, "%s: tensor %s: shape[%d] is not an integer in [0, 2^40]", path, name, i);
        t->shape[i] = json_integer_value(d);
        t->numel *= (uint64_t)t->shape[i];
        if (t->numel > (1ULL << 40))
            return ppdl_errf(err, errlen, "%s: tensor %s: over 2^40 elements", path, name);
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)))
        return ppdl_errf(err, errlen, "%s: tensor %s: data_offsets is not [begin, end]", path, name);
    json_int_t b = json_integer_value(json_array_get(off, 0)), e = json_integer_value(json_array_get(off, 1));
    if (b < 0 || e < b || (uint64_t)e > data_len)
        return ppdl_errf(err, errlen, "%s: tensor %s: data_offsets [%lld, %lld] out of the data's %llu bytes", path,
                         name, (long long)b, (long long)e, (unsigned long long)data_len);
    t->begin = (uint64_t)b, t->end = (uint64_t)e;
    if (t->end - t->begin != t->numel * dtype_bytes[t->dtype])
        return ppdl_errf(err, errlen, "%s: tensor %s: shape and dtype give %llu bytes, data_offsets %llu", path, name,
                         (unsigned long long)(t->numel * dtype_bytes[t->dtype]),
                         (unsigned long long)(t->end - t->begin));
    return 0;
}

static int open_checked(const char *path, ppdl_st_file *f, char *err, size_t errlen)
{
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return ppdl_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) || !S_ISREG(st.st_mode)) return ppdl_errf(err, errlen, "%s: not a regular file", path);
    uint64_t size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (size < 8 || ppdl_pread_all(f->fd, len8, 8, 0))
        return ppdl_errf(err, errlen, "%s: shorter than the 8-byte header length of a safetensors file", path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    if (n > size - 8)
        return ppdl_errf(err, errlen, "%s: header length %llu is longer than the file (%llu bytes after it)", path,
                         (unsigned long long)n, (unsigned long long)(size - 8));
    if (n > MAX_HEADER || n < 2)
        return ppdl_errf(err, errlen, "%s: header length %llu is not plausible (2 .. %u)", path, (unsigned long long)n,
                         MAX_HEADER);
    char *h = ppdl_xmalloc(n);
    if (ppdl_pread_all(f->fd, h, n, 8)) {
        free(h);
        return ppdl_errf(err, errlen, "%s: cannot read the header", path);
    }
    json_error_t je;
    json_t *root = json_loadb(h, n, JSON_REJECT_DUPLICATES, &je);
    free(h);
    if (!root) {
        if (strstr(je.text, "duplicate"))
            return ppdl_errf(err, errlen, "%s: header: a tensor name given twice (%s)", path, je.text);
        return ppdl_errf(err, errlen, "%s: header is not JSON: %s (byte %d)", path, je.text, je.position);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return ppdl_errf(err, errlen, "%s: header is not a JSON object", path);
    }
    f->data_start = 8 + n;
    uint64_t data_len = size - f->data_start;
    f->t = ppdl_xcalloc(json_object_size(root) + 1, sizeof *f->t);
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                rc = ppdl_errf(err, errlen, "%s: __metadata__ is not a JSON object", path);
                break;
            }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) rc = ppdl_errf(err, errlen, "%s: __metadata__ %s is not a string", path, mk);
            }
            if (rc) break;
            continue;
        }
        ppdl_st_tensor *t = &f->t[f->n];
        if ((rc = parse_entry(path, key, v, data_len, t, err, errlen))) break;
        t->name = xstrdup(key);
        f->n++;
    }
    json_decref(root);
    if (rc) return -1;
    /* the tensors tile the data: sorted by offset, each begins where the one before ends */
    ppdl_st_tensor **s = ppdl_xmalloc(((size_t)f->n + 1) * sizeof *s);
    for (int i = 0; i < f->n; i++) s[i] = &f->t[i];
    qsort(s, (size_t)f->n, sizeof *s, by_begin);
    uint64_t at = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        if (s[i]->begin < at)
            rc = ppdl_errf(err, errlen, "%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s's", path, s[i]->name,
                           (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end, s[i - 1]->name);
        else if (s[i]->begin > at)
            rc = ppdl_errf(err, errlen, "%s: bytes %llu .. %llu of the data belong to no tensor (before tensor %s)",
                           path, (unsigned long long)at, (unsigned long long)s[i]->begin, s[i]->name);
        at = s[i]->end;
    }
    if (!rc && at != data_len)
        rc = ppdl_errf(err, errlen, "%s: bytes %llu .. %llu of the data belong to no tensor (after the last)", path,
                       (unsigned long long)at, (unsigned long long)data_len);
    free(s);
    return rc;
}

int ppdl_st_open(const char *path, ppdl_st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = xstrdup(path);
    if (open_checked(path, f, err, errlen)) {
        ppdl_st_close(f);
        return -1;
    }
    return 0;
}

/* a float from its bits (io/ may not include backend/bf16.h: the Layout's one-way rule) */
static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return f32_of_bits(s | 0x7f800000u | m << 13);
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* subnormal (or zero): m * 2^-24, exact in float */
        return s ? -v : v;
    }
    return f32_of_bits(s | (e + 112) << 23 | m << 13);
}

int ppdl_st_read(const ppdl_st_file *f, const ppdl_st_tensor *t, float *out, char *err, size_t errlen)
{
    size_t bytes = (size_t)(t->end - t->begin);
    unsigned char *buf = t->dtype == PPDL_ST_F32 ? (unsigned char *)out : ppdl_xmalloc(bytes ? bytes : 1);
    if (ppdl_pread_all(f->fd, buf, bytes, f->data_start + t->begin)) {
        if (buf != (unsigned char *)out) free(buf);
        return ppdl_errf(err, errlen, "%s: tensor %s: cannot read its %zu bytes", f->path, t->name, bytes);
    }
    /* little-endian on disk, as on every host ppdl builds for */
    if (t->dtype != PPDL_ST_F32) {
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
            out[i] = t->dtype == PPDL_ST_F16 ? f16_to_f32(h) : f32_of_bits((uint32_t)h << 16);
        }
        free(buf);
    }
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(out[i]))
            return ppdl_errf(err, errlen, "%s: tensor %s: element %zu is not finite (%g)", f->path, t->name, i,
                             (double)out[i]);
    return 0;
}

int ppdl_st_create(const char *path, ppdl_st_file *f, int n, char *const *names, const int *ndims,
                   const int64_t (*shapes)[PPDL_ST_MAX_DIMS], char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->writing = 1;
    f->path = xstrdup(path);
    f->t = ppdl_xcalloc((size_t)n + 1, sizeof *f->t);
    json_t *root = json_object(), *meta = json_object();
    /* transformers' loader requires the format in the metadata ("pt": PyTorch tensors) */
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        ppdl_st_tensor *t = &f->t[i];
        t->name = xstrdup(names[i]);
        t->dtype = PPDL_ST_F32;
        t->ndim = ndims[i];
        t->numel = 1;
        json_t *sh = json_array(), *e = json_object();
        for (int d = 0; d < t->ndim; d++) {
            t->shape[d] = shapes[i][d];
            t->numel *= (uint64_t)shapes[i][d];
            json_array_append_new(sh, json_integer(shapes[i][d]));
        }
        t->begin = at;
        t->end = at += t->numel * 4;
        json_t *off = json_array();
        json_array_append_new(off, json_integer((json_int_t)t->begin));
        json_array_append_new(off, json_integer((json_int_t)t->end));
        json_object_set_new(e, "dtype", json_string("F32"));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets", off);
        json_object_set_new(root, t->name, e);
        f->n++;
    }
    char *h = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    size_t hl = strlen(h), padded = (hl + 7) / 8 * 8; /* the data 8-byte aligned, padded with spaces */
    unsigned char *buf = ppdl_xmalloc(8 + padded);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, h, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    free(h);
    f->data_start = 8 + padded;
    int rc = 0;
    f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) rc = ppdl_errf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    else if (ppdl_pwrite_all(f->fd, buf, 8 + padded, 0) || ftruncate(f->fd, (off_t)(f->data_start + at)))
        rc = ppdl_errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    free(buf);
    return rc;
}

int ppdl_st_write(ppdl_st_file *f, int i, const float *data, char *err, size_t errlen)
{
    const ppdl_st_tensor *t = &f->t[i];
    if (ppdl_pwrite_all(f->fd, data, (size_t)(t->end - t->begin), f->data_start + t->begin))
        return ppdl_errf(err, errlen, "%s: tensor %s: cannot write: %s", f->path, t->name, strerror(errno));
    return 0;
}

int ppdl_st_close_write(ppdl_st_file *f, char *err, size_t errlen)
{
    int rc = 0;
    if (fsync(f->fd)) rc = ppdl_errf(err, errlen, "%s: fsync: %s", f->path, strerror(errno));
    if (close(f->fd) && !rc) rc = ppdl_errf(err, errlen, "%s: close: %s", f->path, strerror(errno));
    f->fd = -1;
    ppdl_st_close(f);
    return rc;
}
