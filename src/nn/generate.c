/* generate.c — autoregressive decoding of a gpt model, with or without a key/value cache
 * (generate.h has the contract and the context-window rule).
 *
 * The cached pass over n new tokens at positions p0 .. p0+n-1 (L = p0+n keys after it),
 * per block, with the shapes of its buffers (hs = C/H):
 *
 *   x[n,C]      = wte[tok] + wpe[p0 + i]                      (the embedding, shifted)
 *   ln[n,C]     = layernorm(x)
 *   qkv[n,3C]   = ln @ Wqkv^T + bqkv  -> q[H,n,hs], knew/vnew[H,n,hs]
 *   K, V cache  [H,T,hs]: rows p0 .. p0+n-1 of each head  <- knew, vnew
 *   att[H,n,L]  = q @ K[:, :L]^T, then the causal softmax of its last n rows (scale 1/sqrt(hs))
 *   yh[H,n,hs]  = att @ V[:, :L]  -> atty[n,C] (heads merged)
 *   x          += atty @ Wproj^T + bproj
 *   x          += gelu(layernorm2(x) @ Wfc^T + bfc) @ Wfcproj^T + bfcproj
 * and at the end logits[V] = layernorm_f(x[n-1]) @ lm_head^T, for the last row alone.
 * The operations are the training forward's (layer_gpt.c), on fewer rows: the logits
 * agree with the full forward's to float rounding, not bitwise (GEMMs of other shapes sum
 * in another order; test_generate checks the size of the difference).
 */
#include "nn/generate.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a block's parameters by name (layer.c's table) */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B, N_BLOCK_PARAMS };
static const char *const block_param_names[N_BLOCK_PARAMS] = {
    "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
    "ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias",
};

struct ppdl_gen {
    const ppdl_model *m;
    ppdl_backend *be;
    int use_cache;
    int T, C, H, hs, V, n_blocks;
    float eps;
    const float *wte, *wpe, *lnf_w, *lnf_b, *lm_w;
    const float *(*bp)[N_BLOCK_PARAMS]; /* [n_blocks]: each block's parameters */
    int32_t *ctx;                  /* host [T]: the context */
    int len;                       /* tokens in it */
    int32_t *tok;                  /* device [T] */
    float *logits;                 /* device [T, V] (cached: [1, V]) */
    /* the cached path: caches [n_blocks][H, T, hs] and buffers for up to T rows */
    float *kc, *vc;
    float *x, *ln, *qkv, *q, *kn, *vn, *att, *yh, *atty, *tmp, *fch, *fcg, *mean, *rstd;
    /* the full forward: activations [T, C] twice, the largest saved and work space */
    float *act[2], *saved, *work;
};

static const float *param_named(const ppdl_layer *l, const char *name)
{
    for (int i = 0; i < l->n_params; i++)
        if (!strcmp(l->params[i].name, name)) return l->params[i].value;
    return NULL;
}

static const float *need_param(const ppdl_layer *l, const char *name)
{
    const float *p = param_named(l, name);
    PPDL_CHECK(p, "layer %d (%s) has no parameter %s", l->index, l->kind->name, name);
    return p;
}

static float *falloc(ppdl_backend *be, size_t n, const char *what)
{
    return ppdl_be_alloc(be, (n ? n : 1) * sizeof(float), what);
}

ppdl_gen *ppdl_gen_create(const ppdl_model *m, ppdl_backend *be, int use_cache)
{
    PPDL_CHECK(!strcmp(m->family, "gpt") && m->L >= 2, "generation needs a gpt model, not %s", m->family);
    ppdl_gen *g = ppdl_xcalloc(1, sizeof *g);
    g->m = m;
    g->be = be;
    g->use_cache = use_cache;
    g->T = m->seq_len, g->C = m->d_model, g->H = m->n_heads, g->V = m->vocab_size, g->hs = g->C / g->H;
    g->eps = m->ln_eps;
    g->n_blocks = m->L - 2;
    const ppdl_layer *emb = &m->layers[0], *head = &m->layers[m->L - 1];
    g->wte = need_param(emb, "wte");
    g->wpe = need_param(emb, "wpe");
    g->lnf_w = need_param(head, "ln_f.weight");
    g->lnf_b = need_param(head, "ln_f.bias");
    g->lm_w = param_named(head, "lm_head.weight");
    if (!g->lm_w) g->lm_w = g->wte; /* tied embeddings */
    g->bp = ppdl_xcalloc((size_t)(g->n_blocks ? g->n_blocks : 1), sizeof *g->bp);
    for (int b = 0; b < g->n_blocks; b++)
        for (int j = 0; j < N_BLOCK_PARAMS; j++) g->bp[b][j] = need_param(&m->layers[1 + b], block_param_names[j]);
    g->ctx = ppdl_xcalloc((size_t)g->T, sizeof *g->ctx);
    g->tok = ppdl_be_alloc(be, (size_t)g->T * sizeof(int32_t), "generation: tokens");
    size_t T = (size_t)g->T, C = (size_t)g->C, H = (size_t)g->H, V = (size_t)g->V, NB = (size_t)g->n_blocks;
    if (use_cache) {
        g->logits = falloc(be, V, "generation: logits");
        g->kc = falloc(be, NB * T * C, "key cache");
        g->vc = falloc(be, NB * T * C, "value cache");
        g->x = falloc(be, T * C, "generation: x");
        g->ln = falloc(be, T * C, "generation: layernorm");
        g->qkv = falloc(be, 3 * T * C, "generation: qkv");
        g->q = falloc(be, T * C, "generation: q");
        g->kn = falloc(be, T * C, "generation: new keys");
        g->vn = falloc(be, T * C, "generation: new values");
        g->att = falloc(be, H * T * T, "generation: attention");
        g->yh = falloc(be, T * C, "generation: attention output");
        g->atty = falloc(be, T * C, "generation: attention output");
        g->tmp = falloc(be, T * C, "generation: projection");
        g->fch = falloc(be, 4 * T * C, "generation: MLP");
        g->fcg = falloc(be, 4 * T * C, "generation: MLP");
        g->mean = falloc(be, T, "generation: layernorm mean");
        g->rstd = falloc(be, T, "generation: layernorm rstd");
    } else {
        g->logits = falloc(be, T * V, "generation: logits");
        size_t saved = 0, work = 0;
        for (int i = 0; i < m->L; i++) {
            const ppdl_layer *l = &m->layers[i];
            size_t s = l->kind->saved_floats(l, 1, 0), w = l->kind->work_floats(l, 1);
            saved = s > saved ? s : saved;
            work = w > work ? w : work;
        }
        g->act[0] = falloc(be, T * C, "generation: activations");
        g->act[1] = falloc(be, T * C, "generation: activations");
        g->saved = falloc(be, saved, "generation: saved tensors");
        g->work = falloc(be, work, "generation: work space");
    }
    return g;
}

void ppdl_gen_destroy(ppdl_gen *g)
{
    if (!g) return;
    float *bufs[] = {g->logits, g->kc, g->vc, g->x, g->ln, g->qkv, g->q, g->kn, g->vn, g->att, g->yh,
                     g->atty, g->tmp, g->fch, g->fcg, g->mean, g->rstd, g->act[0], g->act[1], g->saved, g->work};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ppdl_be_free(g->be, bufs[i]);
    ppdl_be_free(g->be, g->tok);
    free(g->bp);
    free(g->ctx);
    free(g);
}

int ppdl_gen_context(const ppdl_gen *g) { return g->len; }

/* y[rows,out] = x[rows,in] @ W[out,in]^T + bias[out] */
static void linear(ppdl_backend *be, int rows, int in, int out, const float *x, const float *W, const float *bias,
                   float *y)
{
    ppdl_be_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
    if (bias) ppdl_be_bias_add(be, rows, out, y, bias);
}

/* one block over the n new rows x[n,C] (positions p0..), its keys and values cached */
static void cached_block(ppdl_gen *g, int b, int p0, int n)
{
    ppdl_backend *be = g->be;
    const float *const *p = g->bp[b];
    int T = g->T, C = g->C, H = g->H, hs = g->hs, L = p0 + n;
    size_t nC = (size_t)n * C, ch = (size_t)T * hs; /* one head's cache */
    float *K = g->kc + (size_t)b * T * C, *Vc = g->vc + (size_t)b * T * C; /* [H,T,hs] */

    /* ---- attention: x += proj(attn(ln1(x))) ---- */
    ppdl_be_layernorm_fwd(be, n, C, g->eps, g->x, p[LN1_W], p[LN1_B], g->ln, g->mean, g->rstd);
    linear(be, n, C, 3 * C, g->ln, p[QKV_W], p[QKV_B], g->qkv);
    ppdl_be_qkv_split(be, 1, n, C, H, g->qkv, g->q, g->kn, g->vn); /* [H,n,hs] each */
    for (int h = 0; h < H; h++) {
        size_t at = (size_t)h * ch + (size_t)p0 * hs, from = (size_t)h * n * hs;
        ppdl_be_copy_d2d(be, K + at, g->kn + from, (size_t)n * hs * sizeof(float));
        ppdl_be_copy_d2d(be, Vc + at, g->vn + from, (size_t)n * hs * sizeof(float));
    }
    /* att[n,L] = q[n,hs] @ K[L,hs]^T, per head; then the softmax of the last n rows */
    ppdl_be_gemm_batched(be, 0, 1, n, L, hs, 1.0f, g->q, hs, (long)n * hs, K, hs, (long)ch, 0.0f, g->att, L,
                         (long)n * L, H);
    ppdl_be_causal_softmax_tail_fwd(be, H, n, L, 1.0f / sqrtf((float)hs), g->att, g->att);
    /* yh[n,hs] = att[n,L] @ V[L,hs], per head */
    ppdl_be_gemm_batched(be, 0, 0, n, hs, L, 1.0f, g->att, L, (long)n * L, Vc, hs, (long)ch, 0.0f, g->yh, hs,
                         (long)n * hs, H);
    ppdl_be_heads_to_seq(be, 1, n, C, H, g->yh, g->atty);
    linear(be, n, C, C, g->atty, p[PROJ_W], p[PROJ_B], g->tmp);
    ppdl_be_axpy(be, nC, 1.0f, g->tmp, g->x);

    /* ---- MLP: x += proj(gelu(fc(ln2(x)))) ---- */
    ppdl_be_layernorm_fwd(be, n, C, g->eps, g->x, p[LN2_W], p[LN2_B], g->ln, g->mean, g->rstd);
    linear(be, n, C, 4 * C, g->ln, p[FC_W], p[FC_B], g->fch);
    ppdl_be_act_fwd(be, PPDL_ACT_GELU, 4 * nC, g->fch, g->fcg);
    linear(be, n, 4 * C, C, g->fcg, p[FCPROJ_W], p[FCPROJ_B], g->tmp);
    ppdl_be_axpy(be, nC, 1.0f, g->tmp, g->x);
}

/* the context's tokens from position p0 on are new: run them, logits of the last */
static void run_cached(ppdl_gen *g, int p0, float *logits)
{
    ppdl_backend *be = g->be;
    int n = g->len - p0, C = g->C;
    ppdl_be_copy_h2d(be, g->tok, g->ctx + p0, (size_t)n * sizeof(int32_t));
    /* wpe shifted by p0 rows: position i of the pass is position p0+i */
    ppdl_be_embedding_fwd(be, 1, n, C, g->tok, g->wte, g->wpe + (size_t)p0 * C, g->x);
    for (int b = 0; b < g->n_blocks; b++) cached_block(g, b, p0, n);
    const float *last = g->x + (size_t)(n - 1) * C;
    ppdl_be_layernorm_fwd(be, 1, C, g->eps, last, g->lnf_w, g->lnf_b, g->ln, g->mean, g->rstd);
    linear(be, 1, C, g->V, g->ln, g->lm_w, NULL, g->logits);
    ppdl_be_copy_d2h(be, logits, g->logits, (size_t)g->V * sizeof(float));
}

/* the whole context through the layers' own forward, as a sequence of len positions */
static void run_full(ppdl_gen *g, float *logits)
{
    ppdl_backend *be = g->be;
    const ppdl_model *m = g->m;
    int n = g->len;
    ppdl_be_copy_h2d(be, g->tok, g->ctx, (size_t)n * sizeof(int32_t));
    const void *in = g->tok;
    float *out = NULL;
    for (int i = 0; i < m->L; i++) {
        ppdl_layer l = m->layers[i]; /* the same parameters, for a sequence of n */
        l.cfg.T = n;
        out = i == m->L - 1 ? g->logits : g->act[i % 2];
        l.kind->forward(&l, be, 1, in, out, g->saved, g->work, 0);
        in = out;
    }
    ppdl_be_copy_d2h(be, logits, out + (size_t)(n - 1) * g->V, (size_t)g->V * sizeof(float));
}

/* the context changed from position p0 on (0: all of it) */
static void run(ppdl_gen *g, int p0, float *logits)
{
    if (g->use_cache) run_cached(g, p0, logits);
    else run_full(g, logits);
}

void ppdl_gen_start(ppdl_gen *g, const int32_t *prompt, int n, float *logits)
{
    PPDL_CHECK(n >= 1, "generation needs a prompt of at least one token");
    if (n > g->T) {
        prompt += n - g->T;
        n = g->T;
    }
    memcpy(g->ctx, prompt, (size_t)n * sizeof *prompt);
    g->len = n;
    run(g, 0, logits);
}

void ppdl_gen_push(ppdl_gen *g, int32_t tok, float *logits)
{
    int p0 = g->len;
    if (g->len == g->T) {
        int keep = g->T / 2;
        memmove(g->ctx, g->ctx + g->len - keep, (size_t)keep * sizeof *g->ctx);
        g->len = keep;
        p0 = 0; /* every position moved: the cache is refilled */
    }
    g->ctx[g->len++] = tok;
    run(g, p0, logits);
}

/* ------------------------------------------------------------------------------------ */
/* picking the next token */

typedef struct { float v; int32_t id; } scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int32_t ppdl_gen_pick(const float *logits, int V, double temperature, int top_k, ppdl_rng *rng)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    /* the kept ids: all, or the top_k by (logit, then smaller id) */
    char *kept = ppdl_xmalloc((size_t)V);
    memset(kept, top_k > 0 && top_k < V ? 0 : 1, (size_t)V);
    if (top_k > 0 && top_k < V) {
        scored *s = ppdl_xmalloc((size_t)V * sizeof *s);
        for (int i = 0; i < V; i++) s[i] = (scored){logits[i], i};
        qsort(s, (size_t)V, sizeof *s, by_score);
        for (int i = 0; i < top_k; i++) kept[s[i].id] = 1;
        free(s);
    }
    double sum = 0, mx = logits[best];
    for (int i = 0; i < V; i++)
        if (kept[i]) sum += exp(((double)logits[i] - mx) / temperature);
    double u = ppdl_rng_uniform(rng) * sum, cum = 0;
    int32_t pick = best;
    for (int i = 0; i < V; i++) {
        if (!kept[i]) continue;
        cum += exp(((double)logits[i] - mx) / temperature);
        pick = i;
        if (cum > u) break;
    }
    free(kept);
    return pick;
}
