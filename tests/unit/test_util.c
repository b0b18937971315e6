/* test_util.c — options parsing, RNG determinism, plan construction/validation and the
 * backend's memory accounting and limit. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/options.h"
#include "core/permute.h"
#include "core/slices.h"
#include "core/util.h"
#include "plan/plan.h"
#include "tap.h"

/* --shuffle's order: each epoch's permutation is a bijection of 0..n-1 (every row once)
 * for any n, the same for the same key, another for another key, and spread evenly */
static void permutations(void)
{
    static const uint64_t sizes[] = {1, 2, 3, 5, 7, 16, 17, 64, 549, 1000, 4097, 100003};
    int all_bijective = 1, all_stable = 1, n_differ = 0, n_moved = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        unsigned char *seen = calloc(n, 1);
        uint64_t key = ppdl_permute_key(1234, k), other = ppdl_permute_key(1234, k + 1);
        int differs = 0, moved = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t x = ppdl_permute(key, n, i);
            if (x >= n || seen[x]++) all_bijective = 0;
            if (x != ppdl_permute(key, n, i)) all_stable = 0;
            differs |= x != ppdl_permute(other, n, i);
            moved += x != i;
        }
        if (n >= 5) { /* a smaller n has too few orders for two keys to differ surely */
            n_differ += differs;
            n_moved += moved > (int)(n / 2);
        }
        free(seen);
    }
    ok(all_bijective, "every epoch's order visits each of n rows exactly once (n = 1 ... 100003)");
    ok(all_stable && n_differ == 9 && n_moved == 9,
       "an order depends on its key alone: the same key gives the same order, the next epoch another (%d of the 9 "
       "sizes >= 5), and most rows move (%d of 9)", n_differ, n_moved);
    /* where row 0 of 10 goes, over 2000 keys: each place 200 times expected (sd 13.4) */
    int count[10] = {0}, lo = 2000, hi = 0;
    for (uint64_t e = 0; e < 2000; e++) count[ppdl_permute(ppdl_permute_key(7, e), 10, 0)]++;
    for (int i = 0; i < 10; i++) {
        if (count[i] < lo) lo = count[i];
        if (count[i] > hi) hi = count[i];
    }
    ok(lo >= 150 && hi <= 250, "over 2000 epochs, row 0 of 10 lands in each place 150-250 times (%d-%d)", lo, hi);
}

/* option names: full or a unique prefix; ambiguous prefixes named */
static void option_names(void)
{
    static const char *const names[] = {"--steps", "--step-delay", "--seed", "--set", NULL};
    char err[256] = "";
    ok(ppdl_option_lookup("--steps", names, "p", err, sizeof err) == 0 &&
           ppdl_option_lookup("--steps=4", names, "p", err, sizeof err) == 0 &&
           ppdl_option_lookup("--step-", names, "p", err, sizeof err) == 1,
       "a full name is itself (also with =value, and beside longer names); a unique prefix is its option");
    ok(ppdl_option_lookup("--step", names, "p", err, sizeof err) == -1 &&
           !strcmp(err, "ambiguous option --step: --steps or --step-delay (see p --help)"),
       "an ambiguous prefix names its options: %s", err);
    ok(ppdl_option_lookup("--s", names, "p", err, sizeof err) == -1 && strstr(err, "--steps, --step-delay, --seed or --set") &&
           ppdl_option_lookup("--x", names, "p", err, sizeof err) == -1 && strstr(err, "unknown option --x"),
       "three or more are listed; no match is unknown: %s", err);
}

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

/* ppdl_slices: contiguous, covering, in proportion, aligned, and the same bounds from
 * the same arguments (the planner and the runtime must cut alike) */
static void slices(void)
{
    size_t b[5], c[5];
    ppdl_slices(10, 4, NULL, 1, b);
    ok(b[0] == 0 && b[1] == 2 && b[2] == 5 && b[3] == 7 && b[4] == 10, "10 into 4 equal slices: 2, 3, 2, 3");
    const double w[2] = {1, 2};
    ppdl_slices(3000, 2, w, 64, b);
    ok(b[0] == 0 && b[1] == 960 && b[2] == 3000, "weights 1:2 with align 64: the first slice ends at 960 (%zu)", b[1]);
    const double z[3] = {0, 1, 0};
    ppdl_slices(7, 3, z, 1, b);
    ok(b[1] == 0 && b[2] == 7 && b[3] == 7, "a member of weight 0 owns an empty slice");
    ppdl_slices(2, 4, NULL, 1, b);
    ok(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1 && b[4] == 2, "fewer elements than slices: some are empty");
    size_t big = (size_t)1 << 62;
    ppdl_slices(big, 3, NULL, 1, b);
    ok(b[1] == big / 3 && b[2] == (big / 3) * 2 + (big % 3) * 2 / 3 && b[3] == big, "no overflow at 2^62");
    const double h[4] = {3.5, 1, 0.25, 2};
    ppdl_slices(123457, 4, h, 8, b);
    ppdl_slices(123457, 4, h, 8, c);
    int mono = 1;
    for (int r = 0; r < 4; r++) mono &= b[r] <= b[r + 1] && (r == 0 || b[r] % 8 == 0);
    ok(mono && !memcmp(b, c, sizeof b) && b[4] == 123457, "ordered, aligned, covering, and the same twice");
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
    permutations();
    option_names();
    slices();
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
