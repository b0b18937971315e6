/* costmodel.h — the cost model of DESIGN.md, evaluated for one plan.
 *
 * Stages s = 0..S-1 (S = number of ranks), stage s holds layers first..last on rank r_s
 * with recompute option c_l for each layer l:
 *
 *   n_s    = min(M, S - s) for 1F1B, M for GPipe             (micro-batches in flight)
 *   time_s = sum_{l in s} (fwd_ms_l + bwd_ms_l + extra_ms_l(c_l)) / speed[r_s]
 *   mem_s  = state_multiplier * sum_{l in s} param_bytes_l + n_s * sum_{l in s} stash_bytes_l(c_l)
 *   link_s = 1000 * (latency_s[r_s][r_s+1] + out_bytes_{last(s)} / bandwidth_Bps[r_s][r_s+1])
 *   T      = sum_s time_s + 2 * sum_{s<S-1} link_s + (M - 1) * max(max_s time_s, max_s link_s)
 *
 * feasible when mem_s <= mem_bytes[r_s] for every s. T reads: the first micro-batch
 * goes through every stage and link forward and back (the sum), then the other M-1
 * follow at the pace of the slowest stage or link (the bottleneck).
 * The planner (solver.h) minimises exactly this T; this file is the independent check.
 */
#ifndef PPDL_COSTMODEL_H
#define PPDL_COSTMODEL_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

/* micro-batches stage s of S holds at once under the schedule (PPDL_SCHED_*) */
int ppdl_in_flight(int schedule, int S, int M, int s);

/* time_s of layers i..j under options opt[0..j-i] (NULL: all 0) on a rank of `speed` */
double ppdl_stage_time(const ppdl_costs *c, int i, int j, const int *opt, double speed);
/* mem_s of layers i..j under options opt (NULL: all 0) with n micro-batches in flight */
double ppdl_stage_mem(const ppdl_costs *c, int i, int j, const int *opt, int n);
/* link_s after layer j from rank a to rank b, in ms */
double ppdl_link_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int j, int a, int b);

typedef struct ppdl_cost_eval {
    int S;
    int feasible;              /* every stage fits its rank's memory */
    double T;                  /* predicted iteration ms */
    double bottleneck;         /* max(max time_s, max link_s) */
    int bottleneck_stage;      /* stage (or link after stage) that sets it */
    int bottleneck_is_link;
    double sum_time, sum_link;
    double *time_ms;           /* [S] */
    double *mem_bytes;         /* [S] */
    double *mem_limit;         /* [S] mem_bytes of the stage's rank */
    double *link_ms;           /* [S] link after stage s (0 for the last) */
    int *in_flight;            /* [S] n_s */
    int worst_stage;           /* the stage furthest over (or closest to) its limit */
    double worst_over;         /* mem - limit of that stage, bytes (> 0 when infeasible) */
} ppdl_cost_eval;

/* Evaluate plan p (which must cover the costs' L layers on the cluster's N ranks with
 * valid recompute options; -1 with a message otherwise). */
int ppdl_cost_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                       const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen);
void ppdl_cost_eval_free(ppdl_cost_eval *ev);
/* Copy the evaluation into the plan: feasible, predicted_iter_ms, bottleneck_ms and
 * each stage's time_ms and mem_bytes. */
void ppdl_cost_annotate(ppdl_plan *p, const ppdl_cost_eval *ev);
/* Evaluate and annotate in one call; returns T (INFINITY when p is not valid). */
double ppdl_cost_apply(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p);

#endif
