/* simulate.c — a discrete-event play of the schedule's op lists.
 *
 * A stage's timeline depends only on its own ops and on when messages reach it, and a
 * message's arrival is fixed the moment its sender runs the SEND (each link has one
 * sender, which sends in list order, so FIFO order is list order). So the simulator
 * advances every stage as far as it can — until a RECV whose message has not been sent
 * yet — and sweeps over the stages until all lists are done. A sweep that moves no
 * stage is a deadlock (the schedule checker rules it out; this is a second guard).
 */
#include "plan/simulate.h"
#include "core/error.h"
#include "core/util.h"
#include "pipe/schedule.h"
#include "plan/costmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_stage {
    int rank;
    double f_ms, b_ms, rc_ms;  /* forward, backward (with recompute), the recompute part */
    double act_ser, act_lat;   /* link to the next stage: service ms, latency ms */
    double grad_ser, grad_lat; /* link to the previous stage */
    double t;                  /* current time */
    int pc;                    /* next op */
    int slots;
    double link_free_act, link_free_grad; /* when the outgoing links are free */
} sim_stage;

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

int ppdl_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M,
                  int schedule, int record, ppdl_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, errlen)) return -1; /* validates p */
    ppdl_cost_eval_free(&ev);
    int S = p->S, N = cl->N;
    ppdl_op_list *lists = ppdl_xcalloc((size_t)S, sizeof *lists);
    for (int s = 0; s < S; s++) ppdl_schedule_build(schedule, S, M, s, &lists[s]);
    int rc = ppdl_schedule_check(S, M, lists, err, errlen);
    if (rc) goto done;

    sim_stage *st = ppdl_xcalloc((size_t)S, sizeof *st);
    /* arrival times: act_arr[s*M+mb] at stage s+1 from s; grad_arr[s*M+mb] at s-1 from s */
    double *act_arr = ppdl_xmalloc((size_t)S * M * sizeof(double));
    double *grad_arr = ppdl_xmalloc((size_t)S * M * sizeof(double));
    for (size_t k = 0; k < (size_t)S * M; k++) act_arr[k] = grad_arr[k] = NAN;
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *ps = &p->stages[s];
        sim_stage *x = &st[s];
        x->rank = ps->rank;
        double v = cl->speed[ps->rank];
        for (int l = ps->first; l <= ps->last; l++) {
            const ppdl_layer_cost *lc = &c->layers[l];
            x->f_ms += lc->fwd_ms / v;
            x->b_ms += (lc->bwd_ms + lc->extra_ms[ps->recompute[l - ps->first]]) / v;
            x->rc_ms += lc->extra_ms[ps->recompute[l - ps->first]] / v;
        }
        if (s + 1 < S) {
            int b = p->stages[s + 1].rank;
            x->act_ser = 1000.0 * c->layers[ps->last].out_bytes / cl->bw[ps->rank * N + b];
            x->act_lat = 1000.0 * cl->lat[ps->rank * N + b];
        }
        if (s > 0) {
            int a = p->stages[s - 1].rank;
            x->grad_ser = 1000.0 * c->layers[ps->first - 1].out_bytes / cl->bw[ps->rank * N + a];
            x->grad_lat = 1000.0 * cl->lat[ps->rank * N + a];
        }
        x->slots = ppdl_schedule_max_in_flight(&lists[s]);
    }

    int cap = 0, done_stages = 0;
    while (done_stages < S) {
        int moved = 0;
        done_stages = 0;
        for (int s = 0; s < S; s++) {
            sim_stage *x = &st[s];
            const ppdl_op_list *ol = &lists[s];
            while (x->pc < ol->n) {
                const ppdl_op *op = &ol->ops[x->pc];
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
                    /* the slot's send buffer must be free: its previous activation arrived */
                    if (s + 1 < S && mb >= x->slots) x->t = fmax(x->t, act_arr[(size_t)s * M + mb - x->slots]);
                    add_ev(out, &cap, record, x->rank, s, PPDL_OP_FORWARD, mb, x->t, x->t + x->f_ms);
                    x->t += x->f_ms;
                    break;
                case PPDL_OP_BACKWARD:
                    if (s > 0 && mb >= x->slots) x->t = fmax(x->t, grad_arr[(size_t)s * M + mb - x->slots]);
                    add_ev(out, &cap, record, x->rank, s, PPDL_OP_BACKWARD, mb, x->t, x->t + x->b_ms);
                    if (x->rc_ms > 0)
                        add_ev(out, &cap, record, x->rank, s, PPDL_EV_RECOMPUTE, mb, x->t, x->t + x->rc_ms);
                    x->t += x->b_ms;
                    break;
                case PPDL_OP_SEND_ACT: {
                    double start = fmax(x->t, x->link_free_act);
                    x->link_free_act = start + x->act_ser;
                    act_arr[(size_t)s * M + mb] = x->link_free_act + x->act_lat;
                    add_ev(out, &cap, record, x->rank, s, op->kind, mb, x->t, x->t);
                    break;
                }
                case PPDL_OP_SEND_GRAD: {
                    double start = fmax(x->t, x->link_free_grad);
                    x->link_free_grad = start + x->grad_ser;
                    grad_arr[(size_t)s * M + mb] = x->link_free_grad + x->grad_lat;
                    add_ev(out, &cap, record, x->rank, s, op->kind, mb, x->t, x->t);
                    break;
                }
                case PPDL_OP_OPTIMIZER:
                    /* every send of the step has arrived before the weights change */
                    for (int k = 0; k < M; k++) {
                        if (s + 1 < S) x->t = fmax(x->t, act_arr[(size_t)s * M + k]);
                        if (s > 0) x->t = fmax(x->t, grad_arr[(size_t)s * M + k]);
                    }
                    add_ev(out, &cap, record, x->rank, s, PPDL_OP_OPTIMIZER, -1, x->t, x->t);
                    break;
                default:
                    break;
                }
                x->pc++;
                moved = 1;
            }
        blocked:
            if (x->pc == ol->n) done_stages++;
        }
        if (!moved && done_stages < S) {
            rc = ppdl_errf(err, errlen, "simulator: the %s schedule deadlocks with %d stages and %d micro-batches",
                           ppdl_schedule_name(schedule), S, M);
            break;
        }
    }
    if (!rc) {
        double busy = 0;
        for (int s = 0; s < S; s++) {
            if (st[s].t > out->step_ms) out->step_ms = st[s].t;
            busy += M * (st[s].f_ms + st[s].b_ms);
        }
        out->busy_frac = out->step_ms > 0 ? busy / (S * out->step_ms) : 1;
    }
    free(st);
    free(act_arr);
    free(grad_arr);
done:
    for (int s = 0; s < S; s++) ppdl_op_list_free(&lists[s]);
    free(lists);
    if (rc) ppdl_sim_free(out);
    return rc;
}

void ppdl_sim_free(ppdl_sim *s)
{
    free(s->ev);
    memset(s, 0, sizeof *s);
}
