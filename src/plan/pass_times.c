/* pass_times.c — each stage's F, B and W and its messages in microseconds
 * (pass_times.h) */
#include "plan/pass_times.h"

#include <math.h>

#include "plan/costmodel.h"

long ppdl_pass_ticks(double ms)
{
    double us = ms * 1e3;
    if (!(us >= 1.0)) return 1; /* also NaN */
    if (us > 1e15) return (long)1e15;
    return lround(us);
}

void ppdl_pass_times_of_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, long *t)
{
    int S = p->S;
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *ps = &p->stages[s];
        double f = 0, b = 0, w = 0, speed = 1;
        /* the slowest replica sets the stage's pace */
        for (int q = 0; cl && q < ps->n_replicas; q++) {
            int r = ps->ranks ? ps->ranks[q] : ps->rank;
            if (q == 0 || cl->speed[r] < speed) speed = cl->speed[r];
        }
        for (int l = ps->first; l <= ps->last; l++) {
            const ppdl_layer_cost *lc = &c->layers[l];
            int o = ps->recompute ? ps->recompute[l - ps->first] : 0;
            f += lc->fwd_ms;
            b += ppdl_layer_bwd_input_ms(c, lc, o);
            w += ppdl_layer_bwd_weight_ms(c, lc, o);
        }
        if (ps->first == 0) f += c->input_ms;
        if (ps->last == c->L - 1) f += c->target_ms;
        t[s] = ppdl_pass_ticks(f / speed);
        t[S + s] = ppdl_pass_ticks(b / speed);
        t[2 * S + s] = ppdl_pass_ticks(w / speed);
        t[3 * S + s] = 0;
        if (cl && s < S - 1) {
            int a = ps->rank, z = p->stages[s + 1].rank, N = cl->N;
            double us = 1e6 * (cl->lat[a * N + z] + ppdl_msg_bytes(c, ps->last) / cl->bw[a * N + z]);
            t[3 * S + s] = a == z || !(us > 0) ? 0 : us > 1e15 ? (long)1e15 : lround(us);
        }
    }
}
