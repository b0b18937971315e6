/* plan.c — plan construction, validation and the plan JSON. */
#include "plan/plan.h"
#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ppdl_plan_uniform(int L, int S, ppdl_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (S < 1 || S > L)
        return ppdl_errf(err, errlen, "--plan uniform: %d ranks but the model has %d layers; "
                                      "each stage needs at least one layer", S, L);
    snprintf(p->method, sizeof p->method, "uniform");
    p->feasible = 1;
    p->S = S;
    p->stages = ppdl_xcalloc((size_t)S, sizeof *p->stages);
    int first = 0;
    for (int s = 0; s < S; s++) {
        int n = L / S + (s < L % S ? 1 : 0);
        p->stages[s].rank = s;
        p->stages[s].first = first;
        p->stages[s].last = first + n - 1;
        p->stages[s].recompute = ppdl_xcalloc((size_t)n, sizeof(int));
        first += n;
    }
    return 0;
}

int ppdl_plan_validate(const ppdl_plan *p, int L, int n_ranks, const int *n_options,
                       const char *what, char *err, size_t errlen)
{
    if (p->S != n_ranks)
        return ppdl_errf(err, errlen, "%s: the plan has %d stages but the job has %d ranks "
                                      "(one stage per rank)", what, p->S, n_ranks);
    int next = 0;
    for (int s = 0; s < p->S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        if (st->first != next)
            return ppdl_errf(err, errlen, "%s: stages[%d].first_layer is %d, expected %d "
                                          "(stages must cover the layers in order)", what, s, st->first, next);
        if (st->last < st->first)
            return ppdl_errf(err, errlen, "%s: stages[%d] is empty (last_layer %d < first_layer %d)",
                             what, s, st->last, st->first);
        if (st->last >= L)
            return ppdl_errf(err, errlen, "%s: stages[%d].last_layer is %d but the model has only "
                                          "%d layers (0..%d)", what, s, st->last, L, L - 1);
        if (st->rank < 0 || st->rank >= n_ranks)
            return ppdl_errf(err, errlen, "%s: stages[%d].rank is %d, expected 0..%d", what, s,
                             st->rank, n_ranks - 1);
        for (int t = 0; t < s; t++)
            if (p->stages[t].rank == st->rank)
                return ppdl_errf(err, errlen, "%s: rank %d runs both stage %d and stage %d", what,
                                 st->rank, t, s);
        for (int l = st->first; l <= st->last; l++) {
            int c = st->recompute[l - st->first];
            int nopt = n_options ? n_options[l] : 2;
            if (c < 0 || c >= nopt)
                return ppdl_errf(err, errlen, "%s: stages[%d].recompute option %d for layer %d, "
                                              "expected 0..%d", what, s, c, l, nopt - 1);
        }
        next = st->last + 1;
    }
    if (next != L)
        return ppdl_errf(err, errlen, "%s: the stages cover layers 0..%d but the model has %d "
                                      "layers", what, next - 1, L);
    return 0;
}

static int get_int(json_t *obj, const char *key, int *out, const char *path, int s, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return ppdl_errf(err, errlen, "%s: stages[%d].%s: expected an integer", path, s, key);
    *out = (int)json_integer_value(v);
    return 0;
}

int ppdl_plan_read(const char *path, int L, int n_ranks, const int *n_options, ppdl_plan *p,
                   char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    int rc = -1;
    json_t *stages = json_object_get(root, "stages");
    if (!json_is_object(root) || !json_is_array(stages) || json_array_size(stages) == 0) {
        ppdl_errf(err, errlen, "%s: expected an object with a non-empty array \"stages\"", path);
        goto out;
    }
    json_t *m = json_object_get(root, "method");
    snprintf(p->method, sizeof p->method, "%s", json_is_string(m) ? json_string_value(m) : "file");
    p->feasible = 1;
    p->S = (int)json_array_size(stages);
    p->stages = ppdl_xcalloc((size_t)p->S, sizeof *p->stages);
    for (int s = 0; s < p->S; s++) {
        json_t *st = json_array_get(stages, (size_t)s);
        ppdl_plan_stage *ps = &p->stages[s];
        if (!json_is_object(st)) {
            ppdl_errf(err, errlen, "%s: stages[%d]: expected an object", path, s);
            goto out;
        }
        if (get_int(st, "rank", &ps->rank, path, s, err, errlen) ||
            get_int(st, "first_layer", &ps->first, path, s, err, errlen) ||
            get_int(st, "last_layer", &ps->last, path, s, err, errlen))
            goto out;
        if (ps->first < 0 || ps->last < ps->first || ps->last - ps->first > 1000000) {
            ppdl_errf(err, errlen, "%s: stages[%d]: first_layer %d .. last_layer %d is not a valid range",
                      path, s, ps->first, ps->last);
            goto out;
        }
        int n = ps->last - ps->first + 1;
        ps->recompute = ppdl_xcalloc((size_t)n, sizeof(int));
        json_t *rc_arr = json_object_get(st, "recompute");
        if (rc_arr) {
            if (!json_is_array(rc_arr) || (int)json_array_size(rc_arr) != n) {
                ppdl_errf(err, errlen, "%s: stages[%d].recompute: expected an array of %d integers "
                                       "(one per layer %d..%d)", path, s, n, ps->first, ps->last);
                goto out;
            }
            for (int i = 0; i < n; i++) {
                json_t *v = json_array_get(rc_arr, (size_t)i);
                if (!json_is_integer(v)) {
                    ppdl_errf(err, errlen, "%s: stages[%d].recompute[%d]: expected an integer", path, s, i);
                    goto out;
                }
                ps->recompute[i] = (int)json_integer_value(v);
            }
        }
    }
    rc = ppdl_plan_validate(p, L, n_ranks, n_options, path, err, errlen);
out:
    json_decref(root);
    if (rc) ppdl_plan_free(p);
    return rc;
}

void ppdl_plan_set_recompute(ppdl_plan *p, int opt, const int *n_options)
{
    for (int s = 0; s < p->S; s++)
        for (int l = p->stages[s].first; l <= p->stages[s].last; l++) {
            int nopt = n_options ? n_options[l] : 2;
            /* a layer without this option keeps everything (e.g. selective on an embedding) */
            p->stages[s].recompute[l - p->stages[s].first] = opt < nopt ? opt : 0;
        }
}

char *ppdl_plan_to_json(const ppdl_plan *p)
{
    json_t *root = json_object();
    json_object_set_new(root, "method", json_string(p->method));
    json_object_set_new(root, "feasible", json_boolean(p->feasible));
    json_object_set_new(root, "predicted_iter_ms", json_real(p->predicted_iter_ms));
    json_object_set_new(root, "bottleneck_ms", json_real(p->bottleneck_ms));
    json_t *arr = json_array();
    for (int s = 0; s < p->S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(st->rank));
        json_object_set_new(o, "first_layer", json_integer(st->first));
        json_object_set_new(o, "last_layer", json_integer(st->last));
        json_t *rc = json_array();
        for (int l = st->first; l <= st->last; l++) json_array_append_new(rc, json_integer(st->recompute[l - st->first]));
        json_object_set_new(o, "recompute", rc);
        json_object_set_new(o, "time_ms", json_real(st->time_ms));
        json_object_set_new(o, "mem_bytes", json_real(st->mem_bytes));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "stages", arr);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}

int ppdl_plan_stage_of_rank(const ppdl_plan *p, int rank)
{
    for (int s = 0; s < p->S; s++)
        if (p->stages[s].rank == rank) return s;
    return -1;
}

void ppdl_plan_free(ppdl_plan *p)
{
    if (p->stages)
        for (int s = 0; s < p->S; s++) free(p->stages[s].recompute);
    free(p->stages);
    memset(p, 0, sizeof *p);
}
