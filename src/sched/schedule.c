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
 *       warm-up F(0) .. F(w-1); steady F(w) B(0) F(w+1) B(1) .. F(M-1) B(M-w-1);
 *       cool-down B(M-w) .. B(M-1); OPTIMIZER
 *   so the last stage runs F0 B0 F1 B1 .., and stage s never holds more than
 *   min(M, S-s) forwarded-but-not-backwarded micro-batches (GPipe holds M).
 *   Replicated stages (ppdl_schedule_make with k): stage s on k_s replicas has the
 *   warm-up w = min(M, k_{s+1} + .. + k_{S-1}), and replica q keeps the ops of its
 *   micro-batches mb mod k_s == q.
 *   ZB-H1, ZB-H2, ZB-1P: the order of sched/zero_bubble.h's play, "F(mb)" as above, "B(mb)"
 *   with BACKWARD_INPUT for BACKWARD, "W(mb)" = BACKWARD_WEIGHT; where W(mb) directly
 *   follows B(mb) on a stage that sends no gradient (stage 0) the two are one BACKWARD.
 *
 * A GPipe or 1F1B list has M*(2 + 2*[s > 0] + 2*[s < S-1]) + 1 ops; a zero-bubble list
 * one more per split backward. The checker (ppdl_schedule_check, ..._layout) is at the
 * end. */
#include "sched/schedule.h"
#include "sched/build_impl.h"
#include "sched/zero_bubble.h"

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
    if (strcmp(name, "zb-h1") == 0) return PPDL_SCHED_ZB_H1;
    if (strcmp(name, "zb-h2") == 0) return PPDL_SCHED_ZB_H2;
    if (strcmp(name, "zb-1p") == 0) return PPDL_SCHED_ZB_1P;
    if (strcmp(name, "interleaved") == 0) return PPDL_SCHED_INTERLEAVED;
    if (strcmp(name, "zb-v") == 0) return PPDL_SCHED_ZB_V;
    if (strcmp(name, "auto") == 0) return PPDL_SCHED_AUTO;
    return -1;
}

int ppdl_schedule_splits_backward(int kind)
{
    return kind == PPDL_SCHED_ZB_H1 || kind == PPDL_SCHED_ZB_H2 || kind == PPDL_SCHED_ZB_1P || kind == PPDL_SCHED_ZB_V;
}

int ppdl_schedule_chunked(int kind)
{
    return kind == PPDL_SCHED_INTERLEAVED || kind == PPDL_SCHED_ZB_V;
}

int ppdl_schedule_supports(int kind, int S, const int *k, char *err, size_t errlen)
{
    /* every schedule of one stage per rank runs every layout: the zero-bubble ones
     * play each replica as a device of its own (sched/zero_bubble.h); what is left to
     * refuse is a stage without replicas, and replicas under a chunked schedule */
    for (int s = 0; k && s < S; s++) {
        if (k[s] < 1) return ppdl_errf(err, errlen, "stage %d has %d replicas: expected at least 1", s, k[s]);
        if (k[s] > 1 && ppdl_schedule_chunked(kind))
            return ppdl_errf(err, errlen, "stage %d has %d replicas: schedule %s places single stages on ranks, "
                             "without replicas", s, k[s], ppdl_schedule_name(kind));
    }
    return 0;
}

/* the functions of one list per stage (or replica) do not build the chunked schedules */
static void one_stage_per_rank(const char *fn, int kind)
{
    PPDL_CHECK(!ppdl_schedule_chunked(kind), "%s: %s is a chunked schedule (a rank holds several stages): see "
               "ppdl_schedule_make", fn, ppdl_schedule_name(kind));
}

const char *ppdl_schedule_name(int kind)
{
    switch (kind) {
    case PPDL_SCHED_GPIPE: return "gpipe";
    case PPDL_SCHED_1F1B: return "1f1b";
    case PPDL_SCHED_ZB_H1: return "zb-h1";
    case PPDL_SCHED_ZB_H2: return "zb-h2";
    case PPDL_SCHED_ZB_1P: return "zb-1p";
    case PPDL_SCHED_INTERLEAVED: return "interleaved";
    case PPDL_SCHED_ZB_V: return "zb-v";
    case PPDL_SCHED_AUTO: return "auto";
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
    case PPDL_OP_BACKWARD_INPUT: return "backward_input";
    case PPDL_OP_BACKWARD_WEIGHT: return "backward_weight";
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

/* The builders write stage s's list over M micro-batches and keep only the ops of the
 * micro-batches mb with mb mod k == q (all of them when k = 1): a replica's list. */
typedef struct sel {
    int q, k;
} sel;

static void keep_forward(ppdl_op_list *l, int S, int s, int mb, sel r)
{
    if (mb % r.k == r.q) push_forward(l, S, s, mb);
}

static void keep_backward(ppdl_op_list *l, int S, int s, int mb, sel r)
{
    if (mb % r.k == r.q) push_backward(l, S, s, mb);
}

static void build_gpipe(ppdl_op_list *l, int S, int M, int s, sel r)
{
    for (int mb = 0; mb < M; mb++) keep_forward(l, S, s, mb, r);
    for (int mb = M - 1; mb >= 0; mb--) keep_backward(l, S, s, mb, r);
}

static void build_1f1b(ppdl_op_list *l, int S, int M, int s, int warmup, sel r)
{
    int next_f = 0, next_b = 0;
    while (next_f < warmup) keep_forward(l, S, s, next_f++, r);
    while (next_f < M) {
        keep_forward(l, S, s, next_f++, r);
        keep_backward(l, S, s, next_b++, r);
    }
    while (next_b < M) keep_backward(l, S, s, next_b++, r);
}

void ppdl_schedule_zb_caps(int kind, int S, int *cap)
{
    one_stage_per_rank("ppdl_schedule_zb_caps", kind);
    PPDL_CHECK(ppdl_schedule_splits_backward(kind), "ppdl_schedule_zb_caps: %s is not a zero-bubble schedule",
               ppdl_schedule_name(kind));
    for (int s = 0; s < S; s++)
        cap[s] = kind == PPDL_SCHED_ZB_H1 ? S : kind == PPDL_SCHED_ZB_H2 ? 2 * S - 1 : S - s;
}

/* the devices of a layout (zero_bubble.h): replicas in stage order; k NULL: S */
static int n_devices(int S, const int *k)
{
    int D = 0;
    for (int s = 0; s < S; s++) D += k ? k[s] : 1;
    return D;
}

static int all_ones(int S, const int *k)
{
    for (int s = 0; k && s < S; s++)
        if (k[s] != 1) return 0;
    return 1;
}

void ppdl_schedule_zb_caps_layout(int kind, int S, int M, const int *k, int *cap)
{
    if (all_ones(S, k)) {
        ppdl_schedule_zb_caps(kind, S, cap);
        return;
    }
    /* what 1F1B's replica holds on the same layout (its warm-up counts the later
     * stages' replicas), so ZB-1P keeps 1F1B's memory on every replica; ZB-H1 and
     * ZB-H2 lift every replica to 1F1B's largest, as they do the stages */
    int most = 0;
    for (int s = 0, d = 0; s < S; s++)
        for (int q = 0; q < k[s]; q++, d++) {
            ppdl_op_list l;
            ppdl_sched_build_list(PPDL_SCHED_1F1B, S, M, k, s, q, NULL, &l);
            cap[d] = ppdl_schedule_max_in_flight(&l);
            ppdl_op_list_free(&l);
            if (cap[d] > most) most = cap[d];
        }
    for (int d = 0; d < n_devices(S, k); d++)
        if (kind != PPDL_SCHED_ZB_1P) cap[d] = kind == PPDL_SCHED_ZB_H1 ? most : 2 * most - 1;
}

/* the play of a zero-bubble schedule under its caps on the layout k: device dev's
 * passes (dev = -1: every device's, as ppdl_zb_order_layout), and the step in units */
static long zb_play(int kind, int S, int M, const int *k, const ppdl_zb_times *tm, int dev, ppdl_zb_pass *out)
{
    int *cap = ppdl_xmalloc((size_t)n_devices(S, k) * sizeof *cap);
    ppdl_schedule_zb_caps_layout(kind, S, M, k, cap);
    long t = ppdl_zb_order_layout(S, M, k, cap, tm, dev, out);
    free(cap);
    return t;
}

long ppdl_schedule_unit_step_layout(int kind, int S, int M, const int *k)
{
    PPDL_CHECK(S >= 1 && M >= 1, "ppdl_schedule_unit_step: need S >= 1, M >= 1 (got S=%d M=%d)", S, M);
    one_stage_per_rank("ppdl_schedule_unit_step", kind);
    if (!ppdl_schedule_splits_backward(kind)) {
        PPDL_CHECK(all_ones(S, k), "ppdl_schedule_unit_step: %s on replicated stages has no unit step",
                   ppdl_schedule_name(kind));
        return 3L * M + 3L * (S - 1);
    }
    ppdl_zb_pass *order = ppdl_xmalloc(3 * (size_t)M * sizeof *order);
    long t = zb_play(kind, S, M, k, NULL, 0, order);
    free(order);
    return t;
}

long ppdl_schedule_unit_step(int kind, int S, int M)
{
    return ppdl_schedule_unit_step_layout(kind, S, M, NULL);
}

/* the most micro-batches held and W's pending in a device's passes o[0..n3-1] of stage
 * s, as build_zb turns them into ops and max_between counts them: F holds a
 * micro-batch until its W (or fused backward); B starts a W's wait, except a B fused
 * with the W right after it (stage 0), which is one BACKWARD */
static void count_passes(const ppdl_zb_pass *o, int n3, int s, int *held, int *pending)
{
    int h = 0, p = 0;
    *held = *pending = 0;
    for (int i = 0; i < n3; i++) {
        int fused = s == 0 && o[i].kind == 'B' && i + 1 < n3 && o[i + 1].kind == 'W' && o[i + 1].mb == o[i].mb;
        if (o[i].kind == 'F') h++;
        else if (fused) h--, i++;
        else if (o[i].kind == 'B') p++;
        else h--, p--;
        if (h > *held) *held = h;
        if (p > *pending) *pending = p;
    }
}

long ppdl_schedule_counts_timed(int kind, int S, int M, const int *k, const ppdl_zb_times *tm, int *held,
                                int *pending)
{
    PPDL_CHECK(S >= 1 && M >= 1, "ppdl_schedule_counts: need S >= 1, M >= 1 (got S=%d M=%d)", S, M);
    one_stage_per_rank("ppdl_schedule_counts", kind);
    if (!ppdl_schedule_splits_backward(kind)) {
        for (int s = 0, d = 0; s < S; s++)
            for (int q = 0; q < (k ? k[s] : 1); q++, d++) {
                ppdl_op_list l;
                ppdl_sched_build_list(kind, S, M, k, s, q, tm, &l);
                held[d] = ppdl_schedule_max_in_flight(&l);
                pending[d] = 0;
                ppdl_op_list_free(&l);
            }
        return 0;
    }
    ppdl_zb_pass *all = ppdl_xmalloc((size_t)S * 3 * (size_t)M * sizeof *all);
    long step = zb_play(kind, S, M, k, tm, -1, all);
    long off = 0;
    for (int s = 0, d = 0; s < S; s++)
        for (int q = 0; q < (k ? k[s] : 1); q++, d++) {
            int ks = k ? k[s] : 1, n3 = 3 * ((M - q + ks - 1) / ks);
            count_passes(&all[off], n3, s, &held[d], &pending[d]);
            off += n3;
        }
    free(all);
    return step;
}

long ppdl_schedule_counts_layout(int kind, int S, int M, const int *k, int *held, int *pending)
{
    return ppdl_schedule_counts_timed(kind, S, M, k, NULL, held, pending);
}

void ppdl_schedule_counts(int kind, int S, int M, int *held, int *pending)
{
    (void)ppdl_schedule_counts_layout(kind, S, M, NULL, held, pending);
}

/* A zero-bubble list: the passes of replica q of stage s in sched/zero_bubble.h's play
 * of the layout k under the schedule's caps */
static void build_zb(ppdl_op_list *l, int kind, int S, int M, const int *k, const ppdl_zb_times *tm, int s, int q)
{
    int dev = q, ks = k ? k[s] : 1, n3 = 3 * ((M - q + ks - 1) / ks);
    for (int t = 0; t < s; t++) dev += k ? k[t] : 1;
    ppdl_zb_pass *order = ppdl_xmalloc((size_t)n3 * sizeof *order);
    zb_play(kind, S, M, k, tm, dev, order);
    for (int i = 0; i < n3; i++) {
        int mb = order[i].mb;
        if (order[i].kind == 'F') {
            push_forward(l, S, s, mb);
        } else if (order[i].kind == 'W') {
            push(l, PPDL_OP_BACKWARD_WEIGHT, mb, -1);
        } else if (s == 0 && i + 1 < n3 && order[i + 1].kind == 'W' && order[i + 1].mb == mb) {
            /* W right after its B, nothing sent between: one fused pass, no W buffer */
            push_backward(l, S, s, mb);
            i++;
        } else {
            if (s < S - 1) push(l, PPDL_OP_RECV_GRAD, mb, s + 1);
            push(l, PPDL_OP_BACKWARD_INPUT, mb, -1);
            if (s > 0) push(l, PPDL_OP_SEND_GRAD, mb, s - 1);
        }
    }
    free(order);
}

void ppdl_sched_build_list(int kind, int S, int M, const int *k, int s, int q, const ppdl_zb_times *tm,
                           ppdl_op_list *out)
{
    PPDL_CHECK(out != NULL, "ppdl_sched_build_list: out is NULL");
    PPDL_CHECK(kind >= 0 && kind < PPDL_SCHED_N_KINDS, "ppdl_sched_build_list: unknown schedule kind %d", kind);
    one_stage_per_rank("ppdl_sched_build_list", kind);
    char why[PPDL_ERR_LEN];
    if (ppdl_schedule_supports(kind, S, k, why, sizeof why)) ppdl_die("%s", why);
    PPDL_CHECK(S >= 1 && M >= 1 && s >= 0 && s < S,
               "ppdl_sched_build_list: need S >= 1, M >= 1, 0 <= s < S (got S=%d M=%d s=%d)",
               S, M, s);
    sel r = {q, k ? k[s] : 1};
    PPDL_CHECK(r.k >= 1 && q >= 0 && q < r.k, "ppdl_sched_build_list: need 0 <= replica %d < replicas %d of stage %d",
               q, r.k, s);
    /* the warm-up: what the later stages hold at once, one micro-batch per replica */
    int warmup = 0;
    for (int t = s + 1; t < S; t++) {
        PPDL_CHECK(!k || k[t] >= 1, "ppdl_sched_build_list: stage %d has %d replicas", t, k ? k[t] : 1);
        warmup += k ? k[t] : 1;
    }
    if (warmup > M) warmup = M;
    int n = q < M ? (M - q + r.k - 1) / r.k : 0; /* micro-batches of this replica */
    int split = ppdl_schedule_splits_backward(kind);
    int per_mb = 2 + 2 * (s > 0) + 2 * (s < S - 1) + split;
    int cap = n * per_mb + 1;
    out->stage = s;
    out->n = 0;
    out->ops = ppdl_xmalloc((size_t)cap * sizeof(ppdl_op));
    if (kind == PPDL_SCHED_GPIPE)
        build_gpipe(out, S, M, s, r);
    else if (kind == PPDL_SCHED_1F1B)
        build_1f1b(out, S, M, s, warmup, r);
    else
        build_zb(out, kind, S, M, k, tm, s, q);
    push(out, PPDL_OP_OPTIMIZER, -1, -1);
    PPDL_CHECK(split ? out->n <= cap : out->n == cap, "ppdl_sched_build_list: built %d ops, expected %s%d", out->n,
               split ? "at most " : "", cap);
}

void ppdl_op_list_free(ppdl_op_list *l)
{
    if (!l) return;
    free(l->ops);
    l->ops = NULL;
    l->n = 0;
}

/* the most micro-batches at once between an op of kind `up` and one of kind `down` or
 * `down2` (PPDL_OP_N_KINDS: none) */
static int max_between(const ppdl_op_list *l, ppdl_op_kind up, ppdl_op_kind down, ppdl_op_kind down2)
{
    int held = 0, most = 0;
    for (int i = 0; l && i < l->n; i++) {
        if (l->ops[i].kind == up) held++;
        if (l->ops[i].kind == down || l->ops[i].kind == down2) held--;
        if (held > most) most = held;
    }
    return most;
}

int ppdl_schedule_max_in_flight(const ppdl_op_list *l)
{
    return max_between(l, PPDL_OP_FORWARD, PPDL_OP_BACKWARD, PPDL_OP_BACKWARD_WEIGHT);
}

int ppdl_schedule_max_pending_weight(const ppdl_op_list *l)
{
    return max_between(l, PPDL_OP_BACKWARD_INPUT, PPDL_OP_BACKWARD_WEIGHT, PPDL_OP_N_KINDS);
}

// ----------------------------------------------------------------------------
// checking one list on its own

/* index of the op (kind, mb) at or after `from`, or -1 */
static int find_from(const ppdl_op_list *l, int from, ppdl_op_kind kind, int mb)
{
    for (int i = from; i < l->n; i++)
        if (l->ops[i].kind == kind && l->ops[i].mb == mb) return i;
    return -1;
}

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
    case PPDL_OP_BACKWARD_INPUT:
    case PPDL_OP_BACKWARD_WEIGHT:
        snprintf(buf, len, "%s mb %d", name, op->mb);
        break;
    default:
        snprintf(buf, len, "%s", name);
        break;
    }
    return buf;
}

/* The list's name in messages: "stage 2", or "stage 2 replica 1" when replicated */
typedef struct who {
    int s, q, k;
    int rank;              /* the rank running it in a chunked schedule, -1 otherwise */
} who;

static const char *who_str(who w, char *buf, size_t len)
{
    if (w.rank >= 0)
        snprintf(buf, len, "rank %d stage %d", w.rank, w.s);
    else if (w.k > 1)
        snprintf(buf, len, "stage %d replica %d", w.s, w.q);
    else
        snprintf(buf, len, "stage %d", w.s);
    return buf;
}

/* ppdl_errf with the "stage s op i (op): " prefix every list error carries */
static int op_err(char *err, size_t errlen, who w, int i, const ppdl_op *op,
                  const char *fmt, ...) PPDL_PRINTF(6, 7);
static int op_err(char *err, size_t errlen, who w, int i, const ppdl_op *op,
                  const char *fmt, ...)
{
    char what[256], opbuf[96], wbuf[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ppdl_errf(err, errlen, "schedule: %s op %d (%s): %s", who_str(w, wbuf, sizeof wbuf), i,
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

static int is_compute(ppdl_op_kind k)
{
    return k == PPDL_OP_FORWARD || k == PPDL_OP_BACKWARD || k == PPDL_OP_BACKWARD_INPUT ||
           k == PPDL_OP_BACKWARD_WEIGHT;
}

/* a backward in either form: the micro-batch's backward is one of them */
static int is_backward_form(ppdl_op_kind k)
{
    return k == PPDL_OP_BACKWARD || k == PPDL_OP_BACKWARD_INPUT || k == PPDL_OP_BACKWARD_WEIGHT;
}

/* In a list with a split backward (always: `always`), the ops that add into the weight
 * gradients (BACKWARD, BACKWARD_WEIGHT) run in micro-batch order, as 1F1B's backwards
 * do: the same sums in the same order, so the same bits (GPipe, all fused, sums in
 * reverse; the chunked schedules promise 1F1B's bits with fused backwards too) */
static int check_order_of_sums(const ppdl_op_list *l, who w, int always, char *err, size_t errlen)
{
    if (!always && ppdl_schedule_max_pending_weight(l) == 0) return 0;
    int last = -1, at = -1;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        if (op->kind != PPDL_OP_BACKWARD && op->kind != PPDL_OP_BACKWARD_WEIGHT) continue;
        if (op->mb < last)
            return op_err(err, errlen, w, i, op,
                          "adds mb %d's weight gradients after mb %d's (op %d): %sthe weight gradients "
                          "must accumulate in micro-batch order (the bits of 1F1B)",
                          op->mb, last, at, always ? "" : "with a split backward ");
        last = op->mb;
        at = i;
    }
    return 0;
}

/* The runtime's buffers, played along the list: micro-batch mb takes slot
 * (mb / k) mod slots at its first op (RECV_ACT, or FORWARD on stage 0) and gives it back
 * at the later of its BACKWARD or BACKWARD_WEIGHT and its SEND_GRAD; its
 * BACKWARD_INPUT takes W buffer (mb / k) mod pending, given back at its
 * BACKWARD_WEIGHT. Neither may be taken while another micro-batch holds it. (Lists
 * that release in the order they take never clash; others can.) */
static int check_buffers(const ppdl_op_list *l, who w, char *err, size_t errlen)
{
    int slots = ppdl_schedule_max_in_flight(l), pending = ppdl_schedule_max_pending_weight(l);
    int *slot_mb = ppdl_xmalloc((size_t)(slots + pending + 1) * sizeof(int)), *wbuf_mb = slot_mb + slots;
    for (int j = 0; j < slots + pending; j++) slot_mb[j] = -1;
    int rc = 0, sends_grad = w.s > 0;
    for (int i = 0; i < l->n && rc == 0; i++) {
        const ppdl_op *op = &l->ops[i];
        if (op->mb < 0) continue;
        int local = op->mb / w.k, *slot = slots ? &slot_mb[local % slots] : NULL;
        int first_op = op->kind == (sends_grad ? PPDL_OP_RECV_ACT : PPDL_OP_FORWARD);
        if (first_op && slot) {
            if (*slot >= 0)
                rc = op_err(err, errlen, w, i, op, "takes the slot of mb %d, which still holds it", *slot);
            *slot = op->mb;
        }
        /* the slot goes back at the last of the micro-batch's backward and its send */
        int releases = 0;
        if (op->kind == PPDL_OP_BACKWARD || op->kind == PPDL_OP_BACKWARD_WEIGHT)
            releases = !sends_grad || find_from(l, i, PPDL_OP_SEND_GRAD, op->mb) < 0;
        if (op->kind == PPDL_OP_SEND_GRAD)
            releases = find_from(l, i, PPDL_OP_BACKWARD, op->mb) < 0 &&
                       find_from(l, i, PPDL_OP_BACKWARD_WEIGHT, op->mb) < 0;
        if (releases && slot && *slot == op->mb) *slot = -1;
        if (op->kind == PPDL_OP_BACKWARD_INPUT && pending) {
            int *b = &wbuf_mb[local % pending];
            if (*b >= 0 && rc == 0)
                rc = op_err(err, errlen, w, i, op, "takes the W buffer of mb %d, whose W has not run", *b);
            *b = op->mb;
        }
        if (op->kind == PPDL_OP_BACKWARD_WEIGHT && pending && wbuf_mb[local % pending] == op->mb)
            wbuf_mb[local % pending] = -1;
    }
    free(slot_mb);
    return rc;
}

/* Rules for one list (stage s of S, M micro-batches; replica q of k of the stage):
 *  - kinds are known; OPTIMIZER has mb -1 and peer -1 and is the last op, exactly once;
 *    every other op has 0 <= mb < M; compute ops have peer -1; RECV_ACT/SEND_GRAD have
 *    peer s-1, SEND_ACT/RECV_GRAD peer s+1 (so stage 0 has no RECV_ACT/SEND_GRAD and
 *    stage S-1 no SEND_ACT/RECV_GRAD);
 *  - each (kind, mb) the stage needs occurs exactly once for the mb of this replica
 *    (mb mod k == q), and never for the others' mb;
 *  - per mb: RECV_ACT < FORWARD < SEND_ACT, FORWARD < BACKWARD, RECV_GRAD < BACKWARD <
 *    SEND_GRAD (positions in the list); its backward is one BACKWARD, or a
 *    BACKWARD_INPUT and a BACKWARD_WEIGHT with the same places as BACKWARD and W after
 *    B and after SEND_GRAD;
 *  - with a split backward, weight gradients accumulate in micro-batch order
 *    (check_order_of_sums; with sums_ordered also with fused backwards); slots and W
 *    buffers are free when taken (check_buffers).
 * pos is a scratch array of PPDL_OP_N_KINDS * M ints. */
static int check_list(int S, int M, int idx, who w, int sums_ordered, const ppdl_op_list *l, int *pos, char *err,
                      size_t errlen)
{
    int s = w.s;
    char wbuf[48];
    const char *name = who_str(w, wbuf, sizeof wbuf);
    if (l->stage != s)
        return ppdl_errf(err, errlen, "schedule: list %d says it is stage %d", idx, l->stage);
    if (l->n < 1 || !l->ops)
        return ppdl_errf(err, errlen, "schedule: %s has an empty op list", name);
    for (int j = 0; j < PPDL_OP_N_KINDS * M; j++) pos[j] = -1;
    int n_opt = 0;
    for (int i = 0; i < l->n; i++) {
        const ppdl_op *op = &l->ops[i];
        if ((int)op->kind < 0 || op->kind >= PPDL_OP_N_KINDS)
            return ppdl_errf(err, errlen, "schedule: %s op %d has unknown kind %d", name, i,
                             (int)op->kind);
        if (op->kind == PPDL_OP_OPTIMIZER) {
            if (op->mb != -1 || op->peer != -1)
                return op_err(err, errlen, w, i, op, "optimizer needs mb -1 and peer -1, has mb %d peer %d",
                              op->mb, op->peer);
            if (++n_opt > 1) return op_err(err, errlen, w, i, op, "second optimizer step");
            if (i != l->n - 1)
                return op_err(err, errlen, w, i, op, "optimizer is not the last op (%d ops follow)",
                              l->n - 1 - i);
            continue;
        }
        if (op->mb < 0 || op->mb >= M)
            return op_err(err, errlen, w, i, op, "micro-batch outside 0..%d", M - 1);
        if (op->mb % w.k != w.q)
            return op_err(err, errlen, w, i, op, "micro-batch %d belongs to replica %d of %d, not %d", op->mb,
                          op->mb % w.k, w.k, w.q);
        if (!kind_required(op->kind, S, s))
            return op_err(err, errlen, w, i, op, "stage %d of %d has no stage %d to talk to", s, S,
                          expected_peer(op->kind, s));
        int want_peer = expected_peer(op->kind, s);
        if (op->peer != want_peer) {
            if (is_compute(op->kind))
                return op_err(err, errlen, w, i, op, "compute op must have peer -1, has %d", op->peer);
            return op_err(err, errlen, w, i, op, "peer must be the adjacent stage %d", want_peer);
        }
        int *p = &pos[op->kind * M + op->mb];
        if (*p >= 0) return op_err(err, errlen, w, i, op, "duplicate of op %d", *p);
        *p = i;
    }
    if (n_opt == 0)
        return ppdl_errf(err, errlen, "schedule: %s has no optimizer step (must be last)", name);

    for (int mb = w.q; mb < M; mb += w.k) {
        for (int k = 0; k < PPDL_OP_N_KINDS; k++) {
            if (k == PPDL_OP_OPTIMIZER || is_backward_form((ppdl_op_kind)k) || !kind_required((ppdl_op_kind)k, S, s))
                continue;
            if (pos[k * M + mb] < 0)
                return ppdl_errf(err, errlen, "schedule: %s has no %s for mb %d", name,
                                 ppdl_op_name((ppdl_op_kind)k), mb);
        }
        /* the backward: one BACKWARD, or a BACKWARD_INPUT and a BACKWARD_WEIGHT */
        int fused = pos[PPDL_OP_BACKWARD * M + mb], bi = pos[PPDL_OP_BACKWARD_INPUT * M + mb],
            bw = pos[PPDL_OP_BACKWARD_WEIGHT * M + mb];
        if (fused >= 0 && (bi >= 0 || bw >= 0))
            return op_err(err, errlen, w, fused, &l->ops[fused], "mb %d also has a split backward (op %d)", mb,
                          bi >= 0 ? bi : bw);
        if (fused < 0 && bi < 0 && bw < 0)
            return ppdl_errf(err, errlen, "schedule: %s has no backward for mb %d", name, mb);
        if (fused < 0 && (bi < 0 || bw < 0))
            return ppdl_errf(err, errlen, "schedule: %s has a %s for mb %d but no %s", name,
                             ppdl_op_name(bi >= 0 ? PPDL_OP_BACKWARD_INPUT : PPDL_OP_BACKWARD_WEIGHT), mb,
                             ppdl_op_name(bi >= 0 ? PPDL_OP_BACKWARD_WEIGHT : PPDL_OP_BACKWARD_INPUT));
        /* pairs (a, b): op a of mb must come before op b of mb, when both exist. A W
         * comes after its B and after the gradient is sent (the slot is released at
         * W, and the input gradient is the critical path) */
        static const ppdl_op_kind before[][2] = {
            {PPDL_OP_RECV_ACT, PPDL_OP_FORWARD},         {PPDL_OP_FORWARD, PPDL_OP_SEND_ACT},
            {PPDL_OP_FORWARD, PPDL_OP_BACKWARD},         {PPDL_OP_RECV_GRAD, PPDL_OP_BACKWARD},
            {PPDL_OP_BACKWARD, PPDL_OP_SEND_GRAD},       {PPDL_OP_FORWARD, PPDL_OP_BACKWARD_INPUT},
            {PPDL_OP_RECV_GRAD, PPDL_OP_BACKWARD_INPUT}, {PPDL_OP_BACKWARD_INPUT, PPDL_OP_SEND_GRAD},
            {PPDL_OP_BACKWARD_INPUT, PPDL_OP_BACKWARD_WEIGHT}, {PPDL_OP_SEND_GRAD, PPDL_OP_BACKWARD_WEIGHT},
        };
        for (size_t r = 0; r < sizeof before / sizeof before[0]; r++) {
            int ia = pos[before[r][0] * M + mb], ib = pos[before[r][1] * M + mb];
            if (ia < 0 || ib < 0 || ia < ib) continue;
            return op_err(err, errlen, w, ib, &l->ops[ib],
                          "comes before op %d (%s mb %d), which must precede it", ia,
                          ppdl_op_name(before[r][0]), mb);
        }
    }
    int rc = check_order_of_sums(l, w, sums_ordered, err, errlen);
    return rc ? rc : check_buffers(l, w, err, errlen);
}

// ----------------------------------------------------------------------------
// playing the lists against each other

/* Message slots: act[s*M + mb] counts SEND_ACT(mb) from s to s+1 issued and not yet
 * received; grad[s*M + mb] the same for SEND_GRAD(mb) from s to s-1. A micro-batch
 * lives on one replica of each stage, so (stage, mb) names the sender and the receiver
 * of a message also when stages are replicated.
 *
 * The lists run on threads: one thread per list (ppdl_schedule_check_layout), or one
 * per rank running the ops of its stages' lists in the rank's order
 * (ppdl_schedule_check_ranks). A thread stops at the first op that cannot run.
 *
 * Along the way the play keeps each thread's clock in units (a FORWARD, B or W one, a
 * fused BACKWARD two, messages none): an op starts when its thread is done with the
 * one before and what it waits for (the message it receives, the receive of the
 * message whose slot it reuses) has happened. The clocks do not depend on the order
 * of the sweeps: a thread's ops run in its own order, and each wait names an op that
 * ran before. The largest clock at the end is the unit step. */
typedef struct play_state {
    int S, M;
    int n_lists;
    int *pc;               /* (n_lists) next op index of each list */
    int *act, *grad;       /* (S*M) messages in flight */
    char *act_in, *grad_in; /* (S*M) the message has been received */
    long *act_t, *grad_t;  /* (S*M) when the message was sent, then when received */
    int *reuse;            /* (n_lists) micro-batches between two uses of a slot: slots x replicas */
} play_state;

/* A thread: the list indices of its ops in the order it runs them (order NULL: list
 * `list` alone), its position in them and its clock */
typedef struct play_thread {
    const int *order;
    int n, list;
    int pos;
    long t;
} play_thread;

/* Has every message this list sent so far been received? (its OPTIMIZER waits for that) */
static int sends_received(const play_state *ps, const ppdl_op_list *l, int i)
{
    int M = ps->M, s = l->stage;
    for (int j = 0; j < ps->pc[i]; j++) {
        const ppdl_op *op = &l->ops[j];
        if (op->kind == PPDL_OP_SEND_ACT && !ps->act_in[s * M + op->mb]) return 0;
        if (op->kind == PPDL_OP_SEND_GRAD && !ps->grad_in[s * M + op->mb]) return 0;
    }
    return 1;
}

static long later(long a, long b) { return a > b ? a : b; }

/* units an op takes in the unit play */
static long op_units(ppdl_op_kind k)
{
    return k == PPDL_OP_BACKWARD ? 2 : is_compute(k) ? 1 : 0;
}

/* Run op pc of list i (of stage l->stage) on a thread whose clock is *t if it can run
 * now; 1 when it ran, 0 when blocked.
 * The runtime's buffers bound what can run: micro-batch mb uses the slot that mb - reuse
 * used before it, and a FORWARD (BACKWARD) that writes the slot's outgoing activation
 * (gradient) first waits for that earlier message's send to complete; OPTIMIZER waits
 * for all of them. A send is taken to complete only when its RECV op has run: the latest
 * a real one can (the runtime posts every receive at or before its op), so a play that
 * finishes under this rule cannot deadlock under any timing of the sends. */
static int try_step(play_state *ps, const ppdl_op_list *l, int i, long *t)
{
    const ppdl_op *op = &l->ops[ps->pc[i]];
    int M = ps->M, s = l->stage, prev = op->mb - ps->reuse[i];
    switch (op->kind) {
    case PPDL_OP_SEND_ACT:
        ps->act[s * M + op->mb]++;
        ps->act_t[s * M + op->mb] = *t;
        break;
    case PPDL_OP_SEND_GRAD:
        ps->grad[s * M + op->mb]++;
        ps->grad_t[s * M + op->mb] = *t;
        break;
    case PPDL_OP_RECV_ACT:
        if (ps->act[op->peer * M + op->mb] == 0) return 0;
        ps->act[op->peer * M + op->mb]--;
        ps->act_in[op->peer * M + op->mb] = 1;
        *t = ps->act_t[op->peer * M + op->mb] = later(*t, ps->act_t[op->peer * M + op->mb]);
        break;
    case PPDL_OP_RECV_GRAD:
        if (ps->grad[op->peer * M + op->mb] == 0) return 0;
        ps->grad[op->peer * M + op->mb]--;
        ps->grad_in[op->peer * M + op->mb] = 1;
        *t = ps->grad_t[op->peer * M + op->mb] = later(*t, ps->grad_t[op->peer * M + op->mb]);
        break;
    case PPDL_OP_FORWARD:
        if (s < ps->S - 1 && prev >= 0) {
            if (!ps->act_in[s * M + prev]) return 0;
            *t = later(*t, ps->act_t[s * M + prev]);
        }
        break;
    case PPDL_OP_BACKWARD:
    case PPDL_OP_BACKWARD_INPUT:
        if (s > 0 && prev >= 0) {
            if (!ps->grad_in[s * M + prev]) return 0;
            *t = later(*t, ps->grad_t[s * M + prev]);
        }
        break;
    case PPDL_OP_OPTIMIZER:
        if (!sends_received(ps, l, i)) return 0;
        break;
    default: break;
    }
    *t += op_units(op->kind);
    ps->pc[i]++;
    return 1;
}

/* the list a thread runs next */
static int next_list(const play_thread *th) { return th->order ? th->order[th->pos] : th->list; }

/* "deadlock: stage 0 op 5 (recv_grad mb 0 from stage 1) waits; stage 1 ..."; for a
 * rank: "rank 1 stage 2 op 5 (...) waits (step 12 of the rank's order)", and a receive
 * whose sender is a later op of the same rank says so */
static int report_deadlock(const play_state *ps, const ppdl_op_list *lists, const who *whos, int n_threads,
                           const play_thread *th, char *err, size_t errlen)
{
    char msg[PPDL_ERR_LEN * 2], opbuf[96], wbuf[48];
    size_t used = (size_t)snprintf(msg, sizeof msg, "schedule: deadlock, no stage can advance:");
    for (int j = 0; j < n_threads && used < sizeof msg; j++) {
        if (th[j].pos >= th[j].n) {
            if (th[j].order)
                used += (size_t)snprintf(msg + used, sizeof msg - used, " rank %d finished;", whos[th[j].order[0]].rank);
            else
                used += (size_t)snprintf(msg + used, sizeof msg - used, " %s finished;",
                                         who_str(whos[th[j].list], wbuf, sizeof wbuf));
            continue;
        }
        int i = next_list(&th[j]);
        const ppdl_op *op = &lists[i].ops[ps->pc[i]];
        used += (size_t)snprintf(msg + used, sizeof msg - used, " %s op %d (%s) waits", who_str(whos[i], wbuf, sizeof wbuf),
                                 ps->pc[i], op_str(op, opbuf, sizeof opbuf));
        if (th[j].order && used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, " (op %d of the rank's order)", th[j].pos);
        int recv = op->kind == PPDL_OP_RECV_ACT || op->kind == PPDL_OP_RECV_GRAD;
        if (recv && th[j].order && op->peer >= 0 && op->peer < ps->S && whos[op->peer].rank == whos[i].rank &&
            used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, " for a send its own rank has not issued yet");
        if (used < sizeof msg) used += (size_t)snprintf(msg + used, sizeof msg - used, ";");
    }
    if (used < sizeof msg && used > 0 && msg[used - 1] == ';') msg[used - 1] = '\0';
    return ppdl_errf(err, errlen, "%s", msg);
}

/* Play the lists on the threads th[0..n_threads-1] (each list on exactly one thread,
 * its ops in its own order: the callers check that); *step gets the unit step */
static int play(int S, int M, int n_lists, const ppdl_op_list *lists, const who *whos, int n_threads,
                play_thread *th, long *step, char *err, size_t errlen)
{
    play_state ps = {.S = S, .M = M, .n_lists = n_lists};
    size_t SM = (size_t)S * (size_t)M;
    ps.pc = ppdl_xcalloc((size_t)n_lists, sizeof(int));
    ps.act = ppdl_xcalloc(SM, sizeof(int));
    ps.grad = ppdl_xcalloc(SM, sizeof(int));
    ps.act_in = ppdl_xcalloc(SM, 1);
    ps.grad_in = ppdl_xcalloc(SM, 1);
    ps.act_t = ppdl_xcalloc(SM, sizeof(long));
    ps.grad_t = ppdl_xcalloc(SM, sizeof(long));
    ps.reuse = ppdl_xcalloc((size_t)n_lists, sizeof(int));
    for (int i = 0; i < n_lists; i++) {
        int slots = ppdl_schedule_max_in_flight(&lists[i]);
        ps.reuse[i] = (slots > 0 ? slots : 1) * whos[i].k;
    }
    int progressed = 1, rc = 0;
    while (progressed) {
        progressed = 0;
        for (int j = 0; j < n_threads; j++)
            for (; th[j].pos < th[j].n; th[j].pos++, progressed = 1) {
                int i = next_list(&th[j]);
                if (!try_step(&ps, &lists[i], i, &th[j].t)) break;
            }
    }
    *step = 0;
    for (int j = 0; j < n_threads; j++) *step = later(*step, th[j].t);
    for (int j = 0; j < n_threads && rc == 0; j++)
        if (th[j].pos < th[j].n) rc = report_deadlock(&ps, lists, whos, n_threads, th, err, errlen);
    /* per-list counts make every message matched once all lists finish; kept as a
     * guard so the checker stays sound if the list rules above are ever relaxed */
    for (size_t j = 0; j < SM && rc == 0; j++) {
        int s = (int)(j / (size_t)M), mb = (int)(j % (size_t)M);
        if (ps.act[j] != 0)
            rc = ppdl_errf(err, errlen,
                           "schedule: stage %d sent the activation of mb %d %d time(s) more "
                           "than stage %d received it", s, mb, ps.act[j], s + 1);
        else if (ps.grad[j] != 0)
            rc = ppdl_errf(err, errlen,
                           "schedule: stage %d sent the gradient of mb %d %d time(s) more "
                           "than stage %d received it", s, mb, ps.grad[j], s - 1);
    }
    free(ps.pc);
    free(ps.act);
    free(ps.grad);
    free(ps.act_in);
    free(ps.grad_in);
    free(ps.act_t);
    free(ps.grad_t);
    free(ps.reuse);
    return rc;
}

/* The checker (ppdl_schedule_check, ppdl_schedule_check_layout for replicated stages)
 * first checks each list on its own (the rules are listed above check_list), then plays
 * all lists (one per stage, or per replica) against each other under the
 * communication model of schedule.h: a SEND always runs; a RECV runs once the peer has
 * issued the matching SEND that no earlier RECV consumed. Every sweep advances each
 * stage as far as it can; the play stops when a sweep advances nothing. If some stage
 * has not reached its end then, no stage can ever advance again: a deadlock, reported
 * with the op each unfinished stage is stuck on. Cost: O(S*M) memory, and at most
 * (number of ops + 1) sweeps of O(S) each plus O(1) per op run, so O(S * N_ops) time
 * in the worst case (a few sweeps in practice). */
int ppdl_schedule_check_layout(int S, int M, const int *k, const ppdl_op_list *lists, char *err,
                               size_t errlen)
{
    if (S < 1 || M < 1)
        return ppdl_errf(err, errlen, "schedule: need at least 1 stage and 1 micro-batch (got S=%d M=%d)",
                         S, M);
    if (!lists) return ppdl_errf(err, errlen, "schedule: no op lists given");
    int n_lists = 0;
    for (int s = 0; s < S; s++) {
        int ks = k ? k[s] : 1;
        if (ks < 1 || ks > M)
            return ppdl_errf(err, errlen, "schedule: stage %d has %d replicas; each of at most M = %d needs "
                             "at least one micro-batch", s, ks, M);
        n_lists += ks;
    }
    who *whos = ppdl_xmalloc((size_t)n_lists * sizeof *whos);
    for (int s = 0, i = 0; s < S; s++)
        for (int q = 0; q < (k ? k[s] : 1); q++) whos[i++] = (who){s, q, k ? k[s] : 1, -1};
    int *pos = ppdl_xmalloc((size_t)PPDL_OP_N_KINDS * (size_t)M * sizeof(int));
    int rc = 0;
    for (int i = 0; i < n_lists && rc == 0; i++)
        rc = check_list(S, M, i, whos[i], 0, &lists[i], pos, err, errlen);
    free(pos);
    if (rc == 0) {
        play_thread *th = ppdl_xcalloc((size_t)n_lists, sizeof *th);
        for (int i = 0; i < n_lists; i++) th[i] = (play_thread){.n = lists[i].n, .list = i};
        long step;
        rc = play(S, M, n_lists, lists, whos, n_lists, th, &step, err, errlen);
        free(th);
    }
    free(whos);
    return rc;
}

int ppdl_schedule_check(int S, int M, const ppdl_op_list *lists, char *err, size_t errlen)
{
    return ppdl_schedule_check_layout(S, M, NULL, lists, err, errlen);
}

// ----------------------------------------------------------------------------
// the chunked schedules: a rank runs several stages' lists in one order

/* Each of the S stages on exactly one rank, each rank's stages ascending; owner[s] =
 * (rank, index in its stages[]) */
static int check_placement(int N, int S, const ppdl_rank_schedule *ranks, int *owner_rank, int *owner_c, char *err,
                           size_t errlen)
{
    for (int s = 0; s < S; s++) owner_rank[s] = -1;
    for (int r = 0; r < N; r++) {
        const ppdl_rank_schedule *R = &ranks[r];
        if (R->rank != r) return ppdl_errf(err, errlen, "schedule: ranks[%d] says it is rank %d", r, R->rank);
        if (R->n_stages < 1 || !R->stages || !R->lists || !R->order)
            return ppdl_errf(err, errlen, "schedule: rank %d holds no stage (or has no lists or order)", r);
        for (int c = 0; c < R->n_stages; c++) {
            int s = R->stages[c];
            if (s < 0 || s >= S)
                return ppdl_errf(err, errlen, "schedule: rank %d holds stage %d, outside 0..%d", r, s, S - 1);
            if (c > 0 && s <= R->stages[c - 1])
                return ppdl_errf(err, errlen, "schedule: rank %d lists its stages out of ascending order (%d after %d)",
                                 r, s, R->stages[c - 1]);
            if (owner_rank[s] >= 0)
                return ppdl_errf(err, errlen, "schedule: stage %d is on rank %d and on rank %d", s, owner_rank[s], r);
            if (R->lists[c].stage != s)
                return ppdl_errf(err, errlen, "schedule: rank %d's list %d says it is stage %d, not %d", r, c,
                                 R->lists[c].stage, s);
            owner_rank[s] = r;
            owner_c[s] = c;
        }
    }
    for (int s = 0; s < S; s++)
        if (owner_rank[s] < 0) return ppdl_errf(err, errlen, "schedule: no rank holds stage %d", s);
    return 0;
}

/* A rank's order: n the sum of its lists' lengths, every entry a stage of the rank,
 * each list's ops exactly once, and the OPTIMIZERs (each list's last op) the last
 * n_stages entries in stages[] order */
static int check_order(const ppdl_rank_schedule *R, char *err, size_t errlen)
{
    int total = 0, r = R->rank;
    for (int c = 0; c < R->n_stages; c++) total += R->lists[c].n;
    if (R->n != total)
        return ppdl_errf(err, errlen, "schedule: rank %d's order has %d entries, its lists %d ops", r, R->n, total);
    int *seen = ppdl_xcalloc((size_t)R->n_stages, sizeof(int)), rc = 0;
    for (int i = 0; i < R->n && rc == 0; i++) {
        int c = R->order[i];
        if (c < 0 || c >= R->n_stages) {
            rc = ppdl_errf(err, errlen, "schedule: rank %d order entry %d is %d, not one of its %d stages", r, i, c,
                           R->n_stages);
        } else if (seen[c] >= R->lists[c].n) {
            rc = ppdl_errf(err, errlen, "schedule: rank %d order entry %d runs stage %d past the end of its list (%d "
                           "ops)", r, i, R->stages[c], R->lists[c].n);
        } else if (R->lists[c].ops[seen[c]].kind == PPDL_OP_OPTIMIZER && i != R->n - R->n_stages + c) {
            rc = ppdl_errf(err, errlen, "schedule: rank %d stage %d op %d (optimizer) is entry %d of the rank's order; "
                           "the optimizers go last, in stage order (entry %d)", r, R->stages[c], seen[c], i,
                           R->n - R->n_stages + c);
        }
        if (rc == 0) seen[c]++;
    }
    free(seen);
    return rc;
}

/* check_ranks's work; *step gets the unit step of the play */
static int check_ranks(int N, int v, int M, const ppdl_rank_schedule *ranks, long *step, char *err, size_t errlen)
{
    *step = 0;
    if (N < 1 || v < 1 || M < 1)
        return ppdl_errf(err, errlen, "schedule: need N >= 1 ranks, v >= 1 chunks and M >= 1 micro-batches (got "
                         "N=%d v=%d M=%d)", N, v, M);
    if (!ranks) return ppdl_errf(err, errlen, "schedule: no rank schedules given");
    int S = v * N;
    int *owner_rank = ppdl_xmalloc(2 * (size_t)S * sizeof(int)), *owner_c = owner_rank + S;
    int rc = check_placement(N, S, ranks, owner_rank, owner_c, err, errlen);
    for (int r = 0; r < N && rc == 0; r++) rc = check_order(&ranks[r], err, errlen);
    /* the lists by stage, each named with its rank */
    ppdl_op_list *lists = ppdl_xcalloc((size_t)S, sizeof *lists);
    who *whos = ppdl_xmalloc((size_t)S * sizeof *whos);
    int *pos = ppdl_xmalloc((size_t)PPDL_OP_N_KINDS * (size_t)M * sizeof(int));
    for (int s = 0; s < S && rc == 0; s++) {
        lists[s] = ranks[owner_rank[s]].lists[owner_c[s]];
        whos[s] = (who){s, 0, 1, owner_rank[s]};
        rc = check_list(S, M, s, whos[s], 1, &lists[s], pos, err, errlen);
    }
    if (rc == 0) {
        /* a thread per rank, its order in stage numbers */
        int total = 0;
        for (int r = 0; r < N; r++) total += ranks[r].n;
        int *orders = ppdl_xmalloc((size_t)total * sizeof(int));
        play_thread *th = ppdl_xcalloc((size_t)N, sizeof *th);
        for (int r = 0, at = 0; r < N; r++) {
            th[r] = (play_thread){.order = &orders[at], .n = ranks[r].n};
            for (int i = 0; i < ranks[r].n; i++) orders[at++] = ranks[r].stages[ranks[r].order[i]];
        }
        rc = play(S, M, S, lists, whos, N, th, step, err, errlen);
        free(th);
        free(orders);
    }
    free(pos);
    free(whos);
    free(lists);
    free(owner_rank);
    return rc;
}

int ppdl_schedule_check_ranks(int N, int v, int M, const ppdl_rank_schedule *ranks, char *err, size_t errlen)
{
    long step;
    return check_ranks(N, v, M, ranks, &step, err, errlen);
}

long ppdl_schedule_unit_step_chunked(int kind, int N, int v, int M)
{
    PPDL_CHECK(N >= 1 && v >= 1 && M >= 1, "ppdl_schedule_unit_step_chunked: need N, v, M >= 1 (got %d, %d, %d)", N,
               v, M);
    if (!ppdl_schedule_chunked(kind)) return (long)v * (3L * M + 3L * (N - 1));
    char err[PPDL_ERR_LEN];
    ppdl_rank_schedule *ranks = ppdl_xcalloc((size_t)N, sizeof *ranks);
    if (ppdl_sched_chunked_args(kind, N, v, M, err, sizeof err)) ppdl_die("%s", err);
    ppdl_sched_build_ranks(kind, N, v, M, NULL, ranks);
    long step;
    if (check_ranks(N, v, M, ranks, &step, err, sizeof err))
        ppdl_die("ppdl_schedule_unit_step_chunked: %s N=%d v=%d M=%d fails its check: %s", ppdl_schedule_name(kind),
                 N, v, M, err);
    for (int r = 0; r < N; r++) ppdl_rank_schedule_free(&ranks[r]);
    free(ranks);
    return step;
}
