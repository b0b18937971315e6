/* solver.h — the planner: the stages, the ranks of each stage and the recompute option
 * of each layer that minimise the cost model's T (costmodel.h) with every replica inside
 * its rank's memory. Pure C, no MPI, no device.
 *
 * The search space: S <= N stages of contiguous layers; each stage on k_s >= 1 ranks
 * (its replicas, k_s <= M), every rank in exactly one stage; inside a stage the
 * replicas are in ppdl_sort_replicas order (rank order). Two parts:
 *  - one rank per stage (S = N): for a fixed rank order the partition and the
 *    options are optimal (ppdl_solve_order); over rank orders exact up to
 *    opts.exact_max_ranks ranks (a DP over subsets of ranks), above that a heuristic
 *    that exploits the matrix's structure (groups of fast-linked ranks, ordered within
 *    and between groups, then local improvement by swaps and reversals). Its
 *    candidates include ranks in order 0..N-1, solved exactly, so it is never worse
 *    than any plan that keeps the ranks in order (every pipeline baseline).
 *  - replicated stages (S < N, hybrid.c): for a fixed layout (which ranks
 *    form each stage, in pipeline order) the partition and the options are optimal;
 *    over layouts exact up to opts.exact_hybrid_ranks ranks (every layout is solved),
 *    above that candidate layouts from the groups of fast-linked ranks (data
 *    parallelism; one stage per node, or per part of a node; the i-th ranks of the
 *    nodes together) and local moves. Plain data parallelism (one stage on every rank)
 *    is always a candidate, so where it is best the planner returns it.
 * The algorithms and their complexity are described at the top of solver.c and
 * hybrid.c.
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
    int replicate;             /* 1: also plans with replicated stages (default); 0: one
                                  stage per rank only */
    int exact_hybrid_ranks;    /* every replica layout is solved up to this many ranks
                                  (default 6: 3963 layouts) */
    long hybrid_evals;         /* layouts solved by the local search above that
                                  (default 0 = automatic) */
    int fit_search;            /* 1 (default): where no candidate order fits and the
                                  placement is heuristic, search for an order that does
                                  (seconds to minutes on tens of ranks); 0: report that
                                  none fits (--schedule auto's zero-bubble candidates) */
    const int *seed_order;     /* one more candidate rank order (N ranks) for the heuristic
                                  placement, NULL (default): none. --schedule auto's later
                                  candidates start from the first one's best order */
    int chunks;                /* a chunked schedule (interleaved, zb-v): the stages per
                                  rank, v (default 2; solve_chunked.h) */
    int auto_chunked;          /* --schedule auto: 1 (default) the chunked schedules are
                                  candidates too; 0 not (a run that cannot run them) */
    double chunked_every_cut;  /* a chunked plan tries every cut up to this many (default
                                  PPDL_CHUNKED_EVERY_CUT, solve_chunked.h; 0: always the
                                  local search, as tests/unit/test_solve_chunked.c does) */
    int chunked_sim_pick;      /* 1 (default): the chunked search's cut against its two
                                  starting cuts by the simulated step (solve_chunked.h);
                                  0: the search's cut as it is */
    int chunked_restarts;      /* the chunked local search's restarts from kicks of its best
                                  cut (default 6; solve_chunked.h); --schedule auto's
                                  copies of a chunked pipeline take none (solve_chunked.h "k copies") */
    int shard_optimizer;       /* 1: the replicas of a stage shard its AdamW state, each
                                  holding m and v of its slice only, sized to its memory
                                  where the replicas' memories differ (plan.h
                                  shard_optimizer; costmodel.h); 0 (default here; ppdl-plan's
                                  and ppdl's --shard-optimizer default is on): every
                                  replica holds all of it. Chunked plans: not sharded */
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
    int replicated;            /* the plan has a stage with several replicas */
    long layouts_solved;       /* replica layouts solved exactly (partition + recompute) */
    int hybrid_exact;          /* every replica layout was considered */
    char hybrid[96];           /* how the layouts were chosen, for messages */
} ppdl_solve_info;

/* Plan L = c->L layers onto all N = cl->N ranks for M micro-batches under `schedule`
 * (PPDL_SCHED_*). On success 0 and *out holds the plan, annotated with the cost model
 * (feasible, predicted_iter_ms, bottleneck_ms, per-stage time_ms, mem_bytes and
 * allreduce_ms); method "ppdl" ("ppdl-pipeline" without replication, "ppdl-inorder"
 * without placement and replication; those two need L >= N).
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
