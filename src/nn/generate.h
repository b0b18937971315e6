/* generate.h — text from a gpt model, one token at a time (ppdl-sample).
 *
 * A generator runs a gpt model forward for one sequence (batch 1) on a backend, from a
 * context of at most seq_len (T) tokens, and hands back the logits of the next token:
 *  - with the key/value cache (use_cache 1): every block keeps the keys and values of the
 *    positions already seen ([H, T, hs] each), so a new token costs one position — its
 *    q, k, v, its attention row over the cached keys, its MLP and the head — instead of
 *    the whole prefix; a prompt of n tokens goes through as one n-row pass;
 *  - without (use_cache 0): the whole context again through the layer kinds' own forward
 *    (layer.h, the training code), read at its last position. The reference the cache is
 *    checked against (tests/unit/test_generate.c), and the cost it saves.
 *
 * The context window (both modes, the same tokens): a prompt longer than T keeps its
 * last T tokens. When the context holds T tokens and one more is added, the oldest are
 * dropped so that the newest T/2 remain before it, and the cache is refilled from those
 * (one pass of T/2+1 positions every T/2 tokens): the model never sees a position it
 * has no embedding for.
 *
 * The model's layers must have their parameters (params[].value) on `be`, all of them.
 * A head without its own lm_head.weight uses the embedding's wte (tied embeddings).
 */
#ifndef PPDL_GENERATE_H
#define PPDL_GENERATE_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/util.h"
#include "nn/model.h"

typedef struct ppdl_gen ppdl_gen;

ppdl_gen *ppdl_gen_create(const ppdl_model *m, ppdl_backend *be, int use_cache);
void ppdl_gen_destroy(ppdl_gen *g);

/* Start a new context from prompt[n] (n >= 1; its last T tokens if longer) and write
 * the logits of the token after it into logits[V] (host memory). */
void ppdl_gen_start(ppdl_gen *g, const int32_t *prompt, int n, float *logits);
/* Add token `tok` to the context (cutting it first when full, see above) and write the
 * logits of the token after it. */
void ppdl_gen_push(ppdl_gen *g, int32_t tok, float *logits);
/* tokens in the context now (<= T) */
int ppdl_gen_context(const ppdl_gen *g);

/* The next token from logits[V]:
 *   temperature 0: the argmax (the smallest id among equal maxima);
 *   else softmax(logits / temperature) over the top_k largest logits (top_k 0: all V;
 *   ties at the k-th place go to the smaller id), drawn with u = ppdl_rng_uniform(rng):
 *   the first id, in increasing order, at which the cumulative probability exceeds u. */
int32_t ppdl_gen_pick(const float *logits, int V, double temperature, int top_k, ppdl_rng *rng);

#endif
