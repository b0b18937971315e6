/* fuzz_safetensors.c — libFuzzer target: io/safetensors.c, the reader and the writer.
 *
 * An input is the bytes of a .safetensors file, written to a temporary file and opened.
 *   refused   the message starts with the file's name
 *   accepted  every tensor lies inside the data, has numel x its dtype's size bytes, and
 *             no two overlap; each tensor of at most 2^20 values is read (a refusal,
 *             for a non-finite value, names the file); the ones read are written again
 *             as F32 (ppdl_st_create, ppdl_st_write), that file is opened and read
 *             back: the same names, shapes and float32 bits.
 * Build and run: perf/fuzz/build, perf/fuzz/run safetensors SECONDS (perf/fuzz/README.md).
 */
#include "io/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_READ (1u << 20)

static char path[256], again[256];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what, const char *err)
{
    if (cond) return;
    fprintf(stderr, "fuzz_safetensors: %s (message: '%s')\n", what, err ? err : "");
    __builtin_trap();
}

static size_t dtype_bytes(int d)
{
    return d == PPDL_ST_F32 ? 4 : 2;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/ppdl-fuzz-st-%d.safetensors", dir, (int)getpid());
    snprintf(again, sizeof again, "%s/ppdl-fuzz-st-again-%d.safetensors", dir, (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp)) {
        perror(path);
        abort();
    }
    char err[1024] = "";
    ppdl_st_file f;
    if (ppdl_st_open(path, &f, err, sizeof err) != 0) {
        check(strncmp(err, path, strlen(path)) == 0, "a refused file's message names it", err);
        unlink(path);
        return 0;
    }
    uint64_t data_bytes = size - f.data_start;
    check(f.data_start >= 8 && f.data_start <= size, "the header lies inside the file", NULL);
    /* the promises of an accepted file, and the tensors small enough to read */
    float **vals = calloc((size_t)f.n + 1, sizeof *vals);
    int *keep = calloc((size_t)f.n + 1, sizeof *keep), nkeep = 0;
    check(vals && keep, "memory", NULL);
    for (int i = 0; i < f.n; i++) {
        const ppdl_st_tensor *t = &f.t[i];
        check(t->begin <= t->end && t->end <= data_bytes, "a tensor lies inside the data", t->name);
        check(t->end - t->begin == t->numel * dtype_bytes(t->dtype), "bytes = numel x the dtype's size", t->name);
        for (int j = 0; j < i; j++)
            check(f.t[j].end <= t->begin || t->end <= f.t[j].begin || t->begin == t->end ||
                      f.t[j].begin == f.t[j].end,
                  "no two tensors overlap", t->name);
        check(ppdl_st_find(&f, t->name) != NULL, "a tensor is found by its name", t->name);
        if (t->numel > MAX_READ) continue;
        vals[i] = malloc((t->numel ? t->numel : 1) * sizeof(float));
        check(vals[i] != NULL, "memory", NULL);
        if (ppdl_st_read(&f, t, vals[i], err, sizeof err) != 0) {
            check(strncmp(err, path, strlen(path)) == 0, "a refused tensor's message names the file", err);
            free(vals[i]);
            vals[i] = NULL;
            continue;
        }
        keep[nkeep++] = i;
    }
    /* the tensors read, written again as F32 and read back: the same bits */
    if (nkeep > 0) {
        char **names = malloc((size_t)nkeep * sizeof *names);
        int *ndims = malloc((size_t)nkeep * sizeof *ndims);
        int64_t(*shapes)[PPDL_ST_MAX_DIMS] = malloc((size_t)nkeep * sizeof *shapes);
        check(names && ndims && shapes, "memory", NULL);
        for (int k = 0; k < nkeep; k++) {
            const ppdl_st_tensor *t = &f.t[keep[k]];
            names[k] = t->name;
            ndims[k] = t->ndim;
            memcpy(shapes[k], t->shape, sizeof shapes[k]);
        }
        ppdl_st_file w;
        int rc = ppdl_st_create(again, &w, nkeep, names, ndims, (const int64_t(*)[PPDL_ST_MAX_DIMS])shapes, err,
                                sizeof err);
        check(rc == 0, "an accepted file's tensors can be written", err);
        for (int k = 0; k < nkeep && rc == 0; k++) rc = ppdl_st_write(&w, k, vals[keep[k]], err, sizeof err);
        check(rc == 0, "every tensor is written", err);
        check(ppdl_st_close_write(&w, err, sizeof err) == 0, "the written file closes", err);
        ppdl_st_file r;
        check(ppdl_st_open(again, &r, err, sizeof err) == 0, "the written file is accepted", err);
        check(r.n == nkeep, "the written file holds the tensors written", NULL);
        for (int k = 0; k < nkeep; k++) {
            const ppdl_st_tensor *a = &f.t[keep[k]], *b = ppdl_st_find(&r, a->name);
            check(b && b->dtype == PPDL_ST_F32 && b->ndim == a->ndim && b->numel == a->numel &&
                      memcmp(b->shape, a->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0,
                  "a written tensor has its name and shape", a->name);
            float *v = malloc((a->numel ? a->numel : 1) * sizeof(float));
            check(v && ppdl_st_read(&r, b, v, err, sizeof err) == 0, "a written tensor reads back", err);
            check(memcmp(v, vals[keep[k]], a->numel * sizeof(float)) == 0, "the same float32 bits", a->name);
            free(v);
        }
        ppdl_st_close(&r);
        unlink(again);
        free(names);
        free(ndims);
        free(shapes);
    }
    for (int i = 0; i < f.n; i++) free(vals[i]);
    free(vals);
    free(keep);
    ppdl_st_close(&f);
    unlink(path);
    return 0;
}
