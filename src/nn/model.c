/* model.c — build the layer chain of a family from its hyperparameters; presets;
 * initial weights. */
#include "nn/model.h"
#include "core/error.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ppdl_presets[] = {"gpt-tiny", "gpt-small", "gpt-bench", "mlp", "mlp-tiny",
                                    "cnn", "cnn-tiny", NULL};

int ppdl_model_preset(ppdl_model *m, const char *preset, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!strncmp(preset, "gpt", 3)) {
        strcpy(m->family, "gpt");
        m->ln_eps = 1e-5f;
        m->tie_embeddings = 1; /* as GPT-2: the output head is the token embedding */
        if (!strcmp(preset, "gpt-tiny")) {          /* trains in seconds on one core */
            m->vocab_size = 256; m->seq_len = 64; m->d_model = 64; m->n_heads = 4; m->n_layers = 2;
        } else if (!strcmp(preset, "gpt-small")) {  /* GPT-2 124M dimensions */
            m->vocab_size = 50257; m->seq_len = 1024; m->d_model = 768; m->n_heads = 12; m->n_layers = 12;
        } else if (!strcmp(preset, "gpt-bench")) {  /* perf/bench-step's comparison with PyTorch */
            m->vocab_size = 4096; m->seq_len = 128; m->d_model = 256; m->n_heads = 4; m->n_layers = 4;
        } else {
            return ppdl_errf(err, errlen, "--preset: unknown preset '%s'", preset);
        }
    } else if (!strcmp(preset, "mlp")) {
        strcpy(m->family, "mlp");
        m->in_features = 784; m->hidden = 512; m->n_layers = 6; m->n_classes = 10;
        m->activation = PPDL_ACT_RELU;
    } else if (!strcmp(preset, "mlp-tiny")) {
        strcpy(m->family, "mlp");
        m->in_features = 16; m->hidden = 32; m->n_layers = 4; m->n_classes = 4;
        m->activation = PPDL_ACT_GELU;
    } else if (!strcmp(preset, "cnn")) {
        strcpy(m->family, "cnn");
        m->in_channels = 1; m->height = 28; m->width = 28; m->channels = 16; m->n_blocks = 2;
        m->hidden = 128; m->n_classes = 10;
    } else if (!strcmp(preset, "cnn-tiny")) {
        strcpy(m->family, "cnn");
        m->in_channels = 2; m->height = 8; m->width = 8; m->channels = 3; m->n_blocks = 2;
        m->hidden = 10; m->n_classes = 3;
    } else {
        return ppdl_errf(err, errlen, "--preset: unknown preset '%s'", preset);
    }
    return 0;
}

int ppdl_model_set(ppdl_model *m, const char *key, const char *value, char *err, size_t errlen)
{
    struct { const char *family, *key; int *field; long lo, hi; } ints[] = {
        {"gpt", "vocab_size", &m->vocab_size, 1, 1 << 24},
        {"gpt", "seq_len", &m->seq_len, 1, 1 << 20},
        {"gpt", "d_model", &m->d_model, 1, 1 << 16},
        {"gpt", "n_heads", &m->n_heads, 1, 1 << 12},
        {"gpt", "n_layers", &m->n_layers, 0, 1 << 12},
        {"mlp", "in_features", &m->in_features, 1, 1 << 24},
        {"mlp", "hidden", &m->hidden, 1, 1 << 20},
        {"mlp", "n_layers", &m->n_layers, 1, 1 << 12},
        {"mlp", "n_classes", &m->n_classes, 1, 1 << 24},
        {"cnn", "in_channels", &m->in_channels, 1, 1 << 12},
        {"cnn", "height", &m->height, 1, 1 << 14},
        {"cnn", "width", &m->width, 1, 1 << 14},
        {"cnn", "channels", &m->channels, 1, 1 << 12},
        {"cnn", "n_blocks", &m->n_blocks, 0, 16},
        {"cnn", "hidden", &m->hidden, 1, 1 << 20},
        {"cnn", "n_classes", &m->n_classes, 1, 1 << 24},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(ints[i].family, m->family) || strcmp(ints[i].key, key)) continue;
        long v;
        if (ppdl_parse_int(value, ints[i].lo, ints[i].hi, &v))
            return ppdl_errf(err, errlen, "--set %s=%s: expected an integer in [%ld, %ld]", key,
                             value, ints[i].lo, ints[i].hi);
        *ints[i].field = (int)v;
        return 0;
    }
    if (!strcmp(m->family, "gpt") && !strcmp(key, "tie_embeddings")) {
        long v;
        if (ppdl_parse_int(value, 0, 1, &v))
            return ppdl_errf(err, errlen, "--set tie_embeddings=%s: expected 0 (the head has its own lm_head.weight) "
                             "or 1 (lm_head.weight is the embedding's wte)", value);
        m->tie_embeddings = (int)v;
        return 0;
    }
    if (!strcmp(m->family, "gpt") && !strcmp(key, "ln_eps")) {
        double v;
        if (ppdl_parse_float(value, 1e-12, 1, &v))
            return ppdl_errf(err, errlen, "--set ln_eps=%s: expected a number in (0, 1]", value);
        m->ln_eps = (float)v;
        return 0;
    }
    if (!strcmp(m->family, "mlp") && !strcmp(key, "activation")) {
        int a = ppdl_act_parse(value);
        if (a < 0) return ppdl_errf(err, errlen, "--set activation=%s: expected relu, gelu or none", value);
        m->activation = a;
        return 0;
    }
    return ppdl_errf(err, errlen, "--set %s: not a hyperparameter of the %s family", key, m->family);
}

int ppdl_model_build(ppdl_model *m, char *err, size_t errlen)
{
    ppdl_layer_cfg cfg;
    free(m->layers);
    m->layers = NULL;
    m->L = 0;
    if (!strcmp(m->family, "gpt")) {
        if (m->vocab_size < 1 || m->seq_len < 1 || m->d_model < 1 || m->n_heads < 1 || m->n_layers < 0)
            return ppdl_errf(err, errlen, "gpt: vocab_size, seq_len, d_model, n_heads must be >= 1, n_layers >= 0");
        if (m->d_model % m->n_heads)
            return ppdl_errf(err, errlen, "gpt: d_model (%d) must be a multiple of n_heads (%d)",
                             m->d_model, m->n_heads);
        if (!(m->ln_eps > 0)) return ppdl_errf(err, errlen, "gpt: ln_eps must be > 0");
        m->L = m->n_layers + 2;
        m->layers = ppdl_xcalloc((size_t)m->L, sizeof *m->layers);
        memset(&cfg, 0, sizeof cfg);
        cfg.V = m->vocab_size; cfg.T = m->seq_len; cfg.C = m->d_model; cfg.H = m->n_heads;
        cfg.eps = m->ln_eps;
        ppdl_layer_setup(&m->layers[0], &ppdl_kind_embedding, 0, &cfg);
        for (int i = 0; i < m->n_layers; i++) ppdl_layer_setup(&m->layers[1 + i], &ppdl_kind_block, 1 + i, &cfg);
        ppdl_layer_setup(&m->layers[m->L - 1], &ppdl_kind_head, m->L - 1, &cfg);
    } else if (!strcmp(m->family, "mlp")) {
        if (m->in_features < 1 || m->hidden < 1 || m->n_layers < 1 || m->n_classes < 1)
            return ppdl_errf(err, errlen, "mlp: in_features, hidden, n_layers, n_classes must be >= 1");
        m->L = m->n_layers;
        m->layers = ppdl_xcalloc((size_t)m->L, sizeof *m->layers);
        for (int i = 0; i < m->L; i++) {
            memset(&cfg, 0, sizeof cfg);
            cfg.in_f = i == 0 ? m->in_features : m->hidden;
            cfg.out_f = i == m->L - 1 ? m->n_classes : m->hidden;
            cfg.act = i == m->L - 1 ? PPDL_ACT_NONE : m->activation;
            ppdl_layer_setup(&m->layers[i], &ppdl_kind_linear, i, &cfg);
        }
    } else if (!strcmp(m->family, "cnn")) {
        if (m->in_channels < 1 || m->height < 1 || m->width < 1 || m->channels < 1 ||
            m->n_blocks < 0 || m->hidden < 1 || m->n_classes < 1)
            return ppdl_errf(err, errlen, "cnn: in_channels, height, width, channels, hidden, n_classes must be >= 1");
        if ((m->height >> m->n_blocks) < 1 || (m->width >> m->n_blocks) < 1)
            return ppdl_errf(err, errlen, "cnn: %dx%d images (height x width) are too small for %d pooling "
                             "blocks (n_blocks)", m->height, m->width, m->n_blocks);
        /* the flatten's values per sample must fit an int (each factor alone is in range,
         * their product need not be) */
        long long c_last = m->n_blocks ? (long long)m->channels << (m->n_blocks - 1) : m->in_channels;
        long long flat = c_last * (m->height >> m->n_blocks) * (m->width >> m->n_blocks);
        if (flat > (1LL << 30))
            return ppdl_errf(err, errlen, "cnn: the flattened feature map has %lld values per sample (channels, "
                             "height, width, n_blocks): at most 2^30", flat);
        m->L = 2 * m->n_blocks + 3;
        m->layers = ppdl_xcalloc((size_t)m->L, sizeof *m->layers);
        int c = m->in_channels, h = m->height, w = m->width, li = 0;
        for (int b = 0; b < m->n_blocks; b++) {
            memset(&cfg, 0, sizeof cfg);
            cfg.cin = c; cfg.cout = m->channels << b; cfg.kh = cfg.kw = 3; cfg.stride = 1; cfg.pad = 1;
            cfg.act = PPDL_ACT_RELU; cfg.in_c = c; cfg.in_h = h; cfg.in_w = w;
            ppdl_layer_setup(&m->layers[li], &ppdl_kind_conv, li, &cfg);
            c = m->layers[li].cfg.out_c; h = m->layers[li].cfg.out_h; w = m->layers[li].cfg.out_w;
            li++;
            memset(&cfg, 0, sizeof cfg);
            cfg.k = 2; cfg.stride = 2; cfg.in_c = c; cfg.in_h = h; cfg.in_w = w;
            ppdl_layer_setup(&m->layers[li], &ppdl_kind_maxpool, li, &cfg);
            h = m->layers[li].cfg.out_h; w = m->layers[li].cfg.out_w;
            li++;
        }
        memset(&cfg, 0, sizeof cfg);
        cfg.in_c = c; cfg.in_h = h; cfg.in_w = w;
        ppdl_layer_setup(&m->layers[li], &ppdl_kind_flatten, li, &cfg);
        li++;
        memset(&cfg, 0, sizeof cfg);
        cfg.in_f = c * h * w; cfg.out_f = m->hidden; cfg.act = PPDL_ACT_RELU;
        ppdl_layer_setup(&m->layers[li], &ppdl_kind_linear, li, &cfg);
        li++;
        memset(&cfg, 0, sizeof cfg);
        cfg.in_f = m->hidden; cfg.out_f = m->n_classes; cfg.act = PPDL_ACT_NONE;
        ppdl_layer_setup(&m->layers[li], &ppdl_kind_linear, li, &cfg);
    } else {
        return ppdl_errf(err, errlen, "family '%s': expected gpt, mlp or cnn", m->family);
    }
    return 0;
}

void ppdl_model_free(ppdl_model *m)
{
    free(m->layers);
    m->layers = NULL;
    m->L = 0;
}

int ppdl_model_loss_rows(const ppdl_model *m) { return !strcmp(m->family, "gpt") ? m->seq_len : 1; }
int ppdl_model_classes(const ppdl_model *m) { return !strcmp(m->family, "gpt") ? m->vocab_size : m->n_classes; }

size_t ppdl_model_param_count(const ppdl_model *m)
{
    return m->L > 0 ? ppdl_model_held_floats(m, 0, m->L - 1) : 0;
}

int ppdl_model_is_tied(const ppdl_model *m, int l, int i)
{
    return m->tie_embeddings && l == m->L - 1 && m->layers[l].kind == &ppdl_kind_head &&
           !strcmp(m->layers[l].params[i].name, "lm_head.weight");
}

int ppdl_model_tie_within(const ppdl_model *m, int first, int last)
{
    return m->tie_embeddings && first == 0 && last == m->L - 1;
}

size_t ppdl_model_tied_floats(const ppdl_model *m)
{
    return m->tie_embeddings ? (size_t)m->vocab_size * (size_t)m->d_model : 0;
}

size_t ppdl_model_held_floats(const ppdl_model *m, int first, int last)
{
    size_t n = 0;
    for (int i = first; i <= last; i++) n += ppdl_layer_param_count(&m->layers[i]);
    return n - (ppdl_model_tie_within(m, first, last) ? ppdl_model_tied_floats(m) : 0);
}

float *ppdl_model_place_weights(ppdl_model *m, ppdl_backend *be, const float *host)
{
    size_t total = ppdl_model_held_floats(m, 0, m->L - 1);
    float *arena = ppdl_be_alloc(be, (total ? total : 1) * sizeof *arena, "parameters");
    ppdl_be_copy_h2d(be, arena, host, total * sizeof *arena);
    size_t off = 0;
    for (int i = 0; i < m->L; i++)
        for (int j = 0; j < m->layers[i].n_params; j++) {
            ppdl_param *p = &m->layers[i].params[j];
            p->grad = NULL;
            if (ppdl_model_is_tied(m, i, j)) { /* wte, the embedding's first parameter */
                p->offset = m->layers[0].params[0].offset;
                p->value = m->layers[0].params[0].value;
                continue;
            }
            p->offset = off;
            p->value = arena + off;
            off += p->numel;
        }
    return arena;
}

size_t ppdl_model_stash_bytes(const ppdl_model *m, int l, int b, int option)
{
    const ppdl_layer *ly = &m->layers[l];
    size_t bytes = ppdl_layer_stash_bytes(ly, b, option);
    /* the gradient of the logits; a head's is packed as bf16 (bf16_saved; pipe/runtime_impl.h: logits_bf16) */
    if (l == m->L - 1) bytes += (size_t)b * ly->out_bytes / (ly->bf16_saved ? 2 : 1);
    return bytes;
}

void ppdl_model_set_precision(ppdl_model *m, int bf16)
{
    for (int l = 0; l < m->L; l++) {
        const ppdl_layer_kind *k = m->layers[l].kind;
        m->layers[l].bf16_saved = bf16 && (k == &ppdl_kind_block || k == &ppdl_kind_head);
    }
}

void ppdl_layer_init_params(const ppdl_model *m, const ppdl_layer *l, unsigned long long seed, float *host)
{
    /* each layer has its own stream, so a layer's weights do not depend on which
     * program or rank creates them */
    ppdl_rng rng;
    ppdl_rng_seed(&rng, seed * 1000003ULL + (unsigned long long)l->index);
    int gpt = !strcmp(m->family, "gpt");
    float *p = host;
    for (int i = 0; i < l->n_params; i++) {
        const ppdl_param *pa = &l->params[i];
        const char *n = pa->name;
        size_t len = strlen(n);
        int is_bias = len >= 4 && !strcmp(n + len - 4, "bias");
        int is_ln = !strncmp(n, "ln", 2);
        if (gpt) {
            /* GPT-2: N(0, 0.02); residual projections scaled by 1/sqrt(2 n_layers) */
            double std = 0.02;
            if (!strcmp(n, "attn.proj.weight") || !strcmp(n, "mlp.proj.weight"))
                std = 0.02 / sqrt(2.0 * (m->n_layers > 0 ? m->n_layers : 1));
            for (size_t j = 0; j < pa->numel; j++) {
                if (is_ln) p[j] = is_bias ? 0.0f : 1.0f;
                else if (is_bias) p[j] = 0.0f;
                else p[j] = (float)(std * ppdl_rng_normal(&rng));
            }
        } else {
            /* PyTorch's Linear/Conv2d default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
            size_t fan_in = 1;
            const ppdl_param *w = &l->params[0];
            for (int d = 1; d < w->ndim; d++) fan_in *= (size_t)w->shape[d];
            double bound = 1.0 / sqrt((double)fan_in);
            for (size_t j = 0; j < pa->numel; j++)
                p[j] = (float)(bound * (2.0 * ppdl_rng_uniform(&rng) - 1.0));
        }
        p += pa->numel;
    }
}
