/* gpt_logits.c — the logits of a gpt model file at every position of a few sequences,
 * through ppdl's own forward (nn/generate.h without the key/value cache: the layer
 * kinds' forward, the training code), for tests/oracle/hf_convert.sh to compare with
 * transformers' GPT2LMHeadModel.
 *
 *   gpt_logits MODEL.h5 TOKENS.i32 OUT.f32
 * TOKENS: B x T int32 (T = the model's seq_len); OUT: B x T x V float32, position t's
 * row the logits after tokens 0..t of its sequence.
 */
#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"
#include "io/model_io.h"
#include "nn/generate.h"
#include "nn/model.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    char err[PPDL_ERR_LEN];
    ppdl_model m;
    if (argc != 4) {
        fprintf(stderr, "usage: gpt_logits MODEL.h5 TOKENS.i32 OUT.f32\n");
        return 2;
    }
    if (ppdl_model_load_desc(argv[1], &m, err, sizeof err)) {
        fprintf(stderr, "gpt_logits: %s\n", err);
        return 1;
    }
    size_t n = ppdl_model_held_floats(&m, 0, m.L - 1);
    float *host = ppdl_xmalloc(n * sizeof *host);
    if (ppdl_model_load_params(argv[1], &m, 0, m.L - 1, host, err, sizeof err)) {
        fprintf(stderr, "gpt_logits: %s\n", err);
        return 1;
    }
    FILE *in = fopen(argv[2], "rb"), *out = fopen(argv[3], "wb");
    if (!in || !out) {
        fprintf(stderr, "gpt_logits: cannot open %s or %s\n", argv[2], argv[3]);
        return 1;
    }
    ppdl_backend *be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    if (!be) {
        fprintf(stderr, "gpt_logits: %s\n", err);
        return 1;
    }
    float *arena = ppdl_model_place_weights(&m, be, host);
    ppdl_gen *g = ppdl_gen_create(&m, be, 0);
    int T = m.seq_len, V = m.vocab_size;
    int32_t *tok = ppdl_xmalloc((size_t)T * sizeof *tok);
    float *logits = ppdl_xmalloc((size_t)V * sizeof *logits);
    while (fread(tok, sizeof *tok, (size_t)T, in) == (size_t)T)
        for (int t = 1; t <= T; t++) {
            ppdl_gen_start(g, tok, t, logits);
            fwrite(logits, sizeof *logits, (size_t)V, out);
        }
    fclose(in);
    int rc = fclose(out) ? 1 : 0;
    ppdl_gen_destroy(g);
    ppdl_be_free(be, arena);
    ppdl_backend_destroy(be);
    ppdl_model_free(&m);
    free(host), free(tok), free(logits);
    return rc;
}
