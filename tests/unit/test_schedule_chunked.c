/* test_schedule_chunked.c — the schedules where a rank holds several stages
 * (interleaved 1F1B, ZB-V: schedule.h "Chunked schedules") and their checker.
 *
 * Positive: every build for N = 1..6 ranks, interleaved v = 2..4 and zb-v v = 2, and
 * M = 1..16 micro-batches (M < N, M not a multiple of N included) passes
 * ppdl_schedule_check_ranks; each rank holds exactly the stages the placement gives
 * it; interleaved's rank orders for N = 2, v = 2, M = 4 are Megatron's, written out.
 * Refusals: v < 2 for interleaved, v != 2 for zb-v, a kind that is not chunked, N, M
 * or the rank out of range, each with its reason.
 * Negative (the checker is not vacuous): a W before its B, a RECV before its SEND on
 * the same rank, a reused slot (a B that reuses a slot whose gradient the same rank
 * has not received yet), an order that deadlocks two ranks, a stage whose fused
 * backwards run out of micro-batch order, and broken orders and placements; each is
 * refused with a message naming the rank, the stage and the op.
 * Unit steps: interleaved takes exactly 3Mv + 3(N-1) when N divides M (1F1B's
 * bubble 3v(N-1) divided by v) and never more than 1F1B for any M; zb-v's bubble is
 * below zb-h1's for every M >= 2N measured, while a rank holds at most 2N + 1 chunk
 * micro-batches (1F1B's first rank 2N); the checker's play of the lists takes the
 * step of the greedy play that made them.
 */
#include "sched/schedule.h"
#include "sched/zero_bubble.h"

#include "tap.h"
#include "unit/schedule_lists.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_MAX 6
#define M_MAX 16

static int build_ranks(int kind, int N, int v, int M, ppdl_rank_schedule *R)
{
    char err[512];
    for (int r = 0; r < N; r++)
        if (rank_of(kind, N, v, M, r, &R[r], err, sizeof err)) {
            fail("%s N=%d v=%d M=%d rank %d: %s", ppdl_schedule_name(kind), N, v, M, r, err);
            for (int q = 0; q < r; q++) ppdl_rank_schedule_free(&R[q]);
            return -1;
        }
    return 0;
}

static void free_ranks(int N, ppdl_rank_schedule *R)
{
    for (int r = 0; r < N; r++) ppdl_rank_schedule_free(&R[r]);
}

/* the placement: rank r holds exactly the stages s with stage_rank(s) = r, ascending,
 * its order has one entry per op */
static void check_placement(int kind, int N, int v, int M, const ppdl_rank_schedule *R)
{
    for (int r = 0; r < N; r++) {
        int c = 0, total = 0;
        for (int s = 0; s < v * N; s++) {
            if (ppdl_schedule_stage_rank(kind, N, v, s) != r) continue;
            if (c >= R[r].n_stages || R[r].stages[c] != s || R[r].lists[c].stage != s)
                fail("%s N=%d v=%d M=%d rank %d: stage %d missing or misplaced", ppdl_schedule_name(kind), N, v, M, r,
                     s);
            c++;
        }
        for (int j = 0; j < R[r].n_stages; j++) total += R[r].lists[j].n;
        if (c != R[r].n_stages || total != R[r].n)
            fail("%s N=%d v=%d M=%d rank %d: %d stages (placement %d), order %d for %d ops", ppdl_schedule_name(kind),
                 N, v, M, r, R[r].n_stages, c, R[r].n, total);
    }
}

static void test_all_pass(int kind, int v_lo, int v_hi)
{
    const char *name = ppdl_schedule_name(kind);
    ppdl_rank_schedule R[N_MAX];
    char err[2048], line[160];
    int n = 0;
    for (int N = 1; N <= N_MAX; N++)
        for (int v = v_lo; v <= v_hi; v++)
            for (int M = 1; M <= M_MAX; M++) {
                if (build_ranks(kind, N, v, M, R)) continue;
                n++;
                check_placement(kind, N, v, M, R);
                if (ppdl_schedule_check_ranks(N, v, M, R, err, sizeof err))
                    fail("%s N=%d v=%d M=%d rejected: %s", name, N, v, M, err);
                free_ranks(N, R);
            }
    snprintf(line, sizeof line, "%s: every build for N 1..%d, v %d..%d, M 1..%d is placed right and passes the checker",
             name, N_MAX, v_lo, v_hi, M_MAX);
    report(line);
    diag("%s: %d (N, v, M) cases", name, n);
}

/* the compute passes of a rank in its order, "F2.0" = forward of stage 2, mb 0 */
static void compute_string(const ppdl_rank_schedule *R, char *buf, size_t len)
{
    int at[8] = {0};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < R->n && used < len; i++) {
        int c = R->order[i];
        const ppdl_op *op = &R->lists[c].ops[at[c]++];
        char k = op->kind == PPDL_OP_FORWARD ? 'F' : op->kind == PPDL_OP_BACKWARD ? 'B' : 0;
        if (k) used += (size_t)snprintf(buf + used, len - used, "%s%c%d.%d", used ? " " : "", k, R->stages[c], op->mb);
    }
}

/* Megatron's interleaved order for N = 2, v = 2, M = 4 (rank 0: stages 0, 2; rank 1:
 * 1, 3), by hand from its definition: rank 0 warms up with (2-0-1)*2 + 1*2 = 4
 * forwards, rank 1 with 2; forwards go F(chunk 0: mb 0, 1) F(chunk 1: mb 0, 1) then
 * the next group, backwards the same with the chunks reversed */
static void test_interleaved_literal(void)
{
    ppdl_rank_schedule R[2];
    char got0[512], got1[512];
    if (build_ranks(PPDL_SCHED_INTERLEAVED, 2, 2, 4, R)) return;
    compute_string(&R[0], got0, sizeof got0);
    compute_string(&R[1], got1, sizeof got1);
    const char *want0 = "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3";
    const char *want1 = "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3";
    ok(strcmp(got0, want0) == 0 && strcmp(got1, want1) == 0,
       "interleaved N=2 v=2 M=4: Megatron's order on both ranks (rank 0: %s; rank 1: %s)", got0, got1);
    free_ranks(2, R);
}

static void test_refusals(void)
{
    ppdl_rank_schedule r;
    char err[256] = "";
    ok(rank_of(PPDL_SCHED_INTERLEAVED, 4, 1, 8, 0, &r, err, sizeof err) == -1 &&
           strstr(err, "at least 2"), "interleaved with v = 1 is refused: %s", err);
    ok(rank_of(PPDL_SCHED_ZB_V, 4, 3, 8, 0, &r, err, sizeof err) == -1 && strstr(err, "exactly 2"),
       "zb-v with v = 3 is refused: %s", err);
    ok(rank_of(PPDL_SCHED_1F1B, 4, 2, 8, 0, &r, err, sizeof err) == -1 &&
           strstr(err, "one stage per rank"), "a schedule that is not chunked is refused: %s", err);
    ok(rank_of(PPDL_SCHED_ZB_V, 4, 2, 8, 4, &r, err, sizeof err) == -1 && strstr(err, "rank 4"),
       "a rank outside 0..N-1 is refused: %s", err);
    ok(rank_of(PPDL_SCHED_INTERLEAVED, 4, 2, 0, 0, &r, err, sizeof err) == -1 && strstr(err, "M=0"),
       "M = 0 is refused: %s", err);
    int k[2] = {1, 2};
    ok(ppdl_schedule_supports(PPDL_SCHED_ZB_V, 2, k, err, sizeof err) == -1 && strstr(err, "without replicas") &&
           ppdl_schedule_supports(PPDL_SCHED_INTERLEAVED, 2, NULL, err, sizeof err) == 0,
       "chunked schedules refuse replicated stages: %s", err);
}

static void test_names(void)
{
    ok(ppdl_schedule_parse("interleaved") == PPDL_SCHED_INTERLEAVED && ppdl_schedule_parse("zb-v") == PPDL_SCHED_ZB_V &&
           strcmp(ppdl_schedule_name(PPDL_SCHED_ZB_V), "zb-v") == 0 &&
           strcmp(ppdl_schedule_name(PPDL_SCHED_INTERLEAVED), "interleaved") == 0 &&
           ppdl_schedule_chunked(PPDL_SCHED_ZB_V) && ppdl_schedule_chunked(PPDL_SCHED_INTERLEAVED) &&
           !ppdl_schedule_chunked(PPDL_SCHED_ZB_H1) && ppdl_schedule_splits_backward(PPDL_SCHED_ZB_V) &&
           !ppdl_schedule_splits_backward(PPDL_SCHED_INTERLEAVED),
       "interleaved and zb-v parse, print, are chunked; zb-v splits backwards");
    /* N = 3: interleaved s mod 3; the V: 0 1 2 | 2 1 0 */
    int good = 1;
    static const int v_rank[] = {0, 1, 2, 2, 1, 0};
    for (int s = 0; s < 6; s++)
        good &= ppdl_schedule_stage_rank(PPDL_SCHED_INTERLEAVED, 3, 2, s) == s % 3 &&
                ppdl_schedule_stage_rank(PPDL_SCHED_ZB_V, 3, 2, s) == v_rank[s];
    good &= ppdl_schedule_stage_rank(PPDL_SCHED_1F1B, 3, 1, 2) == 2;
    ok(good, "stage -> rank: interleaved s mod N, zb-v the V (N=3: 0 1 2 2 1 0), others s");
}

// ----------------------------------------------------------------------------
// forced-bad schedules

static int find_op(const ppdl_op_list *l, ppdl_op_kind kind, int mb)
{
    for (int i = 0; i < l->n; i++)
        if (l->ops[i].kind == kind && l->ops[i].mb == mb) return i;
    return -1;
}

/* the position in rank R's order where op `op_index` of its chunk c runs */
static int order_pos(const ppdl_rank_schedule *R, int c, int op_index)
{
    for (int i = 0, seen = 0; i < R->n; i++)
        if (R->order[i] == c && seen++ == op_index) return i;
    return -1;
}

/* move order entry `from` to position `to` (entries between shift by one) */
static void move_entry(ppdl_rank_schedule *R, int from, int to)
{
    int e = R->order[from];
    if (from < to)
        memmove(&R->order[from], &R->order[from + 1], (size_t)(to - from) * sizeof(int));
    else
        memmove(&R->order[to + 1], &R->order[to], (size_t)(from - to) * sizeof(int));
    R->order[to] = e;
}

static void move_op(ppdl_op_list *l, int from, int to)
{
    ppdl_op op = l->ops[from];
    if (from < to)
        memmove(&l->ops[from], &l->ops[from + 1], (size_t)(to - from) * sizeof(ppdl_op));
    else
        memmove(&l->ops[to + 1], &l->ops[to], (size_t)(from - to) * sizeof(ppdl_op));
    l->ops[to] = op;
}

typedef void (*mutator)(ppdl_rank_schedule *R, int N, int M);

/* Build, break, and expect a refusal whose message holds every needle (NULL-ended) */
static void refused(int kind, int N, int v, int M, mutator mutate, const char *what, const char *const *needles)
{
    ppdl_rank_schedule R[N_MAX];
    char err[2048] = "";
    if (build_ranks(kind, N, v, M, R)) return;
    int before = ppdl_schedule_check_ranks(N, v, M, R, err, sizeof err);
    mutate(R, N, M);
    int rc = ppdl_schedule_check_ranks(N, v, M, R, err, sizeof err), found = 1;
    for (int i = 0; needles[i]; i++) found &= strstr(err, needles[i]) != NULL;
    ok(before == 0 && rc == -1 && found, "%s N=%d v=%d M=%d, %s: refused: %s", ppdl_schedule_name(kind), N, v, M,
       what, err);
    free_ranks(N, R);
}

/* zb-v: the W of mb 1 moved before its B on the last stage's list (rank 0, chunk 1);
 * the order still fits (it counts ops per stage) */
static void w_before_b(ppdl_rank_schedule *R, int N, int M)
{
    (void)N;
    (void)M;
    ppdl_op_list *l = &R[0].lists[1];
    move_op(l, find_op(l, PPDL_OP_BACKWARD_WEIGHT, 1), find_op(l, PPDL_OP_BACKWARD_INPUT, 1));
}

/* zb-v: on rank N-1, stage N's first op (RECV_ACT mb 0 from stage N-1, the same rank)
 * moved before stage N-1's SEND_ACT of mb 0 */
static void recv_before_own_send(ppdl_rank_schedule *R, int N, int M)
{
    (void)M;
    ppdl_rank_schedule *r = &R[N - 1];
    int send = order_pos(r, 0, find_op(&r->lists[0], PPDL_OP_SEND_ACT, 0));
    move_entry(r, order_pos(r, 1, 0), send);
}

/* interleaved: rank 0 starts with its chunk 1 (its first op: RECV_ACT mb 0 from stage
 * N - 1 = rank N-1's chunk 0, which waits for rank 0's chunk 0 through the ranks) */
static void cross_deadlock(ppdl_rank_schedule *R, int N, int M)
{
    (void)N;
    (void)M;
    move_entry(&R[0], order_pos(&R[0], 1, 0), 0);
}

/* interleaved: rank 0's stage 0 runs the backward of mb 1 before that of mb 0 (the
 * two swapped with their receives) */
static void backwards_out_of_order(ppdl_rank_schedule *R, int N, int M)
{
    (void)N;
    (void)M;
    ppdl_op_list *l = &R[0].lists[0];
    for (int i = 0; i < l->n; i++)
        if ((l->ops[i].kind == PPDL_OP_RECV_GRAD || l->ops[i].kind == PPDL_OP_BACKWARD) && l->ops[i].mb < 2)
            l->ops[i].mb = 1 - l->ops[i].mb;
}

/* rank N-1's last entry (its last stage's optimizer) moved to the front: that stage's
 * ops all run one entry early, its optimizer before the other stage's */
static void optimizer_early(ppdl_rank_schedule *R, int N, int M)
{
    (void)M;
    ppdl_rank_schedule *r = &R[N - 1];
    move_entry(r, r->n - 1, 0);
}

static void stage_twice(ppdl_rank_schedule *R, int N, int M)
{
    (void)N;
    (void)M;
    R[1].stages[0] = R[0].stages[0];
    R[1].lists[0].stage = R[0].stages[0];
}

static void order_short(ppdl_rank_schedule *R, int N, int M)
{
    (void)N;
    (void)M;
    R[0].n--;
}

static void test_negative(void)
{
    refused(PPDL_SCHED_ZB_V, 3, 2, 8, w_before_b, "a W before its B",
            (const char *[]){"rank 0 stage 5 op", "(backward_input mb 1), which must precede it", NULL});
    refused(PPDL_SCHED_ZB_V, 3, 2, 8, recv_before_own_send, "a RECV before its SEND on the same rank",
            (const char *[]){"deadlock", "rank 2 stage 3 op 0 (recv_act mb 0 from stage 2) waits",
                             "a send its own rank has not issued yet", NULL});
    refused(PPDL_SCHED_INTERLEAVED, 1, 2, 4, recv_before_own_send, "a RECV before its SEND on the one rank",
            (const char *[]){"deadlock", "rank 0 stage 1 op 0 (recv_act mb 0 from stage 0) waits",
                             "a send its own rank has not issued yet", NULL});
    refused(PPDL_SCHED_INTERLEAVED, 2, 2, 4, cross_deadlock, "an order that deadlocks two ranks",
            (const char *[]){"deadlock", "rank 0 stage 2 op 0 (recv_act mb 0 from stage 1) waits",
                             "rank 1 stage 1 op 0 (recv_act mb 0 from stage 0) waits", NULL});
    refused(PPDL_SCHED_INTERLEAVED, 2, 2, 4, backwards_out_of_order, "a stage's fused backwards out of micro-batch order",
            (const char *[]){"rank 0 stage 0 op", "adds mb 0's weight gradients after mb 1's",
                             "must accumulate in micro-batch order", NULL});
    refused(PPDL_SCHED_INTERLEAVED, 2, 2, 4, optimizer_early, "an order that reaches an optimizer early",
            (const char *[]){"rank 1 stage", "(optimizer) is entry", "the optimizers go last", NULL});
    refused(PPDL_SCHED_ZB_V, 2, 2, 4, stage_twice, "a stage on two ranks",
            (const char *[]){"stage 0 is on rank 0 and on rank 1", NULL});
    refused(PPDL_SCHED_ZB_V, 2, 2, 4, order_short, "an order one entry short",
            (const char *[]){"rank 0's order has", NULL});
    /* the control for the fused order: the same stage list is fine for the checker of
     * one stage per rank, which allows fused backwards in any order (GPipe's) */
    ppdl_rank_schedule R[2];
    char err[512] = "";
    if (build_ranks(PPDL_SCHED_INTERLEAVED, 2, 2, 4, R)) return;
    backwards_out_of_order(R, 2, 4);
    ppdl_op_list one = R[0].lists[0];
    ok(find_op(&one, PPDL_OP_BACKWARD, 1) < find_op(&one, PPDL_OP_BACKWARD, 0),
       "the control: the broken stage 0 list does run mb 1's backward first");
    free_ranks(2, R);
    (void)err;
}

/* A reused slot, by hand: one rank with stages 0 and 1 (interleaved, N = 1, v = 2),
 * M = 2. Stage 1 holds one micro-batch at a time (one slot), so its backward of mb 1
 * reuses mb 0's slot and waits until stage 0 has received mb 0's gradient. The good
 * order receives it in between; the bad one leaves it after, and the rank waits for
 * itself. */
static void test_reused_slot(void)
{
    ppdl_op s0[] = {
        {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_SEND_ACT, 0, 1},  {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_SEND_ACT, 1, 1},  {PPDL_OP_RECV_GRAD, 0, 1}, {PPDL_OP_BACKWARD, 0, -1},
        {PPDL_OP_RECV_GRAD, 1, 1}, {PPDL_OP_BACKWARD, 1, -1}, {PPDL_OP_OPTIMIZER, -1, -1},
    };
    ppdl_op s1[] = {
        {PPDL_OP_RECV_ACT, 0, 0},  {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_BACKWARD, 0, -1},
        {PPDL_OP_SEND_GRAD, 0, 0}, {PPDL_OP_RECV_ACT, 1, 0},  {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_BACKWARD, 1, -1}, {PPDL_OP_SEND_GRAD, 1, 0}, {PPDL_OP_OPTIMIZER, -1, -1},
    };
    /* stage 0's forwards; stage 1 up to its forward of mb 1; stage 0's backward of mb 0;
     * then the rest. bad: stage 0's backward of mb 0 after stage 1's of mb 1 */
    int good[] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1};
    int bad[] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1};
    int stages[] = {0, 1};
    ppdl_op_list lists[] = {{0, 9, s0}, {1, 9, s1}};
    ppdl_rank_schedule r = {.rank = 0, .n_stages = 2, .stages = stages, .lists = lists, .n = 18, .order = good};
    char err[1024] = "";
    int rc_good = ppdl_schedule_check_ranks(1, 2, 2, &r, err, sizeof err);
    ok(rc_good == 0, "the control: a hand-made one-rank order that lets stage 0 receive mb 0's gradient before "
       "stage 1 reuses its slot passes %s", err);
    r.order = bad;
    ok(ppdl_schedule_check_ranks(1, 2, 2, &r, err, sizeof err) == -1 && strstr(err, "deadlock") &&
           strstr(err, "rank 0 stage 1 op 6 (backward mb 1) waits"),
       "a reused slot (stage 1's backward of mb 1 before stage 0 received mb 0's gradient, same rank): refused: %s",
       err);
}

// ----------------------------------------------------------------------------
// unit steps

static void test_interleaved_steps(void)
{
    int exact = 0, n_exact = 0, worse = 0, n = 0;
    for (int N = 1; N <= N_MAX; N++)
        for (int v = 2; v <= 4; v++)
            for (int M = 1; M <= M_MAX; M++, n++) {
                long t = ppdl_schedule_unit_step_chunked(PPDL_SCHED_INTERLEAVED, N, v, M);
                long t1 = ppdl_schedule_unit_step_chunked(PPDL_SCHED_1F1B, N, v, M);
                if (t1 != (long)v * (3L * M + 3L * (N - 1))) fail("1f1b's chunked unit step %ld", t1);
                if (M % N == 0) {
                    n_exact++;
                    if (t == 3L * M * v + 3L * (N - 1)) exact++;
                    else diag("interleaved N=%d v=%d M=%d: step %ld, expected %ld", N, v, M, t, 3L * M * v + 3L * (N - 1));
                }
                if (t > t1) {
                    worse++;
                    diag("interleaved N=%d v=%d M=%d: step %ld, 1f1b %ld", N, v, M, t, t1);
                }
            }
    ok(exact == n_exact, "interleaved: unit step = 3Mv + 3(N-1) when N divides M, a bubble of 3(N-1) = 1F1B's "
       "3v(N-1) / v (%d of %d cases)", exact, n_exact);
    ok(worse == 0, "interleaved: never longer than 1F1B's v(3M + 3(N-1)), any M (%d cases)", n);
    long b = ppdl_schedule_unit_step_chunked(PPDL_SCHED_INTERLEAVED, 4, 2, 5) - 30;
    diag("M not a multiple of N: e.g. N=4 v=2 M=5 has a bubble of %ld units (9 when N divides M, 1F1B's 18)", b);
}

static void test_zbv_steps(void)
{
    int below = 0, n = 0, mem_ok = 0, same_play = 0, n_all = 0;
    long sum_v = 0, sum_h1 = 0, worst_peak = 0;
    for (int N = 1; N <= N_MAX; N++)
        for (int M = 1; M <= M_MAX; M++) {
            long t = ppdl_schedule_unit_step_chunked(PPDL_SCHED_ZB_V, N, 2, M);
            /* the greedy play itself, with the caps of schedule.h (2N - s) */
            int S = 2 * N, dev_of[2 * N_MAX], cap[2 * N_MAX];
            for (int s = 0; s < S; s++) {
                dev_of[s] = ppdl_schedule_stage_rank(PPDL_SCHED_ZB_V, N, 2, s);
                cap[s] = S - s;
            }
            ppdl_zb_pass *p = malloc(3 * (size_t)S * M * sizeof *p);
            if (!p) abort();
            long greedy = ppdl_zb_order_devices(S, M, N, dev_of, cap, NULL, -1, p);
            free(p);
            same_play += greedy == t;
            /* the peak a rank holds, in chunk micro-batches, against 1F1B's first rank */
            ppdl_rank_schedule R[N_MAX];
            if (build_ranks(PPDL_SCHED_ZB_V, N, 2, M, R)) continue;
            int peak = 0;
            for (int r = 0; r < N; r++) {
                int h = ppdl_schedule_max_in_flight(&R[r].lists[0]) + ppdl_schedule_max_in_flight(&R[r].lists[1]);
                if (h > peak) peak = h;
            }
            free_ranks(N, R);
            int f1b = 2 * (M < N ? M : N);
            mem_ok += peak <= f1b + 1;
            if (peak - f1b > worst_peak) worst_peak = peak - f1b;
            n_all++;
            if (M < 2 * N || N < 2) continue;
            long h1 = 2 * (ppdl_schedule_unit_step(PPDL_SCHED_ZB_H1, N, M) - 3L * M);
            n++;
            below += t - 6L * M < h1;
            sum_v += t - 6L * M;
            sum_h1 += h1;
            if (t - 6L * M >= h1) diag("zb-v N=%d M=%d: bubble %ld, zb-h1 %ld", N, M, t - 6L * M, h1);
        }
    ok(same_play == n_all, "zb-v: the checker's unit play of the lists = the greedy play's step (%d of %d)", same_play,
       n_all);
    ok(below == n && n > 0, "zb-v: bubble below zb-h1's (in chunk units) for every N 2..%d, M 2N..%d (%d of %d; "
       "total %ld units against %ld)", N_MAX, M_MAX, below, n, sum_v, sum_h1);
    ok(mem_ok == n_all, "zb-v: a rank holds at most 1F1B's first rank + 1 chunk micro-batch (%d of %d; worst +%ld)",
       mem_ok, n_all, worst_peak);
}

/* zb-v ordered by times (ppdl_schedule_make_all with tm): every time 1 gives the unit
 * play's lists; 300 random cases (N 1..5, M 1..12, times 1..40 ticks, messages 0..8)
 * pass ppdl_schedule_check_ranks (which also proves the weight sums in micro-batch
 * order), hold at most the V's caps (2N - s on stage s), and their orders, replayed
 * under the times, are never longer than the unit play's (shorter in some) */
static void test_zbv_timed(void)
{
    int bad = 0, n = 0;
    for (int N = 1; N <= 5; N++)
        for (int M = 1; M <= 12; M++) {
            int S = 2 * N;
            long ones[4 * 10];
            for (int i = 0; i < 4 * S; i++) ones[i] = i < 3 * S;
            ppdl_zb_times tm = {ones, ones + S, ones + 2 * S, ones + 3 * S};
            ppdl_rank_schedule A[5], B[5];
            char err[256];
            if (ranks_of(PPDL_SCHED_ZB_V, N, 2, M, NULL, A, err, sizeof err) ||
                ranks_of(PPDL_SCHED_ZB_V, N, 2, M, &tm, B, err, sizeof err)) {
                bad++;
                continue;
            }
            for (int r = 0; r < N; r++, n++) {
                int same = A[r].n == B[r].n && !memcmp(A[r].order, B[r].order, (size_t)A[r].n * sizeof(int));
                for (int c = 0; c < 2; c++)
                    same &= A[r].lists[c].n == B[r].lists[c].n &&
                            !memcmp(A[r].lists[c].ops, B[r].lists[c].ops, (size_t)A[r].lists[c].n * sizeof(ppdl_op));
                if (!same && !bad) diag("zb-v N=%d M=%d rank %d: the timed lists with unit times differ", N, M, r);
                bad += !same;
            }
            free_ranks(N, A);
            free_ranks(N, B);
        }
    ok(bad == 0, "zb-v timed with every time 1: the unit play's lists (%d ranks' schedules)", n);

    unsigned long long g = 777;
#define RND(lo, hi) ((g = g * 6364136223846793005ULL + 1442695040888963407ULL), (lo) + (long)((g >> 33) % (unsigned long long)((hi) - (lo) + 1)))
    int cases = 0, better = 0;
    for (int c = 0; c < 300; c++) {
        int N = (int)RND(1, 5), M = (int)RND(1, 12), S = 2 * N, dev_of[10], cap[10];
        long t[40];
        for (int i = 0; i < 3 * S; i++) t[i] = RND(1, 40);
        for (int i = 3 * S; i < 4 * S; i++) t[i] = RND(0, 8);
        ppdl_zb_times tm = {t, t + S, t + 2 * S, t + 3 * S};
        ppdl_rank_schedule R[5];
        char err[256];
        if (ranks_of(PPDL_SCHED_ZB_V, N, 2, M, &tm, R, err, sizeof err)) {
            fail("zb-v N=%d M=%d: %s", N, M, err);
            continue;
        }
        if (ppdl_schedule_check_ranks(N, 2, M, R, err, sizeof err)) fail("zb-v N=%d M=%d timed: %s", N, M, err);
        for (int r = 0; r < N; r++)
            for (int k = 0; k < 2; k++) {
                int s = R[r].stages[k], held = ppdl_schedule_max_in_flight(&R[r].lists[k]);
                if (held > S - s) fail("zb-v N=%d M=%d stage %d holds %d, cap %d", N, M, s, held, S - s);
            }
        free_ranks(N, R);
        /* the orders' steps: the timed play's against the unit play's, replayed */
        for (int s = 0; s < S; s++) {
            dev_of[s] = ppdl_schedule_stage_rank(PPDL_SCHED_ZB_V, N, 2, s);
            cap[s] = S - s;
        }
        ppdl_zb_pass *p = malloc(3 * (size_t)S * M * sizeof *p);
        if (!p) abort();
        long timed = ppdl_zb_order_devices(S, M, N, dev_of, cap, &tm, -1, p);
        ppdl_zb_order_devices(S, M, N, dev_of, cap, NULL, -1, p);
        long unit = ppdl_zb_replay_devices(S, M, N, dev_of, p, &tm);
        free(p);
        if (timed > unit) fail("zb-v N=%d M=%d: timed orders %ld ticks, the unit play's %ld", N, M, timed, unit);
        better += timed < unit;
        cases++;
    }
#undef RND
    if (!better) fail("no case where the timed orders are shorter");
    char what[200];
    snprintf(what, sizeof what, "zb-v timed, %d random cases: the checker passes, caps held, never longer than the "
             "unit play's orders under the times (shorter in %d)", cases, better);
    report(what);
}

int main(void)
{
    plan(29);
    test_names();
    test_all_pass(PPDL_SCHED_INTERLEAVED, 2, 4);
    test_all_pass(PPDL_SCHED_ZB_V, 2, 2);
    test_interleaved_literal();
    test_refusals();
    test_negative();
    test_reused_slot();
    test_interleaved_steps();
    test_zbv_steps();
    test_zbv_timed();
    return exit_status();
}
