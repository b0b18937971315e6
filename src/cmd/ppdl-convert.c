/* ppdl-convert.c — GPT-2 weights between ppdl, Hugging Face and llm.c.
 *
 *   ppdl-convert hf-gpt2/ gpt2.h5            Hugging Face directory -> ppdl model
 *                                            (model.safetensors, or its shards)
 *   ppdl-convert ckpt.h5 export/             ppdl model or checkpoint -> Hugging Face
 *   ppdl-convert gpt2_124M.bin gpt2.h5       llm.c checkpoint -> ppdl model
 *
 * The story: find the two formats (--from/--to or the names), read the source into a
 * ppdl gpt model and one host array of its weights (the held layout of nn/model.h: a
 * tied lm_head.weight once, as wte), then write that array in the destination format.
 * Every reader validates the whole source before anything is written; every writer
 * writes into temporary names and renames them only when complete, so a failed
 * conversion leaves nothing at DST. The formats, field by field: docs/interop.md.
 *
 * Memory: one copy of the weights, plus one tensor at a time (a transposed Conv1D
 * weight, a bf16 block); the files are read and written tensor by tensor (pread,
 * pwrite).
 *
 * MPI is initialised only so that the library's fatal-error path (MPI_Abort) is safe.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/bf16.h"
#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "io/model_io.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "nn/model.h"

enum { FMT_NONE = -1, FMT_PPDL, FMT_HF, FMT_LLMC };
static const char *const fmt_names[] = {"ppdl", "hf", "llmc", NULL};

typedef struct options {
    const char *src, *dst;
    int from, to;
    int bf16;                      /* --dtype bf16 (llm.c version 5) */
    const char *tokenizer;         /* --tokenizer: the end-of-text id, tokenizer.json copied */
} options;

/* the model in memory: hyperparameters and the held layout of its weights */
typedef struct weights {
    ppdl_model m;
    float *host;
    size_t **off;                  /* off[l][j]: parameter j of layer l in host */
} weights;

static void print_help(void)
{
    printf("ppdl-convert: convert GPT-2 weights between ppdl, Hugging Face and llm.c.\n"
           "\n"
           "Usage: ppdl-convert [--from FMT] [--to FMT] [--dtype fp32|bf16] [--tokenizer FILE] SRC DST\n"
           "\n"
           "Formats (FMT):\n"
           "  ppdl  a model file (model.h5: ppdl-init, ppdl --save) or a checkpoint (its weights);\n"
           "        written as a model file. Found from a name ending in .h5\n"
           "  hf    a Hugging Face GPT-2 directory: config.json + model.safetensors (read: or\n"
           "        model.safetensors.index.json and the shards it names; GPT2LMHeadModel: F32,\n"
           "        F16 or BF16 read, F32 written in one file). Found from a SRC\n"
           "        directory, or a DST ending in / or with no extension (created if absent)\n"
           "  llmc  an llm.c checkpoint (gpt2_124M.bin: version 3 fp32, 5 bf16). Found from .bin\n"
           "\n"
           "  --from FMT        SRC's format, where its name does not say\n"
           "  --to FMT          DST's format, where its name does not say\n"
           "  --dtype fp32|bf16 llm.c output: fp32 (version 3, the default) or bf16 (version 5,\n"
           "                    rounded to nearest even)\n"
           "  --tokenizer FILE  Hugging Face output: the model's tokenizer (tokenizer.json, or\n"
           "                    llm.c's gpt2_tokenizer.bin): its end-of-text id becomes config.json's\n"
           "                    bos_token_id and eos_token_id, and a tokenizer.json is copied into\n"
           "                    DST (AutoTokenizer.from_pretrained loads it). Without it, those ids\n"
           "                    are 50256 where vocab_size is GPT-2's 50257, and absent otherwise\n"
           "  --help, --version\n"
           "\n"
           "ppdl's gpt family is GPT-2's architecture (learned positions, pre-LayerNorm blocks,\n"
           "GELU with the tanh approximation), so the weights map one to one: GPT-2's Conv1D\n"
           "weights [in, out] are transposed to ppdl's [out, in]; config.json fields that would\n"
           "change the math (activation_function other than gelu_new, scale_attn_weights false,\n"
           "...) are refused, naming the field. llm.c always ties the embeddings and uses\n"
           "ln_eps 1e-5; its padded vocabulary rows are dropped on import and written as zeros.\n"
           "\n"
           "Nothing is written unless the whole conversion succeeds (DST is left as it was).\n"
           "\n"
           "Examples:\n"
           "  ppdl-convert ./gpt2 gpt2.h5                  save_pretrained's directory -> ppdl\n"
           "  mpiexec -n 2 ppdl gpt2.h5 --data data.h5 --steps 100 --save tuned.h5\n"
           "  ppdl-convert tuned.h5 tuned-hf/ --tokenizer tokenizer.json\n"
           "                                               -> GPT2LMHeadModel.from_pretrained\n"
           "  ppdl-convert gpt2_124M.bin gpt2.h5           llm.c -> ppdl\n"
           "  ppdl-convert --dtype bf16 tuned.h5 tuned.bin ppdl -> llm.c, bf16\n"
           "\n"
           "The formats, field by field: docs/interop.md in the source tree.\n"
           "Every option with its default, and the exit statuses: docs/cli.md.\n");
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int is_dir(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int parse_fmt(const char *opt, const char *v, int *out, char *err, size_t errlen)
{
    for (int i = 0; fmt_names[i]; i++)
        if (!strcmp(v, fmt_names[i])) {
            *out = i;
            return 0;
        }
    return ppdl_errf(err, errlen, "%s %s: expected ppdl, hf or llmc", opt, v);
}

/* 0: run, 1: done (help/version printed), -1: usage error (message in err) */
static int parse(int argc, char **argv, options *o, char *err, size_t errlen)
{
    enum { O_FROM, O_TO, O_DTYPE, O_TOKENIZER, O_HELP, O_VERSION };
    static const char *const names[] = {"--from", "--to", "--dtype", "--tokenizer", "--help", "--version", NULL};
    memset(o, 0, sizeof *o);
    o->from = o->to = FMT_NONE;
    const char *pos[2];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int opt;
        if (!strcmp(a, "-h")) opt = O_HELP;
        else if (!strncmp(a, "--", 2) && a[2]) {
            if ((opt = ppdl_option_lookup(a, names, "ppdl-convert", err, errlen)) < 0) return -1;
        } else if (a[0] == '-' && a[1]) {
            return ppdl_errf(err, errlen, "unknown option '%s' (see ppdl-convert --help)", a);
        } else {
            if (n_pos == 2) return ppdl_errf(err, errlen, "unexpected argument '%s': give SRC and DST only", a);
            pos[n_pos++] = a;
            continue;
        }
        if (opt == O_HELP) {
            print_help();
            return 1;
        }
        if (opt == O_VERSION) {
            printf("ppdl-convert %s\n", PACKAGE_VERSION);
            return 1;
        }
        const char *eq = strchr(a, '='), *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return ppdl_errf(err, errlen, "%s needs a value", names[opt]);
        if (opt == O_FROM && parse_fmt(names[opt], v, &o->from, err, errlen)) return -1;
        if (opt == O_TO && parse_fmt(names[opt], v, &o->to, err, errlen)) return -1;
        if (opt == O_DTYPE) {
            if (strcmp(v, "fp32") && strcmp(v, "bf16"))
                return ppdl_errf(err, errlen, "--dtype %s: expected fp32 or bf16", v);
            o->bf16 = !strcmp(v, "bf16");
        }
        if (opt == O_TOKENIZER) o->tokenizer = v;
    }
    if (n_pos < 2) return ppdl_errf(err, errlen, "SRC and DST are required (see ppdl-convert --help)");
    o->src = pos[0], o->dst = pos[1];
    if (o->from == FMT_NONE) {
        if (is_dir(o->src)) o->from = FMT_HF;
        else if (ends_with(o->src, ".h5")) o->from = FMT_PPDL;
        else if (ends_with(o->src, ".bin")) o->from = FMT_LLMC;
        else return ppdl_errf(err, errlen, "%s: cannot tell its format from the name (a directory: hf, .h5: ppdl, "
                                           ".bin: llmc); give --from", o->src);
    }
    if (o->to == FMT_NONE) {
        const char *base = strrchr(o->dst, '/');
        base = base ? base + 1 : o->dst;
        if (ends_with(o->dst, ".h5")) o->to = FMT_PPDL;
        else if (ends_with(o->dst, ".bin")) o->to = FMT_LLMC;
        else if (!*base || is_dir(o->dst) || !strchr(base, '.')) o->to = FMT_HF;
        else return ppdl_errf(err, errlen, "%s: cannot tell its format from the name (.h5: ppdl, .bin: llmc, a "
                                           "directory, a name ending in / or without extension: hf); give --to",
                              o->dst);
    }
    if (o->bf16 && o->to != FMT_LLMC)
        return ppdl_errf(err, errlen, "--dtype bf16: only llm.c output (--to llmc) is written in bf16");
    if (o->tokenizer && o->to != FMT_HF)
        return ppdl_errf(err, errlen, "--tokenizer %s: only Hugging Face output (--to hf) takes a tokenizer",
                         o->tokenizer);
    return 0;
}

/* ---- the model in memory ------------------------------------------------------------- */

static void weights_free(weights *w)
{
    if (w->off)
        for (int l = 0; l < w->m.L; l++) free(w->off[l]);
    free(w->off);
    free(w->host);
    if (w->m.layers) ppdl_model_free(&w->m);
    memset(w, 0, sizeof *w);
}

/* the offsets of every parameter in the held layout, and host to hold them */
static void weights_alloc(weights *w)
{
    ppdl_model *m = &w->m;
    size_t total = ppdl_model_held_floats(m, 0, m->L - 1), at = 0;
    w->host = ppdl_xcalloc(total + 1, sizeof *w->host);
    w->off = ppdl_xcalloc((size_t)m->L, sizeof *w->off);
    for (int l = 0; l < m->L; l++) {
        w->off[l] = ppdl_xcalloc((size_t)m->layers[l].n_params + 1, sizeof **w->off);
        for (int j = 0; j < m->layers[l].n_params; j++) {
            if (ppdl_model_is_tied(m, l, j)) {
                w->off[l][j] = 0; /* wte, the first parameter */
                continue;
            }
            w->off[l][j] = at;
            at += m->layers[l].params[j].numel;
        }
    }
}

/* a gpt model from its hyperparameters, as ppdl-init --set would take them */
static int make_gpt(weights *w, long V, long T, long C, long H, long L, double eps, int tie, const char *what,
                    char *err, size_t errlen)
{
    char msg[PPDL_ERR_LEN], val[6][32];
    const char *keys[] = {"vocab_size", "seq_len", "d_model", "n_heads", "n_layers", "ln_eps", "tie_embeddings"};
    snprintf(val[0], 32, "%ld", V), snprintf(val[1], 32, "%ld", T), snprintf(val[2], 32, "%ld", C);
    snprintf(val[3], 32, "%ld", H), snprintf(val[4], 32, "%ld", L), snprintf(val[5], 32, "%.9g", eps);
    if (ppdl_model_preset(&w->m, "gpt-tiny", msg, sizeof msg)) return ppdl_errf(err, errlen, "%s: %s", what, msg);
    for (int i = 0; i < 7; i++)
        if (ppdl_model_set(&w->m, keys[i], i < 6 ? val[i] : tie ? "1" : "0", msg, sizeof msg))
            return ppdl_errf(err, errlen, "%s: %s", what, msg);
    if (ppdl_model_build(&w->m, msg, sizeof msg)) return ppdl_errf(err, errlen, "%s: %s", what, msg);
    weights_alloc(w);
    return 0;
}

static int param_index(const ppdl_layer *l, const char *name)
{
    for (int j = 0; j < l->n_params; j++)
        if (!strcmp(l->params[j].name, name)) return j;
    ppdl_die("layer %s has no parameter %s", l->kind->name, name);
}

/* ---- GPT-2's names ---------------------------------------------------------------------
 * ppdl's block parameter, GPT-2's (after transformer.h.<i>.), and whether GPT-2 stores it
 * as a Conv1D weight [in, out], the transpose of ppdl's [out, in] (docs/interop.md) */
static const struct { const char *ppdl, *hf; int transpose; } block_names[] = {
    {"ln1.weight", "ln_1.weight", 0},          {"ln1.bias", "ln_1.bias", 0},
    {"attn.qkv.weight", "attn.c_attn.weight", 1}, {"attn.qkv.bias", "attn.c_attn.bias", 0},
    {"attn.proj.weight", "attn.c_proj.weight", 1}, {"attn.proj.bias", "attn.c_proj.bias", 0},
    {"ln2.weight", "ln_2.weight", 0},          {"ln2.bias", "ln_2.bias", 0},
    {"mlp.fc.weight", "mlp.c_fc.weight", 1},    {"mlp.fc.bias", "mlp.c_fc.bias", 0},
    {"mlp.proj.weight", "mlp.c_proj.weight", 1}, {"mlp.proj.bias", "mlp.c_proj.bias", 0},
};
#define N_BLOCK_NAMES (sizeof block_names / sizeof block_names[0])

/* GPT-2's name of parameter j of layer l without the "transformer." prefix (lm_head.weight
 * never has it); *transpose: stored [in, out] */
static void hf_name(const ppdl_model *m, int l, int j, char *buf, size_t len, int *transpose)
{
    const char *p = m->layers[l].params[j].name;
    *transpose = 0;
    if (l == 0) snprintf(buf, len, "%s.weight", p); /* wte, wpe */
    else if (l == m->L - 1) snprintf(buf, len, "%s", p); /* ln_f.*, lm_head.weight */
    else {
        for (size_t k = 0; k < N_BLOCK_NAMES; k++)
            if (!strcmp(p, block_names[k].ppdl)) {
                snprintf(buf, len, "h.%d.%s", l - 1, block_names[k].hf);
                *transpose = block_names[k].transpose;
                return;
            }
        ppdl_die("block parameter %s has no GPT-2 name", p);
    }
}

/* dst[c][r] = src[r][c], src [rows, cols] */
static void transpose(const float *src, float *dst, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

/* ---- ppdl ------------------------------------------------------------------------------ */

static int read_ppdl(const char *path, weights *w, char *err, size_t errlen)
{
    if (ppdl_model_load_desc(path, &w->m, err, errlen)) return -1;
    if (strcmp(w->m.family, "gpt"))
        return ppdl_errf(err, errlen, "%s: family %s: only gpt models convert (to GPT-2's formats)", path, w->m.family);
    weights_alloc(w);
    return ppdl_model_load_params(path, &w->m, 0, w->m.L - 1, w->host, err, errlen);
}

/* ---- Hugging Face: config.json --------------------------------------------------------- */

/* a number field; absent: *out = def, or an error where def is NAN (required) */
static int cfg_num(const char *path, json_t *root, const char *key, double def, double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v) {
        if (isnan(def)) return ppdl_errf(err, errlen, "%s: field %s is missing", path, key);
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return ppdl_errf(err, errlen, "%s: field %s is not a number", path, key);
    *out = json_number_value(v);
    return 0;
}

static int cfg_int(const char *path, json_t *root, const char *key, long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v) return ppdl_errf(err, errlen, "%s: field %s is missing", path, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 2147483647)
        return ppdl_errf(err, errlen, "%s: field %s is not a positive integer", path, key);
    *out = (long)json_integer_value(v);
    return 0;
}

/* a boolean field that must have the value ppdl computes (absent: GPT-2's default) */
static int cfg_bool(const char *path, json_t *root, const char *key, int def, int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) return ppdl_errf(err, errlen, "%s: field %s is not true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

static int read_hf_config(const char *dir, weights *w, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return ppdl_errf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
    int rc = -1;
    long V = 0, T = 0, C = 0, H = 0, L = 0;
    double eps = 0, n_inner;
    int tie = 1, scale = 1, by_layer = 0, cross = 0;
    json_t *v;
    if (!json_is_object(root)) {
        ppdl_errf(err, errlen, "%s: not a JSON object", path);
        goto out;
    }
    if ((v = json_object_get(root, "model_type")) && (!json_is_string(v) || strcmp(json_string_value(v), "gpt2"))) {
        ppdl_errf(err, errlen, "%s: field model_type is %s, not gpt2: ppdl converts GPT-2 models only", path,
                  json_is_string(v) ? json_string_value(v) : "not a string");
        goto out;
    }
    v = json_object_get(root, "activation_function");
    if (v && (!json_is_string(v) ||
              (strcmp(json_string_value(v), "gelu_new") && strcmp(json_string_value(v), "gelu_pytorch_tanh")))) {
        ppdl_errf(err, errlen, "%s: field activation_function is %s: ppdl's gpt computes GELU with the tanh "
                  "approximation (gelu_new, gelu_pytorch_tanh)", path, json_is_string(v) ? json_string_value(v) : "not a string");
        goto out;
    }
    if (cfg_int(path, root, "vocab_size", &V, err, errlen) || cfg_int(path, root, "n_embd", &C, err, errlen) ||
        cfg_int(path, root, "n_head", &H, err, errlen) || cfg_int(path, root, "n_layer", &L, err, errlen))
        goto out;
    /* n_positions, or n_ctx in the oldest configs */
    if (cfg_int(path, root, json_object_get(root, "n_positions") ? "n_positions" : "n_ctx", &T, err, errlen)) goto out;
    if (cfg_num(path, root, "layer_norm_epsilon", 1e-5, &eps, err, errlen) ||
        cfg_bool(path, root, "tie_word_embeddings", 1, &tie, err, errlen) ||
        cfg_bool(path, root, "scale_attn_weights", 1, &scale, err, errlen) ||
        cfg_bool(path, root, "scale_attn_by_inverse_layer_idx", 0, &by_layer, err, errlen) ||
        cfg_bool(path, root, "add_cross_attention", 0, &cross, err, errlen))
        goto out;
    v = json_object_get(root, "n_inner");
    n_inner = v && !json_is_null(v) ? (json_is_integer(v) ? (double)json_integer_value(v) : -1) : 4.0 * C;
    if (n_inner != 4.0 * C) {
        ppdl_errf(err, errlen, "%s: field n_inner is not null or 4 x n_embd (%ld): ppdl's MLP is 4 x d_model wide",
                  path, 4 * C);
        goto out;
    }
    if (!scale) {
        ppdl_errf(err, errlen, "%s: field scale_attn_weights is false: ppdl scales attention by 1/sqrt(head size)", path);
        goto out;
    }
    if (by_layer) {
        ppdl_errf(err, errlen, "%s: field scale_attn_by_inverse_layer_idx is true: ppdl does not scale attention "
                  "by the layer", path);
        goto out;
    }
    if (cross) {
        ppdl_errf(err, errlen, "%s: field add_cross_attention is true: ppdl's blocks have no cross-attention", path);
        goto out;
    }
    if (!(eps > 0 && eps < 1)) {
        ppdl_errf(err, errlen, "%s: field layer_norm_epsilon %g: expected a number in (0, 1)", path, eps);
        goto out;
    }
    rc = make_gpt(w, V, T, C, H, L, eps, tie, path, err, errlen);
out:
    json_decref(root);
    return rc;
}

/* ---- Hugging Face: model.safetensors, or its shards ------------------------------------- */

/* The safetensors files of a directory: model.safetensors, or else the shards that
 * model.safetensors.index.json's weight_map names ({tensor: file}); every tensor in
 * exactly one file, the one weight_map names. */
typedef struct hf_files {
    char what[4200];               /* the file that names the weights, for messages */
    int n;
    ppdl_st_file *f;               /* [n] */
    char **used;                   /* used[k][i]: tensor i of file k was read */
} hf_files;

static void hf_close(hf_files *h)
{
    for (int k = 0; k < h->n; k++) {
        ppdl_st_close(&h->f[k]);
        free(h->used[k]);
    }
    free(h->f), free(h->used);
    memset(h, 0, sizeof *h);
}

static int hf_add_file(hf_files *h, const char *path, char *err, size_t errlen)
{
    h->f = realloc(h->f, (size_t)(h->n + 1) * sizeof *h->f);
    h->used = realloc(h->used, (size_t)(h->n + 1) * sizeof *h->used);
    if (!h->f || !h->used) ppdl_die("out of memory");
    if (ppdl_st_open(path, &h->f[h->n], err, errlen)) return -1;
    h->used[h->n] = ppdl_xcalloc((size_t)h->f[h->n].n + 1, 1);
    h->n++;
    return 0;
}

/* the tensor called name and its file k, or NULL */
static const ppdl_st_tensor *hf_find(const hf_files *h, const char *name, int *k)
{
    for (*k = 0; *k < h->n; (*k)++) {
        const ppdl_st_tensor *t = ppdl_st_find(&h->f[*k], name);
        if (t) return t;
    }
    return NULL;
}

static int hf_open(const char *dir, hf_files *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    char path[4200];
    snprintf(h->what, sizeof h->what, "%s/model.safetensors", dir);
    if (!access(h->what, F_OK)) return hf_add_file(h, h->what, err, errlen);
    snprintf(h->what, sizeof h->what, "%s/model.safetensors.index.json", dir);
    if (access(h->what, F_OK))
        return ppdl_errf(err, errlen, "%s: holds neither model.safetensors nor model.safetensors.index.json", dir);
    json_error_t je;
    json_t *root = json_load_file(h->what, 0, &je), *map = root ? json_object_get(root, "weight_map") : NULL;
    int rc = 0;
    if (!root) rc = ppdl_errf(err, errlen, "%s: not JSON: %s (line %d)", h->what, je.text, je.line);
    else if (!json_is_object(map) || !json_object_size(map))
        rc = ppdl_errf(err, errlen, "%s: field weight_map: expected an object {tensor: file}, not empty", h->what);
    const char *name;
    json_t *v;
    /* open each file the first time it is named; check that it holds the tensor */
    if (!rc) json_object_foreach(map, name, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/') || !strcmp(file, "..")) {
            rc = ppdl_errf(err, errlen, "%s: field weight_map: tensor %s: expected the name of a file in %s", h->what,
                           name, dir);
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int k = 0;
        while (k < h->n && strcmp(h->f[k].path, path)) k++;
        if (k == h->n) {
            if (access(path, F_OK)) {
                rc = ppdl_errf(err, errlen, "%s: field weight_map: tensor %s is in %s, which does not exist", h->what,
                               name, path);
                break;
            }
            if ((rc = hf_add_file(h, path, err, errlen))) break;
        }
        if (!ppdl_st_find(&h->f[k], name)) {
            rc = ppdl_errf(err, errlen, "%s: field weight_map: tensor %s is in %s, which does not hold it", h->what,
                           name, path);
            break;
        }
    }
    /* and every tensor of every file is where weight_map says, in one file only */
    for (int k = 0; k < h->n && !rc; k++)
        for (int i = 0; i < h->f[k].n && !rc; i++) {
            const char *t = h->f[k].t[i].name, *file = json_string_value(json_object_get(map, t));
            for (int k2 = 0; k2 < k && !rc; k2++)
                if (ppdl_st_find(&h->f[k2], t))
                    rc = ppdl_errf(err, errlen, "%s: tensor %s is in two shards: %s and %s", h->what, t, h->f[k2].path,
                                   h->f[k].path);
            if (!rc && !file)
                rc = ppdl_errf(err, errlen, "%s: field weight_map: tensor %s of %s is not in it", h->what, t,
                               h->f[k].path);
        }
    json_decref(root);
    if (rc) hf_close(h);
    return rc;
}

/* is name one of GPT-2's attention buffers (the causal mask), not a weight? */
static int hf_buffer(const char *name)
{
    if (!strncmp(name, "transformer.", 12)) name += 12;
    int i, n = 0;
    if (sscanf(name, "h.%d.%n", &i, &n) != 1 || !n) return 0;
    return !strcmp(name + n, "attn.bias") || !strcmp(name + n, "attn.masked_bias");
}

static int read_hf(const char *dir, weights *w, char *err, size_t errlen)
{
    if (read_hf_config(dir, w, err, errlen)) return -1;
    hf_files h;
    if (hf_open(dir, &h, err, errlen)) return -1;
    const char *what = h.what;
    ppdl_model *m = &w->m;
    size_t biggest = 0;
    for (int k = 0; k < h.n; k++)
        for (int i = 0; i < h.f[k].n; i++) biggest = h.f[k].t[i].numel > biggest ? h.f[k].t[i].numel : biggest;
    float *tmp = ppdl_xmalloc((biggest + 1) * sizeof *tmp);
    int rc = 0;
    for (int l = 0; l < m->L && !rc; l++)
        for (int j = 0; j < m->layers[l].n_params && !rc; j++) {
            const ppdl_param *p = &m->layers[l].params[j];
            char name[128], full[160];
            int tr, k;
            hf_name(m, l, j, name, sizeof name, &tr);
            snprintf(full, sizeof full, "transformer.%s", name);
            const ppdl_st_tensor *t = hf_find(&h, full, &k);
            if (!t || !strcmp(name, "lm_head.weight")) t = hf_find(&h, name, &k);
            const ppdl_st_file *f = t ? &h.f[k] : NULL;
            if (ppdl_model_is_tied(m, l, j)) {
                /* tied: an lm_head.weight in the file must be wte */
                if (t) {
                    h.used[k][t - f->t] = 1;
                    if (t->numel != p->numel || (rc = ppdl_st_read(f, t, tmp, err, errlen))) {
                        if (!rc)
                            rc = ppdl_errf(err, errlen, "%s: tensor %s: shape differs from wte's", f->path, t->name);
                        break;
                    }
                    if (memcmp(tmp, w->host, p->numel * sizeof *tmp))
                        rc = ppdl_errf(err, errlen, "%s: tensor %s differs from transformer.wte.weight, but %s/config.json "
                                       "ties them (tie_word_embeddings)", f->path, t->name, dir);
                }
                continue;
            }
            if (!t) {
                rc = ppdl_errf(err, errlen, "%s: tensor %s (or %s) is missing%s", what, full, name,
                               !strcmp(name, "lm_head.weight") ? " (config.json: tie_word_embeddings is false)" : "");
                break;
            }
            h.used[k][t - f->t] = 1;
            int64_t r = p->shape[0], c = p->ndim > 1 ? p->shape[1] : 0;
            int shape_ok = t->ndim == p->ndim && (p->ndim == 1 ? t->shape[0] == r
                                                  : tr ? t->shape[0] == c && t->shape[1] == r
                                                       : t->shape[0] == r && t->shape[1] == c);
            if (!shape_ok) {
                char got[96] = "", *q = got;
                for (int d = 0; d < t->ndim && q < got + 64; d++)
                    q += snprintf(q, 16, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
                rc = ppdl_errf(err, errlen, "%s: tensor %s has shape [%s], config.json gives [%lld%s%lld]", f->path,
                               t->name, got, (long long)(tr ? c : r), p->ndim > 1 ? ", " : "",
                               (long long)(p->ndim > 1 ? (tr ? r : c) : 0));
                if (p->ndim == 1) { /* "[n, 0]" is wrong for a vector: cut it */
                    char *e = strstr(err, ", 0]");
                    if (e) strcpy(e, "]");
                }
                break;
            }
            float *dst = w->host + w->off[l][j];
            if (tr) {
                if (!(rc = ppdl_st_read(f, t, tmp, err, errlen))) transpose(tmp, dst, (size_t)c, (size_t)r);
            } else {
                rc = ppdl_st_read(f, t, dst, err, errlen);
            }
        }
    for (int k = 0; k < h.n && !rc; k++)
        for (int i = 0; i < h.f[k].n && !rc; i++)
            if (!h.used[k][i] && !hf_buffer(h.f[k].t[i].name))
                rc = ppdl_errf(err, errlen, "%s: tensor %s is not a weight of GPT-2 (GPT2LMHeadModel) with this "
                               "config.json", h.f[k].path, h.f[k].t[i].name);
    free(tmp);
    hf_close(&h);
    return rc;
}

/* the shortest decimal that reads back as the float x (1e-05, not 9.99999975e-06) */
static double short_decimal(float x)
{
    char buf[32];
    for (int prec = 1; prec < 10; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    return strtod(buf, NULL);
}

/* eot: the end-of-text id written as bos_token_id and eos_token_id (transformers'
 * generate stops at it), -1 for none */
static int write_hf_config(const char *path, const ppdl_model *m, long eot, char *err, size_t errlen)
{
    json_t *root = json_object(), *arch = json_array();
    json_array_append_new(arch, json_string("GPT2LMHeadModel"));
    json_object_set_new(root, "architectures", arch);
    json_object_set_new(root, "model_type", json_string("gpt2"));
    json_object_set_new(root, "vocab_size", json_integer(m->vocab_size));
    json_object_set_new(root, "n_positions", json_integer(m->seq_len));
    json_object_set_new(root, "n_ctx", json_integer(m->seq_len));
    json_object_set_new(root, "n_embd", json_integer(m->d_model));
    json_object_set_new(root, "n_layer", json_integer(m->n_layers));
    json_object_set_new(root, "n_head", json_integer(m->n_heads));
    json_object_set_new(root, "n_inner", json_null());
    json_object_set_new(root, "activation_function", json_string("gelu_new"));
    json_object_set_new(root, "layer_norm_epsilon", json_real(short_decimal(m->ln_eps)));
    json_object_set_new(root, "tie_word_embeddings", json_boolean(m->tie_embeddings));
    json_object_set_new(root, "scale_attn_weights", json_true());
    json_object_set_new(root, "scale_attn_by_inverse_layer_idx", json_false());
    json_object_set_new(root, "reorder_and_upcast_attn", json_false());
    /* ppdl trains without dropout: the same in transformers */
    json_object_set_new(root, "resid_pdrop", json_real(0));
    json_object_set_new(root, "embd_pdrop", json_real(0));
    json_object_set_new(root, "attn_pdrop", json_real(0));
    json_object_set_new(root, "initializer_range", json_real(0.02));
    json_object_set_new(root, "torch_dtype", json_string("float32"));
    if (eot >= 0) {
        json_object_set_new(root, "bos_token_id", json_integer(eot));
        json_object_set_new(root, "eos_token_id", json_integer(eot));
    }
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc) return ppdl_errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

/* src's bytes to dst (created or truncated) */
static int copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    if (!in) return ppdl_errf(err, errlen, "%s: cannot open: %s", src, strerror(errno));
    if (!out) {
        ppdl_errf(err, errlen, "%s: cannot create: %s", dst, strerror(errno));
        fclose(in);
        return -1;
    }
    enum { CHUNK = 1 << 20 };
    char *buf = ppdl_xmalloc(CHUNK);
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(buf, 1, CHUNK, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = ppdl_errf(err, errlen, "%s: cannot write: %s", dst, strerror(errno));
    if (!rc && ferror(in)) rc = ppdl_errf(err, errlen, "%s: cannot read: %s", src, strerror(errno));
    if (fclose(out) && !rc) rc = ppdl_errf(err, errlen, "%s: cannot write: %s", dst, strerror(errno));
    fclose(in);
    free(buf);
    return rc;
}

/* eot as in write_hf_config; tok_json: a tokenizer.json copied in beside them, or NULL */
static int write_hf(const char *dir, const weights *w, long eot, const char *tok_json, char *err, size_t errlen)
{
    const ppdl_model *m = &w->m;
    char cfg[4096], cfg_tmp[4200], st[4096], st_tmp[4200], tok[4096], tok_tmp[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(cfg_tmp, sizeof cfg_tmp, "%s.tmp", cfg);
    snprintf(st_tmp, sizeof st_tmp, "%s.tmp", st);
    snprintf(tok_tmp, sizeof tok_tmp, "%s.tmp", tok);
    int made = 0;
    if (!is_dir(dir)) {
        if (mkdir(dir, 0777)) return ppdl_errf(err, errlen, "%s: cannot create the directory: %s", dir, strerror(errno));
        made = 1;
    }
    /* the tensors, in ppdl's order (which is GPT-2's), a tied lm_head.weight left out */
    int n = 0, cap = 0;
    for (int l = 0; l < m->L; l++) cap += m->layers[l].n_params;
    char **names = ppdl_xcalloc((size_t)cap, sizeof *names);
    int *ndims = ppdl_xcalloc((size_t)cap, sizeof *ndims), *lj = ppdl_xcalloc(2 * (size_t)cap, sizeof *lj);
    int64_t (*shapes)[PPDL_ST_MAX_DIMS] = ppdl_xcalloc((size_t)cap, sizeof *shapes);
    size_t biggest = 0;
    for (int l = 0; l < m->L; l++)
        for (int j = 0; j < m->layers[l].n_params; j++) {
            if (ppdl_model_is_tied(m, l, j)) continue;
            const ppdl_param *p = &m->layers[l].params[j];
            char name[128];
            int tr;
            hf_name(m, l, j, name, sizeof name, &tr);
            names[n] = ppdl_xmalloc(160);
            snprintf(names[n], 160, "%s%s", strcmp(name, "lm_head.weight") ? "transformer." : "", name);
            ndims[n] = p->ndim;
            for (int d = 0; d < p->ndim; d++) shapes[n][d] = p->shape[tr ? p->ndim - 1 - d : d];
            lj[2 * n] = l, lj[2 * n + 1] = j;
            biggest = p->numel > biggest ? p->numel : biggest;
            n++;
        }
    float *tmp = ppdl_xmalloc((biggest + 1) * sizeof *tmp);
    ppdl_st_file f;
    int rc = ppdl_st_create(st_tmp, &f, n, names, ndims, (const int64_t(*)[PPDL_ST_MAX_DIMS])shapes, err, errlen);
    for (int i = 0; i < n && !rc; i++) {
        int l = lj[2 * i], j = lj[2 * i + 1], tr;
        char name[128];
        const ppdl_param *p = &m->layers[l].params[j];
        hf_name(m, l, j, name, sizeof name, &tr);
        const float *src = w->host + w->off[l][j];
        if (tr) transpose(src, tmp, (size_t)p->shape[0], (size_t)p->shape[1]);
        rc = ppdl_st_write(&f, i, tr ? tmp : src, err, errlen);
    }
    if (!rc) rc = ppdl_st_close_write(&f, err, errlen);
    else ppdl_st_close(&f);
    if (!rc) rc = write_hf_config(cfg_tmp, m, eot, err, errlen);
    if (!rc && tok_json) rc = copy_file(tok_json, tok_tmp, err, errlen);
    if (!rc && (rename(st_tmp, st) || rename(cfg_tmp, cfg) || (tok_json && rename(tok_tmp, tok))))
        rc = ppdl_errf(err, errlen, "%s: cannot rename the files into place: %s", dir, strerror(errno));
    if (rc) {
        unlink(st_tmp);
        unlink(cfg_tmp);
        if (tok_json) unlink(tok_tmp);
        if (made) rmdir(dir);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names), free(ndims), free(lj), free(shapes), free(tmp);
    return rc;
}

/* ---- llm.c -------------------------------------------------------------------------------
 * gpt2_124M.bin: 256 int32 (magic 20240326, version 3 fp32 / 5 bf16, max_seq_len,
 * vocab_size, num_layers, num_heads, channels, padded_vocab_size, zeros), then 16 tensors:
 * wte [Vp, C], wpe [maxT, C], then per block parameter all layers' together (ln1w [L, C],
 * ... fcprojb [L, C]) in ppdl's block order, then lnfw, lnfb. Weights are [out, in] like
 * ppdl's; the head is always the embedding (tied). */
#define LLMC_MAGIC 20240326
#define LLMC_HEADER 256

static int llmc_total(const ppdl_model *m, long Vp, size_t *n)
{
    size_t C = (size_t)m->d_model, total = (size_t)Vp * C + (size_t)m->seq_len * C + 2 * C;
    total += (size_t)m->n_layers * ppdl_layer_param_count(&m->layers[1]);
    *n = total;
    return 0;
}

/* calls fn for each piece of the file in order: the floats at host + off, count n, at file
 * element position pos; wte's rows past V (padding) are left to the caller */
typedef int (*llmc_fn)(void *ctx, float *p, size_t n, size_t pos, char *err, size_t errlen);
static int llmc_walk(const weights *w, long Vp, llmc_fn fn, void *ctx, char *err, size_t errlen)
{
    const ppdl_model *m = &w->m;
    size_t C = (size_t)m->d_model, pos = 0;
    const ppdl_layer *emb = &m->layers[0], *head = &m->layers[m->L - 1];
    int wte = param_index(emb, "wte"), wpe = param_index(emb, "wpe");
    if (fn(ctx, w->host + w->off[0][wte], (size_t)m->vocab_size * C, pos, err, errlen)) return -1;
    pos += (size_t)Vp * C;
    if (fn(ctx, w->host + w->off[0][wpe], (size_t)m->seq_len * C, pos, err, errlen)) return -1;
    pos += (size_t)m->seq_len * C;
    for (size_t k = 0; k < N_BLOCK_NAMES; k++)
        for (int b = 1; b <= m->n_layers; b++) {
            int j = param_index(&m->layers[b], block_names[k].ppdl);
            size_t n = m->layers[b].params[j].numel;
            if (fn(ctx, w->host + w->off[b][j], n, pos, err, errlen)) return -1;
            pos += n;
        }
    int lw = param_index(head, "ln_f.weight"), lb = param_index(head, "ln_f.bias");
    if (fn(ctx, w->host + w->off[m->L - 1][lw], C, pos, err, errlen)) return -1;
    return fn(ctx, w->host + w->off[m->L - 1][lb], C, pos + C, err, errlen);
}

typedef struct llmc_io {
    const char *path;
    int fd, bf16;
    uint16_t *buf;                 /* one piece in bf16 */
} llmc_io;

static int llmc_read_piece(void *ctx, float *p, size_t n, size_t pos, char *err, size_t errlen)
{
    llmc_io *io = ctx;
    size_t es = io->bf16 ? 2 : 4;
    void *dst = io->bf16 ? (void *)io->buf : (void *)p;
    size_t bytes = n * es;
    off_t off = (off_t)(LLMC_HEADER * 4 + pos * es);
    if (ppdl_pread_all(io->fd, dst, bytes, (uint64_t)off))
        return ppdl_errf(err, errlen, "%s: cannot read the weights at byte %lld", io->path, (long long)off);
    if (io->bf16)
        for (size_t i = 0; i < n; i++) p[i] = ppdl_f32_from_bf16(io->buf[i]);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i]))
            return ppdl_errf(err, errlen, "%s: weight %zu (from the start of the weights) is not finite", io->path,
                             pos + i);
    return 0;
}

static int llmc_write_piece(void *ctx, float *p, size_t n, size_t pos, char *err, size_t errlen)
{
    llmc_io *io = ctx;
    size_t es = io->bf16 ? 2 : 4;
    if (io->bf16)
        for (size_t i = 0; i < n; i++) io->buf[i] = ppdl_bf16_from_f32(p[i]);
    const char *src = io->bf16 ? (const char *)io->buf : (const char *)p;
    size_t bytes = n * es;
    off_t off = (off_t)(LLMC_HEADER * 4 + pos * es);
    if (ppdl_pwrite_all(io->fd, src, bytes, (uint64_t)off))
        return ppdl_errf(err, errlen, "%s: cannot write: %s", io->path, strerror(errno));
    return 0;
}

static size_t biggest_piece(const ppdl_model *m)
{
    size_t b = (size_t)m->vocab_size * (size_t)m->d_model;
    if ((size_t)m->seq_len * (size_t)m->d_model > b) b = (size_t)m->seq_len * (size_t)m->d_model;
    if (4 * (size_t)m->d_model * (size_t)m->d_model > b) b = 4 * (size_t)m->d_model * (size_t)m->d_model;
    return b;
}

static int read_llmc(const char *path, weights *w, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ppdl_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    int32_t h[LLMC_HEADER];
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) || pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        ppdl_errf(err, errlen, "%s: shorter than llm.c's header (%d int32)", path, LLMC_HEADER);
        goto out;
    }
    if (h[0] != LLMC_MAGIC) {
        ppdl_errf(err, errlen, "%s: header magic %d, expected %d: not an llm.c model checkpoint", path, h[0], LLMC_MAGIC);
        goto out;
    }
    if (h[1] != 3 && h[1] != 5) {
        ppdl_errf(err, errlen, "%s: header version %d: ppdl reads 3 (fp32) and 5 (bf16)", path, h[1]);
        goto out;
    }
    static const char *const fields[] = {"", "", "max_seq_len", "vocab_size", "num_layers", "num_heads", "channels",
                                         "padded_vocab_size"};
    for (int i = 2; i < 8; i++)
        if (h[i] < 1) {
            ppdl_errf(err, errlen, "%s: header %s %d: expected a positive number", path, fields[i], h[i]);
            goto out;
        }
    if (h[7] < h[3]) {
        ppdl_errf(err, errlen, "%s: header padded_vocab_size %d is below vocab_size %d", path, h[7], h[3]);
        goto out;
    }
    if (make_gpt(w, h[3], h[2], h[6], h[5], h[4], 1e-5, 1, path, err, errlen)) goto out;
    size_t total, es = h[1] == 5 ? 2 : 4;
    llmc_total(&w->m, h[7], &total);
    if ((uint64_t)st.st_size != LLMC_HEADER * 4 + total * es) {
        ppdl_errf(err, errlen, "%s: %lld bytes, the header gives %zu (%zu weights of %zu bytes after %d)", path,
                  (long long)st.st_size, LLMC_HEADER * 4 + total * es, total, es, LLMC_HEADER * 4);
        goto out;
    }
    llmc_io io = {path, fd, h[1] == 5, NULL};
    if (io.bf16) io.buf = ppdl_xmalloc(biggest_piece(&w->m) * 2 + 2);
    rc = llmc_walk(w, h[7], llmc_read_piece, &io, err, errlen);
    free(io.buf);
out:
    close(fd);
    return rc;
}

static int write_llmc(const char *path, const weights *w, int bf16, char *err, size_t errlen)
{
    const ppdl_model *m = &w->m;
    if (!m->tie_embeddings)
        return ppdl_errf(err, errlen, "%s: llm.c's model ties the embeddings, this one has its own lm_head.weight "
                         "(tie_embeddings 0): it has no llm.c form", path);
    if (m->ln_eps != 1e-5f)
        return ppdl_errf(err, errlen, "%s: ln_eps %g: llm.c's LayerNorm uses 1e-5", path, (double)m->ln_eps);
    long Vp = (m->vocab_size + 127L) / 128 * 128;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ppdl_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
    int32_t h[LLMC_HEADER] = {LLMC_MAGIC, bf16 ? 5 : 3, m->seq_len, m->vocab_size, m->n_layers, m->n_heads,
                              m->d_model, (int32_t)Vp};
    size_t total, es = bf16 ? 2 : 4;
    llmc_total(m, Vp, &total);
    int rc = 0;
    /* the padded rows of wte are zeros: a file of the full size, sparse where not written */
    if (pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h || ftruncate(fd, (off_t)(LLMC_HEADER * 4 + total * es)))
        rc = ppdl_errf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
    llmc_io io = {tmp, fd, bf16, NULL};
    if (bf16) io.buf = ppdl_xmalloc(biggest_piece(m) * 2 + 2);
    if (!rc) rc = llmc_walk(w, Vp, llmc_write_piece, &io, err, errlen);
    free(io.buf);
    if (!rc && fsync(fd)) rc = ppdl_errf(err, errlen, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) && !rc) rc = ppdl_errf(err, errlen, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path)) rc = ppdl_errf(err, errlen, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

/* ---- the conversion ----------------------------------------------------------------------- */

/* The end-of-text id of the exported config.json (-1: none): --tokenizer's (checked
 * against the model: its vocabulary must fit in vocab_size), else GPT-2's 50256 where
 * vocab_size is GPT-2's 50257. *copy: the tokenizer.json to copy beside it, or NULL. */
static int hf_eot(const options *o, const ppdl_model *m, long *eot, const char **copy, char *err, size_t errlen)
{
    *eot = -1, *copy = NULL;
    if (!o->tokenizer) {
        if (m->vocab_size == 50257) *eot = 50256;
        return 0;
    }
    ppdl_tokenizer *t = ppdl_tokenizer_load(o->tokenizer, err, errlen);
    if (!t) return -1;
    long tv = ppdl_tokenizer_vocab_size(t);
    int rc = 0;
    if (tv > m->vocab_size)
        rc = ppdl_errf(err, errlen, "%s: the tokenizer's vocabulary (%ld tokens) is larger than %s's vocab_size %d",
                       o->tokenizer, tv, o->src, m->vocab_size);
    *eot = ppdl_tokenizer_eot(t);
    if (ppdl_tokenizer_can_encode(t)) *copy = o->tokenizer;
    ppdl_tokenizer_free(t);
    return rc;
}

static int run(const options *o, char *err, size_t errlen)
{
    weights w;
    memset(&w, 0, sizeof w);
    int rc = o->from == FMT_PPDL ? read_ppdl(o->src, &w, err, errlen)
           : o->from == FMT_HF   ? read_hf(o->src, &w, err, errlen)
                                 : read_llmc(o->src, &w, err, errlen);
    long eot = -1;
    const char *tok_json = NULL;
    if (!rc && o->to == FMT_HF) rc = hf_eot(o, &w.m, &eot, &tok_json, err, errlen);
    if (!rc) {
        rc = o->to == FMT_PPDL ? ppdl_model_save(o->dst, &w.m, w.host, err, errlen)
           : o->to == FMT_HF   ? write_hf(o->dst, &w, eot, tok_json, err, errlen)
                               : write_llmc(o->dst, &w, o->bf16, err, errlen);
    }
    if (!rc) {
        const ppdl_model *m = &w.m;
        printf("wrote %s (%s) from %s (%s): gpt vocab_size=%d seq_len=%d d_model=%d n_heads=%d n_layers=%d "
               "tie_embeddings=%d, %zu parameters\n", o->dst, fmt_names[o->to], o->src, fmt_names[o->from],
               m->vocab_size, m->seq_len, m->d_model, m->n_heads, m->n_layers, m->tie_embeddings,
               ppdl_model_param_count(m));
    }
    weights_free(&w);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(NULL, NULL);
    char err[PPDL_ERR_LEN] = "";
    options o;
    int rc = parse(argc, argv, &o, err, sizeof err), status = 0;
    if (rc < 0) {
        fprintf(stderr, "ppdl-convert: %s\n", err);
        status = 2;
    } else if (rc == 0 && run(&o, err, sizeof err)) {
        fprintf(stderr, "ppdl-convert: %s\n", err);
        status = 1;
    }
    MPI_Finalize();
    return status;
}
