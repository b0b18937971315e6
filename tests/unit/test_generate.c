/* test_generate.c — nn/generate.c: the key/value cache against the full forward, and the
 * token picker.
 *
 * The model: a small gpt (vocab 61, seq_len 24, d_model 32, 4 heads, 2 blocks) with its
 * initial weights plus N(0, 0.2) noise, so that attention is far from uniform and the
 * logits spread over a few units (GPT-2's init alone gives near-uniform attention,
 * where a cache that mixed up positions could go unnoticed).
 *
 * Tolerance of cached against full logits: 1e-5 of the largest |logit| of the step. Both
 * compute the same sums in fp32 but in other orders (a GEMM of 1 row against one of n,
 * the attention over L keys as one product against blocks of rows); each output sums
 * at most 4C = 128 products, through 2 blocks, so a few float ulps (1e-7 relative) per
 * op and ~1e-6 after the chain; measured 6.5e-7 at most. A wrong cache is off by O(1)
 * (the negative control below: one changed token in the oldest position moves the logits
 * by more than 100x the tolerance).
 */
#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/generate.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 61, T = 24 };
#define TOL 1e-5

static ppdl_model model;
static ppdl_stage stage;

static void make_model(ppdl_backend *be)
{
    char err[PPDL_ERR_LEN];
    const char *sets[][2] = {{"vocab_size", "61"}, {"seq_len", "24"}, {"d_model", "32"}, {"n_heads", "4"},
                             {"n_layers", "2"}, {"tie_embeddings", "0"}};
    int rc = ppdl_model_preset(&model, "gpt-tiny", err, sizeof err);
    for (size_t i = 0; i < sizeof sets / sizeof sets[0] && !rc; i++)
        rc = ppdl_model_set(&model, sets[i][0], sets[i][1], err, sizeof err);
    if (!rc) rc = ppdl_model_build(&model, err, sizeof err);
    if (rc) {
        diag("model: %s", err);
        exit(1);
    }
    /* untied: every layer's parameters laid out one after another, as initialised below
     * (the tied presets are sampled end to end by tests/mpi/sample_oracle.sh) */
    ppdl_stage_alloc_params(&stage, &model, be, 0, model.L - 1);
    float *host = ppdl_xmalloc(stage.n_params * sizeof *host);
    size_t off = 0;
    for (int i = 0; i < model.L; i++) {
        ppdl_layer_init_params(&model, &model.layers[i], 7, host + off);
        off += ppdl_layer_param_count(&model.layers[i]);
    }
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 3);
    for (size_t i = 0; i < stage.n_params; i++) host[i] += (float)(0.2 * ppdl_rng_normal(&rng));
    ppdl_be_copy_h2d(be, stage.params, host, stage.n_params * sizeof *host);
    free(host);
}

/* max |a-b| / max |b| */
static double rel_err(const float *a, const float *b)
{
    double d = 0, m = 0;
    for (int i = 0; i < V; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / (m > 0 ? m : 1);
}

/* a prompt, then `more` tokens pushed, through both generators; the worst step */
static double compare(ppdl_gen *cached, ppdl_gen *full, const int32_t *prompt, int n, const int32_t *more,
                      int n_more, double *spread)
{
    float a[V], b[V];
    ppdl_gen_start(cached, prompt, n, a);
    ppdl_gen_start(full, prompt, n, b);
    double worst = rel_err(a, b);
    *spread = 0;
    for (int i = 0; i < n_more; i++) {
        ppdl_gen_push(cached, more[i], a);
        ppdl_gen_push(full, more[i], b);
        worst = fmax(worst, rel_err(a, b));
        for (int j = 0; j < V; j++) *spread = fmax(*spread, fabs(b[j]));
    }
    return worst;
}

static void test_cache(ppdl_backend *be)
{
    ppdl_gen *cached = ppdl_gen_create(&model, be, 1), *full = ppdl_gen_create(&model, be, 0);
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 5);
    int32_t toks[200];
    for (int i = 0; i < 200; i++) toks[i] = (int32_t)(ppdl_rng_u64(&rng) % V);
    double spread;

    double e = compare(cached, full, toks, 5, toks + 5, 60, &spread);
    ok(e <= TOL, "a 5-token prompt and 60 more (the window of 24 cut four times): cached logits = full forward's, "
       "max error %.2g of the largest |logit| (tolerance %g; logits up to %.2f)", e, TOL, spread);
    ok(spread > 1.0, "the logits spread over more than one unit (%.2f): the check sees attention's mistakes", spread);
    ok(ppdl_gen_context(cached) == ppdl_gen_context(full) && ppdl_gen_context(cached) <= T,
       "both contexts hold the same number of tokens after the cuts (%d, %d; at most seq_len %d)",
       ppdl_gen_context(cached), ppdl_gen_context(full), T);

    e = compare(cached, full, toks, 40, toks + 40, 3, &spread);
    ok(e <= TOL, "a 40-token prompt (longer than seq_len 24: its last 24 kept): cached = full, max error %.2g", e);

    /* the prompt in one pass, or token by token: the same cache */
    float a[V], b[V];
    ppdl_gen_start(cached, toks, 1, a);
    for (int i = 1; i < 17; i++) ppdl_gen_push(cached, toks[i], a);
    ppdl_gen_start(full, toks, 17, b);
    e = rel_err(a, b);
    ok(e <= TOL, "17 tokens pushed one at a time into the cache = a 17-token prompt through the full forward "
       "(max error %.2g)", e);

    /* negative control: the same context but for its oldest token, which only the cache
     * still holds when the last token is added */
    int32_t other[17];
    memcpy(other, toks, sizeof other);
    other[0] = (toks[0] + 1) % V;
    ppdl_gen_start(cached, other, 16, a);
    ppdl_gen_push(cached, toks[16], a);
    e = rel_err(a, b);
    ok(e > 100 * TOL, "negative control: a context whose oldest token differs gives logits off by %.2g (> 100x the "
       "tolerance)", e);
    ppdl_gen_destroy(cached);
    ppdl_gen_destroy(full);
}

static void test_pick(void)
{
    float z[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f};
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 1);
    is_int(ppdl_gen_pick(z, 6, 0.0, 0, &rng), 1, "temperature 0: the argmax, the smaller id of a tie");
    int ones = 1;
    for (int i = 0; i < 200; i++) ones &= ppdl_gen_pick(z, 6, 1.0, 1, &rng) == 1;
    ok(ones, "top-k 1: always the argmax (200 draws)");
    /* temperature 0.5, top-k 3: ids 1, 3, 4 with probabilities from exp(2 z) */
    enum { N = 40000 };
    int count[6] = {0};
    for (int i = 0; i < N; i++) count[ppdl_gen_pick(z, 6, 0.5, 3, &rng)]++;
    double w[6] = {0}, sum = 0;
    int kept[3] = {1, 3, 4};
    for (int i = 0; i < 3; i++) sum += w[kept[i]] = exp(2.0 * z[kept[i]]);
    double worst = 0;
    for (int i = 0; i < 6; i++) {
        double p = w[i] / sum, sd = sqrt(p * (1 - p) / N) + 1e-12;
        worst = fmax(worst, fabs(count[i] / (double)N - p) / sd);
    }
    ok(count[0] + count[2] + count[5] == 0 && worst < 5,
       "temperature 0.5, top-k 3: only the 3 largest drawn, frequencies within %.1f sigma of softmax(z/0.5) "
       "(bound 5)", worst);
    ppdl_rng r1, r2;
    ppdl_rng_seed(&r1, 9);
    ppdl_rng_seed(&r2, 9);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= ppdl_gen_pick(z, 6, 1.3, 0, &r1) == ppdl_gen_pick(z, 6, 1.3, 0, &r2);
    ok(same, "the same seed draws the same tokens");
}

int main(void)
{
    ppdl_backend *be = ppdl_backend_create("cpu", 1, 0, NULL, 0);
    make_model(be);
    test_cache(be);
    test_pick();
    ppdl_stage_free(&stage);
    ppdl_model_free(&model);
    ppdl_backend_destroy(be);
    done_testing();
    return exit_status();
}
