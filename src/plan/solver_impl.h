/* solver_impl.h — what solver.c and placement.c share. Not a public interface. */
#ifndef PPDL_SOLVER_IMPL_H
#define PPDL_SOLVER_IMPL_H

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/solver.h"

/* How a stage's options are chosen when its time is looked up:
 *   BEST      the least extra time that fits the memory (from the Pareto frontiers)
 *   MINSTASH  every layer on its smallest-stash option (most memory-frugal)
 *   KEEP      every layer on option 0 (no recompute) */
enum { MODE_BEST = 0, MODE_MINSTASH = 1, MODE_KEEP = 2 };

typedef struct plan_ctx {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int L, N, S, M, schedule;
    double *W;                 /* [L+1] prefix sums of fwd_ms + bwd_ms (+ input_ms at layer 0,
                                  + target_ms at layer L-1) */
    double *O;                 /* [L+1] prefix sums of optimizer_ms */
    int has_opt;               /* some layer has optimizer_ms > 0 */
    double optlb;              /* no plan's largest optimizer step is shorter */
    double optcap;             /* stages whose optimizer step is over this (or at it, with
                                  optstrict) do not exist for seg_time; INFINITY: none */
    int optstrict;
    double *P;                 /* [L+1] prefix sums of param_bytes */
    double *S0;                /* [L+1] prefix sums of option 0's stash */
    double *Smin, *Emin;       /* [L+1] prefix sums of the smallest-stash option's stash, extra */
    int *omin;                 /* [L] smallest-stash option of each layer */
    double vmax;               /* fastest rank */
    double maxmem;             /* largest memory */
    double lb;                 /* lower bound on the bottleneck of any plan */
    double tcap;               /* no stage of a plan worth finding is slower (T_ub / M) */
    int *eq;                   /* [N] smallest rank interchangeable with each rank */
    /* Pareto frontiers of (stash, extra) for segments i..i+len-1, len <= MLmax */
    int MLmax;                 /* L - S + 1: the longest stage possible */
    int ML;                    /* longest segment that has a frontier (0 before building) */
    int *jmax;                 /* [L] last layer j with a frontier(i, j) */
    long *fr_off;              /* [L*MLmax] first point of frontier(i, i+len-1) in the pool */
    int *fr_n;                 /* [L*MLmax] its size */
    double *pt_stash, *pt_extra;
    int *pt_nrc;               /* layers of the assignment that recompute (option != 0) */
    int *pt_parent;            /* point of frontier(i, j-1) it extends; -1 at j = i */
    unsigned char *pt_opt;     /* option of layer j */
    long n_pts, cap_pts;
    int inexact;               /* a frontier was cut short (pool limit): not proven optimal */
    long n_solved;             /* per-order solves, for info */
    long n_dp;                 /* bounded DP runs over one order */
} plan_ctx;

/* Per-order working tables; rows are refilled only when their rank changes. */
typedef struct order_work {
    int mode, ML;
    int *row_rank;             /* [S] rank the time row of stage s holds, -1 none */
    int *lk_a, *lk_b;          /* [S] ranks the link row of stage s holds */
    double *tt;                /* [S][L][ML] time of stage s over the len layers ending at j (INF: no) */
    double *lk;                /* [S][L] link after layer j from stage s to s+1 */
    double *f, *g, *h;         /* [S][L] DP values: least sum, least bottleneck, least averaged T */
    int *arg, *argg, *argh;    /* [S][L] first layer of stage s when it ends at j, for f, g, h */
    int *jlo, *jhi;            /* [S] the last layers stage s can end at under the bound */
} order_work;

/* prefix sums, bounds and interchangeable ranks; frontiers for stages of up to
 * L - S + 1 layers once built. S: the stages the plans have (N for one per rank). */
void ctx_init(plan_ctx *x, const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int S);
void ctx_free(plan_ctx *x);
/* The Pareto frontiers of every segment a stage of fill time <= tcap (ms) could use. */
void build_frontiers(plan_ctx *x, double tcap);

/* time of layers i..j on rank r holding n micro-batches under `mode`; INFINITY when it
 * does not fit. *pt (may be NULL): the frontier point used (MODE_BEST), else -1. */
double seg_time(const plan_ctx *x, int mode, int i, int j, int r, int n, long *pt);

void work_init(order_work *w, const plan_ctx *x, int mode);
void work_free(order_work *w);
/* Exact optimum of T for one rank order with the work's mode, among plans with T
 * below T_inc (INFINITY: any). Returns that T and the first layer of every stage in
 * first[0..S-1], or INFINITY when no plan beats T_inc. */
double solve_order_work(plan_ctx *x, order_work *w, const int *order, double T_inc, int *first);

/* placement.c */
/* groups of fast-linked ranks: group[r] in 0..n-1; returns n */
int rank_groups(const plan_ctx *x, int *group);
/* the order of G groups minimising the sum of 1/(best bandwidth between consecutive
 * groups): an exact path over subsets up to 12 groups, else nearest neighbour */
void order_groups(const ppdl_cluster_model *cl, const int *group, int G, int *gorder);
/* candidate orders (ranks in order first), written to orders[k*N..]; returns how many
 * (at most max) */
int candidate_orders(const plan_ctx *x, int *orders, int max, int *n_groups);
/* Improve (order, first, T) by local search, at most about `budget` solves. */
void local_search(plan_ctx *x, order_work *w, int *order, int *first, double *T, long budget);
/* swaps towards an order whose smallest-stash plan fits; 1 when found */
int feasible_search(const plan_ctx *x, int *order, long budget);

/* solver.c: the least possible largest (mem_s - limit) over cuts of this order with
 * smallest-stash options, and that cut */
double least_over(const plan_ctx *x, const int *order, int *first);

/* hybrid.c: the best plan with at least one replicated stage (S < N) whose T is below
 * T_inc, the T of the one-rank-per-stage plan with ranks pipe_order[0..N-1] (NULL and
 * INFINITY: none). 0 and *out (not yet annotated) when found; 1 when none beats T_inc
 * (out->S = 0). info gets the layouts solved and whether the search was exhaustive. */
int solve_hybrid(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                 const ppdl_solve_opts *opts, double T_inc, const int *pipe_order, ppdl_plan *out,
                 ppdl_solve_info *info);

#endif
