/* solver.h — the planner: the stages, the rank of each stage and the recompute option
 * of each layer that minimise the cost model's T (costmodel.h) with every stage inside
 * its rank's memory. Pure C, no MPI, no device.
 *
 * What is exact:
 *  - for a fixed rank order, the partition and the options are optimal (ppdl_solve_order);
 *  - over rank orders, the optimum is exact up to opts.exact_max_ranks ranks (a DP over
 *    subsets of ranks); above that a heuristic that exploits the matrix's structure
 *    (groups of fast-linked ranks, ordered within and between groups, then local
 *    improvement by swaps and reversals). Its candidates include ranks in order 0..N-1,
 *    solved exactly, so it is never worse than any plan that keeps the ranks in order
 *    (every baseline of baselines.h).
 * The algorithms and their complexity are described at the top of solver.c.
 */
#ifndef PPDL_SOLVER_H
#define PPDL_SOLVER_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

typedef struct ppdl_solve_opts {
    int placement;             /* 1: choose the rank order (default); 0: ranks in order 0..N-1 */
    int exact_max_ranks;       /* exact placement up to this many ranks (default 10) */
    long exact_max_states;     /* ... and at most this many DP states 2^N*N*L (default 2e7) */
    long local_search_evals;   /* heuristic placement: orders tried in the local search
                                  (default 0 = automatic: 8 N, at least 200) */
} ppdl_solve_opts;

void ppdl_solve_opts_default(ppdl_solve_opts *o);

typedef struct ppdl_solve_info {
    int exact;                 /* the plan is optimal (over all orders, or over the one order asked) */
    char placement[96];        /* how the order was chosen, for messages */
    long orders_solved;        /* exact solves of one rank order (partition + recompute) */
    long dp_runs;              /* DP passes over one order they took (the B steps of solver.c) */
    long frontier_points;      /* Pareto points stored for the recompute choice */
    int n_groups;              /* groups of fast-linked ranks found (heuristic placement) */
    int infeasible;            /* no plan fits: see the message in err */
} ppdl_solve_info;

/* Plan L = c->L layers onto all N = cl->N ranks (one stage per rank, so L >= N) for M
 * micro-batches under `schedule` (PPDL_SCHED_*). On success 0 and *out holds the plan,
 * annotated with the cost model (feasible, predicted_iter_ms, bottleneck_ms, per-stage
 * time_ms and mem_bytes); method "ppdl" (or "ppdl-inorder" without placement).
 * When no plan fits in memory: -1, info->infeasible = 1, err says which stage cannot fit
 * even with the smallest-stash option of every layer and by how many bytes, and *out
 * holds that least-over plan (feasible = 0). Other errors: -1 and out->S = 0.
 * Deterministic: the same input gives the same plan. info may be NULL. */
int ppdl_solve(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
               const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, char *err,
               size_t errlen);

/* The exact optimum for the rank order order[0..N-1] (stage s on rank order[s]). */
int ppdl_solve_order(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                     const int *order, ppdl_plan *out, char *err, size_t errlen);

#endif
