/* test_plan.c — plans where a rank runs several stages (chunks, issue 22):
 *  - ppdl_plan_uniform_chunked cuts L layers into v*N stages of (nearly) equal layer
 *    counts and places them round-robin or in the V, for every (L, N, v) of a grid; each
 *    such plan validates, and the queries (chunks, ranks used, stages of a rank, the
 *    order, the kind in words) say what the builder meant;
 *  - chunked plans go to JSON and back unchanged, with "chunks" written; hand-written
 *    ones load without it;
 *  - every refusal names what is wrong: a rank on more stages than another, replicas in
 *    a chunked plan, more stages than layers, a "chunks" field that disagrees, a chunked
 *    plan for another number of ranks;
 *  - the plans of before chunks (one stage per rank, replicated stages) keep their JSON,
 *    their kind and their answers (no "chunks", v = 1).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "plan/plan.h"
#include "tap.h"

/* the rank the builder must give stage s: written out here from the brief's rule */
static int expected_rank(int s, int N, int v_order)
{
    if (v_order == PPDL_CHUNKS_V) return s < N ? s : 2 * N - 1 - s;
    return s % N;
}

/* one (L, N, v, order) case of the grid; failures recorded with fail() */
static void check_layout(int L, int N, int v, int order)
{
    char err[PPDL_ERR_LEN], kind[128];
    ppdl_plan p;
    int S = v * N;
    if (ppdl_plan_uniform_chunked(L, N, v, order, &p, err, sizeof err)) {
        if (S <= L) fail("L=%d N=%d v=%d order %d refused: %s", L, N, v, order, err);
        return;
    }
    if (S > L) {
        fail("L=%d N=%d v=%d: %d stages of %d layers built", L, N, v, S, L);
        ppdl_plan_free(&p);
        return;
    }
    if (p.S != S) fail("L=%d N=%d v=%d: %d stages, expected %d", L, N, v, p.S, S);
    /* layer counts: contiguous, each >= 1, summing to L, never growing along the pipe
     * and at most one apart (so the first L mod S have one more) */
    int next = 0, lo = L, hi = 0, prev = L;
    for (int s = 0; s < p.S; s++) {
        const ppdl_plan_stage *st = &p.stages[s];
        int n = st->last - st->first + 1;
        if (st->first != next || n < 1 || n > prev)
            fail("L=%d N=%d v=%d: stage %d has layers %d..%d after %d", L, N, v, s, st->first, st->last, next);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        prev = n;
        next = st->last + 1;
        if (st->rank != expected_rank(s, N, order) || st->n_replicas != 1 || st->ranks[0] != st->rank)
            fail("L=%d N=%d v=%d order %d: stage %d on rank %d, expected %d", L, N, v, order, s, st->rank,
                 expected_rank(s, N, order));
    }
    if (next != L || hi - lo > 1) fail("L=%d N=%d v=%d: layers 0..%d, counts %d..%d", L, N, v, next - 1, lo, hi);
    if (ppdl_plan_validate(&p, L, N, NULL, "built", err, sizeof err))
        fail("L=%d N=%d v=%d order %d: %s", L, N, v, order, err);
    if (ppdl_plan_chunks(&p) != v) fail("L=%d N=%d v=%d: chunks %d", L, N, v, ppdl_plan_chunks(&p));
    if (ppdl_plan_ranks_used(&p) != N) fail("L=%d N=%d v=%d: ranks used %d", L, N, v, ppdl_plan_ranks_used(&p));
    for (int r = 0; r < N; r++) {
        int st[16] = {-1}, n = ppdl_plan_stages_of_rank(&p, r, st, 16), k = 0;
        for (int s = 0; s < S; s++)
            if (expected_rank(s, N, order) == r) {
                if (k >= n || st[k] != s) fail("L=%d N=%d v=%d order %d: rank %d's stages wrong at %d", L, N, v, order, r, k);
                k++;
            }
        if (n != v || k != v) fail("L=%d N=%d v=%d: rank %d runs %d stages", L, N, v, r, n);
        if (ppdl_plan_stage_of_rank(&p, r, NULL) != st[0]) fail("L=%d N=%d v=%d: rank %d's first stage", L, N, v, r);
    }
    ppdl_plan_kind(&p, kind, sizeof kind);
    char want[128];
    if (v == 1) snprintf(want, sizeof want, N == 1 ? "one stage" : "pipeline, %d stages", S);
    else if (order == PPDL_CHUNKS_V && N > 1) snprintf(want, sizeof want, "V, %d stages on %d ranks", S, N);
    else snprintf(want, sizeof want, "interleaved, %d stages on %d %s (%d each)", S, N, N == 1 ? "rank" : "ranks", v);
    if (strcmp(kind, want)) fail("L=%d N=%d v=%d order %d: kind \"%s\", expected \"%s\"", L, N, v, order, kind, want);
    if (v > 1 && ppdl_plan_chunk_order_is(&p, order) != 1) fail("L=%d N=%d v=%d: not in order %d", L, N, v, order);
    /* the other order holds only where the two coincide (one rank and v = 2) */
    int other = order == PPDL_CHUNKS_V ? PPDL_CHUNKS_ROUND_ROBIN : PPDL_CHUNKS_V;
    int coincide = N == 1 && v == 2;
    if (v > 1 && ppdl_plan_chunk_order_is(&p, other) != coincide)
        fail("L=%d N=%d v=%d order %d: the other order answers %d", L, N, v, order, !coincide);
    /* v = 1 is today's uniform plan, bit for bit */
    if (v == 1) {
        ppdl_plan u;
        ppdl_plan_uniform(L, N, &u, err, sizeof err);
        char *a = ppdl_plan_to_json(&p), *b = ppdl_plan_to_json(&u);
        if (strcmp(a, b) || strstr(a, "chunks")) fail("L=%d N=%d: v = 1 differs from ppdl_plan_uniform", L, N);
        free(a);
        free(b);
        ppdl_plan_free(&u);
    }
    ppdl_plan_free(&p);
}

static void layouts(void)
{
    for (int L = 1; L <= 13; L++)
        for (int N = 1; N <= 4; N++)
            for (int v = 1; v <= 4; v++) check_layout(L, N, v, PPDL_CHUNKS_ROUND_ROBIN);
    report("uniform chunked, round-robin: L 1..13, N 1..4, v 1..4: layer counts, ranks, queries, kind");
    for (int L = 1; L <= 13; L++)
        for (int N = 1; N <= 4; N++) check_layout(L, N, 2, PPDL_CHUNKS_V);
    report("uniform chunked, V: L 1..13, N 1..4: layer counts, ranks, queries, kind");

    /* two layouts spelled out: 10 layers on 2 ranks, v = 2 -> 3 3 2 2 layers */
    char err[PPDL_ERR_LEN], kind[128];
    ppdl_plan p;
    ppdl_plan_uniform_chunked(10, 2, 2, PPDL_CHUNKS_ROUND_ROBIN, &p, err, sizeof err);
    ok(p.S == 4 && p.stages[0].last == 2 && p.stages[1].last == 5 && p.stages[2].last == 7 && p.stages[3].last == 9 &&
           p.stages[0].rank == 0 && p.stages[1].rank == 1 && p.stages[2].rank == 0 && p.stages[3].rank == 1 &&
           !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "interleaved, 4 stages on 2 ranks (2 each)"),
       "10 layers, 2 ranks, v = 2: layers 0-2 3-5 6-7 8-9 on ranks 0 1 0 1, \"%s\"", kind);
    ppdl_plan_free(&p);
    ppdl_plan_uniform_chunked(10, 2, 2, PPDL_CHUNKS_V, &p, err, sizeof err);
    ok(p.stages[0].rank == 0 && p.stages[1].rank == 1 && p.stages[2].rank == 1 && p.stages[3].rank == 0 &&
           !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "V, 4 stages on 2 ranks"),
       "... in the V: ranks 0 1 1 0, \"%s\"", kind);
    int st[1] = {-1};
    ok(ppdl_plan_stages_of_rank(&p, 1, st, 1) == 2 && st[0] == 1 && ppdl_plan_stages_of_rank(&p, 2, st, 1) == 0,
       "stages_of_rank counts past max (rank 1: 2 stages, first 1) and a rank outside gets 0");
    ppdl_plan_free(&p);
}

static void refusals(void)
{
    char err[PPDL_ERR_LEN];
    ppdl_plan p;
    ok(ppdl_plan_uniform_chunked(3, 2, 2, PPDL_CHUNKS_ROUND_ROBIN, &p, err, sizeof err) == -1 &&
           strstr(err, "2 ranks x 2 chunks per rank = 4 stages") && strstr(err, "3 layers"),
       "more stages than layers: %s", err);
    ok(ppdl_plan_uniform_chunked(2, 3, 1, PPDL_CHUNKS_ROUND_ROBIN, &p, err, sizeof err) == -1 &&
           !strcmp(err, "--plan uniform: 3 ranks but the model has 2 layers; each stage needs at least one layer"),
       "v = 1 keeps ppdl_plan_uniform's message: %s", err);
    ok(ppdl_plan_uniform_chunked(12, 2, 3, PPDL_CHUNKS_V, &p, err, sizeof err) == -1 && strstr(err, "V order") &&
           strstr(err, "not 3"),
       "the V with 3 chunks: %s", err);
    ok(ppdl_plan_uniform_chunked(12, 2, 0, PPDL_CHUNKS_ROUND_ROBIN, &p, err, sizeof err) == -1 &&
           strstr(err, "0 chunks per rank"),
       "0 chunks: %s", err);
    ok(ppdl_plan_uniform_chunked(12, 2, 2, 7, &p, err, sizeof err) == -1 && strstr(err, "chunk order 7"),
       "an unknown order: %s", err);

    /* hand-written plans of a 6-layer model, each with the job's rank count and the words
     * its message must hold */
    struct {
        const char *json, *want, *what;
        int n_ranks;
    } bad[] = {
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 1, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 5}]}",
         "rank 0 runs both stage 0 and stage 2 but rank 1 runs only stage 1", "a rank on 2 stages, another on 1", 2},
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 0}, {\"rank\": 1, \"first_layer\": 1, "
         "\"last_layer\": 1}, {\"rank\": 0, \"first_layer\": 2, \"last_layer\": 2}, {\"rank\": 1, \"first_layer\": 3, "
         "\"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 5}]}",
         "rank 0 runs 3 stages (0, 2 and 4) but rank 1 runs both stage 1 and stage 3", "3 stages against 2", 2},
        {"{\"stages\": [{\"ranks\": [0, 1], \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 0, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 1, \"first_layer\": 4, \"last_layer\": 5}]}",
         "rank 0 runs both stage 0 and stage 1, and stage 1 has 1 replicas where stage 0 has 2",
         "a replicated stage in a chunked plan", 2},
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 1, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 1, \"first_layer\": 4, \"last_layer\": 4}, {\"ranks\": [2, 3], \"first_layer\": 5, "
         "\"last_layer\": 5}]}",
         "rank 1 runs both stage 1 and stage 2, and stage 3 has 2 replicas", "replicas elsewhere in the plan", 4},
        {"{\"stages\": [{\"ranks\": [0, 2], \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 1, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 4}, {\"rank\": 1, \"first_layer\": 5, "
         "\"last_layer\": 5}]}",
         "rank 0 runs both stage 0 and stage 2, and stage 1 has 1 replicas where stage 0 has 2",
         "a replica beside ranks that each run 2 stages (first replicas 0 1 0 1)", 3},
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 2}, {\"rank\": 0, \"first_layer\": 3, "
         "\"last_layer\": 5}]}",
         "2 stages on 1 rank, 2 each (rank 0 runs both stage 0 and stage 1), but the job has 2 ranks",
         "a chunked plan that leaves a rank idle", 2},
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 1, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 4}, {\"rank\": 1, \"first_layer\": 5, "
         "\"last_layer\": 5}]}",
         "4 stages on 2 ranks, 2 each (rank 0 runs both stage 0 and stage 2), but the job has 3 ranks",
         "a chunked plan for 2 ranks on 3", 3},
        {"{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 5, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 4}, {\"rank\": 5, \"first_layer\": 5, "
         "\"last_layer\": 5}]}",
         "stages[1] names rank 5, expected 0..1", "a chunked plan naming a rank beyond the job", 2},
        {"{\"chunks\": 3, \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 1, \"first_layer\": 2, "
         "\"last_layer\": 3}, {\"rank\": 1, \"first_layer\": 4, \"last_layer\": 4}, {\"rank\": 0, \"first_layer\": 5, "
         "\"last_layer\": 5}]}",
         "chunks is 3 but every rank runs 2 stages in stages[] (rank 0 runs both stage 0 and stage 3)",
         "\"chunks\" larger than the stages say", 2},
        {"{\"chunks\": 2, \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 2}, {\"rank\": 1, \"first_layer\": 3, "
         "\"last_layer\": 5}]}",
         "chunks is 2 but every rank runs one stage", "\"chunks\" on a plan of one stage per rank", 2},
        {"{\"chunks\": 0, \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 5}]}",
         "chunks: expected an integer >= 1", "\"chunks\": 0", 1},
        {"{\"chunks\": \"2\", \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 5}]}",
         "chunks: expected an integer >= 1", "\"chunks\" a string", 1},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        int rc = ppdl_plan_parse(bad[k].json, "p.json", 6, bad[k].n_ranks, NULL, &p, err, sizeof err);
        ok(rc == -1 && strstr(err, bad[k].want) && !strncmp(err, "p.json: ", 8), "refused, %s: %s", bad[k].what, err);
        if (rc == 0) ppdl_plan_free(&p);
    }
}

/* chunked plans to JSON and back: the same JSON, "chunks" written, the same plan read */
static void round_trips(void)
{
    char err[PPDL_ERR_LEN];
    static const int cases[][4] = {{8, 2, 2, PPDL_CHUNKS_ROUND_ROBIN}, {8, 2, 2, PPDL_CHUNKS_V},
                                   {13, 3, 4, PPDL_CHUNKS_ROUND_ROBIN}, {9, 4, 2, PPDL_CHUNKS_V},
                                   {5, 1, 3, PPDL_CHUNKS_ROUND_ROBIN}, {24, 4, 3, PPDL_CHUNKS_ROUND_ROBIN}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int L = cases[k][0], N = cases[k][1], v = cases[k][2], order = cases[k][3];
        ppdl_plan a, b;
        ppdl_plan_uniform_chunked(L, N, v, order, &a, err, sizeof err);
        ppdl_plan_set_recompute(&a, 1, NULL);
        for (int s = 0; s < a.S; s++) a.stages[s].time_ms = 0.25 * (s + 1);
        snprintf(a.schedule, sizeof a.schedule, "1f1b");
        char *ja = ppdl_plan_to_json(&a), want[32];
        snprintf(want, sizeof want, "\"chunks\": %d,", v);
        if (!strstr(ja, want)) fail("L=%d N=%d v=%d: no %s in the JSON", L, N, v, want);
        if (ppdl_plan_parse(ja, "round trip", L, N, NULL, &b, err, sizeof err)) {
            fail("L=%d N=%d v=%d: %s", L, N, v, err);
            free(ja);
            ppdl_plan_free(&a);
            continue;
        }
        char *jb = ppdl_plan_to_json(&b);
        if (strcmp(ja, jb)) fail("L=%d N=%d v=%d: the JSON read back differs", L, N, v);
        int same = b.S == a.S && ppdl_plan_chunks(&b) == v && ppdl_plan_chunk_order_is(&b, order);
        for (int s = 0; same && s < a.S; s++)
            same = a.stages[s].rank == b.stages[s].rank && a.stages[s].first == b.stages[s].first &&
                   a.stages[s].last == b.stages[s].last && b.stages[s].recompute[0] == 1 &&
                   b.stages[s].time_ms == a.stages[s].time_ms;
        if (!same) fail("L=%d N=%d v=%d: the plan read back differs", L, N, v);
        free(ja);
        free(jb);
        ppdl_plan_free(&a);
        ppdl_plan_free(&b);
    }
    report("chunked plans (round-robin and V, v 2..4, N 1..4) to JSON and back: the same JSON and plan, "
           "\"chunks\" written");

    /* a hand-written chunked plan: "chunks" optional, and a V in any rank numbering */
    const char *hand = "{\"stages\": [{\"rank\": 1, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 0, "
                       "\"first_layer\": 2, \"last_layer\": 3}, {\"rank\": 0, \"first_layer\": 4, \"last_layer\": 4}, "
                       "{\"rank\": 1, \"first_layer\": 5, \"last_layer\": 5}]}";
    ppdl_plan p;
    char kind[128];
    int rc = ppdl_plan_parse(hand, "hand.json", 6, 2, NULL, &p, err, sizeof err);
    int st[4];
    ok(rc == 0 && ppdl_plan_chunks(&p) == 2 && ppdl_plan_ranks_used(&p) == 2 &&
           !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "V, 4 stages on 2 ranks") &&
           ppdl_plan_stages_of_rank(&p, 1, st, 4) == 2 && st[0] == 0 && st[1] == 3 &&
           ppdl_plan_stage_of_rank(&p, 0, NULL) == 1,
       "a chunked plan without \"chunks\" loads (ranks 1 0 0 1: \"%s\")", rc ? err : kind);
    if (rc == 0) ppdl_plan_free(&p);
    /* ranks 0 0 1 1: chunked but neither order */
    const char *odd = "{\"chunks\": 2, \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 1}, {\"rank\": 0, "
                      "\"first_layer\": 2, \"last_layer\": 3}, {\"rank\": 1, \"first_layer\": 4, \"last_layer\": 4}, "
                      "{\"rank\": 1, \"first_layer\": 5, \"last_layer\": 5}]}";
    rc = ppdl_plan_parse(odd, "odd.json", 6, 2, NULL, &p, err, sizeof err);
    ok(rc == 0 && !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "chunked, 4 stages on 2 ranks (2 each)") &&
           !ppdl_plan_chunk_order_is(&p, PPDL_CHUNKS_V) && !ppdl_plan_chunk_order_is(&p, PPDL_CHUNKS_ROUND_ROBIN),
       "ranks 0 0 1 1 with \"chunks\": 2 load, in neither order: \"%s\"", rc ? err : kind);
    if (rc == 0) ppdl_plan_free(&p);
}

/* the plans of before: no "chunks" in their JSON, v = 1, ranks used the replicas' sum */
static void plans_of_before(void)
{
    char err[PPDL_ERR_LEN], kind[128];
    ppdl_plan p;
    ppdl_plan_uniform(7, 3, &p, err, sizeof err);
    char *j = ppdl_plan_to_json(&p);
    ok(!strstr(j, "chunks") && ppdl_plan_chunks(&p) == 1 && ppdl_plan_ranks_used(&p) == 3 &&
           !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "pipeline, 3 stages"),
       "a uniform plan: no \"chunks\", v = 1, 3 ranks, \"%s\"", kind);
    free(j);
    ppdl_plan_free(&p);
    ppdl_plan_data_parallel(5, 4, &p, err, sizeof err);
    j = ppdl_plan_to_json(&p);
    int st[4];
    ok(!strstr(j, "chunks") && ppdl_plan_chunks(&p) == 1 && ppdl_plan_ranks_used(&p) == 4 &&
           ppdl_plan_stages_of_rank(&p, 3, st, 4) == 1 && st[0] == 0 && ppdl_plan_validate(&p, 5, 4, NULL, "dp", err, sizeof err) == 0,
       "data parallel x 4: no \"chunks\", v = 1, 4 ranks, rank 3 runs stage 0");
    free(j);
    ppdl_plan_free(&p);
    /* stages 0 x 2, 1, 2: 4 ranks, "chunks": 1 accepted */
    const char *rep = "{\"chunks\": 1, \"stages\": [{\"ranks\": [0, 3], \"first_layer\": 0, \"last_layer\": 1}, "
                      "{\"rank\": 1, \"first_layer\": 2, \"last_layer\": 3}, {\"rank\": 2, \"first_layer\": 4, "
                      "\"last_layer\": 5}]}";
    int rc = ppdl_plan_parse(rep, "rep.json", 6, 4, NULL, &p, err, sizeof err);
    ok(rc == 0 && ppdl_plan_ranks_used(&p) == 4 && ppdl_plan_chunks(&p) == 1 &&
           !strcmp(ppdl_plan_kind(&p, kind, sizeof kind), "3 stages (stage 0 x 2 replicas)") &&
           ppdl_plan_stages_of_rank(&p, 3, st, 4) == 1 && st[0] == 0,
       "a replicated plan reads as before, \"chunks\": 1 accepted: \"%s\"", rc ? err : kind);
    if (rc == 0) {
        j = ppdl_plan_to_json(&p);
        ok(!strstr(j, "chunks"), "... and is written without \"chunks\"");
        free(j);
        ppdl_plan_free(&p);
    } else
        ok(0, "... and is written without \"chunks\"");
    /* a rank twice in one stage keeps its message */
    rc = ppdl_plan_parse("{\"stages\": [{\"ranks\": [0, 0], \"first_layer\": 0, \"last_layer\": 5}]}", "dup.json", 6, 2,
                         NULL, &p, err, sizeof err);
    ok(rc == -1 && !strcmp(err, "dup.json: rank 0 is named twice in stage 0"), "a replica named twice: %s", err);
    rc = ppdl_plan_parse("{\"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 2}, {\"ranks\": [1, 1], "
                         "\"first_layer\": 3, \"last_layer\": 5}]}",
                         "dup.json", 6, 3, NULL, &p, err, sizeof err);
    ok(rc == -1 && !strcmp(err, "dup.json: rank 1 is named twice in stage 1"),
       "... in stage 1 (the message of before said \"stage 11\"): %s", err);
    /* a plan for 3 ranks on 2 keeps its message */
    ppdl_plan_uniform(6, 3, &p, err, sizeof err);
    ok(ppdl_plan_validate(&p, 6, 2, NULL, "plan", err, sizeof err) == -1 &&
           !strcmp(err, "plan: the plan has 3 stages on 3 ranks but the job has 2 ranks (every rank runs one stage, "
                        "or one replica of a stage)"),
       "3 stages on 2 ranks: %s", err);
    ppdl_plan_free(&p);
    rc = ppdl_plan_parse("{\"schedule\": \"zigzag\", \"stages\": [{\"rank\": 0, \"first_layer\": 0, \"last_layer\": 5}]}",
                         "s.json", 6, 1, NULL, &p, err, sizeof err);
    ok(rc == -1 && strstr(err, "s.json: schedule: expected one of \"gpipe\", \"1f1b\", \"zb-h1\""),
       "an unknown schedule lists the known ones: %s", err);
}

/* k copies of a chunked pipeline (issue 22): each stage replicated k times, each rank
 * the same replica of all its stages */
static void replicated_chunks(void)
{
    char err[PPDL_ERR_LEN], kind[128];
    ppdl_plan a, b;
    /* 12 layers, 4 ranks as 2 copies of an interleaved pipeline of 2 ranks, v = 2 */
    int rc = ppdl_plan_uniform_replicated(12, 4, 2, PPDL_CHUNKS_ROUND_ROBIN, 2, &a, err, sizeof err);
    int st[4];
    ok(rc == 0 && a.S == 4 && ppdl_plan_chunks(&a) == 2 && ppdl_plan_chunk_replicas(&a) == 2 &&
           ppdl_plan_ranks_used(&a) == 4 && ppdl_plan_chunk_order_is(&a, PPDL_CHUNKS_ROUND_ROBIN) &&
           !strcmp(ppdl_plan_kind(&a, kind, sizeof kind), "interleaved, 4 stages on 2 ranks (2 each) x 2 replicas") &&
           a.stages[2].ranks[0] == 0 && a.stages[2].ranks[1] == 2 && a.stages[3].ranks[1] == 3 &&
           ppdl_plan_stages_of_rank(&a, 3, st, 4) == 2 && st[0] == 1 && st[1] == 3 &&
           ppdl_plan_validate(&a, 12, 4, NULL, "u", err, sizeof err) == 0,
       "uniform, 2 copies of interleaved on 2 ranks: ranks 0 1 0 1 / 2 3 2 3, \"%s\"", rc ? err : kind);
    char *ja = ppdl_plan_to_json(&a);
    rc = ppdl_plan_parse(ja, "rt.json", 12, 4, NULL, &b, err, sizeof err);
    char *jb = rc ? NULL : ppdl_plan_to_json(&b);
    ok(rc == 0 && !strcmp(ja, jb) && strstr(ja, "\"chunks\": 2,") && ppdl_plan_chunk_replicas(&b) == 2,
       "... to JSON and back: the same JSON, \"chunks\": 2 (%s)", rc ? err : "read");
    free(ja);
    free(jb);
    if (rc == 0) ppdl_plan_free(&b);
    ppdl_plan_free(&a);
    rc = ppdl_plan_uniform_replicated(12, 6, 2, PPDL_CHUNKS_V, 2, &a, err, sizeof err);
    ok(rc == 0 && ppdl_plan_chunk_order_is(&a, PPDL_CHUNKS_V) && ppdl_plan_ranks_used(&a) == 6 &&
           !strcmp(ppdl_plan_kind(&a, kind, sizeof kind), "V, 6 stages on 3 ranks x 2 replicas") &&
           a.stages[5].ranks[0] == 0 && a.stages[5].ranks[1] == 3,
       "uniform V on 6 ranks in 2 copies: stage 5 on ranks 0 and 3, \"%s\"", rc ? err : kind);
    if (rc == 0) ppdl_plan_free(&a);
    rc = ppdl_plan_uniform_replicated(12, 4, 1, PPDL_CHUNKS_ROUND_ROBIN, 2, &a, err, sizeof err);
    ok(rc == 0 && ppdl_plan_chunks(&a) == 1 && ppdl_plan_chunk_replicas(&a) == 1 && ppdl_plan_ranks_used(&a) == 4 &&
           !strcmp(ppdl_plan_kind(&a, kind, sizeof kind), "2 stages x 2 replicas"),
       "v = 1 with 2 copies: 2 stages x 2 replicas, not chunked: \"%s\"", rc ? err : kind);
    if (rc == 0) ppdl_plan_free(&a);
    ok(ppdl_plan_uniform_replicated(12, 4, 2, PPDL_CHUNKS_ROUND_ROBIN, 3, &a, err, sizeof err) == -1 &&
           strstr(err, "--replicas 3: expected a divisor of the 4 ranks"),
       "3 copies on 4 ranks refused: %s", err);
    ok(ppdl_plan_uniform_replicated(3, 6, 1, PPDL_CHUNKS_ROUND_ROBIN, 1, &a, err, sizeof err) == -1 &&
           strstr(err, "6 ranks but the model has 3 layers") &&
           ppdl_plan_uniform_replicated(2, 6, 1, PPDL_CHUNKS_ROUND_ROBIN, 2, &a, err, sizeof err) == -1 &&
           strstr(err, "6 ranks in 2 replicas make 3 stages but the model has 2 layers"),
       "more stages than layers, with and without copies: %s", err);
    /* rank 1 is replica 1 of stage 0 and replica 0 of stage 1: refused */
    const char *mixed = "{\"stages\": [{\"ranks\": [0, 1], \"first_layer\": 0, \"last_layer\": 1}, {\"ranks\": [1, 0], "
                        "\"first_layer\": 2, \"last_layer\": 3}]}";
    rc = ppdl_plan_parse(mixed, "m.json", 4, 2, NULL, &a, err, sizeof err);
    ok(rc == -1 && strstr(err, "m.json: rank 1 is replica 1 of stage 0 but replica 0 of stage 1"),
       "a rank that is another replica of each of its stages: %s", err);
    if (rc == 0) ppdl_plan_free(&a);
    /* hand-written: copies on ranks 0 2 / 1 3, in the V */
    const char *hand = "{\"stages\": [{\"ranks\": [0, 1], \"first_layer\": 0, \"last_layer\": 1}, {\"ranks\": [2, 3], "
                       "\"first_layer\": 2, \"last_layer\": 3}, {\"ranks\": [2, 3], \"first_layer\": 4, \"last_layer\": 4}, "
                       "{\"ranks\": [0, 1], \"first_layer\": 5, \"last_layer\": 5}]}";
    rc = ppdl_plan_parse(hand, "h.json", 6, 4, NULL, &a, err, sizeof err);
    ok(rc == 0 && ppdl_plan_chunks(&a) == 2 && ppdl_plan_chunk_replicas(&a) == 2 &&
           !strcmp(ppdl_plan_kind(&a, kind, sizeof kind), "V, 4 stages on 2 ranks x 2 replicas"),
       "a hand-written V in 2 copies (ranks 0 2 2 0 / 1 3 3 1) loads: \"%s\"", rc ? err : kind);
    if (rc == 0) ppdl_plan_free(&a);
}

int main(void)
{
    layouts();
    refusals();
    round_trips();
    plans_of_before();
    replicated_chunks();
    done_testing();
    return exit_status();
}
