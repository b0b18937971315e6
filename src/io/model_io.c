/* model_io.c — read and write model.h5 (layout and contract: model_io.h, docs/formats.md).
 *
 * Plain serial HDF5 (default file access property list): every rank that needs the
 * weights opens the file read-only on its own. The reader trusts nothing in the file:
 * each attribute, dataset type and shape is checked against the chain that the root
 * hyperparameters give (ppdl_model_build), and every failure becomes one message that
 * names the file and the field, e.g.
 *   model.h5: /layers/00003/attn.qkv.weight: expected shape [192, 64], found [64, 64]
 * HDF5's own error stack printing is switched off so that message is all the user sees.
 *
 * Handles: every function closes what it opened, on every path (the `out:` labels).
 * Strings are written as variable-length UTF-8 (what h5py writes for a Python str);
 * both variable- and fixed-length strings are read.
 */
#include "io/model_io.h"
#include "io/h5util.h"
#include "core/error.h"
#include "core/util.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ------------------------------------------------------------------------------------ */
/* error context: every message starts with the file name */

/* the article-bearing class word used in "must be an integer, found a float" */
static const char *class_word(hid_t type)
{
    switch (H5Tget_class(type)) {
    case H5T_INTEGER: return "an integer";
    case H5T_FLOAT: return "a float";
    case H5T_STRING: return "a string";
    case H5T_ARRAY: return "an array";
    case H5T_COMPOUND: return "a compound";
    default: return "another type";
    }
}

/* ------------------------------------------------------------------------------------ */
/* attributes: `where` is "root" or "/layers/00003" and starts every message */

static int read_int_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, long long *out)
{
    int rc = -1;
    hid_t type = -1, a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return -1;
    type = H5Aget_type(a);
    if (type < 0 || H5Tget_class(type) != H5T_INTEGER) {
        ppdl_h5_fail(c, "%s attribute '%s' must be an integer, found %s", where, name,
             type < 0 ? "an unreadable type" : class_word(type));
        goto out;
    }
    if (H5Aread(a, H5T_NATIVE_LLONG, out) < 0) {
        ppdl_h5_fail(c, "%s attribute '%s' cannot be read", where, name);
        goto out;
    }
    rc = 0;
out:
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&a, H5Aclose);
    return rc;
}

/* a number: float or integer class */
static int read_double_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, double *out)
{
    int rc = -1;
    hid_t type = -1, a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return -1;
    type = H5Aget_type(a);
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        ppdl_h5_fail(c, "%s attribute '%s' must be a number, found %s", where, name,
             type < 0 ? "an unreadable type" : class_word(type));
        goto out;
    }
    if (H5Aread(a, H5T_NATIVE_DOUBLE, out) < 0) {
        ppdl_h5_fail(c, "%s attribute '%s' cannot be read", where, name);
        goto out;
    }
    rc = 0;
out:
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&a, H5Aclose);
    return rc;
}

/* A string, variable-length (h5py) or fixed-length; copied into buf, truncated to fit. */
static int read_str_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, char *buf, size_t len)
{
    int rc = -1;
    hid_t type = -1, mem = -1, a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return -1;
    type = H5Aget_type(a);
    if (type < 0 || H5Tget_class(type) != H5T_STRING) {
        ppdl_h5_fail(c, "%s attribute '%s' must be a string, found %s", where, name,
             type < 0 ? "an unreadable type" : class_word(type));
        goto out;
    }
    /* HDF5 does not convert between character sets: read in the file's own */
    mem = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mem, H5Tget_cset(type));
    if (H5Tis_variable_str(type) > 0) {
        char *s = NULL;
        H5Tset_size(mem, H5T_VARIABLE);
        if (H5Aread(a, mem, &s) < 0 || !s) {
            ppdl_h5_fail(c, "%s attribute '%s' cannot be read", where, name);
            if (s) H5free_memory(s);
            goto out;
        }
        snprintf(buf, len, "%s", s);
        H5free_memory(s);
    } else {
        size_t n = H5Tget_size(type);
        if (n == 0 || n > (1u << 20)) {
            ppdl_h5_fail(c, "%s attribute '%s' is a string of %zu bytes", where, name, n);
            goto out;
        }
        char *s = ppdl_xcalloc(n + 1, 1);
        H5Tset_size(mem, n + 1);
        H5Tset_strpad(mem, H5T_STR_NULLTERM);
        if (H5Aread(a, mem, s) < 0) {
            ppdl_h5_fail(c, "%s attribute '%s' cannot be read", where, name);
            free(s);
            goto out;
        }
        snprintf(buf, len, "%s", s);
        free(s);
    }
    rc = 0;
out:
    ppdl_h5_close(&mem, H5Tclose);
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&a, H5Aclose);
    return rc;
}

static int write_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, hid_t file_type,
                      hid_t mem_type, const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = space >= 0 ? H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int rc = a >= 0 && H5Awrite(a, mem_type, value) >= 0 ? 0 : -1;
    ppdl_h5_close(&a, H5Aclose);
    ppdl_h5_close(&space, H5Sclose);
    if (rc) ppdl_h5_fail(c, "cannot write %s attribute '%s'", where, name);
    return rc;
}

static int write_int_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, int v)
{
    return write_attr(c, obj, where, name, H5T_STD_I32LE, H5T_NATIVE_INT, &v);
}

static int write_double_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, double v)
{
    return write_attr(c, obj, where, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

static int write_str_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, const char *v)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    int rc = write_attr(c, obj, where, name, type, type, &v);
    H5Tclose(type);
    return rc;
}

/* names of obj's attributes, for the "unexpected attribute" checks */
typedef struct name_list {
    int n;
    char names[32][64];
} name_list;

static herr_t collect_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)loc;
    (void)info;
    name_list *nl = data;
    if (nl->n < 32) snprintf(nl->names[nl->n++], sizeof nl->names[0], "%s", name);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* the root hyperparameters of each family (model.h) */

typedef struct hyper {
    const char *family, *key;
    char type;                     /* 'i' int32, 'f' float64 (ln_eps), 's' activation string */
    size_t off;                    /* of the int/float field in ppdl_model */
    int optional;                  /* 1: may be absent (files from before it existed): 0 then */
} hyper;

static const hyper hypers[] = {
    {"gpt", "vocab_size", 'i', offsetof(ppdl_model, vocab_size), 0},
    {"gpt", "seq_len", 'i', offsetof(ppdl_model, seq_len), 0},
    {"gpt", "d_model", 'i', offsetof(ppdl_model, d_model), 0},
    {"gpt", "n_heads", 'i', offsetof(ppdl_model, n_heads), 0},
    {"gpt", "n_layers", 'i', offsetof(ppdl_model, n_layers), 0},
    {"gpt", "ln_eps", 'f', offsetof(ppdl_model, ln_eps), 0},
    {"gpt", "tie_embeddings", 'i', offsetof(ppdl_model, tie_embeddings), 1},
    {"mlp", "in_features", 'i', offsetof(ppdl_model, in_features), 0},
    {"mlp", "hidden", 'i', offsetof(ppdl_model, hidden), 0},
    {"mlp", "n_layers", 'i', offsetof(ppdl_model, n_layers), 0},
    {"mlp", "n_classes", 'i', offsetof(ppdl_model, n_classes), 0},
    {"mlp", "activation", 's', offsetof(ppdl_model, activation), 0},
    {"cnn", "in_channels", 'i', offsetof(ppdl_model, in_channels), 0},
    {"cnn", "height", 'i', offsetof(ppdl_model, height), 0},
    {"cnn", "width", 'i', offsetof(ppdl_model, width), 0},
    {"cnn", "channels", 'i', offsetof(ppdl_model, channels), 0},
    {"cnn", "n_blocks", 'i', offsetof(ppdl_model, n_blocks), 0},
    {"cnn", "hidden", 'i', offsetof(ppdl_model, hidden), 0},
    {"cnn", "n_classes", 'i', offsetof(ppdl_model, n_classes), 0},
};
#define N_HYPERS ((int)(sizeof hypers / sizeof hypers[0]))

static int is_hyper_of(const char *family, const char *key)
{
    for (int i = 0; i < N_HYPERS; i++)
        if (!strcmp(hypers[i].family, family) && !strcmp(hypers[i].key, key)) return 1;
    return 0;
}

static void hyper_list(const char *family, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < N_HYPERS && n < len; i++)
        if (!strcmp(hypers[i].family, family))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", hypers[i].key);
}

/* Read one hyperparameter and set it through ppdl_model_set, so the file obeys the
 * same ranges as `ppdl-init --set`. */
static int read_hyper(ppdl_h5_ctx *c, hid_t root, ppdl_model *m, const hyper *h)
{
    char value[128], setmsg[PPDL_ERR_LEN];
    if (h->optional && H5Aexists(root, h->key) <= 0) return 0; /* ppdl_model_load_desc zeroed it */
    if (h->type == 'i') {
        long long v;
        if (read_int_attr(c, root, "root", h->key, &v)) return -1;
        snprintf(value, sizeof value, "%lld", v);
    } else if (h->type == 'f') {
        double v;
        if (read_double_attr(c, root, "root", h->key, &v)) return -1;
        snprintf(value, sizeof value, "%.17g", v);
    } else {
        if (read_str_attr(c, root, "root", h->key, value, sizeof value)) return -1;
    }
    if (ppdl_model_set(m, h->key, value, setmsg, sizeof setmsg)) {
        /* setmsg reads "--set key=value: expected ..."; keep the part after the colon */
        const char *why = strstr(setmsg, ": ");
        return ppdl_h5_fail(c, "root attribute '%s' is %s, %s", h->key, value, why ? why + 2 : setmsg);
    }
    return 0;
}

static int write_hypers(ppdl_h5_ctx *c, hid_t root, const ppdl_model *m)
{
    for (int i = 0; i < N_HYPERS; i++) {
        const hyper *h = &hypers[i];
        if (strcmp(h->family, m->family)) continue;
        const char *field = (const char *)m + h->off;
        int rc;
        if (h->type == 'i') rc = write_int_attr(c, root, "root", h->key, *(const int *)field);
        else if (h->type == 'f') rc = write_double_attr(c, root, "root", h->key, *(const float *)field);
        else rc = write_str_attr(c, root, "root", h->key, ppdl_act_name(*(const int *)field));
        if (rc) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* per-layer attributes (model_io.h): what a layer group carries besides `kind` */

typedef struct layer_attr {
    const char *name;
    int is_string;
    int ival;
    const char *sval;
} layer_attr;

static int layer_attrs(const ppdl_layer *l, layer_attr *a)
{
    const ppdl_layer_cfg *g = &l->cfg;
    int n = 0;
    if (l->kind == &ppdl_kind_linear) {
        a[n++] = (layer_attr){"in_features", 0, g->in_f, NULL};
        a[n++] = (layer_attr){"out_features", 0, g->out_f, NULL};
        a[n++] = (layer_attr){"activation", 1, 0, ppdl_act_name(g->act)};
    } else if (l->kind == &ppdl_kind_conv) {
        a[n++] = (layer_attr){"in_channels", 0, g->cin, NULL};
        a[n++] = (layer_attr){"out_channels", 0, g->cout, NULL};
        a[n++] = (layer_attr){"kernel_size", 0, g->kh, NULL};
        a[n++] = (layer_attr){"stride", 0, g->stride, NULL};
        a[n++] = (layer_attr){"padding", 0, g->pad, NULL};
        a[n++] = (layer_attr){"activation", 1, 0, ppdl_act_name(g->act)};
    } else if (l->kind == &ppdl_kind_maxpool) {
        a[n++] = (layer_attr){"kernel", 0, g->k, NULL};
        a[n++] = (layer_attr){"stride", 0, g->stride, NULL};
    }
    return n;
}

/* "embedding + 2 blocks + head", for the layer-count message */
static void chain_desc(const ppdl_model *m, char *buf, size_t len)
{
    if (!strcmp(m->family, "gpt"))
        snprintf(buf, len, "embedding + %d block%s + head", m->n_layers, m->n_layers == 1 ? "" : "s");
    else if (!strcmp(m->family, "mlp"))
        snprintf(buf, len, "%d linear layer%s", m->n_layers, m->n_layers == 1 ? "" : "s");
    else
        snprintf(buf, len, "%d x (conv + maxpool) + flatten + 2 linear", m->n_blocks);
}

/* ------------------------------------------------------------------------------------ */
/* reading */

static hid_t open_for_reading(ppdl_h5_ctx *c)
{
    if (access(c->path, R_OK) != 0) {
        ppdl_h5_fail(c, "cannot read: %s", strerror(errno));
        return -1;
    }
    if (H5Fis_hdf5(c->path) <= 0) {
        ppdl_h5_fail(c, "not an HDF5 file (or truncated)");
        return -1;
    }
    hid_t f = H5Fopen(c->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) ppdl_h5_fail(c, "%s", PPDL_H5_OPEN_FAILED);
    return f;
}

static int check_header(ppdl_h5_ctx *c, hid_t root, char *family, size_t family_len)
{
    char fmt[64];
    long long version;
    if (H5Aexists(root, "ppdl_format") <= 0)
        return ppdl_h5_fail(c, "root attribute 'ppdl_format' is missing: not a ppdl model file "
                       "(make one with ppdl-init)");
    if (read_str_attr(c, root, "root", "ppdl_format", fmt, sizeof fmt)) return -1;
    if (strcmp(fmt, "ppdl-model"))
        return ppdl_h5_fail(c, "root attribute 'ppdl_format' is '%s', expected 'ppdl-model'%s", fmt,
                    !strcmp(fmt, "ppdl-data") ? " (this is a data file: pass it with --data)" : "");
    if (read_int_attr(c, root, "root", "ppdl_version", &version)) return -1;
    if (version > PPDL_FORMAT_VERSION)
        return ppdl_h5_fail(c, "ppdl_version %lld is newer than this ppdl (%d): update ppdl", version,
                    PPDL_FORMAT_VERSION);
    if (version < 1) return ppdl_h5_fail(c, "ppdl_version %lld is not a valid version (expected 1)", version);
    if (read_str_attr(c, root, "root", "family", family, family_len)) return -1;
    if (strcmp(family, "gpt") && strcmp(family, "mlp") && strcmp(family, "cnn"))
        return ppdl_h5_fail(c, "root attribute 'family' is '%s', expected gpt, mlp or cnn", family);
    return 0;
}

/* a root attribute that is another family's hyperparameter is a mistake */
static int check_root_extras(ppdl_h5_ctx *c, hid_t root, const char *family)
{
    name_list nl = {0};
    hsize_t idx = 0;
    if (H5Aiterate2(root, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &nl) < 0)
        return ppdl_h5_fail(c, "cannot list the root attributes");
    for (int i = 0; i < nl.n; i++) {
        const char *k = nl.names[i];
        int other = 0;
        for (int j = 0; j < N_HYPERS; j++)
            if (!strcmp(hypers[j].key, k)) other = 1;
        if (other && !is_hyper_of(family, k)) {
            char keys[256];
            hyper_list(family, keys, sizeof keys);
            return ppdl_h5_fail(c, "root attribute '%s' is not a hyperparameter of the %s family (%s has: %s)",
                        k, family, family, keys);
        }
    }
    return 0;
}

/* Is `name` a layer group name "%05d" with index < L? Returns the index or -1. */
static int layer_index(const char *name, int L)
{
    if (strlen(name) != 5) return -1;
    int v = 0;
    for (int i = 0; i < 5; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        v = 10 * v + (name[i] - '0');
    }
    return v < L ? v : -1;
}

static int check_layer_count(ppdl_h5_ctx *c, hid_t layers, const ppdl_model *m)
{
    H5G_info_t info;
    if (H5Gget_info(layers, &info) < 0) return ppdl_h5_fail(c, "/layers cannot be listed");
    if ((long long)info.nlinks == m->L) {
        /* right count: every name must then be one of 00000 .. L-1 */
        for (hsize_t i = 0; i < info.nlinks; i++) {
            char name[64] = "";
            H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
            if (layer_index(name, m->L) < 0)
                return ppdl_h5_fail(c, "/layers/%s is not a layer group name (expected 00000 ... %05d)", name,
                            m->L - 1);
        }
        return 0;
    }
    char chain[128], detail[128] = "";
    chain_desc(m, chain, sizeof chain);
    if ((long long)info.nlinks > m->L) {
        for (hsize_t i = 0; i < info.nlinks; i++) {
            char name[64] = "";
            H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
            if (layer_index(name, m->L) < 0) {
                snprintf(detail, sizeof detail, "; unexpected: /layers/%s", name);
                break;
            }
        }
    } else {
        for (int i = 0; i < m->L; i++) {
            char name[16];
            snprintf(name, sizeof name, "%05d", i);
            if (H5Lexists(layers, name, H5P_DEFAULT) <= 0) {
                snprintf(detail, sizeof detail, "; missing: /layers/%s", name);
                break;
            }
        }
    }
    return ppdl_h5_fail(c, "/layers has %llu groups but the %s hyperparameters give %d layers (%s)%s",
                (unsigned long long)info.nlinks, m->family, m->L, chain, detail);
}

/* Open dataset `p` of a layer group and check it is float32 with p's shape. */
static hid_t open_param(ppdl_h5_ctx *c, hid_t group, const char *where, const ppdl_param *p)
{
    hid_t d = -1, type = -1, space = -1;
    char want[96], got[96];
    hsize_t want_dims[PPDL_MAX_DIMS];
    for (int i = 0; i < p->ndim; i++) want_dims[i] = (hsize_t)p->shape[i];
    ppdl_h5_fmt_dims(want, sizeof want, p->ndim, want_dims);
    if (H5Lexists(group, p->name, H5P_DEFAULT) <= 0) {
        ppdl_h5_fail(c, "%s/%s is missing (expected a float32 dataset of shape %s)", where, p->name, want);
        return -1;
    }
    d = H5Dopen2(group, p->name, H5P_DEFAULT);
    if (d < 0) {
        ppdl_h5_fail(c, "%s/%s is not a dataset", where, p->name);
        return -1;
    }
    type = H5Dget_type(d);
    if (type < 0 || H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4) {
        char tn[64] = "an unreadable type";
        if (type >= 0) ppdl_h5_type_name(type, tn, sizeof tn);
        ppdl_h5_fail(c, "%s/%s: expected float32, found %s", where, p->name, tn);
        goto bad;
    }
    space = H5Dget_space(d);
    int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK];
    if (ndim < 0 || ndim > H5S_MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        ppdl_h5_fail(c, "%s/%s: cannot read its shape", where, p->name);
        goto bad;
    }
    int same = ndim == p->ndim;
    for (int i = 0; same && i < ndim; i++) same = dims[i] == want_dims[i];
    if (!same) {
        ppdl_h5_fmt_dims(got, sizeof got, ndim, dims);
        ppdl_h5_fail(c, "%s/%s: expected shape %s, found %s", where, p->name, want, got);
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

/* kind, per-kind attributes, no unexpected attribute or dataset, every parameter */
static int check_layer(ppdl_h5_ctx *c, hid_t layers, const ppdl_model *m, const ppdl_layer *l)
{
    char name[16], where[32], kind[64];
    layer_attr want[8];
    int n_attrs = layer_attrs(l, want), rc = -1;
    snprintf(name, sizeof name, "%05d", l->index);
    snprintf(where, sizeof where, "/layers/%05d", l->index);
    hid_t g = H5Gopen2(layers, name, H5P_DEFAULT);
    if (g < 0) return ppdl_h5_fail(c, "%s is not a group", where);

    if (read_str_attr(c, g, where, "kind", kind, sizeof kind)) goto out;
    if (strcmp(kind, l->kind->name)) {
        ppdl_h5_fail(c, "%s: kind is '%s' but the %s hyperparameters give a '%s' layer here", where, kind,
             m->family, l->kind->name);
        goto out;
    }
    for (int i = 0; i < n_attrs; i++) {
        if (want[i].is_string) {
            char s[64];
            if (read_str_attr(c, g, where, want[i].name, s, sizeof s)) goto out;
            if (strcmp(s, want[i].sval)) {
                ppdl_h5_fail(c, "%s attribute '%s' is '%s' but the %s hyperparameters give '%s'", where,
                     want[i].name, s, m->family, want[i].sval);
                goto out;
            }
        } else {
            long long v;
            if (read_int_attr(c, g, where, want[i].name, &v)) goto out;
            if (v != want[i].ival) {
                ppdl_h5_fail(c, "%s attribute '%s' is %lld but the %s hyperparameters give %d", where,
                     want[i].name, v, m->family, want[i].ival);
                goto out;
            }
        }
    }
    name_list nl = {0};
    hsize_t idx = 0;
    if (H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &nl) < 0) {
        ppdl_h5_fail(c, "%s: cannot list its attributes", where);
        goto out;
    }
    for (int i = 0; i < nl.n; i++) {
        int known = !strcmp(nl.names[i], "kind");
        for (int j = 0; j < n_attrs && !known; j++) known = !strcmp(nl.names[i], want[j].name);
        if (!known) {
            ppdl_h5_fail(c, "%s: unexpected attribute '%s' for a %s layer", where, nl.names[i], l->kind->name);
            goto out;
        }
    }
    for (int i = 0; i < l->n_params; i++) {
        hid_t d = open_param(c, g, where, &l->params[i]);
        if (d < 0) goto out;
        H5Dclose(d);
    }
    H5G_info_t info;
    if (H5Gget_info(g, &info) < 0) {
        ppdl_h5_fail(c, "%s cannot be listed", where);
        goto out;
    }
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char ln[128] = "";
        H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, ln, sizeof ln, H5P_DEFAULT);
        int known = 0;
        for (int j = 0; j < l->n_params && !known; j++) known = !strcmp(ln, l->params[j].name);
        if (!known) {
            char list[512];
            size_t n = 0;
            list[0] = 0;
            for (int j = 0; j < l->n_params && n < sizeof list; j++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", l->params[j].name);
            ppdl_h5_fail(c, "%s: unexpected dataset '%s' (a %s layer has: %s)", where, ln, l->kind->name,
                 l->n_params ? list : "no parameters");
            goto out;
        }
    }
    rc = 0;
out:
    ppdl_h5_close(&g, H5Gclose);
    return rc;
}

/* A tied model stores its weight once: the head's lm_head.weight is a hard link to
 * the embedding's wte, one dataset (model_io.h). A file that says tied but holds two
 * datasets would leave it unclear which one is the weight: refused. (An untied model
 * whose lm_head.weight links to wte is accepted: two parameters that start equal.) */
static int check_tie(ppdl_h5_ctx *c, hid_t layers, const ppdl_model *m)
{
    if (!m->tie_embeddings) return 0;
    char head[32];
    snprintf(head, sizeof head, "%05d/lm_head.weight", m->L - 1);
    if (ppdl_h5_same_object(layers, "00000/wte", head) == 1) return 0;
    return ppdl_h5_fail(c, "root attribute 'tie_embeddings' is 1 but /layers/%s is a dataset of its own: a tied model "
                        "stores the weight once, /layers/%s as a hard link to /layers/00000/wte (h5py: del "
                        "f['layers/%s']; f['layers/%s'] = f['layers/00000/wte']), or set tie_embeddings to 0",
                        head, head, head, head);
}

static int load_desc(ppdl_h5_ctx *c, hid_t f, ppdl_model *m)
{
    char family[64], msg[PPDL_ERR_LEN];
    if (check_header(c, f, family, sizeof family)) return -1;
    memcpy(m->family, family, 4); /* check_header allowed only "gpt", "mlp", "cnn" */
    for (int i = 0; i < N_HYPERS; i++)
        if (!strcmp(hypers[i].family, family) && read_hyper(c, f, m, &hypers[i])) return -1;
    if (check_root_extras(c, f, family)) return -1;
    if (ppdl_model_build(m, msg, sizeof msg)) return ppdl_h5_fail(c, "%s", msg);
    if (H5Lexists(f, "layers", H5P_DEFAULT) <= 0) return ppdl_h5_fail(c, "group /layers is missing");
    int rc = -1;
    hid_t layers = H5Gopen2(f, "layers", H5P_DEFAULT);
    if (layers < 0) return ppdl_h5_fail(c, "/layers is not a group");
    if (check_layer_count(c, layers, m)) goto out;
    for (int i = 0; i < m->L; i++)
        if (check_layer(c, layers, m, &m->layers[i])) goto out;
    if (check_tie(c, layers, m)) goto out;
    rc = 0;
out:
    ppdl_h5_close(&layers, H5Gclose);
    return rc;
}

int ppdl_model_load_desc(const char *path, ppdl_model *m, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    memset(m, 0, sizeof *m);
    hid_t f = open_for_reading(&c);
    if (f < 0) return -1;
    int rc = load_desc(&c, f, m);
    H5Fclose(f);
    if (rc) ppdl_model_free(m);
    return rc;
}

/* read one parameter dataset into dst and check every value is finite */
static int read_param(ppdl_h5_ctx *c, hid_t g, const char *where, const ppdl_param *p, float *dst)
{
    hid_t d = open_param(c, g, where, p);
    if (d < 0) return -1;
    herr_t st = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    H5Dclose(d);
    if (st < 0) return ppdl_h5_fail(c, "%s/%s: cannot read the data (damaged file?)", where, p->name);
    for (size_t i = 0; i < p->numel; i++)
        if (!isfinite(dst[i]))
            return ppdl_h5_fail(c, "%s/%s holds a non-finite value at index %zu (%g)", where, p->name, i,
                        (double)dst[i]);
    return 0;
}

static int load_params(ppdl_h5_ctx *c, hid_t f, const ppdl_model *m, int first, int last, float *host)
{
    int rc = -1;
    hid_t layers = H5Gopen2(f, "layers", H5P_DEFAULT), g = -1;
    if (layers < 0) return ppdl_h5_fail(c, "group /layers is missing");
    float *dst = host;
    for (int li = first; li <= last; li++) {
        const ppdl_layer *l = &m->layers[li];
        char name[16], where[32];
        snprintf(name, sizeof name, "%05d", li);
        snprintf(where, sizeof where, "/layers/%05d", li);
        g = H5Gopen2(layers, name, H5P_DEFAULT);
        if (g < 0) {
            ppdl_h5_fail(c, "%s is missing", where);
            goto out;
        }
        for (int i = 0; i < l->n_params; i++) {
            if (ppdl_model_is_tied(m, li, i) && ppdl_model_tie_within(m, first, last)) continue; /* it is wte */
            if (read_param(c, g, where, &l->params[i], dst)) goto out;
            dst += l->params[i].numel;
        }
        ppdl_h5_close(&g, H5Gclose);
    }
    rc = 0;
out:
    ppdl_h5_close(&g, H5Gclose);
    ppdl_h5_close(&layers, H5Gclose);
    return rc;
}

int ppdl_model_load_params(const char *path, const ppdl_model *m, int first, int last,
                           float *host, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (first < 0 || last >= m->L || first > last)
        return ppdl_h5_fail(&c, "layers %d..%d requested, the model has layers 0..%d", first, last, m->L - 1);
    hid_t f = open_for_reading(&c);
    if (f < 0) return -1;
    int rc = load_params(&c, f, m, first, last, host);
    H5Fclose(f);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* writing */

static int write_param(ppdl_h5_ctx *c, hid_t g, const char *where, const ppdl_param *p, const float *src)
{
    hsize_t dims[PPDL_MAX_DIMS];
    for (int i = 0; i < p->ndim; i++) dims[i] = (hsize_t)p->shape[i];
    hid_t space = H5Screate_simple(p->ndim, dims, NULL);
    hid_t d = space >= 0 ? H5Dcreate2(g, p->name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                      H5P_DEFAULT) : -1;
    int rc = d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) >= 0 ? 0 : -1;
    ppdl_h5_close(&d, H5Dclose);
    ppdl_h5_close(&space, H5Sclose);
    if (rc) ppdl_h5_fail(c, "cannot write %s/%s (disk full?)", where, p->name);
    return rc;
}

/* layer l's datasets from *src (the held layout), advanced past them; a tied
 * lm_head.weight is a hard link to /layers/00000/wte, written before it */
static int write_layer(ppdl_h5_ctx *c, hid_t layers, const ppdl_model *m, const ppdl_layer *l, const float **src)
{
    char name[16], where[32];
    layer_attr a[8];
    int n_attrs = layer_attrs(l, a), rc = -1;
    snprintf(name, sizeof name, "%05d", l->index);
    snprintf(where, sizeof where, "/layers/%05d", l->index);
    hid_t g = H5Gcreate2(layers, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ppdl_h5_fail(c, "cannot create group %s", where);
    if (write_str_attr(c, g, where, "kind", l->kind->name)) goto out;
    for (int i = 0; i < n_attrs; i++) {
        int st = a[i].is_string ? write_str_attr(c, g, where, a[i].name, a[i].sval)
                                : write_int_attr(c, g, where, a[i].name, a[i].ival);
        if (st) goto out;
    }
    for (int i = 0; i < l->n_params; i++) {
        if (ppdl_model_is_tied(m, l->index, i)) {
            if (H5Lcreate_hard(layers, "00000/wte", g, l->params[i].name, H5P_DEFAULT, H5P_DEFAULT) < 0) {
                ppdl_h5_fail(c, "cannot link %s/%s to /layers/00000/wte", where, l->params[i].name);
                goto out;
            }
            continue;
        }
        if (write_param(c, g, where, &l->params[i], *src)) goto out;
        *src += l->params[i].numel;
    }
    rc = 0;
out:
    ppdl_h5_close(&g, H5Gclose);
    return rc;
}

static int write_model(ppdl_h5_ctx *c, hid_t f, const ppdl_model *m, const float *host)
{
    if (write_str_attr(c, f, "root", "ppdl_format", "ppdl-model") ||
        write_int_attr(c, f, "root", "ppdl_version", PPDL_FORMAT_VERSION) ||
        write_str_attr(c, f, "root", "family", m->family) || write_hypers(c, f, m))
        return -1;
    hid_t layers = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (layers < 0) return ppdl_h5_fail(c, "cannot create group /layers");
    int rc = 0;
    const float *src = host;
    for (int i = 0; i < m->L && !rc; i++) rc = write_layer(c, layers, m, &m->layers[i], &src);
    H5Gclose(layers);
    return rc;
}

/* A file we could not load back is not worth writing: refuse non-finite weights. */
static int check_finite(ppdl_h5_ctx *c, const ppdl_model *m, const float *host)
{
    const float *p = host;
    for (int li = 0; li < m->L; li++)
        for (int i = 0; i < m->layers[li].n_params; i++) {
            const ppdl_param *pa = &m->layers[li].params[i];
            if (ppdl_model_is_tied(m, li, i)) continue; /* held once, as wte */
            for (size_t j = 0; j < pa->numel; j++)
                if (!isfinite(p[j]))
                    return ppdl_h5_fail(c, "not written: /layers/%05d/%s holds a non-finite value at index %zu "
                                   "(the training diverged?)", li, pa->name, j);
            p += pa->numel;
        }
    return 0;
}

int ppdl_model_save(const char *path, const ppdl_model *m, const float *host, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (m->L < 1 || !m->layers) return ppdl_h5_fail(&c, "not written: the model has no layers (not built?)");
    if (check_finite(&c, m, host)) return -1;

    char tmp[4096 + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return ppdl_h5_fail(&c, "path too long");
    /* open() first: its errno says why a file cannot be created, HDF5 does not */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ppdl_h5_fail(&c, "cannot create %s: %s", tmp, strerror(errno));
    close(fd);

    /* HDF5's 1.8 file format or later: the superblock and object headers carry checksums,
     * so a damaged file is refused cleanly. In the default (1.6) format HDF5 1.10 itself
     * can crash or hang on a file with a few random bytes changed in its first 8 KiB; in
     * this one the fuzzer found no such file (perf/fuzz/). h5py and HDF5 >= 1.8 read it. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0) {
        if (fapl >= 0) H5Pclose(fapl);
        unlink(tmp);
        return ppdl_h5_fail(&c, "cannot set up HDF5 to write %s", tmp);
    }
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        unlink(tmp);
        return ppdl_h5_fail(&c, "cannot create %s as an HDF5 file", tmp);
    }
    int rc = write_model(&c, f, m, host);
    if (H5Fclose(f) < 0 && !rc) rc = ppdl_h5_fail(&c, "cannot finish writing %s (disk full?)", tmp);
    if (!rc && rename(tmp, path) != 0) rc = ppdl_h5_fail(&c, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}
