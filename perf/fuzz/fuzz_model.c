/* fuzz_model.c — libFuzzer target: the validation of model.h5 files.
 *
 * Each input is the bytes of a file. It is written to a temporary file and read the way
 * ppdl reads a model: ppdl_model_load_desc (root attributes, hyperparameters, the layer
 * groups, every dataset's type and shape), then ppdl_model_load_params for all layers
 * (the values, each checked finite). Besides ASan/UBSan findings, the target checks
 * what every reader promises (model_io.h):
 *   - a refused file gets a message that starts with the file's name;
 *   - an accepted one has a chain of >= 1 layers whose parameters add up;
 *   - no HDF5 object is left open (a leaked handle is a leaked file descriptor in ppdl);
 * and it traps when one of them fails, so libFuzzer keeps the input.
 *
 * Models with more than 2^22 parameters are described but not loaded (a fuzzed file
 * declares terabytes easily; allocating them would test malloc, not ppdl).
 * Build and run: perf/fuzz/build, perf/fuzz/run model SECONDS (perf/fuzz/README.md).
 */
#include "io/model_io.h"
#include "core/error.h"

#include <hdf5.h>

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
    /* tmpfs when there is one: the file is rewritten for every input */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/ppdl-fuzz-model-%d.h5", dir, (int)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
        perror(path);
        abort();
    }
}

static void check(int cond, const char *what, const char *err)
{
    if (cond) return;
    fprintf(stderr, "fuzz_model: %s (message: '%s')\n", what, err ? err : "");
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_file(data, size);
    char err[PPDL_ERR_LEN] = "";
    ppdl_model m;
    int rc = ppdl_model_load_desc(path, &m, err, sizeof err);
    check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "ppdl_model_load_desc left HDF5 objects open", err);
    if (rc) {
        check(strncmp(err, path, strlen(path)) == 0, "a refused model's message does not name the file", err);
        check(m.layers == NULL && m.L == 0, "a refused model still holds layers", err);
        return 0;
    }
    check(m.L >= 1 && m.layers != NULL, "an accepted model has no layers", err);
    size_t n = ppdl_model_param_count(&m);
    if (n <= (1u << 22)) {
        float *host = malloc((n ? n : 1) * sizeof *host);
        err[0] = 0;
        rc = ppdl_model_load_params(path, &m, 0, m.L - 1, host, err, sizeof err);
        check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "ppdl_model_load_params left HDF5 objects open", err);
        if (rc) check(strncmp(err, path, strlen(path)) == 0, "refused weights: the message does not name the file", err);
        /* the last layer alone: the range a pipeline's last stage reads */
        rc = ppdl_model_load_params(path, &m, m.L - 1, m.L - 1, host, err, sizeof err);
        if (rc) check(strncmp(err, path, strlen(path)) == 0, "refused weights: the message does not name the file", err);
        free(host);
    }
    ppdl_model_free(&m);
    return 0;
}
