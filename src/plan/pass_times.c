/* pass_times.c — each stage's F, B and W and its messages in microseconds
 * (pass_times.h) */
#include "plan/pass_times.h"

#include <math.h>
#include <stdlib.h>

#include "core/util.h"
#include "plan/costmodel.h"
#include "sched/schedule.h"

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

int ppdl_pass_times_accepted(const ppdl_plan *p, int schedule, int M, const ppdl_zb_times *tm, char *why,
                             size_t len)
{
    int S = p->S, chunked = ppdl_schedule_chunked(schedule), k = chunked ? ppdl_plan_chunk_replicas(p) : 1;
    int *layout = ppdl_xmalloc((size_t)(S > 0 ? S : 1) * sizeof(int));
    for (int s = 0; s < S; s++) layout[s] = p->stages[s].n_replicas > 0 ? p->stages[s].n_replicas : 1;
    ppdl_schedule_spec sp = {schedule, S, (M + k - 1) / k, chunked ? ppdl_plan_chunks(p) : 1, chunked ? NULL : layout,
                             tm};
    int ok = ppdl_schedule_timed_ok(&sp, why, len);
    sp.M = M / k; /* the last copy's share */
    if (ok && k > 1 && sp.M >= 1) ok = ppdl_schedule_timed_ok(&sp, why, len);
    free(layout);
    return ok;
}
