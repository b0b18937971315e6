/* test_util.c — options parsing, RNG determinism, plan construction/validation and the
 * backend's memory accounting and limit. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/plan.h"
#include "tap.h"

/* Two backends in one process (the op-by-op harness holds a CPU reference beside the
 * device under test) account separately: each has its own table of live allocations,
 * so neither's bytes, peak or limit move with the other's, and one cannot free the
 * other's pointer. */
static void two_backends(void)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_backend *x = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    ppdl_backend *y = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    ppdl_be_set_limit(x, 2048);
    void *a = ppdl_be_alloc(x, 2000, "a");
    void *b = ppdl_be_alloc(y, 5000, "b"); /* past x's limit, but y has none */
    ok(ppdl_be_in_use(x) == 2048 && ppdl_be_in_use(y) == 5120 && ppdl_be_limit(y) == 0,
       "two backends count their own bytes (%zu, %zu) under their own limits", ppdl_be_in_use(x),
       ppdl_be_in_use(y));
    ok(ppdl_be_try_alloc(x, 1, "over") == NULL, "the first is full, whatever the second holds");
    ppdl_be_free(y, b);
    ok(ppdl_be_in_use(x) == 2048 && ppdl_be_in_use(y) == 0 && ppdl_be_peak(y) == 5120 && ppdl_be_peak(x) == 2048,
       "freeing in the second leaves the first's bytes and peak alone");
    /* a pointer of x freed through y: with one table for every backend this passed
     * and took x's bytes off y's count; now y does not know it and the job dies */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(1);
        ppdl_be_free(y, a);
        _exit(0);
    }
    int status = 0, waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    int code = waited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ok(code == 70, "freeing one backend's pointer through another dies (exit %d)", code);
    ppdl_be_restore_peak(x, 0);
    ok(ppdl_be_peak(x) == 2048, "the peak is never put back below the bytes in use");
    ppdl_be_free(x, a);
    ppdl_be_restore_peak(x, 0);
    ok(ppdl_be_in_use(x) == 0 && ppdl_be_peak(x) == 0, "with nothing in use it can be put back to 0");
    ppdl_backend_destroy(x);
    ppdl_backend_destroy(y);
}

int main(void)
{
    size_t b;
    ok(ppdl_parse_size("512M", &b) == 0 && b == 512u << 20, "512M is 512 MiB");
    ok(ppdl_parse_size("2G", &b) == 0 && b == (size_t)2 << 30, "2G is 2 GiB");
    ok(ppdl_parse_size("1.5KiB", &b) == 0 && b == 1536, "1.5KiB is 1536 bytes");
    ok(ppdl_parse_size("1000", &b) == 0 && b == 1000, "a plain number is bytes");
    ok(ppdl_parse_size("12X", &b) == -1 && ppdl_parse_size("", &b) == -1 && ppdl_parse_size("-5M", &b) == -1,
       "malformed sizes are rejected");
    long v;
    ok(ppdl_parse_int("42", 0, 100, &v) == 0 && v == 42, "integer parsed");
    ok(ppdl_parse_int("42x", 0, 100, &v) == -1 && ppdl_parse_int("101", 0, 100, &v) == -1,
       "trailing junk and out-of-range integers rejected");

    ppdl_rng r1, r2;
    ppdl_rng_seed(&r1, 7);
    ppdl_rng_seed(&r2, 7);
    int same = 1;
    double mean = 0, var = 0;
    for (int i = 0; i < 20000; i++) {
        double a = ppdl_rng_normal(&r1), c = ppdl_rng_normal(&r2);
        same &= a == c;
        mean += a;
        var += a * a;
    }
    mean /= 20000;
    var = var / 20000 - mean * mean;
    ok(same, "the same seed gives the same stream");
    /* 20000 samples: the mean's standard error is 0.007, the variance's ~0.01 */
    close_f(mean, 0.0, 0.03, 0, "normal samples have mean ~0");
    close_f(var, 1.0, 0.05, 0, "normal samples have variance ~1");

    char err[PPDL_ERR_LEN];
    ppdl_plan p;
    ok(ppdl_plan_uniform(7, 3, &p, err, sizeof err) == 0, "uniform plan of 7 layers on 3 ranks");
    ok(p.stages[0].first == 0 && p.stages[0].last == 2 && p.stages[1].first == 3 && p.stages[1].last == 4 &&
           p.stages[2].first == 5 && p.stages[2].last == 6,
       "layer counts 3, 2, 2");
    ok(ppdl_plan_validate(&p, 7, 3, NULL, "plan", err, sizeof err) == 0, "the uniform plan validates");
    p.stages[1].rank = p.stages[1].ranks[0] = 0;
    ok(ppdl_plan_validate(&p, 7, 3, NULL, "plan", err, sizeof err) == -1 && strstr(err, "rank 0 runs both"),
       "a rank with two stages is rejected: %s", err);
    p.stages[1].rank = p.stages[1].ranks[0] = 1;
    p.stages[2].last = 5;
    ok(ppdl_plan_validate(&p, 7, 3, NULL, "plan", err, sizeof err) == -1 && strstr(err, "cover"),
       "a plan that misses the last layer is rejected: %s", err);
    ppdl_plan_free(&p);
    ok(ppdl_plan_uniform(2, 3, &p, err, sizeof err) == -1 && strstr(err, "3 ranks"),
       "more ranks than layers is rejected: %s", err);

    ppdl_backend *be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    ok(be != NULL, "cpu backend created");
    ppdl_be_set_limit(be, 4096);
    void *a = ppdl_be_alloc(be, 1000, "a");
    is_int(ppdl_be_in_use(be), 1024, "allocations are counted rounded up to 256 bytes");
    void *c = ppdl_be_try_alloc(be, 4000, "too much");
    ok(c == NULL, "an allocation past the limit fails");
    void *d = ppdl_be_alloc(be, 3000, "fits");
    is_int(ppdl_be_peak(be), 1024 + 3072, "peak counts both");
    ppdl_be_free(be, a);
    ppdl_be_free(be, d);
    is_int(ppdl_be_in_use(be), 0, "freeing returns the bytes");
    is_int(ppdl_be_peak(be), 4096, "the peak stays");
    ok(ppdl_backend_create("tpu", 1, 0, err, sizeof err) == NULL && strstr(err, "--backend tpu") &&
           strstr(err, "cpu or cuda"),
       "an unknown backend is named, and the known ones: %s", err);
    two_backends();
#if !HAVE_CUDA
    ok(ppdl_backend_create("cuda", 1, 0, err, sizeof err) == NULL && strstr(err, "without CUDA"),
       "cuda without CUDA support says so: %s", err);
#else
    ppdl_backend *cu = ppdl_backend_create("cuda", 1, 0, err, sizeof err);
    ok(cu != NULL || strstr(err, "--backend cuda"), "cuda backend created, or a clear reason: %s", cu ? "created" : err);
    if (cu) ppdl_backend_destroy(cu);
#endif
    ppdl_backend_destroy(be);
    done_testing();
    return exit_status();
}
