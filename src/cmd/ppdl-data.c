/* ppdl-data.c — turn user data into data.h5 (the layout is in data_io.h / docs/formats.md).
 *
 *   ppdl-data text  FILE.txt --seq-len T [--stride S] -o data.h5     byte tokens, vocab 256
 *   ppdl-data text  FILE... --tokenizer tokenizer.json --seq-len T -o data.h5
 *                                                   BPE tokens, documents split by <|endoftext|>
 *   ppdl-data tokens FILE... --seq-len T [--vocab-size V] [--format F] -o data.h5
 *                                                   llm.c / nanoGPT / .npy token files
 *   ppdl-data csv   FILE.csv --label-column K|NAME [--image C,H,W] [--header] -o data.h5
 *   ppdl-data synth --model MODEL.h5 -n N [--family F] [--seed S] -o data.h5
 *
 * text and tokens stream their files through io/token_convert.c (memory bounded, any
 * corpus size); csv and synth build their data in memory and hand it to one writer
 * (ppdl_data_write_classif / ppdl_data_write_tokens). Every output is written whole or
 * not at all. MPI is initialised only so that the library's fatal-error path is safe; a
 * singleton init needs no mpiexec.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "io/data_io.h"
#include "io/model_io.h"
#include "io/token_convert.h"
#include "io/token_corpus.h"
#include "io/tokenizer.h"
#include "nn/model.h"

/* the most int32 tokens `synth` will hold in memory (4 GiB) */
#define MAX_TOKENS (1L << 30)
#define MAX_INPUTS 4096

typedef struct options {
    const char *cmd;               /* text, tokens, csv, synth */
    const char *input, *output;    /* input: the first (text, csv: the only) input file */
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    long seq_len, stride;          /* text, tokens */
    long vocab_size;
    int format, raw_width, compress;
    double val_fraction;
    const char *val_output;        /* tokens */
    const char *tokenizer, *eot;   /* text */
    const char *label_column, *image;
    int header;                    /* csv */
    const char *model, *family;
    long n;
    unsigned long long seed;       /* synth */
} options;

static void print_help(void)
{
    printf("ppdl-data: turn your data into data.h5, the file ppdl trains on.\n"
           "\n"
           "Usage:\n"
           "  ppdl-data text FILE.txt --seq-len T [--stride S] -o data.h5\n"
           "      Language-modelling data for a gpt model: every byte of FILE is a token\n"
           "      (vocab_size 256). Row i holds the T+1 bytes starting at byte i*S; the model\n"
           "      reads the first T and predicts the last T. S (the stride) defaults to T, so\n"
           "      consecutive rows share one byte. T must equal the model's seq_len.\n"
           "\n"
           "  ppdl-data text FILE... --tokenizer tokenizer.json --seq-len T [--stride S] -o data.h5\n"
           "      The files' UTF-8 text through a byte-level BPE tokenizer (Hugging Face's\n"
           "      tokenizer.json: GPT-2's, or one trained with the tokenizers library); each\n"
           "      file is a document, and the end-of-text token goes between documents.\n"
           "      vocab_size is the tokenizer's. Any corpus size: the files are read and\n"
           "      tokenized a block at a time (cut after a newline), the ids kept in a\n"
           "      temporary file beside -o, then cut into rows as above.\n"
           "        --eot-token TOKEN   the token between documents (default <|endoftext|>;\n"
           "                            required with several files if the tokenizer has none)\n"
           "\n"
           "  ppdl-data tokens FILE... --seq-len T [--stride S] [--vocab-size V] -o data.h5\n"
           "      Token ids someone already made (a tokenizer's output), from these formats:\n"
           "        llm.c shards (.bin with a 1024-byte header: magic 20240520 for GPT-2's\n"
           "          uint16 tokens, vocab_size 50257; 20240801 for Llama 3's uint32, 128256)\n"
           "        nanoGPT's train.bin / val.bin (no header; --dtype uint16, the default, or\n"
           "          uint32)\n"
           "        NumPy .npy files holding a 1-D array of integers\n"
           "      The files, in the order given, are one stream of tokens cut into rows as for\n"
           "      text. Every token must lie in [0, V): --vocab-size V is required unless the\n"
           "      files are llm.c shards (then it defaults to their tokenizer's). Any corpus\n"
           "      size: the files are read a block at a time and the rows written a few MiB\n"
           "      at a time (about 30 MiB of memory in all); progress goes to stderr.\n"
           "        --format auto|llmc|raw|npy  how to read the files (auto: by their first\n"
           "                            bytes: .npy magic, llm.c magic, else raw)\n"
           "        --dtype uint16|uint32 the token width of raw files\n"
           "\n"
           "  Options of text and tokens:\n"
           "      --val-fraction F      hold back the last F of the rows (0 < F < 1) as a\n"
           "                            validation set; they come from the end of the\n"
           "                            stream and share no token with the training rows\n"
           "      --val-out FILE.h5     where the validation rows go (default: OUT with\n"
           "                            -val before .h5); alone, it means --val-fraction 0.1\n"
           "      --compress L          gzip level 1-9 for the rows (default 0: none)\n"
           "\n"
           "  ppdl-data csv FILE.csv --label-column K|NAME [--header] [--image C,H,W] -o data.h5\n"
           "      Classification data for an mlp or cnn: one sample per line, numbers separated\n"
           "      by commas (no quotes). The label column holds integer class ids 0, 1, 2, ...;\n"
           "      the other columns, in order, are the sample's features.\n"
           "        --label-column K    column number, counting from 1; -1 is the last column\n"
           "        --label-column NAME a column named in the header line (needs --header)\n"
           "        --header            the first line names the columns\n"
           "        --image C,H,W       store images [N, C, H, W] (for a cnn) instead of\n"
           "                            features [N, D]; D must equal C*H*W, values in\n"
           "                            channel, row, column order\n"
           "      Blank lines and lines starting with '#' are skipped.\n"
           "\n"
           "  ppdl-data synth --model MODEL.h5 -n N [--family mlp|cnn|gpt] [--seed S] -o data.h5\n"
           "      N synthetic samples shaped for MODEL.h5, with a pattern a model can learn:\n"
           "      mlp: Gaussian features, labels from a fixed random linear teacher;\n"
           "      cnn: one random blocky image per class plus noise; gpt: arithmetic\n"
           "      sequences (start and step random per row) modulo vocab_size.\n"
           "      --family, when given, must match the model's. --seed defaults to 1.\n"
           "\n"
           "  --help, --version\n"
           "\n"
           "Examples:\n"
           "  ppdl-data text inputs/tiny.txt --seq-len 64 -o text.h5\n"
           "  ppdl-data tokens fineweb_train_*.bin --seq-len 1024 --val-fraction 0.01 -o fw.h5\n"
           "  ppdl-data tokens train.bin --vocab-size 50304 --seq-len 256 -o owt.h5\n"
           "  ppdl-data tokens inputs/gpl3-tokens.npy --vocab-size 512 --seq-len 64 -o g.h5\n"
           "  ppdl-data csv inputs/tiny.csv --header --label-column label -o tiny.h5\n"
           "  ppdl-data csv digits.csv --label-column 1 --image 1,28,28 -o digits.h5\n"
           "  ppdl-data synth --model mlp.h5 -n 4096 --seed 3 -o synth.h5\n"
           "\n"
           "The data.h5 layout, field by field: docs/formats.md (\"data.h5\") in the source tree, and\n"
           "inputs/README.md; token corpora and sampling: docs/data.md.\n"
           "Every option with its default, and the exit statuses: docs/cli.md.\n");
}

/* ---------------------------------------------------------------------------------- */
/* command line */

/* options each subcommand accepts */
#define VAL_OPTIONS "--val-fraction", "--val-out", "--compress"
static const char *const allowed[][12] = {
    {"text", "--seq-len", "--stride", VAL_OPTIONS, "--output", "--tokenizer", "--eot-token", NULL},
    {"tokens", "--seq-len", "--stride", "--vocab-size", "--format", "--dtype", VAL_OPTIONS, "--output", NULL},
    {"csv", "--label-column", "--image", "--header", "--output", NULL},
    {"synth", "--model", "--family", "-n", "--seed", "--output", NULL},
};

/* the options of a subcommand (NULL-terminated), NULL for an unknown one */
static const char *const *options_of(const char *cmd)
{
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcmp(allowed[i][0], cmd)) return &allowed[i][1];
    return NULL;
}

static int allowed_in(const char *cmd, const char *opt)
{
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        if (strcmp(allowed[i][0], cmd)) continue;
        for (int j = 1; allowed[i][j]; j++)
            if (!strcmp(allowed[i][j], opt)) return 1;
    }
    return 0;
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out, char *err, size_t errlen)
{
    if (ppdl_parse_int(v, lo, hi, out))
        return ppdl_errf(err, errlen, "%s %s: expected an integer in [%ld, %ld]", opt, v, lo, hi);
    return 0;
}

/* --val-out, or OUT with "-val" before its ".h5" */
static int val_path(options *o, char *err, size_t errlen)
{
    static char derived[4096 + 8];
    if (!o->val_output) {
        size_t n = strlen(o->output);
        if (n >= 3 && !strcmp(o->output + n - 3, ".h5")) n -= 3;
        if (n + 8 >= sizeof derived) return ppdl_errf(err, errlen, "-o %s: path too long", o->output);
        snprintf(derived, sizeof derived, "%.*s-val.h5", (int)n, o->output);
        o->val_output = derived;
    }
    if (!*o->val_output) return ppdl_errf(err, errlen, "--val-out needs a file name");
    if (!strcmp(o->val_output, o->output))
        return ppdl_errf(err, errlen, "--val-out %s: the same file as -o; the validation rows need their own",
                         o->val_output);
    return 0;
}

/* 0: run, 1: done (help/version printed), -1: usage error */
static int parse(int argc, char **argv, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    if (argc < 2) return ppdl_errf(err, errlen, "which data? ppdl-data text|tokens|csv|synth ... (see ppdl-data --help)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        print_help();
        return 1;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ppdl-data %s\n", PACKAGE_VERSION);
        return 1;
    }
    o->cmd = argv[1];
    if (strcmp(o->cmd, "text") && strcmp(o->cmd, "tokens") && strcmp(o->cmd, "csv") && strcmp(o->cmd, "synth"))
        return ppdl_errf(err, errlen, "unknown subcommand '%s': expected text, tokens, csv or synth "
                         "(see ppdl-data --help)", o->cmd);
    int tokens = !strcmp(o->cmd, "tokens");
    o->raw_width = 2;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help();
            return 1;
        }
        if (a[0] != '-' || !a[1]) {
            if ((o->input && !tokens && strcmp(o->cmd, "text")) || !strcmp(o->cmd, "synth"))
                return ppdl_errf(err, errlen, "unexpected argument '%s'", a);
            if (o->n_inputs == MAX_INPUTS)
                return ppdl_errf(err, errlen, "more than %d input files: concatenate some", MAX_INPUTS);
            if (!o->input) o->input = a;
            o->inputs[o->n_inputs++] = a;
            continue;
        }
        /* "--opt value" or "--opt=value"; -o is --output */
        char name[64];
        const char *v = NULL, *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n >= sizeof name) return ppdl_errf(err, errlen, "unknown option '%s'", a);
        memcpy(name, a, n);
        name[n] = 0;
        if (!strcmp(name, "-o")) strcpy(name, "--output");
        /* a full name or a unique prefix among this subcommand's options */
        const char *const *mine = options_of(o->cmd);
        int k = ppdl_option_lookup(name, mine, "ppdl-data", err, errlen);
        if (k < 0) {
            int known = 0;
            for (size_t q = 0; q < sizeof allowed / sizeof allowed[0]; q++) known |= allowed_in(allowed[q][0], name);
            if (known || !strstr(err, "ambiguous"))
                return ppdl_errf(err, errlen, known ? "%s is not an option of 'ppdl-data %s' (see ppdl-data --help)"
                                                    : "unknown option '%s' for 'ppdl-data %s' (see ppdl-data --help)",
                                 name, o->cmd);
            return -1; /* ambiguous: the lookup's message names the candidates */
        }
        snprintf(name, sizeof name, "%s", mine[k]);
        if (!strcmp(name, "--header")) {
            if (eq) return ppdl_errf(err, errlen, "--header takes no value");
            o->header = 1;
            continue;
        }
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return ppdl_errf(err, errlen, "%s needs a value", name);
        long x;
        if (!strcmp(name, "--output")) o->output = v;
        else if (!strcmp(name, "--seq-len")) { if (parse_long(name, v, 1, 1 << 20, &o->seq_len, err, errlen)) return -1; }
        else if (!strcmp(name, "--stride")) { if (parse_long(name, v, 1, 1L << 40, &o->stride, err, errlen)) return -1; }
        else if (!strcmp(name, "--vocab-size")) { if (parse_long(name, v, 1, 2147483647L, &o->vocab_size, err, errlen)) return -1; }
        else if (!strcmp(name, "--compress")) { if (parse_long(name, v, 0, 9, &x, err, errlen)) return -1; o->compress = (int)x; }
        else if (!strcmp(name, "--val-out")) o->val_output = v;
        else if (!strcmp(name, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(name, "--eot-token")) o->eot = v;
        else if (!strcmp(name, "--val-fraction")) {
            if (ppdl_parse_float(v, 0, 1, &o->val_fraction) || !(o->val_fraction > 0 && o->val_fraction < 1))
                return ppdl_errf(err, errlen, "--val-fraction %s: expected a fraction of the rows, 0 < F < 1", v);
        }
        else if (!strcmp(name, "--format")) {
            o->format = ppdl_tok_format_parse(v);
            if (o->format < 0 || o->format == PPDL_TOK_BYTES)
                return ppdl_errf(err, errlen, "--format %s: expected auto, llmc, raw or npy", v);
        }
        else if (!strcmp(name, "--dtype")) {
            if (!strcmp(v, "uint16")) o->raw_width = 2;
            else if (!strcmp(v, "uint32")) o->raw_width = 4;
            else return ppdl_errf(err, errlen, "--dtype %s: expected uint16 or uint32 (the width of raw token files)", v);
        }
        else if (!strcmp(name, "--label-column")) o->label_column = v;
        else if (!strcmp(name, "--image")) o->image = v;
        else if (!strcmp(name, "--model")) o->model = v;
        else if (!strcmp(name, "--family")) o->family = v;
        else if (!strcmp(name, "-n")) { if (parse_long(name, v, 1, 100000000L, &o->n, err, errlen)) return -1; }
        else if (!strcmp(name, "--seed")) {
            if (parse_long(name, v, 0, 2147483647L, &x, err, errlen)) return -1;
            o->seed = (unsigned long long)x;
        }
    }
    if (!o->output || !*o->output) return ppdl_errf(err, errlen, "-o FILE is required: where to write the data");
    if (!strcmp(o->cmd, "text") || tokens) {
        if (!o->input)
            return ppdl_errf(err, errlen, tokens ? "ppdl-data tokens: which token files? (ppdl-data tokens FILE... "
                                                   "--seq-len T -o OUT)"
                                                 : "ppdl-data text: which text file? (ppdl-data text FILE --seq-len T -o OUT)");
        if (!o->seq_len) return ppdl_errf(err, errlen, "--seq-len is required: the model's seq_len");
        if (!tokens && !o->tokenizer && o->n_inputs > 1)
            return ppdl_errf(err, errlen, "unexpected argument '%s': ppdl-data text reads one file of bytes (several "
                             "files with --tokenizer)", o->inputs[1]);
        if (o->eot && !o->tokenizer) return ppdl_errf(err, errlen, "--eot-token needs --tokenizer");
        if (!o->stride) o->stride = o->seq_len;
        if (o->val_output && !o->val_fraction) o->val_fraction = 0.1;
        if (o->val_fraction && val_path(o, err, errlen)) return -1;
    } else if (!strcmp(o->cmd, "csv")) {
        if (!o->input) return ppdl_errf(err, errlen, "ppdl-data csv: which CSV file?");
        if (!o->label_column) return ppdl_errf(err, errlen, "--label-column is required (a number from 1, -1 for the last, or a header name)");
    } else {
        if (!o->model) return ppdl_errf(err, errlen, "--model MODEL.h5 is required: the data is shaped for it");
        if (!o->n) return ppdl_errf(err, errlen, "-n N is required: how many samples");
    }
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* text and tokens: files of tokens become rows */

/* text --tokenizer: every file's ids, the end-of-text id between files, as uint32 into
 * the open file `out`; *count the ids written */
#define TEXT_BLOCK (1 << 20)
static int tokenize_files(const options *o, ppdl_tokenizer *t, int32_t eot, FILE *out, long long *count, char *err,
                          size_t errlen)
{
    size_t cap = 2 * TEXT_BLOCK, len = 0;
    char *buf = ppdl_xmalloc(cap);
    ppdl_ids ids = {0};
    uint32_t *u = NULL;
    size_t ucap = 0;
    int rc = 0;
    double t0 = ppdl_now_s(), next = t0 + 2;
    long long done_bytes = 0;
    *count = 0;
    for (int i = 0; i < o->n_inputs && !rc; i++) {
        FILE *f = fopen(o->inputs[i], "rb");
        if (!f) {
            rc = ppdl_errf(err, errlen, "%s: cannot read: %s", o->inputs[i], strerror(errno));
            break;
        }
        ids.n = 0;
        if (i > 0) {
            if (ids.cap == 0) {
                ids.cap = 1024;
                ids.v = ppdl_xmalloc(ids.cap * sizeof *ids.v);
            }
            ids.v[ids.n++] = eot;
        }
        len = 0;
        long long file_off = 0; /* of buf[0] */
        int eof = 0, flags = 0;
        while (!rc && (!eof || len)) {
            if (!eof) {
                if (cap - len < TEXT_BLOCK) {
                    cap *= 2;
                    buf = realloc(buf, cap);
                    PPDL_CHECK(buf, "out of memory for a line of %s", o->inputs[i]);
                }
                size_t r = fread(buf + len, 1, TEXT_BLOCK, f);
                if (r < TEXT_BLOCK) {
                    if (ferror(f)) {
                        rc = ppdl_errf(err, errlen, "%s: cannot read: %s", o->inputs[i], strerror(errno));
                        break;
                    }
                    eof = 1;
                }
                len += r;
            }
            /* encode up to a safe cut (all at the end); none yet: read more first */
            size_t cut = eof ? len : ppdl_tokenizer_cut(t, buf, len);
            if (!cut) continue;
            if (ppdl_tokenizer_encode(t, buf, cut, flags, &ids, err, errlen)) {
                char inner[PPDL_ERR_LEN];
                snprintf(inner, sizeof inner, "%s", err);
                rc = ppdl_errf(err, errlen, "%s: in the block from byte %lld: %s", o->inputs[i], file_off, inner);
                break;
            }
            flags = PPDL_TOKENIZE_CONTINUES;
            memmove(buf, buf + cut, len - cut);
            len -= cut;
            file_off += (long long)cut;
            done_bytes += (long long)cut;
            if (ids.n > ucap) {
                ucap = ids.n * 2;
                u = realloc(u, ucap * sizeof *u);
                PPDL_CHECK(u, "out of memory for token ids");
            }
            for (size_t k = 0; k < ids.n; k++) u[k] = (uint32_t)ids.v[k];
            if (ids.n && fwrite(u, 4, ids.n, out) != ids.n) {
                rc = ppdl_errf(err, errlen, "cannot write the token ids beside %s: %s", o->output, strerror(errno));
                break;
            }
            *count += (long long)ids.n;
            ids.n = 0;
            double now = ppdl_now_s();
            if (now > next) {
                next = now + 2;
                fprintf(stderr, "ppdl-data: tokenizing %s: %.1f MB, %.1f M tokens, %.1f MB/s\n", o->inputs[i],
                        done_bytes / 1e6, *count / 1e6, done_bytes / 1e6 / (now - t0));
            }
        }
        fclose(f);
    }
    free(buf);
    free(ids.v);
    free(u);
    return rc;
}

static int cmd_text_bpe(const options *o, char *err, size_t errlen)
{
    ppdl_tokenizer *t = ppdl_tokenizer_load(o->tokenizer, err, errlen);
    if (!t) return -1;
    int rc = -1;
    char tmp_path[4200] = "";
    FILE *f = NULL;
    int32_t eot = o->eot ? ppdl_tokenizer_find(t, o->eot) : ppdl_tokenizer_eot(t);
    if (!ppdl_tokenizer_can_encode(t)) {
        ppdl_errf(err, errlen, "--tokenizer %s: llm.c's tokenizer file decodes only: give the tokenizer.json",
                  o->tokenizer);
        goto out;
    }
    if (o->eot && eot < 0) {
        ppdl_errf(err, errlen, "--eot-token %s: %s has no such token", o->eot, o->tokenizer);
        goto out;
    }
    if (eot < 0 && o->n_inputs > 1) {
        ppdl_errf(err, errlen, "%s has no <|endoftext|>: name the token between documents with --eot-token TOKEN",
                  o->tokenizer);
        goto out;
    }
    snprintf(tmp_path, sizeof tmp_path, "%s.tokens-XXXXXX", o->output);
    int fd = mkstemp(tmp_path);
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        ppdl_errf(err, errlen, "%s: cannot write a temporary file beside it: %s", tmp_path, strerror(errno));
        tmp_path[0] = 0;
        goto out;
    }
    long long n = 0;
    double t0 = ppdl_now_s();
    if (tokenize_files(o, t, eot, f, &n, err, errlen)) goto out;
    if (fclose(f)) {
        f = NULL;
        ppdl_errf(err, errlen, "%s: cannot write: %s", tmp_path, strerror(errno));
        goto out;
    }
    f = NULL;
    double t1 = ppdl_now_s();
    char name[512], what[600];
    if (o->n_inputs == 1) snprintf(name, sizeof name, "%s", o->input);
    else snprintf(name, sizeof name, "the %d files %s ... %s", o->n_inputs, o->inputs[0], o->inputs[o->n_inputs - 1]);
    snprintf(what, sizeof what, "the vocab_size of --tokenizer %s", o->tokenizer);
    const char *inputs[1] = {tmp_path};
    ppdl_tok_convert_opts c = {
        .inputs = inputs, .n_inputs = 1, .format = PPDL_TOK_RAW, .raw_width = 4,
        .vocab_size = ppdl_tokenizer_vocab_size(t), .vocab_what = what, .unit = "tokens", .name = name,
        .T = o->seq_len, .S = o->stride, .val_fraction = o->val_fraction, .output = o->output,
        .val_output = o->val_output, .compress = o->compress, .progress = 1,
    };
    ppdl_tok_convert_result r;
    if (ppdl_tok_convert(&c, &r, err, errlen)) goto out;
    printf("wrote %s: %ld rows of %ld tokens (seq_len %ld, vocab_size %ld, stride %ld) from %s (%lld tokens, "
           "tokenized in %.1f s by %s)\n", o->output, r.rows, o->seq_len + 1, o->seq_len, r.vocab_size, o->stride,
           name, r.tokens, t1 - t0, o->tokenizer);
    if (r.val_rows)
        printf("wrote %s: %ld validation rows (the last %.3g of the rows; no token shared with %s)\n",
               o->val_output, r.val_rows, o->val_fraction, o->output);
    rc = 0;
out:
    if (f) fclose(f);
    if (tmp_path[0]) unlink(tmp_path);
    ppdl_tokenizer_free(t);
    return rc;
}

static int cmd_tokens(const options *o, char *err, size_t errlen)
{
    int text = !strcmp(o->cmd, "text");
    if (text && o->tokenizer) return cmd_text_bpe(o, err, errlen);
    ppdl_tok_convert_opts c = {
        .inputs = o->inputs, .n_inputs = o->n_inputs,
        .format = text ? PPDL_TOK_BYTES : o->format, .raw_width = o->raw_width,
        .vocab_size = text ? 256 : o->vocab_size, .vocab_what = text ? "bytes" : NULL,
        .unit = text ? "bytes" : NULL, .T = o->seq_len, .S = o->stride,
        .val_fraction = o->val_fraction, .output = o->output, .val_output = o->val_output,
        .compress = o->compress, .progress = 1,
    };
    ppdl_tok_convert_result r;
    if (ppdl_tok_convert(&c, &r, err, errlen)) return -1;
    char from[256];
    if (o->n_inputs == 1) snprintf(from, sizeof from, "%s", o->input);
    else snprintf(from, sizeof from, "%d files", o->n_inputs);
    printf("wrote %s: %ld rows of %ld %stokens (seq_len %ld, vocab_size %ld, stride %ld) from %s (%lld %s)\n",
           o->output, r.rows, o->seq_len + 1, text ? "byte " : "", o->seq_len, r.vocab_size, o->stride, from,
           r.tokens, text ? "bytes" : "tokens");
    if (r.val_rows)
        printf("wrote %s: %ld validation rows (the last %.3g of the rows; no token shared with %s)\n",
               o->val_output, r.val_rows, o->val_fraction, o->output);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* csv: one sample per line */

/* trim spaces (and, for header names, quotes) in place */
static char *trim(char *s, int quotes)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    if (quotes && e - s >= 2 && s[0] == '"' && e[-1] == '"') {
        e[-1] = 0;
        s++;
    }
    return s;
}

/* split line at commas in place; returns the number of fields (at most max) or -1 */
static int split(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return -1;
        fields[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

typedef struct csv_data {
    int ncols, label_col;
    char **names;                  /* [ncols] header names, or NULL */
    long n, cap;
    float *x;                      /* [n, ncols-1] */
    int32_t *y;                    /* [n] */
} csv_data;

/* the column's name for messages: "column 3 ('width')" or "column 3" */
static void col_desc(const csv_data *c, int col, char *buf, size_t len)
{
    if (c->names) snprintf(buf, len, "column %d ('%s')", col + 1, c->names[col]);
    else snprintf(buf, len, "column %d", col + 1);
}

/* resolve --label-column once the column count (and names) are known */
static int resolve_label(const options *o, csv_data *c, char *err, size_t errlen)
{
    long k;
    if (!ppdl_parse_int(o->label_column, -1000000, 1000000, &k)) {
        if (k == 0) return ppdl_errf(err, errlen, "--label-column 0: columns count from 1 (-1 is the last)");
        long idx = k > 0 ? k - 1 : c->ncols + k;
        if (idx < 0 || idx >= c->ncols)
            return ppdl_errf(err, errlen, "--label-column %ld: %s has %d columns", k, o->input, c->ncols);
        c->label_col = (int)idx;
        return 0;
    }
    if (!c->names)
        return ppdl_errf(err, errlen, "--label-column '%s' is a name: add --header so the first line names the columns",
                         o->label_column);
    for (int i = 0; i < c->ncols; i++)
        if (!strcmp(c->names[i], o->label_column)) {
            c->label_col = i;
            return 0;
        }
    char list[256];
    size_t n = 0;
    list[0] = 0;
    for (int i = 0; i < c->ncols && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", c->names[i]);
    return ppdl_errf(err, errlen, "--label-column %s: %s has no such column (its header names: %s)", o->label_column,
                     o->input, list);
}

/* one data line: ncols values; the label an integer >= 0, the rest finite numbers */
static int csv_row(const options *o, csv_data *c, char **fields, long lineno, char *err, size_t errlen)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->x = realloc(c->x, (size_t)c->cap * (size_t)(c->ncols - 1) * sizeof *c->x);
        c->y = realloc(c->y, (size_t)c->cap * sizeof *c->y);
        if (!c->x || !c->y) return ppdl_errf(err, errlen, "%s: out of memory at line %ld", o->input, lineno);
    }
    float *x = c->x + (size_t)c->n * (size_t)(c->ncols - 1);
    for (int j = 0; j < c->ncols; j++) {
        char *s = trim(fields[j], 0), *end, where[128];
        col_desc(c, j, where, sizeof where);
        errno = 0;
        if (j == c->label_col) {
            long v = strtol(s, &end, 10);
            if (!*s || *end || errno || v < 0 || v > 2147483647L)
                return ppdl_errf(err, errlen, "%s:%ld: %s: label '%s' is not a class id (an integer >= 0)", o->input,
                                 lineno, where, s);
            c->y[c->n] = (int32_t)v;
        } else {
            double v = strtod(s, &end);
            if (!*s || *end || !isfinite(v) || fabs(v) > 3.4e38)
                return ppdl_errf(err, errlen, "%s:%ld: %s: '%s' is not a finite number", o->input, lineno, where, s);
            *x++ = (float)v;
        }
    }
    c->n++;
    return 0;
}

static int csv_read(const options *o, csv_data *c, char *err, size_t errlen)
{
    FILE *f = fopen(o->input, "r");
    if (!f) return ppdl_errf(err, errlen, "%s: cannot read: %s", o->input, strerror(errno));
    char *line = NULL, **fields = NULL;
    size_t cap = 0;
    long lineno = 0, first_line = 0;
    int rc = 0, max_fields = 1 << 20;
    fields = ppdl_xmalloc((size_t)max_fields * sizeof *fields);
    while (!rc && getline(&line, &cap, f) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char *s = trim(line, 0);
        if (!*s || *s == '#') continue;
        int nf = split(s, fields, max_fields);
        if (nf < 0) {
            rc = ppdl_errf(err, errlen, "%s:%ld: more than %d columns", o->input, lineno, max_fields);
            break;
        }
        if (!c->ncols) {
            /* the first line fixes the column count (and names the columns with --header) */
            if (nf < 2) {
                rc = ppdl_errf(err, errlen, "%s:%ld: one column only: need a label and at least one feature "
                               "(values separated by commas)", o->input, lineno);
                break;
            }
            c->ncols = nf;
            first_line = lineno;
            if (o->header) {
                c->names = ppdl_xcalloc((size_t)nf, sizeof *c->names);
                for (int j = 0; j < nf; j++) c->names[j] = strdup(trim(fields[j], 1));
            }
            if ((rc = resolve_label(o, c, err, errlen))) break;
            if (o->header) continue;
        }
        if (nf != c->ncols) {
            rc = ppdl_errf(err, errlen, "%s:%ld: %d values, but line %ld has %d", o->input, lineno, nf, first_line,
                           c->ncols);
            break;
        }
        rc = csv_row(o, c, fields, lineno, err, errlen);
    }
    if (!rc && ferror(f)) rc = ppdl_errf(err, errlen, "%s: cannot read: %s", o->input, strerror(errno));
    if (!rc && c->n == 0) rc = ppdl_errf(err, errlen, "%s: no data lines", o->input);
    free(line);
    free(fields);
    fclose(f);
    return rc;
}

static int parse_image(const char *s, long shape[3], char *err, size_t errlen)
{
    char buf[128], *f[4];
    snprintf(buf, sizeof buf, "%s", s);
    if (split(buf, f, 4) != 3) return ppdl_errf(err, errlen, "--image %s: expected C,H,W, e.g. --image 1,28,28", s);
    for (int i = 0; i < 3; i++)
        if (ppdl_parse_int(trim(f[i], 0), 1, 1 << 16, &shape[i]))
            return ppdl_errf(err, errlen, "--image %s: expected three positive integers C,H,W", s);
    return 0;
}

static int cmd_csv(const options *o, char *err, size_t errlen)
{
    long shape[3];
    if (o->image && parse_image(o->image, shape, err, errlen)) return -1;
    csv_data c = {0};
    int rc = csv_read(o, &c, err, errlen);
    long D = c.ncols - 1;
    if (!rc && o->image && shape[0] * shape[1] * shape[2] != D)
        rc = ppdl_errf(err, errlen, "--image %s needs %ld values per sample, but %s has %ld feature columns", o->image,
                       shape[0] * shape[1] * shape[2], o->input, D);
    if (!rc) {
        long feat[1] = {D};
        rc = ppdl_data_write_classif(o->output, c.x, c.y, c.n, o->image ? 3 : 1, o->image ? shape : feat, err, errlen);
    }
    if (!rc) {
        int32_t maxy = 0;
        for (long i = 0; i < c.n; i++) maxy = c.y[i] > maxy ? c.y[i] : maxy;
        char what[96];
        if (o->image) snprintf(what, sizeof what, "images [%ld, %ld, %ld, %ld]", c.n, shape[0], shape[1], shape[2]);
        else snprintf(what, sizeof what, "features [%ld, %ld]", c.n, D);
        printf("wrote %s: %ld samples, %s, labels 0..%d (a model needs n_classes >= %d) from %s\n", o->output, c.n,
               what, maxy, maxy + 1, o->input);
    }
    if (c.names)
        for (int j = 0; j < c.ncols; j++) free(c.names[j]);
    free(c.names);
    free(c.x);
    free(c.y);
    return rc;
}

/* ---------------------------------------------------------------------------------- */
/* synth: learnable data shaped for a model */

/* mlp: x ~ N(0, 1) [n, D]; label = argmax_k (W x)_k for a fixed W [K, D] ~ N(0, 1) */
static void synth_mlp(const ppdl_model *m, ppdl_rng *rng, long n, float *x, int32_t *y)
{
    int D = m->in_features, K = m->n_classes;
    float *W = ppdl_xmalloc((size_t)K * D * sizeof *W);
    for (size_t i = 0; i < (size_t)K * D; i++) W[i] = (float)ppdl_rng_normal(rng);
    for (long s = 0; s < n; s++) {
        float *xs = x + (size_t)s * D;
        for (int d = 0; d < D; d++) xs[d] = (float)ppdl_rng_normal(rng);
        double best = -INFINITY;
        for (int k = 0; k < K; k++) {
            double z = 0;
            for (int d = 0; d < D; d++) z += (double)W[(size_t)k * D + d] * xs[d];
            if (z > best) {
                best = z;
                y[s] = k;
            }
        }
    }
    free(W);
}

/* cnn: one template [C, H, W] per class, random on a grid of 4x4-pixel blocks (so
 * convolutions and pooling see shapes), and sample = template[label] + 0.5 N(0, 1) */
static void synth_cnn(const ppdl_model *m, ppdl_rng *rng, long n, float *x, int32_t *y)
{
    int C = m->in_channels, H = m->height, W = m->width, K = m->n_classes;
    size_t per = (size_t)C * H * W;
    int bh = (H + 3) / 4, bw = (W + 3) / 4;
    float *tmpl = ppdl_xmalloc((size_t)K * per * sizeof *tmpl), *blocks = ppdl_xmalloc((size_t)C * bh * bw * sizeof *blocks);
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < C * bh * bw; i++) blocks[i] = (float)ppdl_rng_normal(rng);
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    tmpl[(size_t)k * per + ((size_t)c * H + h) * W + w] = blocks[(c * bh + h / 4) * bw + w / 4];
    }
    for (long s = 0; s < n; s++) {
        int k = (int)(ppdl_rng_u64(rng) % (uint64_t)K);
        y[s] = k;
        for (size_t i = 0; i < per; i++)
            x[(size_t)s * per + i] = tmpl[(size_t)k * per + i] + 0.5f * (float)ppdl_rng_normal(rng);
    }
    free(tmpl);
    free(blocks);
}

/* gpt: row = s, s+k, s+2k, ... (mod V) with random start s and step k in 1..3 */
static void synth_gpt(const ppdl_model *m, ppdl_rng *rng, long n, int32_t *tok)
{
    int T = m->seq_len, V = m->vocab_size;
    for (long r = 0; r < n; r++) {
        uint64_t s = ppdl_rng_u64(rng) % (uint64_t)V, k = 1 + ppdl_rng_u64(rng) % 3;
        for (int t = 0; t <= T; t++) tok[(size_t)r * (T + 1) + t] = (int32_t)((s + k * (uint64_t)t) % (uint64_t)V);
    }
}

static int cmd_synth(const options *o, char *err, size_t errlen)
{
    ppdl_model m;
    if (ppdl_model_load_desc(o->model, &m, err, errlen)) return -1;
    int rc = 0;
    if (o->family && strcmp(o->family, m.family)) {
        rc = ppdl_errf(err, errlen, "--family %s, but %s is a %s model (leave --family out to follow the model)",
                       o->family, o->model, m.family);
        ppdl_model_free(&m);
        return rc;
    }
    ppdl_rng rng;
    ppdl_rng_seed(&rng, o->seed);
    long n = o->n;
    if (!strcmp(m.family, "gpt")) {
        size_t total = (size_t)n * (size_t)(m.seq_len + 1);
        if ((double)total > (double)MAX_TOKENS) {
            ppdl_model_free(&m);
            return ppdl_errf(err, errlen, "-n %ld: %zu tokens would not fit in memory", n, total);
        }
        int32_t *tok = ppdl_xmalloc(total * sizeof *tok);
        synth_gpt(&m, &rng, n, tok);
        rc = ppdl_data_write_tokens(o->output, tok, n, m.seq_len, m.vocab_size, err, errlen);
        if (!rc)
            printf("wrote %s: %ld rows of %d tokens (seq_len %d, vocab_size %d), synthetic (seed %llu) for %s\n",
                   o->output, n, m.seq_len + 1, m.seq_len, m.vocab_size, o->seed, o->model);
        free(tok);
    } else {
        int images = !strcmp(m.family, "cnn");
        long per = images ? (long)m.in_channels * m.height * m.width : m.in_features;
        if ((double)n * (double)per > (double)MAX_TOKENS) {
            ppdl_model_free(&m);
            return ppdl_errf(err, errlen, "-n %ld: %ld samples of %ld values would not fit in memory", n, n, per);
        }
        float *x = ppdl_xmalloc((size_t)n * (size_t)per * sizeof *x);
        int32_t *y = ppdl_xmalloc((size_t)n * sizeof *y);
        if (images) synth_cnn(&m, &rng, n, x, y);
        else synth_mlp(&m, &rng, n, x, y);
        long shape[3] = {images ? m.in_channels : per, m.height, m.width};
        rc = ppdl_data_write_classif(o->output, x, y, n, images ? 3 : 1, shape, err, errlen);
        if (!rc) {
            char what[96];
            if (images) snprintf(what, sizeof what, "images [%ld, %d, %d, %d]", n, m.in_channels, m.height, m.width);
            else snprintf(what, sizeof what, "features [%ld, %ld]", n, per);
            printf("wrote %s: %ld samples, %s, %d classes, synthetic (seed %llu) for %s\n", o->output, n, what,
                   m.n_classes, o->seed, o->model);
        }
        free(x);
        free(y);
    }
    ppdl_model_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(NULL, NULL);
    char err[PPDL_ERR_LEN] = "";
    options o;
    int rc = parse(argc, argv, &o, err, sizeof err), status = 0;
    if (rc < 0) {
        status = 2;
    } else if (rc == 0) {
        if (!strcmp(o.cmd, "text") || !strcmp(o.cmd, "tokens")) rc = cmd_tokens(&o, err, sizeof err);
        else if (!strcmp(o.cmd, "csv")) rc = cmd_csv(&o, err, sizeof err);
        else rc = cmd_synth(&o, err, sizeof err);
        status = rc ? 1 : 0;
    }
    if (status) fprintf(stderr, "ppdl-data: %s\n", err);
    MPI_Finalize();
    return status;
}
