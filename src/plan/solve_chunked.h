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
 * Pure C, deterministic. */
#ifndef PPDL_SOLVE_CHUNKED_H
#define PPDL_SOLVE_CHUNKED_H

#include <stddef.h>

#include "plan/cluster_model.h"
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

/* Evaluate chunked plan p (in copies or not) and annotate it (cost model T, the stages'
 * times and memories): 0 when it fits; -1 with the rank over its memory and by how much
 * (info->infeasible set, p kept), or -1 with the reason when p cannot be evaluated (p
 * freed, S = 0). info may be NULL. */
int ppdl_chunked_annotate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p,
                          ppdl_solve_info *info, char *err, size_t errlen);
/* Where cl's ranks share a host's cores (shared_cores.h): sc says so and holds chunked
 * plan p's simulated step (the step that compares); else sc is zeroed. */
void ppdl_chunked_shared_choice(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                const ppdl_plan *p, ppdl_shared_choice *sc);

#endif
