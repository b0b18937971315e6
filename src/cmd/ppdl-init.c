/* ppdl-init.c — create a model file: a preset, a few changed hyperparameters, fresh
 * weights.
 *
 *   ppdl-init --preset gpt-tiny --set n_layers=4 --seed 1 -o gpt.h5
 *
 * The story: read the command line, start from the preset, apply each --set in order,
 * build the layer chain (which checks the hyperparameters fit together), initialise every
 * layer's weights from the seed, and write the file (whole, or not at all: the writer
 * goes through FILE.tmp and a rename).
 *
 * MPI is initialised only so that the library's fatal-error path (MPI_Abort) is safe;
 * a singleton init needs no mpiexec.
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "io/model_io.h"
#include "nn/model.h"

#define MAX_SETS 64

typedef struct options {
    const char *preset, *output;
    const char *sets[MAX_SETS];
    int n_sets;
    unsigned long long seed;
} options;

/* "2788 parameters" or "0.14 M parameters" */
static const char *fmt_params(size_t n, char *buf, size_t len)
{
    if (n < 100000) snprintf(buf, len, "%zu parameters", n);
    else snprintf(buf, len, "%.2f M parameters", (double)n / 1e6);
    return buf;
}

/* "vocab_size=256 seq_len=64 ..." for --help */
static void describe(const ppdl_model *m, char *buf, size_t len)
{
    if (!strcmp(m->family, "gpt"))
        snprintf(buf, len, "vocab_size=%d seq_len=%d d_model=%d n_heads=%d n_layers=%d tie_embeddings=%d",
                 m->vocab_size, m->seq_len, m->d_model, m->n_heads, m->n_layers, m->tie_embeddings);
    else if (!strcmp(m->family, "mlp"))
        snprintf(buf, len, "in_features=%d hidden=%d n_layers=%d n_classes=%d activation=%s", m->in_features,
                 m->hidden, m->n_layers, m->n_classes, ppdl_act_name(m->activation));
    else
        snprintf(buf, len, "in_channels=%d height=%d width=%d channels=%d n_blocks=%d hidden=%d n_classes=%d",
                 m->in_channels, m->height, m->width, m->channels, m->n_blocks, m->hidden, m->n_classes);
}

static void print_help(void)
{
    printf("ppdl-init: create a model file (model.h5) with freshly initialised weights.\n"
           "\n"
           "Usage: ppdl-init --preset NAME [--set key=value ...] [--seed S] -o MODEL.h5\n"
           "\n"
           "  --preset NAME       start from one of the presets below\n"
           "  --set key=value     change one hyperparameter of the preset (repeat as needed;\n"
           "                      applied in order, after the preset)\n"
           "  --seed S            seed of the initial weights (default 1): the same preset,\n"
           "                      --set values and seed always give the same file\n"
           "  -o, --output FILE   the model file to write; it is written whole or not at all\n"
           "  --help, --version\n"
           "\n"
           "Presets:\n");
    for (int i = 0; ppdl_presets[i]; i++) {
        ppdl_model m;
        char err[PPDL_ERR_LEN], desc[256], np[64];
        if (ppdl_model_preset(&m, ppdl_presets[i], err, sizeof err) || ppdl_model_build(&m, err, sizeof err))
            continue;
        describe(&m, desc, sizeof desc);
        printf("  %-10s %2d layers, %-20s %s\n", ppdl_presets[i], m.L,
               fmt_params(ppdl_model_param_count(&m), np, sizeof np), desc);
        ppdl_model_free(&m);
    }
    printf("\n"
           "--set keys (the root attributes of model.h5):\n"
           "  gpt  vocab_size, seq_len, d_model, n_heads (must divide d_model),\n"
           "       n_layers (transformer blocks; the chain is embedding + blocks + head), ln_eps,\n"
           "       tie_embeddings (1, the presets' default as in GPT-2: the head's output matrix\n"
           "       lm_head.weight is the embedding's wte, one weight stored once; 0: two weights)\n"
           "  mlp  in_features, hidden, n_layers (linear layers), n_classes,\n"
           "       activation (relu|gelu|none, after every linear layer but the last)\n"
           "  cnn  in_channels, height, width, channels (of the first conv; doubled by each block),\n"
           "       n_blocks (conv 3x3 + maxpool 2 pairs), hidden, n_classes\n"
           "\n"
           "Examples:\n"
           "  ppdl-init --preset gpt-tiny -o gpt-tiny.h5\n"
           "  ppdl-init --preset gpt-small --set n_layers=6 --set seq_len=256 --seed 7 -o gpt-6l.h5\n"
           "  ppdl-init --preset gpt-tiny --set tie_embeddings=0 -o gpt-untied.h5\n"
           "  ppdl-init --preset mlp --set in_features=4 --set n_classes=3 -o iris-mlp.h5\n"
           "\n"
           "Then make data with ppdl-data and train with: mpiexec -n 2 ppdl MODEL.h5 --data DATA.h5\n"
           "The file layout, field by field: docs/formats.md (\"model.h5\") in the source tree.\n"
           "Every option with its default, and the exit statuses: docs/cli.md.\n");
}

/* 0: run, 1: done (help/version printed), -1: usage error (message in err) */
static int parse(int argc, char **argv, options *o, char *err, size_t errlen)
{
    enum { O_PRESET, O_SET, O_SEED, O_OUTPUT, O_HELP, O_VERSION };
    static const char *const names[] = {"--preset", "--set", "--seed", "--output", "--help", "--version", NULL};
    memset(o, 0, sizeof *o);
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int opt;
        if (!strcmp(a, "-h")) opt = O_HELP;
        else if (!strcmp(a, "-o")) opt = O_OUTPUT;
        else if (!strncmp(a, "--", 2)) {
            if ((opt = ppdl_option_lookup(a, names, "ppdl-init", err, errlen)) < 0) return -1;
        } else if (a[0] == '-') {
            return ppdl_errf(err, errlen, "unknown option '%s' (see ppdl-init --help)", a);
        } else {
            return ppdl_errf(err, errlen, "unexpected argument '%s' (the output file goes after -o)", a);
        }
        if (opt == O_HELP) {
            print_help();
            return 1;
        }
        if (opt == O_VERSION) {
            printf("ppdl-init %s\n", PACKAGE_VERSION);
            return 1;
        }
        /* the value: after '=' or the next argument */
        const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL, *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return ppdl_errf(err, errlen, "%s needs a value", names[opt]);
        switch (opt) {
        case O_PRESET: o->preset = v; break;
        case O_SET:
            if (o->n_sets == MAX_SETS) return ppdl_errf(err, errlen, "--set: at most %d of them", MAX_SETS);
            o->sets[o->n_sets++] = v;
            break;
        case O_SEED: {
            long s;
            if (ppdl_parse_int(v, 0, 2147483647L, &s))
                return ppdl_errf(err, errlen, "--seed %s: expected an integer in [0, 2147483647]", v);
            o->seed = (unsigned long long)s;
            break;
        }
        default: o->output = v; break;
        }
    }
    if (!o->preset) return ppdl_errf(err, errlen, "--preset is required (see ppdl-init --help for the list)");
    if (!o->output || !*o->output) return ppdl_errf(err, errlen, "-o FILE is required: where to write the model");
    return 0;
}

/* preset, then every --set, then the chain */
static int make_model(const options *o, ppdl_model *m, char *err, size_t errlen)
{
    if (ppdl_model_preset(m, o->preset, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (presets:");
        for (int i = 0; ppdl_presets[i]; i++) {
            n = strlen(err);
            snprintf(err + n, errlen - n, " %s", ppdl_presets[i]);
        }
        n = strlen(err);
        snprintf(err + n, errlen - n, ")");
        return -1;
    }
    for (int i = 0; i < o->n_sets; i++) {
        char key[64];
        const char *eq = strchr(o->sets[i], '=');
        if (!eq || eq == o->sets[i] || (size_t)(eq - o->sets[i]) >= sizeof key)
            return ppdl_errf(err, errlen, "--set %s: expected key=value, e.g. --set n_layers=4", o->sets[i]);
        memcpy(key, o->sets[i], (size_t)(eq - o->sets[i]));
        key[eq - o->sets[i]] = 0;
        if (ppdl_model_set(m, key, eq + 1, err, errlen)) {
            size_t n = strlen(err);
            if (strstr(err, "not a hyperparameter"))
                snprintf(err + n, errlen - n, " (ppdl-init --help lists the keys of each family)");
            return -1;
        }
    }
    char msg[PPDL_ERR_LEN];
    if (ppdl_model_build(m, msg, sizeof msg))
        return ppdl_errf(err, errlen, "--preset %s%s: %s", o->preset, o->n_sets ? " with the --set values" : "", msg);
    return 0;
}

static int run(const options *o, char *err, size_t errlen)
{
    ppdl_model m;
    if (make_model(o, &m, err, errlen)) return -1;
    size_t n = ppdl_model_param_count(&m);
    /* every --set value can be in range and the model still need terabytes: refuse
     * what this machine's memory cannot hold instead of aborting in malloc */
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (phys > 0 && (double)n * sizeof(float) > phys) {
        char np[64], need[32], have[32];
        ppdl_errf(err, errlen, "--preset %s%s: %s need %s, more than this machine's memory (%s)",
                  o->preset, o->n_sets ? " with the --set values" : "", fmt_params(n, np, sizeof np),
                  ppdl_fmt_bytes(n * sizeof(float), need, sizeof need), ppdl_fmt_bytes((size_t)phys, have, sizeof have));
        ppdl_model_free(&m);
        return -1;
    }
    /* the held layout (nn/model.h): a tied lm_head.weight is wte. It is the last
     * parameter, so the head's initial values for it land past the layout and are not
     * written: room for them is the tied floats more */
    float *host = ppdl_xmalloc((n + ppdl_model_tied_floats(&m) + 1) * sizeof *host), *p = host;
    for (int i = 0; i < m.L; i++) {
        ppdl_layer_init_params(&m, &m.layers[i], o->seed, p);
        p += ppdl_layer_param_count(&m.layers[i]);
    }
    int rc = ppdl_model_save(o->output, &m, host, err, errlen);
    if (!rc) {
        char size[32], np[64];
        printf("wrote %s: %s, %d layers, %s (%s)\n", o->output, m.family, m.L, fmt_params(n, np, sizeof np),
               ppdl_fmt_bytes(n * sizeof(float), size, sizeof size));
    }
    free(host);
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
        fprintf(stderr, "ppdl-init: %s\n", err);
        status = 2;
    } else if (rc == 0 && run(&o, err, sizeof err)) {
        fprintf(stderr, "ppdl-init: %s\n", err);
        status = 1;
    }
    MPI_Finalize();
    return status;
}
