/* costs.h — what each layer costs: COSTS.json (docs/formats.md), read, validated, written.
 *
 * Per layer, at the run's micro-batch size b: forward and backward milliseconds on the
 * profiled device (speed 1.0 in CLUSTER.json), parameter bytes, the bytes of the
 * activation sent to the next layer, and the recompute options. Option 0 keeps
 * everything (stash_bytes, no extra time); option k >= 1 is recompute[k-1] with its own
 * stash bytes and extra milliseconds. Pure data, no MPI, no device.
 *
 * Byte counts must be whole numbers below 2^50: the planner adds them in a different
 * order than the cost model does, and only integers add up exactly in doubles, so both
 * then agree bit for bit on whether a stage fits its memory.
 */
#ifndef PPDL_COSTS_H
#define PPDL_COSTS_H

#include <stddef.h>

#define PPDL_MAX_RC_OPTS 8     /* options per layer, option 0 included */

typedef struct ppdl_layer_cost {
    char name[48];
    double fwd_ms, bwd_ms;
    double param_bytes;        /* bytes of parameter values */
    double out_bytes;          /* bytes of the activation sent to the next layer */
    int n_opts;                /* 1 + number of recompute options */
    double stash_bytes[PPDL_MAX_RC_OPTS]; /* kept per in-flight micro-batch, by option */
    double extra_ms[PPDL_MAX_RC_OPTS];    /* extra time per micro-batch; extra_ms[0] = 0 */
    double opt_ms;             /* the optimizer's update of its parameters, once per step
                                  (COSTS.json "optimizer_ms", optional, default 0) */
    /* the runtime's buffers for this layer (plan/reserve.h), COSTS.json optional:
     * "in_bytes" the activation it receives (default: the previous layer's out_bytes,
     * 0 for the first), "saved_bytes" the tensors its forward saves for backward under
     * option 0 (default: stash_bytes, which holds them), "work_bytes" its scratch
     * space (default 0) */
    double in_bytes, saved_bytes, work_bytes;
    /* the backward split (nn/layer.h "The backward split"; COSTS.json optional,
     * docs/schedules.md): "bwd_input_ms" (B) and "bwd_weight_ms" (W), about bwd_ms together
     * (default: bwd_ms / 2 each); per option, "weight_extra_ms" the recompute a W pays
     * on its own (option 0: 0; default: the option's extra_ms, as if W recomputed all
     * that B does) and "weight_keep_bytes" what B keeps for W (default 0) */
    double bwd_input_ms, bwd_weight_ms;
    double weight_extra_ms[PPDL_MAX_RC_OPTS];
    double weight_keep_bytes[PPDL_MAX_RC_OPTS];
} ppdl_layer_cost;

typedef struct ppdl_costs {
    int micro_batch_size;
    double state_multiplier;   /* bytes held per parameter byte (values, grads, AdamW m, v: 4) */
    int L;
    ppdl_layer_cost *layers;   /* [L] */
    /* reading one micro-batch's data (COSTS.json "input_ms", "target_ms", optional,
     * default 0): the first stage reads the inputs before its forward, the last stage
     * the targets before its loss; counted in those stages' forward per micro-batch */
    double input_ms, target_ms;
    /* a tied weight (COSTS.json "tied", optional: [{"layers": [0, L-1], "bytes": b}];
     * absent: 0): the first and the last layer use one weight of b bytes (a gpt with
     * tie_embeddings: wte is lm_head.weight), which both layers' param_bytes count. Where
     * one stage holds both it is there once; else the two stages exchange its gradient
     * at the end of the step (costmodel.h: ppdl_tie_mem, ppdl_tie_ms). At most one tie,
     * between the first and the last layer (the only one ppdl's models have). */
    double tied_bytes;
    /* the head's vocabulary (COSTS.json "vocab", optional: {"layer": L-1, "size": V};
     * absent: 0): the last layer computes logits over V rows, which vocabulary
     * parallelism may cut into slices (plan/vocab.h). ppdl --costs-out writes it for a
     * gpt. */
    long vocab_size;
    /* the precision of the messages between stages (COSTS.json "precision", optional:
     * "fp32", the default, or "bf16"): 1 when they travel as bf16, half of out_bytes
     * (ppdl_msg_bytes). ppdl sets it from its own --precision, whatever the file says. */
    int bf16_messages;
    /* how the profile took fwd_ms/bwd_ms: 1 with the layers in their order (the device
     * held the whole model), 0 each layer alone; not in COSTS.json */
    int ordered;
    /* every layer's in_bytes, saved_bytes and work_bytes were given (or profiled), not
     * defaulted; not in COSTS.json */
    int buffer_bytes_given;
    /* every layer's bwd_input_ms and bwd_weight_ms were given (or profiled); not in
     * COSTS.json. The writer writes the split's fields only then. */
    int split_given;
} ppdl_costs;

/* the bytes of the activation layer l sends to the next stage, and of the gradient that
 * comes back: out_bytes, or half of it with bf16 messages */
static inline double ppdl_msg_bytes(const ppdl_costs *c, int l)
{
    return c->bf16_messages ? 0.5 * c->layers[l].out_bytes : c->layers[l].out_bytes;
}

/* L zeroed layers (n_opts = 1), micro_batch_size 1, state_multiplier 4 */
void ppdl_costs_alloc(ppdl_costs *c, int L);
void ppdl_costs_free(ppdl_costs *c);

/* Read COSTS.json; on error -1 with a message naming the file and the field
 * ("costs.json: layers[3].recompute[0].extra_ms: expected a number >= 0"). */
int ppdl_costs_read(const char *path, ppdl_costs *c, char *err, size_t errlen);
/* The same from JSON text; `what` names the source in messages. */
int ppdl_costs_parse(const char *text, const char *what, ppdl_costs *c, char *err, size_t errlen);
/* Check a costs structure (as the reader does): L >= 1, times and bytes finite and
 * >= 0, bytes whole numbers < 2^50, 1 <= n_opts <= PPDL_MAX_RC_OPTS, extra_ms[0] = 0. */
int ppdl_costs_validate(const ppdl_costs *c, const char *what, char *err, size_t errlen);
/* Write COSTS.json (to PATH.tmp, then renamed onto PATH). */
int ppdl_costs_write(const char *path, const ppdl_costs *c, char *err, size_t errlen);
/* The JSON text (malloc'd, caller frees). */
char *ppdl_costs_to_json(const ppdl_costs *c);

/* does the file carry any of the optional step costs (optimizer, data reading)? */
int ppdl_costs_has_step_extras(const ppdl_costs *c);

/* The backward split's B and W of layer l of c under option, in ms at speed 1, with
 * what each recomputes. When not every layer gives bwd_input_ms and bwd_weight_ms
 * (split_given), each is half of bwd_ms and W pays the option's whole extra_ms. */
static inline double ppdl_layer_bwd_input_ms(const ppdl_costs *c, const ppdl_layer_cost *l, int option)
{
    return (c->split_given ? l->bwd_input_ms : l->bwd_ms / 2) + l->extra_ms[option];
}

static inline double ppdl_layer_bwd_weight_ms(const ppdl_costs *c, const ppdl_layer_cost *l, int option)
{
    return c->split_given ? l->bwd_weight_ms + l->weight_extra_ms[option] : l->bwd_ms / 2 + l->extra_ms[option];
}

/* fwd + bwd + extra of layer l under option option, in ms at speed 1 */
static inline double ppdl_layer_time(const ppdl_layer_cost *l, int option)
{
    return l->fwd_ms + l->bwd_ms + l->extra_ms[option];
}

#endif
