/* bench-cuda.c — the CUDA backend's speed, measured against its own libraries in the
 * same run (driven by perf/bench-cuda; needs a GPU).
 *
 *   bench-cuda-bin step [--preset gpt-small] [--batch B] [--layers L] [--reps R] [--tf32 | --bf16]
 *     One training step of the whole model on one GPU, as the runtime runs it for one
 *     micro-batch: every layer's forward, the softmax cross-entropy, every backward,
 *     AdamW. Timed with CUDA events (median of R). Every GEMM the step issued is
 *     recorded (shape, pointers, scalars) and the same calls are replayed alone: the
 *     cuBLAS rate on the step's own GEMMs. Prints the step's achieved TFLOP/s (model
 *     FLOPs: 3x the forward's) against that rate (goal: >= 60%), and the time outside
 *     GEMMs (the backend's own kernels and launch gaps).
 *     --bf16: --precision bf16 as the runtime runs it (the backend's bf16 GEMMs, each
 *     layer's output and input gradient rounded); the replay calls cublasGemmEx /
 *     cublasGemmStridedBatchedEx itself on operands already in bf16 (random bf16 values
 *     in buffers as large as the largest operand), so the ceiling is cuBLAS's bf16 rate
 *     on the step's shapes, and the backend's conversions of A and B count as time
 *     outside GEMMs.
 *
 *   mpiexec -n 2 bench-cuda-bin xfer [--max-mib M]
 *     Stage-to-stage transfer bandwidth between ranks 0 and 1, ping-pong (one-way time =
 *     round trip / 2): MPI between page-locked host buffers (the network alone); MPI
 *     with host staging of device buffers (backend/xfer.h: device->host, MPI,
 *     host->device), what the runtime does today; NCCL send/recv between the GPUs
 *     (backend/cuda/nccl_p2p.h) when each rank has its own GPU, else a line saying why
 *     not. On one GPU run with PPDL_CUDA_SHARE=1.
 *
 * Output: human-readable lines and "result KEY VALUE" lines that the script collects. */
#include "config.h"

#include <cublas_v2.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/bf16.h"
/* the inside of a backend: the benchmark wraps the table to record the GEMMs */
#include "backend/backend_impl.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/nccl_p2p.h"
#include "backend/xfer.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/model.h"
#include "nn/stage.h"

/* ------------------------------------------------------------------ GEMM recording */

typedef struct gemm_call {
    int batched, ta, tb, m, n, k, lda, ldb, ldc, batch;
    long sa, sb, sc;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_call;

static const ppdl_backend_ops *real_ops;
static gemm_call *calls;
static int n_calls, cap_calls, recording;

static void log_call(gemm_call g)
{
    if (!recording) return;
    if (n_calls == cap_calls) {
        cap_calls = cap_calls ? 2 * cap_calls : 256;
        calls = realloc(calls, (size_t)cap_calls * sizeof *calls);
        PPDL_CHECK(calls, "out of host memory");
    }
    calls[n_calls++] = g;
}

static void rec_gemm(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    log_call((gemm_call){0, ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, alpha, beta, a, b, c});
    real_ops->gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void rec_gemm_batched(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                             int lda, long sa, const float *b, int ldb, long sb, float beta, float *c, int ldc,
                             long sc, int batch)
{
    log_call((gemm_call){1, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, alpha, beta, a, b, c});
    real_ops->gemm_batched(be, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

static void replay(ppdl_backend *be)
{
    for (int i = 0; i < n_calls; i++) {
        const gemm_call *g = &calls[i];
        if (g->batched)
            real_ops->gemm_batched(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->sa, g->b, g->ldb,
                                   g->sb, g->beta, g->c, g->ldc, g->sc, g->batch);
        else
            real_ops->gemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta, g->c,
                           g->ldc);
    }
}

#define BENCH_CUBLAS(call)                                                                        \
    do {                                                                                          \
        cublasStatus_t s_ = (call);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
            ppdl_die("%s: cuBLAS error %d: %s", #call, (int)s_, cublasGetStatusString(s_));       \
    } while (0)

/* the recorded GEMMs as cuBLAS bf16 GEMMs on bf16 operands a16, b16 (as large as the
 * largest A and B), C fp32, fp32 compute: what cuda.c calls, without its conversions */
static void replay_bf16(cublasHandle_t h, const uint16_t *a16, const uint16_t *b16)
{
    for (int i = 0; i < n_calls; i++) {
        const gemm_call *g = &calls[i];
        cublasOperation_t oa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (g->batched)
            BENCH_CUBLAS(cublasGemmStridedBatchedEx(h, ob, oa, g->n, g->m, g->k, &g->alpha, b16, CUDA_R_16BF, g->ldb,
                                                    g->sb, a16, CUDA_R_16BF, g->lda, g->sa, &g->beta, g->c,
                                                    CUDA_R_32F, g->ldc, g->sc, g->batch, CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT));
        else
            BENCH_CUBLAS(cublasGemmEx(h, ob, oa, g->n, g->m, g->k, &g->alpha, b16, CUDA_R_16BF, g->ldb, a16,
                                      CUDA_R_16BF, g->lda, &g->beta, g->c, CUDA_R_32F, g->ldc, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
    }
}

/* a device buffer of n random bf16 values, N(0, 0.02^2) as the weights */
static uint16_t *random_bf16(ppdl_backend *be, size_t n, ppdl_rng *r)
{
    uint16_t *h = ppdl_xmalloc((n ? n : 1) * sizeof *h), *d = ppdl_be_alloc(be, (n ? n : 1) * sizeof *h, "bf16 operand");
    for (size_t i = 0; i < n; i++) h[i] = ppdl_bf16_from_f32((float)(0.02 * ppdl_rng_normal(r)));
    ppdl_be_copy_h2d(be, d, h, n * sizeof *h);
    free(h);
    return d;
}

/* the largest extent of operand `which` (0: A, 1: B) over the recorded GEMMs */
static size_t max_operand(int which)
{
    size_t mx = 1;
    for (int i = 0; i < n_calls; i++) {
        const gemm_call *g = &calls[i];
        size_t e = which == 0 ? ppdl_gemm_operand_extent(0, g->ta, g->m, g->k, g->lda, g->sa, g->batch)
                              : ppdl_gemm_operand_extent(1, g->tb, g->n, g->k, g->ldb, g->sb, g->batch);
        if (e > mx) mx = e;
    }
    return mx;
}

static double gemm_flops(void)
{
    double f = 0;
    for (int i = 0; i < n_calls; i++) f += 2.0 * calls[i].m * calls[i].n * calls[i].k * calls[i].batch;
    return f;
}

/* ------------------------------------------------------------------ one step */

typedef struct step_bufs {
    int L, b;
    void **act;                /* [L+1]: act[0] tokens, act[i] input of layer i, act[L] logits */
    float **saved, *work, *grad[2], *loss;
    int32_t *targets;
} step_bufs;

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* under bf16, the runtime's rounding of a layer's output or input gradient (n floats) */
static void round_if_bf16(ppdl_backend *be, size_t n, float *x)
{
    if (ppdl_be_precision(be) == PPDL_PREC_BF16) ppdl_be_round_bf16(be, n, x);
}

static void run_step(ppdl_stage *st, step_bufs *s, int t)
{
    ppdl_backend *be = st->be;
    ppdl_model *m = st->model;
    int L = s->L, b = s->b;
    for (int i = 0; i < L; i++) {
        m->layers[i].kind->forward(&m->layers[i], be, b, s->act[i], (float *)s->act[i + 1], s->saved[i], s->work, 0);
        round_if_bf16(be, (size_t)b * m->layers[i].out_bytes / sizeof(float), (float *)s->act[i + 1]);
    }
    int rows = b * ppdl_model_loss_rows(m), V = ppdl_model_classes(m);
    float *logits = (float *)s->act[L];
    ppdl_be_softmax_xent(be, rows, V, logits, s->targets, 1.0f / (float)rows, s->loss, logits);
    float *dout = logits;
    for (int i = L - 1; i >= 0; i--) {
        float *din = i > 0 ? s->grad[i % 2] : NULL;
        ppdl_layer_backward(&m->layers[i], be, b, s->act[i], s->saved[i], dout, din, s->work, 0);
        if (din) round_if_bf16(be, (size_t)b * m->layers[i].in_bytes / sizeof(float), din);
        dout = din;
    }
    ppdl_be_adamw(be, st->n_params, st->params, st->grads, st->adam_m, st->adam_v, 1e-4, 0.9, 0.95, 1e-8, 0.1, t);
    ppdl_be_zero(be, st->grads, st->n_params * sizeof(float));
}

static int bench_step(int argc, char **argv)
{
    const char *preset = "gpt-small";
    int b = 8, layers = -1, reps = 5, tf32 = 0, bf16 = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) b = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tf32")) tf32 = 1;
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else ppdl_fail(2, "bench-cuda-bin step: unknown option %s", argv[i]);
    }
    if (reps < 1 || reps > 100 || b < 1) ppdl_fail(2, "bench-cuda-bin step: --reps 1..100, --batch >= 1");
    if (tf32 && bf16) ppdl_fail(2, "bench-cuda-bin step: --tf32 or --bf16, not both");
    char err[PPDL_ERR_LEN];
    ppdl_model m;
    if (ppdl_model_preset(&m, preset, err, sizeof err)) ppdl_fail(2, "%s", err);
    if (layers >= 0) m.n_layers = layers;
    if (ppdl_model_build(&m, err, sizeof err)) ppdl_fail(2, "%s", err);
    ppdl_model_set_precision(&m, bf16); /* as run_setup.c: blocks keep saved tensors packed */
    ppdl_backend *be = ppdl_backend_create("cuda", 1, 0, err, sizeof err);
    if (!be) ppdl_fail(77, "%s", err);
    ppdl_cuda_set_tf32(be, tf32);
    if (bf16 && ppdl_be_set_precision(be, PPDL_PREC_BF16)) ppdl_fail(2, "bench-cuda-bin step: the backend refuses bf16");
    static ppdl_backend_ops rec;
    real_ops = be->ops;
    rec = *be->ops;
    rec.gemm = rec_gemm;
    rec.gemm_batched = rec_gemm_batched;
    be->ops = &rec;

    /* the stage: every layer, random weights (init scale of GPT-2) */
    ppdl_stage st;
    ppdl_stage_alloc_params(&st, &m, be, 0, m.L - 1);
    ppdl_stage_alloc_optimizer(&st);
    ppdl_rng r;
    ppdl_rng_seed(&r, 1);
    float *host = ppdl_xmalloc(st.n_params * sizeof(float));
    for (size_t i = 0; i < st.n_params; i++) host[i] = (float)(0.02 * ppdl_rng_normal(&r));
    ppdl_be_copy_h2d(be, st.params, host, st.n_params * sizeof(float));
    free(host);

    step_bufs s = {.L = m.L, .b = b};
    s.act = ppdl_xcalloc((size_t)m.L + 1, sizeof *s.act);
    s.saved = ppdl_xcalloc((size_t)m.L, sizeof *s.saved);
    size_t max_act = 0, max_work = 0;
    for (int i = 0; i < m.L; i++) {
        const ppdl_layer *l = &m.layers[i];
        s.act[i] = ppdl_be_alloc(be, (size_t)b * l->in_bytes, "layer input");
        size_t sv = l->kind->saved_floats(l, b, 0), w = l->kind->work_floats(l, b);
        s.saved[i] = ppdl_be_alloc(be, (sv ? sv : 1) * sizeof(float), "saved");
        if (w > max_work) max_work = w;
        if ((size_t)b * l->out_bytes > max_act) max_act = (size_t)b * l->out_bytes;
        if ((size_t)b * l->in_bytes > max_act) max_act = (size_t)b * l->in_bytes;
    }
    s.act[m.L] = ppdl_be_alloc(be, (size_t)b * m.layers[m.L - 1].out_bytes, "logits");
    s.work = ppdl_be_alloc(be, (max_work ? max_work : 1) * sizeof(float), "work");
    s.grad[0] = ppdl_be_alloc(be, max_act, "gradients");
    s.grad[1] = ppdl_be_alloc(be, max_act, "gradients");
    s.loss = ppdl_be_alloc(be, sizeof(float), "loss");
    int rows = b * ppdl_model_loss_rows(&m), V = ppdl_model_classes(&m);
    s.targets = ppdl_be_alloc(be, (size_t)rows * sizeof(int32_t), "targets");
    /* inputs: tokens (gpt) or features, and targets, drawn once */
    {
        size_t in_n = (size_t)b * m.layers[0].in_bytes / 4;
        int32_t *ti = ppdl_xmalloc(in_n * 4), *tt = ppdl_xmalloc((size_t)rows * 4);
        int is_tok = !strcmp(m.family, "gpt");
        for (size_t i = 0; i < in_n; i++) {
            if (is_tok) ti[i] = (int32_t)(ppdl_rng_uniform(&r) * m.vocab_size);
            else ((float *)ti)[i] = (float)ppdl_rng_normal(&r);
        }
        for (int i = 0; i < rows; i++) tt[i] = (int32_t)(ppdl_rng_uniform(&r) * V);
        ppdl_be_copy_h2d(be, s.act[0], ti, in_n * 4);
        ppdl_be_copy_h2d(be, s.targets, tt, (size_t)rows * 4);
        free(ti);
        free(tt);
    }
    ppdl_be_zero(be, s.loss, sizeof(float));

    char desc[256], mem[32];
    printf("bench-cuda step: %s, %d layers, %.1f M parameters, batch %d (%d rows), %s, %s in use\n", preset, m.L,
           ppdl_model_param_count(&m) / 1e6, b, rows, ppdl_cuda_describe(be, desc, sizeof desc),
           ppdl_fmt_bytes(ppdl_be_in_use(be), mem, sizeof mem));
    void *e0 = ppdl_be_event_create(be), *e1 = ppdl_be_event_create(be);
    run_step(&st, &s, 1); /* warm-up: cuBLAS heuristics, first-touch, module load */
    double *ts = ppdl_xcalloc((size_t)reps, sizeof(double)), *tg = ppdl_xcalloc((size_t)reps, sizeof(double));
    /* bf16: cuBLAS alone on bf16 operands as large as the step's largest */
    cublasHandle_t h16 = NULL;
    uint16_t *a16 = NULL, *b16 = NULL;
    if (bf16) {
        n_calls = 0;
        recording = 1;
        run_step(&st, &s, 1);
        recording = 0;
        a16 = random_bf16(be, max_operand(0), &r);
        b16 = random_bf16(be, max_operand(1), &r);
        BENCH_CUBLAS(cublasCreate(&h16));
        BENCH_CUBLAS(cublasSetStream(h16, (cudaStream_t)ppdl_cuda_stream(be)));
    }
    for (int k = 0; k < reps; k++) {
        n_calls = 0;
        recording = 1;
        ppdl_be_event_record(be, e0);
        run_step(&st, &s, k + 2);
        ppdl_be_event_record(be, e1);
        recording = 0;
        ppdl_be_event_sync(be, e1);
        ts[k] = ppdl_be_event_elapsed_ms(be, e0, e1);
        ppdl_be_event_record(be, e0);
        if (bf16) replay_bf16(h16, a16, b16);
        else replay(be);
        ppdl_be_event_record(be, e1);
        ppdl_be_event_sync(be, e1);
        tg[k] = ppdl_be_event_elapsed_ms(be, e0, e1);
    }
    double fm = 0;
    for (int i = 0; i < m.L; i++) fm += 3 * m.layers[i].kind->flops_fwd(&m.layers[i], b);
    double fg = gemm_flops(), t_step = median(ts, reps), t_gemm = median(tg, reps);
    double r_step = fm / (t_step * 1e-3) / 1e12, r_gemm = fg / (t_gemm * 1e-3) / 1e12;
    const char *mode = tf32 ? "tf32" : bf16 ? "bf16" : "fp32";
    printf("  %s: step %.2f ms, %.1f TFLOP/s (model FLOPs %.3g); its %d GEMMs alone %.2f ms, %.1f TFLOP/s "
           "(%.3g FLOPs)\n",
           mode, t_step, r_step, fm, n_calls, t_gemm, r_gemm, fg);
    printf("  %s: step at %.0f%% of the cuBLAS rate on its GEMMs (goal >= 60%%); outside GEMMs %.2f ms (%.0f%% of "
           "the step)\n",
           mode, 100 * r_step / r_gemm, t_step - t_gemm, 100 * (t_step - t_gemm) / t_step);
    printf("result %s_step_ms %.3f\nresult %s_step_tflops %.2f\nresult %s_gemm_ms %.3f\nresult %s_gemm_tflops %.2f\n"
           "result %s_ratio %.3f\n",
           mode, t_step, mode, r_step, mode, t_gemm, mode, r_gemm, mode, r_step / r_gemm);
    fflush(stdout);
    if (h16) BENCH_CUBLAS(cublasDestroy(h16));
    ppdl_be_free(be, a16);
    ppdl_be_free(be, b16);
    return 0;
}

/* ------------------------------------------------------------------ transfers */

/* one-way seconds of an n-byte message, ping-pong between ranks 0 and 1 */
typedef void (*xfer_fn)(ppdl_backend *be, void *ctx, int rank, size_t n, int reps);

typedef struct xfer_ctx {
    void *dev;                 /* device buffer */
    void *host;                /* page-locked host buffer */
    ppdl_xfer x;
    ppdl_nccl *nc;
} xfer_ctx;

static void pp_host(ppdl_backend *be, void *c, int rank, size_t n, int reps)
{
    (void)be;
    xfer_ctx *x = c;
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            PPDL_CHECK_MPI(MPI_Send(x->host, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD));
            PPDL_CHECK_MPI(MPI_Recv(x->host, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            PPDL_CHECK_MPI(MPI_Recv(x->host, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            PPDL_CHECK_MPI(MPI_Send(x->host, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD));
        }
    }
}

static void staged_send(ppdl_backend *be, xfer_ctx *x, size_t n, int to)
{
    const void *buf = ppdl_xfer_send_buf(be, &x->x, x->dev, n);
    PPDL_CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, to, 0, MPI_COMM_WORLD));
}

static void staged_recv(ppdl_backend *be, xfer_ctx *x, size_t n, int from)
{
    void *buf = ppdl_xfer_recv_buf(be, &x->x, x->dev, n);
    PPDL_CHECK_MPI(MPI_Recv(buf, (int)n, MPI_BYTE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    ppdl_xfer_recv_done(be, &x->x, x->dev, n);
}

static void pp_staged(ppdl_backend *be, void *c, int rank, size_t n, int reps)
{
    xfer_ctx *x = c;
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            staged_send(be, x, n, 1);
            staged_recv(be, x, n, 1);
        } else {
            staged_recv(be, x, n, 0);
            staged_send(be, x, n, 0);
        }
    }
}

static void pp_nccl(ppdl_backend *be, void *c, int rank, size_t n, int reps)
{
    xfer_ctx *x = c;
    ppdl_nccl_req req = {0};
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            ppdl_nccl_isend(x->nc, x->dev, n, 1, &req);
            ppdl_nccl_wait(x->nc, &req);
            ppdl_nccl_irecv(x->nc, x->dev, n, 1, &req);
            ppdl_nccl_wait(x->nc, &req);
        } else {
            ppdl_nccl_irecv(x->nc, x->dev, n, 0, &req);
            ppdl_nccl_wait(x->nc, &req);
            ppdl_nccl_isend(x->nc, x->dev, n, 0, &req);
            ppdl_nccl_wait(x->nc, &req);
        }
    }
    ppdl_be_sync(be);
    ppdl_nccl_req_free(&req);
}

static double time_pp(ppdl_backend *be, xfer_fn f, xfer_ctx *x, int rank, size_t n)
{
    int reps = n <= (1u << 20) ? 50 : 10;
    f(be, x, rank, n, 2); /* warm-up */
    PPDL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    f(be, x, rank, n, reps);
    double t = (MPI_Wtime() - t0) / (2.0 * reps);
    PPDL_CHECK_MPI(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return t;
}

static int bench_xfer(int argc, char **argv)
{
    int max_mib = 64;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--max-mib") && i + 1 < argc) max_mib = atoi(argv[++i]);
        else ppdl_fail(2, "bench-cuda-bin xfer: unknown option %s", argv[i]);
    }
    int rank, size;
    PPDL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    PPDL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size != 2) ppdl_fail(2, "bench-cuda-bin xfer runs on 2 ranks (mpiexec -n 2), not %d", size);
    char err[PPDL_ERR_LEN];
    ppdl_backend *be = ppdl_backend_create("cuda", 1, rank, err, sizeof err);
    int bad = be == NULL, any = 0;
    PPDL_CHECK_MPI(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any) {
        if (bad) fprintf(stderr, "%s\n", err);
        return 77;
    }
    size_t max = (size_t)max_mib << 20;
    xfer_ctx x = {0};
    x.dev = ppdl_be_alloc(be, max, "transfer buffer");
    int pinned;
    x.host = ppdl_be_host_alloc(be, max, &pinned);
    PPDL_CHECK(pinned, "no page-locked host memory for %d MiB", max_mib);
    ppdl_be_zero(be, x.dev, max);
    memset(x.host, 1, max);
    x.nc = ppdl_nccl_create(MPI_COMM_WORLD, be, NULL, err, sizeof err); /* one communicator, as the probe */
    if (rank == 0) {
        char desc[256];
        printf("bench-cuda xfer: 2 ranks; rank 0 on %s\n", ppdl_cuda_describe(be, desc, sizeof desc));
        if (!x.nc) printf("  NCCL: not measured: %s\n", err);
        printf("  %10s %16s %16s %16s\n", "bytes", "MPI host GB/s", "MPI staged GB/s", "NCCL GB/s");
    }
    for (size_t n = 64 << 10; n <= max; n *= 4) {
        double th = time_pp(be, pp_host, &x, rank, n), ts = time_pp(be, pp_staged, &x, rank, n);
        double tn = x.nc ? time_pp(be, pp_nccl, &x, rank, n) : NAN;
        if (rank == 0) {
            printf("  %10zu %16.2f %16.2f %16.2f\n", n, n / th / 1e9, n / ts / 1e9, x.nc ? n / tn / 1e9 : NAN);
            printf("result xfer_%zu_host_gbs %.3f\nresult xfer_%zu_staged_gbs %.3f\n", n, n / th / 1e9, n,
                   n / ts / 1e9);
            if (x.nc) printf("result xfer_%zu_nccl_gbs %.3f\n", n, n / tn / 1e9);
        }
    }
    fflush(stdout);
    ppdl_nccl_destroy(x.nc);
    ppdl_xfer_free(be, &x.x);
    ppdl_be_host_free(be, x.host, pinned);
    ppdl_be_free(be, x.dev);
    ppdl_backend_destroy(be); /* runs be->ops->destroy, once */
    return 0;
}

int main(int argc, char **argv)
{
    PPDL_CHECK_MPI(MPI_Init(&argc, &argv));
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ppdl_set_log_rank(rank);
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "step")) rc = bench_step(argc, argv);
    else if (argc >= 2 && !strcmp(argv[1], "xfer")) rc = bench_xfer(argc, argv);
    else if (rank == 0)
        fprintf(stderr, "usage: bench-cuda-bin step [--preset P] [--batch B] [--layers L] [--reps R] [--tf32 | --bf16]\n"
                        "       mpiexec -n 2 bench-cuda-bin xfer [--max-mib M]\n");
    MPI_Finalize();
    return rc;
}
