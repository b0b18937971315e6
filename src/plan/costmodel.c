/* costmodel.c — evaluate the cost model of DESIGN.md for one plan, term by term,
 * straight from the formulas (no prefix sums, no caching): the reference the solver
 * and the tests are checked against. */
#include "plan/costmodel.h"
#include "core/error.h"
#include "core/util.h"
#include "pipe/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ppdl_in_flight(int schedule, int S, int M, int s)
{
    if (schedule == PPDL_SCHED_GPIPE) return M;
    return M < S - s ? M : S - s;
}

double ppdl_stage_time(const ppdl_costs *c, int i, int j, const int *opt, double speed)
{
    double t = 0;
    for (int l = i; l <= j; l++) t += ppdl_layer_time(&c->layers[l], opt ? opt[l - i] : 0);
    return t / speed;
}

double ppdl_stage_mem(const ppdl_costs *c, int i, int j, const int *opt, int n)
{
    double params = 0, stash = 0;
    for (int l = i; l <= j; l++) {
        params += c->layers[l].param_bytes;
        stash += c->layers[l].stash_bytes[opt ? opt[l - i] : 0];
    }
    return c->state_multiplier * params + (double)n * stash;
}

double ppdl_link_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int j, int a, int b)
{
    size_t ab = (size_t)a * cl->N + b;
    return 1000.0 * (cl->lat[ab] + c->layers[j].out_bytes / cl->bw[ab]);
}

void ppdl_cost_eval_free(ppdl_cost_eval *ev)
{
    free(ev->time_ms);
    free(ev->mem_bytes);
    free(ev->mem_limit);
    free(ev->link_ms);
    free(ev->in_flight);
    memset(ev, 0, sizeof *ev);
}

int ppdl_cost_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                       const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    if (M < 1) return ppdl_errf(err, errlen, "micro-batches is %d: expected >= 1", M);
    int *nopt = ppdl_xmalloc((size_t)c->L * sizeof(int));
    for (int l = 0; l < c->L; l++) nopt[l] = c->layers[l].n_opts;
    int rc = ppdl_plan_validate(p, c->L, cl->N, nopt, "plan", err, errlen);
    free(nopt);
    if (rc) return -1;
    for (int s = 0; s < p->S; s++)
        if (p->stages[s].n_replicas > 1)
            return ppdl_errf(err, errlen, "plan: stage %d has %d replicas; the cost model covers one rank per "
                                          "stage", s, p->stages[s].n_replicas);
    if (p->S != cl->N)
        return ppdl_errf(err, errlen, "plan: %d stages on a cluster of %d ranks; the cost model needs one "
                                      "stage per rank", p->S, cl->N);
    int S = p->S;
    ev->S = S;
    ev->time_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->mem_bytes = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->mem_limit = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->link_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->in_flight = ppdl_xcalloc((size_t)S, sizeof(int));
    ev->feasible = 1;
    ev->worst_over = -INFINITY;
    double maxv = -1;
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        int r = st->rank, n = ppdl_in_flight(schedule, S, M, s);
        ev->in_flight[s] = n;
        ev->time_ms[s] = ppdl_stage_time(c, st->first, st->last, st->recompute, cl->speed[r]);
        ev->mem_bytes[s] = ppdl_stage_mem(c, st->first, st->last, st->recompute, n);
        ev->mem_limit[s] = cl->mem[r];
        if (ev->mem_bytes[s] > cl->mem[r]) ev->feasible = 0;
        double over = ev->mem_bytes[s] - cl->mem[r];
        if (over > ev->worst_over) {
            ev->worst_over = over;
            ev->worst_stage = s;
        }
        ev->sum_time += ev->time_ms[s];
        if (ev->time_ms[s] > maxv) {
            maxv = ev->time_ms[s];
            ev->bottleneck_stage = s;
            ev->bottleneck_is_link = 0;
        }
        if (s + 1 < S) {
            ev->link_ms[s] = ppdl_link_ms(c, cl, st->last, r, p->stages[s + 1].rank);
            ev->sum_link += ev->link_ms[s];
            if (ev->link_ms[s] > maxv) {
                maxv = ev->link_ms[s];
                ev->bottleneck_stage = s;
                ev->bottleneck_is_link = 1;
            }
        }
    }
    ev->bottleneck = maxv;
    ev->T = ev->sum_time + 2 * ev->sum_link + (M - 1) * maxv;
    return 0;
}

void ppdl_cost_annotate(ppdl_plan *p, const ppdl_cost_eval *ev)
{
    p->feasible = ev->feasible;
    p->predicted_iter_ms = ev->T;
    p->bottleneck_ms = ev->bottleneck;
    for (int s = 0; s < p->S && s < ev->S; s++) {
        p->stages[s].time_ms = ev->time_ms[s];
        p->stages[s].mem_bytes = ev->mem_bytes[s];
    }
}

double ppdl_cost_apply(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p)
{
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, sizeof err)) return INFINITY;
    ppdl_cost_annotate(p, &ev);
    double T = ev.T;
    ppdl_cost_eval_free(&ev);
    return T;
}
