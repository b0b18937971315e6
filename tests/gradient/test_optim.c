/* test_optim.c — AdamW against values computed by hand and by an independent double
 * precision reference; micro-batch gradient accumulation equals one big batch. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"

/* AdamW in double, written from the algorithm in PyTorch's documentation */
static void adamw_ref(int n, double *p, const double *g, double *m, double *v, double lr, double b1,
                      double b2, double eps, double wd, int t)
{
    for (int i = 0; i < n; i++) {
        p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
        p[i] -= lr * mh / (sqrt(vh) + eps);
    }
}

static void test_adamw(ppdl_backend *be)
{
    /* by hand, one weight: p=1, g=0.5, lr=0.1, wd=0.01: decay 1 -> 0.999; m=0.05,
     * v=0.00025; m^=0.5, v^=0.25; step 0.1*0.5/(0.5+1e-8) = 0.099999998 -> 0.899000002 */
    float p = 1.0f, g = 0.5f, m = 0, v = 0;
    ppdl_be_adamw(be, 1, &p, &g, &m, &v, 0.1, 0.9, 0.999, 1e-8, 0.01, 1);
    /* float32 results: a few ulps (6e-8 relative each) */
    close_f(p, 0.899000002, 2e-7, 0, "AdamW step 1 by hand");
    close_f(m, 0.05, 0, 3e-7, "first moment by hand");
    close_f(v, 0.00025, 0, 3e-7, "second moment by hand");

    enum { N = 1000, STEPS = 5 };
    static float pf[N], gf[N], mf[N], vf[N];
    static double pd[N], gd[N], md[N], vd[N];
    ppdl_rng r;
    ppdl_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        pf[i] = (float)ppdl_rng_normal(&r);
        pd[i] = pf[i];
        mf[i] = vf[i] = 0;
        md[i] = vd[i] = 0;
    }
    double worst = 0;
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++) {
            gf[i] = (float)(0.1 * ppdl_rng_normal(&r));
            gd[i] = gf[i];
        }
        ppdl_be_adamw(be, N, pf, gf, mf, vf, 1e-3, 0.9, 0.999, 1e-8, 1e-2, t);
        adamw_ref(N, pd, gd, md, vd, 1e-3, 0.9, 0.999, 1e-8, 1e-2, t);
        for (int i = 0; i < N; i++) worst = fmax(worst, fabs(pf[i] - pd[i]));
    }
    /* float32 arithmetic on weights of size ~1: a few ulps (1.2e-7 each) per step */
    ok(worst < 1e-6, "AdamW: 5 steps on 1000 weights match a double reference (max diff %.3g)", worst);
}

/* one mlp, loss over b samples, gradients into the stage arena */
static void grads(ppdl_model *m, ppdl_stage *st, ppdl_backend *be, int b, const float *x,
                  const int32_t *y, int B_total, int n_micro)
{
    int per = b / n_micro;
    float *acts[8], *saved[8], *work = NULL;
    size_t maxw = 0;
    for (int l = 0; l < m->L; l++) {
        ppdl_layer *ly = &m->layers[l];
        acts[l] = ppdl_be_alloc(be, (size_t)per * ly->in_bytes, "act");
        saved[l] = ppdl_be_alloc(be, (ly->kind->saved_floats(ly, per, 0) + 1) * sizeof(float), "saved");
        size_t w = ly->kind->work_floats(ly, per);
        if (w > maxw) maxw = w;
    }
    work = ppdl_be_alloc(be, (maxw + 1) * sizeof(float), "work");
    int V = m->n_classes;
    float *logits = ppdl_be_alloc(be, (size_t)per * V * sizeof(float), "logits");
    float *g1 = ppdl_be_alloc(be, (size_t)per * 64 * sizeof(float), "g1");
    float *g2 = ppdl_be_alloc(be, (size_t)per * 64 * sizeof(float), "g2");
    float loss = 0;
    for (int mb = 0; mb < n_micro; mb++) {
        memcpy(acts[0], x + (size_t)mb * per * m->in_features, (size_t)per * m->in_features * sizeof(float));
        for (int l = 0; l < m->L; l++) {
            ppdl_layer *ly = &m->layers[l];
            ly->kind->forward(ly, be, per, acts[l], l + 1 < m->L ? acts[l + 1] : logits, saved[l], work, 0);
        }
        ppdl_be_softmax_xent(be, per, V, logits, y + mb * per, 1.0f / (float)B_total, &loss, logits);
        float *dout = logits;
        for (int l = m->L - 1; l >= 0; l--) {
            ppdl_layer *ly = &m->layers[l];
            float *din = l > 0 ? (l % 2 ? g1 : g2) : NULL;
            ppdl_layer_backward(ly, be, per, acts[l], saved[l], dout, din, work, 0);
            dout = din;
        }
    }
    for (int l = 0; l < m->L; l++) {
        ppdl_be_free(be, acts[l]);
        ppdl_be_free(be, saved[l]);
    }
    ppdl_be_free(be, work);
    ppdl_be_free(be, logits);
    ppdl_be_free(be, g1);
    ppdl_be_free(be, g2);
    (void)st;
}

static void test_accumulation(ppdl_backend *be)
{
    ppdl_model m;
    char err[PPDL_ERR_LEN];
    ppdl_model_preset(&m, "mlp-tiny", err, sizeof err);
    ok(ppdl_model_build(&m, err, sizeof err) == 0, "mlp-tiny built");
    ppdl_stage st;
    ppdl_stage_alloc_params(&st, &m, be, 0, m.L - 1);
    ppdl_rng r;
    ppdl_rng_seed(&r, 5);
    for (size_t i = 0; i < st.n_params; i++) st.params[i] = (float)(0.3 * ppdl_rng_normal(&r));
    enum { B = 8 };
    float x[B * 16];
    int32_t y[B];
    for (int i = 0; i < B * 16; i++) x[i] = (float)ppdl_rng_normal(&r);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(ppdl_rng_u64(&r) % 4);

    grads(&m, &st, be, B, x, y, B, 1);
    float *one = ppdl_xmalloc(st.n_params * sizeof(float));
    memcpy(one, st.grads, st.n_params * sizeof(float));
    double scale = 0;
    for (size_t i = 0; i < st.n_params; i++) scale = fmax(scale, fabs(one[i]));
    for (int M = 2; M <= 8; M *= 2) {
        memset(st.grads, 0, st.n_params * sizeof(float));
        grads(&m, &st, be, B, x, y, B, M);
        double worst = 0;
        for (size_t i = 0; i < st.n_params; i++) worst = fmax(worst, fabs(st.grads[i] - one[i]));
        /* the same sums in a different order: float rounding, ~1e-7 of the largest
         * gradient per addition, a few additions -> 1e-6 relative */
        ok(worst <= 1e-6 * scale, "%d micro-batches of %d give the gradients of one batch of %d "
                                   "(max diff %.3g, largest gradient %.3g)", M, B / M, B, worst, scale);
    }
    free(one);
    ppdl_stage_free(&st);
    ppdl_model_free(&m);
}

int main(void)
{
    char err[PPDL_ERR_LEN];
    ppdl_backend *be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    test_adamw(be);
    test_accumulation(be);
    ppdl_backend_destroy(be);
    done_testing();
    return exit_status();
}
