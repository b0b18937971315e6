#include "nn/stage.h"
#include "core/error.h"

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
}

void ppdl_stage_alloc_optimizer(ppdl_stage *st)
{
    size_t bytes = (st->n_params ? st->n_params : 1) * sizeof(float);
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
    memset(st, 0, sizeof *st);
}
