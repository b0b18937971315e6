#include "nn/stage.h"
#include "core/error.h"
#include "core/slices.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

void ppdl_stage_alloc_params(ppdl_stage *st, ppdl_model *m, ppdl_backend *be, int first, int last)
{
    PPDL_CHECK(first >= 0 && last < m->L && first <= last, "bad stage range %d..%d of %d layers",
               first, last, m->L);
    memset(st, 0, sizeof *st);
    st->model = m;
    st->be = be;
    st->first = first;
    st->last = last;
    size_t off = 0;
    for (int i = first; i <= last; i++)
        for (int j = 0; j < m->layers[i].n_params; j++) {
            m->layers[i].params[j].offset = off;
            off += m->layers[i].params[j].numel;
        }
    st->n_grads = off;
    st->n_params = ppdl_model_held_floats(m, first, last); /* the tied weight is last: off - V C */
    size_t bytes = (st->n_grads ? st->n_grads : 1) * sizeof(float);
    st->params = ppdl_be_alloc(be, (st->n_params ? st->n_params : 1) * sizeof(float), "parameters");
    st->grads = ppdl_be_alloc(be, bytes, "gradients");
    ppdl_be_zero(be, st->grads, bytes);
    for (int i = first; i <= last; i++)
        for (int j = 0; j < m->layers[i].n_params; j++) {
            ppdl_param *p = &m->layers[i].params[j];
            /* a tied weight held once: the head multiplies by wte itself */
            int shared = ppdl_model_is_tied(m, i, j) && ppdl_model_tie_within(m, first, last);
            p->value = shared ? m->layers[0].params[0].value : st->params + p->offset;
            p->grad = st->grads + p->offset;
        }
    ppdl_stage_shard_optimizer(st, 1, 0, NULL);
}

void ppdl_optimizer_slices(const ppdl_model *m, int first, int last, int k, const double *weights, size_t *bounds)
{
    ppdl_slices(ppdl_model_held_floats(m, first, last), k, weights, 1, bounds);
}

void ppdl_stage_shard_optimizer(ppdl_stage *st, int k, int r, const double *weights)
{
    PPDL_CHECK(!st->adam_m, "the optimizer state is sharded before it is allocated");
    PPDL_CHECK(k >= 1 && r >= 0 && r < k, "optimizer slice %d of %d", r, k);
    free(st->opt_bounds);
    st->opt_k = k;
    st->opt_r = r;
    st->opt_bounds = ppdl_xmalloc(((size_t)k + 1) * sizeof(size_t));
    ppdl_optimizer_slices(st->model, st->first, st->last, k, weights, st->opt_bounds);
    PPDL_CHECK(st->opt_bounds[k] == st->n_params, "the optimizer slices cover %zu floats of %zu",
               st->opt_bounds[k], st->n_params);
    st->opt_lo = st->opt_bounds[r];
    st->opt_n = st->opt_bounds[r + 1] - st->opt_lo;
}

void ppdl_stage_alloc_optimizer(ppdl_stage *st)
{
    size_t bytes = (st->opt_n ? st->opt_n : 1) * sizeof(float);
    st->adam_m = ppdl_be_alloc(st->be, bytes, "AdamW first moments");
    st->adam_v = ppdl_be_alloc(st->be, bytes, "AdamW second moments");
    ppdl_be_zero(st->be, st->adam_m, bytes);
    ppdl_be_zero(st->be, st->adam_v, bytes);
}

void ppdl_stage_free(ppdl_stage *st)
{
    ppdl_be_free(st->be, st->params);
    ppdl_be_free(st->be, st->grads);
    ppdl_be_free(st->be, st->adam_m);
    ppdl_be_free(st->be, st->adam_v);
    free(st->opt_bounds);
    memset(st, 0, sizeof *st);
}
