/* fuzz_model_api.c — libFuzzer target: model.h5 validation, structure-aware.
 *
 * fuzz_model hands the reader raw bytes; most of them are rejected (or crash) inside
 * HDF5's own parser before ppdl's checks run. Here the input is a recipe instead: its
 * bytes choose, one decision at a time, how to write a model file through the HDF5
 * API: the family, each root attribute (kept, left out, given another type, a huge
 * or negative value, an array), then the layer groups of the chain those
 * hyperparameters give (ppdl_model_build), each with its kind and attributes and its
 * parameter datasets, any of which may be missing, renamed, retyped, reshaped, extra,
 * or hold a NaN. Every file is a valid HDF5 file, so ppdl_model_load_desc and
 * ppdl_model_load_params see the mistakes a person or another program makes, and the
 * fuzzer's coverage is ppdl's. The promises checked are those of fuzz_model.c.
 *
 * Datasets are declared in full but written only when small (a declared shape costs
 * nothing; unwritten values read as 0). Build and run: perf/fuzz/build, perf/fuzz/run
 * api SECONDS (perf/fuzz/README.md).
 */
#include "core/error.h"
#include "io/model_io.h"
#include "nn/layer.h"
#include "nn/model.h"

#include <hdf5.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/ppdl-fuzz-api-%d.h5", dir, (int)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* ---- the recipe: bytes read one decision at a time; past the end, all zeros ---- */
typedef struct recipe {
    const uint8_t *p;
    size_t n, at;
} recipe;

static unsigned u8(recipe *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint32_t u32(recipe *r) { return u8(r) | u8(r) << 8 | u8(r) << 16 | (uint32_t)u8(r) << 24; }
/* a rare event: true with probability k/256; a zero byte (and the end of the recipe)
 * always says no, so an empty recipe writes a valid model and the fuzzer adds mistakes */
static int chance(recipe *r, unsigned k) { return u8(r) >= 256 - k; }

/* an integer hyperparameter: mostly small and valid, sometimes an edge */
static long long pick_int(recipe *r, long long typical)
{
    static const long long edge[] = {0, -1, 1, 2, 3, 7, 64, 65536, 65537, 1 << 20, 1 << 24, 1 << 30,
                                     2147483647LL, -2147483648LL, 1LL << 40, -(1LL << 40)};
    unsigned k = u8(r);
    if (k < 160) return typical;
    if (k < 220) return 1 + u8(r) % 8;
    return edge[u8(r) % (sizeof edge / sizeof edge[0])];
}

static const char *pick_str(recipe *r, const char *typical)
{
    static const char *other[] = {"", "gpt", "mlp", "cnn", "rnn", "relu", "gelu", "none", "tanh", "embedding",
                                  "block", "head", "linear", "conv", "maxpool", "flatten", "ppdl-model",
                                  "ppdl-data", "x\xff\xfe"};
    return !chance(r, 56) ? typical : other[u8(r) % (sizeof other / sizeof other[0])];
}

/* ---- writing HDF5 (errors ignored: a write that fails makes another kind of file) ---- */
static void attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, int n, const void *v)
{
    hsize_t dims = (hsize_t)n;
    hid_t space = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dims, NULL);
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, mtype, v);
        H5Aclose(a);
    }
    H5Sclose(space);
}

static void attr_str(hid_t obj, const char *name, const char *v, int fixed)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (fixed) {
        H5Tset_size(t, strlen(v) + 1);
        attr_write(obj, name, t, t, 1, v);
    } else {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        attr_write(obj, name, t, t, 1, &v);
    }
    H5Tclose(t);
}

/* an integer attribute as the recipe says: int32, int64, uint64, float, string, array,
 * or left out */
static void attr_int(recipe *r, hid_t obj, const char *name, long long v)
{
    unsigned how = u8(r);
    if (how < 170) {
        int x = (int)v;
        if (v == (long long)x) attr_write(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT, 1, &x);
        else attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &v);
    } else if (how < 185) {
        attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &v);
    } else if (how < 195) {
        unsigned long long x = (unsigned long long)v;
        attr_write(obj, name, H5T_STD_U64LE, H5T_NATIVE_ULLONG, 1, &x);
    } else if (how < 210) {
        double x = (double)v + (chance(r, 128) ? 0.5 : 0);
        attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &x);
    } else if (how < 220) {
        char s[32];
        snprintf(s, sizeof s, "%lld", v);
        attr_str(obj, name, s, chance(r, 128));
    } else if (how < 235) {
        int x[2] = {(int)v, (int)v};
        attr_write(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT, 2, x);
    } /* else: missing */
}

static void attr_double(recipe *r, hid_t obj, const char *name, double v)
{
    static const double edge[] = {0, -1e-5, 1e-30, 1, 2, 1e300};
    unsigned how = u8(r);
    if (how < 200) attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &v);
    else if (how < 215) {
        double x = how & 1 ? NAN : INFINITY;
        attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &x);
    } else if (how < 230) {
        double x = edge[u8(r) % 6];
        attr_write(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 1, &x);
    } else if (how < 240) attr_str(obj, name, "1e-5", 0);
}

/* a parameter dataset: its shape (maybe wrong), type (maybe wrong), values (maybe NaN) */
static void dataset(recipe *r, hid_t g, const ppdl_param *p)
{
    char name[64];
    snprintf(name, sizeof name, "%s", p->name);
    if (chance(r, 6)) return;                                  /* missing */
    if (chance(r, 4)) snprintf(name, sizeof name, "%s.x", p->name); /* misnamed */
    int ndim = p->ndim;
    hsize_t dims[H5S_MAX_RANK];
    for (int i = 0; i < ndim; i++) dims[i] = (hsize_t)p->shape[i];
    if (chance(r, 8)) {                                        /* another shape */
        unsigned k = u8(r);
        if (k < 64 && ndim > 1) ndim--;
        else if (k < 128 && ndim < 4) dims[ndim++] = 1 + u8(r) % 3;
        else dims[u8(r) % ndim] = (hsize_t[]){0, 1, 2, 1u << 31, (hsize_t)1 << 40}[u8(r) % 5];
    }
    hid_t ftype = H5T_IEEE_F32LE;
    unsigned t = u8(r);
    if (t >= 252) ftype = H5T_IEEE_F64LE;
    else if (t >= 249) ftype = H5T_STD_I32LE;
    else if (t >= 247) ftype = H5T_STD_U8LE;
    hid_t space = ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = space >= 0 ? H5Dcreate2(g, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : 0;
    if (d >= 0 && n > 0 && n <= 65536) {
        float *v = malloc((size_t)n * sizeof *v);
        for (hssize_t i = 0; i < n; i++) v[i] = 0.01f * (float)((int)(i % 17) - 8);
        if (chance(r, 10)) v[u32(r) % (uint32_t)n] = (float[]){NAN, INFINITY, -INFINITY, 1e38f}[u8(r) % 4];
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        free(v);
    }
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
}

/* one layer group: kind, the kind's attributes (maybe wrong or extra), its datasets */
static void layer(recipe *r, hid_t layers, const ppdl_layer *l)
{
    char name[16];
    snprintf(name, sizeof name, "%05d", l->index);
    if (chance(r, 4)) return;                                  /* missing group */
    if (chance(r, 3)) snprintf(name, sizeof name, "%05d", l->index + 1 + (int)(u8(r) % 3));
    if (H5Lexists(layers, name, H5P_DEFAULT) > 0) return;
    if (chance(r, 3)) {                                        /* a dataset, not a group */
        float x = 1;
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t d = H5Dcreate2(layers, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d >= 0) { H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &x); H5Dclose(d); }
        H5Sclose(sp);
        return;
    }
    hid_t g = H5Gcreate2(layers, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return;
    unsigned k = u8(r);
    if (k < 240) attr_str(g, "kind", pick_str(r, l->kind->name), chance(r, 20));
    else if (k < 248) attr_int(r, g, "kind", 3);
    const ppdl_layer_cfg *c = &l->cfg;
    if (l->kind == &ppdl_kind_linear) {
        attr_int(r, g, "in_features", pick_int(r, c->in_f));
        attr_int(r, g, "out_features", pick_int(r, c->out_f));
        attr_str(g, "activation", pick_str(r, ppdl_act_name(c->act)), 0);
    } else if (l->kind == &ppdl_kind_conv) {
        attr_int(r, g, "in_channels", pick_int(r, c->cin));
        attr_int(r, g, "out_channels", pick_int(r, c->cout));
        attr_int(r, g, "kernel_size", pick_int(r, c->kh));
        attr_int(r, g, "stride", pick_int(r, c->stride));
        attr_int(r, g, "padding", pick_int(r, c->pad));
        attr_str(g, "activation", pick_str(r, ppdl_act_name(c->act)), 0);
    } else if (l->kind == &ppdl_kind_maxpool) {
        attr_int(r, g, "kernel", pick_int(r, c->k));
        attr_int(r, g, "stride", pick_int(r, c->stride));
    }
    if (chance(r, 4)) attr_int(r, g, "dropout", 1);            /* an extra attribute */
    for (int i = 0; i < l->n_params; i++) dataset(r, g, &l->params[i]);
    if (chance(r, 4)) {                                        /* an extra dataset or group */
        if (chance(r, 128)) H5Gclose(H5Gcreate2(g, "extra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        else {
            ppdl_param x = {.name = "extra", .ndim = 1, .shape = {4}, .numel = 4};
            dataset(r, g, &x);
        }
    }
    H5Gclose(g);
}

typedef struct hyper { const char *family, *key; int *field; } hyper;

static void write_model(recipe *r)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) abort();
    ppdl_model m;
    memset(&m, 0, sizeof m);
    static const char *fams[] = {"gpt", "mlp", "cnn"};
    snprintf(m.family, sizeof m.family, "%s", fams[u8(r) % 3]);
    /* start from a tiny valid model of the family, then let the recipe change it */
    if (!strcmp(m.family, "gpt")) {
        m.vocab_size = 8; m.seq_len = 4; m.d_model = 4; m.n_heads = 2; m.n_layers = 1; m.ln_eps = 1e-5f;
    } else if (!strcmp(m.family, "mlp")) {
        m.in_features = 3; m.hidden = 4; m.n_layers = 2; m.n_classes = 2; m.activation = PPDL_ACT_RELU;
    } else {
        m.in_channels = 1; m.height = 4; m.width = 4; m.channels = 2; m.n_blocks = 1; m.hidden = 3;
        m.n_classes = 2;
    }
    hyper hs[] = {
        {"gpt", "vocab_size", &m.vocab_size}, {"gpt", "seq_len", &m.seq_len}, {"gpt", "d_model", &m.d_model},
        {"gpt", "n_heads", &m.n_heads}, {"gpt", "n_layers", &m.n_layers},
        {"mlp", "in_features", &m.in_features}, {"mlp", "hidden", &m.hidden}, {"mlp", "n_layers", &m.n_layers},
        {"mlp", "n_classes", &m.n_classes},
        {"cnn", "in_channels", &m.in_channels}, {"cnn", "height", &m.height}, {"cnn", "width", &m.width},
        {"cnn", "channels", &m.channels}, {"cnn", "n_blocks", &m.n_blocks}, {"cnn", "hidden", &m.hidden},
        {"cnn", "n_classes", &m.n_classes},
    };
    /* the header */
    unsigned k = u8(r);
    if (k < 240) attr_str(f, "ppdl_format", pick_str(r, "ppdl-model"), chance(r, 20));
    else if (k < 248) attr_int(r, f, "ppdl_format", 1);
    if (!chance(r, 3)) attr_int(r, f, "ppdl_version", !chance(r, 11) ? 1 : pick_int(r, 2));
    if (!chance(r, 3)) attr_str(f, "family", pick_str(r, m.family), chance(r, 20));
    /* hyperparameters: the file's values, which the model built below follows */
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        int mine = !strcmp(hs[i].family, m.family);
        if (!mine && !chance(r, 3)) continue;                  /* another family's key, rarely */
        long long v = pick_int(r, mine ? *hs[i].field : 4);
        attr_int(r, f, hs[i].key, v);
        /* the chain below follows the value when ppdl accepts it (ppdl_model_set's
         * ranges: ppdl_model_build expects values that passed them) */
        char sv[32], e2[PPDL_ERR_LEN];
        snprintf(sv, sizeof sv, "%lld", v);
        if (mine) ppdl_model_set(&m, hs[i].key, sv, e2, sizeof e2);
    }
    if (!strcmp(m.family, "gpt")) attr_double(r, f, "ln_eps", m.ln_eps);
    if (!strcmp(m.family, "mlp")) attr_str(f, "activation", pick_str(r, "relu"), chance(r, 20));
    if (chance(r, 8)) attr_str(f, "note", "written by fuzz_model_api", 0);
    /* the layers of the chain these hyperparameters give (or of the tiny model when
     * they give none, or one too big to declare) */
    char err[PPDL_ERR_LEN];
    if (ppdl_model_build(&m, err, sizeof err) || m.L > 64) {
        ppdl_model_free(&m);
        if (!strcmp(m.family, "gpt")) { m.vocab_size = 8; m.seq_len = 4; m.d_model = 4; m.n_heads = 2; m.n_layers = 1; }
        else if (!strcmp(m.family, "mlp")) { m.in_features = 3; m.hidden = 4; m.n_layers = 2; m.n_classes = 2; }
        else { m.in_channels = 1; m.height = 4; m.width = 4; m.channels = 2; m.n_blocks = 1; m.hidden = 3; m.n_classes = 2; }
        if (ppdl_model_build(&m, err, sizeof err)) abort();
    }
    if (!chance(r, 4)) {
        hid_t layers = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        for (int i = 0; i < m.L; i++) layer(r, layers, &m.layers[i]);
        if (chance(r, 4)) {                                    /* one layer too many */
            ppdl_layer extra = m.layers[m.L - 1];
            extra.index = m.L;
            layer(r, layers, &extra);
        }
        H5Gclose(layers);
    }
    ppdl_model_free(&m);
    H5Fclose(f);
}

static void check(int cond, const char *what, const char *err)
{
    if (cond) return;
    fprintf(stderr, "fuzz_model_api: %s (message: '%s')\n", what, err ? err : "");
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    recipe r = {data, size, 0};
    write_model(&r);
    check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "the writer left HDF5 objects open", "");
    char err[PPDL_ERR_LEN] = "";
    ppdl_model m;
    int rc = ppdl_model_load_desc(path, &m, err, sizeof err);
    check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "ppdl_model_load_desc left HDF5 objects open", err);
    if (rc) {
        check(strncmp(err, path, strlen(path)) == 0, "a refused model's message does not name the file", err);
        return 0;
    }
    check(m.L >= 1 && m.layers != NULL, "an accepted model has no layers", "");
    size_t n = ppdl_model_param_count(&m);
    if (n <= (1u << 22)) {
        float *host = malloc((n ? n : 1) * sizeof *host);
        rc = ppdl_model_load_params(path, &m, 0, m.L - 1, host, err, sizeof err);
        check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "ppdl_model_load_params left HDF5 objects open", err);
        if (rc) check(strncmp(err, path, strlen(path)) == 0, "refused weights: the message does not name the file", err);
        else
            for (size_t i = 0; i < n; i++) check(isfinite(host[i]), "accepted weights hold a non-finite value", "");
        free(host);
    }
    ppdl_model_free(&m);
    return 0;
}
