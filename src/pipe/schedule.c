/* schedule.c — pipeline schedules as data (see schedule.h), and their checker.
 *
 * S = number of stages, s = one stage (0..S-1), M = number of micro-batches,
 * mb = one micro-batch (0..M-1). A stage's list is what it does in one training
 * step; "F(mb)" below is the triple [RECV_ACT(mb) if s > 0] FORWARD(mb)
 * [SEND_ACT(mb) if s < S-1] and "B(mb)" is [RECV_GRAD(mb) if s < S-1] BACKWARD(mb)
 * [SEND_GRAD(mb) if s > 0].
 *
 *   GPipe (torchgpipe's order):  F(0) F(1) .. F(M-1)  B(M-1) .. B(1) B(0)  OPTIMIZER
 *   1F1B (PipeDream-Flush, Megatron non-interleaved), w = min(S-s-1, M):
 *       warm-up   F(0) .. F(w-1)
 *       steady    F(w) B(0) F(w+1) B(1) .. F(M-1) B(M-w-1)
 *       cool-down B(M-w) .. B(M-1)
 *       OPTIMIZER
 *   so the last stage runs F0 B0 F1 B1 .., and stage s never holds more than
 *   min(M, S-s) forwarded-but-not-backwarded micro-batches (GPipe holds M).
 *
 * Each list has M*(2 + 2*[s > 0] + 2*[s < S-1]) + 1 ops.
 *
 * The checker (ppdl_schedule_check) first checks each list on its own (the rules are
 * listed above check_list), then plays all S lists against each other under the
 * communication model of schedule.h: a SEND always runs; a RECV runs once the peer has
 * issued the matching SEND that no earlier RECV consumed. Every sweep advances each
 * stage as far as it can; the play stops when a sweep advances nothing. If some stage
 * has not reached its end then, no stage can ever advance again: a deadlock, reported
 * with the op each unfinished stage is stuck on. Cost: O(S*M) memory, and at most
 * (number of ops + 1) sweeps of O(S) each plus O(1) per op run, so O(S * N_ops) time
 * in the worst case (a few sweeps in practice).
 */
#include "pipe/schedule.h"

#include "core/error.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// names

int ppdl_schedule_parse(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "gpipe") == 0) return PPDL_SCHED_GPIPE;
    if (strcmp(name, "1f1b") == 0) return PPDL_SCHED_1F1B;
    return -1;
}

const char *ppdl_schedule_name(int kind)
{
    switch (kind) {
    case PPDL_SCHED_GPIPE: return "gpipe";
    case PPDL_SCHED_1F1B: return "1f1b";
    default: return "unknown";
    }
}

const char *ppdl_op_name(ppdl_op_kind k)
{
    switch (k) {
    case PPDL_OP_RECV_ACT: return "recv_act";
    case PPDL_OP_FORWARD: return "forward";
    case PPDL_OP_SEND_ACT: return "send_act";
    case PPDL_OP_RECV_GRAD: return "recv_grad";
    case PPDL_OP_BACKWARD: return "backward";
    case PPDL_OP_SEND_GRAD: return "send_grad";
    case PPDL_OP_OPTIMIZER: return "optimizer";
    default: return "unknown";
    }
}

// ----------------------------------------------------------------------------
// building

static void push(ppdl_op_list *l, ppdl_op_kind kind, int mb, int peer)
{
    l->ops[l->n].kind = kind;
    l->ops[l->n].mb = mb;
    l->ops[l->n].peer = peer;
    l->n++;
}

/* F(mb) on stage s of S: receive the input (not on the first stage), run, send on */
static void push_forward(ppdl_op_list *l, int S, int s, int mb)
{
    if (s > 0) push(l, PPDL_OP_RECV_ACT, mb, s - 1);
    push(l, PPDL_OP_FORWARD, mb, -1);
    if (s < S - 1) push(l, PPDL_OP_SEND_ACT, mb, s + 1);
}

/* B(mb) on stage s of S: receive d(output) (not on the last stage), run, send back */
static void push_backward(ppdl_op_list *l, int S, int s, int mb)
{
    if (s < S - 1) push(l, PPDL_OP_RECV_GRAD, mb, s + 1);
    push(l, PPDL_OP_BACKWARD, mb, -1);
    if (s > 0) push(l, PPDL_OP_SEND_GRAD, mb, s - 1);
}

static void build_gpipe(ppdl_op_list *l, int S, int M, int s)
{
    for (int mb = 0; mb < M; mb++) push_forward(l, S, s, mb);
    for (int mb = M - 1; mb >= 0; mb--) push_backward(l, S, s, mb);
}

static void build_1f1b(ppdl_op_list *l, int S, int M, int s)
{
    int warmup = S - s - 1 < M ? S - s - 1 : M;
    int next_f = 0, next_b = 0;
    while (next_f < warmup) push_forward(l, S, s, next_f++);
    while (next_f < M) {
        push_forward(l, S, s, next_f++);
        push_backward(l, S, s, next_b++);
    }
    while (next_b < M) push_backward(l, S, s, next_b++);
}

void ppdl_schedule_build(int kind, int S, int M, int s, ppdl_op_list *out)
{
    PPDL_CHECK(out != NULL, "ppdl_schedule_build: out is NULL");
    PPDL_CHECK(kind == PPDL_SCHED_GPIPE || kind == PPDL_SCHED_1F1B,
               "ppdl_schedule_build: unknown schedule kind %d", kind);
    PPDL_CHECK(S >= 1 && M >= 1 && s >= 0 && s < S,
               "ppdl_schedule_build: need S >= 1, M >= 1, 0 <= s < S (got S=%d M=%d s=%d)",
               S, M, s);
    int per_mb = 2 + 2 * (s > 0) + 2 * (s < S - 1);
    int cap = M * per_mb + 1;
    out->stage = s;
    out->n = 0;
    out->ops = ppdl_xmalloc((size_t)cap * sizeof(ppdl_op));
    if (kind == PPDL_SCHED_GPIPE)
        build_gpipe(out, S, M, s);
    else
        build_1f1b(out, S, M, s);
    push(out, PPDL_OP_OPTIMIZER, -1, -1);
    PPDL_CHECK(out->n == cap, "ppdl_schedule_build: built %d ops, expected %d", out->n, cap);
}

void ppdl_op_list_free(ppdl_op_list *l)
{
    if (!l) return;
    free(l->ops);
    l->ops = NULL;
    l->n = 0;
}

int ppdl_schedule_max_in_flight(const ppdl_op_list *l)
{
    int held = 0, most = 0;
    for (int i = 0; l && i < l->n; i++) {
        if (l->ops[i].kind == PPDL_OP_FORWARD) held++;
        if (l->ops[i].kind == PPDL_OP_BACKWARD) held--;
        if (held > most) most = held;
    }
    return most;
}

// ----------------------------------------------------------------------------
// checking one list on its own

/* "recv_grad mb 3 from stage 2", "forward mb 0", "optimizer" */
static const char *op_str(const ppdl_op *op, char *buf, size_t len)
{
    const char *name = ppdl_op_name(op->kind);
    switch (op->kind) {
    case PPDL_OP_RECV_ACT:
    case PPDL_OP_RECV_GRAD:
        snprintf(buf, len, "%s mb %d from stage %d", name, op->mb, op->peer);
        break;
    case PPDL_OP_SEND_ACT:
    case PPDL_OP_SEND_GRAD:
        snprintf(buf, len, "%s mb %d to stage %d", name, op->mb, op->peer);
        break;
    case PPDL_OP_FORWARD:
    case PPDL_OP_BACKWARD:
        snprintf(buf, len, "%s mb %d", name, op->mb);
        break;
    default:
        snprintf(buf, len, "%s", name);
        break;
    }
    return buf;
}

/* ppdl_errf with the "stage s op i (op): " prefix every list error carries */
static int op_err(char *err, size_t errlen, int s, int i, const ppdl_op *op,
                  const char *fmt, ...) PPDL_PRINTF(6, 7);
static int op_err(char *err, size_t errlen, int s, int i, const ppdl_op *op,
                  const char *fmt, ...)
{
    char what[256], opbuf[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ppdl_errf(err, errlen, "schedule: stage %d op %d (%s): %s", s, i,
                     op_str(op, opbuf, sizeof opbuf), what);
}

/* The peer a well-formed op of this kind has on stage s: s-1, s+1, or -1 */
static int expected_peer(ppdl_op_kind kind, int s)
{
    switch (kind) {
    case PPDL_OP_RECV_ACT:
    case PPDL_OP_SEND_GRAD: return s - 1;
    case PPDL_OP_SEND_ACT:
    case PPDL_OP_RECV_GRAD: return s + 1;
    default: return -1;
    }
}

/* Whether stage s of S must run this kind once per micro-batch (else never) */
static int kind_required(ppdl_op_kind kind, int S, int s)
{
    switch (kind) {
    case PPDL_OP_RECV_ACT:
    case PPDL_OP_SEND_GRAD: return s > 0;
    case PPDL_OP_SEND_ACT:
    case PPDL_OP_RECV_GRAD: return s < S - 1;
    default: return 1;
    }
}

/* Rules for one list (stage s of S, M micro-batches):
 *  - kinds are known; OPTIMIZER has mb -1 and peer -1 and is the last op, exactly once;
 *    every other op has 0 <= mb < M; compute ops have peer -1; RECV_ACT/SEND_GRAD have
 *    peer s-1, SEND_ACT/RECV_GRAD peer s+1 (so stage 0 has no RECV_ACT/SEND_GRAD and
 *    stage S-1 no SEND_ACT/RECV_GRAD);
 *  - each (kind, mb) the stage needs occurs exactly once;
 *  - per mb: RECV_ACT < FORWARD < SEND_ACT, FORWARD < BACKWARD, RECV_GRAD < BACKWARD <
 *    SEND_GRAD (positions in the list).
 * pos is a scratch array of PPDL_OP_N_KINDS * M ints. */
static int check_list(int S, int M, int s, const ppdl_op_list *l, int *pos, char *err,
                      size_t errlen)
{
    if (l->stage != s)
        return ppdl_errf(err, errlen, "schedule: list %d says it is stage %d", s, l->stage);
    if (l->n < 1 || !l->ops)
        return ppdl_errf(err, errlen, "schedule: stage %d has an empty op list", s);
    for (int j = 0; j < PPDL_OP_N_KINDS * M; j++) pos[j] = -1;
    int n_opt = 0;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        if ((int)op->kind < 0 || op->kind >= PPDL_OP_N_KINDS)
            return ppdl_errf(err, errlen, "schedule: stage %d op %d has unknown kind %d", s, i,
                             (int)op->kind);
        if (op->kind == PPDL_OP_OPTIMIZER) {
            if (op->mb != -1 || op->peer != -1)
                return op_err(err, errlen, s, i, op, "optimizer needs mb -1 and peer -1, has mb %d peer %d",
                              op->mb, op->peer);
            if (++n_opt > 1) return op_err(err, errlen, s, i, op, "second optimizer step");
            if (i != l->n - 1)
                return op_err(err, errlen, s, i, op, "optimizer is not the last op (%d ops follow)",
                              l->n - 1 - i);
            continue;
        }
        if (op->mb < 0 || op->mb >= M)
            return op_err(err, errlen, s, i, op, "micro-batch outside 0..%d", M - 1);
        if (!kind_required(op->kind, S, s))
            return op_err(err, errlen, s, i, op, "stage %d of %d has no stage %d to talk to", s, S,
                          expected_peer(op->kind, s));
        int want_peer = expected_peer(op->kind, s);
        if (op->peer != want_peer) {
            if (op->kind == PPDL_OP_FORWARD || op->kind == PPDL_OP_BACKWARD)
                return op_err(err, errlen, s, i, op, "compute op must have peer -1, has %d", op->peer);
            return op_err(err, errlen, s, i, op, "peer must be the adjacent stage %d", want_peer);
        }
        int *p = &pos[op->kind * M + op->mb];
        if (*p >= 0) return op_err(err, errlen, s, i, op, "duplicate of op %d", *p);
        *p = i;
    }
    if (n_opt == 0)
        return ppdl_errf(err, errlen, "schedule: stage %d has no optimizer step (must be last)", s);

    for (int mb = 0; mb < M; mb++) {
        for (int k = 0; k < PPDL_OP_N_KINDS; k++) {
            if (k == PPDL_OP_OPTIMIZER || !kind_required((ppdl_op_kind)k, S, s)) continue;
            if (pos[k * M + mb] < 0)
                return ppdl_errf(err, errlen, "schedule: stage %d has no %s for mb %d", s,
                                 ppdl_op_name((ppdl_op_kind)k), mb);
        }
        /* pairs (a, b): op a of mb must come before op b of mb, when both exist */
        static const ppdl_op_kind before[][2] = {
            {PPDL_OP_RECV_ACT, PPDL_OP_FORWARD},   {PPDL_OP_FORWARD, PPDL_OP_SEND_ACT},
            {PPDL_OP_FORWARD, PPDL_OP_BACKWARD},   {PPDL_OP_RECV_GRAD, PPDL_OP_BACKWARD},
            {PPDL_OP_BACKWARD, PPDL_OP_SEND_GRAD},
        };
        for (size_t r = 0; r < sizeof before / sizeof before[0]; r++) {
            int ia = pos[before[r][0] * M + mb], ib = pos[before[r][1] * M + mb];
            if (ia < 0 || ib < 0 || ia < ib) continue;
            return op_err(err, errlen, s, ib, &l->ops[ib],
                          "comes before op %d (%s mb %d), which must precede it", ia,
                          ppdl_op_name(before[r][0]), mb);
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// playing the lists against each other

/* Message slots: act[s*M + mb] counts SEND_ACT(mb) from s to s+1 issued and not yet
 * received; grad[s*M + mb] the same for SEND_GRAD(mb) from s to s-1. */
typedef struct play_state {
    int S, M;
    int *pc;               /* (S) next op index of each stage */
    int *act, *grad;       /* (S*M) messages in flight */
} play_state;

/* Run op pc of stage s if it can run now; 1 when it ran, 0 when blocked */
static int try_step(play_state *ps, const ppdl_op_list *l, int s)
{
    const ppdl_op *op = &l->ops[ps->pc[s]];
    int M = ps->M;
    switch (op->kind) {
    case PPDL_OP_SEND_ACT: ps->act[s * M + op->mb]++; break;
    case PPDL_OP_SEND_GRAD: ps->grad[s * M + op->mb]++; break;
    case PPDL_OP_RECV_ACT:
        if (ps->act[op->peer * M + op->mb] == 0) return 0;
        ps->act[op->peer * M + op->mb]--;
        break;
    case PPDL_OP_RECV_GRAD:
        if (ps->grad[op->peer * M + op->mb] == 0) return 0;
        ps->grad[op->peer * M + op->mb]--;
        break;
    default: break;
    }
    ps->pc[s]++;
    return 1;
}

/* "deadlock: stage 0 op 5 (recv_grad mb 0 from stage 1) waits; stage 1 ..." */
static int report_deadlock(const play_state *ps, const ppdl_op_list *lists, char *err,
                           size_t errlen)
{
    char msg[PPDL_ERR_LEN * 2], opbuf[96];
    size_t used = (size_t)snprintf(msg, sizeof msg,
                                   "schedule: deadlock, no stage can advance:");
    for (int s = 0; s < ps->S && used < sizeof msg; s++) {
        if (ps->pc[s] >= lists[s].n)
            used += (size_t)snprintf(msg + used, sizeof msg - used, " stage %d finished;", s);
        else
            used += (size_t)snprintf(msg + used, sizeof msg - used,
                                     " stage %d op %d (%s) waits;", s, ps->pc[s],
                                     op_str(&lists[s].ops[ps->pc[s]], opbuf, sizeof opbuf));
    }
    if (used < sizeof msg && used > 0 && msg[used - 1] == ';') msg[used - 1] = '\0';
    return ppdl_errf(err, errlen, "%s", msg);
}

static int play(int S, int M, const ppdl_op_list *lists, char *err, size_t errlen)
{
    play_state ps = {.S = S, .M = M};
    ps.pc = ppdl_xcalloc((size_t)S, sizeof(int));
    ps.act = ppdl_xcalloc((size_t)S * (size_t)M, sizeof(int));
    ps.grad = ppdl_xcalloc((size_t)S * (size_t)M, sizeof(int));
    int progressed = 1, rc = 0;
    while (progressed) {
        progressed = 0;
        for (int s = 0; s < S; s++)
            while (ps.pc[s] < lists[s].n && try_step(&ps, &lists[s], s)) progressed = 1;
    }
    for (int s = 0; s < S && rc == 0; s++)
        if (ps.pc[s] < lists[s].n) rc = report_deadlock(&ps, lists, err, errlen);
    /* per-list counts make every message matched once all lists finish; kept as a
     * guard so the checker stays sound if the list rules above are ever relaxed */
    for (int j = 0; j < S * M && rc == 0; j++) {
        if (ps.act[j] != 0)
            rc = ppdl_errf(err, errlen,
                           "schedule: stage %d sent the activation of mb %d %d time(s) more "
                           "than stage %d received it", j / M, j % M, ps.act[j], j / M + 1);
        else if (ps.grad[j] != 0)
            rc = ppdl_errf(err, errlen,
                           "schedule: stage %d sent the gradient of mb %d %d time(s) more "
                           "than stage %d received it", j / M, j % M, ps.grad[j], j / M - 1);
    }
    free(ps.pc);
    free(ps.act);
    free(ps.grad);
    return rc;
}

int ppdl_schedule_check(int S, int M, const ppdl_op_list *lists, char *err, size_t errlen)
{
    if (S < 1 || M < 1)
        return ppdl_errf(err, errlen, "schedule: need at least 1 stage and 1 micro-batch (got S=%d M=%d)",
                         S, M);
    if (!lists) return ppdl_errf(err, errlen, "schedule: no op lists given");
    int *pos = ppdl_xmalloc((size_t)PPDL_OP_N_KINDS * (size_t)M * sizeof(int));
    int rc = 0;
    for (int s = 0; s < S && rc == 0; s++) rc = check_list(S, M, s, &lists[s], pos, err, errlen);
    free(pos);
    if (rc == 0) rc = play(S, M, lists, err, errlen);
    return rc;
}
