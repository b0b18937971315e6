/* test_io.c — model.h5 and data.h5: round trips, and bad files that must be refused
 * with a message naming the file and the field (and no HDF5 handle left open).
 *
 * The bad files are made here with the HDF5 API, starting from a good file and breaking
 * one thing each, the way a hand-made or half-copied file would be broken. No MPI
 * ranks are needed: the readers and writers are serial HDF5.
 */
#include <hdf5.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/data_io.h"
#include "io/h5util.h"
#include "io/model_io.h"
#include "tap.h"

static char dir[256];

static const char *tpath(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int open_handles(void) { return (int)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

/* ---- helpers: models ------------------------------------------------------------ */

static void make_model(ppdl_model *m, const char *preset, const char *k1, const char *v1)
{
    char err[PPDL_ERR_LEN];
    if (ppdl_model_preset(m, preset, err, sizeof err) || (k1 && ppdl_model_set(m, k1, v1, err, sizeof err)) ||
        ppdl_model_build(m, err, sizeof err)) {
        printf("Bail out! cannot build %s: %s\n", preset, err);
        exit(1);
    }
}

/* the held layout (nn/model.h); a tied lm_head.weight's initial values, the last,
 * land past it (room for them) */
static float *init_params(const ppdl_model *m, unsigned long long seed)
{
    float *p = malloc((ppdl_model_param_count(m) + ppdl_model_tied_floats(m)) * sizeof *p), *q = p;
    for (int i = 0; i < m->L; i++) {
        ppdl_layer_init_params(m, &m->layers[i], seed, q);
        q += ppdl_layer_param_count(&m->layers[i]);
    }
    return p;
}

static int same_hypers(const ppdl_model *a, const ppdl_model *b)
{
    return !strcmp(a->family, b->family) && a->vocab_size == b->vocab_size && a->seq_len == b->seq_len &&
           a->d_model == b->d_model && a->n_heads == b->n_heads && a->n_layers == b->n_layers &&
           !memcmp(&a->ln_eps, &b->ln_eps, sizeof a->ln_eps) && a->in_features == b->in_features &&
           a->hidden == b->hidden && a->n_classes == b->n_classes && a->activation == b->activation &&
           a->in_channels == b->in_channels && a->height == b->height && a->width == b->width &&
           a->channels == b->channels && a->n_blocks == b->n_blocks && a->L == b->L &&
           a->tie_embeddings == b->tie_embeddings;
}

static int same_chain(const ppdl_model *a, const ppdl_model *b)
{
    if (a->L != b->L) return 0;
    for (int i = 0; i < a->L; i++) {
        const ppdl_layer *x = &a->layers[i], *y = &b->layers[i];
        if (x->kind != y->kind || x->n_params != y->n_params) return 0;
        for (int j = 0; j < x->n_params; j++)
            if (strcmp(x->params[j].name, y->params[j].name) || x->params[j].numel != y->params[j].numel)
                return 0;
    }
    return 1;
}

/* save, load_desc, load_params (all, and a middle range): bitwise identical */
static void round_trip(const char *preset, const char *k1, const char *v1)
{
    ppdl_model m, back;
    char err[PPDL_ERR_LEN] = "";
    make_model(&m, preset, k1, v1);
    size_t n = ppdl_model_param_count(&m);
    float *p = init_params(&m, 42), *q = calloc(n, sizeof *q);
    const char *path = tpath("round.h5");
    int rc = ppdl_model_save(path, &m, p, err, sizeof err);
    ok(rc == 0, "%s: save (%s)", preset, err);
    rc = ppdl_model_load_desc(path, &back, err, sizeof err);
    ok(rc == 0 && same_hypers(&m, &back) && same_chain(&m, &back), "%s: load_desc gives the same hyperparameters and chain (%s)",
       preset, err);
    rc = rc ? rc : ppdl_model_load_params(path, &back, 0, back.L - 1, q, err, sizeof err);
    ok(rc == 0 && !memcmp(p, q, n * sizeof *p), "%s: %zu parameters come back bitwise identical (%s)", preset, n, err);
    /* layers 1..L-2 alone land back to back from the start of host */
    size_t off = ppdl_layer_param_count(&m.layers[0]), cnt = 0;
    for (int i = 1; i <= m.L - 2; i++) cnt += ppdl_layer_param_count(&m.layers[i]);
    memset(q, 0, n * sizeof *q);
    rc = m.L >= 3 ? ppdl_model_load_params(path, &back, 1, m.L - 2, q, err, sizeof err) : -1;
    ok(rc == 0 && !memcmp(p + off, q, cnt * sizeof *p), "%s: layers 1..%d read on their own (%s)", preset, m.L - 2, err);
    is_int(open_handles(), 0, "%s: no HDF5 handle left open", preset);
    ppdl_model_free(&back);
    ppdl_model_free(&m);
    free(p);
    free(q);
}

/* A tied gpt (the presets' default): one dataset under two names, read as the held
 * layout where a range holds both layers and as a copy where it holds the head alone */
static void tied_layout(void)
{
    ppdl_model m, back;
    char err[PPDL_ERR_LEN] = "";
    make_model(&m, "gpt-tiny", NULL, NULL);
    size_t n = ppdl_model_param_count(&m), V = (size_t)m.vocab_size, C = (size_t)m.d_model;
    size_t all = 0;
    for (int i = 0; i < m.L; i++) all += ppdl_layer_param_count(&m.layers[i]);
    ok(m.tie_embeddings == 1 && n == all - V * C, "gpt-tiny ties its embeddings: %zu parameters, the %zu of "
       "lm_head.weight once (as wte)", n, V * C);
    float *p = init_params(&m, 9), *q = calloc(all, sizeof *q);
    const char *path = tpath("tied.h5");
    int rc = ppdl_model_save(path, &m, p, err, sizeof err);
    hid_t f = rc ? -1 : H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int same = f >= 0 && ppdl_h5_same_object(f, "layers/00000/wte", "layers/00003/lm_head.weight") == 1 &&
               ppdl_h5_same_object(f, "layers/00000/wpe", "layers/00003/lm_head.weight") == 0;
    if (f >= 0) H5Fclose(f);
    ok(same, "the file holds it once: /layers/00003/lm_head.weight is a hard link to /layers/00000/wte (%s)", err);
    rc = ppdl_model_load_desc(path, &back, err, sizeof err);
    ok(rc == 0 && back.tie_embeddings == 1, "load_desc reads tie_embeddings = 1 (%s)", err);
    rc = rc ? rc : ppdl_model_load_params(path, &back, 0, back.L - 1, q, err, sizeof err);
    ok(rc == 0 && !memcmp(p, q, n * sizeof *p), "all layers: the held layout, %zu floats, bitwise (%s)", n, err);
    /* the head alone (a stage without the embedding): ln_f, then its copy of wte */
    size_t lnf = 2 * C;
    memset(q, 0, all * sizeof *q);
    rc = rc ? rc : ppdl_model_load_params(path, &back, back.L - 1, back.L - 1, q, err, sizeof err);
    ok(rc == 0 && !memcmp(q, p + n - lnf, lnf * sizeof *p) && !memcmp(q + lnf, p, V * C * sizeof *p),
       "the head alone: ln_f, then lm_head.weight read through the link = wte's values (%s)", err);
    is_int(open_handles(), 0, "tied: no HDF5 handle left open");
    if (!rc) ppdl_model_free(&back);
    ppdl_model_free(&m);
    free(p);
    free(q);
}

/* ---- helpers: breaking files with the HDF5 API ------------------------------------ */

static void copy_file(const char *src, const char *dst, double fraction)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) {
        printf("Bail out! cannot copy %s to %s\n", src, dst);
        exit(1);
    }
    fseek(in, 0, SEEK_END);
    long size = ftell(in), keep = (long)(size * fraction);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    size_t got = fread(buf, 1, (size_t)size, in);
    fwrite(buf, 1, got < (size_t)keep ? got : (size_t)keep, out);
    free(buf);
    fclose(in);
    fclose(out);
}

static void del_attr(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
}

static void put_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    del_attr(obj, name);
    hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type == H5T_IEEE_F64LE ? H5T_NATIVE_DOUBLE : type == H5T_STD_I32LE ? H5T_NATIVE_INT : type, v);
    H5Aclose(a);
    H5Sclose(s);
}

static void put_int(hid_t obj, const char *name, int v) { put_attr(obj, name, H5T_STD_I32LE, &v); }
static void put_double(hid_t obj, const char *name, double v) { put_attr(obj, name, H5T_IEEE_F64LE, &v); }

/* a fixed-length ASCII string, the other kind of string an HDF5 tool may write */
static void put_fixed_str(hid_t obj, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v));
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    put_attr(obj, name, t, v);
    H5Tclose(t);
}

static void put_dataset(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, int ndim,
                        const hsize_t *dims, const void *buf)
{
    if (H5Lexists(loc, name, H5P_DEFAULT) > 0) H5Ldelete(loc, name, H5P_DEFAULT);
    hid_t s = H5Screate_simple(ndim, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (buf) H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Dclose(d);
    H5Sclose(s);
}

/* expect `rc` to be a failure whose message holds the path and every given word */
static void expect_fail(int rc, const char *err, const char *path, const char *w1, const char *w2,
                        const char *what)
{
    int good = rc != 0 && strstr(err, path) && (!w1 || strstr(err, w1)) && (!w2 || strstr(err, w2));
    int handles = open_handles();
    ok(good && handles == 0, "%s is refused: names the file%s%s%s%s", what, w1 ? " and '" : "", w1 ? w1 : "",
       w1 ? "'" : "", handles ? " (HDF5 handles leaked)" : "");
    if (!good) diag("  rc %d, message: %s", rc, err);
}

static int load_all(const char *path, char *err, size_t errlen)
{
    ppdl_model m;
    int rc = ppdl_model_load_desc(path, &m, err, errlen);
    if (rc) return rc;
    float *p = malloc(ppdl_model_param_count(&m) * sizeof *p);
    rc = ppdl_model_load_params(path, &m, 0, m.L - 1, p, err, errlen);
    free(p);
    ppdl_model_free(&m);
    return rc;
}

/* Copy the good model, open the copy read-write and hand it to the caller. */
static hid_t broken_copy(const char *good, const char *name)
{
    const char *copy = tpath(name);
    copy_file(good, copy, 1.0);
    return H5Fopen(copy, H5F_ACC_RDWR, H5P_DEFAULT);
}

static void bad_models(void)
{
    /* gpt-tiny: V 256, T 64, C 64, 4 heads, 2 blocks: layers embedding, 2 blocks, head */
    ppdl_model m;
    char err[PPDL_ERR_LEN];
    make_model(&m, "gpt-tiny", NULL, NULL);
    float *p = init_params(&m, 7);
    char *good = strdup(tpath("good.h5")); /* tpath's buffers rotate: keep a copy */
    if (ppdl_model_save(good, &m, p, err, sizeof err)) {
        printf("Bail out! %s\n", err);
        exit(1);
    }
    const char *path;
    hid_t f, g;

    f = broken_copy(good, "no-dmodel.h5");
    H5Adelete(f, "d_model");
    H5Fclose(f);
    path = tpath("no-dmodel.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "root attribute 'd_model' is missing", NULL,
                "a missing root attribute");

    f = broken_copy(good, "float-heads.h5");
    put_double(f, "n_heads", 4.0);
    H5Fclose(f);
    path = tpath("float-heads.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "'n_heads' must be an integer, found a float", NULL,
                "an attribute of the wrong type");

    f = broken_copy(good, "bad-heads.h5");
    put_int(f, "n_heads", 5);
    H5Fclose(f);
    path = tpath("bad-heads.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "n_heads", "multiple", "d_model not a multiple of n_heads");

    f = broken_copy(good, "qkv-shape.h5");
    {
        hsize_t dims[2] = {64, 64};
        put_dataset(f, "layers/00001/attn.qkv.weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, NULL);
    }
    H5Fclose(f);
    path = tpath("qkv-shape.h5");
    expect_fail(load_all(path, err, sizeof err), err, path,
                "/layers/00001/attn.qkv.weight: expected shape [192, 64], found [64, 64]", NULL, "a dataset of the wrong shape");

    f = broken_copy(good, "f64.h5");
    {
        hsize_t dims[1] = {64};
        double ones[64];
        for (int i = 0; i < 64; i++) ones[i] = 1.0;
        put_dataset(f, "layers/00002/ln1.weight", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, dims, ones);
    }
    H5Fclose(f);
    path = tpath("f64.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00002/ln1.weight: expected float32, found float64",
                NULL, "a float64 parameter");

    f = broken_copy(good, "no-bias.h5");
    H5Ldelete(f, "layers/00001/attn.proj.bias", H5P_DEFAULT);
    H5Fclose(f);
    path = tpath("no-bias.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00001/attn.proj.bias is missing", NULL,
                "a missing parameter dataset");

    f = broken_copy(good, "extra-layer.h5");
    g = H5Gcreate2(f, "layers/00004", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(f);
    path = tpath("extra-layer.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers has 5 groups but the gpt hyperparameters give 4 layers",
                "/layers/00004", "an extra layer group");

    f = broken_copy(good, "extra-dataset.h5");
    {
        hsize_t dims[1] = {3};
        float v[3] = {1, 2, 3};
        put_dataset(f, "layers/00003/lm_head.bias", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, dims, v);
    }
    H5Fclose(f);
    path = tpath("extra-dataset.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00003: unexpected dataset 'lm_head.bias'", NULL,
                "an unexpected dataset");

    f = broken_copy(good, "wrong-kind.h5");
    g = H5Gopen2(f, "layers/00000", H5P_DEFAULT);
    put_fixed_str(g, "kind", "block");
    H5Gclose(g);
    H5Fclose(f);
    path = tpath("wrong-kind.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00000: kind is 'block'", NULL,
                "a layer of the wrong kind");

    f = broken_copy(good, "other-family-attr.h5");
    put_int(f, "hidden", 32);
    H5Fclose(f);
    path = tpath("other-family-attr.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "'hidden' is not a hyperparameter of the gpt family", NULL,
                "another family's hyperparameter");

    f = broken_copy(good, "nan.h5");
    {
        /* layer 2 is the second block; its ln1.weight is [64] */
        float v[64];
        hsize_t dims[1] = {64};
        for (int i = 0; i < 64; i++) v[i] = 1.0f;
        v[17] = NAN;
        put_dataset(f, "layers/00002/ln1.weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, dims, v);
    }
    H5Fclose(f);
    path = tpath("nan.h5");
    {
        ppdl_model back;
        int rc = ppdl_model_load_desc(path, &back, err, sizeof err);
        ok(rc == 0, "a NaN weight passes load_desc (values are checked when read) (%s)", rc ? err : "");
        float *q = malloc(ppdl_model_param_count(&m) * sizeof *q);
        rc = rc ? rc : ppdl_model_load_params(path, &back, 0, back.L - 1, q, err, sizeof err);
        expect_fail(rc, err, path, "/layers/00002/ln1.weight holds a non-finite value at index 17", NULL, "a NaN weight");
        /* the other stages still load: layers 0..1 do not include the bad one */
        rc = ppdl_model_load_params(path, &back, 0, 1, q, err, sizeof err);
        ok(rc == 0, "layers 0..1 of that file still load (%s)", rc ? err : "");
        free(q);
        ppdl_model_free(&back);
    }

    /* the tie: its attribute, and one dataset under two names */
    f = broken_copy(good, "tie-2.h5");
    put_int(f, "tie_embeddings", 2);
    H5Fclose(f);
    path = tpath("tie-2.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "root attribute 'tie_embeddings' is 2", "expected 0",
                "tie_embeddings = 2");

    f = broken_copy(good, "tie-float.h5");
    put_double(f, "tie_embeddings", 1.0);
    H5Fclose(f);
    path = tpath("tie-float.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "'tie_embeddings' must be an integer, found a float", NULL,
                "a float tie_embeddings");

    f = broken_copy(good, "tie-two-datasets.h5");
    {
        /* the link replaced by a dataset of the right shape: which one is the weight? */
        hsize_t dims[2] = {256, 64};
        float *v = calloc(256 * 64, sizeof *v);
        H5Ldelete(f, "layers/00003/lm_head.weight", H5P_DEFAULT);
        put_dataset(f, "layers/00003/lm_head.weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, v);
        free(v);
    }
    H5Fclose(f);
    path = tpath("tie-two-datasets.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "'tie_embeddings' is 1 but /layers/00003/lm_head.weight "
                "is a dataset of its own", "hard link", "a tied model with two datasets");

    f = broken_copy(good, "tie-no-head.h5");
    H5Ldelete(f, "layers/00003/lm_head.weight", H5P_DEFAULT);
    H5Fclose(f);
    path = tpath("tie-no-head.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00003/lm_head.weight is missing", NULL,
                "a tied model without the link");

    f = broken_copy(good, "untied-link.h5");
    put_int(f, "tie_embeddings", 0);
    H5Fclose(f);
    path = tpath("untied-link.h5");
    {
        /* untied with the link: two parameters that start equal, accepted */
        int rc = load_all(path, err, sizeof err);
        ok(rc == 0, "tie_embeddings = 0 with lm_head.weight linked to wte loads: two weights that start equal (%s)",
           rc ? err : "");
    }

    f = broken_copy(good, "future.h5");
    put_int(f, "ppdl_version", 7);
    H5Fclose(f);
    path = tpath("future.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "ppdl_version 7 is newer than this ppdl (1)", NULL,
                "a file from a newer ppdl");

    f = broken_copy(good, "not-ppdl.h5");
    H5Adelete(f, "ppdl_format");
    H5Fclose(f);
    path = tpath("not-ppdl.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "'ppdl_format' is missing", NULL, "an HDF5 file without ppdl_format");

    path = tpath("truncated.h5");
    copy_file(good, path, 0.5);
    expect_fail(load_all(path, err, sizeof err), err, path, "not an HDF5 file (or truncated)", NULL, "a truncated file");

    path = tpath("text.h5");
    {
        FILE *t = fopen(path, "w");
        fputs("this is not HDF5\n", t);
        fclose(t);
    }
    expect_fail(load_all(path, err, sizeof err), err, path, "not an HDF5 file", NULL, "a text file");

    path = tpath("missing.h5");
    expect_fail(load_all(path, err, sizeof err), err, path, "cannot read", NULL, "a missing file");

    /* strings written as fixed-length ASCII (not what ppdl writes) read the same */
    f = broken_copy(good, "fixed-str.h5");
    put_fixed_str(f, "family", "gpt");
    put_fixed_str(f, "ppdl_format", "ppdl-model");
    g = H5Gopen2(f, "layers/00001", H5P_DEFAULT);
    put_fixed_str(g, "kind", "block");
    H5Gclose(g);
    H5Fclose(f);
    {
        int rc = load_all(tpath("fixed-str.h5"), err, sizeof err);
        ok(rc == 0, "fixed-length string attributes are read too (%s)", rc ? err : "");
    }

    /* int64 hyperparameters (numpy's default integer) are accepted */
    f = broken_copy(good, "int64.h5");
    {
        long long v = 64;
        put_attr(f, "d_model", H5T_STD_I64LE, &v);
        /* H5T_STD_I64LE as the memory type: little-endian hosts only, as is ppdl */
    }
    H5Fclose(f);
    {
        int rc = load_all(tpath("int64.h5"), err, sizeof err);
        ok(rc == 0, "an int64 hyperparameter is accepted (%s)", rc ? err : "");
    }

    /* an mlp layer attribute that disagrees with the root hyperparameters */
    {
        ppdl_model mm;
        make_model(&mm, "mlp-tiny", NULL, NULL);
        float *pm = init_params(&mm, 3);
        char *mgood = strdup(tpath("mlp-good.h5"));
        ppdl_model_save(mgood, &mm, pm, err, sizeof err);
        f = broken_copy(mgood, "mlp-attr.h5");
        g = H5Gopen2(f, "layers/00000", H5P_DEFAULT);
        put_int(g, "in_features", 17);
        H5Gclose(g);
        H5Fclose(f);
        path = tpath("mlp-attr.h5");
        expect_fail(load_all(path, err, sizeof err), err, path, "/layers/00000 attribute 'in_features' is 17", NULL,
                    "a layer attribute that disagrees with the hyperparameters");
        f = broken_copy(mgood, "mlp-act.h5");
        put_fixed_str(f, "activation", "tanh");
        H5Fclose(f);
        path = tpath("mlp-act.h5");
        expect_fail(load_all(path, err, sizeof err), err, path, "'activation' is tanh", "relu, gelu or none",
                    "an unknown activation");
        ppdl_model_free(&mm);
        free(pm);
        free(mgood);
    }

    /* saving: a failed save leaves the existing file untouched */
    {
        char *target = strdup(tpath("keep.h5"));
        copy_file(good, target, 1.0);
        struct stat before, after;
        stat(target, &before);
        const char *nodir = tpath("no/such/dir/model.h5");
        int rc = ppdl_model_save(nodir, &m, p, err, sizeof err);
        expect_fail(rc, err, nodir, "cannot create", NULL, "a save into a missing directory");

        /* make path.tmp impossible to create (a directory is in the way) */
        char tmpdir[600];
        snprintf(tmpdir, sizeof tmpdir, "%s.tmp", target);
        mkdir(tmpdir, 0755);
        rc = ppdl_model_save(target, &m, p, err, sizeof err);
        rmdir(tmpdir);
        expect_fail(rc, err, target, ".tmp", NULL, "a save whose temporary file cannot be made");

        float keep = p[5];
        p[5] = INFINITY;
        rc = ppdl_model_save(target, &m, p, err, sizeof err);
        p[5] = keep;
        expect_fail(rc, err, target, "/layers/00000/wte holds a non-finite value at index 5", NULL,
                    "a save of non-finite weights");
        stat(target, &after);
        int same = before.st_size == after.st_size && before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
                   before.st_mtim.tv_nsec == after.st_mtim.tv_nsec && before.st_ino == after.st_ino;
        ok(same && load_all(target, err, sizeof err) == 0 && access(tmpdir, F_OK) != 0,
           "after the failed saves the existing file is untouched and loads, and no .tmp is left");
        free(target);
    }
    ppdl_model_free(&m);
    free(p);
    free(good);
}

/* ---- data ------------------------------------------------------------------------ */

static void tokens_round_trip(void)
{
    ppdl_model m;
    char err[PPDL_ERR_LEN] = "";
    make_model(&m, "gpt-tiny", "seq_len", "4");
    enum { N = 5, T = 4 };
    int32_t tok[N][T + 1], in[4][T], tg[4][T];
    for (int r = 0; r < N; r++)
        for (int t = 0; t <= T; t++) tok[r][t] = (int32_t)(10 * r + t);
    const char *path = tpath("tokens.h5");
    int rc = ppdl_data_write_tokens(path, &tok[0][0], N, T, 200, err, sizeof err);
    ok(rc == 0, "tokens: written (%s)", err);
    ppdl_data d;
    rc = ppdl_data_open(path, &m, &d, err, sizeof err);
    ok(rc == 0 && d.kind == PPDL_DATA_TOKENS && d.n == N && d.T == T && d.vocab_size == 200,
       "tokens: opened as N=%d rows of T=%d, vocab 200 (%s)", N, T, rc ? err : "");
    /* start 3, count 4: rows 3, 4, then wrap to 0, 1 (two hyperslabs) */
    rc = rc ? rc : ppdl_data_read(&d, 3, 4, in, &tg[0][0], err, sizeof err);
    int good = rc == 0;
    for (int s = 0; s < 4 && good; s++)
        for (int t = 0; t < T; t++) {
            int r = (3 + s) % N;
            good = good && in[s][t] == tok[r][t] && tg[s][t] == tok[r][t + 1];
        }
    ok(good, "tokens: a wrapping read gives rows 3,4,0,1 as inputs [:, :T] and targets [:, 1:] (%s)", rc ? err : "");
    /* start -1 == N-1, targets only */
    memset(tg, 0, sizeof tg);
    rc = ppdl_data_read(&d, -1, 1, NULL, &tg[0][0], err, sizeof err);
    ok(rc == 0 && tg[0][0] == tok[N - 1][1] && tg[0][T - 1] == tok[N - 1][T], "tokens: start -1 reads row N-1 (%s)", err);
    ppdl_data_close(&d);
    is_int(open_handles(), 0, "tokens: no HDF5 handle left open after close");
    ppdl_model_free(&m);
}

static void classif_round_trip(const char *preset, int ndim, const long *shape, long n, long start, int count)
{
    ppdl_model m;
    char err[PPDL_ERR_LEN] = "";
    make_model(&m, preset, NULL, NULL);
    long per = 1;
    for (int i = 0; i < ndim; i++) per *= shape[i];
    float *x = malloc((size_t)(n * per) * sizeof *x), *in = malloc((size_t)(count * per) * sizeof *in);
    int32_t *y = malloc((size_t)n * sizeof *y), *lab = malloc((size_t)count * sizeof *lab);
    for (long i = 0; i < n * per; i++) x[i] = (float)sin(0.37 * (double)i) * 3.0f;
    for (long i = 0; i < n; i++) y[i] = (int32_t)(i % m.n_classes);
    const char *path = tpath("classif.h5");
    int rc = ppdl_data_write_classif(path, x, y, n, ndim, shape, err, sizeof err);
    ppdl_data d;
    rc = rc ? rc : ppdl_data_open(path, &m, &d, err, sizeof err);
    ok(rc == 0 && d.kind == (ndim == 3 ? PPDL_DATA_IMAGES : PPDL_DATA_FEATURES) && d.n == n && d.sample_floats == per &&
       d.n_classes == m.n_classes, "%s: %s data written and opened (%s)", preset, ndim == 3 ? "image" : "feature", rc ? err : "");
    rc = rc ? rc : ppdl_data_read(&d, start, count, in, lab, err, sizeof err);
    int good = rc == 0;
    for (long s = 0; s < count && good; s++) {
        long r = ((start + s) % n + n) % n;
        good = !memcmp(in + s * per, x + r * per, (size_t)per * sizeof *x) && lab[s] == y[r];
    }
    ok(good, "%s: reading %d samples from %ld (wrapping mod %ld) gives the written rows bitwise (%s)", preset, count, start,
       n, rc ? err : "");
    if (!rc) ppdl_data_close(&d);
    is_int(open_handles(), 0, "%s: no HDF5 handle left open", preset);
    ppdl_model_free(&m);
    free(x);
    free(in);
    free(y);
    free(lab);
}

/* a data file made with the raw API: tokens [n, rowlen] of `type` and vocab_size */
static void raw_tokens(const char *path, hid_t ftype, hid_t mtype, const void *buf, hsize_t n, hsize_t rowlen, int vocab)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {n, rowlen};
    put_dataset(f, "tokens", ftype, mtype, 2, dims, buf);
    if (vocab > 0) put_int(f, "vocab_size", vocab);
    H5Fclose(f);
}

static void raw_features(const char *path, hsize_t n, hsize_t D, hsize_t nlabels, const int32_t *labels)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {n, D}, ld[1] = {nlabels};
    float *x = calloc(n * D + 1, sizeof *x);
    put_dataset(f, "features", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, x);
    put_dataset(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, ld, labels);
    free(x);
    H5Fclose(f);
}

static void bad_data(void)
{
    ppdl_model gpt, mlp, cnn;
    char err[PPDL_ERR_LEN];
    ppdl_data d;
    make_model(&gpt, "gpt-tiny", "seq_len", "4"); /* vocab 256, T 4 */
    make_model(&mlp, "mlp-tiny", NULL, NULL);     /* in_features 16, 4 classes */
    make_model(&cnn, "cnn-tiny", NULL, NULL);     /* [2, 8, 8], 3 classes */
    int32_t tok[3][5];
    for (int r = 0; r < 3; r++)
        for (int t = 0; t < 5; t++) tok[r][t] = r + t;
    const char *path;
    int rc;

    path = tpath("tok-range.h5");
    tok[2][1] = 300;
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, tok, 3, 5, 256);
    tok[2][1] = 3;
    rc = ppdl_data_open(path, &gpt, &d, err, sizeof err);
    ok(rc == 0, "a file with a bad token opens (tokens are checked when read) (%s)", rc ? err : "");
    int32_t in[2][4], tg[2][4];
    rc = rc ? rc : ppdl_data_read(&d, 1, 2, in, &tg[0][0], err, sizeof err);
    if (d.file >= 0) ppdl_data_close(&d);
    expect_fail(rc, err, path, "/tokens row 2, position 1: token 300 is outside [0, 256)", NULL, "a token out of range");

    path = tpath("tok-seq.h5");
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, tok, 3, 4, 256); /* rows of 4: seq_len 3 */
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "seq_len is 4", "seq_len 3",
                "tokens whose seq_len is not the model's");

    path = tpath("tok-vocab.h5");
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, tok, 3, 5, 512);
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "vocab_size 512 is larger than the model's (256)",
                NULL, "a vocabulary larger than the model's");

    path = tpath("tok-novocab.h5");
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, tok, 3, 5, 0);
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "'vocab_size' is missing", NULL,
                "tokens without vocab_size");

    path = tpath("tok-float.h5");
    {
        float ft[3][5] = {{0}};
        raw_tokens(path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, ft, 3, 5, 256);
    }
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "/tokens must hold integer", "float32",
                "float tokens");

    path = tpath("tok-empty.h5");
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, NULL, 0, 5, 256);
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "no samples", NULL, "N = 0");

    path = tpath("tok-int64.h5");
    {
        long long t64[3][5];
        for (int r = 0; r < 3; r++)
            for (int t = 0; t < 5; t++) t64[r][t] = tok[r][t];
        raw_tokens(path, H5T_STD_I64LE, H5T_NATIVE_LLONG, t64, 3, 5, 256);
        rc = ppdl_data_open(path, &gpt, &d, err, sizeof err);
        rc = rc ? rc : ppdl_data_read(&d, 2, 1, in, &tg[0][0], err, sizeof err);
        ok(rc == 0 && in[0][0] == 2 && tg[0][3] == 6, "int64 tokens (numpy's default) are read (%s)", rc ? err : "");
        if (d.file >= 0) ppdl_data_close(&d);
    }

    path = tpath("numpy-defaults.h5");
    {
        /* float64 features and int64 labels: what h5py writes for numpy's default arrays */
        double x64[4][16];
        long long y64[4] = {3, 2, 1, 0};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 16; j++) x64[i][j] = 0.25 * i - 0.5 * j;
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t dims[2] = {4, 16}, ld[1] = {4};
        put_dataset(f, "features", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, x64);
        put_dataset(f, "labels", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, ld, y64);
        H5Fclose(f);
        float x[2 * 16];
        int32_t y[2];
        rc = ppdl_data_open(path, &mlp, &d, err, sizeof err);
        rc = rc ? rc : ppdl_data_read(&d, 3, 2, x, y, err, sizeof err);
        /* exact: these values are multiples of 1/4, representable in float32 */
        ok(rc == 0 && x[5] == (float)x64[3][5] && x[16 + 7] == (float)x64[0][7] && y[0] == 0 && y[1] == 3,
           "float64 features and int64 labels (numpy's defaults) are read (%s)", rc ? err : "");
        if (d.file >= 0) ppdl_data_close(&d);
    }

    path = tpath("tok-for-mlp.h5");
    raw_tokens(path, H5T_STD_I32LE, H5T_NATIVE_INT32, tok, 3, 5, 256);
    expect_fail(ppdl_data_open(path, &mlp, &d, err, sizeof err), err, path,
                "holds tokens (language modelling) but the model is an mlp", NULL, "tokens for an mlp");

    int32_t lab[4] = {0, 1, 2, 3};
    path = tpath("feat-width.h5");
    raw_features(path, 4, 15, 4, lab);
    expect_fail(ppdl_data_open(path, &mlp, &d, err, sizeof err), err, path, "/features", "in_features is 16",
                "features of the wrong width");

    path = tpath("feat-for-gpt.h5");
    raw_features(path, 4, 16, 4, lab);
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "holds features", "gpt",
                "features for a gpt");
    expect_fail(ppdl_data_open(path, &cnn, &d, err, sizeof err), err, path, "images [N, 2, 8, 8]", "--image 2,8,8",
                "features for a cnn");

    path = tpath("labels-len.h5");
    raw_features(path, 4, 16, 3, lab);
    expect_fail(ppdl_data_open(path, &mlp, &d, err, sizeof err), err, path, "/labels has shape [3]", "4 samples",
                "labels of the wrong length");

    path = tpath("label-range.h5");
    lab[2] = 4; /* mlp-tiny has 4 classes: 0..3 */
    raw_features(path, 4, 16, 4, lab);
    lab[2] = 2;
    rc = ppdl_data_open(path, &mlp, &d, err, sizeof err);
    {
        int32_t y[4];
        float x[4 * 16];
        rc = rc ? rc : ppdl_data_read(&d, 0, 4, x, y, err, sizeof err);
    }
    if (d.file >= 0) ppdl_data_close(&d);
    expect_fail(rc, err, path, "/labels row 2: label 4 is outside [0, 4)", NULL, "a label out of range");

    path = tpath("img-shape.h5");
    {
        long shape[3] = {2, 8, 7};
        float x[2 * 2 * 8 * 7] = {0};
        int32_t y[2] = {0, 1};
        rc = ppdl_data_write_classif(path, x, y, 2, 3, shape, err, sizeof err);
    }
    expect_fail(rc ? rc : ppdl_data_open(path, &cnn, &d, err, sizeof err), err, path, "/images has shape [2, 2, 8, 7]",
                "[N, 2, 8, 8]", "images of the wrong shape");

    path = tpath("good.h5"); /* the model file of bad_models() */
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "model file, not data", NULL,
                "a model file given as data");

    path = tpath("text.h5");
    expect_fail(ppdl_data_open(path, &gpt, &d, err, sizeof err), err, path, "not an HDF5 file", NULL,
                "a text file given as data");

    ppdl_model_free(&gpt);
    ppdl_model_free(&mlp);
    ppdl_model_free(&cnn);
}

static void remove_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) diag("could not remove %s", dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ppdl-test-io-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a temporary directory %s\n", dir);
        return 1;
    }
    round_trip("gpt-tiny", NULL, NULL);                 /* tied */
    round_trip("gpt-tiny", "tie_embeddings", "0");      /* untied: two datasets */
    tied_layout();
    round_trip("mlp-tiny", NULL, NULL);  /* gelu activations */
    round_trip("mlp", "activation", "none");
    round_trip("cnn-tiny", NULL, NULL);
    bad_models();
    tokens_round_trip();
    {
        long feat[1] = {16}, img[3] = {2, 8, 8}, img_mlp[3] = {1, 4, 4};
        classif_round_trip("mlp-tiny", 1, feat, 7, 5, 10);   /* 5,6,0..6,0: wraps twice */
        classif_round_trip("cnn-tiny", 3, img, 3, 2, 2);     /* 2, 0 */
        classif_round_trip("mlp-tiny", 3, img_mlp, 4, -3, 4); /* images that flatten to in_features */
    }
    bad_data();
    remove_dir();
    done_testing();
    return exit_status();
}
