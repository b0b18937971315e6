/* stage.h — the layers first..last of a model on one backend, with their parameters,
 * gradients and AdamW state each in one device arena (llm.c's "one allocation carved
 * into named views"). A single-rank run is the stage 0..L-1.
 *
 * The value, m and v arenas have the held layout (nn/model.h): n_params floats. The
 * gradient arena has every parameter's own gradient, n_grads floats: the same layout,
 * plus, where the stage holds a tied weight once (ppdl_model_tie_within), the head's
 * gradient of lm_head.weight at the end (its value pointer is wte's).
 *
 * The optimizer state may be sharded across the k replicas of the stage (ZeRO-1,
 * docs/training.md "Sharded optimizer state"): the value arena is cut into k contiguous
 * slices (ppdl_optimizer_slices) and replica r keeps m and v for its slice only,
 * [opt_lo, opt_lo + opt_n) of the arena; adam_m[0] is the moment of arena float opt_lo.
 * Unsharded: one slice, the whole arena. */
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
    float *adam_m, *adam_v;        /* device arenas (allocated by ppdl_stage_alloc_optimizer),
                                    * opt_n floats each */
    int opt_k, opt_r;              /* the optimizer state cut into opt_k slices; this is slice opt_r */
    size_t *opt_bounds;            /* [opt_k + 1]: slice r is [opt_bounds[r], opt_bounds[r + 1]) */
    size_t opt_lo, opt_n;          /* this rank's slice */
} ppdl_stage;

/* The slices of the held arena of layers first..last (n = ppdl_model_held_floats)
 * among k replicas, bounds[0..k]: ppdl_slices (core/slices.h) with weight NULL for
 * equal slices or one weight per replica (in proportion to its memory). The one place
 * the runtime and the memory prediction cut the optimizer state. */
void ppdl_optimizer_slices(const ppdl_model *m, int first, int last, int k, const double *weights, size_t *bounds);

/* Allocate the parameter and gradient arenas of layers first..last and point the
 * layers' params[].value/grad into them. Gradients start at zero. */
void ppdl_stage_alloc_params(ppdl_stage *st, ppdl_model *m, ppdl_backend *be, int first, int last);
/* Shard the optimizer state over k replicas, this one slice r (before
 * ppdl_stage_alloc_optimizer; k = 1: unsharded, the default) */
void ppdl_stage_shard_optimizer(ppdl_stage *st, int k, int r, const double *weights);
void ppdl_stage_alloc_optimizer(ppdl_stage *st);
void ppdl_stage_free(ppdl_stage *st);

#endif
