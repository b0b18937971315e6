/* solve_chunked.h — the planner for chunked plans: interleaved 1F1B with v chunks per
 * rank and ZB-V (two chunks in a V).
 *
 * What is chosen: the cut of the L layers into S = v*N contiguous stages and every
 * layer's recompute option, to minimise the cost model's T of a chunked plan
 * (costmodel.h "Chunked plans"), every rank's stages together inside its memory; and
 * the placement: the ranks in order, and where their links cost less than 0.9 of it the
 * order whose neighbours talk fastest (greedy from rank 0, then segment reversals), the
 * plan that simulates faster kept (ties, or opts->placement = 0: the ranks in order).
 *
 * How: a rank's work is the sum of v stages that are not adjacent, so engine.c's
 * one-order DP does not apply. The key is lexicographic: the memory over the limits,
 * then T, then the sum of squares of the ranks' work (to leave plateaus of the max).
 *  1. Few cuts (at most PPDL_CHUNKED_EVERY_CUT): every cut, the optimum over cuts.
 *  2. Else a local search from the speed-proportional cut, the equal cut and
 *     opts->chunked_restarts kicks (fixed seed): boundary moves and chain moves until a
 *     pass changes nothing. Not exact (tests/unit/test_solve_chunked.c compares it with
 *     every cut).
 *  3. Recompute options inside every evaluation: per rank, while over its memory, the
 *     upgrade that saves the most bytes per extra millisecond.
 *  4. T proposes, the simulator picks: T sees a rank's work as one sum (chunks of 1, 1,
 *     5, 5 equal layers on 2 ranks have the T of 3, 3, 3, 3 but a longer step), so the
 *     search's cut, the speed-proportional and the equal cut are played (simulate.h) and
 *     the fastest that fits is the plan (opts->chunked_sim_pick = 0: the search's).
 * Where ranks share a host's cores (shared_cores.h), sc holds the simulated step. */
#ifndef PPDL_SOLVE_CHUNKED_H
#define PPDL_SOLVE_CHUNKED_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/shared_cores.h"
#include "plan/solver.h"

/* every cut is tried up to this many (a few us each on small models); opts can say
 * otherwise (solver.h chunked_every_cut, whose default this is) */
#define PPDL_CHUNKED_EVERY_CUT 20000.0

/* Plan the L = c->L layers as v stages on each of the N = cl->N ranks under `schedule`
 * (PPDL_SCHED_INTERLEAVED with v >= 2, or PPDL_SCHED_ZB_V with v = 2) for M
 * micro-batches. Returns 0 with a plan that fits in *out (annotated: T, stages' times
 * and memories, "schedule"); -1 with the reason in err otherwise: v*N > L, a tied
 * weight, a schedule that is not chunked, or no plan found that fits (then *out holds
 * the least-over plan, feasible = 0, and err names the rank and by how much). opts
 * (NULL: defaults) gives chunked_every_cut; info and sc may be NULL. */
int ppdl_solve_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v,
                       const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                       char *err, size_t errlen);

/* k copies: the planner's chunked plans in k copies (plan.h: every stage k
 * replicas, copy q on ranks q N/k .. (q+1) N/k - 1, or strided on q, q+k, .. (below),
 * running micro-batches q, q+k, ..: the schedule, the partition, the placement, the
 * recompute options and the replication chosen together).
 *
 * A copy is one chunked pipeline, so its plan is ppdl_solve_chunked's on a cluster of N/k
 * ranks for ceil(M/k) micro-batches (copy 0's, the most): the copies' worst case, rank
 * position by position (the least memory and speed, the slowest link, of the k ranks
 * at a position: the plan fits and is paced for every copy; ranks numbered node by node
 * keep a copy inside a node where N/k divides the node). The plan is then repeated on
 * every copy and evaluated whole (costmodel.h "Chunked plans in k copies": the copies'
 * sums of gradients included). Which k: k >= 2 dividing N with N/k >= 2 (a copy is a
 * pipeline), k <= M (a copy runs at least one micro-batch) and v N/k <= L. A solve per
 * k and chunked candidate would triple --schedule auto's time, so they are screened by
 * their plans of equal layer counts: schedule_choice.c solves only the candidate and
 * the k whose such plan's T, relative to the candidate's one pipeline's, predicts the
 * least T (the one pipeline's solved T times that ratio), and with no restarts of the
 * local search (solver.h chunked_restarts = 0).
 */

/* How the N ranks form k copies of n = N / k: position r of copy q on rank q n + r
 * (blocks: a copy on consecutive ranks, inside a node where ranks are numbered node by
 * node and n divides the node: the pipeline's messages stay inside, the sums cross), or
 * on rank r k + q (strided: a copy across the nodes, the sums of a stage's replicas
 * inside one; better where a stage's gradients weigh more than its activations). */
enum { PPDL_COPIES_BLOCKS = 0, PPDL_COPIES_STRIDED = 1 };

/* The screen (above) for schedule/v on cl with M micro-batches: the k and grouping
 * (*grouping, may be NULL) of least T of the plan of equal layer counts in k copies,
 * or 0 when no k fits the rules; *T_one and *T_k (may be NULL) get that plan's T with
 * one copy and with k (INFINITY: no plan). */
int ppdl_copies_screen(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, double *T_one,
                       double *T_k, int *grouping);

/* Solve schedule/v as k copies grouped so on cl (above) and annotate the whole plan. Returns 0 with
 * a plan that fits; -1 with the reason (then *out may hold a plan that does not fit,
 * feasible = 0, or none, S = 0). info and sc may be NULL; sc is set where cl's ranks
 * share cores (the whole plan's simulated step). */
int ppdl_solve_chunked_copies(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, int k,
                              int grouping, const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info,
                              ppdl_shared_choice *sc, char *err, size_t errlen);

/* The cost model's chunked rule (costmodel.h "Chunked plans"; ppdl_cost_evaluate
 * calls it for a chunked plan or schedule, after validating p): -1 with the reason when the plan and the schedule do not go
 * together (a chunked plan under a schedule of one stage per rank or the reverse,
 * zb-v with v != 2, a stage where the schedule does not place it in some copy) or more
 * copies of the pipeline than micro-batches. */
int ppdl_cost_evaluate_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                               const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen);

#endif
