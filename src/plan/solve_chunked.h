/* solve_chunked.h — the planner for chunked plans: interleaved 1F1B with v chunks per
 * rank and ZB-V (two chunks in a V), issue 22.
 *
 * What is chosen: the cut of the L layers into S = v*N contiguous stages and the
 * recompute option of every layer, to minimise the cost model's T of a chunked plan
 * (costmodel.h "Chunked plans"):
 *     T = phi * sum_s time_s + 2 * sum_s link_s + (M-1) * max(rank work, pair work) + tail
 * with every rank's stages together inside its memory; and the placement: which rank
 * runs each position of the schedule's order (round-robin, or the V; position p is the
 * rank of stage p, and the runtime runs it so, cmd/run_plan.c). Two orders are
 * searched: the ranks in order, and where its links cost less than 0.9 of theirs the
 * order whose neighbours talk fastest (greedy from rank 0 by the links' time for the
 * mean activation, then segment reversals while they help; interleaved's positions form
 * a ring, the V's a path); the
 * plan of the two that simulates faster is kept (ties: the ranks in order;
 * opts->placement = 0: the ranks in order only).
 *
 * How (a rank's work is the sum of v stages that are not adjacent, so the one-order DP
 * of engine.c does not apply). The key, lexicographic: the memory over the ranks'
 * limits (summed), then T, then the sum of squares of the ranks' work (so that a search
 * leaves plateaus of the max, where two ranks tie for the most work).
 *  1. Few cuts (C(L-1, S-1) <= PPDL_CHUNKED_EVERY_CUT): every cut is evaluated; the
 *     best is the optimum over cuts (with the options of step 3).
 *  2. Else a local search: from the layers' work cut in proportion to the speed of
 *     each stage's rank, from the cut into equal layer counts, and from RESTARTS (opts->chunked_restarts, default 6) kicks
 *     of the best so far (3 boundaries moved at random, a fixed seed), passes until one
 *     changes nothing, each pass: every boundary to the best of its positions between
 *     its neighbours, then chain moves (boundaries b..b+k-1, k <= 8, shifted together
 *     by one layer: work passed along k stages). Not exact: on cuts too many to try
 *     (tests/unit/test_solve_chunked.c measures it against every cut);
 *  3. the recompute options, inside every evaluation: per rank, every layer at option 0;
 *     while the rank is over its memory, the upgrade (a layer to an option that keeps
 *     less) of the most bytes saved per extra millisecond.
 *  4. T proposes, the simulator picks: the chunked rule's fill factor is exact on equal
 *     stages only, and T sees a rank's work as one sum, so a cut of chunks of 1, 1, 5
 *     and 5 equal layers on 2 ranks has the T of the cut 3, 3, 3, 3 (each rank holds 6)
 *     while its step is about 20% longer (simulated 97.3 against 81.0 ms, M = 4). The
 *     search's cut, the speed-proportional cut and the equal cut (each with its options)
 *     are played by the simulator (simulate.h), and the fastest that fits is the plan
 *     (ties: the search's). opts->chunked_sim_pick = 0 leaves the search's cut.
 * The result is annotated by ppdl_cost_evaluate (the same T as for any plan); where the
 * ranks share a host's cores (shared_cores.h), sc says so and holds its simulated step.
 * The same plans in k copies are below ("k copies"); the cost model's T of a chunked
 * plan is solve_chunked_cost.c's (costmodel.h "Chunked plans").
 * Pure C, deterministic. */
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
 * running micro-batches q, q+k, ..;
 * issue 22: the schedule, the partition, the placement, the recompute options and the
 * replication chosen together).
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
