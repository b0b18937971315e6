/* plan.c — plan construction, validation and the plan JSON. */
#include "plan/plan.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ppdl_plan_uniform(int L, int S, ppdl_plan *p, char *err, size_t errlen)
{
    return ppdl_plan_uniform_chunked(L, S, 1, PPDL_CHUNKS_ROUND_ROBIN, p, err, errlen);
}

int ppdl_plan_uniform_chunked(int L, int N, int v, int v_order, ppdl_plan *p, char *err, size_t errlen)
{
    return ppdl_plan_uniform_replicated(L, N, v, v_order, 1, p, err, errlen);
}

int ppdl_plan_uniform_replicated(int L, int N, int v, int v_order, int k, ppdl_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (v < 1) return ppdl_errf(err, errlen, "--plan uniform: %d chunks per rank, expected at least 1", v);
    if (v_order == PPDL_CHUNKS_V && v != 2)
        return ppdl_errf(err, errlen, "--plan uniform: the V order (zb-v) puts 2 chunks on each rank, not %d", v);
    if (v_order != PPDL_CHUNKS_ROUND_ROBIN && v_order != PPDL_CHUNKS_V)
        return ppdl_errf(err, errlen, "--plan uniform: chunk order %d, expected %d (round-robin) or %d (V)", v_order,
                         PPDL_CHUNKS_ROUND_ROBIN, PPDL_CHUNKS_V);
    if (k < 1 || N % k != 0)
        return ppdl_errf(err, errlen, "--replicas %d: expected a divisor of the %d ranks (each copy of the pipeline "
                                      "runs on as many ranks)", k, N);
    int n = N / k; /* ranks of one copy of the pipeline */
    long long S_wanted = (long long)v * n;
    if (N < 1 || S_wanted > L) {
        if (v == 1 && k == 1)
            return ppdl_errf(err, errlen, "--plan uniform: %d ranks but the model has %d layers; "
                                          "each stage needs at least one layer", N, L);
        if (v == 1)
            return ppdl_errf(err, errlen, "--plan uniform: %d ranks in %d replicas make %d stages but the model has "
                                          "%d layers; each stage needs at least one layer", N, k, n, L);
        return ppdl_errf(err, errlen, "--plan uniform: %d ranks x %d chunks per rank = %lld stages but the model "
                                      "has %d layers; each stage needs at least one layer", n, v, S_wanted, L);
    }
    int S = (int)S_wanted;
    snprintf(p->method, sizeof p->method, "uniform");
    p->feasible = 1;
    p->S = S;
    p->stages = ppdl_xcalloc((size_t)S, sizeof *p->stages);
    int first = 0;
    for (int s = 0; s < S; s++) {
        int nl = L / S + (s < L % S ? 1 : 0);
        /* round-robin: 0 1 .. n-1 0 1 ..; the V: 0 1 .. n-1 n-1 .. 1 0; copy q of the
         * pipeline on ranks q*n .. q*n + n-1 */
        int pos = v_order == PPDL_CHUNKS_V && s >= n ? 2 * n - 1 - s : s % n;
        p->stages[s].rank = pos;
        p->stages[s].n_replicas = k;
        p->stages[s].ranks = ppdl_xcalloc((size_t)k, sizeof(int));
        for (int q = 0; q < k; q++) p->stages[s].ranks[q] = q * n + pos;
        p->stages[s].first = first;
        p->stages[s].last = first + nl - 1;
        p->stages[s].recompute = ppdl_xcalloc((size_t)nl, sizeof(int));
        first += nl;
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

/* ---- several stages per rank (chunks) ---- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* v >= 2 when every rank of the plan runs v stages, every stage has the same k
 * replicas, and each rank is the same replica q of every stage it runs (copy q of the
 * pipeline); *k_out gets k. 1 (and k 1) otherwise. */
static int chunks_and_replicas(const ppdl_plan *p, int *k_out)
{
    int S = p->S, k = S > 0 ? n_rep(&p->stages[0]) : 1;
    *k_out = 1;
    if (S < 2) return 1;
    for (int s = 0; s < S; s++)
        if (n_rep(&p->stages[s]) != k) return 1; /* uneven replicas and chunks do not mix */
    /* the stages' ranks sorted: each run of one rank counts the stages it runs */
    int n = S * k;
    int *r = ppdl_xmalloc((size_t)n * sizeof(int));
    for (int s = 0; s < S; s++)
        for (int q = 0; q < k; q++) r[s * k + q] = rep_rank(&p->stages[s], q);
    qsort(r, (size_t)n, sizeof(int), cmp_int);
    int v = 0;
    for (int i = 0, j; i < n && v >= 0; i = j) {
        for (j = i; j < n && r[j] == r[i]; j++) {}
        if (v == 0) v = j - i;
        else if (j - i != v) v = -1;
    }
    free(r);
    if (v < 2) return 1;
    /* each rank the same replica of all its stages */
    for (int s = 0; s < S; s++)
        for (int q = 0; q < k; q++) {
            int rq = -1;
            ppdl_plan_stage_of_rank(p, rep_rank(&p->stages[s], q), &rq);
            if (rq != q) return 1;
        }
    *k_out = k;
    return v;
}

int ppdl_plan_chunks(const ppdl_plan *p)
{
    int k;
    return chunks_and_replicas(p, &k);
}

int ppdl_plan_chunk_replicas(const ppdl_plan *p)
{
    int k;
    chunks_and_replicas(p, &k);
    return k;
}

int ppdl_plan_chunk_order_is(const ppdl_plan *p, int v_order)
{
    int k, v = chunks_and_replicas(p, &k);
    if (v < 2) return 0;
    int N = p->S / v;
    for (int q = 0; q < k; q++) {
        if (v_order == PPDL_CHUNKS_ROUND_ROBIN) {
            for (int s = N; s < p->S; s++)
                if (rep_rank(&p->stages[s], q) != rep_rank(&p->stages[s % N], q)) return 0;
        } else if (v_order == PPDL_CHUNKS_V && v == 2) {
            for (int s = 0; s < N; s++)
                if (rep_rank(&p->stages[2 * N - 1 - s], q) != rep_rank(&p->stages[s], q)) return 0;
        } else
            return 0;
    }
    return 1;
}

int ppdl_plan_stages_of_rank(const ppdl_plan *p, int rank, int *stages, int max)
{
    int n = 0;
    for (int s = 0; s < p->S; s++)
        for (int i = 0; i < n_rep(&p->stages[s]); i++)
            if (rep_rank(&p->stages[s], i) == rank) {
                if (n < max) stages[n] = s;
                n++;
                break;
            }
    return n;
}

int ppdl_plan_ranks_used(const ppdl_plan *p)
{
    int k, v = chunks_and_replicas(p, &k);
    if (v > 1) return p->S / v * k; /* each of the N ranks of each copy runs v stages */
    int n = 0;
    for (int s = 0; s < p->S; s++) n += n_rep(&p->stages[s]);
    return n;
}

const char *ppdl_plan_kind(const ppdl_plan *p, char *buf, size_t len)
{
    int S = p->S, k0 = S > 0 ? n_rep(&p->stages[0]) : 0, equal = 1, n_repl = 0, v = ppdl_plan_chunks(p);
    for (int s = 0; s < S; s++) {
        equal &= n_rep(&p->stages[s]) == k0;
        n_repl += n_rep(&p->stages[s]) > 1;
    }
    if (v > 1) {
        int N = S / v;
        const char *ranks = N == 1 ? "rank" : "ranks";
        size_t n;
        /* with one rank the V and round-robin coincide: "interleaved" */
        if (N > 1 && ppdl_plan_chunk_order_is(p, PPDL_CHUNKS_V))
            n = (size_t)snprintf(buf, len, "V, %d stages on %d %s", S, N, ranks);
        else
            n = (size_t)snprintf(buf, len, "%s, %d stages on %d %s (%d each)",
                                 ppdl_plan_chunk_order_is(p, PPDL_CHUNKS_ROUND_ROBIN) ? "interleaved" : "chunked", S,
                                 N, ranks, v);
        /* copies of that pipeline: "interleaved, 4 stages on 2 ranks (2 each) x 2 replicas" */
        if (k0 > 1 && n < len) snprintf(buf + n, len - n, " x %d replicas", k0);
    } else if (S == 0) snprintf(buf, len, "no stages");
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
    size_t n = strlen(buf);
    if (p->n_vocab > 0 && n < len) /* "pipeline, 4 stages, the head by vocabulary over 4 ranks" */
        snprintf(buf + n, len - n, ", the head by vocabulary over %d ranks", p->n_vocab);
    return buf;
}

/* The stages `rank` runs, in words: "only stage 2", "both stage 0 and stage 2",
 * "3 stages (0, 2 and 4)". */
static const char *stages_in_words(const ppdl_plan *p, int rank, char *buf, size_t len)
{
    int n = ppdl_plan_stages_of_rank(p, rank, NULL, 0);
    int *st = ppdl_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    ppdl_plan_stages_of_rank(p, rank, st, n);
    if (n == 0) snprintf(buf, len, "no stage");
    else if (n == 1) snprintf(buf, len, "only stage %d", st[0]);
    else if (n == 2) snprintf(buf, len, "both stage %d and stage %d", st[0], st[1]);
    else {
        size_t k = (size_t)snprintf(buf, len, "%d stages (", n);
        for (int i = 0; i < n && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, "%d%s", st[i], i == n - 2 ? " and " : i == n - 1 ? ")" : ", ");
    }
    free(st);
    return buf;
}

/* The first rank named in two stages (t < s, in pipeline order), or -1. Quadratic, as
 * the reader's plans are small (a stage per rank or chunk). */
static int first_repeated_rank(const ppdl_plan *p)
{
    for (int s = 1; s < p->S; s++)
        for (int i = 0; i < n_rep(&p->stages[s]); i++)
            for (int t = 0; t < s; t++)
                for (int j = 0; j < n_rep(&p->stages[t]); j++)
                    if (rep_rank(&p->stages[t], j) == rep_rank(&p->stages[s], i)) return rep_rank(&p->stages[s], i);
    return -1;
}

/* Rank r runs several stages but the plan is not chunked: say which rule it breaks. */
static int not_chunked(const ppdl_plan *p, int r, const char *what, char *err, size_t errlen)
{
    char mine[128], theirs[128];
    stages_in_words(p, r, mine, sizeof mine);
    for (int q = 0; q < p->S; q++)
        if (n_rep(&p->stages[q]) != n_rep(&p->stages[0]))
            return ppdl_errf(err, errlen, "%s: rank %d runs %s, and stage %d has %d replicas where stage 0 has %d: a "
                                          "rank may run several stages (chunks) only when every stage has as many "
                                          "replicas", what, r, mine, q, n_rep(&p->stages[q]), n_rep(&p->stages[0]));
    for (int s = 0; s < p->S; s++)
        for (int i = 0; i < n_rep(&p->stages[s]); i++) {
            int ri = rep_rank(&p->stages[s], i), qi = -1;
            int t = ppdl_plan_stage_of_rank(p, ri, &qi);
            if (qi != i)
                return ppdl_errf(err, errlen, "%s: rank %d is replica %d of stage %d but replica %d of stage %d: a "
                                              "rank running several stages is the same replica of each (copy %d of "
                                              "the pipeline)", what, ri, qi, t, i, s, qi);
        }
    int n = ppdl_plan_stages_of_rank(p, r, NULL, 0);
    for (int q = 0; q < p->S; q++) {
        int o = rep_rank(&p->stages[q], 0);
        if (ppdl_plan_stages_of_rank(p, o, NULL, 0) != n)
            return ppdl_errf(err, errlen, "%s: rank %d runs %s but rank %d runs %s: a rank may run several "
                                          "stages (chunks) only when every rank of the plan runs as many",
                             what, r, mine, o, stages_in_words(p, o, theirs, sizeof theirs));
    }
    /* not reached: a plan whose ranks all run n >= 2 stages, each the same replica of
     * all of them, with as many replicas of every stage, is chunked */
    return ppdl_errf(err, errlen, "%s: rank %d runs %s", what, r, mine);
}

/* vocabulary parallelism (plan.h): the stages cover 0..L-2 (next = L-1) one rank each,
 * and the head's rows 0..V-1 are cut in order into one slice per stage, on its rank */
static int check_vocab(const ppdl_plan *p, int next, int L, const char *what, char *err, size_t errlen)
{
    if (p->vocab_layer != L - 1 || next != L - 1)
        return ppdl_errf(err, errlen, "%s: vocab_parallel: the head (layer %d, the last) is cut by vocabulary, so the "
                                      "stages cover layers 0..%d; they cover 0..%d", what, L - 1, L - 2, next - 1);
    if (p->n_vocab != p->S || ppdl_plan_chunks(p) != 1)
        return ppdl_errf(err, errlen, "%s: vocab_parallel: %d slices on a plan of %d stages: expected one slice per "
                                      "stage, one rank per stage", what, p->n_vocab, p->S);
    long row = 0;
    for (int s = 0; s < p->S; s++) {
        const ppdl_vocab_slice *v = &p->vocab[s];
        if (n_rep(&p->stages[s]) != 1)
            return ppdl_errf(err, errlen, "%s: vocab_parallel: stage %d has %d replicas: vocabulary parallelism is "
                                          "planned for one rank per stage", what, s, n_rep(&p->stages[s]));
        if (v->rank != p->stages[s].rank)
            return ppdl_errf(err, errlen, "%s: vocab_parallel.slices[%d].rank is %d: expected stage %d's rank %d", what,
                             s, v->rank, s, p->stages[s].rank);
        if (v->first != row || v->last < v->first - 1)
            return ppdl_errf(err, errlen, "%s: vocab_parallel.slices[%d] is rows %ld..%ld: expected the rows from %ld "
                                          "on, in order (last = first - 1: empty)", what, s, v->first, v->last, row);
        row = v->last + 1;
    }
    if (row != p->vocab_size)
        return ppdl_errf(err, errlen, "%s: vocab_parallel: the slices cover rows 0..%ld of a vocabulary of %ld", what,
                         row - 1, p->vocab_size);
    return 0;
}

int ppdl_plan_validate(const ppdl_plan *p, int L, int n_ranks, const int *n_options,
                       const char *what, char *err, size_t errlen)
{
    int v = ppdl_plan_chunks(p);
    if (v == 1) {
        int r = first_repeated_rank(p);
        if (r >= 0) return not_chunked(p, r, what, err, errlen);
    }
    if (ppdl_plan_ranks_used(p) != n_ranks) {
        if (v == 1)
            return ppdl_errf(err, errlen, "%s: the plan has %d stages on %d ranks but the job has %d ranks "
                                          "(every rank runs one stage, or one replica of a stage)",
                             what, p->S, ppdl_plan_ranks_used(p), n_ranks);
        char words[128];
        int r0 = rep_rank(&p->stages[0], 0), N = ppdl_plan_ranks_used(p);
        return ppdl_errf(err, errlen, "%s: the plan has %d stages on %d %s, %d each (rank %d runs %s), but the job "
                                      "has %d ranks (in a chunked plan every rank runs as many stages)",
                         what, p->S, N, N == 1 ? "rank" : "ranks", v, r0, stages_in_words(p, r0, words, sizeof words),
                         n_ranks);
    }
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
            for (int j = 0; j < i; j++)
                if (rep_rank(st, j) == r)
                    return ppdl_errf(err, errlen, "%s: rank %d is named twice in stage %d", what, r, s);
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
    if (p->n_vocab > 0) return check_vocab(p, next, L, what, err, errlen);
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

/* "chunks" (optional): the stages each rank runs, as the stages say (ppdl_plan_chunks) */
static int check_chunks_field(json_t *root, const ppdl_plan *p, const char *path, char *err, size_t errlen)
{
    json_t *jc = json_object_get(root, "chunks");
    int chunks, v = ppdl_plan_chunks(p);
    if (!jc) return 0;
    if (json_int(jc, &chunks) || chunks < 1)
        return ppdl_errf(err, errlen, "%s: chunks: expected an integer >= 1 (the stages each rank runs), "
                                      "or no \"chunks\" at all", path);
    if (chunks == v) return 0;
    if (v == 1)
        return ppdl_errf(err, errlen, "%s: chunks is %d but every rank runs one stage (or one replica of a "
                                      "stage) in stages[]", path, chunks);
    char words[128];
    int r0 = rep_rank(&p->stages[0], 0);
    return ppdl_errf(err, errlen, "%s: chunks is %d but every rank runs %d stages in stages[] (rank %d runs %s)",
                     path, chunks, v, r0, stages_in_words(p, r0, words, sizeof words));
}

/* stages[s].slice_weights (optional): one finite weight >= 0 per replica, sum > 0 */
static int read_slice_weights(json_t *st, ppdl_plan_stage *ps, const char *path, int s, char *err, size_t errlen)
{
    json_t *jw = json_object_get(st, "slice_weights");
    if (!jw) return 0;
    if (!json_is_array(jw) || (int)json_array_size(jw) != ps->n_replicas)
        return ppdl_errf(err, errlen, "%s: stages[%d].slice_weights: expected an array of %d numbers (one per "
                                      "replica)", path, s, ps->n_replicas);
    ps->slice_weights = ppdl_xcalloc((size_t)ps->n_replicas, sizeof(double));
    double sum = 0;
    for (int q = 0; q < ps->n_replicas; q++) {
        json_t *v = json_array_get(jw, (size_t)q);
        double w = json_is_number(v) ? json_number_value(v) : -1;
        if (!(w >= 0 && isfinite(w)))
            return ppdl_errf(err, errlen, "%s: stages[%d].slice_weights[%d]: expected a finite number >= 0", path,
                             s, q);
        ps->slice_weights[q] = w;
        sum += w;
    }
    if (!(sum > 0)) return ppdl_errf(err, errlen, "%s: stages[%d].slice_weights: the weights sum to 0", path, s);
    return 0;
}

/* "vocab_parallel" (optional): {"layer": L-1, "size": V, "slices": [{"rank", "first",
 * "last"}, ...]}, checked with the stages by ppdl_plan_validate */
static int parse_vocab(json_t *root, const char *path, ppdl_plan *p, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, "vocab_parallel");
    if (!v) return 0;
    json_t *sl = json_object_get(v, "slices"), *sz = json_object_get(v, "size");
    if (!json_is_object(v) || json_int(json_object_get(v, "layer"), &p->vocab_layer) || !json_is_integer(sz) ||
        json_integer_value(sz) < 1 || !json_is_array(sl) || json_array_size(sl) == 0 ||
        json_array_size(sl) > (size_t)p->S)
        return ppdl_errf(err, errlen, "%s: vocab_parallel: expected {\"layer\": L-1, \"size\": V, \"slices\": "
                                      "[{\"rank\": r, \"first\": a, \"last\": b}, ...]} with one slice per stage", path);
    p->vocab_size = (long)json_integer_value(sz);
    p->n_vocab = (int)json_array_size(sl);
    p->vocab = ppdl_xcalloc((size_t)p->n_vocab, sizeof *p->vocab);
    for (int s = 0; s < p->n_vocab; s++) {
        json_t *e = json_array_get(sl, (size_t)s), *a = json_object_get(e, "first"), *b = json_object_get(e, "last");
        if (json_int(json_object_get(e, "rank"), &p->vocab[s].rank) || !json_is_integer(a) || !json_is_integer(b))
            return ppdl_errf(err, errlen, "%s: vocab_parallel.slices[%d]: expected {\"rank\": r, \"first\": a, "
                                          "\"last\": b} (integers)", path, s);
        p->vocab[s].first = (long)json_integer_value(a);
        p->vocab[s].last = (long)json_integer_value(b);
    }
    return 0;
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
            char names[256];
            size_t n = 0;
            for (int i = 0; i < PPDL_SCHED_N_KINDS && n < sizeof names; i++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s\"%s\"", i ? ", " : "", ppdl_schedule_name(i));
            ppdl_errf(err, errlen, "%s: schedule: expected one of %s (the schedule the plan was solved for), "
                      "or no \"schedule\" at all", path, names);
            goto out;
        }
        snprintf(p->schedule, sizeof p->schedule, "%s", ppdl_schedule_name(k));
    }
    p->feasible = 1;
    json_t *pt = json_object_get(root, "predicted_iter_ms"), *bn = json_object_get(root, "bottleneck_ms");
    p->predicted_iter_ms = json_is_number(pt) ? json_number_value(pt) : 0;
    p->bottleneck_ms = json_is_number(bn) ? json_number_value(bn) : 0;
    json_t *lb = json_object_get(root, "lower_bound_ms");
    p->lower_bound_ms = json_is_number(lb) ? json_number_value(lb) : 0;
    json_t *so = json_object_get(root, "shard_optimizer");
    if (so && !json_is_boolean(so)) {
        ppdl_errf(err, errlen, "%s: shard_optimizer: expected true or false", path);
        goto out;
    }
    p->shard_optimizer = so && json_is_true(so);
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
        if (read_slice_weights(st, ps, path, s, err, errlen)) goto out;
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
    if (parse_vocab(root, path, p, err, errlen)) goto out;
    rc = ppdl_plan_validate(p, L, n_ranks, n_options, path, err, errlen);
    if (rc == 0) rc = check_chunks_field(root, p, path, err, errlen);
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

static json_t *number_array(const double *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

char *ppdl_plan_to_json(const ppdl_plan *p)
{
    json_t *root = json_object();
    json_object_set_new(root, "method", json_string(p->method));
    if (p->schedule[0]) json_object_set_new(root, "schedule", json_string(p->schedule));
    json_object_set_new(root, "feasible", json_boolean(p->feasible));
    json_object_set_new(root, "predicted_iter_ms", json_real(p->predicted_iter_ms));
    json_object_set_new(root, "bottleneck_ms", json_real(p->bottleneck_ms));
    if (p->lower_bound_ms > 0) json_object_set_new(root, "lower_bound_ms", json_real(p->lower_bound_ms));
    if (ppdl_plan_chunks(p) > 1) json_object_set_new(root, "chunks", json_integer(ppdl_plan_chunks(p)));
    int replicated = 0;
    for (int s = 0; s < p->S; s++) replicated |= p->stages[s].n_replicas > 1;
    if (replicated) json_object_set_new(root, "shard_optimizer", json_boolean(p->shard_optimizer));
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
        if (st->slice_weights) json_object_set_new(o, "slice_weights", number_array(st->slice_weights, n_rep(st)));
        if (st->opt_bytes) json_object_set_new(o, "optimizer_bytes", number_array(st->opt_bytes, n_rep(st)));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "stages", arr);
    if (p->n_vocab > 0) {
        json_t *v = json_object(), *sl = json_array();
        json_object_set_new(v, "layer", json_integer(p->vocab_layer));
        json_object_set_new(v, "size", json_integer(p->vocab_size));
        for (int s = 0; s < p->n_vocab; s++) {
            json_t *e = json_object();
            json_object_set_new(e, "rank", json_integer(p->vocab[s].rank));
            json_object_set_new(e, "first", json_integer(p->vocab[s].first));
            json_object_set_new(e, "last", json_integer(p->vocab[s].last));
            json_array_append_new(sl, e);
        }
        json_object_set_new(v, "slices", sl);
        json_object_set_new(root, "vocab_parallel", v);
    }
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
            free(p->stages[s].slice_weights);
            free(p->stages[s].opt_bytes);
        }
    free(p->stages);
    free(p->vocab);
    memset(p, 0, sizeof *p);
}
