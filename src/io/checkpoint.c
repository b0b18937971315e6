/* checkpoint.c — write and read checkpoints with parallel HDF5 (layout and contract:
 * checkpoint.h).
 *
 * Collective rules of parallel HDF5 (HDF Group, "Collective Calling Requirements"):
 * H5Fcreate/H5Fopen/H5Fclose, every H5Gcreate/H5Dcreate/H5Acreate/H5Awrite must be
 * made by all ranks of the communicator, with the same arguments, in the same order.
 * So the writer builds the whole file's structure on every rank from what every rank
 * knows alike (the model, the info, the checksums agreed beforehand) and only the raw
 * data of the datasets is rank-specific: each rank writes the datasets of its own
 * layers with independent I/O (one writer per dataset; collective I/O would make every
 * rank join every dataset's write with an empty selection, for no aggregation gain).
 * Readers open the file collectively and read their own datasets independently.
 *
 * Failures: a metadata call that fails on one rank alone would leave the others in a
 * collective call forever, so such failures (they mean a broken library or no memory,
 * not a full disk: metadata reaches the disk at H5Fclose) abort the job at once. Data
 * writes, close, sync and the read-back fail locally; the ranks then agree (one
 * MPI_Allreduce per phase), remove PATH.tmp, and PATH stays as it was.
 */
#include "io/checkpoint.h"
#include "io/h5util.h"
#include "core/error.h"
#include "core/util.h"
#include "io/model_io.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* messages: every one starts with the file name */

/* 1 when every rank of comm passes ok != 0 */
static int agree(MPI_Comm comm, int ok)
{
    int all;
    PPDL_CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
    return all;
}

/* ------------------------------------------------------------------------------------ */
/* Fletcher-64 over 32-bit words (each float's bit pattern, so it does not depend on the
 * byte order): a = sum of words, b = sum of the running a, both mod 2^32 - 1. The sums
 * are reduced every 92679 words, the most that cannot overflow 64 bits. */

size_t ppdl_ckpt_fletcher(ppdl_fletcher *state, const float *x, size_t n)
{
    const uint64_t mod = 0xffffffffu;
    uint64_t a = state->a, b = state->b;
    size_t bad = 0, i = 0;
    while (i < n) {
        size_t end = n - i > 92679 ? i + 92679 : n;
        for (; i < end; i++) {
            uint32_t w;
            memcpy(&w, &x[i], sizeof w);
            a += w;
            b += a;
            bad += (w & 0x7f800000u) == 0x7f800000u;   /* exponent all ones: inf or nan */
        }
        a %= mod;
        b %= mod;
    }
    state->a = a;
    state->b = b;
    return bad;
}

unsigned long long ppdl_ckpt_fletcher_value(const ppdl_fletcher *state)
{
    return (unsigned long long)state->b << 32 | (unsigned long long)state->a;
}

/* ------------------------------------------------------------------------------------ */
/* the attributes of the model file the run started from, kept in memory so that every
 * checkpoint carries them: the model reader's rules (model_io.c) then hold for the
 * checkpoint without this file knowing them */

typedef struct snap_attr {
    char name[64];
    char cls;                      /* 'i' integer, 'f' float, 's' string */
    hid_t file_type;               /* numbers: a transient copy of the stored type */
    long long i;
    double f;
    char *s;
} snap_attr;

typedef struct snap_obj {
    int n;
    snap_attr *a;
} snap_obj;

struct ppdl_ckpt {
    const ppdl_model *m;
    int L;                         /* m->L, kept: the caller may free m before destroy */
    /* this rank's layers: n_ranges ascending ranges first[i]..last[i] (one, or one per
     * stage a rank holds under interleaved / zb-v), their arrays back to back */
    int n_ranges;
    int first[PPDL_CKPT_MAX_RANGES], last[PPDL_CKPT_MAX_RANGES];
    snap_obj root, *layers;        /* layers: [L] */
};

/* a tied weight held once by this rank (its one range holds both tied layers) */
static int tie_within(const ppdl_ckpt *k)
{
    return k->n_ranges == 1 && ppdl_model_tie_within(k->m, k->first[0], k->last[0]);
}

typedef struct snap_ctx {
    snap_obj *obj;
    int failed;
} snap_ctx;

/* a string attribute, variable- or fixed-length, malloc'd */
static char *read_string(hid_t a, hid_t type)
{
    char *out = NULL;
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mem, H5Tget_cset(type));
    if (H5Tis_variable_str(type) > 0) {
        char *s = NULL;
        H5Tset_size(mem, H5T_VARIABLE);
        if (H5Aread(a, mem, &s) >= 0 && s) out = strdup(s);
        if (s) H5free_memory(s);
    } else {
        size_t n = H5Tget_size(type);
        if (n > 0 && n < (1u << 24)) {
            out = ppdl_xcalloc(n + 1, 1);
            H5Tset_size(mem, n + 1);
            H5Tset_strpad(mem, H5T_STR_NULLTERM);
            if (H5Aread(a, mem, out) < 0) {
                free(out);
                out = NULL;
            }
        }
    }
    H5Tclose(mem);
    return out;
}

static herr_t snap_one(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    snap_ctx *sc = data;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), type = -1, space = -1;
    if (a < 0) goto bad;
    type = H5Aget_type(a);
    space = H5Aget_space(a);
    if (type < 0 || space < 0) goto bad;
    if (H5Sget_simple_extent_npoints(space) != 1) goto skip;   /* the model format has none */
    snap_attr at;
    memset(&at, 0, sizeof at);
    at.file_type = -1;
    snprintf(at.name, sizeof at.name, "%s", name);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER:
        at.cls = 'i';
        if (H5Aread(a, H5T_NATIVE_LLONG, &at.i) < 0) goto bad;
        at.file_type = H5Tcopy(type);
        break;
    case H5T_FLOAT:
        at.cls = 'f';
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &at.f) < 0) goto bad;
        at.file_type = H5Tcopy(type);
        break;
    case H5T_STRING:
        at.cls = 's';
        at.s = read_string(a, type);
        if (!at.s) goto bad;
        break;
    default: goto skip;
    }
    snap_obj *o = sc->obj;
    o->a = realloc(o->a, (size_t)(o->n + 1) * sizeof *o->a);
    PPDL_CHECK(o->a != NULL, "out of memory");
    o->a[o->n++] = at;
skip:
    H5Sclose(space);
    H5Tclose(type);
    H5Aclose(a);
    return 0;
bad:
    ppdl_h5_close(&space, H5Sclose);
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&a, H5Aclose);
    sc->failed = 1;
    return -1;
}

static int snap_read(hid_t obj, snap_obj *o)
{
    snap_ctx sc = {o, 0};
    hsize_t idx = 0;
    /* by name: the same order on every rank, which the collective writes need */
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, snap_one, &sc) < 0 || sc.failed) return -1;
    return 0;
}

static void snap_free(snap_obj *o)
{
    for (int i = 0; i < o->n; i++) {
        if (o->a[i].file_type >= 0) H5Tclose(o->a[i].file_type);
        free(o->a[i].s);
    }
    free(o->a);
    memset(o, 0, sizeof *o);
}

ppdl_ckpt *ppdl_ckpt_create(const char *model_path, const ppdl_model *m, int first, int last,
                            char *err, size_t errlen)
{
    return ppdl_ckpt_create_ranges(model_path, m, 1, &first, &last, err, errlen);
}

ppdl_ckpt *ppdl_ckpt_create_ranges(const char *model_path, const ppdl_model *m, int n, const int *first,
                                   const int *last, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {model_path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (n < 1 || n > PPDL_CKPT_MAX_RANGES) {
        ppdl_h5_fail(&c, "%d layer ranges requested: expected 1 to %d", n, PPDL_CKPT_MAX_RANGES);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (first[i] < 0 || last[i] >= m->L || first[i] > last[i] + 1 || (i > 0 && first[i] <= last[i - 1])) {
            ppdl_h5_fail(&c, "layers %d..%d requested (range %d of %d), the model has layers 0..%d (ranges "
                         "ascending, apart)", first[i], last[i], i + 1, n, m->L - 1);
            return NULL;
        }
    ppdl_ckpt *k = ppdl_xcalloc(1, sizeof *k);
    k->m = m;
    k->L = m->L;
    k->n_ranges = n;
    memcpy(k->first, first, (size_t)n * sizeof *first);
    memcpy(k->last, last, (size_t)n * sizeof *last);
    k->layers = ppdl_xcalloc((size_t)m->L, sizeof *k->layers);
    hid_t f = H5Fopen(model_path, H5F_ACC_RDONLY, H5P_DEFAULT), layers = -1, g = -1;
    if (f < 0) {
        ppdl_h5_fail(&c, "cannot open it again to copy its attributes into checkpoints (was it removed?)");
        goto bad;
    }
    if (snap_read(f, &k->root)) {
        ppdl_h5_fail(&c, "cannot read the root attributes");
        goto bad;
    }
    layers = H5Gopen2(f, "layers", H5P_DEFAULT);
    for (int l = 0; l < m->L; l++) {
        char name[16];
        snprintf(name, sizeof name, "%05d", l);
        g = layers >= 0 ? H5Gopen2(layers, name, H5P_DEFAULT) : -1;
        if (g < 0 || snap_read(g, &k->layers[l])) {
            ppdl_h5_fail(&c, "cannot read the attributes of /layers/%s", name);
            goto bad;
        }
        ppdl_h5_close(&g, H5Gclose);
    }
    H5Gclose(layers);
    H5Fclose(f);
    return k;
bad:
    ppdl_h5_close(&g, H5Gclose);
    ppdl_h5_close(&layers, H5Gclose);
    ppdl_h5_close(&f, H5Fclose);
    ppdl_ckpt_destroy(k);
    return NULL;
}

void ppdl_ckpt_destroy(ppdl_ckpt *k)
{
    if (!k) return;
    snap_free(&k->root);
    for (int l = 0; l < k->L; l++) snap_free(&k->layers[l]);
    free(k->layers);
    free(k);
}

/* ------------------------------------------------------------------------------------ */
/* the structure of the file, made alike on every rank (collective) */

/* Metadata calls are collective: one failing on one rank would hang the others, so a
 * failure ends the job here (see the top of the file). */
#define MUST(call, ...)                                                          \
    do {                                                                         \
        if ((call) < 0) ppdl_die(__VA_ARGS__);                                   \
    } while (0)

static void put_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, const void *v,
                     const char *path)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    MUST(a, "%s: cannot create attribute '%s'", path, name);
    MUST(H5Awrite(a, mem_type, v), "%s: cannot write attribute '%s'", path, name);
    H5Aclose(a);
    H5Sclose(space);
}

static void put_i64(hid_t obj, const char *name, long long v, const char *path)
{
    put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &v, path);
}

static void put_f64(hid_t obj, const char *name, double v, const char *path)
{
    put_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, path);
}

static void put_str(hid_t obj, const char *name, const char *v, const char *path)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);   /* what h5py writes for a str */
    put_attr(obj, name, type, type, &v, path);
    H5Tclose(type);
}

static void put_snap(hid_t obj, const snap_obj *o, const char *path)
{
    for (int i = 0; i < o->n; i++) {
        const snap_attr *a = &o->a[i];
        if (a->cls == 'i') put_attr(obj, a->name, a->file_type, H5T_NATIVE_LLONG, &a->i, path);
        else if (a->cls == 'f') put_attr(obj, a->name, a->file_type, H5T_NATIVE_DOUBLE, &a->f, path);
        else put_str(obj, a->name, a->s, path);
    }
}

static hid_t new_group(hid_t parent, const char *name, const char *path)
{
    hid_t g = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    MUST(g, "%s: cannot create group %s", path, name);
    return g;
}

/* the file's datasets in one order every rank knows: for each layer, for each of
 * params, m, v, for each parameter. dset[] holds their ids. */
typedef struct file_plan {
    int n_dsets;
    hid_t *dset;
    hid_t checksums;
} file_plan;

/* layer l's datasets in group g of /layers, /optimizer/m or /optimizer/v (`top`); a
 * tied lm_head.weight is a hard link to that group's 00000/wte instead (no id: -1) */
static void create_param_datasets(const ppdl_model *m, hid_t top, hid_t g, const ppdl_layer *l, hid_t dcpl,
                                  file_plan *fp, const char *path)
{
    for (int i = 0; i < l->n_params; i++) {
        const ppdl_param *p = &l->params[i];
        if (ppdl_model_is_tied(m, l->index, i)) {
            MUST(H5Lcreate_hard(top, "00000/wte", g, p->name, H5P_DEFAULT, H5P_DEFAULT),
                 "%s: cannot link %s of layer %d to wte", path, p->name, l->index);
            fp->dset[fp->n_dsets++] = -1;
            continue;
        }
        hsize_t dims[PPDL_MAX_DIMS];
        for (int d = 0; d < p->ndim; d++) dims[d] = (hsize_t)p->shape[d];
        hid_t space = H5Screate_simple(p->ndim, dims, NULL);
        hid_t d = H5Dcreate2(g, p->name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        MUST(d, "%s: cannot create dataset %s of layer %d", path, p->name, l->index);
        H5Sclose(space);
        fp->dset[fp->n_dsets++] = d;
    }
}

static void create_structure(const ppdl_ckpt *k, hid_t f, const ppdl_ckpt_info *info, file_plan *fp,
                             const char *path)
{
    const ppdl_model *m = k->m;
    /* raw data is written at once by its owner: no fill values, space allocated now
     * (parallel HDF5 allocates contiguous datasets early anyway) */
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);

    put_snap(f, &k->root, path);
    hid_t layers = new_group(f, "layers", path), opt = new_group(f, "optimizer", path);
    hid_t mg = new_group(opt, "m", path), vg = new_group(opt, "v", path);
    for (int l = 0; l < m->L; l++) {
        char name[16];
        snprintf(name, sizeof name, "%05d", l);
        hid_t g[3] = {new_group(layers, name, path), new_group(mg, name, path), new_group(vg, name, path)};
        put_snap(g[0], &k->layers[l], path);
        hid_t top[3] = {layers, mg, vg};
        for (int a = 0; a < 3; a++) {
            create_param_datasets(m, top[a], g[a], &m->layers[l], dcpl, fp, path);
            H5Gclose(g[a]);
        }
    }
    put_str(opt, "algorithm", "adamw", path);
    put_f64(opt, "lr", info->lr, path);
    put_f64(opt, "beta1", info->beta1, path);
    put_f64(opt, "beta2", info->beta2, path);
    put_f64(opt, "eps", info->eps, path);
    put_f64(opt, "weight_decay", info->weight_decay, path);
    put_i64(opt, "step", info->adam_t, path);

    hid_t train = new_group(f, "train", path);
    int version = PPDL_CKPT_VERSION;
    put_attr(train, "ppdl_checkpoint_version", H5T_STD_I32LE, H5T_NATIVE_INT, &version, path);
    put_i64(train, "step", info->step, path);
    put_i64(train, "data_position", info->data_position, path);
    put_i64(train, "seed", info->seed, path);
    put_i64(train, "batch_size", info->batch_size, path);
    put_i64(train, "micro_batches", info->micro_batches, path);
    put_i64(train, "ranks", info->ranks, path);
    put_str(train, "schedule", info->schedule, path);
    put_str(train, "lr_schedule", info->lr_schedule[0] ? info->lr_schedule : "constant", path);
    put_i64(train, "warmup", info->warmup, path);
    put_f64(train, "min_lr", info->min_lr, path);
    put_i64(train, "decay_steps", info->decay_steps, path);
    put_f64(train, "decay_fraction", info->decay_fraction, path);
    put_f64(train, "clip_grad_norm", info->clip_grad_norm, path);
    put_i64(train, "shuffle", info->shuffle, path);
    put_str(train, "precision", info->precision[0] ? info->precision : "fp32", path);
    put_str(train, "plan", info->plan_json ? info->plan_json : "", path);
    hsize_t dims[2] = {(hsize_t)m->L, 3};
    hid_t space = H5Screate_simple(2, dims, NULL);
    fp->checksums = H5Dcreate2(train, "checksums", H5T_STD_U64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    MUST(fp->checksums, "%s: cannot create /train/checksums", path);
    H5Sclose(space);
    H5Gclose(train);
    H5Gclose(mg);
    H5Gclose(vg);
    H5Gclose(opt);
    H5Gclose(layers);
    H5Pclose(dcpl);
}

/* index of layer l's first dataset in file_plan order */
static int first_dset(const ppdl_model *m, int l)
{
    int n = 0;
    for (int i = 0; i < l; i++) n += 3 * m->layers[i].n_params;
    return n;
}

/* write this rank's layers: dataset ids in file_plan order, arrays in arena order */
static int write_my_layers(const ppdl_ckpt *k, file_plan *fp, const float *const arr[3], ppdl_h5_ctx *c)
{
    const ppdl_model *m = k->m;
    size_t off = 0;
    for (int r = 0; r < k->n_ranges; r++)
    for (int l = k->first[r]; l <= k->last[r]; l++) {
        const ppdl_layer *ly = &m->layers[l];
        int d = first_dset(m, l);
        size_t o = off;
        for (int a = 0; a < 3; a++) {
            o = off;
            for (int i = 0; i < ly->n_params; i++, d++) {
                if (fp->dset[d] < 0) { /* a tied lm_head.weight: layer 0's wte, written by its owner */
                    if (!tie_within(k)) o += ly->params[i].numel;
                    continue;
                }
                if (H5Dwrite(fp->dset[d], H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, arr[a] + o) < 0)
                    return ppdl_h5_fail(c, "cannot write %s/%05d/%s (disk full?)",
                                a == 0 ? "/layers" : a == 1 ? "/optimizer/m" : "/optimizer/v", l,
                                ly->params[i].name);
                o += ly->params[i].numel;
            }
        }
        off = o;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* reading a rank's layers, for resuming and for checking a fresh write */

static const char *const group_of[3] = {"layers", "optimizer/m", "optimizer/v"};
static const char *const what_of[3] = {"parameters", "AdamW first moments", "AdamW second moments"};

static hid_t open_dataset(ppdl_h5_ctx *c, hid_t f, int a, int l, const ppdl_param *p)
{
    char name[128];
    snprintf(name, sizeof name, "/%s/%05d/%s", group_of[a], l, p->name);
    if (H5Lexists(f, group_of[a], H5P_DEFAULT) <= 0 || H5Oexists_by_name(f, name, H5P_DEFAULT) <= 0) {
        ppdl_h5_fail(c, "%s is missing: not a complete checkpoint", name);
        return -1;
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) {
        ppdl_h5_fail(c, "%s is not a dataset", name);
        return -1;
    }
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims[H5S_MAX_RANK];
    int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    int okay = type >= 0 && H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 4 && ndim == p->ndim &&
               H5Sget_simple_extent_dims(space, dims, NULL) >= 0;
    for (int i = 0; okay && i < ndim; i++) okay = dims[i] == (hsize_t)p->shape[i];
    ppdl_h5_close(&type, H5Tclose);
    ppdl_h5_close(&space, H5Sclose);
    if (!okay) {
        ppdl_h5_fail(c, "%s: not a float32 dataset of the parameter's shape", name);
        H5Dclose(d);
        return -1;
    }
    return d;
}

/* /train/checksums, [L, 3] */
static int read_checksums(ppdl_h5_ctx *c, hid_t f, int L, unsigned long long *sums)
{
    if (H5Oexists_by_name(f, "/train/checksums", H5P_DEFAULT) <= 0)
        return ppdl_h5_fail(c, "/train/checksums is missing: not a complete checkpoint");
    hid_t d = H5Dopen2(f, "/train/checksums", H5P_DEFAULT);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t dims[2] = {0, 0};
    int okay = space >= 0 && H5Sget_simple_extent_ndims(space) == 2 &&
               H5Sget_simple_extent_dims(space, dims, NULL) >= 0 && dims[0] == (hsize_t)L && dims[1] == 3;
    okay = okay && H5Dread(d, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, sums) >= 0;
    ppdl_h5_close(&space, H5Sclose);
    ppdl_h5_close(&d, H5Dclose);
    if (!okay) return ppdl_h5_fail(c, "/train/checksums: expected uint64 [%d, 3] (layers x params, m, v)", L);
    return 0;
}

/* Read layers first..last. dst[a] NULL: read into scratch only to check the checksums
 * (expected given), the check after a write. Collective open and close. */
static int read_layers(ppdl_h5_ctx *c, MPI_Comm comm, const ppdl_model *m, int first, int last,
                       float *const dst[3], const unsigned long long *expected)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    hid_t f = H5Fopen(c->path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (!agree(comm, f >= 0)) {
        ppdl_h5_close(&f, H5Fclose);
        return f >= 0 ? ppdl_h5_fail(c, "cannot be opened on another rank") : ppdl_h5_fail(c, "not an HDF5 file (or truncated)");
    }
    int rc = 0;
    unsigned long long *sums = NULL;
    float *scratch = NULL;
    if (!expected) {
        sums = ppdl_xmalloc(3 * (size_t)m->L * sizeof *sums);
        rc = read_checksums(c, f, m->L, sums);
        expected = sums;
    }
    size_t off = 0, biggest = 1;
    for (int l = first; l <= last; l++)
        for (int i = 0; i < m->layers[l].n_params; i++)
            if (m->layers[l].params[i].numel > biggest) biggest = m->layers[l].params[i].numel;
    int within = ppdl_model_tie_within(m, first, last);
    if (!dst[0] || within) scratch = ppdl_xmalloc(biggest * sizeof(float));
    for (int l = first; l <= last && !rc; l++) {
        const ppdl_layer *ly = &m->layers[l];
        size_t held = 0;
        for (int a = 0; a < 3 && !rc; a++) {
            ppdl_fletcher fl = {0, 0};
            float *out = dst[a] ? dst[a] + off : NULL;
            for (int i = 0; i < ly->n_params && !rc; i++) {
                const ppdl_param *p = &ly->params[i];
                /* a tied weight held once is wte's: read through its link for the checksum only */
                int skip = within && ppdl_model_is_tied(m, l, i);
                float *buf = out && !skip ? out : scratch;
                hid_t d = open_dataset(c, f, a, l, p);
                if (d < 0) { rc = -1; break; }
                if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
                    rc = ppdl_h5_fail(c, "/%s/%05d/%s: cannot read the data (damaged file?)", group_of[a], l, p->name);
                H5Dclose(d);
                ppdl_ckpt_fletcher(&fl, buf, p->numel);
                if (out && !skip) out += p->numel;
                if (a == 0 && !skip) held += p->numel;
            }
            if (!rc && ppdl_ckpt_fletcher_value(&fl) != expected[3 * l + a])
                rc = ppdl_h5_fail(c, "the %s of layer %d do not match their checksum: the file is damaged", what_of[a], l);
        }
        off += held;
    }
    free(scratch);
    free(sums);
    if (H5Fclose(f) < 0 && !rc) rc = ppdl_h5_fail(c, "cannot be closed");
    return rc;
}

int ppdl_ckpt_read_layers(const char *path, MPI_Comm comm, const ppdl_model *m, int first, int last,
                          float *params, float *adam_m, float *adam_v, double *seconds,
                          char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    double t0 = ppdl_now_s();
    float *const dst[3] = {params, adam_m, adam_v};
    int rc = read_layers(&c, comm, m, first, last, dst, NULL);
    if (seconds) *seconds = ppdl_now_s() - t0;
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* writing */

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Checksums of this rank's layers, agreed with the others (each layer has exactly one
 * owner, so XOR-combining zero-filled tables assembles the whole one). */
static int agree_checksums(const ppdl_ckpt *k, MPI_Comm comm, const float *const arr[3],
                           unsigned long long *sums, ppdl_h5_ctx *c)
{
    const ppdl_model *m = k->m;
    int L = m->L, rc = 0;
    unsigned long long *mine = ppdl_xcalloc(3 * (size_t)L, sizeof *mine);
    int *own = ppdl_xcalloc((size_t)L, sizeof *own), *owners = ppdl_xcalloc((size_t)L, sizeof *owners);
    size_t off = 0;
    int within = tie_within(k);
    for (int r = 0; r < k->n_ranges; r++)
    for (int l = k->first[r]; l <= k->last[r]; l++) {
        const ppdl_layer *ly = &m->layers[l];
        own[l] = 1;
        size_t o = off;
        for (int a = 0; a < 3; a++) {
            ppdl_fletcher fl = {0, 0};
            size_t bad = 0;
            o = off;
            /* each dataset of the layer in table order, as a reader sees them: a tied
             * lm_head.weight held once is wte, the first floats of the arrays */
            for (int i = 0; i < ly->n_params; i++) {
                int shared = within && ppdl_model_is_tied(m, l, i);
                bad += ppdl_ckpt_fletcher(&fl, arr[a] + (shared ? 0 : o), ly->params[i].numel);
                if (!shared) o += ly->params[i].numel;
            }
            mine[3 * l + a] = ppdl_ckpt_fletcher_value(&fl);
            if (bad && !rc)
                rc = ppdl_h5_fail(c, "not written: the %s of layer %d hold %zu non-finite values (the training "
                             "diverged?); the previous checkpoint is kept", what_of[a], l, bad);
        }
        off = o;
    }
    PPDL_CHECK_MPI(MPI_Allreduce(mine, sums, 3 * L, MPI_UNSIGNED_LONG_LONG, MPI_BXOR, comm));
    PPDL_CHECK_MPI(MPI_Allreduce(own, owners, L, MPI_INT, MPI_SUM, comm));
    for (int l = 0; l < L; l++)
        PPDL_CHECK(owners[l] == 1, "checkpoint: layer %d is on %d ranks (expected exactly one)", l, owners[l]);
    free(mine);
    free(own);
    free(owners);
    return rc;
}

int ppdl_ckpt_write(ppdl_ckpt *k, const char *path, MPI_Comm comm, const float *params,
                    const float *adam_m, const float *adam_v, const ppdl_ckpt_info *info,
                    ppdl_ckpt_stats *stats, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const ppdl_model *m = k->m;
    int rank;
    MPI_Comm_rank(comm, &rank);
    memset(stats, 0, sizeof *stats);
    double t0 = ppdl_now_s();
    const float *const arr[3] = {params, adam_m, adam_v};
    char tmp[4096 + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return ppdl_h5_fail(&c, "path too long");

    /* 1. checksums; refuse non-finite state before touching any file */
    unsigned long long *sums = ppdl_xmalloc(3 * (size_t)m->L * sizeof *sums);
    int rc = agree_checksums(k, comm, arr, sums, &c);
    if (!agree(comm, rc == 0)) {
        free(sums);
        if (rc) return -1;
        ppdl_errf(err, errlen, "%s: not written: another rank's state is not finite (see its message)", path);
        return -2;
    }

    /* 2. create PATH.tmp; open() first on rank 0, whose errno says why it cannot be */
    int create_errno = 0;
    if (rank == 0) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) create_errno = errno;
        else close(fd);
    }
    PPDL_CHECK_MPI(MPI_Bcast(&create_errno, 1, MPI_INT, 0, comm));
    if (create_errno) {
        free(sums);
        return ppdl_h5_fail(&c, "cannot create %s: %s", tmp, strerror(create_errno));
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    /* metadata read and written collectively: rank 0 does the I/O, the others get it by
     * MPI instead of all of them hitting the file system (recommended at scale) */
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (!agree(comm, f >= 0)) {
        ppdl_h5_close(&f, H5Fclose);
        if (rank == 0) unlink(tmp);
        free(sums);
        return ppdl_h5_fail(&c, "cannot create %s as an HDF5 file with MPI-IO", tmp);
    }

    /* 3. structure (collective), 4. this rank's data (independent) */
    int n_dsets = 0;
    for (int l = 0; l < m->L; l++) n_dsets += 3 * m->layers[l].n_params;
    file_plan fp = {0, ppdl_xmalloc(((size_t)n_dsets + 1) * sizeof(hid_t)), -1};
    create_structure(k, f, info, &fp, tmp);
    rc = write_my_layers(k, &fp, arr, &c);
    if (!rc && rank == 0 &&
        H5Dwrite(fp.checksums, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, sums) < 0)
        rc = ppdl_h5_fail(&c, "cannot write /train/checksums (disk full?)");
    for (int i = 0; i < fp.n_dsets; i++)
        if (fp.dset[i] >= 0) H5Dclose(fp.dset[i]);
    H5Dclose(fp.checksums);
    free(fp.dset);
    int all_ok = agree(comm, rc == 0);
    if (all_ok) {
        /* the mark of a finished file, after all the data */
        hid_t train = H5Gopen2(f, "train", H5P_DEFAULT);
        int one = 1;
        MUST(train, "%s: cannot open /train", tmp);
        put_attr(train, "complete", H5T_STD_I32LE, H5T_NATIVE_INT, &one, tmp);
        H5Gclose(train);
    }
    if (H5Fclose(f) < 0 && !rc) rc = ppdl_h5_fail(&c, "cannot finish writing %s (disk full?)", tmp);
    all_ok = agree(comm, rc == 0);
    double t1 = ppdl_now_s();

    /* 5. to the disk: each rank syncs what it wrote (on a parallel file system each
     * client holds its own dirty pages) */
    if (all_ok && fsync_path(tmp, O_RDONLY) != 0) rc = ppdl_h5_fail(&c, "cannot sync %s: %s", tmp, strerror(errno));
    all_ok = all_ok && agree(comm, rc == 0);
    double t2 = ppdl_now_s();

    /* 6. read back this rank's layers against the checksums */
    if (all_ok) {
        ppdl_h5_ctx cv = {tmp, err, errlen};
        float *const none[3] = {NULL, NULL, NULL};
        /* one collective read per range: every rank has as many (one, or the stages
         * each rank holds) */
        for (int r = 0; r < k->n_ranges; r++) {
            int rr = read_layers(&cv, comm, m, k->first[r], k->last[r], none, sums);
            rc = rc ? rc : rr;
        }
        all_ok = agree(comm, rc == 0);
    }
    double t3 = ppdl_now_s();

    /* 7. commit: rename over the previous checkpoint, then make the rename durable */
    if (rank == 0) {
        struct stat sb;
        if (all_ok && stat(tmp, &sb) == 0) stats->bytes = (double)sb.st_size;
        if (all_ok && rename(tmp, path) != 0) {
            rc = ppdl_h5_fail(&c, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
            all_ok = 0;
        }
        if (all_ok) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", path);
            fsync_path(dirname(dir), O_RDONLY | O_DIRECTORY);
        } else {
            unlink(tmp);
        }
    }
    PPDL_CHECK_MPI(MPI_Bcast(&all_ok, 1, MPI_INT, 0, comm));
    PPDL_CHECK_MPI(MPI_Bcast(&stats->bytes, 1, MPI_DOUBLE, 0, comm));
    free(sums);
    double mine[4] = {t1 - t0, t2 - t1, t3 - t2, ppdl_now_s() - t0}, slowest[4];
    PPDL_CHECK_MPI(MPI_Allreduce(mine, slowest, 4, MPI_DOUBLE, MPI_MAX, comm));
    stats->write_s = slowest[0];
    stats->sync_s = slowest[1];
    stats->verify_s = slowest[2];
    stats->total_s = slowest[3];
    if (rc) return -1;
    if (!all_ok) {
        ppdl_errf(err, errlen, "%s: not written: another rank failed (see its message)", path);
        return -2;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* the state of a checkpoint, read by every rank on its own */

/* an integer attribute in [lo, hi] */
static int get_int(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, long long lo, long long hi,
                   long long *out)
{
    hid_t a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return -1;
    hid_t type = H5Aget_type(a);
    int okay = type >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Aread(a, H5T_NATIVE_LLONG, out) >= 0;
    ppdl_h5_close(&type, H5Tclose);
    H5Aclose(a);
    if (!okay) return ppdl_h5_fail(c, "%s attribute '%s' must be an integer", where, name);
    if (*out < lo || *out > hi)
        return ppdl_h5_fail(c, "%s attribute '%s' is %lld, expected %lld ... %lld", where, name, *out, lo, hi);
    return 0;
}

static int get_double(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name, double *out)
{
    hid_t a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return -1;
    hid_t type = H5Aget_type(a);
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    int okay = (cls == H5T_FLOAT || cls == H5T_INTEGER) && H5Aread(a, H5T_NATIVE_DOUBLE, out) >= 0;
    ppdl_h5_close(&type, H5Tclose);
    H5Aclose(a);
    if (!okay) return ppdl_h5_fail(c, "%s attribute '%s' must be a number", where, name);
    return 0;
}

static char *get_string(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name)
{
    hid_t a = ppdl_h5_open_scalar_attr(c, obj, where, name);
    if (a < 0) return NULL;
    hid_t type = H5Aget_type(a);
    char *s = type >= 0 && H5Tget_class(type) == H5T_STRING ? read_string(a, type) : NULL;
    ppdl_h5_close(&type, H5Tclose);
    H5Aclose(a);
    if (!s) ppdl_h5_fail(c, "%s attribute '%s' must be a string", where, name);
    return s;
}

/* The first hyperparameter in which two models differ, or NULL. Layer shapes follow
 * from these; they are compared too, in case a family gains one this list lacks. */
static const char *model_difference(const ppdl_model *a, const ppdl_model *b, char *va, char *vb, size_t len)
{
    if (strcmp(a->family, b->family)) {
        snprintf(va, len, "'%s'", a->family);
        snprintf(vb, len, "'%s'", b->family);
        return "family";
    }
    static const struct { const char *name; size_t off; } ints[] = {
        {"vocab_size", offsetof(ppdl_model, vocab_size)}, {"seq_len", offsetof(ppdl_model, seq_len)},
        {"d_model", offsetof(ppdl_model, d_model)}, {"n_heads", offsetof(ppdl_model, n_heads)},
        {"n_layers", offsetof(ppdl_model, n_layers)}, {"in_features", offsetof(ppdl_model, in_features)},
        {"hidden", offsetof(ppdl_model, hidden)}, {"n_classes", offsetof(ppdl_model, n_classes)},
        {"activation", offsetof(ppdl_model, activation)}, {"in_channels", offsetof(ppdl_model, in_channels)},
        {"height", offsetof(ppdl_model, height)}, {"width", offsetof(ppdl_model, width)},
        {"channels", offsetof(ppdl_model, channels)}, {"n_blocks", offsetof(ppdl_model, n_blocks)},
        {"layers in the chain", offsetof(ppdl_model, L)}, {"tie_embeddings", offsetof(ppdl_model, tie_embeddings)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int x = *(const int *)((const char *)a + ints[i].off), y = *(const int *)((const char *)b + ints[i].off);
        if (x != y) {
            if (!strcmp(ints[i].name, "activation")) {
                snprintf(va, len, "%s", ppdl_act_name(x));
                snprintf(vb, len, "%s", ppdl_act_name(y));
            } else {
                snprintf(va, len, "%d", x);
                snprintf(vb, len, "%d", y);
            }
            return ints[i].name;
        }
    }
    if (a->ln_eps != b->ln_eps) {
        snprintf(va, len, "%g", (double)a->ln_eps);
        snprintf(vb, len, "%g", (double)b->ln_eps);
        return "ln_eps";
    }
    for (int l = 0; l < a->L; l++) {
        const ppdl_layer *x = &a->layers[l], *y = &b->layers[l];
        int same = x->kind == y->kind && x->n_params == y->n_params;
        for (int i = 0; same && i < x->n_params; i++) {
            same = x->params[i].ndim == y->params[i].ndim && !strcmp(x->params[i].name, y->params[i].name);
            for (int d = 0; same && d < x->params[i].ndim; d++) same = x->params[i].shape[d] == y->params[i].shape[d];
        }
        if (!same) {
            snprintf(va, len, "layer %d (%s)", l, x->kind->name);
            snprintf(vb, len, "layer %d (%s) with other shapes", l, y->kind->name);
            return "structure";
        }
    }
    return NULL;
}

static int read_info(ppdl_h5_ctx *c, hid_t f, const ppdl_model *m, ppdl_ckpt_info *info)
{
    const long long big = 1LL << 62;
    long long v;
    if (H5Lexists(f, "train", H5P_DEFAULT) <= 0)
        return ppdl_h5_fail(c, "not a checkpoint (no /train group): a model file; to start from its weights with "
                       "a fresh optimizer, pass it as the MODEL argument without --resume");
    hid_t train = H5Gopen2(f, "train", H5P_DEFAULT), opt = -1;
    int rc = -1;
    if (train < 0) return ppdl_h5_fail(c, "/train is not a group");
    if (get_int(c, train, "/train", "ppdl_checkpoint_version", LLONG_MIN, LLONG_MAX, &v)) goto out;
    if (v > PPDL_CKPT_VERSION) {
        ppdl_h5_fail(c, "checkpoint format version %lld is newer than this ppdl reads (%d): update ppdl", v,
             PPDL_CKPT_VERSION);
        goto out;
    }
    if (v < 1) {
        ppdl_h5_fail(c, "checkpoint format version %lld is not valid (expected 1 ... %d)", v, PPDL_CKPT_VERSION);
        goto out;
    }
    if (H5Aexists(train, "complete") <= 0 || get_int(c, train, "/train", "complete", 1, 1, &v)) {
        ppdl_h5_fail(c, "an unfinished checkpoint (/train attribute 'complete' is not 1): its writer was stopped; "
                "use the previous checkpoint");
        goto out;
    }
    if (get_int(c, train, "/train", "step", 0, big, &info->step) ||
        get_int(c, train, "/train", "data_position", 0, big, &info->data_position) ||
        get_int(c, train, "/train", "seed", LLONG_MIN, LLONG_MAX, &info->seed) ||
        get_int(c, train, "/train", "batch_size", 1, big, &info->batch_size) ||
        get_int(c, train, "/train", "micro_batches", 1, big, &info->micro_batches) ||
        get_int(c, train, "/train", "ranks", 1, big, &info->ranks))
        goto out;
    char *s = get_string(c, train, "/train", "schedule");
    if (!s) goto out;
    snprintf(info->schedule, sizeof info->schedule, "%s", s);
    free(s);
    if (!(info->plan_json = get_string(c, train, "/train", "plan"))) goto out;
    /* the schedule and clipping: optional (checkpoints before they existed) */
    snprintf(info->lr_schedule, sizeof info->lr_schedule, "constant");
    if (H5Aexists(train, "lr_schedule") > 0) {
        if (!(s = get_string(c, train, "/train", "lr_schedule"))) goto out;
        snprintf(info->lr_schedule, sizeof info->lr_schedule, "%s", s);
        free(s);
        if (get_int(c, train, "/train", "warmup", 0, big, &info->warmup) ||
            get_double(c, train, "/train", "min_lr", &info->min_lr) ||
            get_int(c, train, "/train", "decay_steps", 0, big, &info->decay_steps) ||
            get_double(c, train, "/train", "decay_fraction", &info->decay_fraction) ||
            get_double(c, train, "/train", "clip_grad_norm", &info->clip_grad_norm))
            goto out;
    }

    /* the data order: optional (checkpoints before --shuffle) */
    info->shuffle = -1;
    if (H5Aexists(train, "shuffle") > 0 && get_int(c, train, "/train", "shuffle", -1, LLONG_MAX, &info->shuffle))
        goto out;
    /* the precision: optional (checkpoints before --precision) */
    snprintf(info->precision, sizeof info->precision, "fp32");
    if (H5Aexists(train, "precision") > 0) {
        if (!(s = get_string(c, train, "/train", "precision"))) goto out;
        snprintf(info->precision, sizeof info->precision, "%s", s);
        free(s);
    }

    if (H5Lexists(f, "optimizer", H5P_DEFAULT) <= 0) {
        ppdl_h5_fail(c, "group /optimizer is missing: not a complete checkpoint");
        goto out;
    }
    opt = H5Gopen2(f, "optimizer", H5P_DEFAULT);
    if (opt < 0) {
        ppdl_h5_fail(c, "/optimizer is not a group");
        goto out;
    }
    if (!(s = get_string(c, opt, "/optimizer", "algorithm"))) goto out;
    int adamw = !strcmp(s, "adamw");
    if (!adamw) ppdl_h5_fail(c, "/optimizer attribute 'algorithm' is '%s', this ppdl has only 'adamw'", s);
    free(s);
    if (!adamw || get_double(c, opt, "/optimizer", "lr", &info->lr) ||
        get_double(c, opt, "/optimizer", "beta1", &info->beta1) ||
        get_double(c, opt, "/optimizer", "beta2", &info->beta2) ||
        get_double(c, opt, "/optimizer", "eps", &info->eps) ||
        get_double(c, opt, "/optimizer", "weight_decay", &info->weight_decay) ||
        get_int(c, opt, "/optimizer", "step", 0, INT32_MAX, &info->adam_t))
        goto out;
    unsigned long long *sums = ppdl_xmalloc(3 * (size_t)m->L * sizeof *sums);
    rc = read_checksums(c, f, m->L, sums);
    free(sums);
out:
    ppdl_h5_close(&opt, H5Gclose);
    ppdl_h5_close(&train, H5Gclose);
    return rc;
}

int ppdl_ckpt_read_info(const char *path, const ppdl_model *m, ppdl_ckpt_info *info, char *err, size_t errlen)
{
    ppdl_h5_ctx c = {path, err, errlen};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    memset(info, 0, sizeof *info);
    /* the model part, with every check of the model reader */
    ppdl_model cm;
    if (ppdl_model_load_desc(path, &cm, err, errlen)) return -1;
    char va[96], vb[96];
    const char *diff = model_difference(&cm, m, va, vb, sizeof va);
    ppdl_model_free(&cm);
    if (diff)
        return ppdl_h5_fail(&c, "a checkpoint of another model: its %s is %s, the model being trained has %s "
                        "(another run's file? give each run its own --checkpoint)", diff, va, vb);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return ppdl_h5_fail(&c, "cannot be opened");
    int rc = read_info(&c, f, m, info);
    H5Fclose(f);
    if (rc) ppdl_ckpt_info_free(info);
    return rc;
}

void ppdl_ckpt_info_free(ppdl_ckpt_info *info)
{
    free(info->plan_json);
    info->plan_json = NULL;
}

int ppdl_ckpt_check_path(const char *path, char *err, size_t errlen)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return ppdl_errf(err, errlen, "--checkpoint %s: path too long", path);
    const char *d = dirname(dir);
    struct stat sb;
    if (stat(d, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ppdl_errf(err, errlen, "--checkpoint %s: folder %s does not exist", path, d);
    if (access(d, W_OK | X_OK) != 0)
        return ppdl_errf(err, errlen, "--checkpoint %s: cannot write in folder %s: %s", path, d, strerror(errno));
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ppdl_errf(err, errlen, "--checkpoint %s: exists and is not a file", path);
    /* an existing file is replaced only if it is a ppdl checkpoint: a model, data or
     * any other file given by mistake stays untouched */
    if (stat(path, &sb) == 0) {
        H5E_auto2_t fn;
        void *data;
        H5Eget_auto2(H5E_DEFAULT, &fn, &data);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        int is_ckpt = 0;
        hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
        if (f >= 0) {
            is_ckpt = H5Lexists(f, "/train", H5P_DEFAULT) > 0 && H5Lexists(f, "/optimizer", H5P_DEFAULT) > 0;
            H5Fclose(f);
        }
        H5Eset_auto2(H5E_DEFAULT, fn, data);
        if (!is_ckpt)
            return ppdl_errf(err, errlen, "--checkpoint %s: the file exists and is not a ppdl checkpoint; "
                                          "refusing to replace it (remove it or choose another name)", path);
    }
    return 0;
}
