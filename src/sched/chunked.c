/* chunked.c — the schedules where a rank holds several stages (schedule.h, "Chunked
 * schedules"): interleaved 1F1B and ZB-V, each built as one op list per stage the
 * rank holds plus the order in which the rank runs their ops.
 *
 * N = ranks, v = chunks per rank, S = v*N stages, M = micro-batches, r = one rank.
 * A rank's stages are listed ascending; "chunk c" of rank r is its c-th stage. F(s, mb)
 * is [RECV_ACT] FORWARD [SEND_ACT] of stage s, B(s, mb) [RECV_GRAD] BACKWARD
 * [SEND_GRAD] (zb-v: BACKWARD_INPUT), W(s, mb) BACKWARD_WEIGHT, each appended to stage
 * s's list with its ops in the rank's order at once, so a SEND always precedes the
 * RECV it feeds when both are on one rank as long as F(s, mb) precedes F(s+1, mb) (and
 * B(s+1, mb) precedes B(s, mb)), which both constructions keep.
 *   interleaved, rank r (Megatron-LM's order; chunk c is stage c*N + r):
 *     forwards   group g of micro-batches gN .. min(M, gN + N) - 1, through chunk 0,
 *                then the same group through chunk 1, .., chunk v-1; then group g+1
 *     backwards  the same groups, chunks v-1 down to 0
 *     warm-up    w = min((N - r - 1)*2 + (v - 1)*N, M*v) forwards, then one forward
 *                and one backward until the forwards run out, then the backwards left
 *   Megatron asks for M a multiple of N; a short last group is still deadlock-free
 *   (tests/unit/test_schedule_chunked.c, every M in 1..16). A stage's backwards run in
 *   micro-batch order, so its weight gradients add up as 1F1B's do.
 *
 *   zb-v: the passes of sched/zero_bubble.h's play with the N ranks as devices, stage s
 *   on rank s (s < N) or 2N-1-s, under cap 2N - s on stage s (what 1F1B's stage s holds
 *   on 2N stages). On stage 0 a B directly followed (on its rank) by its W is one
 *   fused BACKWARD, as in the zb-* lists. */
#include "sched/schedule.h"
#include "sched/build_impl.h"
#include "sched/zero_bubble.h"

#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

int ppdl_schedule_stage_rank(int kind, int N, int v, int s)
{
    PPDL_CHECK(N >= 1 && v >= 1 && s >= 0 && s < v * N, "ppdl_schedule_stage_rank: stage %d of %d x %d", s, v, N);
    if (kind == PPDL_SCHED_INTERLEAVED) return s % N;
    if (kind == PPDL_SCHED_ZB_V) {
        PPDL_CHECK(v == 2, "ppdl_schedule_stage_rank: zb-v has 2 chunks per rank, not %d", v);
        return s < N ? s : 2 * N - 1 - s;
    }
    PPDL_CHECK(v == 1, "ppdl_schedule_stage_rank: %s holds one stage per rank, not %d", ppdl_schedule_name(kind), v);
    return s;
}

// ----------------------------------------------------------------------------
// appending ops to a rank's lists and its order

/* the rank's schedule being written: chunk c's list is out->lists[c], stage stage[c] */
typedef struct writer {
    ppdl_rank_schedule *out;
    int S;
} writer;

static void put(writer *w, int c, ppdl_op_kind kind, int mb, int peer)
{
    ppdl_op_list *l = &w->out->lists[c];
    l->ops[l->n++] = (ppdl_op){kind, mb, peer};
    w->out->order[w->out->n++] = c;
}

static void put_forward(writer *w, int c, int mb)
{
    int s = w->out->stages[c];
    if (s > 0) put(w, c, PPDL_OP_RECV_ACT, mb, s - 1);
    put(w, c, PPDL_OP_FORWARD, mb, -1);
    if (s < w->S - 1) put(w, c, PPDL_OP_SEND_ACT, mb, s + 1);
}

/* a backward in one piece (BACKWARD) or its B (BACKWARD_INPUT) */
static void put_backward(writer *w, int c, int mb, ppdl_op_kind kind)
{
    int s = w->out->stages[c];
    if (s < w->S - 1) put(w, c, PPDL_OP_RECV_GRAD, mb, s + 1);
    put(w, c, kind, mb, -1);
    if (s > 0) put(w, c, PPDL_OP_SEND_GRAD, mb, s - 1);
}

// ----------------------------------------------------------------------------
// interleaved 1F1B

/* the i-th forward (is_b = 0) or backward (is_b = 1) of rank r in Megatron's order for
 * Mp micro-batches (a multiple of N), as (chunk, mb) */
static void interleaved_pass(int N, int v, int i, int is_b, int *chunk, int *mb)
{
    int g = i / (N * v), in_group = i % (N * v), c = in_group / N;
    *chunk = is_b ? v - 1 - c : c;
    *mb = g * N + in_group % N;
}

/* put the pass unless its micro-batch is one of the padding (mb >= M) */
static void put_interleaved(writer *w, int N, int v, int M, int i, int is_b)
{
    int c, mb;
    interleaved_pass(N, v, i, is_b, &c, &mb);
    if (mb >= M) return;
    if (is_b)
        put_backward(w, c, mb, PPDL_OP_BACKWARD);
    else
        put_forward(w, c, mb);
}

/* Megatron's order for M rounded up to a multiple of N, without the passes of the
 * micro-batches added by the rounding. (The order of a short last group, N replaced by
 * its size, deadlocks: e.g. N = 4, v = 3, M = 5, the last rank waits for a gradient
 * that needs its own next forward.) Removing every op of some micro-batches from every
 * rank keeps each remaining op's waits a subset of what they were, so the rounded
 * order's freedom from deadlock carries over; the checker proves each case anyway. */
static void build_interleaved(writer *w, int N, int v, int M, int r)
{
    int Mp = (M + N - 1) / N * N, total = Mp * v, warmup = (N - r - 1) * 2 + (v - 1) * N, nf = 0, nb = 0;
    if (warmup > total) warmup = total;
    while (nf < warmup) put_interleaved(w, N, v, M, nf++, 0);
    while (nf < total) {
        put_interleaved(w, N, v, M, nf++, 0);
        put_interleaved(w, N, v, M, nb++, 1);
    }
    while (nb < total) put_interleaved(w, N, v, M, nb++, 1);
}

// ----------------------------------------------------------------------------
// ZB-V

/* stage s's cap in the V: what 1F1B's stage s holds on S stages */
static int zbv_cap(int S, int s) { return S - s; }

/* the play of the V on N ranks: rank dev's passes into out (dev = -1: every rank's, as
 * ppdl_zb_order_devices); returns the step in units */
static long zbv_play(int N, int M, const ppdl_zb_times *tm, int dev, ppdl_zb_pass *out)
{
    int S = 2 * N, *dev_of = ppdl_xmalloc(2 * (size_t)S * sizeof(int)), *cap = dev_of + S;
    for (int s = 0; s < S; s++) {
        dev_of[s] = ppdl_schedule_stage_rank(PPDL_SCHED_ZB_V, N, 2, s);
        cap[s] = zbv_cap(S, s);
    }
    long t = ppdl_zb_order_devices(S, M, N, dev_of, cap, tm, dev, out);
    free(dev_of);
    return t;
}

/* a rank's lists from its n3 passes p (the play's, in the order the rank runs them) */
static void build_zbv(writer *w, const ppdl_zb_pass *p, int n3)
{
    for (int i = 0; i < n3; i++) {
        int c = p[i].stage == w->out->stages[0] ? 0 : 1, mb = p[i].mb;
        if (p[i].kind == 'F') {
            put_forward(w, c, mb);
        } else if (p[i].kind == 'W') {
            put(w, c, PPDL_OP_BACKWARD_WEIGHT, mb, -1);
        } else if (p[i].stage == 0 && i + 1 < n3 && p[i + 1].kind == 'W' && p[i + 1].stage == 0 && p[i + 1].mb == mb) {
            /* W right after its B on the first stage, which sends nothing between */
            put_backward(w, c, mb, PPDL_OP_BACKWARD);
            i++;
        } else {
            put_backward(w, c, mb, PPDL_OP_BACKWARD_INPUT);
        }
    }
}

// ----------------------------------------------------------------------------
// the entry points

int ppdl_sched_chunked_args(int kind, int N, int v, int M, char *err, size_t errlen)
{
    const char *name = ppdl_schedule_name(kind);
    if (!ppdl_schedule_chunked(kind))
        return ppdl_errf(err, errlen, "schedule %s holds one stage per rank, not %d", name, v);
    if (N < 1 || M < 1) return ppdl_errf(err, errlen, "schedule %s: need N >= 1 ranks and M >= 1 micro-batches "
                                         "(got N=%d M=%d)", name, N, M);
    if (kind == PPDL_SCHED_INTERLEAVED && v < 2)
        return ppdl_errf(err, errlen, "schedule interleaved: %d chunk(s) per rank; it needs at least 2 (with 1 "
                         "it is 1f1b)", v);
    if (kind == PPDL_SCHED_ZB_V && v != 2)
        return ppdl_errf(err, errlen, "schedule zb-v: %d chunks per rank; the V is exactly 2 (stage r and stage "
                         "2N-1-r on rank r)", v);
    return 0;
}

/* rank's schedule into out; zb-v: from its passes zb (6M of them, the play's) */
static void build_one(int kind, int N, int v, int M, int rank, const ppdl_zb_pass *zb, ppdl_rank_schedule *out)
{
    int S = v * N;
    out->rank = rank;
    out->n_stages = v;
    out->stages = ppdl_xmalloc((size_t)v * sizeof(int));
    out->lists = ppdl_xcalloc((size_t)v, sizeof(ppdl_op_list));
    for (int s = 0, c = 0; s < S; s++)
        if (ppdl_schedule_stage_rank(kind, N, v, s) == rank) out->stages[c++] = s;
    /* at most 7 ops per micro-batch and stage (recv, F, send, recv, B, send, W) */
    size_t per_list = 7 * (size_t)M + 1;
    for (int c = 0; c < v; c++) {
        out->lists[c].stage = out->stages[c];
        out->lists[c].ops = ppdl_xmalloc(per_list * sizeof(ppdl_op));
    }
    out->n = 0;
    out->order = ppdl_xmalloc(per_list * (size_t)v * sizeof(int));
    writer w = {out, S};
    if (kind == PPDL_SCHED_INTERLEAVED)
        build_interleaved(&w, N, v, M, rank);
    else
        build_zbv(&w, zb, 3 * M * v);
    for (int c = 0; c < v; c++) put(&w, c, PPDL_OP_OPTIMIZER, -1, -1);
}

void ppdl_sched_build_rank(int kind, int N, int v, int M, const ppdl_zb_times *tm, int rank, ppdl_rank_schedule *out)
{
    ppdl_zb_pass *zb = NULL;
    if (kind == PPDL_SCHED_ZB_V) { /* this rank's passes of the play */
        zb = ppdl_xmalloc(6 * (size_t)M * sizeof *zb);
        zbv_play(N, M, tm, rank, zb);
    }
    build_one(kind, N, v, M, rank, zb, out);
    free(zb);
}

void ppdl_sched_build_ranks(int kind, int N, int v, int M, const ppdl_zb_times *tm, ppdl_rank_schedule *out)
{
    ppdl_zb_pass *zb = NULL;
    if (kind == PPDL_SCHED_ZB_V) { /* one play for every rank: rank r's 6M passes from 6Mr on */
        zb = ppdl_xmalloc(6 * (size_t)M * N * sizeof *zb);
        zbv_play(N, M, tm, -1, zb);
    }
    for (int r = 0; r < N; r++) build_one(kind, N, v, M, r, zb ? zb + 6 * (size_t)M * r : NULL, &out[r]);
    free(zb);
}

void ppdl_rank_schedule_free(ppdl_rank_schedule *r)
{
    if (!r) return;
    for (int c = 0; r->lists && c < r->n_stages; c++) ppdl_op_list_free(&r->lists[c]);
    free(r->lists);
    free(r->stages);
    free(r->order);
    *r = (ppdl_rank_schedule){0};
}

ppdl_op_list ppdl_rank_schedule_take(ppdl_rank_schedule *r, int c)
{
    PPDL_CHECK(c >= 0 && c < r->n_stages, "ppdl_rank_schedule_take: list %d of %d", c, r->n_stages);
    ppdl_op_list l = r->lists[c];
    r->lists[c] = (ppdl_op_list){0};
    ppdl_rank_schedule_free(r);
    return l;
}
