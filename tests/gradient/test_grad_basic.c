/* test_grad_basic.c — the MLP/CNN layer kinds and their CPU kernels.
 *
 *  1. im2col / col2im / max-pool kernels against naive loops written here; col2im is
 *     checked as the adjoint of im2col (<im2col(x), c> == <x, col2im(c)>) and to ADD.
 *  2. act_fwd / act_bwd (relu, gelu) against a double reference and central differences.
 *  3. Finite-difference gradient checks of every layer kind (linear with each activation,
 *     conv stride 1 pad 1 and stride 2 pad 0, maxpool with and without overlap, flatten)
 *     under L = sum(out * R) for a fixed random R, of d(input) and of every parameter.
 *  4. The same for linear followed by ppdl_be_softmax_xent, and for the whole cnn-tiny chain.
 *  5. Contract details: backward ADDS into parameter gradients, din == NULL works,
 *     option 1 (full recompute) computes the same as option 0, flops_fwd.
 *
 * On the CPU backend device pointers are host pointers, so this test reads them directly.
 *
 * Kinks: relu and max-pool are not differentiable where a pre-activation is 0 or a window
 * has a tie. A central difference over [v - eps, v + eps] is only meaningful when no kink
 * lies in between; we detect that exactly: the pre-activation and the pooled windows are
 * affine in any one input or weight, so a kink is crossed iff the relu sign pattern or
 * the argmax pattern at v - eps or v + eps differs from the one at v. Then the step is
 * shrunk (eps/8, eps/64, with a noise floor growing accordingly); an element with a kink
 * even closer is skipped and counted, and a check fails if more than a fifth were
 * skipped, so it cannot pass vacuously.
 */
#include "backend/backend.h"
#include "core/util.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ppdl_backend *be;
static ppdl_rng rng;

static float urand(float lo, float hi) { return lo + (hi - lo) * (float)ppdl_rng_uniform(&rng); }

static void fill_uniform(float *p, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) p[i] = urand(lo, hi);
}

static float *dev_floats(size_t n)
{
    return ppdl_be_alloc(be, (n ? n : 1) * sizeof(float), "test buffer");
}

static int conv_out(int n, int k, int stride, int pad) { return (n + 2 * pad - k) / stride + 1; }

/* ==================================================================================== */
/* 1. kernels against naive references                                                  */

/* naive im2col: col[(c*kh + i)*kw + j, oh*OW + ow] = x[c, oh*s - p + i, ow*s - p + j] or 0 */
static void ref_im2col(int Ci, int Hh, int Ww, int kh, int kw, int s, int p, const float *x, float *col)
{
    int OH = conv_out(Hh, kh, s, p), OW = conv_out(Ww, kw, s, p);
    for (int c = 0; c < Ci; c++)
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        int ih = oh * s - p + i, iw = ow * s - p + j;
                        float v = 0.0f;
                        if (ih >= 0 && ih < Hh && iw >= 0 && iw < Ww) v = x[(c * Hh + ih) * Ww + iw];
                        col[(((c * kh + i) * kw + j) * OH + oh) * OW + ow] = v;
                    }
}

/* naive col2im: the scatter-add, accumulated in double */
static void ref_col2im(int Ci, int Hh, int Ww, int kh, int kw, int s, int p, const float *col, double *dx)
{
    int OH = conv_out(Hh, kh, s, p), OW = conv_out(Ww, kw, s, p);
    for (int c = 0; c < Ci; c++)
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        int ih = oh * s - p + i, iw = ow * s - p + j;
                        if (ih >= 0 && ih < Hh && iw >= 0 && iw < Ww)
                            dx[(c * Hh + ih) * Ww + iw] += col[(((c * kh + i) * kw + j) * OH + oh) * OW + ow];
                    }
}

typedef struct { int Ci, Hh, Ww, kh, kw, stride, pad; } conv_case;

static void test_im2col_col2im(const conv_case *t)
{
    const int OH = conv_out(t->Hh, t->kh, t->stride, t->pad), OW = conv_out(t->Ww, t->kw, t->stride, t->pad);
    const size_t nx = (size_t)t->Ci * t->Hh * t->Ww, nc = (size_t)t->Ci * t->kh * t->kw * OH * OW;
    float *x = dev_floats(nx), *col = dev_floats(nc), *ref = dev_floats(nc);
    float *c = dev_floats(nc), *dx = dev_floats(nx);
    double *dref = calloc(nx, sizeof *dref);
    char name[96];
    snprintf(name, sizeof name, "Ci=%d %dx%d k=%dx%d s=%d p=%d", t->Ci, t->Hh, t->Ww, t->kh, t->kw,
             t->stride, t->pad);

    fill_uniform(x, nx, -1, 1);
    memset(col, 0x7f, nc * sizeof(float)); /* garbage: im2col must overwrite every slot */
    ppdl_be_im2col(be, t->Ci, t->Hh, t->Ww, t->kh, t->kw, t->stride, t->pad, x, col);
    ref_im2col(t->Ci, t->Hh, t->Ww, t->kh, t->kw, t->stride, t->pad, x, ref);
    size_t bad = 0;
    for (size_t i = 0; i < nc; i++) bad += col[i] != ref[i];
    /* im2col only copies values: it must be exact */
    ok(bad == 0, "im2col %s equals the naive loop (%zu of %zu differ)", name, bad, nc);

    /* col2im ADDS: start from dx = 1 */
    fill_uniform(c, nc, -1, 1);
    for (size_t i = 0; i < nx; i++) dx[i] = 1.0f, dref[i] = 1.0;
    ppdl_be_col2im(be, t->Ci, t->Hh, t->Ww, t->kh, t->kw, t->stride, t->pad, c, dx);
    ref_col2im(t->Ci, t->Hh, t->Ww, t->kh, t->kw, t->stride, t->pad, c, dref);
    double maxerr = 0;
    for (size_t i = 0; i < nx; i++) maxerr = fmax(maxerr, fabs(dx[i] - dref[i]));
    /* each dx is a float sum of at most kh*kw terms of size <= 1 (plus the 1 we started
     * from): the float result is within a few ulp of 10, i.e. well under 1e-5 */
    ok(maxerr < 1e-5, "col2im %s adds the naive scatter-add (max err %.2g)", name, maxerr);

    /* adjoint: <im2col(x), c> == <x, col2im(c)> (dx - 1 is col2im(c)) */
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < nc; i++) lhs += (double)col[i] * c[i], mag += fabs((double)col[i] * c[i]);
    for (size_t i = 0; i < nx; i++) rhs += (double)x[i] * (dref[i] - 1.0);
    /* both sides are double sums of the same float products in different orders: they
     * agree to ~1e-16 of the sum of magnitudes; 1e-12 leaves room and still catches a
     * single misplaced term (which changes the sum by ~1e-1 of mag/nc) */
    close_f(lhs, rhs, 1e-12 * mag, 0, "col2im %s is the adjoint of im2col", name);

    ppdl_be_free(be, x); ppdl_be_free(be, col); ppdl_be_free(be, ref);
    ppdl_be_free(be, c); ppdl_be_free(be, dx);
    free(dref);
}

/* naive max-pool: the first maximum in row-major window order */
static void ref_maxpool(int N, int C, int Hh, int Ww, int k, int s, const float *x, float *y, int32_t *am)
{
    int OH = (Hh - k) / s + 1, OW = (Ww - k) / s + 1;
    for (int p = 0; p < N * C; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float best = -INFINITY;
                int bi = -1;
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        int h = oh * s + i, w = ow * s + j;
                        float v = x[(size_t)p * Hh * Ww + h * Ww + w];
                        if (bi < 0 || v > best) best = v, bi = h * Ww + w;
                    }
                y[((size_t)p * OH + oh) * OW + ow] = best;
                am[((size_t)p * OH + oh) * OW + ow] = bi;
            }
}

static void test_maxpool_kernels(int N, int C, int Hh, int Ww, int k, int s)
{
    const int OH = (Hh - k) / s + 1, OW = (Ww - k) / s + 1;
    const size_t nx = (size_t)N * C * Hh * Ww, ny = (size_t)N * C * OH * OW;
    float *x = dev_floats(nx), *y = dev_floats(ny), *yr = dev_floats(ny), *dy = dev_floats(ny);
    float *dx = dev_floats(nx);
    int32_t *am = ppdl_be_alloc(be, ny * sizeof(int32_t), "argmax");
    int32_t *amr = ppdl_be_alloc(be, ny * sizeof(int32_t), "argmax ref");
    double *dxr = calloc(nx, sizeof *dxr);
    char name[80];
    snprintf(name, sizeof name, "N=%d C=%d %dx%d k=%d s=%d", N, C, Hh, Ww, k, s);

    /* small integers: many windows hold ties, which must go to the first maximum */
    for (size_t i = 0; i < nx; i++) x[i] = (float)(int)urand(-3, 3);
    ppdl_be_maxpool_fwd(be, N, C, Hh, Ww, k, s, x, y, am);
    ref_maxpool(N, C, Hh, Ww, k, s, x, yr, amr);
    size_t bad = 0;
    for (size_t i = 0; i < ny; i++) bad += y[i] != yr[i] || am[i] != amr[i];
    ok(bad == 0, "maxpool_fwd %s with ties: values and argmax equal the naive loop (%zu differ)", name, bad);

    fill_uniform(dy, ny, -1, 1);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN; /* maxpool_bwd overwrites */
    ppdl_be_maxpool_bwd(be, N, C, Hh, Ww, k, s, am, dy, dx);
    for (size_t p = 0; p < (size_t)N * C; p++)
        for (size_t o = 0; o < (size_t)OH * OW; o++)
            dxr[p * Hh * Ww + amr[p * OH * OW + o]] += dy[p * OH * OW + o];
    double maxerr = 0;
    for (size_t i = 0; i < nx; i++) maxerr = fmax(maxerr, isnan(dx[i]) ? INFINITY : fabs(dx[i] - dxr[i]));
    /* overlapping windows sum at most ceil(k/s)^2 values of size <= 1 in float */
    ok(maxerr < 1e-6, "maxpool_bwd %s overwrites dx with the scatter-add (max err %.2g)", name, maxerr);

    ppdl_be_free(be, x); ppdl_be_free(be, y); ppdl_be_free(be, yr); ppdl_be_free(be, dy);
    ppdl_be_free(be, dx); ppdl_be_free(be, am); ppdl_be_free(be, amr);
    free(dxr);
}

/* ==================================================================================== */
/* 2. activation kernels                                                                */

static double gelu_ref(double v)
{
    return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

static void test_activation(int act)
{
    const char *name = ppdl_act_name(act);
    enum { n = 400 };
    float *x = dev_floats(n), *y = dev_floats(n), *dy = dev_floats(n), *dx = dev_floats(n);
    float *xp = dev_floats(n), *yp = dev_floats(n), *xm = dev_floats(n), *ym = dev_floats(n);
    const float h = 1e-3f;
    for (int i = 0; i < n; i++) {
        x[i] = -5.0f + 10.0f * (i + 0.5f) / n; /* a grid over [-5, 5] */
        if (fabsf(x[i]) < 2 * h) x[i] = 2 * h;  /* keep relu's kink out of [x-h, x+h] */
        xp[i] = x[i] + h;
        xm[i] = x[i] - h;
    }
    fill_uniform(dy, n, -1, 1);

    ppdl_be_act_fwd(be, act, n, x, y);
    double ferr = 0;
    for (int i = 0; i < n; i++) {
        double want = act == PPDL_ACT_RELU ? (x[i] > 0 ? x[i] : 0) : gelu_ref(x[i]);
        ferr = fmax(ferr, fabs(y[i] - want));
    }
    /* float evaluation of a smooth O(5) function: a few ulp of 5 is ~2e-6 */
    ok(ferr < 1e-5, "act_fwd %s matches the double formula (max err %.2g)", name, ferr);

    memcpy(dx, dy, n * sizeof(float));
    ppdl_be_act_bwd(be, act, n, x, dx, dx); /* dx aliases dy, as allowed */
    ppdl_be_act_fwd(be, act, n, xp, yp);
    ppdl_be_act_fwd(be, act, n, xm, ym);
    double berr = 0;
    for (int i = 0; i < n; i++) {
        /* the step actually taken, in float */
        double fd = ((double)yp[i] - ym[i]) / ((double)xp[i] - xm[i]) * dy[i];
        berr = fmax(berr, fabs(dx[i] - fd));
    }
    /* rounding of y (ulp(5) ~ 5e-7) over a step of 2e-3 gives ~5e-4; gelu's truncation
     * error h^2/6 |f'''| is ~1e-7. A wrong derivative is off by O(0.1) somewhere. */
    ok(berr < 2e-3, "act_bwd %s matches central differences (max err %.2g)", name, berr);

    float *all[] = {x, y, dy, dx, xp, yp, xm, ym};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ppdl_be_free(be, all[i]);
}

/* ==================================================================================== */
/* 3. a chain of layers with its buffers, a loss, and finite differences                */

typedef struct {
    ppdl_model m;
    ppdl_stage st;
    int b;
    int xent;           /* loss: 0 = sum(out * R), 1 = mean softmax cross-entropy */
    float **act;        /* act[i]: input of layer i [b, in_i]; act[L]: output */
    float **saved;      /* per layer */
    float **grad;       /* grad[i]: d loss / d act[i] */
    float *work;
    float *R;           /* [b, out] projection */
    int32_t *targets;   /* [b] classes for xent */
    float *loss_dev;    /* one float */
    int *pattern;       /* relu signs and argmaxes, see pattern() */
    size_t n_pattern;
} chain;

static size_t floats_of(size_t bytes) { return bytes / sizeof(float); }

/* random parameters U(-a, a) with a = gain/sqrt(fan_in): gain 1 is PyTorch's default
 * scale (every pre-activation of one layer is O(1)); gain sqrt(6) is He's, which keeps the
 * activations O(1) through a chain of relu layers */
static void chain_random_params(chain *c, float gain)
{
    for (int i = 0; i < c->m.L; i++) {
        ppdl_layer *l = &c->m.layers[i];
        if (!l->n_params) continue;
        size_t fan_in = l->params[0].numel / (size_t)l->params[0].shape[0];
        float a = gain / sqrtf((float)fan_in);
        for (int j = 0; j < l->n_params; j++) fill_uniform(l->params[j].value, l->params[j].numel, -a, a);
    }
}

/* c->m.layers/L must be set; allocates everything for b samples */
static void chain_init(chain *c, int b, int xent)
{
    c->b = b;
    c->xent = xent;
    const int L = c->m.L;
    ppdl_stage_alloc_params(&c->st, &c->m, be, 0, L - 1);
    chain_random_params(c, 1.0f);
    c->act = calloc((size_t)L + 1, sizeof *c->act);
    c->grad = calloc((size_t)L + 1, sizeof *c->grad);
    c->saved = calloc((size_t)L, sizeof *c->saved);
    size_t work = 0, pat = 0;
    for (int i = 0; i < L; i++) {
        ppdl_layer *l = &c->m.layers[i];
        c->act[i] = dev_floats(b * floats_of(l->in_bytes));
        c->grad[i] = dev_floats(b * floats_of(l->in_bytes));
        size_t s = l->kind->saved_floats(l, b, PPDL_RC_NONE);
        c->saved[i] = dev_floats(s);
        size_t w = l->kind->work_floats(l, b);
        work = w > work ? w : work;
        pat += s;
    }
    size_t nout = b * floats_of(c->m.layers[L - 1].out_bytes);
    c->act[L] = dev_floats(nout);
    c->grad[L] = dev_floats(nout);
    c->work = dev_floats(work);
    c->R = dev_floats(nout);
    fill_uniform(c->R, nout, -1, 1);
    c->targets = ppdl_be_alloc(be, (size_t)b * sizeof(int32_t), "targets");
    int V = (int)(nout / b);
    for (int r = 0; r < b; r++) c->targets[r] = (int32_t)(ppdl_rng_u64(&rng) % (uint64_t)V);
    c->loss_dev = dev_floats(1);
    c->pattern = calloc(pat ? pat : 1, sizeof *c->pattern);
    fill_uniform(c->act[0], b * floats_of(c->m.layers[0].in_bytes), -1, 1);
}

static void chain_free(chain *c)
{
    for (int i = 0; i <= c->m.L; i++) {
        ppdl_be_free(be, c->act[i]);
        ppdl_be_free(be, c->grad[i]);
        if (i < c->m.L) ppdl_be_free(be, c->saved[i]);
    }
    ppdl_be_free(be, c->work); ppdl_be_free(be, c->R); ppdl_be_free(be, c->targets);
    ppdl_be_free(be, c->loss_dev);
    free(c->act); free(c->grad); free(c->saved); free(c->pattern);
    ppdl_stage_free(&c->st);
    ppdl_model_free(&c->m);
}

static size_t chain_out_floats(const chain *c) { return c->b * floats_of(c->m.layers[c->m.L - 1].out_bytes); }

/* forward through the chain with recompute option opt; returns the loss in double and,
 * for xent, leaves d loss / d logits in grad[L] */
static double chain_forward(chain *c, int opt)
{
    for (int i = 0; i < c->m.L; i++) {
        const ppdl_layer *l = &c->m.layers[i];
        l->kind->forward(l, be, c->b, c->act[i], c->act[i + 1], c->saved[i], c->work, opt);
    }
    const float *out = c->act[c->m.L];
    size_t n = chain_out_floats(c);
    if (c->xent) {
        int V = (int)(n / c->b);
        *c->loss_dev = 0;
        ppdl_be_softmax_xent(be, c->b, V, out, c->targets, 1.0f / c->b, c->loss_dev, c->grad[c->m.L]);
        return (double)*c->loss_dev / c->b;
    }
    double loss = 0;
    for (size_t i = 0; i < n; i++) loss += (double)out[i] * c->R[i];
    return loss;
}

/* backward through the chain after chain_forward; param grads accumulate, d input into
 * grad[0] (or not computed when with_din is 0) */
static void chain_backward(chain *c, int with_din, int opt)
{
    if (!c->xent) memcpy(c->grad[c->m.L], c->R, chain_out_floats(c) * sizeof(float));
    for (int i = c->m.L - 1; i >= 0; i--) {
        ppdl_layer *l = &c->m.layers[i];
        float *din = i > 0 || with_din ? c->grad[i] : NULL;
        ppdl_layer_backward(l, be, c->b, c->act[i], c->saved[i], c->grad[i + 1], din, c->work, opt);
    }
}

/* the non-differentiable structure of the last forward: relu signs of the saved
 * pre-activations and the max-pool argmaxes */
static size_t chain_pattern(const chain *c, int *pat)
{
    size_t n = 0;
    for (int i = 0; i < c->m.L; i++) {
        const ppdl_layer *l = &c->m.layers[i];
        size_t s = l->kind->saved_floats(l, c->b, PPDL_RC_NONE);
        if (l->kind == &ppdl_kind_maxpool) {
            const int32_t *am = (const int32_t *)c->saved[i];
            for (size_t j = 0; j < s; j++) pat[n++] = am[j];
        } else if (l->cfg.act == PPDL_ACT_RELU) {
            for (size_t j = 0; j < s; j++) pat[n++] = c->saved[i][j] > 0;
        }
    }
    return n;
}

static int pattern_same(const int *a, const int *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

typedef struct { double eps, atol, rtol; int max_per_tensor; } fd_opts;

/* loss at v[i] +- e (restoring v[i]); *smooth = 0 when a kink lies in between; the
 * step is the one actually taken in float */
static double central_difference(chain *c, float *v, size_t i, double e, const int *pat0,
                                 int *pat1, int *smooth)
{
    float orig = v[i];
    v[i] = (float)(orig + e);
    double hp = (double)v[i] - orig;
    double lp = chain_forward(c, 0);
    *smooth = pattern_same(pat0, pat1, chain_pattern(c, pat1));
    v[i] = (float)(orig - e);
    double hm = (double)orig - v[i];
    double lm = chain_forward(c, 0);
    *smooth = *smooth && pattern_same(pat0, pat1, chain_pattern(c, pat1));
    v[i] = orig;
    return (lp - lm) / (hp + hm);
}

/* check the analytic gradient `an` of tensor v[n] (inside the chain) against central
 * differences; at most o->max_per_tensor elements, sampled at random. When [v-eps, v+eps]
 * holds a kink, the step is shrunk (eps/8, eps/64) and the noise floor atol grows with
 * it (rounding noise is inversely proportional to the step); if a kink is still within
 * eps/64, the element is skipped. */
static void fd_check_tensor(chain *c, const char *what, float *v, const float *an, size_t n,
                            const fd_opts *o, const int *pat0, int *pat1)
{
    size_t checked = 0, skipped = 0, shrunk = 0, failed = 0, worst = 0;
    double maxerr = 0, maxg = 0, worst_err = -1, worst_an = 0, worst_fd = 0;
    size_t count = n < (size_t)o->max_per_tensor ? n : (size_t)o->max_per_tensor;
    for (size_t t = 0; t < count; t++) {
        size_t i = count == n ? t : (size_t)(ppdl_rng_u64(&rng) % n);
        double e = o->eps, fd = 0;
        int smooth = 0;
        for (int tries = 0; tries < 3 && !smooth; tries++, e /= 8)
            fd = central_difference(c, v, i, e, pat0, pat1, &smooth);
        e *= 8; /* the step of the last try */
        if (!smooth) {
            skipped++;
            continue;
        }
        shrunk += e < o->eps;
        double err = fabs(an[i] - fd);
        checked++;
        maxg = fmax(maxg, fabs(fd));
        maxerr = fmax(maxerr, err);
        if (err > o->atol * (o->eps / e) + o->rtol * fabs(fd)) {
            failed++;
            if (err > worst_err) worst_err = err, worst = i, worst_an = an[i], worst_fd = fd;
        }
    }
    chain_forward(c, 0); /* leave the chain at its unperturbed state */
    int pass = failed == 0 && checked > 0 && skipped * 5 <= count;
    ok(pass, "%s: %zu checked (%zu with a smaller step), %zu skipped at kinks, max |an - fd| %.2g "
       "(max |grad| %.2g)", what, checked, shrunk, skipped, maxerr, maxg);
    if (failed) diag("  %zu outside tolerance; worst [%zu]: analytic %.7g, finite difference %.7g",
                     failed, worst, worst_an, worst_fd);
}

/* finite-difference check of d input and of every parameter of every layer */
static void fd_check_chain(chain *c, const char *name, const fd_opts *o)
{
    const size_t P = c->st.n_params;
    chain_forward(c, 0);
    size_t np = chain_pattern(c, c->pattern);
    ppdl_be_zero(be, c->st.grads, P * sizeof(float));
    chain_backward(c, 1, 0);
    /* copies of the analytic gradients: the forwards below do not touch them, but keep
     * the check independent of that */
    size_t nx = c->b * floats_of(c->m.layers[0].in_bytes);
    float *dx = malloc(nx * sizeof(float)), *dp = malloc((P ? P : 1) * sizeof(float));
    memcpy(dx, c->grad[0], nx * sizeof(float));
    memcpy(dp, c->st.grads, P * sizeof(float));
    int *pat1 = calloc(np ? np : 1, sizeof *pat1);
    char what[128];

    snprintf(what, sizeof what, "%s d(input)", name);
    fd_check_tensor(c, what, c->act[0], dx, nx, o, c->pattern, pat1);
    for (int i = 0; i < c->m.L; i++) {
        ppdl_layer *l = &c->m.layers[i];
        for (int j = 0; j < l->n_params; j++) {
            ppdl_param *p = &l->params[j];
            if (c->m.L > 1) snprintf(what, sizeof what, "%s layer %d (%s) d%s", name, i, l->kind->name, p->name);
            else snprintf(what, sizeof what, "%s d%s", name, p->name);
            fd_check_tensor(c, what, p->value, dp + p->offset, p->numel, o, c->pattern, pat1);
        }
    }
    free(dx); free(dp); free(pat1);
}

/* a model of one layer */
static void one_layer(chain *c, const ppdl_layer_kind *kind, const ppdl_layer_cfg *cfg)
{
    memset(c, 0, sizeof *c);
    strcpy(c->m.family, "cnn");
    c->m.L = 1;
    c->m.layers = calloc(1, sizeof *c->m.layers);
    ppdl_layer_setup(&c->m.layers[0], kind, 0, cfg);
}

/* Tolerances for L = sum(out * R), float forward, eps = 1e-3 on O(1) values:
 * perturbing one value changes at most ~50 outputs, each recomputed in float with a
 * rounding error of a few ulp (~1e-7 relative to O(1)); their sum with weights |R| <= 1
 * moves L by ~1e-6 at most, i.e. ~5e-4 after division by 2 eps. gelu's truncation error
 * eps^2/6 |f'''| is ~1e-7. So atol 2e-3 with rtol 1e-2 (for the largest gradients,
 * O(5)); gradients are O(1), so a wrong term or index shows as an O(0.1..1) error. */
static const fd_opts fd_default = {.eps = 1e-3, .atol = 2e-3, .rtol = 1e-2, .max_per_tensor = 200};

static void test_linear(int act)
{
    chain c;
    ppdl_layer_cfg cfg = {.in_f = 7, .out_f = 5, .act = act};
    one_layer(&c, &ppdl_kind_linear, &cfg);
    chain_init(&c, 4, 0);
    char name[64];
    snprintf(name, sizeof name, "linear 7->5 %s", ppdl_act_name(act));
    fd_check_chain(&c, name, &fd_default);
    chain_free(&c);
}

static void test_conv(int Ci, int Hh, int Ww, int Co, int k, int stride, int pad, int act)
{
    chain c;
    ppdl_layer_cfg cfg = {.cin = Ci, .cout = Co, .kh = k, .kw = k, .stride = stride, .pad = pad,
                          .act = act, .in_c = Ci, .in_h = Hh, .in_w = Ww};
    one_layer(&c, &ppdl_kind_conv, &cfg);
    chain_init(&c, 2, 0);
    char name[96];
    snprintf(name, sizeof name, "conv %dx%dx%d->%d k%d s%d p%d %s", Ci, Hh, Ww, Co, k, stride, pad,
             ppdl_act_name(act));
    fd_check_chain(&c, name, &fd_default);
    chain_free(&c);
}

static void test_maxpool_layer(int C, int Hh, int Ww, int k, int stride)
{
    chain c;
    ppdl_layer_cfg cfg = {.k = k, .stride = stride, .in_c = C, .in_h = Hh, .in_w = Ww};
    one_layer(&c, &ppdl_kind_maxpool, &cfg);
    chain_init(&c, 2, 0);
    char name[64];
    snprintf(name, sizeof name, "maxpool %dx%dx%d k%d s%d", C, Hh, Ww, k, stride);
    fd_check_chain(&c, name, &fd_default);
    chain_free(&c);
}

static void test_flatten(void)
{
    chain c;
    ppdl_layer_cfg cfg = {.in_c = 3, .in_h = 2, .in_w = 4};
    one_layer(&c, &ppdl_kind_flatten, &cfg);
    chain_init(&c, 3, 0);
    is_int(c.m.layers[0].out_bytes, 24 * sizeof(float), "flatten 3x2x4 gives 24 features");
    chain_forward(&c, 0);
    ok(!memcmp(c.act[0], c.act[1], 3 * 24 * sizeof(float)), "flatten copies its input");
    fd_check_chain(&c, "flatten 3x2x4", &fd_default);
    chain_free(&c);
}

/* Tolerances for the mean cross-entropy: the loss is O(1) but accumulated into a float
 * (ulp ~1e-7), which gives ~1e-4 noise after division by 2 eps (eps = 1e-3); the
 * gradients are O(0.1), so atol 1e-3 and rtol 2e-2. */
static const fd_opts fd_xent = {.eps = 1e-3, .atol = 1e-3, .rtol = 2e-2, .max_per_tensor = 200};

static void test_linear_xent(void)
{
    chain c;
    ppdl_layer_cfg cfg = {.in_f = 6, .out_f = 4, .act = PPDL_ACT_NONE};
    one_layer(&c, &ppdl_kind_linear, &cfg);
    chain_init(&c, 5, 1);
    /* make the logits O(2) so the softmax is far from uniform */
    for (size_t i = 0; i < c.m.layers[0].params[0].numel; i++) c.m.layers[0].params[0].value[i] *= 3;

    double loss = chain_forward(&c, 0), want = 0;
    for (int r = 0; r < c.b; r++) {
        const float *z = c.act[1] + r * 4;
        double mx = z[0], s = 0;
        for (int j = 1; j < 4; j++) mx = fmax(mx, z[j]);
        for (int j = 0; j < 4; j++) s += exp(z[j] - mx);
        want += (log(s) + mx - z[c.targets[r]]) / c.b;
    }
    /* a float accumulation of an O(1) value */
    close_f(loss, want, 1e-5, 1e-5, "softmax_xent loss equals the double reference");
    fd_check_chain(&c, "linear 6->4 + softmax_xent", &fd_xent);
    chain_free(&c);
}

/* the whole cnn-tiny preset (conv relu, maxpool, conv relu, maxpool, flatten, linear
 * relu, linear): the layers together, sharing one work buffer. The loss is the
 * projection (its rounding noise is lower than the float cross-entropy's), the weights
 * He-scaled so that the gradients at the input are not tiny. Every function on the way
 * is piecewise linear, so the central difference is exact between kinks and a larger
 * eps = 1e-2 is possible: noise ~ (ulp of the O(1) logits) / 2 eps ~ 1e-5, hence atol
 * 2e-4 (x8, x64 with the smaller steps) against gradients of O(0.1..1). */
static void test_cnn_tiny_chain(void)
{
    chain c;
    char err[256];
    memset(&c, 0, sizeof c);
    if (ppdl_model_preset(&c.m, "cnn-tiny", err, sizeof err) || ppdl_model_build(&c.m, err, sizeof err)) {
        ok(0, "cnn-tiny builds: %s", err);
        return;
    }
    chain_init(&c, 3, 0);
    chain_random_params(&c, sqrtf(6.0f));
    /* fewer elements per tensor: each check runs the whole chain twice */
    fd_opts o = {.eps = 1e-2, .atol = 2e-4, .rtol = 1e-2, .max_per_tensor = 60};
    fd_check_chain(&c, "cnn-tiny", &o);
    chain_free(&c);
}

/* ==================================================================================== */
/* 5. contract details                                                                  */

static void test_contract(const char *name, const ppdl_layer_kind *kind, const ppdl_layer_cfg *cfg)
{
    chain c;
    one_layer(&c, kind, cfg);
    chain_init(&c, 3, 0);
    const ppdl_layer *l = &c.m.layers[0];
    const size_t P = c.st.n_params, nout = chain_out_floats(&c);
    float *g1 = malloc(P * sizeof(float)), *y0 = malloc(nout * sizeof(float));

    is_int(kind->n_options, 2, "%s offers recompute options none and full", name);
    is_int(kind->saved_floats(l, 3, PPDL_RC_FULL), kind->saved_floats(l, 3, PPDL_RC_NONE),
           "%s: option full saves what option none saves (the runtime recomputes)", name);

    chain_forward(&c, PPDL_RC_NONE);
    memcpy(y0, c.act[1], nout * sizeof(float));
    chain_forward(&c, PPDL_RC_FULL);
    ok(!memcmp(y0, c.act[1], nout * sizeof(float)), "%s: forward under option full = option none", name);

    ppdl_be_zero(be, c.st.grads, P * sizeof(float));
    chain_backward(&c, 1, PPDL_RC_NONE);
    memcpy(g1, c.st.grads, P * sizeof(float));
    chain_backward(&c, 0, PPDL_RC_FULL); /* din == NULL: parameter gradients only */
    double maxerr = 0, maxg = 0;
    for (size_t i = 0; i < P; i++) {
        maxerr = fmax(maxerr, fabs(c.st.grads[i] - 2.0 * g1[i]));
        maxg = fmax(maxg, fabs(g1[i]));
    }
    /* the same float sums done twice and added: exact up to the one rounding of g + g,
     * which is exact in binary; allow an ulp of the largest gradient */
    ok(maxg > 0 && maxerr <= 1e-6 * maxg,
       "%s: a second backward (din NULL) adds the same parameter gradients (max err %.2g)", name, maxerr);
    free(g1);
    free(y0);
    chain_free(&c);
}

static void test_flops(void)
{
    ppdl_layer l;
    ppdl_layer_cfg lin = {.in_f = 7, .out_f = 5};
    ppdl_layer_setup(&l, &ppdl_kind_linear, 0, &lin);
    close_f(l.kind->flops_fwd(&l, 4), 2.0 * 4 * 7 * 5, 0, 0, "linear flops_fwd = 2 b in out");
    ppdl_layer_cfg conv = {.cin = 3, .cout = 8, .kh = 3, .kw = 3, .stride = 1, .pad = 1,
                           .in_c = 3, .in_h = 10, .in_w = 12};
    ppdl_layer_setup(&l, &ppdl_kind_conv, 0, &conv);
    close_f(l.kind->flops_fwd(&l, 2), 2.0 * 2 * 8 * 27 * 10 * 12, 0, 0,
            "conv flops_fwd = 2 b Co Ci kh kw OH OW");
}

int main(void)
{
    char err[256];
    be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    if (!be) {
        printf("Bail out! cpu backend: %s\n", err);
        return 1;
    }
    ppdl_rng_seed(&rng, 20240611);

    static const conv_case cases[] = {
        {2, 5, 6, 3, 3, 1, 1},   /* the cnn preset's shape: same-size output */
        {2, 7, 6, 3, 3, 2, 0},   /* stride 2, no padding */
        {3, 6, 7, 2, 3, 2, 1},   /* non-square kernel, stride and padding */
        {1, 4, 4, 5, 5, 1, 2},   /* kernel larger than the input */
        {2, 9, 5, 1, 1, 3, 0},   /* 1x1 kernel, stride larger than the kernel */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_im2col_col2im(&cases[i]);
    test_maxpool_kernels(2, 3, 6, 8, 2, 2);
    test_maxpool_kernels(1, 2, 7, 7, 3, 2);  /* overlapping windows */
    test_maxpool_kernels(1, 1, 5, 6, 3, 1);
    test_maxpool_kernels(2, 1, 5, 5, 2, 2);  /* the last row/column is not covered */

    test_activation(PPDL_ACT_RELU);
    test_activation(PPDL_ACT_GELU);

    test_linear(PPDL_ACT_NONE);
    test_linear(PPDL_ACT_RELU);
    test_linear(PPDL_ACT_GELU);
    test_conv(2, 5, 6, 3, 3, 1, 1, PPDL_ACT_NONE);
    test_conv(2, 5, 6, 3, 3, 1, 1, PPDL_ACT_RELU);
    test_conv(3, 7, 6, 4, 3, 2, 0, PPDL_ACT_GELU);
    test_conv(2, 6, 5, 3, 2, 2, 1, PPDL_ACT_RELU);
    test_maxpool_layer(3, 4, 6, 2, 2);
    test_maxpool_layer(2, 5, 5, 3, 2);
    test_flatten();
    test_linear_xent();
    test_cnn_tiny_chain();

    ppdl_layer_cfg lin = {.in_f = 6, .out_f = 4, .act = PPDL_ACT_GELU};
    test_contract("linear", &ppdl_kind_linear, &lin);
    ppdl_layer_cfg conv = {.cin = 2, .cout = 3, .kh = 3, .kw = 3, .stride = 1, .pad = 1,
                           .act = PPDL_ACT_RELU, .in_c = 2, .in_h = 5, .in_w = 4};
    test_contract("conv", &ppdl_kind_conv, &conv);
    test_flops();

    ppdl_backend_destroy(be);
    done_testing();
    return exit_status();
}
