/* test_grad_gpt.c — the GPT layers (layer_gpt.c) and their CPU kernels (cpu_gpt.c).
 *
 *  1. every kernel of cpu_gpt.c against a naive reference on random inputs;
 *  2. the forward of embedding, block and head against a naive double-precision
 *     GPT-2 written out here (catches wrong head/column layouts, which a gradient
 *     check cannot see);
 *  3. finite-difference gradient checks of every parameter and of the input, for
 *     each kind, with the loss L = sum(out * R) for a random R, and for the head
 *     followed by ppdl_be_softmax_xent;
 *  4. the block's selective option gives bitwise the outputs and gradients of
 *     option 0; forward run twice gives bitwise the same output.
 *
 * The test runs on the CPU backend, whose device pointers are host pointers, so it
 * reads and writes buffers directly. Work space is filled with NaN before every
 * forward and backward, so reading scratch left over from another call shows up.
 * No MPI: run it directly.
 */
#include "backend/backend.h"
#include "backend/cpu_kernels.h"
#include "core/util.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ppdl_backend *be;
static ppdl_rng rng;

/* ------------------------------------------------------------------ helpers */

static float *alloc_f(size_t n) { return ppdl_be_alloc(be, (n ? n : 1) * sizeof(float), "test"); }

static void fill_normal(float *x, size_t n, double mean, double std)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(mean + std * ppdl_rng_normal(&rng));
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

/* largest |got - want| / (atol + rtol |want|); <= 1 means every element is close.
 * NaN anywhere gives infinity. */
static double worst_ratio(const float *got, const double *want, size_t n, double atol, double rtol,
                          size_t *where)
{
    double worst = 0;
    *where = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        double r = d == 0 ? 0 : d / (atol + rtol * fabs(want[i]));
        if (!(r <= worst)) { /* also catches NaN */
            worst = isnan(r) ? INFINITY : r;
            *where = i;
        }
    }
    return worst;
}

static void check_close(const float *got, const double *want, size_t n, double atol, double rtol,
                        const char *what)
{
    size_t at;
    double r = worst_ratio(got, want, n, atol, rtol, &at);
    if (!ok(r <= 1.0, "%s (worst error %.3g of tolerance)", what, r))
        diag("  element %zu: got %.9g, want %.9g", at, (double)got[at], want[at]);
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ============================================================ 1. the kernels */

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* one row: y = (x - mean) / sqrt(var + eps) * w + b, biased variance */
static void ref_layernorm_row(int C, const double *x, const float *w, const float *b, float eps,
                              double *y, double *mean, double *rstd)
{
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) m += x[i];
    m /= C;
    for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
    v /= C;
    double rs = 1.0 / sqrt(v + eps);
    for (int i = 0; i < C; i++) y[i] = (x[i] - m) * rs * w[i] + b[i];
    if (mean) *mean = m;
    if (rstd) *rstd = rs;
}

static void test_layernorm_kernels(void)
{
    int rows = 7, C = 12;
    float eps = 1e-5f;
    float *x = alloc_f(rows * C), *w = alloc_f(C), *b = alloc_f(C), *y = alloc_f(rows * C);
    float *mean = alloc_f(rows), *rstd = alloc_f(rows);
    /* an offset mean checks that the variance is not computed as E[x^2] - E[x]^2 */
    fill_normal(x, rows * C, 30.0, 2.0);
    fill_normal(w, C, 1.0, 0.3);
    fill_normal(b, C, 0.0, 0.3);
    cpu_layernorm_fwd(be, rows, C, eps, x, w, b, y, mean, rstd);

    double *ry = calloc(rows * C, sizeof *ry), *rm = calloc(rows, sizeof *rm),
           *rr = calloc(rows, sizeof *rr), *xd = calloc(C, sizeof *xd);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < C; i++) xd[i] = x[r * C + i];
        ref_layernorm_row(C, xd, w, b, eps, ry + r * C, rm + r, rr + r);
    }
    /* y, mean and rstd are O(1..30): a few float roundings each, so 1e-5 relative
     * (the float epsilon is 6e-8; subtracting a mean of 30 loses ~5 bits) */
    check_close(y, ry, rows * C, 1e-5, 1e-5, "layernorm_fwd y matches the reference");
    check_close(mean, rm, rows, 0, 1e-6, "layernorm_fwd mean matches");
    check_close(rstd, rr, rows, 0, 1e-5, "layernorm_fwd rstd matches");

    /* backward: dx, dw, db start non-zero, the kernel adds into them */
    float *dy = alloc_f(rows * C), *dx = alloc_f(rows * C), *dw = alloc_f(C), *db = alloc_f(C);
    fill_normal(dy, rows * C, 0, 1);
    fill_normal(dx, rows * C, 0, 1);
    fill_normal(dw, C, 0, 1);
    fill_normal(db, C, 0, 1);
    double *rdx = calloc(rows * C, sizeof *rdx), *rdw = calloc(C, sizeof *rdw),
           *rdb = calloc(C, sizeof *rdb);
    for (int i = 0; i < rows * C; i++) rdx[i] = dx[i];
    for (int i = 0; i < C; i++) rdw[i] = dw[i], rdb[i] = db[i];
    for (int r = 0; r < rows; r++) {
        /* exact derivative of y = n w + b, n = (x - m) rstd, through m and rstd */
        double sg = 0, sgn = 0, n[64];
        for (int i = 0; i < C; i++) {
            n[i] = (x[r * C + i] - rm[r]) * rr[r];
            double g = (double)dy[r * C + i] * w[i];
            sg += g;
            sgn += g * n[i];
        }
        for (int i = 0; i < C; i++) {
            double g = (double)dy[r * C + i] * w[i];
            rdx[r * C + i] += rr[r] * (g - sg / C - n[i] * sgn / C);
            rdw[i] += dy[r * C + i] * n[i];
            rdb[i] += dy[r * C + i];
        }
    }
    cpu_layernorm_bwd(be, rows, C, x, w, mean, rstd, dy, dx, dw, db);
    /* dx ~ rstd * O(1) = O(1); dw, db sums of 7 O(1) terms: 1e-5 is ~100 float epsilons,
     * dominated by the normalised n computed from x ~ 30 */
    check_close(dx, rdx, rows * C, 1e-5, 1e-5, "layernorm_bwd adds dx");
    check_close(dw, rdw, C, 1e-5, 1e-5, "layernorm_bwd adds dw");
    check_close(db, rdb, C, 1e-5, 1e-5, "layernorm_bwd adds db");
    free(ry); free(rm); free(rr); free(xd); free(rdx); free(rdw); free(rdb);
}

static void test_embedding_kernels(void)
{
    int B = 2, T = 6, C = 5, V = 4; /* V < B*T: tokens repeat */
    int32_t *tok = ppdl_be_alloc(be, B * T * sizeof *tok, "tokens");
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)(ppdl_rng_u64(&rng) % V);
    tok[0] = tok[1] = tok[7] = 2; /* a token seen three times */
    float *wte = alloc_f(V * C), *wpe = alloc_f(T * C), *y = alloc_f(B * T * C);
    fill_normal(wte, V * C, 0, 1);
    fill_normal(wpe, T * C, 0, 1);
    cpu_embedding_fwd(be, B, T, C, tok, wte, wpe, y);
    double *ry = calloc(B * T * C, sizeof *ry);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                ry[(b * T + t) * C + i] = (float)(wte[tok[b * T + t] * C + i] + wpe[t * C + i]);
    /* one float addition: exact */
    check_close(y, ry, B * T * C, 0, 0, "embedding_fwd is wte[tok] + wpe[t] exactly");

    float *dy = alloc_f(B * T * C), *dwte = alloc_f(V * C), *dwpe = alloc_f(T * C);
    fill_normal(dy, B * T * C, 0, 1);
    fill_normal(dwte, V * C, 0, 1);
    fill_normal(dwpe, T * C, 0, 1);
    double *rte = calloc(V * C, sizeof *rte), *rpe = calloc(T * C, sizeof *rpe);
    for (int i = 0; i < V * C; i++) rte[i] = dwte[i];
    for (int i = 0; i < T * C; i++) rpe[i] = dwpe[i];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) {
                rte[tok[b * T + t] * C + i] += dy[(b * T + t) * C + i];
                rpe[t * C + i] += dy[(b * T + t) * C + i];
            }
    cpu_embedding_bwd(be, B, T, C, tok, dy, dwte, dwpe);
    /* sums of at most 4 O(1) floats: a few roundings */
    check_close(dwte, rte, V * C, 1e-6, 1e-6, "embedding_bwd adds into dwte (repeated tokens)");
    check_close(dwpe, rpe, T * C, 1e-6, 1e-6, "embedding_bwd adds into dwpe");
    free(ry); free(rte); free(rpe);
}

static void test_reshape_kernels(void)
{
    int B = 2, T = 6, C = 12, H = 3, hs = C / H;
    size_t n = (size_t)B * T * C;
    float *qkv = alloc_f(3 * n), *q = alloc_f(n), *k = alloc_f(n), *v = alloc_f(n);
    float *back = alloc_f(3 * n), *seq = alloc_f(n), *heads = alloc_f(n);
    fill_normal(qkv, 3 * n, 0, 1);
    cpu_qkv_split(be, B, T, C, H, qkv, q, k, v);
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < hs; d++) {
                    size_t hi = (((size_t)b * H + h) * T + t) * hs + d;
                    const float *row = qkv + ((size_t)b * T + t) * 3 * C;
                    bad += q[hi] != row[h * hs + d] || k[hi] != row[C + h * hs + d] ||
                           v[hi] != row[2 * C + h * hs + d];
                }
    is_int(bad, 0, "qkv_split puts qkv[b,t,j*C + h*hs + d] at q/k/v[b,h,t,d]");
    fill_nan(back, 3 * n);
    cpu_qkv_merge(be, B, T, C, H, q, k, v, back);
    ok(same_bits(back, qkv, 3 * n), "qkv_merge inverts qkv_split and overwrites all of dqkv");

    cpu_heads_to_seq(be, B, T, C, H, q, seq);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < hs; d++)
                    bad += seq[((size_t)b * T + t) * C + h * hs + d] !=
                           q[(((size_t)b * H + h) * T + t) * hs + d];
    is_int(bad, 0, "heads_to_seq puts x[b,h,t,d] at y[b,t,h*hs + d]");
    cpu_seq_to_heads(be, B, T, C, H, seq, heads);
    ok(same_bits(heads, q, n), "seq_to_heads inverts heads_to_seq");
}

static void test_softmax_kernels(void)
{
    int BH = 3, T = 7;
    float scale = 0.4f;
    size_t n = (size_t)BH * T * T;
    float *s = alloc_f(n), *p = alloc_f(n), *dp = alloc_f(n), *ds = alloc_f(n), *ds2 = alloc_f(n);
    fill_normal(s, n, 0, 3);
    /* the upper triangle must not be read: NaN there would leak into p */
    for (int r = 0; r < BH; r++)
        for (int t = 0; t < T; t++)
            for (int u = t + 1; u < T; u++) s[((size_t)r * T + t) * T + u] = NAN;
    fill_nan(p, n);
    cpu_causal_softmax_fwd(be, BH, T, scale, s, p);
    double *rp = calloc(n, sizeof *rp), *rds = calloc(n, sizeof *rds);
    for (size_t row = 0; row < (size_t)BH * T; row++) {
        int t = (int)(row % T);
        double mx = -INFINITY, sum = 0;
        for (int u = 0; u <= t; u++) mx = fmax(mx, scale * (double)s[row * T + u]);
        for (int u = 0; u <= t; u++) sum += exp(scale * (double)s[row * T + u] - mx);
        for (int u = 0; u <= t; u++) rp[row * T + u] = exp(scale * (double)s[row * T + u] - mx) / sum;
    }
    /* probabilities in [0,1], each a float exp and one division: 1e-6 absolute and
     * relative (float epsilon 6e-8 times the few roundings, times |scale*s| <= ~5 for
     * the exp's relative error) */
    check_close(p, rp, n, 1e-6, 1e-6, "causal_softmax_fwd matches, zeros above the diagonal, reads only u <= t");

    fill_normal(dp, n, 0, 1);
    for (size_t row = 0; row < (size_t)BH * T; row++) {
        int t = (int)(row % T);
        double dot = 0;
        for (int u = 0; u <= t; u++) dot += (double)dp[row * T + u] * p[row * T + u];
        for (int u = 0; u <= t; u++) rds[row * T + u] = scale * p[row * T + u] * (dp[row * T + u] - dot);
    }
    fill_nan(ds, n);
    cpu_causal_softmax_bwd(be, BH, T, scale, p, dp, ds);
    /* |ds| <= scale * |dp - dot| ~ 1; a few roundings */
    check_close(ds, rds, n, 1e-6, 1e-6, "causal_softmax_bwd matches and writes zeros above the diagonal");
    memcpy(ds2, dp, n * sizeof(float));
    cpu_causal_softmax_bwd(be, BH, T, scale, p, ds2, ds2);
    ok(same_bits(ds2, ds, n), "causal_softmax_bwd in place (ds aliasing dp) gives the same bits");
    free(rp); free(rds);
}

/* ================================================= 2. forward references */

/* the model under test: small, with H > 1 and T > 1 so layouts matter */
static ppdl_model model;
static ppdl_stage stage;

static void build_model(void)
{
    char err[256];
    memset(&model, 0, sizeof model);
    strcpy(model.family, "gpt");
    model.vocab_size = 11;
    model.seq_len = 5;
    model.d_model = 8;
    model.n_heads = 2;
    model.n_layers = 1;
    model.ln_eps = 1e-5f;
    if (ppdl_model_build(&model, err, sizeof err)) {
        diag("ppdl_model_build: %s", err);
        exit(1);
    }
    ppdl_stage_alloc_params(&stage, &model, be, 0, model.L - 1);
    /* random parameters at scales that keep activations O(1): the GPT-2 init
     * (std 0.02) would make every nonlinearity nearly linear and the check weak */
    for (int i = 0; i < model.L; i++) {
        ppdl_layer *l = &model.layers[i];
        for (int j = 0; j < l->n_params; j++) {
            ppdl_param *pa = &l->params[j];
            const char *nm = pa->name;
            size_t len = strlen(nm);
            if (!strncmp(nm, "ln", 2) && !strcmp(nm + len - 6, "weight"))
                fill_normal(pa->value, pa->numel, 1.0, 0.2);
            else if (len >= 4 && !strcmp(nm + len - 4, "bias"))
                fill_normal(pa->value, pa->numel, 0.0, 0.2);
            else if (pa->ndim == 2 && strncmp(nm, "w", 1))
                fill_normal(pa->value, pa->numel, 0.0, 1.0 / sqrt((double)pa->shape[1]));
            else
                fill_normal(pa->value, pa->numel, 0.0, 0.7); /* wte, wpe */
        }
    }
}

static ppdl_layer *layer_of(const ppdl_layer_kind *k)
{
    for (int i = 0; i < model.L; i++)
        if (model.layers[i].kind == k) return &model.layers[i];
    return NULL;
}

/* naive GPT-2 block in double, for b samples of x[b,T,C] */
static void ref_block(const ppdl_layer *l, int b, const float *x, double *out)
{
    int T = l->cfg.T, C = l->cfg.C, H = l->cfg.H, hs = C / H;
    const ppdl_param *p = l->params; /* table order of layer.c */
    const float *ln1w = p[0].value, *ln1b = p[1].value, *wqkv = p[2].value, *bqkv = p[3].value;
    const float *wap = p[4].value, *bap = p[5].value, *ln2w = p[6].value, *ln2b = p[7].value;
    const float *wfc = p[8].value, *bfc = p[9].value, *wmp = p[10].value, *bmp = p[11].value;
    double *xd = calloc(C, sizeof *xd), *ln = calloc(T * C, sizeof *ln);
    double *qkv = calloc(T * 3 * C, sizeof *qkv), *y = calloc(T * C, sizeof *y);
    double *x1 = calloc(T * C, sizeof *x1), *hid = calloc(4 * C, sizeof *hid);
    double *att = calloc(T, sizeof *att);
    for (int s = 0; s < b; s++) {
        const float *xs = x + (size_t)s * T * C;
        double *os = out + (size_t)s * T * C;
        for (int t = 0; t < T; t++) {
            for (int i = 0; i < C; i++) xd[i] = xs[t * C + i];
            ref_layernorm_row(C, xd, ln1w, ln1b, l->cfg.eps, ln + t * C, NULL, NULL);
            for (int j = 0; j < 3 * C; j++) {
                double a = bqkv[j];
                for (int i = 0; i < C; i++) a += (double)wqkv[j * C + i] * ln[t * C + i];
                qkv[t * 3 * C + j] = a;
            }
        }
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int e = 0; e < hs; e++)
                        d += qkv[t * 3 * C + h * hs + e] * qkv[u * 3 * C + C + h * hs + e];
                    att[u] = d / sqrt((double)hs);
                    mx = fmax(mx, att[u]);
                }
                for (int u = 0; u <= t; u++) sum += (att[u] = exp(att[u] - mx));
                for (int e = 0; e < hs; e++) {
                    double a = 0;
                    for (int u = 0; u <= t; u++) a += att[u] / sum * qkv[u * 3 * C + 2 * C + h * hs + e];
                    y[t * C + h * hs + e] = a;
                }
            }
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < C; j++) {
                double a = bap[j];
                for (int i = 0; i < C; i++) a += (double)wap[j * C + i] * y[t * C + i];
                x1[t * C + j] = xs[t * C + j] + a;
            }
            ref_layernorm_row(C, x1 + t * C, ln2w, ln2b, l->cfg.eps, ln + t * C, NULL, NULL);
            for (int j = 0; j < 4 * C; j++) {
                double a = bfc[j];
                for (int i = 0; i < C; i++) a += (double)wfc[j * C + i] * ln[t * C + i];
                hid[j] = ref_gelu(a);
            }
            for (int j = 0; j < C; j++) {
                double a = bmp[j];
                for (int i = 0; i < 4 * C; i++) a += (double)wmp[j * 4 * C + i] * hid[i];
                os[t * C + j] = x1[t * C + j] + a;
            }
        }
    }
    free(xd); free(ln); free(qkv); free(y); free(x1); free(hid); free(att);
}

static void ref_head(const ppdl_layer *l, int b, const float *x, double *out)
{
    int N = b * l->cfg.T, C = l->cfg.C, V = l->cfg.V;
    double *xd = calloc(C, sizeof *xd), *ln = calloc(C, sizeof *ln);
    for (int r = 0; r < N; r++) {
        for (int i = 0; i < C; i++) xd[i] = x[r * C + i];
        ref_layernorm_row(C, xd, l->params[0].value, l->params[1].value, l->cfg.eps, ln, NULL, NULL);
        for (int v = 0; v < V; v++) {
            double a = 0;
            for (int i = 0; i < C; i++) a += (double)l->params[2].value[v * C + i] * ln[i];
            out[r * V + v] = a;
        }
    }
    free(xd); free(ln);
}

/* ============================================== 3. the gradient-check harness */

/* One layer with its buffers; the loss is sum(out * R), or, when targets is set,
 * the softmax cross-entropy of out (scale 1: the sum over rows). */
typedef struct {
    ppdl_layer *l;
    int b, opt;
    void *in;              /* tokens [b,T] (int32) or x [b,T,C] */
    float *in_f;           /* in as floats, NULL for tokens */
    size_t n_in, n_out;    /* floats per micro-batch */
    float *out, *saved, *work, *dout, *din;
    size_t n_saved, n_work;
    float *R;              /* [n_out] */
    int32_t *targets;      /* [b*T] or NULL */
    const char *label;     /* names the case in test messages */
    float *loss_dev;       /* one device float for softmax_xent */
} harness;

static void harness_init(harness *h, ppdl_layer *l, int b)
{
    memset(h, 0, sizeof *h);
    h->l = l;
    h->label = l->kind->name;
    h->b = b;
    int T = l->cfg.T;
    if (l->kind == &ppdl_kind_embedding) {
        int32_t *tok = ppdl_be_alloc(be, (size_t)b * T * sizeof *tok, "tokens");
        for (int i = 0; i < b * T; i++) tok[i] = (int32_t)(ppdl_rng_u64(&rng) % l->cfg.V);
        tok[1] = tok[2] = tok[T + 1]; /* repeated tokens accumulate into one wte row */
        h->in = tok;
    } else {
        h->n_in = l->in_bytes / sizeof(float) * b;
        h->in_f = alloc_f(h->n_in);
        fill_normal(h->in_f, h->n_in, 0, 1);
        h->in = h->in_f;
        h->din = alloc_f(h->n_in);
    }
    h->n_out = l->out_bytes / sizeof(float) * b;
    h->n_saved = l->kind->saved_floats(l, b, PPDL_RC_NONE);
    h->n_work = l->kind->work_floats(l, b);
    h->out = alloc_f(h->n_out);
    h->dout = alloc_f(h->n_out);
    h->R = alloc_f(h->n_out);
    fill_normal(h->R, h->n_out, 0, 1);
    h->saved = alloc_f(h->n_saved);
    h->work = alloc_f(h->n_work);
    h->loss_dev = alloc_f(1);
}

static void harness_forward(harness *h)
{
    fill_nan(h->work, h->n_work);
    h->l->kind->forward(h->l, be, h->b, h->in, h->out, h->saved, h->work, h->opt);
}

/* forward, then the loss (and d loss / d out into dout when want_dout) */
static double harness_loss(harness *h, int want_dout)
{
    harness_forward(h);
    if (h->targets) {
        h->loss_dev[0] = 0;
        float *d = want_dout ? h->dout : alloc_f(h->n_out);
        ppdl_be_softmax_xent(be, h->b * h->l->cfg.T, h->l->cfg.V, h->out, h->targets, 1.0f,
                              h->loss_dev, d);
        if (!want_dout) ppdl_be_free(be, d);
        return h->loss_dev[0];
    }
    double L = 0;
    for (size_t i = 0; i < h->n_out; i++) L += (double)h->out[i] * h->R[i];
    if (want_dout) memcpy(h->dout, h->R, h->n_out * sizeof(float));
    return L;
}

/* analytic gradients: parameter grads (zeroed first) and din */
static void harness_backward(harness *h)
{
    for (int j = 0; j < h->l->n_params; j++)
        memset(h->l->params[j].grad, 0, h->l->params[j].numel * sizeof(float));
    harness_loss(h, 1);
    fill_nan(h->work, h->n_work);
    if (h->din) fill_nan(h->din, h->n_in);
    ppdl_layer_backward(h->l, be, h->b, h->in, h->saved, h->dout, h->din, h->work, h->opt);
}

/* central differences: perturb each element of v[n] by +-eps (the actual float
 * step is used as the denominator) and compare with the analytic grad[n] */
static void check_fd(harness *h, float *v, const float *grad, size_t n, double eps, double atol,
                     double rtol, const char *what)
{
    double *fd = calloc(n, sizeof *fd);
    for (size_t j = 0; j < n; j++) {
        float orig = v[j];
        float hi = (float)(orig + eps), lo = (float)(orig - eps);
        v[j] = hi;
        double Lp = harness_loss(h, 0);
        v[j] = lo;
        double Lm = harness_loss(h, 0);
        v[j] = orig;
        fd[j] = (Lp - Lm) / ((double)hi - (double)lo);
    }
    char msg[160];
    snprintf(msg, sizeof msg, "%s (option %d): %s matches central differences", h->label, h->opt, what);
    check_close(grad, fd, n, atol, rtol, msg);
    free(fd);
}

/* every parameter's gradient and (when the layer has a float input) d in */
static void check_layer_grads(harness *h, double eps, double atol, double rtol)
{
    harness_backward(h);
    for (int j = 0; j < h->l->n_params; j++) {
        ppdl_param *pa = &h->l->params[j];
        float *g = alloc_f(pa->numel);
        memcpy(g, pa->grad, pa->numel * sizeof(float));
        check_fd(h, pa->value, g, pa->numel, eps, atol, rtol, pa->name);
        ppdl_be_free(be, g);
    }
    if (h->in_f) {
        float *g = alloc_f(h->n_in);
        memcpy(g, h->din, h->n_in * sizeof(float));
        check_fd(h, h->in_f, g, h->n_in, eps, atol, rtol, "d input");
        ppdl_be_free(be, g);
    }
}

static void harness_free(harness *h)
{
    ppdl_be_free(be, h->in);
    ppdl_be_free(be, h->din);
    ppdl_be_free(be, h->out);
    ppdl_be_free(be, h->dout);
    ppdl_be_free(be, h->R);
    ppdl_be_free(be, h->saved);
    ppdl_be_free(be, h->work);
    ppdl_be_free(be, h->loss_dev);
    ppdl_be_free(be, h->targets);
}

/* ====================================================================== tests */

static void test_forward_references(void)
{
    int b = 2;
    harness h;

    harness_init(&h, layer_of(&ppdl_kind_embedding), b);
    harness_forward(&h);
    {
        const ppdl_layer *l = h.l;
        int T = l->cfg.T, C = l->cfg.C;
        const int32_t *tok = h.in;
        double *ref = calloc(h.n_out, sizeof *ref);
        for (int r = 0; r < b * T; r++)
            for (int i = 0; i < C; i++)
                ref[r * C + i] = (float)(l->params[0].value[tok[r] * C + i] + l->params[1].value[(r % T) * C + i]);
        check_close(h.out, ref, h.n_out, 0, 0, "embedding forward is wte[tok] + wpe[t]");
        free(ref);
    }
    harness_free(&h);

    harness_init(&h, layer_of(&ppdl_kind_block), b);
    for (int opt = 0; opt < 3; opt += 2) {
        h.opt = opt;
        harness_forward(&h);
        double *ref = calloc(h.n_out, sizeof *ref);
        ref_block(h.l, b, h.in_f, ref);
        /* outputs O(1..5) after ~6 float stages of sums of <= 32 products: errors of
         * ~1e-6; 2e-5 leaves room and still catches any wrong index */
        check_close(h.out, ref, h.n_out, 2e-5, 2e-5, opt ? "block forward (selective) matches a naive GPT-2 block"
                                                         : "block forward matches a naive GPT-2 block");
        free(ref);
    }
    harness_free(&h);

    harness_init(&h, layer_of(&ppdl_kind_head), b);
    harness_forward(&h);
    {
        double *ref = calloc(h.n_out, sizeof *ref);
        ref_head(h.l, b, h.in_f, ref);
        /* one layernorm and one GEMM of 8 products: a few float epsilons of O(1) */
        check_close(h.out, ref, h.n_out, 1e-5, 1e-5, "head forward is ln_f then lm_head, no bias");
        free(ref);
    }
    harness_free(&h);
}

/* Tolerance of the finite-difference checks. The loss is summed in double from float
 * forwards, so its noise is ~1e-7 relative per output times sqrt(outputs) ~ 1e-6
 * absolute; divided by 2 eps = 2e-2 that is ~1e-4 in the difference quotient. The
 * truncation error of central differences is eps^2/6 |f'''| ~ 2e-5 |f'''|. Observed
 * worst errors are 7x or more below the tolerance of 1e-3 + 1e-2 |g| (gradients are O(1));
 * a wrong formula (a missing term, a transposed weight) gives errors of O(|g|). */
#define FD_EPS 1e-2
#define FD_ATOL 1e-3
#define FD_RTOL 1e-2

static void test_gradients(void)
{
    int b = 2;
    harness h;
    harness_init(&h, layer_of(&ppdl_kind_embedding), b);
    check_layer_grads(&h, FD_EPS, FD_ATOL, FD_RTOL);
    harness_free(&h);

    for (int opt = 0; opt < 3; opt += 2) {
        harness_init(&h, layer_of(&ppdl_kind_block), b);
        h.opt = opt;
        check_layer_grads(&h, FD_EPS, FD_ATOL, FD_RTOL);
        harness_free(&h);
    }

    harness_init(&h, layer_of(&ppdl_kind_head), b);
    check_layer_grads(&h, FD_EPS, FD_ATOL, FD_RTOL);
    harness_free(&h);

    /* the head followed by the loss: logits through ppdl_be_softmax_xent. The loss is a
     * float sum of 10 terms ~ 2.4 (ulp ~ 2e-6), so the quotient's noise is ~1e-4:
     * same tolerance. */
    harness_init(&h, layer_of(&ppdl_kind_head), b);
    h.label = "head + softmax_xent";
    h.targets = ppdl_be_alloc(be, (size_t)b * h.l->cfg.T * sizeof(int32_t), "targets");
    for (int i = 0; i < b * h.l->cfg.T; i++) h.targets[i] = (int32_t)(ppdl_rng_u64(&rng) % h.l->cfg.V);
    check_layer_grads(&h, FD_EPS, FD_ATOL, FD_RTOL);
    harness_free(&h);
}

/* copies of everything backward produces: din and the layer's parameter grads */
static float *grads_snapshot(const harness *h, size_t *n)
{
    size_t total = h->n_in;
    for (int j = 0; j < h->l->n_params; j++) total += h->l->params[j].numel;
    float *s = malloc(total * sizeof *s), *p = s;
    if (h->n_in) memcpy(p, h->din, h->n_in * sizeof *p);
    p += h->n_in;
    for (int j = 0; j < h->l->n_params; j++) {
        memcpy(p, h->l->params[j].grad, h->l->params[j].numel * sizeof *p);
        p += h->l->params[j].numel;
    }
    *n = total;
    return s;
}

static void test_selective_and_determinism(void)
{
    int b = 2;
    ppdl_layer *blk = layer_of(&ppdl_kind_block);
    size_t s0 = blk->kind->saved_floats(blk, b, PPDL_RC_NONE);
    size_t s1 = blk->kind->saved_floats(blk, b, PPDL_RC_FULL);
    size_t s2 = blk->kind->saved_floats(blk, b, PPDL_RC_SELECTIVE);
    is_int(blk->kind->n_options, 3, "the block offers three recompute options");
    is_int(s1, s0, "block option 1 (full, done by the runtime) saves like option 0 in its forward");
    {
        size_t N = (size_t)b * blk->cfg.T, C = blk->cfg.C, P = (size_t)b * blk->cfg.H * blk->cfg.T * blk->cfg.T;
        is_int(s0 - s2, 8 * N * C + P, "selective drops exactly the probabilities and the MLP hidden tensors");
    }

    harness h;
    harness_init(&h, blk, b);
    size_t n_out = h.n_out, ng;
    float *out0 = malloc(n_out * sizeof *out0);
    h.opt = PPDL_RC_NONE;
    harness_backward(&h);
    memcpy(out0, h.out, n_out * sizeof *out0);
    float *g0 = grads_snapshot(&h, &ng);

    h.opt = PPDL_RC_SELECTIVE;
    fill_nan(h.saved, h.n_saved); /* option 2 must not rely on the larger layout */
    harness_backward(&h);
    ok(same_bits(h.out, out0, n_out), "block: selective forward output is bitwise option 0's");
    float *g2 = grads_snapshot(&h, &ng);
    ok(same_bits(g2, g0, ng), "block: selective backward gives bitwise option 0's din and gradients");

    h.opt = PPDL_RC_FULL;
    harness_backward(&h);
    float *g1 = grads_snapshot(&h, &ng);
    ok(same_bits(g1, g0, ng), "block: option 1 behaves like option 0");
    free(out0); free(g0); free(g1); free(g2);
    harness_free(&h);

    /* forward twice: bitwise the same output, for every kind (and the selective block) */
    const ppdl_layer_kind *kinds[] = {&ppdl_kind_embedding, &ppdl_kind_block, &ppdl_kind_block, &ppdl_kind_head};
    for (int i = 0; i < 4; i++) {
        harness_init(&h, layer_of(kinds[i]), b);
        h.opt = i == 2 ? PPDL_RC_SELECTIVE : PPDL_RC_NONE;
        harness_forward(&h);
        float *first = malloc(h.n_out * sizeof *first);
        memcpy(first, h.out, h.n_out * sizeof *first);
        fill_nan(h.out, h.n_out);
        harness_forward(&h);
        ok(same_bits(first, h.out, h.n_out), "%s (option %d): forward twice gives the same bits",
           kinds[i]->name, h.opt);
        free(first);
        harness_free(&h);
    }
}

static void test_accumulation(void)
{
    /* backward ADDS into parameter gradients: a second backward doubles them. Not
     * bitwise: the kernels add row by row into the existing sums, so the rounding
     * differs from 2 x; 1e-5 relative is ~100 float epsilons of sums of 10 rows. */
    harness h;
    harness_init(&h, layer_of(&ppdl_kind_block), 2);
    harness_backward(&h);
    size_t ng;
    float *once = grads_snapshot(&h, &ng);
    harness_loss(&h, 1);
    ppdl_layer_backward(h.l, be, h.b, h.in, h.saved, h.dout, h.din, h.work, h.opt);
    float *twice = grads_snapshot(&h, &ng);
    size_t np = ng - h.n_in;
    double *want = malloc(np * sizeof *want);
    for (size_t i = 0; i < np; i++) want[i] = 2.0 * once[h.n_in + i];
    check_close(twice + h.n_in, want, np, 1e-6, 1e-5, "block: backward adds into the parameter gradients");
    free(once); free(twice); free(want);
    harness_free(&h);
}

int main(void)
{
    char err[256];
    be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    if (!be) {
        skip_all(err);
        return 1;
    }
    ppdl_rng_seed(&rng, 20240611);

    test_layernorm_kernels();
    test_embedding_kernels();
    test_reshape_kernels();
    test_softmax_kernels();

    build_model();
    test_forward_references();
    test_gradients();
    test_selective_and_determinism();
    test_accumulation();

    done_testing();
    ppdl_stage_free(&stage);
    ppdl_model_free(&model);
    ppdl_backend_destroy(be);
    return exit_status();
}
