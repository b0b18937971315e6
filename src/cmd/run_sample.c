/* run_sample.c — --sample-every K: what a gpt writes as it trains, printed by rank 0.
 *
 * How, and what it costs: every stage's first replica sends rank 0 its weights (the
 * held layout: values only, no gradients or optimizer state, a tied weight once; one
 * MPI_Gatherv, as --save) and rank 0 builds the whole model on a CPU backend of its
 * own, separate from its stage's, then continues the prompt with the key/value cache
 * of nn/generate.h (--sample-tokens N, temperature 0.8, top-k 40, seed --seed + the
 * step, so the same run prints the same samples). The other ranks go on to the next
 * step and wait there for rank 0's first message, so a sample costs the gather and
 * rank 0's generation once every K steps; nothing of it touches the training. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "io/model_io.h"
#include "io/tokenizer.h"
#include "nn/generate.h"

#define SAMPLE_TEMPERATURE 0.8
#define SAMPLE_TOP_K 40
#define SAMPLE_PROMPT_TOKENS 8 /* without --sample-prompt: this many tokens of data row 0 */

/* the prompt: --sample-prompt's bytes (byte-level models) or its encoding (--tokenizer),
 * else the data's first tokens */
static int32_t *sample_prompt(run *r, int *n)
{
    const options *o = &r->o;
    if (o->sample_prompt && r->tok) {
        ppdl_ids ids = {0};
        char err[PPDL_ERR_LEN];
        if (ppdl_tokenizer_encode(r->tok, o->sample_prompt, strlen(o->sample_prompt), 0, &ids, err, sizeof err))
            ppdl_fail(1, "--sample-prompt: %s", err);
        if (ids.n) {
            *n = (int)ids.n;
            return ids.v;
        }
        free(ids.v);
    }
    if (o->sample_prompt && r->model.vocab_size == 256) {
        *n = (int)strlen(o->sample_prompt);
        int32_t *p = ppdl_xmalloc((size_t)*n * sizeof *p);
        for (int i = 0; i < *n; i++) p[i] = (unsigned char)o->sample_prompt[i];
        return p;
    }
    int T = r->data.T, k = T < SAMPLE_PROMPT_TOKENS ? T : SAMPLE_PROMPT_TOKENS;
    int32_t *row = ppdl_xmalloc((size_t)T * sizeof *row);
    char err[PPDL_ERR_LEN];
    if (ppdl_data_read(&r->data, 0, 1, row, NULL, err, sizeof err)) ppdl_fail(1, "--sample-every: %s", err);
    *n = k;
    return row;
}

/* one line per sample: newlines as \n, other control bytes as \xNN */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c < 32 || c == 127) printf("\\x%02x", c);
        else putchar(c);
    }
}

static void print_tokens(const ppdl_model *m, const ppdl_tokenizer *tok, const int32_t *t, int n)
{
    if (tok) { /* the text, a character split across tokens held until whole */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        PPDL_CHECK(f, "--sample-every: out of memory");
        ppdl_detok d;
        ppdl_detok_init(&d, tok);
        for (int i = 0; i < n; i++) ppdl_detok_put(&d, t[i], f);
        ppdl_detok_end(&d, f);
        fclose(f);
        print_escaped(buf, len);
        free(buf);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (m->vocab_size != 256) printf("%s%d", i ? " " : "", t[i]);
        else if (t[i] == '\n') fputs("\\n", stdout); /* one line per sample */
        else if (t[i] < 32 || t[i] > 126) printf("\\x%02x", t[i]);
        else putchar(t[i]);
    }
}

void run_sample(run *r, long after_step)
{
    const options *o = &r->o;
    double t0 = ppdl_now_s();
    float *weights = run_gather_weights(r);
    if (r->rank != 0) return;
    char err[PPDL_ERR_LEN];
    ppdl_model m;
    if (ppdl_model_load_desc(o->model, &m, err, sizeof err)) ppdl_fail(1, "--sample-every: %s", err);
    ppdl_backend *be = ppdl_backend_create("cpu", (int)r->threads, 0, err, sizeof err);
    if (!be) ppdl_fail(1, "--sample-every: %s", err);
    float *arena = ppdl_model_place_weights(&m, be, weights);
    free(weights);
    ppdl_gen *g = ppdl_gen_create(&m, be, 1);
    int n_prompt = 0;
    int32_t *prompt = sample_prompt(r, &n_prompt);
    int32_t *out = ppdl_xmalloc((size_t)o->sample_tokens * sizeof *out);
    float *logits = ppdl_xmalloc((size_t)m.vocab_size * sizeof *logits);
    ppdl_rng rng;
    ppdl_rng_seed(&rng, (uint64_t)o->seed + (uint64_t)after_step);
    ppdl_gen_start(g, prompt, n_prompt, logits);
    for (long i = 0; i < o->sample_tokens; i++) {
        out[i] = ppdl_gen_pick(logits, m.vocab_size, SAMPLE_TEMPERATURE, SAMPLE_TOP_K, &rng);
        if (i + 1 < o->sample_tokens) ppdl_gen_push(g, out[i], logits);
    }
    printf("sample after step %ld (%.2f s): ", after_step, ppdl_now_s() - t0);
    print_tokens(&m, r->tok, prompt, n_prompt);
    printf(" | ");
    print_tokens(&m, r->tok, out, (int)o->sample_tokens);
    printf("\n");
    fflush(stdout);
    free(logits);
    free(out);
    free(prompt);
    ppdl_gen_destroy(g);
    ppdl_be_free(be, arena);
    ppdl_backend_destroy(be);
    ppdl_model_free(&m);
}
