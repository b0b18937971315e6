/* profile.h — what each layer costs on this rank's device: the planner's input
 * (COSTS.json, plan/costs.h).
 *
 * Each layer is run alone on the backend at micro-batch size b, with its own parameters
 * (random, the model's initialisation) and random inputs: forward and backward are timed
 * `reps` times after `warmup` untimed runs, and the median is kept (a median ignores the
 * odd slow run a shared machine produces). Per layer:
 *   fwd_ms      forward (the last layer: forward + softmax cross-entropy, as the runtime
 *               runs them together)
 *   bwd_ms      backward with everything kept (option 0)
 *   option 1    full recompute: extra = the layer's forward again (without the loss)
 *   option 2    selective (kinds that offer it): extra = backward(2) - backward(0), the
 *               recompute done inside backward
 *               (every extra is at least 1% of the layer's forward: a difference of
 *               noisy medians can come out <= 0, and a free recompute would be chosen
 *               where memory is ample)
 *   bytes       param_bytes = 4 x parameters; out_bytes = b x the output per sample;
 *               stash bytes of each option as the runtime allocates them
 *               (ppdl_model_stash_bytes)
 * Then, where the device holds the whole model and 4 micro-batches' buffers, fwd_ms,
 * bwd_ms and the full-recompute extra are timed again with the layers in their order,
 * as the runtime runs them: alone, a layer keeps its weights in cache between calls and
 * runs faster than in a step. The selective extra stays the isolated difference; a
 * device without room keeps the isolated times.
 */
#ifndef PPDL_PROFILE_H
#define PPDL_PROFILE_H

#include <stddef.h>

#include "backend/backend.h"
#include "nn/model.h"
#include "plan/costs.h"

typedef struct ppdl_profile_opts {
    int reps;                  /* timed runs per measurement (default 5) */
    int warmup;                /* untimed runs before them (default 1) */
    unsigned long long seed;   /* parameters and inputs (default 1) */
} ppdl_profile_opts;

void ppdl_profile_opts_default(ppdl_profile_opts *o);

/* The bytes of every layer and option at micro-batch size b (no timing; times 0). */
void ppdl_costs_from_model(const ppdl_model *m, int b, ppdl_costs *out);

/* Profile every layer of m on backend be at micro-batch size b (opts NULL: defaults).
 * The backend's memory is used one layer at a time (then, if it has room, the whole
 * model at once) and freed again. 0, or -1 with a
 * message (out of device memory names the layer). */
int ppdl_profile_layers(const ppdl_model *m, ppdl_backend *be, int b, const ppdl_profile_opts *opts,
                        ppdl_costs *out, char *err, size_t errlen);

/* Check that costs describe model m at micro-batch size b: the same number of layers,
 * the same kinds (by name) and recompute options, the same byte counts and tie. `what` names
 * the file in messages. */
int ppdl_costs_check_model(const ppdl_costs *c, const ppdl_model *m, int b, const char *what, char *err,
                           size_t errlen);

#endif
