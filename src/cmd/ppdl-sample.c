/* ppdl-sample.c — continue a prompt with a trained gpt model.
 *
 *   ppdl-sample MODEL.h5 --prompt "Once upon" --tokens 200 [--temperature 0.8] [--top-k 40]
 *   ppdl-sample MODEL.h5 --tokenizer tokenizer.json --prompt "Once upon" --tokens 200
 *
 * The story: read the command line; load the model (a model file or a checkpoint) and
 * put its weights on the backend; turn the prompt into token ids (bytes for a
 * byte-level model, else --tokenizer's encoding, io/tokenizer.h); then, --tokens times, pick the next token from the logits
 * (nn/generate.c) and feed it back; print the text (or the ids) and the speed.
 *
 * One process, no ranks: MPI is initialised only so that the library's fatal-error path
 * is safe (a singleton init needs no mpiexec).
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "io/model_io.h"
#include "io/tokenizer.h"
#include "nn/generate.h"
#include "nn/model.h"

typedef struct options {
    const char *model, *prompt, *prompt_ids, *backend, *tokenizer;
    long tokens, top_k, threads;
    double temperature;
    unsigned long long seed;
    int no_cache, print_ids, quiet;
} options;

static void print_help(void)
{
    printf("ppdl-sample: continue a prompt with a gpt model (a model file or a checkpoint).\n"
           "\n"
           "Usage: ppdl-sample MODEL.h5 (--prompt TEXT | --prompt-ids 1,2,3) --tokens N [options]\n"
           "\n"
           "  --prompt TEXT        the text to continue: for a byte-level model (vocab_size\n"
           "                       256: every byte is a token, as ppdl-data text makes them),\n"
           "                       or encoded by --tokenizer\n"
           "  --tokenizer FILE     the model's tokenizer: a byte-level BPE tokenizer.json\n"
           "                       (encodes --prompt, decodes the output) or llm.c's\n"
           "                       gpt2_tokenizer.bin (decodes only: give --prompt-ids)\n"
           "  --prompt-ids LIST    the token ids to continue, comma-separated, for any model\n"
           "                       (ids from the tokenizer that made its training data)\n"
           "  --tokens N           how many tokens to add\n"
           "  --temperature X      0: always the most likely token (greedy, repeatable);\n"
           "                       else draw from softmax(logits / X): below 1 more\n"
           "                       conservative, above 1 more varied (default 1)\n"
           "  --top-k K            draw only among the K most likely tokens (default 0: all)\n"
           "  --seed S             the draws' seed (default 1): the same model, prompt,\n"
           "                       options and seed give the same text\n"
           "  --ids                print token ids even for a byte-level model\n"
           "  --no-cache           recompute the whole context for every token instead of\n"
           "                       keeping each layer's keys and values (slower; the same\n"
           "                       tokens up to float rounding; for checks and benchmarks)\n"
           "  --threads T          compute threads of the CPU backend (default 1)\n"
           "  --backend cpu|cuda   where to run (default cpu)\n"
           "  --quiet              no speed line on stderr\n"
           "  --help, --version\n"
           "\n"
           "Output: a byte-level model, or any with --tokenizer, prints the prompt and its\n"
           "continuation as text (a character split across tokens comes out whole); else\n"
           "(or with --ids) their token ids, separated by spaces, on one line.\n"
           "\n"
           "The model sees at most seq_len tokens: a longer prompt keeps its last seq_len;\n"
           "when the text outgrows seq_len, the oldest tokens are dropped so that the newest\n"
           "seq_len/2 remain (docs/data.md, \"Sampling\").\n"
           "\n"
           "Examples:\n"
           "  ppdl-sample trained.h5 --prompt \"The \" --tokens 300 --temperature 0.8 --top-k 40\n"
           "  ppdl-sample ckpt.h5 --prompt-ids 464,3290 --tokens 50 --temperature 0\n"
           "  ppdl-sample gpt2.h5 --tokenizer tokenizer.json --prompt \"Hello, I'm\" --tokens 40\n"
           "\n"
           "Every option with its default, and the exit statuses: docs/cli.md.\n");
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out, char *err, size_t errlen)
{
    if (ppdl_parse_int(v, lo, hi, out))
        return ppdl_errf(err, errlen, "%s %s: expected an integer in [%ld, %ld]", opt, v, lo, hi);
    return 0;
}

/* 0: run, 1: done (help/version printed), -1: usage error */
static int parse(int argc, char **argv, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->temperature = 1.0;
    o->threads = 1;
    o->backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help();
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("ppdl-sample %s\n", PACKAGE_VERSION);
            return 1;
        }
        if (a[0] != '-' || !a[1]) {
            if (o->model) return ppdl_errf(err, errlen, "unexpected argument '%s' (one model file only)", a);
            o->model = a;
            continue;
        }
        char name[64];
        const char *v = NULL, *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n >= sizeof name) return ppdl_errf(err, errlen, "unknown option '%s' (see ppdl-sample --help)", a);
        memcpy(name, a, n);
        name[n] = 0;
        /* a full name or a unique prefix (core/options.h) */
        static const char *const names[] = {"--no-cache", "--ids", "--quiet", "--prompt", "--prompt-ids", "--tokens",
                                            "--temperature", "--top-k", "--seed", "--threads", "--backend",
                                            "--tokenizer", NULL};
        int which = ppdl_option_lookup(name, names, "ppdl-sample", err, errlen);
        if (which < 0) return -1;
        snprintf(name, sizeof name, "%s", names[which]);
        int is_flag = which < 3;
        if (is_flag) {
            if (eq) return ppdl_errf(err, errlen, "%s takes no value", name);
            if (!strcmp(name, "--no-cache")) o->no_cache = 1;
            else if (!strcmp(name, "--ids")) o->print_ids = 1;
            else o->quiet = 1;
            continue;
        }
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return ppdl_errf(err, errlen, "%s needs a value", name);
        long x;
        if (!strcmp(name, "--prompt")) o->prompt = v;
        else if (!strcmp(name, "--prompt-ids")) o->prompt_ids = v;
        else if (!strcmp(name, "--backend")) o->backend = v;
        else if (!strcmp(name, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(name, "--tokens")) { if (parse_long(name, v, 1, 100000000L, &o->tokens, err, errlen)) return -1; }
        else if (!strcmp(name, "--top-k")) { if (parse_long(name, v, 0, 2147483647L, &o->top_k, err, errlen)) return -1; }
        else if (!strcmp(name, "--threads")) { if (parse_long(name, v, 1, 1024, &o->threads, err, errlen)) return -1; }
        else if (!strcmp(name, "--seed")) {
            if (parse_long(name, v, 0, 2147483647L, &x, err, errlen)) return -1;
            o->seed = (unsigned long long)x;
        } else if (ppdl_parse_float(v, 0, 1e6, &o->temperature)) {
            return ppdl_errf(err, errlen, "--temperature %s: expected a number >= 0 (0: greedy)", v);
        }
    }
    if (!o->model) return ppdl_errf(err, errlen, "which model? ppdl-sample MODEL.h5 --prompt TEXT --tokens N (see --help)");
    if (!o->prompt == !o->prompt_ids)
        return ppdl_errf(err, errlen, o->prompt ? "--prompt and --prompt-ids: give one of them, not both"
                                                : "--prompt TEXT or --prompt-ids 1,2,3 is required: what to continue");
    if (!o->tokens) return ppdl_errf(err, errlen, "--tokens N is required: how many tokens to add");
    return 0;
}

/* the prompt as token ids [*n] (malloc'd) */
static int prompt_tokens(const options *o, const ppdl_model *m, ppdl_tokenizer *tok, int32_t **out, int *n,
                         char *err, size_t errlen)
{
    int V = m->vocab_size;
    if (o->prompt && tok) {
        ppdl_ids ids = {0};
        if (ppdl_tokenizer_encode(tok, o->prompt, strlen(o->prompt), 0, &ids, err, errlen)) {
            char inner[PPDL_ERR_LEN];
            snprintf(inner, sizeof inner, "%s", err);
            return ppdl_errf(err, errlen, "--prompt: %s", inner);
        }
        if (!ids.n || ids.n > 100000000) {
            free(ids.v);
            return ppdl_errf(err, errlen, "--prompt: %s tokens: the model needs at least one token to continue",
                             ids.n ? "over 10^8" : "no");
        }
        *out = ids.v;
        *n = (int)ids.n;
        return 0;
    }
    if (o->prompt) {
        if (V != 256)
            return ppdl_errf(err, errlen, "--prompt: %s has vocab_size %d, not a byte-level model (256): give the "
                             "model's --tokenizer, or the prompt's token ids with --prompt-ids", o->model, V);
        size_t len = strlen(o->prompt);
        if (!len) return ppdl_errf(err, errlen, "--prompt is empty: the model needs at least one token to continue");
        if (len > 100000000) return ppdl_errf(err, errlen, "--prompt: longer than 10^8 bytes");
        *out = ppdl_xmalloc(len * sizeof **out);
        for (size_t i = 0; i < len; i++) (*out)[i] = (unsigned char)o->prompt[i];
        *n = (int)len;
        return 0;
    }
    size_t cap = 16;
    int k = 0;
    int32_t *ids = ppdl_xmalloc(cap * sizeof *ids);
    const char *s = o->prompt_ids;
    for (;;) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        char item[32];
        long v;
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item - 1 ? len : sizeof item - 1), s);
        if (len >= sizeof item || ppdl_parse_int(item, 0, V - 1, &v)) {
            free(ids);
            return ppdl_errf(err, errlen, "--prompt-ids %s: item %d ('%s') is not a token id of %s (0 .. %d)",
                             o->prompt_ids, k + 1, item, o->model, V - 1);
        }
        if ((size_t)k == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        PPDL_CHECK(ids, "out of memory for the prompt");
        ids[k++] = (int32_t)v;
        if (!c) break;
        s = c + 1;
    }
    *out = ids;
    *n = k;
    return 0;
}

/* every layer's weights on the backend, in one arena (no gradients: inference only) */
static float *load_weights(const options *o, ppdl_model *m, ppdl_backend *be, char *err, size_t errlen)
{
    size_t total = ppdl_model_held_floats(m, 0, m->L - 1);
    float *host = ppdl_xmalloc((total ? total : 1) * sizeof *host);
    float *arena = ppdl_model_load_params(o->model, m, 0, m->L - 1, host, err, errlen) ? NULL
                                                                                      : ppdl_model_place_weights(m, be, host);
    free(host);
    return arena;
}

static void print_tokens(const options *o, const ppdl_model *m, const ppdl_tokenizer *tk, const int32_t *tok, long n)
{
    if (tk && !o->print_ids) {
        ppdl_detok d;
        ppdl_detok_init(&d, tk);
        for (long i = 0; i < n; i++) ppdl_detok_put(&d, tok[i], stdout);
        ppdl_detok_end(&d, stdout);
        putchar('\n');
        return;
    }
    if (m->vocab_size == 256 && !o->print_ids) {
        for (long i = 0; i < n; i++) putchar(tok[i]);
        putchar('\n');
        return;
    }
    for (long i = 0; i < n; i++) printf("%s%d", i ? " " : "", tok[i]);
    putchar('\n');
}

static int run(const options *o, char *err, size_t errlen)
{
    ppdl_model m;
    if (ppdl_model_load_desc(o->model, &m, err, errlen)) return -1;
    int rc = -1, n_prompt = 0;
    int32_t *text = NULL, *prompt = NULL;
    float *arena = NULL, *logits = NULL;
    ppdl_gen *g = NULL;
    ppdl_backend *be = NULL;
    ppdl_tokenizer *tok = NULL;
    if (o->tokenizer) {
        char inner[PPDL_ERR_LEN];
        if (!(tok = ppdl_tokenizer_load(o->tokenizer, inner, sizeof inner))) {
            ppdl_errf(err, errlen, "--tokenizer: %s", inner);
            goto out;
        }
        if (ppdl_tokenizer_vocab_size(tok) > m.vocab_size) {
            ppdl_errf(err, errlen, "--tokenizer %s has %ld tokens, more than %s's vocab_size %d: not its tokenizer",
                      o->tokenizer, ppdl_tokenizer_vocab_size(tok), o->model, m.vocab_size);
            goto out;
        }
        if (o->prompt && !ppdl_tokenizer_can_encode(tok)) {
            ppdl_errf(err, errlen, "--tokenizer %s is llm.c's tokenizer file, which decodes only: give --prompt-ids "
                      "(or the model's tokenizer.json)", o->tokenizer);
            goto out;
        }
    }
    if (strcmp(m.family, "gpt")) {
        ppdl_errf(err, errlen, "%s is %s %s model: ppdl-sample continues text with gpt models", o->model,
                  !strcmp(m.family, "mlp") ? "an" : "a", m.family);
        goto out;
    }
    if (o->top_k > m.vocab_size) {
        ppdl_errf(err, errlen, "--top-k %ld: %s has only %d tokens (vocab_size)", o->top_k, o->model, m.vocab_size);
        goto out;
    }
    if (prompt_tokens(o, &m, tok, &prompt, &n_prompt, err, errlen)) goto out;
    if (!(be = ppdl_backend_create(o->backend, (int)o->threads, 0, err, errlen))) goto out;
    if (!(arena = load_weights(o, &m, be, err, errlen))) goto out;
    g = ppdl_gen_create(&m, be, !o->no_cache);
    ppdl_rng rng;
    ppdl_rng_seed(&rng, o->seed);
    long total = n_prompt + o->tokens;
    text = ppdl_xmalloc((size_t)total * sizeof *text);
    memcpy(text, prompt, (size_t)n_prompt * sizeof *text);
    logits = ppdl_xmalloc((size_t)m.vocab_size * sizeof *logits);

    double t0 = ppdl_now_s();
    ppdl_gen_start(g, prompt, n_prompt, logits);
    double t1 = ppdl_now_s();
    for (long i = n_prompt; i < total; i++) {
        text[i] = ppdl_gen_pick(logits, m.vocab_size, o->temperature, (int)o->top_k, &rng);
        if (i + 1 < total) ppdl_gen_push(g, text[i], logits);
    }
    ppdl_be_sync(be);
    double t2 = ppdl_now_s();
    print_tokens(o, &m, tok, text, total);
    fflush(stdout);
    if (!o->quiet) {
        /* the first new token comes from the prompt's pass; each later one costs a step */
        long steps = o->tokens - 1;
        char rate[64] = "";
        if (steps > 0) snprintf(rate, sizeof rate, ", %.1f tokens/s", (double)steps / (t2 - t1 > 0 ? t2 - t1 : 1e-9));
        fprintf(stderr, "ppdl-sample: the prompt (%d token%s) in %.3f s, then %ld more in %.3f s%s (%s; %s "
                "backend, %ld thread%s)\n", n_prompt, n_prompt == 1 ? "" : "s", t1 - t0, steps, t2 - t1, rate,
                o->no_cache ? "no cache: the whole context per token" : "key/value cache", o->backend, o->threads,
                o->threads == 1 ? "" : "s");
    }
    rc = 0;
out:
    ppdl_tokenizer_free(tok);
    ppdl_gen_destroy(g);
    if (be) ppdl_be_free(be, arena);
    ppdl_backend_destroy(be);
    free(logits);
    free(text);
    free(prompt);
    ppdl_model_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(NULL, NULL);
    char err[PPDL_ERR_LEN] = "";
    options o;
    int rc = parse(argc, argv, &o, err, sizeof err), status = 0;
    if (rc < 0) status = 2;
    else if (rc == 0) status = run(&o, err, sizeof err) ? 1 : 0;
    if (status) fprintf(stderr, "ppdl-sample: %s\n", err);
    MPI_Finalize();
    return status;
}
