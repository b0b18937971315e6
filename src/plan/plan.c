/* plan.c — plan construction, validation and the plan JSON. */
#include "plan/plan.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <jansson.h>
#include <limits.h>
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
        p->stages[s].n_replicas = 1;
        p->stages[s].ranks = ppdl_xcalloc(1, sizeof(int));
        p->stages[s].ranks[0] = s;
        p->stages[s].first = first;
        p->stages[s].last = first + n - 1;
        p->stages[s].recompute = ppdl_xcalloc((size_t)n, sizeof(int));
        first += n;
    }
    return 0;
}

int ppdl_plan_data_parallel(int L, int N, ppdl_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (N < 1 || L < 1) return ppdl_errf(err, errlen, "--plan dp: needs at least one rank and one layer");
    snprintf(p->method, sizeof p->method, "dp");
    p->feasible = 1;
    p->S = 1;
    p->stages = ppdl_xcalloc(1, sizeof *p->stages);
    ppdl_plan_stage *st = &p->stages[0];
    st->first = 0;
    st->last = L - 1;
    st->n_replicas = N;
    st->ranks = ppdl_xcalloc((size_t)N, sizeof(int));
    for (int r = 0; r < N; r++) st->ranks[r] = r;
    st->rank = 0;
    st->recompute = ppdl_xcalloc((size_t)L, sizeof(int));
    return 0;
}

/* A stage built without replicas (n_replicas 0, ranks NULL) runs on `rank` alone. */
static int n_rep(const ppdl_plan_stage *st) { return st->n_replicas > 0 ? st->n_replicas : 1; }
static int rep_rank(const ppdl_plan_stage *st, int i) { return st->n_replicas > 0 ? st->ranks[i] : st->rank; }

int ppdl_plan_ranks_used(const ppdl_plan *p)
{
    int n = 0;
    for (int s = 0; s < p->S; s++) n += n_rep(&p->stages[s]);
    return n;
}

const char *ppdl_plan_kind(const ppdl_plan *p, char *buf, size_t len)
{
    int S = p->S, k0 = S > 0 ? n_rep(&p->stages[0]) : 0, equal = 1, n_repl = 0;
    for (int s = 0; s < S; s++) {
        equal &= n_rep(&p->stages[s]) == k0;
        n_repl += n_rep(&p->stages[s]) > 1;
    }
    if (S == 0) snprintf(buf, len, "no stages");
    else if (S == 1) snprintf(buf, len, k0 > 1 ? "data parallel x %d" : "one stage", k0);
    else if (k0 == 1 && equal) snprintf(buf, len, "pipeline, %d stages", S);
    else if (equal) snprintf(buf, len, "%d stages x %d replicas", S, k0);
    else {
        /* "3 stages (stage 0 x 2, stage 2 x 3 replicas)" */
        size_t n = (size_t)snprintf(buf, len, "%d stages (", S);
        for (int s = 0, named = 0; s < S && n < len; s++) {
            if (n_rep(&p->stages[s]) == 1) continue;
            named++;
            n += (size_t)snprintf(buf + n, len - n, "%sstage %d x %d%s", named > 1 ? ", " : "", s,
                                  n_rep(&p->stages[s]), named == n_repl ? " replicas)" : "");
        }
    }
    return buf;
}

int ppdl_plan_validate(const ppdl_plan *p, int L, int n_ranks, const int *n_options,
                       const char *what, char *err, size_t errlen)
{
    if (ppdl_plan_ranks_used(p) != n_ranks)
        return ppdl_errf(err, errlen, "%s: the plan has %d stages on %d ranks but the job has %d ranks "
                                      "(every rank runs one stage, or one replica of a stage)",
                         what, p->S, ppdl_plan_ranks_used(p), n_ranks);
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
        for (int i = 0; i < n_rep(st); i++) {
            int r = rep_rank(st, i);
            if (r < 0 || r >= n_ranks)
                return ppdl_errf(err, errlen, "%s: stages[%d] names rank %d, expected 0..%d", what, s,
                                 r, n_ranks - 1);
            for (int t = 0; t <= s; t++)
                for (int j = 0; j < (t == s ? i : n_rep(&p->stages[t])); j++)
                    if (rep_rank(&p->stages[t], j) == r)
                        return ppdl_errf(err, errlen, t == s ? "%s: rank %d is named twice in stage %d%.0d"
                                                             : "%s: rank %d runs both stage %d and stage %d",
                                         what, r, t, s);
        }
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

/* a JSON integer that fits an int: a larger one (rank 2^32) must not wrap into a valid value */
static int json_int(const json_t *v, int *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < INT_MIN || json_integer_value(v) > INT_MAX) return -1;
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_int(json_t *obj, const char *key, int *out, const char *path, int s, char *err, size_t errlen)
{
    if (json_int(json_object_get(obj, key), out))
        return ppdl_errf(err, errlen, "%s: stages[%d].%s: expected an integer (below 2^31)", path, s, key);
    return 0;
}

static int plan_from_json(json_t *root, const char *path, int L, int n_ranks, const int *n_options,
                          ppdl_plan *p, char *err, size_t errlen);

int ppdl_plan_read(const char *path, int L, int n_ranks, const int *n_options, ppdl_plan *p,
                   char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)   /* line -1: the file could not be opened or read */
        return je.line < 0 ? ppdl_errf(err, errlen, "%s: cannot read the plan file: %s", path, je.text)
                           : ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    return plan_from_json(root, path, L, n_ranks, n_options, p, err, errlen);
}

int ppdl_plan_parse(const char *text, const char *what, int L, int n_ranks, const int *n_options,
                    ppdl_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root)
        return ppdl_errf(err, errlen, "%s: line %d: %s", what, je.line, je.text);
    return plan_from_json(root, what, L, n_ranks, n_options, p, err, errlen);
}

/* takes the reference to root */
static int plan_from_json(json_t *root, const char *path, int L, int n_ranks, const int *n_options,
                          ppdl_plan *p, char *err, size_t errlen)
{
    int rc = -1;
    json_t *stages = json_object_get(root, "stages");
    if (!json_is_object(root) || !json_is_array(stages) || json_array_size(stages) == 0) {
        ppdl_errf(err, errlen, "%s: expected an object with a non-empty array \"stages\"", path);
        goto out;
    }
    json_t *m = json_object_get(root, "method");
    snprintf(p->method, sizeof p->method, "%s", json_is_string(m) ? json_string_value(m) : "file");
    json_t *sc = json_object_get(root, "schedule");
    if (sc) {
        int k = json_is_string(sc) ? ppdl_schedule_parse(json_string_value(sc)) : -1;
        if (k < 0 || k >= PPDL_SCHED_N_KINDS) {
            ppdl_errf(err, errlen, "%s: schedule: expected one of \"1f1b\", \"gpipe\", \"zb-h1\", \"zb-h2\", \"zb-1p\" (the "
                      "schedule the plan was solved for), or no \"schedule\" at all", path);
            goto out;
        }
        snprintf(p->schedule, sizeof p->schedule, "%s", ppdl_schedule_name(k));
    }
    p->feasible = 1;
    json_t *pt = json_object_get(root, "predicted_iter_ms"), *bn = json_object_get(root, "bottleneck_ms");
    p->predicted_iter_ms = json_is_number(pt) ? json_number_value(pt) : 0;
    p->bottleneck_ms = json_is_number(bn) ? json_number_value(bn) : 0;
    p->S = (int)json_array_size(stages);
    p->stages = ppdl_xcalloc((size_t)p->S, sizeof *p->stages);
    for (int s = 0; s < p->S; s++) {
        json_t *st = json_array_get(stages, (size_t)s);
        ppdl_plan_stage *ps = &p->stages[s];
        if (!json_is_object(st)) {
            ppdl_errf(err, errlen, "%s: stages[%d]: expected an object", path, s);
            goto out;
        }
        json_t *jranks = json_object_get(st, "ranks");
        if (jranks) {
            if (!json_is_array(jranks) || json_array_size(jranks) == 0 || json_array_size(jranks) > 1000000) {
                ppdl_errf(err, errlen, "%s: stages[%d].ranks: expected a non-empty array of ranks", path, s);
                goto out;
            }
            ps->n_replicas = (int)json_array_size(jranks);
            ps->ranks = ppdl_xcalloc((size_t)ps->n_replicas, sizeof(int));
            for (int i = 0; i < ps->n_replicas; i++) {
                json_t *v = json_array_get(jranks, (size_t)i);
                if (json_int(v, &ps->ranks[i])) {
                    ppdl_errf(err, errlen, "%s: stages[%d].ranks[%d]: expected an integer (below 2^31)", path, s, i);
                    goto out;
                }
            }
            ps->rank = ps->ranks[0];
            json_t *jr = json_object_get(st, "rank");
            if (jr && (!json_is_integer(jr) || json_integer_value(jr) != ps->rank)) {
                ppdl_errf(err, errlen, "%s: stages[%d].rank must equal ranks[0] when both are given", path, s);
                goto out;
            }
        } else {
            if (get_int(st, "rank", &ps->rank, path, s, err, errlen)) goto out;
            ps->n_replicas = 1;
            ps->ranks = ppdl_xcalloc(1, sizeof(int));
            ps->ranks[0] = ps->rank;
        }
        if (get_int(st, "first_layer", &ps->first, path, s, err, errlen) ||
            get_int(st, "last_layer", &ps->last, path, s, err, errlen))
            goto out;
        if (ps->first < 0 || ps->last < ps->first || ps->last - ps->first > 1000000) {
            ppdl_errf(err, errlen, "%s: stages[%d]: first_layer %d .. last_layer %d is not a valid range",
                      path, s, ps->first, ps->last);
            goto out;
        }
        int n = ps->last - ps->first + 1;
        ps->recompute = ppdl_xcalloc((size_t)n, sizeof(int));
        json_t *tm = json_object_get(st, "time_ms"), *mm = json_object_get(st, "mem_bytes");
        ps->time_ms = json_is_number(tm) ? json_number_value(tm) : 0;
        ps->mem_bytes = json_is_number(mm) ? json_number_value(mm) : 0;
        json_t *am = json_object_get(st, "allreduce_ms");
        ps->allreduce_ms = json_is_number(am) ? json_number_value(am) : 0;
        json_t *rc_arr = json_object_get(st, "recompute");
        if (rc_arr) {
            if (!json_is_array(rc_arr) || (int)json_array_size(rc_arr) != n) {
                ppdl_errf(err, errlen, "%s: stages[%d].recompute: expected an array of %d integers "
                                       "(one per layer %d..%d)", path, s, n, ps->first, ps->last);
                goto out;
            }
            for (int i = 0; i < n; i++) {
                json_t *v = json_array_get(rc_arr, (size_t)i);
                if (json_int(v, &ps->recompute[i])) {
                    ppdl_errf(err, errlen, "%s: stages[%d].recompute[%d]: expected an integer (below 2^31)", path,
                              s, i);
                    goto out;
                }
            }
        }
    }
    rc = ppdl_plan_validate(p, L, n_ranks, n_options, path, err, errlen);
out:
    json_decref(root);
    if (rc) ppdl_plan_free(p);
    return rc;
}

void ppdl_plan_set_recompute(ppdl_plan *p, int option, const int *n_options)
{
    for (int s = 0; s < p->S; s++)
        for (int l = p->stages[s].first; l <= p->stages[s].last; l++) {
            int nopt = n_options ? n_options[l] : 2;
            /* a layer without this option keeps everything (e.g. selective on an embedding) */
            p->stages[s].recompute[l - p->stages[s].first] = option < nopt ? option : 0;
        }
}

char *ppdl_plan_to_json(const ppdl_plan *p)
{
    json_t *root = json_object();
    json_object_set_new(root, "method", json_string(p->method));
    if (p->schedule[0]) json_object_set_new(root, "schedule", json_string(p->schedule));
    json_object_set_new(root, "feasible", json_boolean(p->feasible));
    json_object_set_new(root, "predicted_iter_ms", json_real(p->predicted_iter_ms));
    json_object_set_new(root, "bottleneck_ms", json_real(p->bottleneck_ms));
    json_t *arr = json_array();
    for (int s = 0; s < p->S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(st->rank));
        if (st->n_replicas > 1) {
            json_t *rs = json_array();
            for (int i = 0; i < st->n_replicas; i++) json_array_append_new(rs, json_integer(st->ranks[i]));
            json_object_set_new(o, "ranks", rs);
        }
        json_object_set_new(o, "first_layer", json_integer(st->first));
        json_object_set_new(o, "last_layer", json_integer(st->last));
        json_t *rc = json_array();
        for (int l = st->first; l <= st->last; l++) json_array_append_new(rc, json_integer(st->recompute[l - st->first]));
        json_object_set_new(o, "recompute", rc);
        json_object_set_new(o, "time_ms", json_real(st->time_ms));
        json_object_set_new(o, "mem_bytes", json_real(st->mem_bytes));
        if (st->n_replicas > 1) json_object_set_new(o, "allreduce_ms", json_real(st->allreduce_ms));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "stages", arr);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}

int ppdl_plan_write(const char *path, const ppdl_plan *p, char *err, size_t errlen)
{
    char *text = ppdl_plan_to_json(p);
    int rc = ppdl_write_text_file(path, text, "plan", err, errlen);
    free(text);
    return rc;
}

int ppdl_plan_stage_of_rank(const ppdl_plan *p, int rank, int *replica)
{
    for (int s = 0; s < p->S; s++)
        for (int i = 0; i < n_rep(&p->stages[s]); i++)
            if (rep_rank(&p->stages[s], i) == rank) {
                if (replica) *replica = i;
                return s;
            }
    return -1;
}

void ppdl_plan_free(ppdl_plan *p)
{
    if (p->stages)
        for (int s = 0; s < p->S; s++) {
            free(p->stages[s].recompute);
            free(p->stages[s].ranks);
        }
    free(p->stages);
    memset(p, 0, sizeof *p);
}
