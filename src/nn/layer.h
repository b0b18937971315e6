/* layer.h — the layers of a model, as the pipeline sees them: a chain.
 *
 * Every layer maps a per-micro-batch input buffer to an output buffer. The model is
 * the chain layers[0] -> layers[1] -> ... -> layers[L-1]; the planner cuts it into
 * contiguous stages. The last layer's output is logits [B*rows_per_sample, V] that
 * the softmax cross-entropy loss consumes.
 *
 * What a layer keeps for backward (its "stash") is split in two:
 *  - its input, which the runtime keeps (it is also the previous layer's output), and
 *  - "saved" tensors the layer writes during forward (layernorm statistics, attention
 *    probabilities, pre-activations...), sized by saved_floats().
 * Recompute option 0 keeps both. The runtime's "full" option keeps only the input and
 * calls forward() again into scratch saved space right before backward() (the
 * recompute hook). A kind may offer more options of its own (option >= 2, e.g. the
 * transformer block's selective option): then forward() saves less and backward()
 * recomputes the rest itself.
 *
 * Parameters live in one arena per stage (see stage.h); params[i].value/grad point
 * into it. Backward ADDS into the parameter gradients (micro-batch accumulation).
 * A backward may run as two parts, B and W: "The backward split", at PPDL_BWD_INPUT.
 */
#ifndef PPDL_LAYER_H
#define PPDL_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define PPDL_MAX_PARAMS 16
#define PPDL_MAX_DIMS 4

/* recompute options understood by the runtime for every layer */
enum { PPDL_RC_NONE = 0, PPDL_RC_FULL = 1, PPDL_RC_SELECTIVE = 2 };

/* The backward split (Zero Bubble's names): a backward pass is two parts that a
 * schedule may run at different times,
 *   B  PPDL_BWD_INPUT   the input gradient din alone (on the pipeline's critical path).
 *                       It leaves what W needs in `keep` (keep_floats) and, under an
 *                       option that keeps `saved` (any but full recompute), over the
 *                       parts of `saved` that only B reads (a pre-activation by its
 *                       gradient: no bytes added); dout is scratch to it, unless W reads
 *                       dout, which B then leaves as it came;
 *   W  PPDL_BWD_WEIGHT  the parameter gradients alone, from in, keep, and what
 *                       weight_reads names: saved (as B left it), dout;
 * or PPDL_BWD_FUSED, both in one call (keep unused: its gradients live in the work space).
 * B then W runs the same kernels on the same values as the fused call, so the gradients
 * are bitwise those of the fused call (tests/gradient/test_grad_split.c). Between B and
 * W the caller keeps in, keep, and what W reads unchanged; `work` is scratch for each
 * call alone. A layer without parameters has nothing to do in W. The parts are called
 * with the layer's real option (full recompute included: `saved` is then the runtime's
 * scratch, recomputed before B and again before W where W reads it); under the block's
 * selective option W recomputes the MLP's hidden layer itself, as B does.
 */
enum { PPDL_BWD_INPUT = 1, PPDL_BWD_WEIGHT = 2, PPDL_BWD_FUSED = 3 };
/* what W reads besides in and keep (flags of weight_reads) */
enum { PPDL_W_SAVED = 1, PPDL_W_DOUT = 2 };

typedef struct ppdl_param {
    char name[40];                 /* PyTorch-style name inside the layer, e.g. "attn.qkv.weight" */
    int ndim;
    int64_t shape[PPDL_MAX_DIMS];
    size_t numel;
    size_t offset;                 /* in floats, from the start of the stage arena */
    float *value;                  /* device */
    float *grad;                   /* device */
} ppdl_param;

/* Hyperparameters of one layer (fields unused by a kind stay 0). */
typedef struct ppdl_layer_cfg {
    int V, T, C, H;                /* gpt: vocabulary, sequence, width, heads */
    float eps;                     /* layernorm epsilon */
    int in_f, out_f;               /* linear: features in, out */
    int act;                       /* PPDL_ACT_* after linear/conv */
    int cin, cout, kh, kw, stride, pad; /* conv */
    int k;                         /* maxpool kernel (stride in .stride) */
    int in_c, in_h, in_w;          /* image input shape of conv/maxpool/flatten */
    int out_c, out_h, out_w;       /* image output shape */
} ppdl_layer_cfg;

typedef struct ppdl_layer ppdl_layer;

typedef struct ppdl_layer_kind {
    const char *name;              /* "embedding", "block", "head", "linear", "conv", "maxpool", "flatten" */
    int n_options;                 /* recompute options offered: 2 (none, full) or 3 (+selective) */
    /* floats written to `saved` by forward for b samples under option `option` */
    size_t (*saved_floats)(const ppdl_layer *l, int b, int option);
    /* scratch floats forward or backward may use (shared by the stage's layers) */
    size_t (*work_floats)(const ppdl_layer *l, int b);
    /* in: b samples of the layer input (int32 tokens for the embedding, else float);
     * out: b samples of output */
    void (*forward)(const ppdl_layer *l, ppdl_backend *be, int b, const void *in, float *out,
                    float *saved, float *work, int option);
    /* part (PPDL_BWD_*) of the backward pass. dout: gradient of the loss w.r.t. out;
     * din (NULL for the first layer of the model): gradient w.r.t. in, overwritten by
     * B. W adds into the parameter gradients. dout may be clobbered by B (the fused
     * pass treats it as scratch; W reads what B left in it). keep: keep_floats floats
     * from B to W (NULL for the fused pass). */
    void (*backward)(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                     float *dout, float *din, float *keep, float *work, int option);
    /* floats B writes into keep for W, for b samples under option */
    size_t (*keep_floats)(const ppdl_layer *l, int b, int option);
    /* PPDL_W_SAVED | PPDL_W_DOUT: what W reads under option besides in and keep */
    int (*weight_reads)(const ppdl_layer *l, int option);
    /* forward multiply-adds x2 for b samples (backward is counted as twice this) */
    double (*flops_fwd)(const ppdl_layer *l, int b);
} ppdl_layer_kind;

struct ppdl_layer {
    const ppdl_layer_kind *kind;
    int index;                     /* position in the model chain */
    ppdl_layer_cfg cfg;
    size_t in_bytes;               /* per sample */
    size_t out_bytes;              /* per sample */
    int n_params;
    ppdl_param params[PPDL_MAX_PARAMS];
    /* 1 under --precision bf16 (ppdl_model_set_precision), for the kinds that use it:
     * a block keeps its saved tensors packed as bf16 (saved_floats is then that smaller
     * size) and widens them into its work space before backward; the runtime keeps a
     * head's logits gradient (the model's last stash, model.h) packed, since the head
     * reads it only as a GEMM operand. 0: fp32, as computed. */
    int bf16_saved;
};

/* the kinds (defined in layer_gpt.c and layer_basic.c) */
extern const ppdl_layer_kind ppdl_kind_embedding, ppdl_kind_block, ppdl_kind_head;
extern const ppdl_layer_kind ppdl_kind_linear, ppdl_kind_conv, ppdl_kind_maxpool, ppdl_kind_flatten;

const ppdl_layer_kind *ppdl_kind_by_name(const char *name);

/* Set up layer l of the given kind: shapes, byte sizes and the parameter table
 * (names, shapes, numel; offsets/pointers are assigned by the stage). cfg must hold
 * the fields the kind needs (validated by the model reader). */
void ppdl_layer_setup(ppdl_layer *l, const ppdl_layer_kind *kind, int index, const ppdl_layer_cfg *cfg);

size_t ppdl_layer_param_count(const ppdl_layer *l);

/* The fused backward pass of layer l (PPDL_BWD_FUSED, arguments as kind->backward) */
void ppdl_layer_backward(ppdl_layer *l, ppdl_backend *be, int b, const void *in, float *saved, float *dout,
                         float *din, float *work, int option);
/* Bytes the backward split adds per micro-batch between its B and its W: the kind's
 * keep floats, and the gradient of the layer's output where W reads it (0 for a layer
 * without parameters, which has no W). COSTS.json's weight_keep_bytes. */
size_t ppdl_layer_weight_keep_bytes(const ppdl_layer *l, int b, int option);

/* Bytes layer l keeps per in-flight micro-batch of b samples under recompute option
 * option: its input (always kept) plus what forward saves, unless option is PPDL_RC_FULL.
 * This is COSTS.json's stash_bytes (option 0) and recompute[k].stash_bytes (option k+1). */
size_t ppdl_layer_stash_bytes(const ppdl_layer *l, int b, int option);
const char *ppdl_act_name(int act);
int ppdl_act_parse(const char *s); /* -1 when unknown */

#endif
