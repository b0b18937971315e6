/* simulate.c — a discrete-event play of the schedule's op lists, one per replica.
 *
 * A replica's timeline depends only on its own ops, on when messages reach it and on
 * when its stage's all-reduce ends; a message's arrival is fixed the moment its sender
 * runs the SEND (each directed rank pair has one sender, which sends in list order, so
 * FIFO order is list order). So the simulator advances every replica as far as it can
 * — until a RECV whose message has not been sent yet, or an OPTIMIZER whose stage has
 * a replica still before its last backward — and sweeps over the replicas until all
 * lists are done. A sweep that moves nothing is a deadlock (the schedule checker rules
 * it out; this is a second guard).
 *
 * With more replicas than cores on a host (cluster_model.h's hosts), a compute op's
 * duration depends on what else runs on its host meanwhile, so that sweep cannot
 * apply: play_shared() advances one clock over events instead (an op starts or ends,
 * a wait ends) and, between two events, runs each compute op on host h at
 * min(1, cores_h / compute ops running on h) of its full speed (processor sharing;
 * a replica that waits takes no core). Otherwise the sweep runs as it always did.
 */
#include "plan/simulate.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/costmodel.h"
#include "plan/replica.h"

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
    double t;                  /* current time */
    int pc;                    /* next op */
    int slots;                 /* micro-batches it holds at once */
    int last_bwd;              /* index of its last BACKWARD or BACKWARD_WEIGHT */
    ppdl_op_list ops;
    /* play_shared only */
    int host;                  /* index into the cluster's hosts */
    int run;                   /* 1: computing the op at pc */
    double rem, t0;            /* its work left (ms at full speed), its start */
} sim_unit;

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
            double start = fmax(ready, link_free[(size_t)a * N + b]);
            link_free[(size_t)a * N + b] = start + 1000.0 * tt->bytes / cl->bw[(size_t)a * N + b];
            tt->arr[v] = link_free[(size_t)a * N + b] + 1000.0 * cl->lat[(size_t)a * N + b];
        }
    }
    return isnan(tt->arr[u]) ? NAN : fmax(ready, tt->arr[u]);
}

/* what play_shared needs of ppdl_simulate's state */
typedef struct sim_ctx {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    const ppdl_plan *p;
    int M, S, N, nu, record, *cap;
    const int *u0;
    sim_unit *U;
    double *act_arr, *grad_arr, *link_free, *bwd_done;
    const double *allreduce_ms;
    sim_tie *tie;
    ppdl_sim *out;
} sim_ctx;

/* Unit x at time now (x->t <= now): run its ops up to the next that takes time — a
 * compute op starts (x->run), a wait whose end is known (x->t > now), or one whose end
 * is not (a message not sent yet, a replica before its last backward). Returns 1 when
 * it did something. */
static int shared_step(sim_ctx *g, int u, double now)
{
    sim_unit *x = &g->U[u];
    int s = x->s, M = g->M, S = g->S, N = g->N, did = 0;
    const ppdl_plan_stage *ps = &g->p->stages[s];
    ppdl_sim *out = g->out;
    while (x->pc < x->ops.n && !x->run && x->t <= now) {
        const ppdl_op *op = &x->ops.ops[x->pc];
        int mb = op->mb;
        double arr, work = 0;
        switch (op->kind) {
        case PPDL_OP_RECV_ACT:
        case PPDL_OP_RECV_GRAD:
            arr = op->kind == PPDL_OP_RECV_ACT ? g->act_arr[(size_t)(s - 1) * M + mb] : g->grad_arr[(size_t)(s + 1) * M + mb];
            if (isnan(arr)) return did;
            if (arr > x->t) {
                add_ev(out, g->cap, g->record, x->rank, s, PPDL_EV_WAIT, mb, x->t, arr);
                x->t = arr;
                return 1; /* until it arrives */
            }
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, mb, x->t, x->t);
            break;
        case PPDL_OP_FORWARD:
        case PPDL_OP_BACKWARD:
        case PPDL_OP_BACKWARD_INPUT:
        case PPDL_OP_BACKWARD_WEIGHT: {
            int fwd = op->kind == PPDL_OP_FORWARD;
            /* the slot's send buffer must be free (as in the sweep); W sends nothing */
            if (op->kind != PPDL_OP_BACKWARD_WEIGHT && (fwd ? s + 1 < S : s > 0)) {
                if (mb >= x->slots * x->k) {
                    double t = fwd ? g->act_arr[(size_t)s * M + mb - x->slots * x->k]
                                   : g->grad_arr[(size_t)s * M + mb - x->slots * x->k];
                    if (t > x->t) {
                        x->t = t;
                        return 1;
                    }
                }
            }
            work = op_ms(x, op->kind);
            break;
        }
        case PPDL_OP_SEND_ACT:
        case PPDL_OP_SEND_GRAD: {
            int act = op->kind == PPDL_OP_SEND_ACT;
            const ppdl_plan_stage *peer = &g->p->stages[act ? s + 1 : s - 1];
            int a = x->rank, b = rep_rank(peer, mb % n_rep(peer));
            double bytes = ppdl_msg_bytes(g->c, act ? ps->last : ps->first - 1);
            double start = fmax(x->t, g->link_free[(size_t)a * N + b]);
            g->link_free[(size_t)a * N + b] = start + 1000.0 * bytes / g->cl->bw[a * N + b];
            double t_arr = g->link_free[(size_t)a * N + b] + 1000.0 * g->cl->lat[a * N + b];
            if (act) g->act_arr[(size_t)s * M + mb] = t_arr;
            else g->grad_arr[(size_t)s * M + mb] = t_arr;
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, mb, x->t, x->t);
            break;
        }
        case PPDL_OP_OPTIMIZER: {
            double t = x->t;
            for (int j = x->q; j < M; j += x->k) {
                if (s + 1 < S) t = fmax(t, g->act_arr[(size_t)s * M + j]);
                if (s > 0) t = fmax(t, g->grad_arr[(size_t)s * M + j]);
            }
            double t_msg = t;
            if (x->k > 1) {
                double start = 0;
                for (int v = g->u0[s]; v < g->u0[s + 1]; v++) {
                    if (isnan(g->bwd_done[v])) return did;
                    start = fmax(start, g->bwd_done[v]);
                }
                t = fmax(t, start + g->allreduce_ms[s]);
            }
            if (t > x->t) {
                add_update_waits(out, g->cap, g->record, x->rank, s, x->t, t_msg, t);
                x->t = t;
                return 1;
            }
            /* then a tied weight's part from the other stage (like a RECV) */
            t = tie_exchange(g->tie, g->cl, g->u0, S, g->U, u, x->t, g->link_free);
            if (isnan(t)) return did;
            if (t > x->t) {
                add_ev(out, g->cap, g->record, x->rank, s, PPDL_EV_WAIT, -1, x->t, t);
                x->t = t;
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
            x->run = 1;
            x->rem = work;
            x->t0 = x->t;
            return 1;
        }
        if (op->kind == PPDL_OP_FORWARD || op->kind == PPDL_OP_BACKWARD || op->kind == PPDL_OP_BACKWARD_INPUT ||
            op->kind == PPDL_OP_BACKWARD_WEIGHT || op->kind == PPDL_OP_OPTIMIZER)
            add_ev(out, g->cap, g->record, x->rank, s, op->kind, op->kind == PPDL_OP_OPTIMIZER ? -1 : mb, x->t, x->t);
        if (x->pc == x->last_bwd) g->bwd_done[u] = x->t;
        x->pc++;
    }
    return did;
}

/* a compute op of unit x ends at `now` */
static void shared_finish(sim_ctx *g, int u, double now)
{
    sim_unit *x = &g->U[u];
    const ppdl_op *op = &x->ops.ops[x->pc];
    int mb = op->kind == PPDL_OP_OPTIMIZER ? -1 : op->mb;
    add_ev(g->out, g->cap, g->record, x->rank, x->s, op->kind, mb, x->t0, now);
    double rc = op_rc_ms(x, op->kind);
    if (rc > 0) /* its recompute part, in proportion */
        add_ev(g->out, g->cap, g->record, x->rank, x->s, PPDL_EV_RECOMPUTE, mb, x->t0,
               x->t0 + (now - x->t0) * rc / op_ms(x, op->kind));
    if (x->pc == x->last_bwd) g->bwd_done[u] = now;
    x->run = 0;
    x->rem = 0;
    x->t = now;
    x->pc++;
}

/* The event-driven play with processor sharing on each host (see the top). */
static int play_shared(sim_ctx *g, int schedule, char *err, size_t errlen)
{
    const ppdl_hosts *h = &g->cl->hosts;
    int nu = g->nu;
    int *running = ppdl_xcalloc((size_t)h->n, sizeof(int));
    double *rate = ppdl_xmalloc((size_t)nu * sizeof(double));
    double now = 0;
    int rc = 0;
    for (;;) {
        /* everything that happens at `now` without time passing */
        for (int moved = 1; moved;) {
            moved = 0;
            for (int u = 0; u < nu; u++)
                if (!g->U[u].run && g->U[u].t <= now) moved |= shared_step(g, u, now);
        }
        /* the rates until the next event, and that event */
        for (int i = 0; i < h->n; i++) running[i] = 0;
        for (int u = 0; u < nu; u++) running[g->U[u].host] += g->U[u].run;
        double next = INFINITY;
        int left = 0;
        for (int u = 0; u < nu; u++) {
            const sim_unit *x = &g->U[u];
            if (x->pc >= x->ops.n) continue;
            left++;
            if (x->run) {
                int k = running[x->host], cores = h->cores[x->host];
                rate[u] = k > cores ? (double)cores / k : 1.0;
                next = fmin(next, now + x->rem / rate[u]);
            } else if (x->t > now) {
                next = fmin(next, x->t);
            }
        }
        if (!left) break;
        if (isinf(next)) {
            rc = ppdl_errf(err, errlen, "simulator: the %s schedule deadlocks with %d stages and %d micro-batches",
                           ppdl_schedule_name(schedule), g->S, g->M);
            break;
        }
        /* to it: the ops that end there end (a tie ends together), the others did
         * rate x dt of their work */
        for (int u = 0; u < nu; u++) {
            sim_unit *x = &g->U[u];
            if (!x->run) continue;
            if (now + x->rem / rate[u] <= next) shared_finish(g, u, next);
            else x->rem = fmax(0, x->rem - (next - now) * rate[u]);
        }
        now = next;
    }
    free(running);
    free(rate);
    return rc;
}

/* 1 when some host runs more of the plan's replicas than it has cores */
static int shares_cores(const ppdl_cluster_model *cl, const sim_unit *U, int nu)
{
    const ppdl_hosts *h = &cl->hosts;
    if (h->n <= 0 || !h->of_rank || !h->cores) return 0;
    int *k = ppdl_xcalloc((size_t)h->n, sizeof(int)), over = 0;
    for (int u = 0; u < nu; u++) k[h->of_rank[U[u].rank]]++;
    for (int i = 0; i < h->n; i++) over |= k[i] > h->cores[i];
    free(k);
    return over;
}

int ppdl_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M,
                  int schedule, int record, ppdl_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* a layout no schedule can run (a stage without replicas) */
    int *layout = ppdl_xmalloc((size_t)(p->S > 0 ? p->S : 1) * sizeof(int));
    for (int s = 0; s < p->S; s++) layout[s] = n_rep(&p->stages[s]);
    int unsupported = ppdl_schedule_supports(schedule, p->S, layout, err, errlen);
    free(layout);
    if (unsupported) return -1;
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, errlen)) return -1; /* validates p */
    int S = p->S, N = cl->N, rc = 0;

    /* units: (stage, replica), stage by stage */
    int nu = 0, *u0 = ppdl_xmalloc(((size_t)S + 1) * sizeof(int));
    for (int s = 0; s < S; s++) {
        u0[s] = nu;
        nu += n_rep(&p->stages[s]);
    }
    u0[S] = nu;
    sim_unit *U = ppdl_xcalloc((size_t)nu, sizeof *U);
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *ps = &p->stages[s];
        int k = n_rep(ps);
        for (int q = 0; q < k; q++) {
            sim_unit *x = &U[u0[s] + q];
            x->s = s;
            x->q = q;
            x->k = k;
            x->rank = rep_rank(ps, q);
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
            x->opt_ms = ppdl_stage_opt_ms(c, ps->first, ps->last, v);
            ppdl_schedule_build_replica(schedule, S, M, ev.replicas, s, q, &x->ops); /* the runtime's list */
            x->slots = ppdl_schedule_max_in_flight(&x->ops);
            x->last_bwd = -1;
            for (int i = 0; i < x->ops.n; i++)
                if (x->ops.ops[i].kind == PPDL_OP_BACKWARD || x->ops.ops[i].kind == PPDL_OP_BACKWARD_WEIGHT)
                    x->last_bwd = i;
        }
    }
    /* the layout's lists are proven before they are played, as the runtime proves them */
    ppdl_op_list *lists = ppdl_xmalloc((size_t)nu * sizeof *lists);
    for (int u = 0; u < nu; u++) lists[u] = U[u].ops; /* shallow: U keeps them */
    rc = ppdl_schedule_check_layout(S, M, ev.replicas, lists, err, errlen);
    free(lists);
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

    int cap = 0, done_units = rc ? nu : 0; /* a failed check plays nothing */
    if (!rc && shares_cores(cl, U, nu)) {
        for (int u = 0; u < nu; u++) U[u].host = cl->hosts.of_rank[U[u].rank];
        sim_ctx g = {.c = c, .cl = cl, .p = p, .M = M, .S = S, .N = N, .nu = nu, .record = record, .cap = &cap,
                     .u0 = u0, .U = U, .act_arr = act_arr, .grad_arr = grad_arr, .link_free = link_free,
                     .bwd_done = bwd_done, .allreduce_ms = ev.allreduce_ms, .tie = &tie, .out = out};
        rc = play_shared(&g, schedule, err, errlen);
        done_units = nu; /* the sweep below has nothing to do */
    }
    while (done_units < nu) {
        int moved = 0;
        done_units = 0;
        for (int u = 0; u < nu; u++) {
            sim_unit *x = &U[u];
            int s = x->s;
            const ppdl_plan_stage *ps = &p->stages[s];
            while (x->pc < x->ops.n) {
                const ppdl_op *op = &x->ops.ops[x->pc];
                int mb = op->mb;
                double arr;
                switch (op->kind) {
                case PPDL_OP_RECV_ACT:
                case PPDL_OP_RECV_GRAD:
                    arr = op->kind == PPDL_OP_RECV_ACT ? act_arr[(size_t)(s - 1) * M + mb] : grad_arr[(size_t)(s + 1) * M + mb];
                    if (isnan(arr)) goto blocked;
                    if (arr > x->t) {
                        add_ev(out, &cap, record, x->rank, s, PPDL_EV_WAIT, mb, x->t, arr);
                        x->t = arr;
                    }
                    add_ev(out, &cap, record, x->rank, s, op->kind, mb, x->t, x->t);
                    break;
                case PPDL_OP_FORWARD:
                    /* the slot's send buffer must be free: its previous activation arrived
                     * (replica q's slot of mb held mb - slots*k before) */
                    if (s + 1 < S && mb >= x->slots * x->k)
                        x->t = fmax(x->t, act_arr[(size_t)s * M + mb - x->slots * x->k]);
                    add_ev(out, &cap, record, x->rank, s, PPDL_OP_FORWARD, mb, x->t, x->t + x->f_ms);
                    x->t += x->f_ms;
                    break;
                case PPDL_OP_BACKWARD:
                case PPDL_OP_BACKWARD_INPUT:
                case PPDL_OP_BACKWARD_WEIGHT: {
                    /* the slot's gradient send buffer must be free (not for W: it sends nothing) */
                    if (op->kind != PPDL_OP_BACKWARD_WEIGHT && s > 0 && mb >= x->slots * x->k)
                        x->t = fmax(x->t, grad_arr[(size_t)s * M + mb - x->slots * x->k]);
                    double d = op_ms(x, op->kind), rc_d = op_rc_ms(x, op->kind);
                    add_ev(out, &cap, record, x->rank, s, op->kind, mb, x->t, x->t + d);
                    if (rc_d > 0) add_ev(out, &cap, record, x->rank, s, PPDL_EV_RECOMPUTE, mb, x->t, x->t + rc_d);
                    x->t += d;
                    if (x->pc == x->last_bwd) bwd_done[u] = x->t;
                    break;
                }
                case PPDL_OP_SEND_ACT:
                case PPDL_OP_SEND_GRAD: {
                    int act = op->kind == PPDL_OP_SEND_ACT;
                    const ppdl_plan_stage *peer = &p->stages[act ? s + 1 : s - 1];
                    int a = x->rank, b = rep_rank(peer, mb % n_rep(peer));
                    double bytes = ppdl_msg_bytes(c, act ? ps->last : ps->first - 1);
                    double start = fmax(x->t, link_free[(size_t)a * N + b]);
                    link_free[(size_t)a * N + b] = start + 1000.0 * bytes / cl->bw[a * N + b];
                    double t_arr = link_free[(size_t)a * N + b] + 1000.0 * cl->lat[a * N + b];
                    if (act) act_arr[(size_t)s * M + mb] = t_arr;
                    else grad_arr[(size_t)s * M + mb] = t_arr;
                    add_ev(out, &cap, record, x->rank, s, op->kind, mb, x->t, x->t);
                    break;
                }
                case PPDL_OP_OPTIMIZER: {
                    /* every send of the step has arrived before the weights change */
                    double t = x->t;
                    for (int j = x->q; j < M; j += x->k) {
                        if (s + 1 < S) t = fmax(t, act_arr[(size_t)s * M + j]);
                        if (s > 0) t = fmax(t, grad_arr[(size_t)s * M + j]);
                    }
                    double t_msg = t;
                    /* the all-reduce starts once every replica has its gradients */
                    if (x->k > 1) {
                        double start = 0;
                        for (int v = u0[s]; v < u0[s + 1]; v++) {
                            if (isnan(bwd_done[v])) goto blocked;
                            start = fmax(start, bwd_done[v]);
                        }
                        t = fmax(t, start + ev.allreduce_ms[s]);
                    }
                    /* then a tied weight's part from the other stage (a message wait) */
                    double t_tie = tie_exchange(&tie, cl, u0, S, U, u, t, link_free);
                    if (isnan(t_tie)) goto blocked;
                    add_update_waits(out, &cap, record, x->rank, s, x->t, t_msg, t);
                    if (t_tie > fmax(x->t, t)) add_ev(out, &cap, record, x->rank, s, PPDL_EV_WAIT, -1, fmax(x->t, t), t_tie);
                    t = fmax(t, t_tie);
                    x->t = t;
                    add_ev(out, &cap, record, x->rank, s, PPDL_OP_OPTIMIZER, -1, x->t, x->t + x->opt_ms);
                    x->t += x->opt_ms;
                    break;
                }
                default:
                    break;
                }
                x->pc++;
                moved = 1;
            }
        blocked:
            if (x->pc == x->ops.n) done_units++;
        }
        if (!moved && done_units < nu) {
            rc = ppdl_errf(err, errlen, "simulator: the %s schedule deadlocks with %d stages and %d micro-batches",
                           ppdl_schedule_name(schedule), S, M);
            break;
        }
    }
    if (!rc) {
        double busy = 0;
        for (int u = 0; u < nu; u++) {
            if (U[u].t > out->step_ms) out->step_ms = U[u].t;
            if (ppdl_schedule_max_pending_weight(&U[u].ops) == 0)
                busy += ppdl_replica_mbs(M, U[u].k, U[u].q) * (U[u].f_ms + U[u].b_ms);
            else /* a split backward: each op's own time */
                for (int i = 0; i < U[u].ops.n; i++) busy += op_ms(&U[u], U[u].ops.ops[i].kind);
        }
        out->busy_frac = out->step_ms > 0 ? busy / (nu * out->step_ms) : 1;
    }
    for (int u = 0; u < nu; u++) ppdl_op_list_free(&U[u].ops);
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
