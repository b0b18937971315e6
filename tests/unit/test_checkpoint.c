/* test_checkpoint.c — the pure parts of checkpointing and early stops: durations of
 * --time-limit / --checkpoint-every, the -maxh stop rule, the Fletcher-64 checksum of
 * checkpoint files (against values computed by hand), and the signal flag; and the
 * file layout of a tied model's checkpoint (one MPI rank, a singleton init). */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/stop.h"
#include "io/checkpoint.h"
#include "io/h5util.h"
#include "io/model_io.h"
#include "tap.h"

static int dur(const char *s, double want)
{
    double t = -1;
    return ppdl_parse_duration(s, &t) == 0 && t == want;
}

static int bad_dur(const char *s)
{
    double t = 123;
    return ppdl_parse_duration(s, &t) == -1 && t == 123;
}

/* A tied gpt's checkpoint (model_io.h, checkpoint.h): written by one rank holding
 * every layer (the weight once in its arrays), the weight and its m and v are stored
 * once, lm_head.weight linked to wte in /layers, /optimizer/m and /optimizer/v; read
 * back as two stages (embedding + block, block + head) each range gets its held
 * layout, the head its copy of wte, m and v; and the checksums hold. */
static void tied_checkpoint(void)
{
    char err[PPDL_ERR_LEN] = "", dir[] = "/tmp/ppdl-test-ckpt-XXXXXX", model[64], ckpt[64];
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        exit(1);
    }
    snprintf(model, sizeof model, "%s/m.h5", dir);
    snprintf(ckpt, sizeof ckpt, "%s/c.h5", dir);
    ppdl_model m;
    if (ppdl_model_preset(&m, "gpt-tiny", err, sizeof err) || ppdl_model_set(&m, "n_layers", "2", err, sizeof err) ||
        ppdl_model_build(&m, err, sizeof err)) {
        printf("Bail out! %s\n", err);
        exit(1);
    }
    int L = m.L;
    size_t n = ppdl_model_param_count(&m), tied = ppdl_model_tied_floats(&m);
    float *arr[3];
    for (int a = 0; a < 3; a++) {
        arr[a] = malloc((n + tied) * sizeof(float));
        for (size_t i = 0; i < n; i++) arr[a][i] = (float)(a + 1) * sinf((float)i * 0.01f + 0.3f * (float)a);
    }
    int rc = ppdl_model_save(model, &m, arr[0], err, sizeof err);
    ppdl_ckpt *k = rc ? NULL : ppdl_ckpt_create(model, &m, 0, L - 1, err, sizeof err);
    ppdl_ckpt_info info = {.step = 3, .adam_t = 3, .batch_size = 8, .micro_batches = 2, .ranks = 1, .lr = 1e-3,
                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .schedule = "1f1b"};
    ppdl_ckpt_stats st;
    rc = k ? ppdl_ckpt_write(k, ckpt, MPI_COMM_SELF, arr[0], arr[1], arr[2], &info, &st, err, sizeof err) : -1;
    ok(rc == 0, "a tied gpt's checkpoint is written from the held layout (%s)", err);
    hid_t f = rc ? -1 : H5Fopen(ckpt, H5F_ACC_RDONLY, H5P_DEFAULT);
    char head[64];
    int once = f >= 0;
    const char *groups[3] = {"layers", "optimizer/m", "optimizer/v"};
    for (int a = 0; a < 3 && once; a++) {
        char wte[64];
        snprintf(wte, sizeof wte, "%s/00000/wte", groups[a]);
        snprintf(head, sizeof head, "%s/%05d/lm_head.weight", groups[a], L - 1);
        once = ppdl_h5_same_object(f, wte, head) == 1;
    }
    if (f >= 0) H5Fclose(f);
    ok(once, "the weight, m and v are stored once: lm_head.weight links to wte in /layers, /optimizer/m, /optimizer/v");
    /* read as two stages: 0..1 and 2..L-1 */
    size_t n0 = ppdl_model_held_floats(&m, 0, 1), n1 = ppdl_model_held_floats(&m, 2, L - 1);
    float *s0[3], *s1[3];
    for (int a = 0; a < 3; a++) {
        s0[a] = calloc(n0 + 1, sizeof(float));
        s1[a] = calloc(n1 + 1, sizeof(float));
    }
    if (!rc) rc = ppdl_ckpt_read_layers(ckpt, MPI_COMM_SELF, &m, 0, 1, s0[0], s0[1], s0[2], NULL, err, sizeof err);
    if (!rc) rc = ppdl_ckpt_read_layers(ckpt, MPI_COMM_SELF, &m, 2, L - 1, s1[0], s1[1], s1[2], NULL, err, sizeof err);
    /* the head's range ends with ln_f, then its copy of wte (the first V C floats) */
    int good = !rc && n0 + n1 == n + tied;
    for (int a = 0; a < 3 && good; a++)
        good = !memcmp(s0[a], arr[a], n0 * sizeof(float)) && !memcmp(s1[a], arr[a] + n0, (n - n0) * sizeof(float)) &&
               !memcmp(s1[a] + (n - n0), arr[a], tied * sizeof(float));
    for (int a = 0; a < 3; a++) {
        free(s0[a]);
        free(s1[a]);
    }
    ok(good, "read back as two stages (checksums checked): each range its held layout, the head its copy of wte, "
       "m and v (%s)", rc ? err : "");
    ppdl_ckpt_destroy(k);
    ppdl_model_free(&m);
    for (int a = 0; a < 3; a++) free(arr[a]);
    unlink(model);
    unlink(ckpt);
    rmdir(dir);
}

int main(void)
{
    /* ---- durations ---- */
    ok(dur("90s", 90) && dur("10m", 600) && dur("1.5h", 5400) && dur("2d", 172800), "unit suffixes s, m, h, d");
    ok(dur("30:00", 1800) && dur("1:30:00", 5400) && dur("0:00:05", 5), "MM:SS and HH:MM:SS (Slurm)");
    ok(dur("1-12:00:00", 129600) && dur("1-12", 129600) && dur("2-00:30", 174600),
       "D-HH:MM:SS, D-HH and D-HH:MM (Slurm, what squeue -o %%L prints)");
    ok(bad_dur("90") && bad_dur("") && bad_dur("abc") && bad_dur("5x") && bad_dur("10 m"),
       "a bare number, junk and unknown units are refused (seconds or minutes?)");
    ok(bad_dur("0s") && bad_dur("-5m") && bad_dur("0:00") && bad_dur("1:75") && bad_dur("1:2:3:4") &&
       bad_dur("1-") && bad_dur("UNLIMITED"), "zero, negative, out-of-range and malformed clocks are refused");

    /* ---- the -maxh rule: stop when elapsed + step + checkpoint + margin > limit,
     * margin = 1% of the limit + 1 s ---- */
    ok(!ppdl_stop_for_time(100, 3600, 10, 30), "an hour's run with 1 h left goes on");
    /* 3600 - 36 - 1 = 3563 is the last moment that leaves room for step + checkpoint */
    ok(!ppdl_stop_for_time(3562 - 40, 3600, 10, 30) && ppdl_stop_for_time(3564 - 40, 3600, 10, 30),
       "it stops exactly when one more step and a checkpoint would overrun the margin");
    ok(ppdl_stop_for_time(0, 10, 5, 5), "a step and a checkpoint longer than the limit: stop at once");

    /* ---- Fletcher-64 over the floats' bit patterns ---- */
    /* words 1, 2, 3 (denormals): a = 6, b = 1 + 3 + 6 = 10 */
    float x[3];
    unsigned w[3] = {1, 2, 3};
    memcpy(x, w, sizeof x);
    ppdl_fletcher f = {0, 0};
    ok(ppdl_ckpt_fletcher(&f, x, 3) == 0 && ppdl_ckpt_fletcher_value(&f) == (10ULL << 32 | 6),
       "fletcher64 of words 1, 2, 3 is b=10, a=6");
    /* continuing over pieces equals one pass */
    float y[1000];
    for (int i = 0; i < 1000; i++) y[i] = (float)sin(i) * 1e3f;
    ppdl_fletcher one = {0, 0}, two = {0, 0};
    ppdl_ckpt_fletcher(&one, y, 1000);
    ppdl_ckpt_fletcher(&two, y, 377);
    ppdl_ckpt_fletcher(&two, y + 377, 623);
    ok(ppdl_ckpt_fletcher_value(&one) == ppdl_ckpt_fletcher_value(&two), "a checksum continued over pieces equals one pass");
    /* order matters (a plain sum would not see a swap) */
    float t = y[10];
    y[10] = y[11];
    y[11] = t;
    ppdl_fletcher sw = {0, 0};
    ppdl_ckpt_fletcher(&sw, y, 1000);
    ok(ppdl_ckpt_fletcher_value(&sw) != ppdl_ckpt_fletcher_value(&one), "swapping two values changes the checksum");
    /* all-ones words reduce like zeros mod 2^32-1; large inputs must not overflow:
     * 200000 words of 0xfffffffe (> the 92679-word reduction block) */
    static float big[200000];
    unsigned fe = 0xfffffffeu;
    for (int i = 0; i < 200000; i++) memcpy(&big[i], &fe, 4);
    ppdl_fletcher fb = {0, 0};
    size_t nonfinite = ppdl_ckpt_fletcher(&fb, big, 200000);
    /* word = -1 mod (2^32-1): a = -n, b = -n(n+1)/2, both mod 2^32-1 */
    unsigned long long mod = 0xffffffffULL, n = 200000;
    unsigned long long a = (mod - n % mod) % mod, b = (mod - (n * (n + 1) / 2) % mod) % mod;
    ok(ppdl_ckpt_fletcher_value(&fb) == (b << 32 | a), "200000 words past the reduction block: sums exact");
    is_int(nonfinite, 200000, "0xfffffffe is a NaN pattern: every one counted as non-finite");
    float inf = INFINITY, fin[3] = {1.0f, 0, -2.5f};
    ppdl_fletcher fi = {0, 0};
    ok(ppdl_ckpt_fletcher(&fi, fin, 3) == 0 && ppdl_ckpt_fletcher(&fi, &inf, 1) == 1, "finite values pass, inf is counted");

    MPI_Init(NULL, NULL);
    tied_checkpoint();
    MPI_Finalize();

    /* ---- the signal flag ---- */
    ppdl_stop_signals_install();
    is_int(ppdl_stop_signal(), 0, "no signal yet");
    raise(SIGUSR1);
    is_int(ppdl_stop_signal(), SIGUSR1, "SIGUSR1 is caught and remembered, not fatal");
    raise(SIGTERM);
    is_int(ppdl_stop_signal(), SIGUSR1, "a second signal (SIGTERM) keeps the first and is not fatal either");
    done_testing();
    return exit_status();
}
