/* costs.c — COSTS.json: read, validate, write. */
#include "plan/costs.h"
#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES 1125899906842624.0 /* 2^50 */

void ppdl_costs_alloc(ppdl_costs *c, int L)
{
    memset(c, 0, sizeof *c);
    c->L = L;
    c->micro_batch_size = 1;
    c->state_multiplier = 4;
    c->layers = ppdl_xcalloc((size_t)(L > 0 ? L : 1), sizeof *c->layers);
    for (int l = 0; l < L; l++) c->layers[l].n_opts = 1;
}

void ppdl_costs_free(ppdl_costs *c)
{
    free(c->layers);
    memset(c, 0, sizeof *c);
}

int ppdl_costs_has_step_extras(const ppdl_costs *c)
{
    if (c->input_ms != 0 || c->target_ms != 0) return 1;
    for (int l = 0; l < c->L; l++)
        if (c->layers[l].opt_ms != 0) return 1;
    return 0;
}

static int check_ms(double v, const char *what, int l, const char *field, char *err, size_t errlen)
{
    if (!isfinite(v) || v < 0)
        return ppdl_errf(err, errlen, "%s: layers[%d].%s is %g: expected a number of milliseconds >= 0",
                         what, l, field, v);
    return 0;
}

static int check_bytes(double v, const char *what, int l, const char *field, char *err, size_t errlen)
{
    if (!isfinite(v) || v < 0 || v >= MAX_BYTES || floor(v) != v)
        return ppdl_errf(err, errlen, "%s: layers[%d].%s is %.17g: expected a whole number of bytes "
                                      "in [0, 2^50)", what, l, field, v);
    return 0;
}

int ppdl_costs_validate(const ppdl_costs *c, const char *what, char *err, size_t errlen)
{
    if (c->L < 1) return ppdl_errf(err, errlen, "%s: \"layers\" is empty: expected one entry per layer", what);
    if (c->micro_batch_size < 1)
        return ppdl_errf(err, errlen, "%s: micro_batch_size is %d: expected an integer >= 1", what, c->micro_batch_size);
    if (!isfinite(c->state_multiplier) || c->state_multiplier < 0 || c->state_multiplier > 1000)
        return ppdl_errf(err, errlen, "%s: state_multiplier is %g: expected a number in [0, 1000] "
                                      "(4 for values, gradients and AdamW's two moments)", what, c->state_multiplier);
    if (!isfinite(c->input_ms) || c->input_ms < 0)
        return ppdl_errf(err, errlen, "%s: input_ms is %g: expected a number of milliseconds >= 0", what, c->input_ms);
    if (!isfinite(c->target_ms) || c->target_ms < 0)
        return ppdl_errf(err, errlen, "%s: target_ms is %g: expected a number of milliseconds >= 0", what, c->target_ms);
    if (c->tied_bytes != 0) {
        if (!isfinite(c->tied_bytes) || c->tied_bytes < 0 || c->tied_bytes >= MAX_BYTES ||
            floor(c->tied_bytes) != c->tied_bytes)
            return ppdl_errf(err, errlen, "%s: tied[0].bytes is %.17g: expected a whole number of bytes in [0, 2^50)",
                             what, c->tied_bytes);
        if (c->L < 2)
            return ppdl_errf(err, errlen, "%s: tied: the model has one layer, a tie needs two (the first and the last)",
                             what);
        if (c->tied_bytes > c->layers[0].param_bytes || c->tied_bytes > c->layers[c->L - 1].param_bytes)
            return ppdl_errf(err, errlen, "%s: tied[0].bytes is %.17g, more than layer 0's param_bytes (%.17g) or "
                             "layer %d's (%.17g): the tied weight is a parameter of both", what, c->tied_bytes,
                             c->layers[0].param_bytes, c->L - 1, c->layers[c->L - 1].param_bytes);
    }
    for (int l = 0; l < c->L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        if (check_ms(lc->fwd_ms, what, l, "fwd_ms", err, errlen) ||
            check_ms(lc->opt_ms, what, l, "optimizer_ms", err, errlen) ||
            check_ms(lc->bwd_ms, what, l, "bwd_ms", err, errlen) ||
            check_bytes(lc->param_bytes, what, l, "param_bytes", err, errlen) ||
            check_bytes(lc->out_bytes, what, l, "out_bytes", err, errlen))
            return -1;
        if (lc->n_opts < 1 || lc->n_opts > PPDL_MAX_RC_OPTS)
            return ppdl_errf(err, errlen, "%s: layers[%d] has %d recompute options: at most %d are supported",
                             what, l, lc->n_opts - 1, PPDL_MAX_RC_OPTS - 1);
        if (lc->extra_ms[0] != 0)
            return ppdl_errf(err, errlen, "%s: layers[%d]: option 0 (keep everything) must cost no extra time", what, l);
        if (check_ms(lc->bwd_input_ms, what, l, "bwd_input_ms", err, errlen) ||
            check_ms(lc->bwd_weight_ms, what, l, "bwd_weight_ms", err, errlen))
            return -1;
        /* B and W split the backward: both free while it is not is no split at all, and
         * the zero-bubble cost model would see the layer's backward as free (older
         * ppdl profilers wrote such files for the twins of a profiled layer, a GPT's
         * later blocks: the message says how to profile again) */
        if (c->split_given && lc->bwd_ms > 0 && lc->bwd_input_ms == 0 && lc->bwd_weight_ms == 0)
            return ppdl_errf(err, errlen, "%s: layers[%d]: bwd_input_ms and bwd_weight_ms are both 0 but bwd_ms is "
                             "%g: B and W are the backward's two parts (older ppdl profilers left a profiled layer's "
                             "twins so: profile again with --costs-out)", what, l, lc->bwd_ms);
        if (check_bytes(lc->stash_bytes[0], what, l, "stash_bytes", err, errlen) ||
            check_bytes(lc->weight_keep_bytes[0], what, l, "weight_keep_bytes", err, errlen))
            return -1;
        for (int o = 1; o < lc->n_opts; o++) {
            char f[64];
            snprintf(f, sizeof f, "recompute[%d].stash_bytes", o - 1);
            if (check_bytes(lc->stash_bytes[o], what, l, f, err, errlen)) return -1;
            snprintf(f, sizeof f, "recompute[%d].extra_ms", o - 1);
            if (check_ms(lc->extra_ms[o], what, l, f, err, errlen)) return -1;
            snprintf(f, sizeof f, "recompute[%d].weight_extra_ms", o - 1);
            if (check_ms(lc->weight_extra_ms[o], what, l, f, err, errlen)) return -1;
            snprintf(f, sizeof f, "recompute[%d].weight_keep_bytes", o - 1);
            if (check_bytes(lc->weight_keep_bytes[o], what, l, f, err, errlen)) return -1;
        }
        if (lc->weight_extra_ms[0] != 0)
            return ppdl_errf(err, errlen, "%s: layers[%d]: option 0 (keep everything) recomputes nothing before W", what, l);
        /* after stash_bytes: saved_bytes defaults to it, and a bad stash is named as such */
        if (check_bytes(lc->in_bytes, what, l, "in_bytes", err, errlen) ||
            check_bytes(lc->saved_bytes, what, l, "saved_bytes", err, errlen) ||
            check_bytes(lc->work_bytes, what, l, "work_bytes", err, errlen))
            return -1;
    }
    return 0;
}

/* "vocab": {"layer": L-1, "size": V} (costs.h), after the layers are read */
static int parse_vocab(json_t *root, const char *what, ppdl_costs *c, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, "vocab");
    if (!v) return 0;
    json_t *ly = json_object_get(v, "layer"), *sz = json_object_get(v, "size");
    if (!json_is_object(v) || !json_is_integer(ly) || json_integer_value(ly) != c->L - 1)
        return ppdl_errf(err, errlen, "%s: vocab: expected {\"layer\": %d, \"size\": V} (the head, the last layer, "
                         "and its vocabulary's rows)", what, c->L - 1);
    if (!json_is_integer(sz) || json_integer_value(sz) < 1 || json_integer_value(sz) > (1L << 40))
        return ppdl_errf(err, errlen, "%s: vocab.size: expected an integer >= 1 (the vocabulary's rows)", what);
    c->vocab_size = (long)json_integer_value(sz);
    return 0;
}

/* "tied": [{"layers": [0, L-1], "bytes": b}] (costs.h), after the layers are read */
static int parse_tied(json_t *root, const char *what, ppdl_costs *c, char *err, size_t errlen)
{
    json_t *t = json_object_get(root, "tied");
    if (!t) return 0;
    if (!json_is_array(t) || json_array_size(t) > 1)
        return ppdl_errf(err, errlen, "%s: tied: expected an array of at most one {\"layers\": [0, %d], \"bytes\": B}",
                         what, c->L - 1);
    if (json_array_size(t) == 0) return 0;
    json_t *e = json_array_get(t, 0), *ly = json_object_get(e, "layers"), *b = json_object_get(e, "bytes");
    if (!json_is_object(e)) return ppdl_errf(err, errlen, "%s: tied[0]: expected an object", what);
    if (!json_is_array(ly) || json_array_size(ly) != 2 || !json_is_integer(json_array_get(ly, 0)) ||
        !json_is_integer(json_array_get(ly, 1)) || json_integer_value(json_array_get(ly, 0)) != 0 ||
        json_integer_value(json_array_get(ly, 1)) != c->L - 1)
        return ppdl_errf(err, errlen, "%s: tied[0].layers: expected [0, %d] (the first and the last layer: the only "
                         "tie ppdl plans)", what, c->L - 1);
    if (!json_is_number(b))
        return ppdl_errf(err, errlen, "%s: tied[0].bytes: %s", what, b ? "expected a number" : "missing");
    c->tied_bytes = json_number_value(b);
    if (c->tied_bytes == 0) /* a tie of nothing: written as none */
        return ppdl_errf(err, errlen, "%s: tied[0].bytes is 0: expected the tied weight's bytes (> 0)", what);
    return 0;
}

/* a number field of obj, or -1 with a message */
static int get_num(json_t *obj, const char *key, double *out, const char *what, const char *where,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_number(v))
        return ppdl_errf(err, errlen, "%s: %s.%s: %s", what, where, key, v ? "expected a number" : "missing");
    *out = json_number_value(v);
    return 0;
}

/* an optional number field: left as it is when absent */
static int opt_num(json_t *obj, const char *key, double *out, const char *what, const char *where, char *err,
                   size_t errlen)
{
    return json_object_get(obj, key) ? get_num(obj, key, out, what, where, err, errlen) : 0;
}

static int parse_root(json_t *root, const char *what, ppdl_costs *c, char *err, size_t errlen)
{
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_object(root) || !json_is_array(layers) || json_array_size(layers) == 0)
        return ppdl_errf(err, errlen, "%s: expected an object with a non-empty array \"layers\" "
                                      "(COSTS.json, see docs/formats.md)", what);
    if (json_array_size(layers) > 1000000)
        return ppdl_errf(err, errlen, "%s: %zu layers is more than ppdl plans", what, json_array_size(layers));
    ppdl_costs_alloc(c, (int)json_array_size(layers));
    double d = 0;
    json_t *mb = json_object_get(root, "micro_batch_size");
    if (mb) {
        if (!json_is_integer(mb) || json_integer_value(mb) < 1 || json_integer_value(mb) > (1 << 30))
            return ppdl_errf(err, errlen, "%s: micro_batch_size: expected an integer >= 1", what);
        c->micro_batch_size = (int)json_integer_value(mb);
    }
    json_t *prec = json_object_get(root, "precision");
    if (prec) {
        const char *v = json_is_string(prec) ? json_string_value(prec) : "";
        if (strcmp(v, "fp32") && strcmp(v, "bf16"))
            return ppdl_errf(err, errlen, "%s: precision: expected \"fp32\" or \"bf16\"", what);
        c->bf16_messages = !strcmp(v, "bf16");
    }
    if (json_object_get(root, "state_multiplier")) {
        if (get_num(root, "state_multiplier", &d, what, "costs", err, errlen)) return -1;
        c->state_multiplier = d;
    }
    /* optional step costs (docs/formats.md, COSTS.json): absent in older files, 0 then */
    if (json_object_get(root, "input_ms") && get_num(root, "input_ms", &c->input_ms, what, "costs", err, errlen))
        return -1;
    if (json_object_get(root, "target_ms") && get_num(root, "target_ms", &c->target_ms, what, "costs", err, errlen))
        return -1;
    c->buffer_bytes_given = 1;
    c->split_given = 1;
    for (int l = 0; l < c->L; l++) {
        json_t *jl = json_array_get(layers, (size_t)l);
        ppdl_layer_cost *lc = &c->layers[l];
        char where[64];
        snprintf(where, sizeof where, "layers[%d]", l);
        if (!json_is_object(jl)) return ppdl_errf(err, errlen, "%s: %s: expected an object", what, where);
        json_t *name = json_object_get(jl, "name");
        snprintf(lc->name, sizeof lc->name, "%s", json_is_string(name) ? json_string_value(name) : "");
        if (get_num(jl, "fwd_ms", &lc->fwd_ms, what, where, err, errlen) ||
            get_num(jl, "bwd_ms", &lc->bwd_ms, what, where, err, errlen) ||
            get_num(jl, "param_bytes", &lc->param_bytes, what, where, err, errlen) ||
            get_num(jl, "out_bytes", &lc->out_bytes, what, where, err, errlen) ||
            get_num(jl, "stash_bytes", &lc->stash_bytes[0], what, where, err, errlen))
            return -1;
        if (json_object_get(jl, "optimizer_ms") && get_num(jl, "optimizer_ms", &lc->opt_ms, what, where, err, errlen))
            return -1;
        /* the runtime's buffers (plan/reserve.h): absent in older and hand-written
         * files, which get the defaults of costs.h */
        lc->in_bytes = l > 0 ? c->layers[l - 1].out_bytes : 0;
        lc->saved_bytes = lc->stash_bytes[0];
        lc->work_bytes = 0;
        c->buffer_bytes_given &= json_object_get(jl, "in_bytes") && json_object_get(jl, "saved_bytes") &&
                                 json_object_get(jl, "work_bytes");
        if ((json_object_get(jl, "in_bytes") && get_num(jl, "in_bytes", &lc->in_bytes, what, where, err, errlen)) ||
            (json_object_get(jl, "saved_bytes") && get_num(jl, "saved_bytes", &lc->saved_bytes, what, where, err, errlen)) ||
            (json_object_get(jl, "work_bytes") && get_num(jl, "work_bytes", &lc->work_bytes, what, where, err, errlen)))
            return -1;
        /* the backward split: absent in older files, bwd_ms halved then */
        lc->bwd_input_ms = lc->bwd_weight_ms = lc->bwd_ms / 2;
        c->split_given &= json_object_get(jl, "bwd_input_ms") && json_object_get(jl, "bwd_weight_ms");
        if (opt_num(jl, "bwd_input_ms", &lc->bwd_input_ms, what, where, err, errlen) ||
            opt_num(jl, "bwd_weight_ms", &lc->bwd_weight_ms, what, where, err, errlen) ||
            opt_num(jl, "weight_keep_bytes", &lc->weight_keep_bytes[0], what, where, err, errlen))
            return -1;
        json_t *rc = json_object_get(jl, "recompute");
        if (rc && !json_is_array(rc))
            return ppdl_errf(err, errlen, "%s: %s.recompute: expected an array of {stash_bytes, extra_ms}", what, where);
        size_t n = rc ? json_array_size(rc) : 0;
        if (n + 1 > PPDL_MAX_RC_OPTS)
            return ppdl_errf(err, errlen, "%s: %s.recompute has %zu options: at most %d are supported",
                             what, where, n, PPDL_MAX_RC_OPTS - 1);
        lc->n_opts = 1 + (int)n;
        for (size_t k = 0; k < n; k++) {
            json_t *o = json_array_get(rc, k);
            char w2[96];
            snprintf(w2, sizeof w2, "%s.recompute[%zu]", where, k);
            if (!json_is_object(o)) return ppdl_errf(err, errlen, "%s: %s: expected an object", what, w2);
            if (get_num(o, "stash_bytes", &lc->stash_bytes[k + 1], what, w2, err, errlen) ||
                get_num(o, "extra_ms", &lc->extra_ms[k + 1], what, w2, err, errlen))
                return -1;
            lc->weight_extra_ms[k + 1] = lc->extra_ms[k + 1];
            if (opt_num(o, "weight_extra_ms", &lc->weight_extra_ms[k + 1], what, w2, err, errlen) ||
                opt_num(o, "weight_keep_bytes", &lc->weight_keep_bytes[k + 1], what, w2, err, errlen))
                return -1;
        }
    }
    if (parse_tied(root, what, c, err, errlen) || parse_vocab(root, what, c, err, errlen)) return -1;
    return ppdl_costs_validate(c, what, err, errlen);
}

int ppdl_costs_parse(const char *text, const char *what, ppdl_costs *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) return ppdl_errf(err, errlen, "%s: line %d: %s", what, je.line, je.text);
    int rc = parse_root(root, what, c, err, errlen);
    json_decref(root);
    if (rc) ppdl_costs_free(c);
    return rc;
}

int ppdl_costs_read(const char *path, ppdl_costs *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)   /* line -1: the file could not be opened or read */
        return je.line < 0 ? ppdl_errf(err, errlen, "%s: cannot read the costs file: %s", path, je.text)
                           : ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    int rc = parse_root(root, path, c, err, errlen);
    json_decref(root);
    if (rc) ppdl_costs_free(c);
    return rc;
}

/* bytes as JSON integers, so files read as whole numbers everywhere */
static json_t *jbytes(double v) { return json_integer((json_int_t)v); }

char *ppdl_costs_to_json(const ppdl_costs *c)
{
    json_t *root = json_object();
    json_object_set_new(root, "micro_batch_size", json_integer(c->micro_batch_size));
    json_object_set_new(root, "state_multiplier", json_real(c->state_multiplier));
    if (c->bf16_messages) json_object_set_new(root, "precision", json_string("bf16")); /* fp32 files unchanged */
    int extras = ppdl_costs_has_step_extras(c);
    if (extras) { /* files without them stay as they were */
        json_object_set_new(root, "input_ms", json_real(c->input_ms));
        json_object_set_new(root, "target_ms", json_real(c->target_ms));
    }
    json_t *arr = json_array();
    for (int l = 0; l < c->L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(lc->name));
        json_object_set_new(o, "fwd_ms", json_real(lc->fwd_ms));
        json_object_set_new(o, "bwd_ms", json_real(lc->bwd_ms));
        json_object_set_new(o, "param_bytes", jbytes(lc->param_bytes));
        json_object_set_new(o, "out_bytes", jbytes(lc->out_bytes));
        json_object_set_new(o, "stash_bytes", jbytes(lc->stash_bytes[0]));
        json_object_set_new(o, "in_bytes", jbytes(lc->in_bytes));
        json_object_set_new(o, "saved_bytes", jbytes(lc->saved_bytes));
        json_object_set_new(o, "work_bytes", jbytes(lc->work_bytes));
        if (extras) json_object_set_new(o, "optimizer_ms", json_real(lc->opt_ms));
        if (c->split_given) { /* files without the split stay as they were */
            json_object_set_new(o, "bwd_input_ms", json_real(lc->bwd_input_ms));
            json_object_set_new(o, "bwd_weight_ms", json_real(lc->bwd_weight_ms));
            json_object_set_new(o, "weight_keep_bytes", jbytes(lc->weight_keep_bytes[0]));
        }
        json_t *rc = json_array();
        for (int k = 1; k < lc->n_opts; k++) {
            json_t *ro = json_object();
            json_object_set_new(ro, "stash_bytes", jbytes(lc->stash_bytes[k]));
            json_object_set_new(ro, "extra_ms", json_real(lc->extra_ms[k]));
            if (c->split_given) {
                json_object_set_new(ro, "weight_extra_ms", json_real(lc->weight_extra_ms[k]));
                json_object_set_new(ro, "weight_keep_bytes", jbytes(lc->weight_keep_bytes[k]));
            }
            json_array_append_new(rc, ro);
        }
        json_object_set_new(o, "recompute", rc);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "layers", arr);
    if (c->tied_bytes > 0) { /* files without a tie stay as they were */
        json_t *t = json_object(), *ly = json_array();
        json_array_append_new(ly, json_integer(0));
        json_array_append_new(ly, json_integer(c->L - 1));
        json_object_set_new(t, "layers", ly);
        json_object_set_new(t, "bytes", jbytes(c->tied_bytes));
        json_t *arr_t = json_array();
        json_array_append_new(arr_t, t);
        json_object_set_new(root, "tied", arr_t);
    }
    if (c->vocab_size > 0) {
        json_t *v = json_object();
        json_object_set_new(v, "layer", json_integer(c->L - 1));
        json_object_set_new(v, "size", json_integer(c->vocab_size));
        json_object_set_new(root, "vocab", v);
    }
    /* 17 significant digits: the file reads back to the same doubles, so ppdl-plan on
     * a --costs-out file plans exactly what ppdl --plan auto planned in memory */
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    return s;
}

int ppdl_costs_write(const char *path, const ppdl_costs *c, char *err, size_t errlen)
{
    char *text = ppdl_costs_to_json(c);
    if (!text) return ppdl_errf(err, errlen, "%s: cannot format the costs as JSON", path);
    int rc = ppdl_write_text_file(path, text, "costs", err, errlen);
    free(text);
    return rc;
}
