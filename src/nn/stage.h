/* stage.h — the layers first..last of a model on one backend, with their parameters,
 * gradients and AdamW state each in one device arena (llm.c's "one allocation carved
 * into named views"). A single-rank run is the stage 0..L-1.
 *
 * The value, m and v arenas have the held layout (nn/model.h): n_params floats. The
 * gradient arena has every parameter's own gradient, n_grads floats: the same layout,
 * plus, where the stage holds a tied weight once (ppdl_model_tie_within), the head's
 * gradient of lm_head.weight at the end (its value pointer is wte's). */
#ifndef PPDL_STAGE_H
#define PPDL_STAGE_H

#include <stddef.h>

#include "backend/backend.h"
#include "nn/model.h"

typedef struct ppdl_stage {
    ppdl_model *model;
    ppdl_backend *be;
    int first, last;               /* layer range, inclusive */
    size_t n_params;               /* floats in the value, m and v arenas */
    size_t n_grads;                /* floats in the gradient arena (>= n_params) */
    float *params, *grads;         /* device arenas */
    float *adam_m, *adam_v;        /* device arenas (allocated by ppdl_stage_alloc_optimizer) */
} ppdl_stage;

/* Allocate the parameter and gradient arenas of layers first..last and point the
 * layers' params[].value/grad into them. Gradients start at zero. */
void ppdl_stage_alloc_params(ppdl_stage *st, ppdl_model *m, ppdl_backend *be, int first, int last);
void ppdl_stage_alloc_optimizer(ppdl_stage *st);
void ppdl_stage_free(ppdl_stage *st);

#endif
