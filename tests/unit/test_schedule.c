/* test_schedule.c — the GPipe and 1F1B op lists, and the checker that proves them.
 *
 * Positive: for both schedules and every S in 1..8, M in 1..12 (so M < S, M = S,
 * M > S and M = 1 all occur) the lists pass the checker, have the expected op
 * counts, put forwards and backwards where the schedule's definition says (written
 * here as closed-form positions, independently of schedule.c's loops), wrap every
 * compute op in its recv/send, and hold the expected number of micro-batches.
 * Negative: hand-broken lists (deadlock, missing send, duplicated forward, backward
 * before forward, optimizer not last, bad peers, ...) are rejected with a message,
 * and so is a list that would reuse a slot's send buffer before its message was
 * received (the checker plays the runtime's buffer waits too).
 * Zero bubble (ZB-H1, ZB-H2, ZB-1P): for every S in 1..8, M in 1..12 the lists pass the
 * checker, run F's, B's and weight-gradient sums in micro-batch order, wrap every pass
 * in its messages, hold at most the cap, fuse B and W on stage 0 where nothing lies
 * between them; the unit-time play is shorter than 1F1B's (and as short as possible
 * where the comment of zero_bubble.h says); ZB-1P's play takes 3M + 2(S - 1) and each
 * of its stages holds exactly what 1F1B's same stage holds; the exact lists for S = 2,
 * M = 3. Lists broken the
 * ways a split backward can break (W before its B, W's out of micro-batch order, a W
 * buffer or a slot taken while held, both backward forms for one micro-batch, a B
 * without its W) are rejected. Zero bubble on replicated stages (every layout of
 * S 1..4 with 1..3 replicas per stage, M up to 12): the replica lists pass the
 * checker, run their own micro-batches in order under their caps, are the plain lists
 * with one replica per stage, and their unit-time play is never longer than 1F1B's on
 * the layout (nor, for ZB-1P, than the stage's list cut to the replica).
 * Many cases are folded into few TAP lines; the first failure is printed as a diag.
 */
#include "sched/schedule.h"
#include "sched/zero_bubble.h"

#include "tap.h"
#include "unit/schedule_lists.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX 8
#define M_MAX 12

static void build_all(int kind, int S, int M, ppdl_op_list *lists)
{
    for (int s = 0; s < S; s++) list_of(kind, S, M, NULL, NULL, s, 0, &lists[s]);
}

static void free_all(int S, ppdl_op_list *lists)
{
    for (int s = 0; s < S; s++) ppdl_op_list_free(&lists[s]);
}

static int find_op(const ppdl_op_list *l, ppdl_op_kind kind, int mb)
{
    for (int i = 0; i < l->n; i++)
        if (l->ops[i].kind == kind && l->ops[i].mb == mb) return i;
    return -1;
}

static void remove_op(ppdl_op_list *l, int at)
{
    memmove(&l->ops[at], &l->ops[at + 1], (size_t)(l->n - at - 1) * sizeof(ppdl_op));
    l->n--;
}

static void insert_op(ppdl_op_list *l, int at, ppdl_op op)
{
    l->ops = realloc(l->ops, (size_t)(l->n + 1) * sizeof(ppdl_op));
    if (!l->ops) abort();
    memmove(&l->ops[at + 1], &l->ops[at], (size_t)(l->n - at) * sizeof(ppdl_op));
    l->ops[at] = op;
    l->n++;
}

/* move the op at index from to index to (the ops between shift by one) */
static void move_op(ppdl_op_list *l, int from, int to)
{
    ppdl_op op = l->ops[from];
    remove_op(l, from);
    insert_op(l, to, op);
}

static int warmup_of(int S, int M, int s) { return S - s - 1 < M ? S - s - 1 : M; }

/* Position among the 2M compute ops (forward/backward) where the definition puts
 * FORWARD(mb) (is_b = 0) or BACKWARD(mb) (is_b = 1).
 * GPipe: F0..F(M-1) then B(M-1)..B0.
 * 1F1B with warm-up w: F0..F(w-1), then pairs F(w+j) B(j), then B(M-w)..B(M-1):
 *   F(f) at f (f < w) or 2f - w;  B(b) at 2b + w + 1 (b < M - w) or M + b. */
static int expected_pos(int kind, int S, int M, int s, int is_b, int mb)
{
    if (kind == PPDL_SCHED_GPIPE) return is_b ? M + (M - 1 - mb) : mb;
    int w = warmup_of(S, M, s);
    if (!is_b) return mb < w ? mb : 2 * mb - w;
    return mb < M - w ? 2 * mb + w + 1 : M + mb;
}

/* Everything a correct list of stage s must satisfy, checked op by op */
static void check_shape(int kind, int S, int M, int s, const ppdl_op_list *l)
{
    const char *name = ppdl_schedule_name(kind);
    int per_mb = 2 + 2 * (s > 0) + 2 * (s < S - 1);
    if (l->stage != s) fail("%s S=%d M=%d s=%d: stage field %d", name, S, M, s, l->stage);
    if (l->n != M * per_mb + 1) {
        fail("%s S=%d M=%d s=%d: %d ops, expected %d", name, S, M, s, l->n, M * per_mb + 1);
        return;
    }
    int counts[PPDL_OP_N_KINDS] = {0};
    int compute_idx = 0;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        if ((int)op->kind < 0 || op->kind >= PPDL_OP_N_KINDS) {
            fail("%s S=%d M=%d s=%d op %d: bad kind %d", name, S, M, s, i, (int)op->kind);
            return;
        }
        counts[op->kind]++;
        if (op->kind != PPDL_OP_FORWARD && op->kind != PPDL_OP_BACKWARD) continue;
        int is_b = op->kind == PPDL_OP_BACKWARD;
        int want = expected_pos(kind, S, M, s, is_b, op->mb);
        if (want != compute_idx)
            fail("%s S=%d M=%d s=%d: %s mb %d is compute op %d, expected %d", name, S, M, s,
                 ppdl_op_name(op->kind), op->mb, compute_idx, want);
        compute_idx++;
        /* the recv right before and the send right after, with the adjacent peer */
        int has_recv = is_b ? s < S - 1 : s > 0, has_send = is_b ? s > 0 : s < S - 1;
        ppdl_op_kind rk = is_b ? PPDL_OP_RECV_GRAD : PPDL_OP_RECV_ACT;
        ppdl_op_kind sk = is_b ? PPDL_OP_SEND_GRAD : PPDL_OP_SEND_ACT;
        int peer_in = is_b ? s + 1 : s - 1, peer_out = is_b ? s - 1 : s + 1;
        if (has_recv && (i == 0 || l->ops[i - 1].kind != rk || l->ops[i - 1].mb != op->mb ||
                         l->ops[i - 1].peer != peer_in))
            fail("%s S=%d M=%d s=%d op %d: no %s mb %d from %d right before", name, S, M, s, i,
                 ppdl_op_name(rk), op->mb, peer_in);
        if (has_send && (i + 1 >= l->n || l->ops[i + 1].kind != sk ||
                         l->ops[i + 1].mb != op->mb || l->ops[i + 1].peer != peer_out))
            fail("%s S=%d M=%d s=%d op %d: no %s mb %d to %d right after", name, S, M, s, i,
                 ppdl_op_name(sk), op->mb, peer_out);
        if (op->peer != -1) fail("%s S=%d M=%d s=%d op %d: compute peer %d", name, S, M, s, i, op->peer);
    }
    int want_counts[PPDL_OP_N_KINDS] = {
        [PPDL_OP_RECV_ACT] = s > 0 ? M : 0,      [PPDL_OP_FORWARD] = M,
        [PPDL_OP_SEND_ACT] = s < S - 1 ? M : 0,  [PPDL_OP_RECV_GRAD] = s < S - 1 ? M : 0,
        [PPDL_OP_BACKWARD] = M,                  [PPDL_OP_SEND_GRAD] = s > 0 ? M : 0,
        [PPDL_OP_OPTIMIZER] = 1,
    };
    for (int k = 0; k < PPDL_OP_N_KINDS; k++)
        if (counts[k] != want_counts[k])
            fail("%s S=%d M=%d s=%d: %d %s ops, expected %d", name, S, M, s, counts[k],
                 ppdl_op_name((ppdl_op_kind)k), want_counts[k]);
    const ppdl_op *last = &l->ops[l->n - 1];
    if (last->kind != PPDL_OP_OPTIMIZER || last->mb != -1 || last->peer != -1)
        fail("%s S=%d M=%d s=%d: last op is not optimizer(mb -1, peer -1)", name, S, M, s);
}

/* Forwards before the first backward: the warm-up, plus the first steady-state
 * forward when there is a steady state (M > w) */
static int forwards_before_first_backward(const ppdl_op_list *l)
{
    int n = 0;
    for (int i = 0; i < l->n && l->ops[i].kind != PPDL_OP_BACKWARD; i++)
        n += l->ops[i].kind == PPDL_OP_FORWARD;
    return n;
}

static void test_kind(int kind)
{
    const char *name = ppdl_schedule_name(kind);
    ppdl_op_list lists[S_MAX];
    char err[512];
    int n_cases = 0;

    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            build_all(kind, S, M, lists);
            n_cases++;
            if (ppdl_schedule_check(S, M, lists, err, sizeof err) != 0)
                fail("%s S=%d M=%d rejected: %s", name, S, M, err);
            free_all(S, lists);
        }
    report(kind == PPDL_SCHED_GPIPE ? "gpipe: all S in 1..8, M in 1..12 pass the checker"
                                    : "1f1b: all S in 1..8, M in 1..12 pass the checker");

    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            build_all(kind, S, M, lists);
            for (int s = 0; s < S; s++) check_shape(kind, S, M, s, &lists[s]);
            free_all(S, lists);
        }
    report(kind == PPDL_SCHED_GPIPE
               ? "gpipe: op counts, F/B order (all F, then B in reverse), recv/send around each"
               : "1f1b: op counts, F/B order (warm-up, 1F1B, cool-down), recv/send around each");

    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            build_all(kind, S, M, lists);
            for (int s = 0; s < S; s++) {
                int got = ppdl_schedule_max_in_flight(&lists[s]);
                int want = kind == PPDL_SCHED_GPIPE ? M : (M < S - s ? M : S - s);
                if (got != want)
                    fail("%s S=%d M=%d s=%d: max in flight %d, expected %d", name, S, M, s, got, want);
                if (kind != PPDL_SCHED_1F1B) continue;
                int w = warmup_of(S, M, s);
                int fb = forwards_before_first_backward(&lists[s]);
                if (fb != w + (M > w))
                    fail("1f1b S=%d M=%d s=%d: %d forwards before the first backward, expected warm-up %d + %d",
                         S, M, s, fb, w, M > w);
            }
            free_all(S, lists);
        }
    report(kind == PPDL_SCHED_GPIPE ? "gpipe: max_in_flight = M on every stage"
                                    : "1f1b: warm-up = min(S-s-1, M), max_in_flight = min(M, S-s)");
    diag("%s: %d (S, M) cases", name, n_cases);
}

/* A small hand-made case: the exact 1F1B lists for S = 2, M = 3 */
static void test_literal(void)
{
    ppdl_op_list l[2];
    build_all(PPDL_SCHED_1F1B, 2, 3, l);
    static const ppdl_op want0[] = {
        {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_SEND_ACT, 0, 1},   {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_SEND_ACT, 1, 1},  {PPDL_OP_RECV_GRAD, 0, 1},  {PPDL_OP_BACKWARD, 0, -1},
        {PPDL_OP_FORWARD, 2, -1},  {PPDL_OP_SEND_ACT, 2, 1},   {PPDL_OP_RECV_GRAD, 1, 1},
        {PPDL_OP_BACKWARD, 1, -1}, {PPDL_OP_RECV_GRAD, 2, 1},  {PPDL_OP_BACKWARD, 2, -1},
        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    static const ppdl_op want1[] = {
        {PPDL_OP_RECV_ACT, 0, 0},  {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_BACKWARD, 0, -1},
        {PPDL_OP_SEND_GRAD, 0, 0}, {PPDL_OP_RECV_ACT, 1, 0},  {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_BACKWARD, 1, -1}, {PPDL_OP_SEND_GRAD, 1, 0}, {PPDL_OP_RECV_ACT, 2, 0},
        {PPDL_OP_FORWARD, 2, -1},  {PPDL_OP_BACKWARD, 2, -1}, {PPDL_OP_SEND_GRAD, 2, 0},
        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    int same = l[0].n == 13 && l[1].n == 13 && memcmp(l[0].ops, want0, sizeof want0) == 0 &&
               memcmp(l[1].ops, want1, sizeof want1) == 0;
    ok(same, "1f1b S=2 M=3: the exact op lists of both stages");
    free_all(2, l);
}

/* Build, apply mutate, and expect the checker to reject with a message holding
 * `needle`. Returns 1 when it did. */
typedef void (*mutator)(ppdl_op_list *lists, int S, int M);

static int rejects(int kind, int S, int M, mutator mutate, const char *needle, int show)
{
    ppdl_op_list lists[S_MAX];
    char err[1024] = "";
    build_all(kind, S, M, lists);
    mutate(lists, S, M);
    int rc = ppdl_schedule_check(S, M, lists, err, sizeof err);
    free_all(S, lists);
    int good = rc == -1 && strstr(err, needle) != NULL;
    if (!good)
        fail("%s S=%d M=%d: rc %d, message \"%s\" (wanted one containing \"%s\")",
             ppdl_schedule_name(kind), S, M, rc, err, needle);
    else if (show)
        diag("  -> %s", err);
    return good;
}

/* 1F1B stage 0 waits for the gradient of mb 0 before sending the activation of its
 * last warm-up micro-batch, which stage 1 needs before it can backward mb 0. */
static void deadlock_1f1b(ppdl_op_list *l, int S, int M)
{
    int last_warm = (S - 1 < M ? S - 1 : M) - 1;
    int send = find_op(&l[0], PPDL_OP_SEND_ACT, last_warm);
    int recv = find_op(&l[0], PPDL_OP_RECV_GRAD, 0);
    move_op(&l[0], recv, send);
}

/* GPipe stage 0 waits for the gradient of mb M-1 before sending activation M-1 */
static void deadlock_gpipe(ppdl_op_list *l, int S, int M)
{
    (void)S;
    int send = find_op(&l[0], PPDL_OP_SEND_ACT, M - 1);
    int recv = find_op(&l[0], PPDL_OP_RECV_GRAD, M - 1);
    move_op(&l[0], recv, send);
}

static void missing_send(ppdl_op_list *l, int S, int M)
{
    (void)S;
    remove_op(&l[1], find_op(&l[1], PPDL_OP_SEND_ACT, M / 2));
}

static void duplicate_forward(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    int at = find_op(&l[1], PPDL_OP_FORWARD, 1);
    insert_op(&l[1], at + 1, l[1].ops[at]);
}

/* on the last stage, BACKWARD(0) swapped with FORWARD(0) */
static void backward_first(ppdl_op_list *l, int S, int M)
{
    (void)M;
    ppdl_op_list *last = &l[S - 1];
    int f = find_op(last, PPDL_OP_FORWARD, 0), b = find_op(last, PPDL_OP_BACKWARD, 0);
    ppdl_op tmp = last->ops[f];
    last->ops[f] = last->ops[b];
    last->ops[b] = tmp;
}

static void optimizer_first(ppdl_op_list *l, int S, int M)
{
    (void)M;
    move_op(&l[S - 1], l[S - 1].n - 1, 0);
}

static void no_optimizer(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    l[0].n--;
}

static void send_to_far_stage(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    l[0].ops[find_op(&l[0], PPDL_OP_SEND_ACT, 0)].peer = 2;
}

static void first_stage_receives(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    ppdl_op op = {PPDL_OP_RECV_ACT, 0, -1};
    insert_op(&l[0], 0, op);
}

static void mb_out_of_range(ppdl_op_list *l, int S, int M)
{
    (void)S;
    l[1].ops[find_op(&l[1], PPDL_OP_BACKWARD, 0)].mb = M;
}

static void send_grad_before_backward(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    int b = find_op(&l[1], PPDL_OP_BACKWARD, 0);
    int sg = find_op(&l[1], PPDL_OP_SEND_GRAD, 0);
    move_op(&l[1], sg, b);
}

static void wrong_stage_field(ppdl_op_list *l, int S, int M)
{
    (void)S;
    (void)M;
    l[1].stage = 0;
}

static void test_negative(void)
{
    /* deadlocks: every S >= 2 and M >= S, for both schedules */
    int n = 0;
    for (int S = 2; S <= S_MAX; S++)
        for (int M = S; M <= M_MAX; M++) {
            int show = S == 3 && M == 4;
            rejects(PPDL_SCHED_1F1B, S, M, deadlock_1f1b, "deadlock", show);
            rejects(PPDL_SCHED_GPIPE, S, M, deadlock_gpipe, "deadlock", show);
            n += 2;
        }
    report("deadlocked lists (stage 0 receives a gradient before sending the act it depends on) rejected");
    diag("%d deadlock cases", n);

    /* the deadlock message names each stuck stage and its op */
    {
        ppdl_op_list l[S_MAX];
        char err[1024] = "";
        build_all(PPDL_SCHED_1F1B, 3, 4, l);
        deadlock_1f1b(l, 3, 4);
        ppdl_schedule_check(3, 4, l, err, sizeof err);
        free_all(3, l);
        ok(strstr(err, "stage 0 op 3 (recv_grad mb 0 from stage 1) waits") &&
               strstr(err, "stage 1 op") && strstr(err, "stage 2 op"),
           "deadlock message names every stuck stage with its op index and op");
    }

    /* the buffers bound the play: 1F1B, S = 2, M = 2, stage 0 receives its gradients in
     * the order 1, 0 (F0 F1 RG1 B1 RG0 B0). With messages alone that finishes; but
     * stage 1 holds one micro-batch, so its B1 writes the gradient buffer that carried
     * mb 0's and waits until stage 0 received that, which stage 0 does only after mb 1's:
     * a deadlock where a send completes only at its receive (the checker's rule) */
    {
        ppdl_op_list l[S_MAX];
        char err[1024] = "";
        build_all(PPDL_SCHED_1F1B, 2, 2, l);
        int rg0 = find_op(&l[0], PPDL_OP_RECV_GRAD, 0);
        move_op(&l[0], find_op(&l[0], PPDL_OP_RECV_GRAD, 1), rg0);
        move_op(&l[0], find_op(&l[0], PPDL_OP_BACKWARD, 1), rg0 + 1);
        int rc = ppdl_schedule_check(2, 2, l, err, sizeof err);
        free_all(2, l);
        ok(rc == -1 && strstr(err, "deadlock") && strstr(err, "stage 1 op") && strstr(err, "backward mb 1"),
           "a slot's send buffer reused before its message was received: rejected as a deadlock");
        diag("  -> %s", err);
    }

    struct {
        const char *what;
        mutator mutate;
        const char *needle;
    } cases[] = {
        {"missing send", missing_send, "no send_act for mb"},
        {"duplicated forward", duplicate_forward, "duplicate of op"},
        {"backward before forward", backward_first, "which must precede it"},
        {"optimizer not last", optimizer_first, "optimizer is not the last op"},
        {"no optimizer", no_optimizer, "no optimizer"},
        {"send to a non-adjacent stage", send_to_far_stage, "adjacent stage 1"},
        {"first stage receives an activation", first_stage_receives, "no stage -1"},
        {"micro-batch out of range", mb_out_of_range, "outside 0..5"},
        {"send_grad before its backward", send_grad_before_backward, "which must precede it"},
        {"list stage field wrong", wrong_stage_field, "list 1 says it is stage 0"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        diag("%s:", cases[c].what);
        for (int kind = 0; kind <= 1; kind++) rejects(kind, 4, 6, cases[c].mutate, cases[c].needle, kind == 1);
        char line[128];
        snprintf(line, sizeof line, "rejected with a message: %s", cases[c].what);
        report(line);
    }
}

/* Valid lists that are not what the builder makes still pass: the checker plays
 * the lists, it does not compare them with templates. */
/* GPipe lists with the backwards in mb order 0..M-1 instead of M-1..0 */
static void build_gpipe_backwards_in_order(ppdl_op_list *l, int S, int M)
{
    for (int s = 0; s < S; s++) {
        list_of(PPDL_SCHED_GPIPE, S, M, NULL, NULL, s, 0, &l[s]);
        int per_b = 1 + (s > 0) + (s < S - 1);
        int first_b = M * per_b;
        for (int mb = 0; mb < M; mb++) {
            int from = find_op(&l[s], s < S - 1 ? PPDL_OP_RECV_GRAD : PPDL_OP_BACKWARD, mb);
            for (int k = 0; k < per_b; k++) move_op(&l[s], from + k, first_b + mb * per_b + k);
        }
    }
}

static void test_other_valid(void)
{
    ppdl_op_list l[S_MAX];
    char err[512] = "";
    int S = 4, M = 6;
    build_gpipe_backwards_in_order(l, S, M);
    int rc = ppdl_schedule_check(S, M, l, err, sizeof err);
    int in_order = find_op(&l[0], PPDL_OP_BACKWARD, 0) < find_op(&l[0], PPDL_OP_BACKWARD, 1);
    free_all(S, l);
    ok(rc == 0 && in_order, "a valid hand-made list (GPipe, backwards in mb order) passes");
    if (rc != 0) diag("  %s", err);

    /* stage 1 receives its activations in reverse order: still matched by mb tag, and
     * the sends never block, so it runs */
    build_all(PPDL_SCHED_GPIPE, 2, 3, l);
    int r0 = find_op(&l[1], PPDL_OP_RECV_ACT, 0), r2 = find_op(&l[1], PPDL_OP_RECV_ACT, 2);
    ppdl_op tmp = l[1].ops[r0];
    l[1].ops[r0] = l[1].ops[r2];
    l[1].ops[r2] = tmp;
    int f0 = find_op(&l[1], PPDL_OP_FORWARD, 0), f2 = find_op(&l[1], PPDL_OP_FORWARD, 2);
    tmp = l[1].ops[f0];
    l[1].ops[f0] = l[1].ops[f2];
    l[1].ops[f2] = tmp;
    rc = ppdl_schedule_check(2, 3, l, err, sizeof err);
    free_all(2, l);
    ok(rc == 0, "receiving micro-batches out of order is valid under non-blocking sends");
    if (rc != 0) diag("  %s", err);
}

/* ---- replicated stages (data parallelism inside a stage) ---- */

#define K_MAX 3
#define S_REP 4

/* Replica q of k[s] of stage s: its compute ops are those of its micro-batches
 * (mb mod k[s] == q) in the order of the stage's whole list, whose 1F1B warm-up is
 * W = min(M, k[s+1] + .. + k[S-1]) (positions from expected_pos, written independently
 * of schedule.c), each wrapped in its recv/send; every one of its micro-batches is
 * forwarded and backwarded once; the forwards before its first backward are its
 * micro-batches up to q + W. */
static void check_replica(int kind, int S, int M, const int *k, int s, int q, const ppdl_op_list *l)
{
    const char *name = ppdl_schedule_name(kind);
    int W = 0;
    for (int t = s + 1; t < S; t++) W += k[t];
    if (W > M) W = M;
    int nq = (M - q + k[s] - 1) / k[s], n_f = 0, n_b = 0, last_pos = -1, fb = 0, seen_b = 0;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        if (op->kind != PPDL_OP_FORWARD && op->kind != PPDL_OP_BACKWARD) continue;
        int is_b = op->kind == PPDL_OP_BACKWARD;
        if (op->mb < 0 || op->mb >= M || op->mb % k[s] != q) {
            fail("%s S=%d M=%d s=%d q=%d of %d: op %d is micro-batch %d, not its own", name, S, M, s, q, k[s], i,
                 op->mb);
            return;
        }
        /* expected_pos's 1F1B with warm-up W, written for the one-replica warm-up */
        int pos = kind == PPDL_SCHED_GPIPE ? expected_pos(kind, S, M, s, is_b, op->mb)
                                           : (!is_b ? (op->mb < W ? op->mb : 2 * op->mb - W)
                                                    : (op->mb < M - W ? 2 * op->mb + W + 1 : M + op->mb));
        if (pos <= last_pos)
            fail("%s S=%d M=%d s=%d q=%d of %d: %s mb %d out of the stage's order", name, S, M, s, q, k[s],
                 ppdl_op_name(op->kind), op->mb);
        last_pos = pos;
        n_f += !is_b;
        n_b += is_b;
        seen_b |= is_b;
        fb += !is_b && !seen_b;
        int has_recv = is_b ? s < S - 1 : s > 0, has_send = is_b ? s > 0 : s < S - 1;
        ppdl_op_kind rk = is_b ? PPDL_OP_RECV_GRAD : PPDL_OP_RECV_ACT;
        ppdl_op_kind sk = is_b ? PPDL_OP_SEND_GRAD : PPDL_OP_SEND_ACT;
        if (has_recv && (i == 0 || l->ops[i - 1].kind != rk || l->ops[i - 1].mb != op->mb))
            fail("%s S=%d M=%d s=%d q=%d: op %d has no %s right before", name, S, M, s, q, i, ppdl_op_name(rk));
        if (has_send && (i + 1 >= l->n || l->ops[i + 1].kind != sk || l->ops[i + 1].mb != op->mb))
            fail("%s S=%d M=%d s=%d q=%d: op %d has no %s right after", name, S, M, s, q, i, ppdl_op_name(sk));
    }
    if (n_f != nq || n_b != nq)
        fail("%s S=%d M=%d s=%d q=%d of %d: %d forwards and %d backwards, expected %d", name, S, M, s, q, k[s], n_f,
             n_b, nq);
    int want_fb = 0;
    for (int j = q; j < M && j <= (kind == PPDL_SCHED_GPIPE ? M : q + W); j += k[s]) want_fb++;
    if (fb != want_fb)
        fail("%s S=%d M=%d s=%d q=%d of %d: %d forwards before the first backward, expected %d", name, S, M, s, q,
             k[s], fb, want_fb);
}

/* Every layout of S = 1..4 stages with 1..3 replicas each, M = (most replicas)..12,
 * both schedules: the layout's lists pass the checker and each replica's list is its
 * part of the stage's (check_replica). When every stage has the same k replicas, the
 * replica's list with its micro-batches renamed 0, 1, .. is exactly the one-replica
 * list for its count n_q: a proper 1F1B (GPipe) over its own micro-batches. */
static void test_replicated(void)
{
    ppdl_op_list lists[S_REP * K_MAX];
    char err[1024];
    int n_layouts = 0;
    for (int kind = 0; kind <= 1; kind++) {
        const char *name = ppdl_schedule_name(kind);
        for (int S = 1; S <= S_REP; S++) {
            int n_codes = 1;
            for (int s = 0; s < S; s++) n_codes *= K_MAX;
            for (int code = 0; code < n_codes; code++) {
                int k[S_REP], kmax = 1, uniform = 1, c = code;
                for (int s = 0; s < S; s++, c /= K_MAX) {
                    k[s] = 1 + c % K_MAX;
                    if (k[s] > kmax) kmax = k[s];
                    uniform &= k[s] == k[0];
                }
                for (int M = kmax; M <= M_MAX; M++) {
                    int n = 0;
                    n_layouts++;
                    for (int s = 0; s < S; s++)
                        for (int q = 0; q < k[s]; q++) list_of(kind, S, M, k, NULL, s, q, &lists[n++]);
                    if (ppdl_schedule_check_layout(S, M, k, lists, err, sizeof err) != 0)
                        fail("%s S=%d M=%d k=%d,%d,%d,%d rejected: %s", name, S, M, k[0], S > 1 ? k[1] : 0,
                             S > 2 ? k[2] : 0, S > 3 ? k[3] : 0, err);
                    n = 0;
                    for (int s = 0; s < S; s++)
                        for (int q = 0; q < k[s]; q++, n++) {
                            const ppdl_op_list *l = &lists[n];
                            check_replica(kind, S, M, k, s, q, l);
                            if (!uniform) continue;
                            int nq = (M - q + k[s] - 1) / k[s];
                            ppdl_op_list local = {l->stage, l->n, malloc((size_t)l->n * sizeof(ppdl_op))};
                            if (!local.ops) abort();
                            for (int i = 0; i < l->n; i++) {
                                local.ops[i] = l->ops[i];
                                if (l->ops[i].mb >= 0) local.ops[i].mb = l->ops[i].mb / k[s];
                            }
                            check_shape(kind, S, nq, s, &local);
                            int peak = ppdl_schedule_max_in_flight(l);
                            int want = kind == PPDL_SCHED_GPIPE ? nq : (nq < S - s ? nq : S - s);
                            if (peak != want)
                                fail("%s S=%d M=%d s=%d q=%d of %d: %d in flight, expected %d", name, S, M, s, q,
                                     k[s], peak, want);
                            free(local.ops);
                        }
                    for (int i = 0; i < n; i++) ppdl_op_list_free(&lists[i]);
                }
            }
        }
        report(kind == PPDL_SCHED_GPIPE
                   ? "gpipe, replicated stages (S 1..4, 1..3 replicas each, M up to 12): the checker passes; "
                     "each replica runs GPipe over its own micro-batches"
                   : "1f1b, replicated stages (S 1..4, 1..3 replicas each, M up to 12): the checker passes; "
                     "warm-up = the later stages' replicas; with equal replica counts 1F1B over its own "
                     "micro-batches");
    }
    diag("%d replicated (layout, M, schedule) cases", n_layouts);

    /* the exact lists of 2 stages x 2 replicas, 1F1B, M = 4: two pipelines side by
     * side, stage 0's replicas with both their forwards before their first backward
     * (the stage's list filtered to micro-batches 0, 2 would be F0 B0 F2 B2: each
     * gradient awaited before the next forward) */
    {
        ppdl_op_list l[4];
        int k[2] = {2, 2};
        for (int s = 0, n = 0; s < 2; s++)
            for (int q = 0; q < 2; q++) list_of(PPDL_SCHED_1F1B, 2, 4, k, NULL, s, q, &l[n++]);
        static const ppdl_op want_s0q1[] = {
            {PPDL_OP_FORWARD, 1, -1},  {PPDL_OP_SEND_ACT, 1, 1},  {PPDL_OP_FORWARD, 3, -1},
            {PPDL_OP_SEND_ACT, 3, 1},  {PPDL_OP_RECV_GRAD, 1, 1}, {PPDL_OP_BACKWARD, 1, -1},
            {PPDL_OP_RECV_GRAD, 3, 1}, {PPDL_OP_BACKWARD, 3, -1}, {PPDL_OP_OPTIMIZER, -1, -1},
        };
        static const ppdl_op want_s1q0[] = {
            {PPDL_OP_RECV_ACT, 0, 0},  {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_BACKWARD, 0, -1},
            {PPDL_OP_SEND_GRAD, 0, 0}, {PPDL_OP_RECV_ACT, 2, 0},  {PPDL_OP_FORWARD, 2, -1},
            {PPDL_OP_BACKWARD, 2, -1}, {PPDL_OP_SEND_GRAD, 2, 0}, {PPDL_OP_OPTIMIZER, -1, -1},
        };
        int same = l[1].n == 9 && l[2].n == 9 && memcmp(l[1].ops, want_s0q1, sizeof want_s0q1) == 0 &&
                   memcmp(l[2].ops, want_s1q0, sizeof want_s1q0) == 0;
        ok(same && ppdl_schedule_check_layout(2, 4, k, l, err, sizeof err) == 0,
           "1f1b 2 stages x 2 replicas, M=4: the exact lists of stage 0 replica 1 and stage 1 replica 0");
        /* a replica that takes a micro-batch of its sibling is rejected */
        l[1].ops[0].mb = 2;
        ok(ppdl_schedule_check_layout(2, 4, k, l, err, sizeof err) == -1 &&
               strstr(err, "stage 0 replica 1 op 0") && strstr(err, "belongs to replica 0 of 2"),
           "a replica running its sibling's micro-batch is rejected: %s", err);
        l[1].ops[0].mb = 1;
        /* stage 0 replica 1 waits for gradient 1 before sending activation 3, which
         * stage 1 replica 1 needs first: a deadlock across replicas */
        ppdl_op_list_free(&l[3]);
        list_of(PPDL_SCHED_GPIPE, 2, 4, k, NULL, 1, 1, &l[3]);
        move_op(&l[1], find_op(&l[1], PPDL_OP_RECV_GRAD, 1), find_op(&l[1], PPDL_OP_SEND_ACT, 3));
        ok(ppdl_schedule_check_layout(2, 4, k, l, err, sizeof err) == -1 && strstr(err, "deadlock") &&
               strstr(err, "stage 0 replica 1 op 3 (recv_grad mb 1 from stage 1) waits") &&
               strstr(err, "stage 0 replica 0 finished"),
           "a deadlock across replicas is found and names the stuck replicas: %s", err);
        for (int i = 0; i < 4; i++) ppdl_op_list_free(&l[i]);
        int bad[2] = {3, 1};
        ok(ppdl_schedule_check_layout(2, 2, bad, l, err, sizeof err) == -1 && strstr(err, "3 replicas"),
           "more replicas than micro-batches is rejected: %s", err);
    }
}

/* ---- zero bubble ---- */

/* the most micro-batches stage s may hold (docs/schedules.md), written here apart from
 * schedule.c's ppdl_schedule_zb_caps */
static int zb_cap(int kind, int S, int s)
{
    switch (kind) {
    case PPDL_SCHED_ZB_H1: return S;
    case PPDL_SCHED_ZB_H2: return 2 * S - 1;
    default: return S - s; /* ZB-1P: 1F1B's stage s */
    }
}

/* replica q (of k) of stage s's list: its own micro-batches q, q + k, .. only, passes
 * in micro-batch order, each in its messages, at most cap held (k = 1: the stage's) */
static void check_zb_replica_shape(int kind, int S, int M, int s, int q, int k, int cap, const ppdl_op_list *l)
{
    const char *name = ppdl_schedule_name(kind);
    int next_f = q, next_b = q, next_sum = q, split = 0, nq = (M - q + k - 1) / k;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        int prev_is = i > 0 ? (int)l->ops[i - 1].kind : -1, next_is = i + 1 < l->n ? (int)l->ops[i + 1].kind : -1;
        switch (op->kind) {
        case PPDL_OP_FORWARD:
            if (op->mb != next_f)
                fail("%s S=%d M=%d s=%d q=%d op %d: forward of mb %d out of order", name, S, M, s, q, i, op->mb);
            next_f += k;
            if ((s > 0 && prev_is != PPDL_OP_RECV_ACT) || (s < S - 1 && next_is != PPDL_OP_SEND_ACT))
                fail("%s S=%d M=%d s=%d q=%d op %d: forward not between its recv and send", name, S, M, s, q, i);
            break;
        case PPDL_OP_BACKWARD:
        case PPDL_OP_BACKWARD_INPUT:
            if (op->mb != next_b)
                fail("%s S=%d M=%d s=%d q=%d op %d: backward of mb %d out of order", name, S, M, s, q, i, op->mb);
            next_b += k;
            if ((s < S - 1 && prev_is != PPDL_OP_RECV_GRAD) || (s > 0 && next_is != PPDL_OP_SEND_GRAD))
                fail("%s S=%d M=%d s=%d q=%d op %d: backward not between its recv and send", name, S, M, s, q, i);
            if (op->kind == PPDL_OP_BACKWARD && s > 0)
                fail("%s S=%d M=%d s=%d q=%d op %d: a fused backward on a stage that sends gradients", name, S, M, s,
                     q, i);
            if (op->kind == PPDL_OP_BACKWARD_INPUT && s == 0 && next_is == PPDL_OP_BACKWARD_WEIGHT &&
                l->ops[i + 1].mb == op->mb)
                fail("%s S=%d M=%d s=0 q=%d op %d: B then its W, not fused", name, S, M, q, i);
            split += op->kind == PPDL_OP_BACKWARD_INPUT;
            if (op->kind == PPDL_OP_BACKWARD) {
                if (op->mb != next_sum)
                    fail("%s S=%d M=%d s=%d q=%d op %d: weight sum of mb %d out of order", name, S, M, s, q, i, op->mb);
                next_sum += k;
            }
            break;
        case PPDL_OP_BACKWARD_WEIGHT:
            if (op->mb != next_sum)
                fail("%s S=%d M=%d s=%d q=%d op %d: weight sum of mb %d out of order", name, S, M, s, q, i, op->mb);
            next_sum += k;
            break;
        default: break;
        }
    }
    int want_n = nq * (2 + 2 * (s > 0) + 2 * (s < S - 1)) + split + 1, end = q + k * nq;
    if (next_f != end || next_b != end || next_sum != end || l->n != want_n)
        fail("%s S=%d M=%d s=%d q=%d of %d: %d forwards, %d backwards, %d sums, %d ops (expected %d each, %d ops)",
             name, S, M, s, q, k, (next_f - q) / k, (next_b - q) / k, (next_sum - q) / k, l->n, nq, want_n);
    int held = ppdl_schedule_max_in_flight(l);
    if (held > cap) fail("%s S=%d M=%d s=%d q=%d of %d: holds %d micro-batches, cap %d", name, S, M, s, q, k, held, cap);
    if ((split > 0) != (ppdl_schedule_max_pending_weight(l) > 0))
        fail("%s S=%d M=%d s=%d q=%d: %d split backwards, %d W buffers", name, S, M, s, q, split,
             ppdl_schedule_max_pending_weight(l));
}

/* stage s's list (one replica): as above, at most min(M, cap) held */
static void check_zb_shape(int kind, int S, int M, int s, const ppdl_op_list *l)
{
    int cap = zb_cap(kind, S, s) < M ? zb_cap(kind, S, s) : M;
    check_zb_replica_shape(kind, S, M, s, 0, 1, cap, l);
}

/* ZB-1P holds on every stage what 1F1B holds there: the peak of micro-batches held
 * (forwarded, W not yet run) of each built list equals 1F1B's list's, min(M, S - s).
 * The control: ZB-H1's lists (one cap S for every stage) hold more than 1F1B's on
 * some stage, so the comparison can fail. */
static void test_zb_1p_memory(void)
{
    ppdl_op_list zb[S_MAX], f1b[S_MAX], h1[S_MAX];
    int cases = 0, h1_more = 0;
    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            build_all(PPDL_SCHED_ZB_1P, S, M, zb);
            build_all(PPDL_SCHED_1F1B, S, M, f1b);
            build_all(PPDL_SCHED_ZB_H1, S, M, h1);
            for (int s = 0; s < S; s++, cases++) {
                int a = ppdl_schedule_max_in_flight(&zb[s]), b = ppdl_schedule_max_in_flight(&f1b[s]);
                int want = M < S - s ? M : S - s;
                if (a != b || b != want)
                    fail("zb-1p S=%d M=%d s=%d: holds %d micro-batches, 1f1b %d, min(M, S-s) %d", S, M, s, a, b, want);
                h1_more += ppdl_schedule_max_in_flight(&h1[s]) > b;
            }
            free_all(S, zb);
            free_all(S, f1b);
            free_all(S, h1);
        }
    char line[160];
    snprintf(line, sizeof line, "zb-1p: every stage's peak in flight = 1F1B's = min(M, S-s) (%d stage lists)", cases);
    report(line);
    ok(h1_more > 0, "the control: zb-h1 holds more than 1f1b on %d of those stage lists", h1_more);
}

static void test_zb(int kind)
{
    const char *name = ppdl_schedule_name(kind);
    ppdl_op_list lists[S_MAX];
    char err[512], line[160];
    int splits = 0;
    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            build_all(kind, S, M, lists);
            if (ppdl_schedule_check(S, M, lists, err, sizeof err) != 0) fail("%s S=%d M=%d rejected: %s", name, S, M, err);
            for (int s = 0; s < S; s++) {
                check_zb_shape(kind, S, M, s, &lists[s]);
                splits += ppdl_schedule_max_pending_weight(&lists[s]) > 0;
            }
            free_all(S, lists);
        }
    snprintf(line, sizeof line, "%s: all S in 1..8, M in 1..12 pass the checker", name);
    report(line);
    ok(splits > 0, "%s: the lists split backwards (%d stage lists hold W buffers)", name, splits);

    /* the unit-time play: never longer than 1F1B's 3M + 3(S-1), shorter where S > 1 */
    ppdl_zb_pass order[3 * M_MAX];
    int cap[S_MAX];
    for (int S = 1; S <= S_MAX; S++)
        for (int M = 1; M <= M_MAX; M++) {
            for (int s = 0; s < S; s++) cap[s] = zb_cap(kind, S, s);
            long t = ppdl_zb_order(S, M, cap, 0, order), f1b = 3L * M + 3L * (S - 1);
            if (t != ppdl_schedule_unit_step(kind, S, M))
                fail("%s S=%d M=%d: the play %ld units, ppdl_schedule_unit_step %ld", name, S, M, t,
                     ppdl_schedule_unit_step(kind, S, M));
            if (t > f1b || (S > 1 && t >= f1b)) fail("%s S=%d M=%d: %ld units, 1F1B %ld", name, S, M, t, f1b);
            if (kind == PPDL_SCHED_ZB_H1 && S == 2 && M % 2 == 0 && t != 3L * M + 1)
                fail("zb-h1 S=2 M=%d: %ld units, expected 3M + 1 = %d", M, t, 3 * M + 1);
            if (kind == PPDL_SCHED_ZB_H2 && M >= S && t != 3L * M + S - 1)
                fail("zb-h2 S=%d M=%d: %ld units, expected 3M + S - 1 = %d", S, M, t, 3 * M + S - 1);
            if (kind == PPDL_SCHED_ZB_1P && t != 3L * M + 2L * (S - 1))
                fail("zb-1p S=%d M=%d: %ld units, expected 3M + 2(S - 1) = %d", S, M, t, 3 * M + 2 * (S - 1));
        }
    snprintf(line, sizeof line, "%s: the unit play beats 1F1B's 3M+3(S-1)%s", name,
             kind == PPDL_SCHED_ZB_H1   ? "; 3M+1 at S = 2, even M"
             : kind == PPDL_SCHED_ZB_H2 ? "; 3M+S-1 (the least) when M >= S"
                                        : "; 3M+2(S-1) for every S, M");
    report(line);
    if (kind == PPDL_SCHED_ZB_1P) test_zb_1p_memory();
}

/* The step of lists played with every F, B and W of stage s taking k[s] units (a
 * fused backward twice that; the balanced plans' shape, zero_bubble.h) and messages
 * none, each list as early as its order and its receives allow: independent of
 * zero_bubble.c's play, which it reproduces for the zero-bubble lists. */
static int is_pass(ppdl_op_kind k)
{
    return k == PPDL_OP_FORWARD || k == PPDL_OP_BACKWARD_INPUT || k == PPDL_OP_BACKWARD_WEIGHT;
}

static long unit_play(int S, int M, const int *k, int n_lists, const ppdl_op_list *lists)
{
    long *act = malloc((size_t)S * M * sizeof(long)), *grad = malloc((size_t)S * M * sizeof(long));
    long *t = calloc((size_t)n_lists, sizeof(long)), end = 0;
    int *pc = calloc((size_t)n_lists, sizeof(int));
    if (!act || !grad || !t || !pc) abort();
    for (int j = 0; j < S * M; j++) act[j] = grad[j] = -1;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < n_lists; i++)
            for (; pc[i] < lists[i].n; pc[i]++, moved = 1) {
                const ppdl_op *op = &lists[i].ops[pc[i]];
                int s = lists[i].stage;
                long *in = op->kind == PPDL_OP_RECV_ACT ? &act[(s - 1) * M + op->mb]
                           : op->kind == PPDL_OP_RECV_GRAD ? &grad[(s + 1) * M + op->mb] : NULL;
                if (in && *in < 0) break;
                if (in && *in > t[i]) t[i] = *in;
                if (op->kind == PPDL_OP_SEND_ACT) act[s * M + op->mb] = t[i];
                if (op->kind == PPDL_OP_SEND_GRAD) grad[s * M + op->mb] = t[i];
                t[i] += (long)k[s] * (op->kind == PPDL_OP_BACKWARD ? 2 : is_pass(op->kind));
            }
    }
    for (int i = 0; i < n_lists; i++) {
        if (pc[i] < lists[i].n) abort(); /* the checker passed them: no deadlock */
        if (t[i] > end) end = t[i];
    }
    free(act);
    free(grad);
    free(t);
    free(pc);
    return end;
}

/* The stage's unreplicated zero-bubble list cut down to replica q's micro-batches:
 * the simplest sound replica list, which the play with replicas as devices beats */
static void restricted_list(int kind, int S, int M, int s, int q, int k, ppdl_op_list *out)
{
    list_of(kind, S, M, NULL, NULL, s, 0, out);
    int n = 0;
    for (int i = 0; i < out->n; i++)
        if (out->ops[i].mb < 0 || out->ops[i].mb % k == q) out->ops[n++] = out->ops[i];
    out->n = n;
}

/* Zero bubble on replicated stages: every layout of S = 1..4 stages with 1..3
 * replicas each, M = (most replicas)..12. Each replica list passes the checker with
 * its layout, runs its own micro-batches' passes and weight sums in micro-batch order
 * (the bits of 1F1B's replica) and holds at most its cap, written here from 1F1B's
 * replica lists: ZB-1P what 1F1B's replica holds, ZB-H1 the most any 1F1B replica
 * holds, ZB-H2 twice that less one. One replica per stage gives the unreplicated lists
 * exactly. The play of the lists in units (unit_play: a pass of stage s k[s] units) is
 * ppdl_schedule_unit_step_layout's, and it is compared with 1F1B on the same layout and
 * with the restricted lists (restricted_list). */
static void test_zb_replicated(int kind)
{
    const char *name = ppdl_schedule_name(kind);
    ppdl_op_list zb[S_REP * K_MAX], f1b[S_REP * K_MAX], cut[S_REP * K_MAX];
    char err[1024], line[200];
    int n_layouts = 0, same_as_plain = 0, n_plain = 0, beats_f1b = 0, loses_f1b = 0, beats_cut = 0, loses_cut = 0, cut_bad = 0;
    long worst_vs_f1b = 0, worst_vs_cut = 0;
    for (int S = 1; S <= S_REP; S++) {
        int n_codes = 1;
        for (int s = 0; s < S; s++) n_codes *= K_MAX;
        for (int code = 0; code < n_codes; code++) {
            int k[S_REP], kmax = 1, c = code, D = 0;
            for (int s = 0; s < S; s++, c /= K_MAX) {
                k[s] = 1 + c % K_MAX;
                if (k[s] > kmax) kmax = k[s];
                D += k[s];
            }
            for (int M = kmax; M <= M_MAX; M++) {
                n_layouts++;
                int most = 0;
                for (int s = 0, d = 0; s < S; s++)
                    for (int q = 0; q < k[s]; q++, d++) {
                        list_of(kind, S, M, k, NULL, s, q, &zb[d]);
                        list_of(PPDL_SCHED_1F1B, S, M, k, NULL, s, q, &f1b[d]);
                        restricted_list(kind, S, M, s, q, k[s], &cut[d]);
                        int h = ppdl_schedule_max_in_flight(&f1b[d]);
                        if (h > most) most = h;
                    }
                if (ppdl_schedule_check_layout(S, M, k, zb, err, sizeof err) != 0)
                    fail("%s S=%d M=%d k=%d,%d,%d,%d rejected: %s", name, S, M, k[0], S > 1 ? k[1] : 0,
                         S > 2 ? k[2] : 0, S > 3 ? k[3] : 0, err);
                if (D == S) { /* one replica each: the plain lists */
                    for (int s = 0; s < S; s++, n_plain++) {
                        ppdl_op_list plain;
                        list_of(kind, S, M, NULL, NULL, s, 0, &plain);
                        same_as_plain += plain.n == zb[s].n &&
                                         memcmp(plain.ops, zb[s].ops, (size_t)plain.n * sizeof(ppdl_op)) == 0;
                        ppdl_op_list_free(&plain);
                    }
                }
                for (int s = 0, d = 0; s < S; s++)
                    for (int q = 0; q < k[s]; q++, d++) {
                        int f = ppdl_schedule_max_in_flight(&f1b[d]);
                        int cap = kind == PPDL_SCHED_ZB_1P ? f : kind == PPDL_SCHED_ZB_H1 ? most : 2 * most - 1;
                        if (D == S) cap = zb_cap(kind, S, s) < M ? zb_cap(kind, S, s) : M;
                        check_zb_replica_shape(kind, S, M, s, q, k[s], cap, &zb[d]);
                    }
                long t = unit_play(S, M, k, D, zb), t1 = unit_play(S, M, k, D, f1b);
                if (t != ppdl_schedule_unit_step_layout(kind, S, M, k))
                    fail("%s S=%d M=%d k=%d,%d,%d,%d: the lists play %ld units, ppdl_schedule_unit_step_layout %ld",
                         name, S, M, k[0], S > 1 ? k[1] : 0, S > 2 ? k[2] : 0, S > 3 ? k[3] : 0, t,
                         ppdl_schedule_unit_step_layout(kind, S, M, k));
                beats_f1b += t < t1;
                loses_f1b += t > t1;
                if (t - t1 > worst_vs_f1b) worst_vs_f1b = t - t1;
                if (ppdl_schedule_check_layout(S, M, k, cut, err, sizeof err) != 0) {
                    cut_bad++;
                } else {
                    long tc = unit_play(S, M, k, D, cut);
                    beats_cut += t < tc;
                    loses_cut += t > tc;
                    if (t - tc > worst_vs_cut) worst_vs_cut = t - tc;
                }
                for (int d = 0; d < D; d++) {
                    ppdl_op_list_free(&zb[d]);
                    ppdl_op_list_free(&f1b[d]);
                    ppdl_op_list_free(&cut[d]);
                }
            }
        }
    }
    diag("%s: %d layouts; unit step vs 1f1b: %d shorter, %d longer (worst +%ld); vs the restricted lists: %d "
         "shorter, %d longer (worst +%ld), %d restricted layouts rejected", name, n_layouts, beats_f1b, loses_f1b,
         worst_vs_f1b, beats_cut, loses_cut, worst_vs_cut, cut_bad);
    snprintf(line, sizeof line, "%s, replicated stages (S 1..4, 1..3 replicas each, M up to 12): the checker passes, "
             "own micro-batches in order, at most the cap held", name);
    report(line);
    /* the play with replicas as devices is never slower than 1F1B on the layout in
     * units; against the restricted lists (sound too: the checker passes them all) it
     * is shorter on most layouts and longer on a few (the greedy play is not optimal;
     * the diag above counts them) */
    ok(loses_f1b == 0 && beats_f1b > 0, "%s: the unit step on a replicated layout is never longer than 1f1b's "
       "(shorter on %d of %d layouts)", name, beats_f1b, n_layouts);
    ok(cut_bad == 0 && beats_cut > 5 * loses_cut, "%s: the stage's list restricted to the replica passes the checker; "
       "the play is shorter than it on %d layouts, longer on %d (worst +%ld units)", name, beats_cut, loses_cut,
       worst_vs_cut);
    ok(same_as_plain == n_plain && n_plain > 0, "%s: one replica per stage gives the unreplicated lists (%d of %d "
       "stage lists)", name, same_as_plain, n_plain);
}

/* ZB-H1, S = 2, M = 3, written out (the play of zero_bubble.h by hand, units from 0):
 *   stage 0: F0@0 F1@1 (idle) B0@3 W0@4 -> fused; B1@5 F2@6 (F before W) W1@7 B2@9 W2@10 -> fused
 *   stage 1: F0@1 B0@2 F1@3 B1@4 W0@5 W1@6 (F2 arrives at 7) F2@7 B2@8 W2@9 */
static void test_zb_literal(void)
{
    ppdl_op_list l[2];
    build_all(PPDL_SCHED_ZB_H1, 2, 3, l);
    static const ppdl_op want0[] = {
        {PPDL_OP_FORWARD, 0, -1},         {PPDL_OP_SEND_ACT, 0, 1},         {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_SEND_ACT, 1, 1},         {PPDL_OP_RECV_GRAD, 0, 1},        {PPDL_OP_BACKWARD, 0, -1},
        {PPDL_OP_RECV_GRAD, 1, 1},        {PPDL_OP_BACKWARD_INPUT, 1, -1},  {PPDL_OP_FORWARD, 2, -1},
        {PPDL_OP_SEND_ACT, 2, 1},         {PPDL_OP_BACKWARD_WEIGHT, 1, -1}, {PPDL_OP_RECV_GRAD, 2, 1},
        {PPDL_OP_BACKWARD, 2, -1},        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    static const ppdl_op want1[] = {
        {PPDL_OP_RECV_ACT, 0, 0},         {PPDL_OP_FORWARD, 0, -1},         {PPDL_OP_BACKWARD_INPUT, 0, -1},
        {PPDL_OP_SEND_GRAD, 0, 0},        {PPDL_OP_RECV_ACT, 1, 0},         {PPDL_OP_FORWARD, 1, -1},
        {PPDL_OP_BACKWARD_INPUT, 1, -1},  {PPDL_OP_SEND_GRAD, 1, 0},        {PPDL_OP_BACKWARD_WEIGHT, 0, -1},
        {PPDL_OP_BACKWARD_WEIGHT, 1, -1}, {PPDL_OP_RECV_ACT, 2, 0},         {PPDL_OP_FORWARD, 2, -1},
        {PPDL_OP_BACKWARD_INPUT, 2, -1},  {PPDL_OP_SEND_GRAD, 2, 0},        {PPDL_OP_BACKWARD_WEIGHT, 2, -1},
        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    int same = l[0].n == 14 && l[1].n == 16 && memcmp(l[0].ops, want0, sizeof want0) == 0 &&
               memcmp(l[1].ops, want1, sizeof want1) == 0;
    ok(same, "zb-h1 S=2 M=3: the exact op lists of both stages");
    free_all(2, l);
}

/* the first W of the last stage moved to just before its B */
static void zb_w_before_b(ppdl_op_list *l, int S, int M)
{
    (void)M;
    ppdl_op_list *t = &l[S - 1];
    int w = find_op(t, PPDL_OP_BACKWARD_WEIGHT, 0);
    move_op(t, w, find_op(t, PPDL_OP_BACKWARD_INPUT, 0));
}

/* the last stage's W of mb 0 moved to just after the W of mb 1 (each W still after its
 * B, also where B1 directly precedes W1, as in zb-1p) */
static void zb_w_out_of_order(ppdl_op_list *l, int S, int M)
{
    (void)M;
    ppdl_op_list *t = &l[S - 1];
    move_op(t, find_op(t, PPDL_OP_BACKWARD_WEIGHT, 0), find_op(t, PPDL_OP_BACKWARD_WEIGHT, 1));
}

/* the last stage's W of mb 0 before its gradient is sent */
static void zb_w_before_send(ppdl_op_list *l, int S, int M)
{
    (void)M;
    ppdl_op_list *t = &l[S - 1];
    move_op(t, find_op(t, PPDL_OP_BACKWARD_WEIGHT, 0), find_op(t, PPDL_OP_SEND_GRAD, 0));
}

/* the last stage's mb 0 gets a fused BACKWARD besides its B and W */
static void zb_both_forms(ppdl_op_list *l, int S, int M)
{
    (void)M;
    ppdl_op_list *t = &l[S - 1];
    insert_op(t, find_op(t, PPDL_OP_BACKWARD_INPUT, 0) + 1, (ppdl_op){PPDL_OP_BACKWARD, 0, -1});
}

static void zb_no_w(ppdl_op_list *l, int S, int M)
{
    (void)M;
    remove_op(&l[S - 1], find_op(&l[S - 1], PPDL_OP_BACKWARD_WEIGHT, 1));
}

static void test_zb_negative(void)
{
    struct {
        const char *what;
        mutator mutate;
        const char *needle;
    } cases[] = {
        {"W before its B", zb_w_before_b, "(backward_input mb 0), which must precede it"},
        {"W's out of micro-batch order", zb_w_out_of_order, "must accumulate in micro-batch order"},
        {"W before its gradient is sent", zb_w_before_send, "(send_grad mb 0), which must precede it"},
        {"a fused and a split backward for one micro-batch", zb_both_forms, "also has a split backward"},
        {"a B without its W", zb_no_w, "has a backward_input for mb 1 but no backward_weight"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        diag("%s:", cases[c].what);
        for (int kind = PPDL_SCHED_ZB_H1; kind <= PPDL_SCHED_ZB_1P; kind++)
            for (int S = 2; S <= 4; S++) rejects(kind, S, 6, cases[c].mutate, cases[c].needle, S == 4);
        char line[128];
        snprintf(line, sizeof line, "zero bubble, rejected with a message: %s", cases[c].what);
        report(line);
    }

    /* buffers taken while held, in lists every other rule accepts: one stage (S = 1),
     * M = 3. A W buffer: B2 B0 takes mb 2's buffer (2 mod 2 = 0 mod 2) before W... */
    ppdl_op_list l;
    char err[512] = "";
    static const ppdl_op wbuf[] = {
        {PPDL_OP_FORWARD, 0, -1},          {PPDL_OP_FORWARD, 1, -1},          {PPDL_OP_FORWARD, 2, -1},
        {PPDL_OP_BACKWARD_INPUT, 2, -1},   {PPDL_OP_BACKWARD_INPUT, 0, -1},   {PPDL_OP_BACKWARD_WEIGHT, 0, -1},
        {PPDL_OP_BACKWARD_INPUT, 1, -1},   {PPDL_OP_BACKWARD_WEIGHT, 1, -1},  {PPDL_OP_BACKWARD_WEIGHT, 2, -1},
        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    l.stage = 0;
    l.n = (int)(sizeof wbuf / sizeof wbuf[0]);
    l.ops = (ppdl_op *)wbuf;
    ok(ppdl_schedule_check(1, 3, &l, err, sizeof err) == -1 && strstr(err, "op 4 (backward_input mb 0)") &&
           strstr(err, "takes the W buffer of mb 2"),
       "a W buffer taken while its micro-batch's W is pending is rejected: %s", err);
    /* ...and a slot: F0 F1 B1 F2 B0 B2 holds 2, and F2 takes mb 0's slot (fused
     * backwards, where any order of sums is allowed) */
    static const ppdl_op slot[] = {
        {PPDL_OP_FORWARD, 0, -1},  {PPDL_OP_FORWARD, 1, -1},  {PPDL_OP_BACKWARD, 1, -1},
        {PPDL_OP_FORWARD, 2, -1},  {PPDL_OP_BACKWARD, 0, -1}, {PPDL_OP_BACKWARD, 2, -1},
        {PPDL_OP_OPTIMIZER, -1, -1},
    };
    l.n = (int)(sizeof slot / sizeof slot[0]);
    l.ops = (ppdl_op *)slot;
    ok(ppdl_schedule_check(1, 3, &l, err, sizeof err) == -1 && strstr(err, "op 3 (forward mb 2)") &&
           strstr(err, "takes the slot of mb 0"),
       "a slot taken while its micro-batch is held is rejected: %s", err);

    int k[2] = {1, 2}, none[2] = {1, 0};
    ok(ppdl_schedule_supports(PPDL_SCHED_ZB_H1, 2, k, err, sizeof err) == 0 &&
           ppdl_schedule_supports(PPDL_SCHED_1F1B, 2, k, err, sizeof err) == 0 &&
           ppdl_schedule_supports(PPDL_SCHED_ZB_H2, 2, NULL, err, sizeof err) == 0 &&
           ppdl_schedule_supports(PPDL_SCHED_ZB_1P, 2, none, err, sizeof err) == -1 && strstr(err, "stage 1 has 0"),
       "every schedule runs replicated stages; a stage without replicas is refused: %s", err);
}

static void test_names(void)
{
    ok(ppdl_schedule_parse("gpipe") == PPDL_SCHED_GPIPE && ppdl_schedule_parse("1f1b") == PPDL_SCHED_1F1B &&
           ppdl_schedule_parse("1F1B") == -1 && ppdl_schedule_parse("") == -1 &&
           ppdl_schedule_parse(NULL) == -1 && strcmp(ppdl_schedule_name(PPDL_SCHED_1F1B), "1f1b") == 0 &&
           strcmp(ppdl_schedule_name(PPDL_SCHED_GPIPE), "gpipe") == 0 &&
           strcmp(ppdl_op_name(PPDL_OP_RECV_GRAD), "recv_grad") == 0 &&
           ppdl_schedule_parse("zb-h1") == PPDL_SCHED_ZB_H1 && ppdl_schedule_parse("zb-h2") == PPDL_SCHED_ZB_H2 &&
           strcmp(ppdl_schedule_name(PPDL_SCHED_ZB_H2), "zb-h2") == 0 &&
           ppdl_schedule_parse("zb-1p") == PPDL_SCHED_ZB_1P && strcmp(ppdl_schedule_name(PPDL_SCHED_ZB_1P), "zb-1p") == 0 &&
           strcmp(ppdl_op_name(PPDL_OP_BACKWARD_WEIGHT), "backward_weight") == 0,
       "schedule names parse and print, unknown names give -1");
    char err[128] = "";
    ok(ppdl_schedule_check(0, 4, NULL, err, sizeof err) == -1 && strstr(err, "S=0"),
       "check with S = 0 is rejected: %s", err);
}

/* Timed zero-bubble lists (ppdl_schedule_make with tm, zero_bubble.h's timed play).
 *  - Every time 1, messages free: exactly the unit play's lists (S 1..6, M 1..10).
 *  - Random times (f, b, w 1..40 ticks, messages 0..8), random layouts (1..3 replicas
 *    a stage up to S = 3, then one each up to S = 5), M up to 10: the lists pass the
 *    checker and the zero-bubble shape (passes in micro-batch order, in their
 *    messages, at most the cap held), ppdl_schedule_counts_timed counts them, and
 *    the step of the chosen orders is never longer than that of the unit play's orders
 *    under the same times (both replayed).
 *  - The bench's stages (perf/bench-pipeline, profiled on this machine: F 7.69 / 7.31,
 *    B 8.85 / 9.80, W 5.63 / 5.35 ms, S = 2, M = 8): ZB-H1's timed orders are shorter
 *    than the unit play's. */
static void test_zb_timed(void)
{
    static const int kinds[] = {PPDL_SCHED_ZB_H1, PPDL_SCHED_ZB_H2, PPDL_SCHED_ZB_1P};
    int bad = 0, n = 0;
    for (int z = 0; z < 3; z++)
        for (int S = 1; S <= 6; S++)
            for (int M = 1; M <= 10; M++) {
                long ones[4 * 6];
                for (int i = 0; i < 4 * S; i++) ones[i] = i < 3 * S;
                ppdl_zb_times tm = {ones, ones + S, ones + 2 * S, ones + 3 * S};
                for (int st = 0; st < S; st++, n++) {
                    ppdl_op_list a, b;
                    list_of(kinds[z], S, M, NULL, NULL, st, 0, &a);
                    list_of(kinds[z], S, M, NULL, &tm, st, 0, &b);
                    if (a.n != b.n || memcmp(a.ops, b.ops, (size_t)a.n * sizeof *a.ops)) {
                        if (!bad) diag("%s S=%d M=%d stage %d: the timed lists with unit times differ",
                                       ppdl_schedule_name(kinds[z]), S, M, st);
                        bad++;
                    }
                    ppdl_op_list_free(&a);
                    ppdl_op_list_free(&b);
                }
            }
    ok(bad == 0, "timed zero-bubble lists with every time 1: the unit play's lists (%d stage lists)", n);

    unsigned long long g = 12345;
#define RND(lo, hi) ((g = g * 6364136223846793005ULL + 1442695040888963407ULL), (lo) + (long)((g >> 33) % (unsigned long long)((hi) - (lo) + 1)))
    int cases = 0, better = 0, accepted = 0;
    for (int c = 0; c < 400; c++) {
        int kind = kinds[RND(0, 2)], S = (int)RND(2, 5), k[5], kmax = 1, D = 0;
        for (int st = 0; st < S; st++) {
            k[st] = S <= 3 ? (int)RND(1, 3) : 1;
            if (k[st] > kmax) kmax = k[st];
            D += k[st];
        }
        int M = (int)RND(kmax, 10);
        long t[4 * 5];
        for (int i = 0; i < 3 * S; i++) t[i] = RND(1, 40);
        for (int i = 3 * S; i < 4 * S; i++) t[i] = RND(0, 8);
        ppdl_zb_times tm = {t, t + S, t + 2 * S, t + 3 * S};
        ppdl_op_list *lists = calloc((size_t)D, sizeof *lists);
        int *cap = malloc((size_t)D * sizeof *cap), *held = malloc(2 * (size_t)D * sizeof *held), *pending = held + D;
        ppdl_schedule_zb_caps_layout(kind, S, M, k, cap);
        for (int st = 0, d = 0; st < S; st++)
            for (int q = 0; q < k[st]; q++, d++) list_of(kind, S, M, k, &tm, st, q, &lists[d]);
        char err[256];
        if (ppdl_schedule_check_layout(S, M, k, lists, err, sizeof err))
            fail("%s S=%d M=%d: %s", ppdl_schedule_name(kind), S, M, err);
        long step = ppdl_schedule_counts_timed(kind, S, M, k, &tm, held, pending);
        for (int st = 0, d = 0; st < S; st++)
            for (int q = 0; q < k[st]; q++, d++) {
                check_zb_replica_shape(kind, S, M, st, q, k[st], cap[d] < M ? cap[d] : M, &lists[d]);
                if (held[d] != ppdl_schedule_max_in_flight(&lists[d]) ||
                    pending[d] != ppdl_schedule_max_pending_weight(&lists[d]))
                    fail("%s S=%d M=%d replica %d: counted %d/%d, the list %d/%d", ppdl_schedule_name(kind), S, M, d,
                         held[d], pending[d], ppdl_schedule_max_in_flight(&lists[d]),
                         ppdl_schedule_max_pending_weight(&lists[d]));
            }
        ppdl_zb_pass *unit = malloc(3 * (size_t)S * (size_t)M * sizeof *unit);
        ppdl_zb_order_layout(S, M, k, cap, NULL, -1, unit);
        long unit_step = ppdl_zb_replay_layout(S, M, k, unit, &tm);
        /* what a run uses: the timed lists only where they pass and hold no more than
         * the unit play's (the planner's count) */
        if (ppdl_schedule_timed_ok(&(ppdl_schedule_spec){kind, S, M, 1, k, &tm}, err, sizeof err)) {
            accepted++;
            for (int st = 0, d = 0; st < S; st++)
                for (int q = 0; q < k[st]; q++, d++) {
                    ppdl_op_list u;
                    list_of(kind, S, M, k, NULL, st, q, &u);
                    if (ppdl_schedule_max_in_flight(&lists[d]) > ppdl_schedule_max_in_flight(&u) ||
                        ppdl_schedule_max_pending_weight(&lists[d]) > ppdl_schedule_max_pending_weight(&u))
                        fail("%s S=%d M=%d replica %d: accepted, but holds more than the unit list",
                             ppdl_schedule_name(kind), S, M, d);
                    ppdl_op_list_free(&u);
                }
        } else if (!strstr(err, "holds") && !strstr(err, "deadlock") && !strstr(err, "slot")) {
            fail("%s S=%d M=%d: refused for an unexpected reason: %s", ppdl_schedule_name(kind), S, M, err);
        }
        if (step > unit_step)
            fail("%s S=%d M=%d: the timed orders take %ld ticks, the unit play's %ld", ppdl_schedule_name(kind), S, M,
                 step, unit_step);
        better += step < unit_step;
        cases++;
        free(unit);
        for (int d = 0; d < D; d++) ppdl_op_list_free(&lists[d]);
        free(lists);
        free(cap);
        free(held);
    }
#undef RND
    if (!better) fail("no case where the timed orders are shorter than the unit play's");
    if (!accepted || accepted == cases) fail("%d of %d timed lists accepted: the test sees one side only", accepted, cases);
    char what[320];
    snprintf(what, sizeof what, "timed zero-bubble lists, %d random cases (times, messages, replicas): all pass the "
             "checker and the shape, counted right, never longer than the unit play's orders under the times "
             "(shorter in %d); %d accepted for a run, each holding no more than the unit list", cases, better,
             accepted);
    report(what);

    long f[2] = {7690, 7310}, b[2] = {8850, 9800}, w[2] = {5630, 5350}, msg[2] = {0, 0};
    ppdl_zb_times tm = {f, b, w, msg};
    int cap[2], held[2], pending[2];
    ppdl_schedule_zb_caps(PPDL_SCHED_ZB_H1, 2, cap);
    long step = ppdl_schedule_counts_timed(PPDL_SCHED_ZB_H1, 2, 8, NULL, &tm, held, pending);
    ppdl_zb_pass unit[48];
    ppdl_zb_order_layout(2, 8, NULL, cap, NULL, -1, unit);
    long unit_step = ppdl_zb_replay_layout(2, 8, NULL, unit, &tm);
    ok(step < unit_step, "zb-h1 on the bench's profiled stages (S = 2, M = 8): timed orders %.2f ms, the unit play's "
       "%.2f ms under the same times", step / 1e3, unit_step / 1e3);
}


/* ---- ZB-H1's orders against every order (S = 2, M = 5) ----
 * Every order of a stage's 3M passes (F's, B's and W's each in micro-batch order, B
 * after its F, W after its B, at most `cap` micro-batches held), of both stages, is
 * replayed under the times by the replay below (written apart from the library's:
 * a pair that deadlocks gives -1), and the least step is the optimum. */
enum { EX_M = 5, EX_P = 3 * EX_M, EX_MAX = 1024 };
static ppdl_zb_pass ex_seq[EX_MAX][EX_P];
static int ex_n;

static void ex_gen(ppdl_zb_pass *cur, int n, int f, int b, int w, int cap)
{
    if (n == EX_P) {
        if (ex_n < EX_MAX) memcpy(ex_seq[ex_n++], cur, sizeof ex_seq[0]);
        return;
    }
    if (b < f) {
        cur[n] = (ppdl_zb_pass){'B', b, 0};
        ex_gen(cur, n + 1, f, b + 1, w, cap);
    }
    if (f < EX_M && f - w < cap) {
        cur[n] = (ppdl_zb_pass){'F', f, 0};
        ex_gen(cur, n + 1, f + 1, b, w, cap);
    }
    if (w < b) {
        cur[n] = (ppdl_zb_pass){'W', w, 0};
        ex_gen(cur, n + 1, f, b, w + 1, cap);
    }
}

/* the step of stage 0's order a and stage 1's order b, or -1 where they deadlock */
static long ex_replay(const ppdl_zb_pass *a, const ppdl_zb_pass *b, const ppdl_zb_times *tm)
{
    const ppdl_zb_pass *o[2] = {a, b};
    int nx[2] = {0, 0}, left = 2 * EX_P;
    long t[2] = {0, 0}, ef[2][EX_M], eb[2][EX_M];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < EX_M; i++) ef[s][i] = eb[s][i] = -1;
    while (left) {
        int moved = 0;
        for (int s = 0; s < 2; s++)
            for (; nx[s] < EX_P; nx[s]++, moved++, left--) {
                ppdl_zb_pass p = o[s][nx[s]];
                long need, d;
                if (p.kind == 'F') {
                    need = s == 0 ? 0 : ef[0][p.mb] < 0 ? -1 : ef[0][p.mb] + tm->msg[0];
                    d = tm->f[s];
                } else if (p.kind == 'B') {
                    need = s == 1 ? ef[1][p.mb] : eb[1][p.mb] < 0 ? -1 : eb[1][p.mb] + tm->msg[0];
                    d = tm->b[s];
                } else {
                    need = eb[s][p.mb];
                    d = tm->w[s];
                }
                if (need < 0) break;
                t[s] = (t[s] > need ? t[s] : need) + d;
                if (p.kind == 'F') ef[s][p.mb] = t[s];
                if (p.kind == 'B') eb[s][p.mb] = t[s];
            }
        if (!moved) return -1;
    }
    return t[0] > t[1] ? t[0] : t[1];
}

static void test_zb_exhaustive(void)
{
    int cap[2];
    ppdl_schedule_zb_caps(PPDL_SCHED_ZB_H1, 2, cap);
    ppdl_zb_pass cur[EX_P];
    ex_n = 0;
    ex_gen(cur, 0, 0, 0, 0, cap[0]);
    if (ex_n >= EX_MAX) fail("more orders than the test holds (%d)", ex_n);
    srand(22);
    int cases = 40, optimal = 0, bad = 0;
    double worst = 1;
    for (int c = 0; c < cases; c++) {
        long f[2], b[2], w[2], msg[2] = {rand() % 30, 0};
        for (int s = 0; s < 2; s++) {
            f[s] = 20 + rand() % 60;
            b[s] = 20 + rand() % 60;
            w[s] = 20 + rand() % 60;
        }
        ppdl_zb_times tm = {f, b, w, msg};
        long best = -1;
        for (int i = 0; i < ex_n; i++)
            for (int j = 0; j < ex_n; j++) {
                long t = ex_replay(ex_seq[i], ex_seq[j], &tm);
                if (t >= 0 && (best < 0 || t < best)) best = t;
            }
        ppdl_zb_pass all[2 * EX_P];
        ppdl_zb_order_layout(2, EX_M, NULL, cap, &tm, -1, all);
        long lib = ex_replay(all, all + EX_P, &tm), lib2 = ppdl_zb_replay_layout(2, EX_M, NULL, all, &tm);
        if (lib < best || lib != lib2) bad++;
        optimal += lib == best;
        if ((double)lib / best > worst) worst = (double)lib / best;
    }
    /* the bounds: the local search is not exact (at M = 8 with equal times it can stop
     * just short of the best, as perf/bench-zb-orders.c shows), so the best in 3 of 4
     * cases and within 5% in all; the plays alone, before the search, fail both */
    ok(bad == 0 && optimal >= cases * 3 / 4 && worst < 1.05,
       "zb-h1, S = 2, M = 5, %d random cases (passes 20..79 ticks, messages 0..29): the timed orders are the best of "
       "all %d x %d pairs of orders in %d, at most %.1f%% longer in the others (both replays agree: %s)",
       cases, ex_n, ex_n, optimal, 100 * (worst - 1), bad ? "no" : "yes");
}

int main(void)
{
    plan(66);
    test_kind(PPDL_SCHED_GPIPE);
    test_kind(PPDL_SCHED_1F1B);
    test_literal();
    test_negative();
    test_other_valid();
    test_replicated();
    test_zb(PPDL_SCHED_ZB_H1);
    test_zb(PPDL_SCHED_ZB_H2);
    test_zb(PPDL_SCHED_ZB_1P);
    test_zb_replicated(PPDL_SCHED_ZB_H1);
    test_zb_replicated(PPDL_SCHED_ZB_H2);
    test_zb_replicated(PPDL_SCHED_ZB_1P);
    test_zb_literal();
    test_zb_timed();
    test_zb_exhaustive();
    test_zb_negative();
    test_names();
    return exit_status();
}
