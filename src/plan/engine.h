/* engine.h — the planner's engine (engine.c), not a public interface: the problem's
 * context (prefix sums, bounds, the Pareto frontiers of the recompute options), the one
 * test of whether a stage fits its ranks' memory, and the stage DP over a layout's
 * tables of fill, pace and link terms, with the exact solve of one rank order on top.
 * The drivers call it and it calls none of them:
 *   placement.c  candidate rank orders and the local search over orders;
 *   hybrid.c     the search over replica layouts (several ranks per stage);
 *   solver.c     the public entry points (solver.h), exact placement over subsets.
 * A layout is the stages in pipeline order, each with its ranks (its replicas); a
 * one-rank-per-stage plan is the layout with one replica everywhere. */
#ifndef PPDL_ENGINE_H
#define PPDL_ENGINE_H

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
    int split;                 /* a zero-bubble schedule: B and W timed apart (costmodel.h) */
    double phi;                /* the fill factor of T (costmodel.h; 1 for GPipe and 1F1B) */
    double mt;                 /* M - 1 + phi: T >= mt x any stage's time */
    int *infl;                 /* [S] micro-batches stage s holds at once (ppdl_in_flight) */
    double *W;                 /* [L+1] prefix sums of fwd_ms + bwd_ms (split: fwd + B + W of
                                  option 0) (+ input_ms at layer 0, + target_ms at layer L-1) */
    double *O;                 /* [L+1] prefix sums of optimizer_ms */
    int *NP;                   /* [L+1] prefix count of layers with parameters */
    int has_opt;               /* some layer has optimizer_ms > 0 */
    double optlb;              /* no plan's largest optimizer step is shorter */
    double optcap;             /* stages whose optimizer step is over this (or at it, with
                                  optstrict) do not exist for seg_time; INFINITY: none */
    int optstrict;
    double *P;                 /* [L+1] prefix sums of param_bytes */
    double *S0;                /* [L+1] prefix sums of option 0's stash (split: stash + what B
                                  keeps for W, counted per micro-batch in flight: an upper
                                  bound, costmodel.h) */
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
    long n_dp;                 /* stage DP runs */
    int shard;                 /* the replicas of a stage shard its AdamW state (plan.h
                                  shard_optimizer; costmodel.h "Sharded optimizer state") */
} plan_ctx;


/* prefix sums, bounds and interchangeable ranks; frontiers for stages of up to
 * L - S + 1 layers once built. S: the stages the plans have (N for one per rank, 1 for
 * the replica layouts, whose stages can be up to L layers). */
void ctx_init(plan_ctx *x, const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int S);
void ctx_free(plan_ctx *x);
/* The Pareto frontiers of every segment a stage of fill time <= tcap (ms) could use. */
void build_frontiers(plan_ctx *x, double tcap);

/* Feasibility, the one test the DPs and the plans' reconstruction share: do layers
 * i..j fit memory constraints con[0..nc-1] (base + fl * stash <= mem for each: a
 * stage's replicas, one constraint per distinct in-flight count fl with the least
 * memory of the replicas holding that many) under `mode`? shk: how the stage's AdamW
 * state is held (layout's shk): 0 whole on every replica; k >= 2 in k equal slices
 * (base charges the largest); -k in k slices sized to the replicas' headrooms, and
 * then con[] is one constraint per replica, in replica order (ppdl_slices_sized).
 * Returns the least extra ms of the options that fit, INFINITY when none does (or,
 * MODE_BEST, when the segment has no frontier); *pt (may be NULL): the frontier point
 * (MODE_BEST), else -1; w (may be NULL; shk < 0) the slice weights of the options
 * chosen. */
double stage_fit(const plan_ctx *x, int mode, int i, int j, int nc, const int *fl, const double *mem, int shk,
                 long *pt, double *w);
/* time_s of layers i..j on rank r alone with n in flight (stage_fit, then / speed);
 * INFINITY when it does not fit or its optimizer step is over x->optcap */
double rank_stage_time(const plan_ctx *x, int mode, int i, int j, int r, int n);

/* A layout: S stages in pipeline order, stage s on ranks[start[s] .. start[s+1]-1]
 * (its replicas, in ppdl_sort_replicas order). `factored`: every stage has one rank,
 * the terms are those of docs/cost-model.md (time, link, and T = sum + (M-1) max term), as the
 * search over rank orders keeps them; else the replica form of costmodel.h. */
typedef struct layout {
    int N, S, factored;
    int *start, *ranks;        /* [N+1], [N] */
    int *reps;                 /* [N] per stage: its replicas k_s */
    int *moff, *mfl;           /* stage s's memory constraints: moff[s] .. moff[s+1]-1, */
    double *mmem;              /* in-flight count mfl, least memory mmem (stage_fit) */
    double *cfill, *cpace;     /* [N] per stage: max 1/speed_q; max (n_q - 1)/speed_q */
    double *copt;              /* [N] per stage: max 1/ppdl_opt_speed_q (its optimizer step) */
    double *arbw, *arlat;      /* [N] per stage: slowest link and largest latency inside */
    int *n0;                   /* [N] per stage: the fewest micro-batches of a replica */
    int *poff, *pa, *pb, *pm;  /* link pairs after stage s: poff[s] .. poff[s+1]-1 */
    int cap_pairs;
    int *held, *pending;       /* [N] per replica (stage by stage): its op list's peaks */
    int *shk;                  /* [N] per stage: its AdamW state's slices (stage_fit) */
    double phi;                /* the layout's fill factor (ppdl_fill_factor_layout) */
} layout;

void layout_init(layout *ly, const plan_ctx *x);
void layout_free(layout *ly);
/* one stage per rank, stage s on order[s] (factored) */
void layout_from_order(layout *ly, const plan_ctx *x, const int *order);
/* stage grp[r] of each rank r (stages 0..S-1 all used); 0 when that is not a plan of
 * the problem (a stage with more replicas than micro-batches, more stages than layers) */
int layout_from_groups(layout *ly, const plan_ctx *x, const int *grp);

/* The stage DP's tables for one layout: per (stage s, last layer j, length len) the
 * stage's fill, pace and tail (all-reduce + optimizer step) terms; per (s, j) the link
 * after j from stage s, its fill and pace. T = sum fill + 2 sum link fill + mult x the
 * largest pace + the largest tail; factored: pace = fill (per micro-batch), mult = M-1,
 * no tail. */
typedef struct stage_tables {
    int mode, L, S, ML;        /* ML: longest stage tabulated */
    int factored;
    double mult;
    double kf;                 /* factored: a stage's fill is kf x its time (plan_ctx phi) */
    double ca, cb;             /* the averaged lower bound adds ca fill + cb pace per stage */
    double *tf, *tp, *ta;      /* per (s, j, len), S x per entries (engine.c, TIX); factored:
                                  tp == tf, ta NULL; tf NULL: computed on demand (factored,
                                  too large to tabulate) */
    long *roff, per;           /* [L-S+1]: where row j-s of a stage begins; entries a stage */
    int *tend;                 /* [S][L]: the entries of stage s from layer i are those
                                  ending at j <= tend (-1 below i: none) */
    double *lf, *lp;           /* [S][L]; factored: lp == lf */
    double *f, *g, *av;        /* [S][L] DP: least sum, least largest pace, least averaged */
    double *h;                 /* [S][L] DP (with extras, replica layouts): least largest tail */
    int *arg, *argg, *argh;    /* [S][L] first layer of stage s when it ends at j */
    int *jlo, *jhi;            /* [S] capacity window (factored), set by the DP */
    int *row_rank, *lk_a, *lk_b; /* factored: the ranks the rows hold (-1: none) */
    const layout *ly;          /* for on-demand entries */
    size_t cap_t, cap_d;
} stage_tables;

/* Factored tables for stages of one rank each (rows refilled only when their rank
 * changes: tables_fill_order); mode MODE_BEST needs the frontiers. */
void tables_init_order(stage_tables *tb, const plan_ctx *x, int mode);
void tables_fill_order(const plan_ctx *x, stage_tables *tb, const layout *ly);
/* Tables of a replica layout under `mode`, leaving out the stages that cannot be part
 * of a plan below T_inc. */
void tables_fill_layout(const plan_ctx *x, stage_tables *tb, const layout *ly, int mode, double T_inc);
void tables_free(stage_tables *tb);

/* The stage DP: the least sum (fills + 2 links) over the plans whose every pace is
 * under B (strict sB: < B) and every tail under A (sA), into f/arg; with extras, over
 * the same plans, the least largest pace (g/argg), the least sum + per stage ca fill
 * + cb pace (av/argh, a lower bound of T) and the least largest tail (h). Returns 1
 * when some plan is under the bounds. */
int stage_dp(plan_ctx *x, stage_tables *tb, double B, int sB, double A, int sA, int extras);
/* the plan behind the choices arg: its cut, its sum, largest pace and largest tail */
void stage_walk(const plan_ctx *x, const stage_tables *tb, const int *arg, int *first, double *sum, double *pm,
                double *am);

/* X, a tied weight's exchange between the layout's first and last stage (costmodel.h:
 * ppdl_tie_ms; 0 with one stage or without a tie): a constant of the layout, which the
 * drivers add to the T of their staircases */
double layout_tie_ms(const plan_ctx *x, const layout *ly);

/* The exact optimum of T for the rank order order[0..N-1] (ly gets its layout, one
 * rank per stage) with the tables' mode,
 * among plans with T below T_inc (INFINITY: any). Returns that T and the first layer
 * of every stage in first[0..S-1], or INFINITY when no plan beats T_inc. */
double solve_order(plan_ctx *x, stage_tables *tb, layout *ly, const int *order, double T_inc, int *first);

/* With optimizer_ms, T = T' + max_s OPT_s, and the inner solve minimises T' with
 * every stage's step under x->optcap: the staircase over that bound. inner(arg, T_inc,
 * order_out, first) returns the best T' below T_inc and its plan. */
typedef double (*inner_solve)(plan_ctx *x, void *arg, double T_inc, int *order_out, int *first);
double opt_staircase(plan_ctx *x, inner_solve inner, void *arg, stage_tables *tb, const int *order, double T_inc,
                     int *order_out, int *first);
/* the bound on a plan's terms below T_inc: T >= M time_s, ... (engine.c) */
double first_bound(const plan_ctx *x, double T_inc);

/* The plan of layout ly with cut first[] under mode, its options by stage_fit. */
void plan_from_layout(const plan_ctx *x, const layout *ly, int mode, const int *first, const char *method,
                      ppdl_plan *p);

/* the least possible largest (mem_s - limit) over cuts of this order with
 * smallest-stash options, and that cut */
double least_over(const plan_ctx *x, const int *order, int *first);

#endif
