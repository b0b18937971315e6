/* bench-gemm.c — do ppdl's GEMM-heavy layers reach the sgemm rate of OpenBLAS itself?
 *
 * For each layer (a linear layer and a GPT block at the gpt-bench sizes), time its
 * forward + backward and count its FLOPs; then time, in the same run, plain
 * cblas_sgemm calls of exactly the GEMM shapes that layer issues. The ratio of the two
 * rates is the share of the BLAS rate the layer keeps (goal: >= 70%).
 *   usage: bench-gemm [--threads T] [--reps R]
 * Prints one line per case and a final table; records nothing by itself. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/model.h"
#include "nn/stage.h"

typedef struct { int ta, tb, m, n, k, times; } shape; /* times: repeats per layer call (attention: per sample and head) */

static double time_gemms(const shape *s, int ns, int reps)
{
    size_t big = 0;
    for (int i = 0; i < ns; i++) {
        size_t a = (size_t)s[i].m * s[i].k, b = (size_t)s[i].k * s[i].n, c = (size_t)s[i].m * s[i].n;
        size_t mx = a > b ? a : b;
        mx = mx > c ? mx : c;
        if (mx > big) big = mx;
    }
    float *A = ppdl_xcalloc(big, sizeof(float)), *B = ppdl_xcalloc(big, sizeof(float)), *C = ppdl_xcalloc(big, sizeof(float));
    for (size_t i = 0; i < big; i++) { A[i] = (float)(i % 7) * 0.1f; B[i] = (float)(i % 5) * 0.1f; }
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = ppdl_now_s();
        for (int i = 0; i < ns; i++) {
            const shape *q = &s[i];
            int lda = q->ta ? q->m : q->k, ldb = q->tb ? q->k : q->n;
            for (int t = 0; t < (q->times ? q->times : 1); t++)
                cblas_sgemm(CblasRowMajor, q->ta ? CblasTrans : CblasNoTrans, q->tb ? CblasTrans : CblasNoTrans,
                            q->m, q->n, q->k, 1.0f, A, lda, B, ldb, 1.0f, C, q->n);
        }
        double t = ppdl_now_s() - t0;
        if (r > 0 && t < best) best = t; /* first round is warm-up */
    }
    free(A); free(B); free(C);
    return best;
}

static double gemm_flops(const shape *s, int ns)
{
    double f = 0;
    for (int i = 0; i < ns; i++) f += 2.0 * s[i].m * s[i].n * s[i].k * (s[i].times ? s[i].times : 1);
    return f;
}

/* forward + backward of one layer, best of reps */
static double time_layer(ppdl_backend *be, ppdl_model *m, int li, int b, int reps)
{
    ppdl_layer *l = &m->layers[li];
    ppdl_stage st;
    ppdl_stage_alloc_params(&st, m, be, li, li);
    ppdl_rng r;
    ppdl_rng_seed(&r, 1);
    for (size_t i = 0; i < st.n_params; i++) st.params[i] = (float)(0.02 * ppdl_rng_normal(&r));
    size_t in_f = (size_t)b * l->in_bytes / 4, out_f = (size_t)b * l->out_bytes / 4;
    float *in = ppdl_be_alloc(be, in_f * 4, "in"), *out = ppdl_be_alloc(be, out_f * 4, "out");
    float *din = ppdl_be_alloc(be, in_f * 4, "din"), *dout = ppdl_be_alloc(be, out_f * 4, "dout");
    float *saved = ppdl_be_alloc(be, (l->kind->saved_floats(l, b, 0) + 1) * 4, "saved");
    float *work = ppdl_be_alloc(be, (l->kind->work_floats(l, b) + 1) * 4, "work");
    for (size_t i = 0; i < in_f; i++) in[i] = (float)ppdl_rng_normal(&r);
    double best = 1e30;
    for (int k = 0; k < reps + 1; k++) {
        for (size_t i = 0; i < out_f; i++) dout[i] = 1e-3f * (float)(i % 13);
        double t0 = ppdl_now_s();
        l->kind->forward(l, be, b, in, out, saved, work, 0);
        ppdl_layer_backward(l, be, b, in, saved, dout, din, work, 0);
        double t = ppdl_now_s() - t0;
        if (k > 0 && t < best) best = t;
    }
    ppdl_be_free(be, in); ppdl_be_free(be, out); ppdl_be_free(be, din); ppdl_be_free(be, dout);
    ppdl_be_free(be, saved); ppdl_be_free(be, work);
    ppdl_stage_free(&st);
    return best;
}

int main(int argc, char **argv)
{
    int threads = 1, reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    char err[PPDL_ERR_LEN];
    ppdl_backend *be = ppdl_backend_create("cpu", threads, 0, err, sizeof err);
    if (!be) { fprintf(stderr, "%s\n", err); return 1; }
    printf("bench-gemm: %d thread(s), best of %d; OPENBLAS_CORETYPE=%s\n", threads, reps,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)");
    printf("%-34s %10s %10s %10s %8s\n", "layer (fwd+bwd)", "layer ms", "GFLOP/s", "sgemm GF/s", "ratio");

    /* gpt-bench sizes: B=8, T=128 -> 1024 rows, C=256 */
    const int b = 8, T = 128, C = 256, rows = b * T;
    /* 1. a linear layer C -> 4C with GELU, as the block's MLP: 1024 rows */
    {
        ppdl_model m;
        memset(&m, 0, sizeof m);
        strcpy(m.family, "mlp");
        m.in_features = C; m.hidden = 4 * C; m.n_layers = 2; m.n_classes = C; m.activation = PPDL_ACT_GELU;
        ppdl_model_build(&m, err, sizeof err);
        /* forward x@W^T, backward dY@W (dx) and dY^T@x (dW) */
        shape s[] = {{0, 1, rows, 4 * C, C, 1}, {0, 0, rows, C, 4 * C, 1}, {1, 0, 4 * C, C, rows, 1}};
        double tl = time_layer(be, &m, 0, rows, reps), tg = time_gemms(s, 3, reps);
        double fl = 3 * m.layers[0].kind->flops_fwd(&m.layers[0], rows);
        printf("%-34s %10.3f %10.1f %10.1f %7.0f%%\n", "linear 256->1024 gelu, 1024 rows", 1e3 * tl, fl / tl / 1e9,
               gemm_flops(s, 3) / tg / 1e9, 100 * (fl / tl) / (gemm_flops(s, 3) / tg));
        ppdl_model_free(&m);
    }
    /* 2. a GPT block (gpt-bench: C=256, H=4, T=128), B=8 */
    {
        ppdl_model m;
        ppdl_model_preset(&m, "gpt-bench", err, sizeof err);
        ppdl_model_build(&m, err, sizeof err);
        const int H = 4, hs = C / H, bh = b * H;
        shape sh[12 + 4 * 6] = {
            /* forward: qkv, proj, fc, proj */
            {0, 1, rows, 3 * C, C, 1}, {0, 1, rows, C, C, 1}, {0, 1, rows, 4 * C, C, 1}, {0, 1, rows, C, 4 * C, 1},
            /* backward: dX and dW of each linear */
            {0, 0, rows, C, 3 * C, 1}, {1, 0, 3 * C, C, rows, 1}, {0, 0, rows, C, C, 1}, {1, 0, C, C, rows, 1},
            {0, 0, rows, C, 4 * C, 1}, {1, 0, 4 * C, C, rows, 1}, {0, 0, rows, 4 * C, C, 1}, {1, 0, C, 4 * C, rows, 1},
        };
        int n = 12;
        /* the attention's products as the layer issues them (layer_gpt.c): R = 4 blocks of
         * 32 rows, each up to its causal edge; per sample and head. Forward: scores q k^T
         * and y = p v; backward: dP = dy v^T, dV = p^T dy, dQ = dS k, dK = dS^T q */
        for (int r = 0; r < 4; r++) {
            int t0 = T * r / 4, t1 = T * (r + 1) / 4, bs = t1 - t0;
            shape blk[] = {{0, 1, bs, t1, hs, bh}, {0, 0, bs, hs, t1, bh}, {0, 1, bs, t1, hs, bh},
                           {1, 0, bs, hs, T - t0, bh}, {0, 0, bs, hs, t1, bh}, {1, 0, bs, hs, T - t0, bh}};
            for (int q = 0; q < 6; q++) sh[n++] = blk[q];
        }
        double rate_g = gemm_flops(sh, n) / time_gemms(sh, n, reps);
        double tl = time_layer(be, &m, 1, b, reps);
        double fl = 3 * m.layers[1].kind->flops_fwd(&m.layers[1], b); /* as computed */
        printf("%-34s %10.3f %10.1f %10.1f %7.0f%%\n", "gpt block C=256 H=4 T=128, B=8", 1e3 * tl, fl / tl / 1e9,
               rate_g / 1e9, 100 * (fl / tl) / rate_g);
        ppdl_model_free(&m);
    }
    ppdl_backend_destroy(be);
    return 0;
}
