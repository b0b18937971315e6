/* simulate.c — a discrete-event play of the schedule's op lists, the runtime's.
 *
 * A "unit" is one op list: a replica of a stage, or, in a chunked plan (interleaved,
 * zb-v), one of the stages a rank holds. Every rank is one thread with one clock that
 * runs its units' ops in its order, as the runtime does (ppdl_runtime_step): a
 * rank of a chunked plan in its ppdl_rank_schedule's order, any other rank its one
 * list in list order.
 *
 * A thread's timeline depends only on its own ops, on when messages reach it and on
 * when its stage's all-reduce ends; a message's arrival is fixed the moment its sender
 * runs the SEND (each directed rank pair has one sender thread, which sends in its
 * order, so FIFO order is that order). So the simulator advances every thread as far
 * as it can — until a RECV whose message has not been sent yet, or an OPTIMIZER whose
 * stage has a replica still before its last backward — and sweeps over the threads
 * until all are done. A sweep that moves nothing is a deadlock (the schedule checker
 * rules it out; this is a second guard).
 *
 * With more threads (ranks) than cores on a host (cluster_model.h's hosts), a compute
 * op's duration depends on what else runs on its host meanwhile, so that sweep cannot
 * apply: play_shared() advances one clock over events instead (an op starts or ends,
 * a wait ends) and, between two events, runs each compute op on host h at
 * min(1, cores_h / compute ops running on h) of its full speed (processor sharing;
 * a thread that waits takes no core). Otherwise the sweep runs as it always did.
 */
#include "plan/simulate.h"

#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/costmodel.h"
#include "plan/pass_times.h"
#include "plan/replica.h"
#include "plan/vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_unit {
    int s, q, k;               /* stage, replica, replicas of the stage */
    int rank;
    double f_ms, b_ms, rc_ms;  /* forward, backward (with recompute), the recompute part */
    double bi_ms, bw_ms;       /* a split backward's B and W (each with its recompute) */
    double rci_ms, rcw_ms;     /* their recompute parts */
    double opt_ms;             /* its optimizer step (COSTS.json optimizer_ms; 0 without) */
    int next;                  /* its next op */
    int slots;                 /* micro-batches it holds at once */
    int last_bwd;              /* index of its last BACKWARD or BACKWARD_WEIGHT */
    ppdl_op_list ops;
} sim_unit;

/* a rank: runs its units' lists, one op at a time, in its order */
typedef struct sim_thread {
    int rank;
    int n_units, *units;       /* its units (indices into the units) */
    int n, *order;             /* order[i]: which of its units runs the i-th op */
    int pc;                    /* next entry of order */
    double t;                  /* current time */
    /* play_shared only */
    int host;                  /* index into the cluster's hosts */
    int run;                   /* 1: computing the op at pc */
    double rem, t0;            /* its work left (ms at full speed), its start */
} sim_thread;

static void add_ev(ppdl_sim *o, int *cap, int record, int rank, int stage, int kind, int mb, double t0, double t1)
{
    if (!record) return;
    if (o->n_ev == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        o->ev = realloc(o->ev, (size_t)*cap * sizeof *o->ev);
        PPDL_CHECK(o->ev, "out of host memory for simulated events");
    }
    o->ev[o->n_ev++] = (ppdl_event_rec){.rank = rank, .stage = stage, .kind = kind, .mb = mb, .t0_ms = t0, .t1_ms = t1};
}

/* The wait before a stage's OPTIMIZER, from `from` to `t`: its sends arriving (until
 * t_msg, a message wait) and then the replicas' all-reduce (an all-reduce wait), as the
 * runtime records them. */
static void add_update_waits(ppdl_sim *o, int *cap, int record, int rank, int stage, double from, double t_msg,
                             double t)
{
    if (t_msg > from) add_ev(o, cap, record, rank, stage, PPDL_EV_WAIT, -1, from, t_msg);
    if (t > fmax(from, t_msg)) add_ev(o, cap, record, rank, stage, PPDL_EV_ALLREDUCE, -1, fmax(from, t_msg), t);
}

/* how long a compute op of x takes at full speed, and the recompute inside it */
static double op_ms(const sim_unit *x, ppdl_op_kind k)
{
    switch (k) {
    case PPDL_OP_FORWARD: return x->f_ms;
    case PPDL_OP_BACKWARD: return x->b_ms;
    case PPDL_OP_BACKWARD_INPUT: return x->bi_ms;
    case PPDL_OP_BACKWARD_WEIGHT: return x->bw_ms;
    default: return 0;
    }
}

static double op_rc_ms(const sim_unit *x, ppdl_op_kind k)
{
    return k == PPDL_OP_BACKWARD ? x->rc_ms : k == PPDL_OP_BACKWARD_INPUT ? x->rci_ms
         : k == PPDL_OP_BACKWARD_WEIGHT ? x->rcw_ms : 0;
}

static int n_rep(const ppdl_plan_stage *st) { return st->n_replicas > 0 ? st->n_replicas : 1; }
static int rep_rank(const ppdl_plan_stage *st, int q) { return st->n_replicas > 0 ? st->ranks[q] : st->rank; }

/* A tied weight's exchange (costmodel.h, pipe/tie.h): at its OPTIMIZER, once its
 * gradient is ready (its sends arrived, its stage's all-reduce done), a replica of the
 * first or the last stage sends it to the replicas of the other stage that take it from
 * this one (replica p there from replica p mod k here), on the links' FIFO queues, and
 * waits for its own part from the other stage before the update. */
typedef struct sim_tie {
    double bytes;              /* 0: no exchange (no tie, or one stage holds both layers) */
    double *ready, *arr;       /* [nu] when each unit sent its part, when the other's arrived; NAN: not yet */
} sim_tie;

/* Unit u is at its OPTIMIZER with its gradient ready at `ready`: send once, then the
 * time the other stage's part is in (>= ready), or NAN while it has not been sent. */
static double tie_exchange(sim_tie *tt, const ppdl_cluster_model *cl, const int *u0, int S, sim_unit *U, int u,
                           double ready, double *link_free)
{
    sim_unit *x = &U[u];
    if (tt->bytes <= 0 || (x->s != 0 && x->s != S - 1)) return ready;
    int N = cl->N, o = x->s == 0 ? S - 1 : 0, ko = u0[o + 1] - u0[o];
    if (isnan(tt->ready[u])) {
        tt->ready[u] = ready;
        for (int p = x->q; p < ko; p += x->k) {
            int v = u0[o] + p, a = x->rank, b = U[v].rank;
            if (a == b) {
                /* both stages on one rank (zb-v's rank 0): a copy in memory, free as
                 * any message between a rank's stages (costmodel.c), and the other's
                 * part is ready too (a rank's backwards all precede its OPTIMIZER; the
                 * runtime posts both before waiting for either) */
                tt->arr[v] = tt->arr[u] = ready;
                tt->ready[v] = ready;
                continue;
            }
            double start = fmax(ready, link_free[(size_t)a * N + b]);
            link_free[(size_t)a * N + b] = start + 1000.0 * tt->bytes / cl->bw[(size_t)a * N + b];
            tt->arr[v] = link_free[(size_t)a * N + b] + 1000.0 * cl->lat[(size_t)a * N + b];
        }
    }
    return isnan(tt->arr[u]) ? NAN : fmax(ready, tt->arr[u]);
}

/* the state of one play */
typedef struct sim_ctx {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    const ppdl_plan *p;
    int M, S, N, nu, nt, record, *cap;
    const int *u0;
    sim_unit *U;
    sim_thread *T;
    double *act_arr, *grad_arr, *link_free, *bwd_done;
    const double *allreduce_ms;
    sim_tie *tie;
    ppdl_sim *out;
} sim_ctx;

/* the unit whose op the thread runs next */
static int cur_unit(const sim_thread *th) { return th->units[th->order[th->pc]]; }

/* Unit x sends op's message at `now`: on its directed rank pair's FIFO queue, the
 * transfer starts when the link is free, takes bytes / bandwidth and arrives latency
 * later. A message between two stages of one rank (a chunked plan) arrives as it is
 * sent: it costs nothing but its place in the rank's order. */
static void sim_send(sim_ctx *g, const sim_unit *x, const ppdl_op *op, double now)
{
    int act = op->kind == PPDL_OP_SEND_ACT, s = x->s, N = g->N;
    const ppdl_plan_stage *ps = &g->p->stages[s], *peer = &g->p->stages[act ? s + 1 : s - 1];
    int a = x->rank, b = rep_rank(peer, op->mb % n_rep(peer));
    double t_arr = now;
    if (a != b) {
        double bytes = ppdl_msg_bytes(g->c, act ? ps->last : ps->first - 1);
        double start = fmax(now, g->link_free[(size_t)a * N + b]);
        g->link_free[(size_t)a * N + b] = start + 1000.0 * bytes / g->cl->bw[a * N + b];
        t_arr = g->link_free[(size_t)a * N + b] + 1000.0 * g->cl->lat[a * N + b];
    }
    if (act) g->act_arr[(size_t)s * g->M + op->mb] = t_arr;
    else g->grad_arr[(size_t)s * g->M + op->mb] = t_arr;
}

/* When the slot of a compute op's micro-batch has its send buffer back, as in the
 * runtime: its previous message arrived (replica q's slot of mb held mb - slots*k
 * before); -INFINITY when there is none to wait for (W sends nothing). */
static double slot_free_at(const sim_ctx *g, const sim_unit *x, const ppdl_op *op)
{
    int s = x->s, back = x->slots * x->k;
    if (op->mb < back) return -INFINITY;
    size_t i = (size_t)s * g->M + op->mb - back;
    if (op->kind == PPDL_OP_FORWARD) return s + 1 < g->S ? g->act_arr[i] : -INFINITY;
    if (op->kind == PPDL_OP_BACKWARD || op->kind == PPDL_OP_BACKWARD_INPUT) return s > 0 ? g->grad_arr[i] : -INFINITY;
    return -INFINITY;
}

/* from t, the time every send of the thread's units has arrived: an OPTIMIZER waits for
 * them before the weights change (a chunked rank updates its stages together, once all
 * its sends are in, as ppdl_runtime_step does) */
static double sends_arrived(const sim_ctx *g, const sim_thread *th, double t)
{
    for (int i = 0; i < th->n_units; i++) {
        const sim_unit *x = &g->U[th->units[i]];
        for (int j = x->q; j < g->M; j += x->k) {
            if (x->s + 1 < g->S) t = fmax(t, g->act_arr[(size_t)x->s * g->M + j]);
            if (x->s > 0) t = fmax(t, g->grad_arr[(size_t)x->s * g->M + j]);
        }
    }
    return t;
}

/* when the all-reduce of unit x's stage ends (t when not replicated), or NAN while a
 * replica of one of the thread's replicated stages is still before its last backward.
 * The sums of a rank's stages (a chunked plan in k copies: their replicas are on the same
 * k ranks) share those ranks' links: they run one after another, in the order their
 * stages' replicas are all done (ties: the earlier stage), each replica.h's ring cost
 * long; a rank of one stage has the one sum, from its last replica's last backward. */
static double allreduce_done(const sim_ctx *g, const sim_thread *th, const sim_unit *x, double t)
{
    if (x->k <= 1) return t;
    int n = th->n_units;
    double *ready = ppdl_xmalloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) {
        int s = g->U[th->units[i]].s;
        ready[i] = g->U[th->units[i]].k > 1 ? 0 : INFINITY; /* INFINITY: no sum */
        for (int v = g->u0[s]; v < g->u0[s + 1] && isfinite(ready[i]); v++)
            ready[i] = isnan(g->bwd_done[v]) ? NAN : fmax(ready[i], g->bwd_done[v]);
        if (isnan(ready[i])) {
            free(ready);
            return NAN;
        }
    }
    /* the chain: the next ready sum starts when it is ready and the previous one ended
     * (units are in stage order, so the first of equal ready times is the earlier stage) */
    double end = 0, mine = NAN;
    for (int done = 0; done < n && isnan(mine); done++) {
        int next = 0;
        for (int i = 1; i < n; i++)
            if (ready[i] < ready[next]) next = i;
        if (!isfinite(ready[next])) break;
        const sim_unit *y = &g->U[th->units[next]];
        end = fmax(end, ready[next]) + g->allreduce_ms[y->s];
        if (y == x) mine = end;
        ready[next] = INFINITY;
    }
    free(ready);
    return fmax(t, mine);
}

/* Thread i at time now (its t <= now): run its ops up to the next that takes time — a
 * compute op starts (th->run), a wait whose end is known (th->t > now), or one whose
 * end is not (a message not sent yet, a replica before its last backward). Returns 1
 * when it did something. */
static int shared_step(sim_ctx *g, int i, double now)
{
    sim_thread *th = &g->T[i];
    ppdl_sim *out = g->out;
    int did = 0;
    while (th->pc < th->n && !th->run && th->t <= now) {
        int u = cur_unit(th);
        sim_unit *x = &g->U[u];
        const ppdl_op *op = &x->ops.ops[x->next];
        int s = x->s, mb = op->mb, M = g->M;
        double arr, work = 0;
        switch (op->kind) {
        case PPDL_OP_RECV_ACT:
        case PPDL_OP_RECV_GRAD:
            arr = op->kind == PPDL_OP_RECV_ACT ? g->act_arr[(size_t)(s - 1) * M + mb] : g->grad_arr[(size_t)(s + 1) * M + mb];
            if (isnan(arr)) return did;
            if (arr > th->t) {
                add_ev(out, g->cap, g->record, x->rank, s, PPDL_EV_WAIT, mb, th->t, arr);
                th->t = arr;
                return 1; /* until it arrives */
            }
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, mb, th->t, th->t);
            break;
        case PPDL_OP_FORWARD:
        case PPDL_OP_BACKWARD:
        case PPDL_OP_BACKWARD_INPUT:
        case PPDL_OP_BACKWARD_WEIGHT: {
            double t = slot_free_at(g, x, op); /* the slot's send buffer must be free */
            if (t > th->t) {
                th->t = t;
                return 1;
            }
            work = op_ms(x, op->kind);
            break;
        }
        case PPDL_OP_SEND_ACT:
        case PPDL_OP_SEND_GRAD:
            sim_send(g, x, op, th->t);
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, mb, th->t, th->t);
            break;
        case PPDL_OP_OPTIMIZER: {
            double t_msg = sends_arrived(g, th, th->t);
            double t = allreduce_done(g, th, x, t_msg);
            if (isnan(t)) return did;
            if (t > th->t) {
                add_update_waits(out, g->cap, g->record, x->rank, s, th->t, t_msg, t);
                th->t = t;
                return 1;
            }
            /* then a tied weight's part from the other stage (like a RECV) */
            t = tie_exchange(g->tie, g->cl, g->u0, g->S, g->U, u, th->t, g->link_free);
            if (isnan(t)) return did;
            if (t > th->t) {
                add_ev(out, g->cap, g->record, x->rank, s, PPDL_EV_WAIT, -1, th->t, t);
                th->t = t;
                return 1;
            }
            work = x->opt_ms;
            break;
        }
        default:
            break;
        }
        did = 1;
        if (work > 0) { /* a compute op: it ends when its host has done its work */
            th->run = 1;
            th->rem = work;
            th->t0 = th->t;
            return 1;
        }
        if (op->kind == PPDL_OP_FORWARD || op->kind == PPDL_OP_BACKWARD || op->kind == PPDL_OP_BACKWARD_INPUT ||
            op->kind == PPDL_OP_BACKWARD_WEIGHT || op->kind == PPDL_OP_OPTIMIZER)
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, op->kind == PPDL_OP_OPTIMIZER ? -1 : mb, th->t, th->t);
        if (x->next == x->last_bwd) g->bwd_done[u] = th->t;
        x->next++;
        th->pc++;
    }
    return did;
}

/* a compute op of thread i ends at `now` */
static void shared_finish(sim_ctx *g, int i, double now)
{
    sim_thread *th = &g->T[i];
    int u = cur_unit(th);
    sim_unit *x = &g->U[u];
    const ppdl_op *op = &x->ops.ops[x->next];
    int mb = op->kind == PPDL_OP_OPTIMIZER ? -1 : op->mb;
    add_ev(g->out, g->cap, g->record, x->rank, x->s, op->kind, mb, th->t0, now);
    double rc = op_rc_ms(x, op->kind);
    if (rc > 0) /* its recompute part, in proportion */
        add_ev(g->out, g->cap, g->record, x->rank, x->s, PPDL_EV_RECOMPUTE, mb, th->t0,
               th->t0 + (now - th->t0) * rc / op_ms(x, op->kind));
    if (x->next == x->last_bwd) g->bwd_done[u] = now;
    th->run = 0;
    th->rem = 0;
    th->t = now;
    x->next++;
    th->pc++;
}

static int deadlock(const sim_ctx *g, int schedule, char *err, size_t errlen)
{
    return ppdl_errf(err, errlen, "simulator: the %s schedule deadlocks with %d stages and %d micro-batches",
                     ppdl_schedule_name(schedule), g->S, g->M);
}

/* The event-driven play with processor sharing on each host (see the top). */
static int play_shared(sim_ctx *g, int schedule, char *err, size_t errlen)
{
    const ppdl_hosts *h = &g->cl->hosts;
    int nt = g->nt;
    int *running = ppdl_xcalloc((size_t)h->n, sizeof(int));
    double *rate = ppdl_xmalloc((size_t)nt * sizeof(double));
    double now = 0;
    int rc = 0;
    for (;;) {
        /* everything that happens at `now` without time passing */
        for (int moved = 1; moved;) {
            moved = 0;
            for (int i = 0; i < nt; i++)
                if (!g->T[i].run && g->T[i].t <= now) moved |= shared_step(g, i, now);
        }
        /* the rates until the next event, and that event */
        for (int k = 0; k < h->n; k++) running[k] = 0;
        for (int i = 0; i < nt; i++) running[g->T[i].host] += g->T[i].run;
        double next = INFINITY;
        int left = 0;
        for (int i = 0; i < nt; i++) {
            const sim_thread *th = &g->T[i];
            if (th->pc >= th->n) continue;
            left++;
            if (th->run) {
                int k = running[th->host], cores = h->cores[th->host];
                rate[i] = k > cores ? (double)cores / k : 1.0;
                next = fmin(next, now + th->rem / rate[i]);
            } else if (th->t > now) {
                next = fmin(next, th->t);
            }
        }
        if (!left) break;
        if (isinf(next)) {
            rc = deadlock(g, schedule, err, errlen);
            break;
        }
        /* to it: the ops that end there end (a tie ends together), the others did
         * rate x dt of their work */
        for (int i = 0; i < nt; i++) {
            sim_thread *th = &g->T[i];
            if (!th->run) continue;
            if (now + th->rem / rate[i] <= next) shared_finish(g, i, next);
            else th->rem = fmax(0, th->rem - (next - now) * rate[i]);
        }
        now = next;
    }
    free(running);
    free(rate);
    return rc;
}

/* The sweep: every thread as far as it can go, again and again (see the top). */
static int play_sweep(sim_ctx *g, int schedule, char *err, size_t errlen)
{
    ppdl_sim *out = g->out;
    int *cap = g->cap, record = g->record, M = g->M, S = g->S, done = 0;
    while (done < g->nt) {
        int moved = 0;
        done = 0;
        for (int i = 0; i < g->nt; i++) {
            sim_thread *th = &g->T[i];
            while (th->pc < th->n) {
                int u = cur_unit(th);
                sim_unit *x = &g->U[u];
                const ppdl_op *op = &x->ops.ops[x->next];
                int s = x->s, mb = op->mb;
                double arr;
                switch (op->kind) {
                case PPDL_OP_RECV_ACT:
                case PPDL_OP_RECV_GRAD:
                    arr = op->kind == PPDL_OP_RECV_ACT ? g->act_arr[(size_t)(s - 1) * M + mb]
                                                       : g->grad_arr[(size_t)(s + 1) * M + mb];
                    if (isnan(arr)) goto blocked;
                    if (arr > th->t) {
                        add_ev(out, cap, record, x->rank, s, PPDL_EV_WAIT, mb, th->t, arr);
                        th->t = arr;
                    }
                    add_ev(out, cap, record, x->rank, s, op->kind, mb, th->t, th->t);
                    break;
                case PPDL_OP_FORWARD:
                case PPDL_OP_BACKWARD:
                case PPDL_OP_BACKWARD_INPUT:
                case PPDL_OP_BACKWARD_WEIGHT: {
                    th->t = fmax(th->t, slot_free_at(g, x, op)); /* the slot's send buffer must be free */
                    double d = op_ms(x, op->kind), rc_d = op_rc_ms(x, op->kind);
                    add_ev(out, cap, record, x->rank, s, op->kind, mb, th->t, th->t + d);
                    if (rc_d > 0) add_ev(out, cap, record, x->rank, s, PPDL_EV_RECOMPUTE, mb, th->t, th->t + rc_d);
                    th->t += d;
                    if (x->next == x->last_bwd) g->bwd_done[u] = th->t;
                    break;
                }
                case PPDL_OP_SEND_ACT:
                case PPDL_OP_SEND_GRAD:
                    sim_send(g, x, op, th->t);
                    add_ev(out, cap, record, x->rank, s, op->kind, mb, th->t, th->t);
                    break;
                case PPDL_OP_OPTIMIZER: {
                    /* every send of the step has arrived before the weights change */
                    double t_msg = sends_arrived(g, th, th->t);
                    /* the all-reduce starts once every replica has its gradients */
                    double t = allreduce_done(g, th, x, t_msg);
                    if (isnan(t)) goto blocked;
                    /* then a tied weight's part from the other stage (a message wait) */
                    double t_tie = tie_exchange(g->tie, g->cl, g->u0, S, g->U, u, t, g->link_free);
                    if (isnan(t_tie)) goto blocked;
                    add_update_waits(out, cap, record, x->rank, s, th->t, t_msg, t);
                    if (t_tie > fmax(th->t, t)) add_ev(out, cap, record, x->rank, s, PPDL_EV_WAIT, -1, fmax(th->t, t), t_tie);
                    th->t = fmax(t, t_tie);
                    add_ev(out, cap, record, x->rank, s, PPDL_OP_OPTIMIZER, -1, th->t, th->t + x->opt_ms);
                    th->t += x->opt_ms;
                    break;
                }
                default:
                    break;
                }
                x->next++;
                th->pc++;
                moved = 1;
            }
        blocked:
            if (th->pc == th->n) done++;
        }
        if (!moved && done < g->nt) return deadlock(g, schedule, err, errlen);
    }
    return 0;
}

/* 1 when some host runs more of the plan's threads (ranks) than it has cores */
static int shares_cores(const ppdl_cluster_model *cl, const sim_thread *T, int nt)
{
    const ppdl_hosts *h = &cl->hosts;
    if (h->n <= 0 || !h->of_rank || !h->cores) return 0;
    int *k = ppdl_xcalloc((size_t)h->n, sizeof(int)), over = 0;
    for (int i = 0; i < nt; i++) k[h->of_rank[T[i].rank]]++;
    for (int i = 0; i < h->n; i++) over |= k[i] > h->cores[i];
    free(k);
    return over;
}

/* unit x's op times: its stage's layers on its rank (costmodel.h's terms) */
static void unit_costs(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, const ppdl_plan_stage *ps,
                       sim_unit *x)
{
    double v = cl->speed[x->rank];
    for (int l = ps->first; l <= ps->last; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        int o = ps->recompute[l - ps->first];
        double e = lc->extra_ms[o];
        x->f_ms += lc->fwd_ms / v;
        x->b_ms += (lc->bwd_ms + e) / v;
        x->rc_ms += e / v;
        x->bi_ms += ppdl_layer_bwd_input_ms(c, lc, o) / v;
        x->bw_ms += ppdl_layer_bwd_weight_ms(c, lc, o) / v;
        x->rci_ms += e / v;
        x->rcw_ms += (ppdl_layer_bwd_weight_ms(c, lc, o) - ppdl_layer_bwd_weight_ms(c, lc, 0)) / v;
    }
    /* reading a micro-batch's data belongs to the forward of the first and last stage */
    if (ps->first == 0) x->f_ms += c->input_ms / v;
    if (ps->last == c->L - 1) x->f_ms += c->target_ms / v;
    /* a sharded state: each replica updates its slice */
    x->opt_ms = ppdl_stage_opt_ms(c, ps->first, ps->last, ppdl_opt_speed(cl, x->rank)) /
                ppdl_opt_divisor(p->shard_optimizer, ps);
}

/* A thread per unit, each running its one list in order. */
static void unit_threads(const sim_unit *U, int nu, sim_thread *T)
{
    for (int u = 0; u < nu; u++) {
        T[u].rank = U[u].rank;
        T[u].n_units = 1;
        T[u].units = ppdl_xmalloc(sizeof(int));
        T[u].units[0] = u;
        T[u].n = U[u].ops.n;
        T[u].order = ppdl_xcalloc((size_t)(U[u].ops.n > 0 ? U[u].ops.n : 1), sizeof(int)); /* all 0: the one list */
    }
}

/* Copy q of a chunked plan (of k; one copy: q = 0, k = 1): every rank's schedule, the
 * runtime's (ppdl_schedule_make_all) for the copy's n ranks and its Mq micro-batches,
 * proven as the runtime proves it (ppdl_schedule_check_ranks); stage s's list goes to
 * unit u0[s] + q with its micro-batches numbered as in the step (i-th: q + i k), thread r
 * runs the order of the schedule's position r, on copy q's rank of stage r (the cost
 * model checked that the plan follows the schedule's order in every copy). */
static int copy_threads(const ppdl_plan *p, int schedule, int n, int v, int q, int k, int Mq, const ppdl_zb_times *tm,
                        const int *u0, sim_unit *U, sim_thread *T, char *err, size_t errlen)
{
    ppdl_rank_schedule *rs = ppdl_xcalloc((size_t)n, sizeof *rs);
    ppdl_schedule_spec sp = {schedule, v * n, Mq, v, NULL, tm};
    int rc = ppdl_schedule_make_all(&sp, rs, err, errlen);
    if (!rc) rc = ppdl_schedule_check_ranks(n, v, Mq, rs, err, errlen);
    for (int r = 0; r < n; r++) {
        sim_thread *th = &T[r];
        th->rank = rep_rank(&p->stages[r], q); /* position r of the schedule: the rank of stage r (r < n) */
        if (!rc) {
            th->n_units = rs[r].n_stages;
            th->units = ppdl_xmalloc((size_t)th->n_units * sizeof(int));
            for (int c = 0; c < th->n_units; c++) {
                ppdl_op_list *l = &rs[r].lists[c];
                for (int i = 0; i < l->n; i++)
                    if (l->ops[i].mb >= 0) l->ops[i].mb = q + l->ops[i].mb * k;
                th->units[c] = u0[rs[r].stages[c]] + q;
                U[th->units[c]].ops = *l; /* moved */
                *l = (ppdl_op_list){0};
            }
            th->n = rs[r].n;
            th->order = rs[r].order; /* moved */
            rs[r].order = NULL;
        }
        ppdl_rank_schedule_free(&rs[r]);
    }
    free(rs);
    return rc;
}

/* A chunked plan's k copies (k = 1: the one pipeline) on the N ranks: copy q's threads
 * are T[q n .. q n + n - 1], n = N / k, running micro-batches q, q + k, .. (tm: the
 * timed orders, accepted for every copy, or NULL) */
static int chunk_threads(const ppdl_plan *p, int schedule, int N, int v, int k, int M, const ppdl_zb_times *tm,
                         const int *u0, sim_unit *U, sim_thread *T, char *err, size_t errlen)
{
    int n = N / k, rc = 0;
    for (int q = 0; q < k && !rc; q++)
        rc = copy_threads(p, schedule, n, v, q, k, ppdl_replica_mbs(M, k, q), tm, u0, U, T + (size_t)q * n, err, errlen);
    return rc;
}

int ppdl_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M,
                  int schedule, int record, ppdl_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* the head cut by vocabulary: the derived zb-v plan's play (vocab.h) */
    if (p->n_vocab > 0) return ppdl_vocab_simulate(c, cl, p, M, schedule, record, out, err, errlen);
    /* a layout no schedule can run (a stage without replicas) */
    int *layout = ppdl_xmalloc((size_t)(p->S > 0 ? p->S : 1) * sizeof(int));
    for (int s = 0; s < p->S; s++) layout[s] = n_rep(&p->stages[s]);
    /* (a chunked plan's copies are its stages' replicas: the cost model checks them) */
    int unsupported = ppdl_plan_chunks(p) < 2 && ppdl_schedule_supports(schedule, p->S, layout, err, errlen);
    free(layout);
    if (unsupported) return -1;
    ppdl_cost_eval ev;
    /* validates p, a chunked plan's placement under its schedule too */
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, errlen)) return -1;
    int S = p->S, N = cl->N, chunked = ppdl_schedule_chunked(schedule), rc = 0;

    /* units: (stage, replica), stage by stage */
    int nu = 0, *u0 = ppdl_xmalloc(((size_t)S + 1) * sizeof(int));
    for (int s = 0; s < S; s++) {
        u0[s] = nu;
        nu += n_rep(&p->stages[s]);
    }
    u0[S] = nu;
    sim_unit *U = ppdl_xcalloc((size_t)nu, sizeof *U);
    /* a zero-bubble schedule's passes in the order of their times, as the runtime
     * orders them (plan/pass_times.h) */
    long *ticks = ppdl_xmalloc(4 * (size_t)S * sizeof *ticks);
    ppdl_pass_times_of_plan(c, cl, p, ticks);
    ppdl_zb_times tm = ppdl_pass_times_view(ticks, S);
    char why[PPDL_ERR_LEN];
    ppdl_schedule_spec sp = {schedule, S, M, 1, ev.replicas, &tm};
    if (!ppdl_pass_times_accepted(p, schedule, M, &tm, why, sizeof why)) sp.tm = NULL; /* the unit play's */
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *ps = &p->stages[s];
        for (int q = 0; q < n_rep(ps); q++) {
            sim_unit *x = &U[u0[s] + q];
            x->s = s;
            x->q = q;
            x->k = n_rep(ps);
            x->rank = rep_rank(ps, q);
            unit_costs(c, cl, p, ps, x);
            if (!chunked) { /* the runtime's list */
                ppdl_rank_schedule rs;
                PPDL_CHECK(ppdl_schedule_make(&sp, ppdl_schedule_device(&sp, s, q), &rs, why, sizeof why) == 0, "%s", why);
                x->ops = ppdl_rank_schedule_take(&rs, 0);
            }
        }
    }
    /* threads: a rank each; the lists are proven before they are played, as the
     * runtime proves them */
    int nt = chunked ? N : nu;
    sim_thread *T = ppdl_xcalloc((size_t)nt, sizeof *T);
    if (chunked) {
        rc = chunk_threads(p, schedule, N, ppdl_plan_chunks(p), ppdl_plan_chunk_replicas(p), M, sp.tm, u0, U, T, err,
                           errlen);
    } else {
        unit_threads(U, nu, T);
        ppdl_op_list *lists = ppdl_xmalloc((size_t)nu * sizeof *lists);
        for (int u = 0; u < nu; u++) lists[u] = U[u].ops; /* shallow: U keeps them */
        rc = ppdl_schedule_check_layout(S, M, ev.replicas, lists, err, errlen);
        free(lists);
    }
    free(ticks);
    for (int u = 0; u < nu; u++) {
        sim_unit *x = &U[u];
        x->slots = ppdl_schedule_max_in_flight(&x->ops);
        x->last_bwd = -1;
        for (int i = 0; i < x->ops.n; i++)
            if (x->ops.ops[i].kind == PPDL_OP_BACKWARD || x->ops.ops[i].kind == PPDL_OP_BACKWARD_WEIGHT) x->last_bwd = i;
    }
    /* arrival times: act_arr[s*M+mb] at stage s+1 from s; grad_arr[s*M+mb] at s-1 from s */
    double *act_arr = ppdl_xmalloc((size_t)S * M * sizeof(double));
    double *grad_arr = ppdl_xmalloc((size_t)S * M * sizeof(double));
    for (size_t k = 0; k < (size_t)S * M; k++) act_arr[k] = grad_arr[k] = NAN;
    double *link_free = ppdl_xcalloc((size_t)N * N, sizeof(double)); /* directed pair a->b */
    double *bwd_done = ppdl_xmalloc((size_t)nu * sizeof(double));     /* end of each unit's last backward */
    for (int u = 0; u < nu; u++) bwd_done[u] = NAN;
    sim_tie tie = {S > 1 ? c->tied_bytes : 0, ppdl_xmalloc((size_t)nu * sizeof(double)),
                   ppdl_xmalloc((size_t)nu * sizeof(double))};
    for (int u = 0; u < nu; u++) tie.ready[u] = tie.arr[u] = NAN;

    int cap = 0;
    sim_ctx g = {.c = c, .cl = cl, .p = p, .M = M, .S = S, .N = N, .nu = nu, .nt = nt, .record = record, .cap = &cap,
                 .u0 = u0, .U = U, .T = T, .act_arr = act_arr, .grad_arr = grad_arr, .link_free = link_free,
                 .bwd_done = bwd_done, .allreduce_ms = ev.allreduce_ms, .tie = &tie, .out = out};
    if (!rc && shares_cores(cl, T, nt)) { /* a failed check plays nothing */
        for (int i = 0; i < nt; i++) T[i].host = cl->hosts.of_rank[T[i].rank];
        rc = play_shared(&g, schedule, err, errlen);
    } else if (!rc) {
        rc = play_sweep(&g, schedule, err, errlen);
    }
    if (!rc) {
        double busy = 0;
        for (int i = 0; i < nt; i++)
            if (T[i].t > out->step_ms) out->step_ms = T[i].t;
        for (int u = 0; u < nu; u++) {
            if (ppdl_schedule_max_pending_weight(&U[u].ops) == 0)
                busy += ppdl_replica_mbs(M, U[u].k, U[u].q) * (U[u].f_ms + U[u].b_ms);
            else /* a split backward: each op's own time */
                for (int i = 0; i < U[u].ops.n; i++) busy += op_ms(&U[u], U[u].ops.ops[i].kind);
        }
        out->busy_frac = out->step_ms > 0 ? busy / (nt * out->step_ms) : 1;
    }
    for (int u = 0; u < nu; u++) ppdl_op_list_free(&U[u].ops);
    for (int i = 0; i < nt; i++) {
        free(T[i].units);
        free(T[i].order);
    }
    free(T);
    free(U);
    free(u0);
    free(act_arr);
    free(grad_arr);
    free(link_free);
    free(bwd_done);
    free(tie.ready);
    free(tie.arr);
    ppdl_cost_eval_free(&ev);
    if (rc) ppdl_sim_free(out);
    return rc;
}

void ppdl_sim_free(ppdl_sim *s)
{
    free(s->ev);
    memset(s, 0, sizeof *s);
}

double ppdl_simulated_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M, int schedule)
{
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    if (ppdl_simulate(c, cl, p, M, schedule, 0, &sim, err, sizeof err)) return NAN;
    double ms = sim.step_ms;
    ppdl_sim_free(&sim);
    return ms;
}
