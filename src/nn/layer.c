/* layer.c — what every kind of layer holds: shapes and parameter tables.
 * The arithmetic of each kind lives in layer_gpt.c and layer_basic.c. */
#include "nn/layer.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

static const ppdl_layer_kind *const all_kinds[] = {
    &ppdl_kind_embedding, &ppdl_kind_block, &ppdl_kind_head, &ppdl_kind_linear,
    &ppdl_kind_conv, &ppdl_kind_maxpool, &ppdl_kind_flatten,
};

const ppdl_layer_kind *ppdl_kind_by_name(const char *name)
{
    for (size_t i = 0; i < sizeof all_kinds / sizeof all_kinds[0]; i++)
        if (!strcmp(all_kinds[i]->name, name)) return all_kinds[i];
    return NULL;
}

const char *ppdl_act_name(int act)
{
    switch (act) {
    case PPDL_ACT_RELU: return "relu";
    case PPDL_ACT_GELU: return "gelu";
    default: return "none";
    }
}

int ppdl_act_parse(const char *s)
{
    if (!strcmp(s, "none")) return PPDL_ACT_NONE;
    if (!strcmp(s, "relu")) return PPDL_ACT_RELU;
    if (!strcmp(s, "gelu")) return PPDL_ACT_GELU;
    return -1;
}

static void add_param(ppdl_layer *l, const char *name, int ndim, int64_t d0, int64_t d1,
                      int64_t d2, int64_t d3)
{
    PPDL_CHECK(l->n_params < PPDL_MAX_PARAMS, "too many parameters in layer %d", l->index);
    ppdl_param *p = &l->params[l->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    int64_t d[4] = {d0, d1, d2, d3};
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = d[i];
        p->numel *= (size_t)d[i];
    }
}

void ppdl_layer_setup(ppdl_layer *l, const ppdl_layer_kind *kind, int index, const ppdl_layer_cfg *cfg)
{
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->index = index;
    l->cfg = *cfg;
    ppdl_layer_cfg *c = &l->cfg;
    const size_t f = sizeof(float);
    if (kind == &ppdl_kind_embedding) {
        add_param(l, "wte", 2, c->V, c->C, 0, 0);
        add_param(l, "wpe", 2, c->T, c->C, 0, 0);
        l->in_bytes = (size_t)c->T * sizeof(int32_t);
        l->out_bytes = (size_t)c->T * c->C * f;
    } else if (kind == &ppdl_kind_block) {
        int64_t C = c->C;
        add_param(l, "ln1.weight", 1, C, 0, 0, 0);
        add_param(l, "ln1.bias", 1, C, 0, 0, 0);
        add_param(l, "attn.qkv.weight", 2, 3 * C, C, 0, 0);
        add_param(l, "attn.qkv.bias", 1, 3 * C, 0, 0, 0);
        add_param(l, "attn.proj.weight", 2, C, C, 0, 0);
        add_param(l, "attn.proj.bias", 1, C, 0, 0, 0);
        add_param(l, "ln2.weight", 1, C, 0, 0, 0);
        add_param(l, "ln2.bias", 1, C, 0, 0, 0);
        add_param(l, "mlp.fc.weight", 2, 4 * C, C, 0, 0);
        add_param(l, "mlp.fc.bias", 1, 4 * C, 0, 0, 0);
        add_param(l, "mlp.proj.weight", 2, C, 4 * C, 0, 0);
        add_param(l, "mlp.proj.bias", 1, C, 0, 0, 0);
        l->in_bytes = l->out_bytes = (size_t)c->T * c->C * f;
    } else if (kind == &ppdl_kind_head) {
        add_param(l, "ln_f.weight", 1, c->C, 0, 0, 0);
        add_param(l, "ln_f.bias", 1, c->C, 0, 0, 0);
        add_param(l, "lm_head.weight", 2, c->V, c->C, 0, 0);
        l->in_bytes = (size_t)c->T * c->C * f;
        l->out_bytes = (size_t)c->T * c->V * f;
    } else if (kind == &ppdl_kind_linear) {
        add_param(l, "weight", 2, c->out_f, c->in_f, 0, 0);
        add_param(l, "bias", 1, c->out_f, 0, 0, 0);
        l->in_bytes = (size_t)c->in_f * f;
        l->out_bytes = (size_t)c->out_f * f;
    } else if (kind == &ppdl_kind_conv) {
        add_param(l, "weight", 4, c->cout, c->cin, c->kh, c->kw);
        add_param(l, "bias", 1, c->cout, 0, 0, 0);
        c->in_c = c->cin;
        c->out_c = c->cout;
        c->out_h = (c->in_h + 2 * c->pad - c->kh) / c->stride + 1;
        c->out_w = (c->in_w + 2 * c->pad - c->kw) / c->stride + 1;
        l->in_bytes = (size_t)c->in_c * c->in_h * c->in_w * f;
        l->out_bytes = (size_t)c->out_c * c->out_h * c->out_w * f;
    } else if (kind == &ppdl_kind_maxpool) {
        c->out_c = c->in_c;
        c->out_h = (c->in_h - c->k) / c->stride + 1;
        c->out_w = (c->in_w - c->k) / c->stride + 1;
        l->in_bytes = (size_t)c->in_c * c->in_h * c->in_w * f;
        l->out_bytes = (size_t)c->out_c * c->out_h * c->out_w * f;
    } else if (kind == &ppdl_kind_flatten) {
        c->out_c = c->in_c * c->in_h * c->in_w;
        c->out_h = c->out_w = 1;
        l->in_bytes = l->out_bytes = (size_t)c->out_c * f;
    } else {
        ppdl_die("unknown layer kind");
    }
}

size_t ppdl_layer_stash_bytes(const ppdl_layer *l, int b, int option)
{
    size_t bytes = (size_t)b * l->in_bytes;
    if (option != PPDL_RC_FULL) bytes += sizeof(float) * l->kind->saved_floats(l, b, option);
    return bytes;
}

size_t ppdl_layer_param_count(const ppdl_layer *l)
{
    size_t n = 0;
    for (int i = 0; i < l->n_params; i++) n += l->params[i].numel;
    return n;
}

void ppdl_layer_backward(ppdl_layer *l, ppdl_backend *be, int b, const void *in, float *saved, float *dout,
                         float *din, float *work, int option)
{
    l->kind->backward(l, be, PPDL_BWD_FUSED, b, in, saved, dout, din, NULL, work, option);
}

size_t ppdl_layer_weight_keep_bytes(const ppdl_layer *l, int b, int option)
{
    if (l->n_params == 0) return 0;
    size_t dout = l->kind->weight_reads(l, option) & PPDL_W_DOUT ? (size_t)b * l->out_bytes : 0;
    return sizeof(float) * l->kind->keep_floats(l, b, option) + dout;
}
