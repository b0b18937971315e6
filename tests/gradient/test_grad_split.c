/* test_grad_split.c — the backward split (nn/layer.h): B (the input gradient) then W
 * (the parameter gradients) gives bitwise the gradients of the fused backward, for every
 * layer kind, several shapes and every recompute option.
 *
 * For each layer of each model below, M = 3 micro-batches are run forward (each with its
 * own input, saved tensors and output gradient), then backward three ways:
 *   fused      backward(mb 0), backward(mb 1), backward(mb 2): the reference;
 *   delayed W  B(0) B(1) B(2), then W(0) W(1) W(2), each micro-batch with its own keep,
 *              as a zero-bubble schedule runs them: din and every parameter gradient
 *              must equal the reference bit for bit;
 *   reversed W B(0) B(1) B(2), then W(2) W(1) W(0): the negative control. The same
 *              terms summed in another order give other bits (the reason every schedule
 *              accumulates in micro-batch order), so the bitwise comparison above sees
 *              a wrong order.
 * The work space is filled with NaN before every call, and between the B's and the W's
 * what the kind says W does not read (weight_reads: saved, dout), so a W that read
 * scratch left by its B, or a buffer the runtime does not keep for it, would show. Under
 * the full recompute option (1) the runtime's hook is played: forward again into a
 * scratch `saved` right before B (and the fused pass), and, where W reads `saved`, again
 * before W, the scratch overwritten with NaN in between (the other layers and
 * micro-batches use it meanwhile). B may write into `saved` (option 0: a
 * pre-activation's gradient over it), so each way starts from the forward's `saved`.
 *
 * CPU backend (its device pointers are host pointers). No MPI: run it directly.
 */
#include "backend/backend.h"
#include "core/util.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MB = 3 };

static ppdl_backend *be;
static ppdl_rng rng;

static float *alloc_f(size_t n) { return ppdl_be_alloc(be, (n ? n : 1) * sizeof(float), "test"); }

static void fill_normal(float *x, size_t n, double std)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * ppdl_rng_normal(&rng));
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

/* index of the first float whose bits differ, or -1 */
static long first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return (long)i;
    return -1;
}

/* one layer under test: its M micro-batches' buffers */
typedef struct lcase {
    ppdl_layer *l;
    ppdl_stage *st;
    int b, opt, full;          /* full: the runtime's full recompute is played */
    size_t n_in, n_out, n_saved, n_work, n_keep;
    void *in[MB];              /* float, or int32 tokens for the embedding */
    float *saved[MB], *dout[MB], *keep[MB], *din[MB];
    float *dout0[MB];          /* each micro-batch's output gradient as it came */
    float *saved0[MB];         /* (host) each micro-batch's saved tensors as forward left them */
    float *out, *work, *scratch_saved;
} lcase;

static void lcase_init(lcase *c, ppdl_stage *st, ppdl_layer *l, int b, int opt)
{
    memset(c, 0, sizeof *c);
    c->l = l;
    c->st = st;
    c->b = b;
    c->opt = opt;
    c->full = opt == PPDL_RC_FULL;
    int kind_opt = c->full ? 0 : opt; /* forward runs option 1 as 0; the runtime recomputes */
    int tokens = l->kind == &ppdl_kind_embedding;
    c->n_in = (size_t)b * l->in_bytes / 4;
    c->n_out = (size_t)b * l->out_bytes / 4;
    c->n_saved = l->kind->saved_floats(l, b, kind_opt);
    c->n_work = l->kind->work_floats(l, b);
    c->n_keep = l->kind->keep_floats(l, b, opt);
    c->out = alloc_f(c->n_out);
    c->work = alloc_f(c->n_work);
    c->scratch_saved = alloc_f(c->n_saved);
    for (int m = 0; m < MB; m++) {
        c->in[m] = alloc_f(c->n_in);
        if (tokens) {
            int32_t *t = c->in[m];
            for (size_t i = 0; i < c->n_in; i++) t[i] = (int32_t)(ppdl_rng_uniform(&rng) * l->cfg.V);
        } else {
            fill_normal(c->in[m], c->n_in, 1.0);
        }
        c->saved[m] = alloc_f(c->n_saved);
        c->dout0[m] = alloc_f(c->n_out);
        c->dout[m] = alloc_f(c->n_out);
        c->keep[m] = alloc_f(c->n_keep);
        c->din[m] = l->index > 0 ? alloc_f(c->n_in) : NULL;
        fill_normal(c->dout0[m], c->n_out, 1.0);
        fill_nan(c->work, c->n_work);
        l->kind->forward(l, be, b, c->in[m], c->out, c->saved[m], c->work, kind_opt);
        c->saved0[m] = ppdl_xmalloc((c->n_saved ? c->n_saved : 1) * sizeof(float));
        memcpy(c->saved0[m], c->saved[m], c->n_saved * sizeof(float));
    }
}

static void lcase_free(lcase *c)
{
    ppdl_be_free(be, c->out);
    ppdl_be_free(be, c->work);
    ppdl_be_free(be, c->scratch_saved);
    for (int m = 0; m < MB; m++) {
        ppdl_be_free(be, c->in[m]);
        ppdl_be_free(be, c->saved[m]);
        ppdl_be_free(be, c->dout0[m]);
        ppdl_be_free(be, c->dout[m]);
        ppdl_be_free(be, c->keep[m]);
        ppdl_be_free(be, c->din[m]);
        free(c->saved0[m]);
    }
}

/* the `saved` a part of micro-batch m reads: its own, or under full recompute the
 * scratch, filled by running forward again (the runtime's hook) */
static float *saved_for(lcase *c, int m, int part)
{
    if (!c->full) return c->saved[m];
    fill_nan(c->scratch_saved, c->n_saved);
    if (part == PPDL_BWD_WEIGHT && !(c->l->kind->weight_reads(c->l, c->opt) & PPDL_W_SAVED)) return c->scratch_saved;
    fill_nan(c->work, c->n_work);
    c->l->kind->forward(c->l, be, c->b, c->in[m], c->out, c->scratch_saved, c->work, 0);
    return c->scratch_saved;
}

static void run_part(lcase *c, int m, int part)
{
    ppdl_layer *l = c->l;
    float *saved = saved_for(c, m, part);
    fill_nan(c->work, c->n_work);
    /* as the runtime calls it: the fused pass after a recompute with option 0 */
    int opt = part == PPDL_BWD_FUSED && c->full ? 0 : c->opt;
    l->kind->backward(l, be, part, c->b, c->in[m], saved, c->dout[m], part == PPDL_BWD_WEIGHT ? NULL : c->din[m],
                      part == PPDL_BWD_FUSED ? NULL : c->keep[m], c->work, opt);
}

/* between the B's and the W's: NaN in what W does not read */
static void poison_unread(lcase *c)
{
    int reads = c->l->kind->weight_reads(c->l, c->opt);
    for (int m = 0; m < MB; m++) {
        if (!(reads & PPDL_W_DOUT)) fill_nan(c->dout[m], c->n_out);
        if (!(reads & PPDL_W_SAVED)) fill_nan(c->saved[m], c->n_saved);
    }
}

/* fresh output gradients and saved tensors, zero parameter gradients, NaN in din and keep */
static void reset(lcase *c)
{
    memset(c->st->grads, 0, c->st->n_params * sizeof(float));
    for (int m = 0; m < MB; m++) {
        memcpy(c->dout[m], c->dout0[m], c->n_out * sizeof(float));
        memcpy(c->saved[m], c->saved0[m], c->n_saved * sizeof(float));
        fill_nan(c->keep[m], c->n_keep);
        if (c->din[m]) fill_nan(c->din[m], c->n_in);
    }
}

static float *copy_of(const float *x, size_t n)
{
    float *y = ppdl_xmalloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

static void test_layer(const char *label, ppdl_stage *st, ppdl_layer *l, int b, int opt)
{
    lcase c;
    lcase_init(&c, st, l, b, opt);
    size_t np = st->n_params;
    char what[320];
    snprintf(what, sizeof what, "%s layer %d (%s), b=%d, option %d", label, l->index, l->kind->name, b, opt);

    /* the reference: the fused backward of each micro-batch, in order */
    reset(&c);
    float *ref_din[MB] = {0};
    for (int m = 0; m < MB; m++) {
        run_part(&c, m, PPDL_BWD_FUSED);
        if (c.din[m]) ref_din[m] = copy_of(c.din[m], c.n_in);
    }
    float *ref_grads = copy_of(st->grads, np);

    /* B of every micro-batch, then their W in order */
    reset(&c);
    for (int m = 0; m < MB; m++) run_part(&c, m, PPDL_BWD_INPUT);
    long bad_din = -1;
    for (int m = 0; m < MB && bad_din < 0; m++)
        if (c.din[m]) bad_din = first_diff(c.din[m], ref_din[m], c.n_in);
    if (l->index > 0)
        ok(bad_din < 0, "%s: B gives bitwise the fused din%s", what, bad_din < 0 ? "" : " (differs)");
    long grads_after_b = -1;
    for (size_t i = 0; i < np && grads_after_b < 0; i++)
        if (st->grads[i] != 0.0f) grads_after_b = (long)i;
    ok(grads_after_b < 0, "%s: B leaves the parameter gradients alone", what);
    poison_unread(&c);
    for (int m = 0; m < MB; m++) run_part(&c, m, PPDL_BWD_WEIGHT);
    long bad = first_diff(st->grads, ref_grads, np);
    if (!ok(bad < 0, "%s: B x3 then W x3 gives bitwise the fused gradients", what))
        diag("  first difference at %ld: %.9g, fused %.9g", bad, (double)st->grads[bad], (double)ref_grads[bad]);

    /* the negative control: the same W's in reverse order */
    if (np) {
        reset(&c);
        for (int m = 0; m < MB; m++) run_part(&c, m, PPDL_BWD_INPUT);
        poison_unread(&c);
        for (int m = MB - 1; m >= 0; m--) run_part(&c, m, PPDL_BWD_WEIGHT);
        ok(first_diff(st->grads, ref_grads, np) >= 0,
           "%s: W in reverse micro-batch order gives other bits (the comparison sees the order)", what);
    }
    for (int m = 0; m < MB; m++) free(ref_din[m]);
    free(ref_grads);
    lcase_free(&c);
}

static void setup_failed(const char *why)
{
    printf("Bail out! %s\n", why);
    exit(1);
}

/* a model from a preset and --set pairs; every layer, every option, at b samples */
static void test_model(const char *preset, const char *const *sets, int b)
{
    char err[256], label[160];
    ppdl_model m;
    int n = snprintf(label, sizeof label, "%s", preset);
    if (ppdl_model_preset(&m, preset, err, sizeof err)) setup_failed(err);
    for (int i = 0; sets && sets[i]; i += 2) {
        if (ppdl_model_set(&m, sets[i], sets[i + 1], err, sizeof err)) setup_failed(err);
        n += snprintf(label + n, sizeof label - (size_t)n, " %s=%s", sets[i], sets[i + 1]);
    }
    if (ppdl_model_build(&m, err, sizeof err)) setup_failed(err);
    for (int li = 0; li < m.L; li++) {
        ppdl_stage st;
        ppdl_stage_alloc_params(&st, &m, be, li, li);
        /* weights at scales that keep activations O(1) */
        fill_normal(st.params, st.n_params, 0.5);
        for (int opt = 0; opt < m.layers[li].kind->n_options; opt++) test_layer(label, &st, &m.layers[li], b, opt);
        ppdl_stage_free(&st);
    }
    ppdl_model_free(&m);
}

int main(void)
{
    char err[256];
    be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    if (!be) {
        skip_all(err);
        return 1;
    }
    ppdl_rng_seed(&rng, 20260622);
    /* T = 64 and 70: two causal row blocks, the second uneven; C/H = 8 and 5 */
    test_model("gpt-tiny", (const char *const[]){"d_model", "32", "n_layers", "1", NULL}, 2);
    test_model("gpt-tiny", (const char *const[]){"vocab_size", "11", "seq_len", "70", "d_model", "15", "n_heads", "3",
                                                 "n_layers", "1", NULL}, 1);
    test_model("gpt-tiny", (const char *const[]){"vocab_size", "7", "seq_len", "5", "d_model", "8", "n_heads", "2",
                                                 "n_layers", "1", NULL}, 3);
    test_model("mlp-tiny", NULL, 5); /* gelu */
    test_model("mlp-tiny", (const char *const[]){"activation", "relu", "hidden", "33", NULL}, 4);
    test_model("mlp-tiny", (const char *const[]){"activation", "none", "n_layers", "2", NULL}, 1);
    test_model("cnn-tiny", NULL, 4);
    test_model("cnn-tiny", (const char *const[]){"height", "9", "width", "7", "channels", "2", "n_blocks", "1", NULL}, 3);
    done_testing();
    ppdl_backend_destroy(be);
    return exit_status();
}
