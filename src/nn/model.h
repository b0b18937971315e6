/* model.h — a model: its family, hyperparameters and chain of layers.
 *
 * Root hyperparameters per family (the root attributes of model.h5, and the keys of
 * `ppdl-init --set`):
 *   gpt: vocab_size, seq_len, d_model, n_heads, n_layers (blocks), ln_eps,
 *        tie_embeddings (0/1, optional in a file: absent is 0)
 *        chain: embedding, block x n_layers, head            (L = n_layers + 2)
 *   mlp: in_features, hidden, n_layers (linear layers), n_classes, activation
 *        chain: linear(in->hidden, act), ..., linear(hidden->n_classes, none)
 *   cnn: in_channels, height, width, channels, n_blocks, hidden, n_classes
 *        chain: [conv 3x3 pad 1 relu, maxpool 2] x n_blocks (channels double each
 *        block), flatten, linear(->hidden, relu), linear(->n_classes, none)
 * Every classifier ends in softmax cross-entropy over n_classes; gpt over vocab_size
 * at every position.
 */
#ifndef PPDL_MODEL_H
#define PPDL_MODEL_H

#include <stddef.h>

#include "nn/layer.h"

typedef struct ppdl_model {
    char family[8];                /* "gpt", "mlp", "cnn" */
    /* gpt */
    int vocab_size, seq_len, d_model, n_heads, n_layers;
    float ln_eps;
    int tie_embeddings;            /* 1: the head's lm_head.weight is the embedding's wte */
    /* mlp / cnn */
    int in_features, hidden, n_classes, activation;
    int in_channels, height, width, channels, n_blocks;

    int L;                         /* layers in the chain */
    ppdl_layer *layers;            /* [L] */
} ppdl_model;

/* Fill m->L and m->layers from the family's hyperparameters (already set in m).
 * Returns -1 with a message naming the bad hyperparameter. */
int ppdl_model_build(ppdl_model *m, char *err, size_t errlen);
void ppdl_model_free(ppdl_model *m);

/* Set a root hyperparameter by name from a string ("d_model", "768"); -1 when the
 * key is unknown for the family or the value is not valid. */
int ppdl_model_set(ppdl_model *m, const char *key, const char *value, char *err, size_t errlen);
/* Default hyperparameters of a preset: gpt-tiny, gpt-small, gpt-bench, mlp, mlp-tiny, cnn, cnn-tiny. */
int ppdl_model_preset(ppdl_model *m, const char *preset, char *err, size_t errlen);
/* names of all presets, for --help */
extern const char *const ppdl_presets[];

/* what the loss sees per sample: rows of logits and the number of classes */
int ppdl_model_loss_rows(const ppdl_model *m);   /* T for gpt, 1 otherwise */
int ppdl_model_classes(const ppdl_model *m);     /* vocab_size or n_classes */
/* the model's parameters, a tied weight once */
size_t ppdl_model_param_count(const ppdl_model *m);

/* Tied embeddings (gpt, tie_embeddings = 1): the head's lm_head.weight [V, C] is the
 * embedding's wte [V, C], one parameter that both layers use. It is the last parameter
 * of the last layer, so of every arena that holds it. Where one stage holds both layers
 * (first == 0, last == L-1) the weight is there once: lm_head.weight's value is wte's
 * and it has no AdamW m and v of its own, only its own gradient buffer (the head's
 * contribution, kept apart until the update; pipe/tie.h says why). A stage holding
 * only the head keeps a copy of the value, m and v, which its updates keep bitwise
 * equal to the embedding stage's.
 *
 * "Held layout" of layers first..last: their parameters back to back in layer and
 * table order, without the tied lm_head.weight where ppdl_model_tie_within: the layout
 * of a stage's value, m and v arenas, and of every host array that model_io.h and
 * checkpoint.h read and write. */
/* is parameter i of layer l the tied lm_head.weight? */
int ppdl_model_is_tied(const ppdl_model *m, int l, int i);
/* does a stage of layers first..last hold the tied weight once (both of its layers)? */
int ppdl_model_tie_within(const ppdl_model *m, int first, int last);
/* floats of the tied weight (V C), 0 for a model without */
size_t ppdl_model_tied_floats(const ppdl_model *m);
/* floats of layers first..last in the held layout */
size_t ppdl_model_held_floats(const ppdl_model *m, int first, int last);
/* Every layer's weights on `be` for inference (ppdl-sample, --sample-every): one arena
 * of the held layout of layers 0..L-1 copied from host, each parameter's value pointed
 * into it (a tied lm_head.weight at wte), no gradients. Returns the arena (free it with
 * ppdl_be_free before the backend). */
float *ppdl_model_place_weights(ppdl_model *m, ppdl_backend *be, const float *host);
/* Bytes layer l keeps per in-flight micro-batch of b samples under option option, as the
 * runtime holds them: ppdl_layer_stash_bytes, plus, for the last layer, the gradient
 * of the loss w.r.t. the logits (computed at forward time, kept until backward). This
 * is the stash_bytes of COSTS.json. */
size_t ppdl_model_stash_bytes(const ppdl_model *m, int l, int b, int option);

/* --precision: bf16 (1) lets the layers that can keep their saved tensors packed as
 * bf16 (layer.h bf16_saved); call before sizing or creating anything from m */
void ppdl_model_set_precision(ppdl_model *m, int bf16);

/* Fill host arrays with the initial parameters of layer l (deterministic from seed;
 * GPT-2 init for gpt, PyTorch's default for Linear/Conv2d). host holds all the
 * layer's parameters back to back, in table order. */
void ppdl_layer_init_params(const ppdl_model *m, const ppdl_layer *l, unsigned long long seed, float *host);

#endif
