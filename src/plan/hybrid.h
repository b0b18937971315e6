/* hybrid.h — hybrid.c, the search over replica layouts (a driver of the engine, used
 * by solver.c). Not a public interface. */
#ifndef PPDL_HYBRID_H
#define PPDL_HYBRID_H

#include "plan/costs.h"
#include "plan/cluster_model.h"
#include "plan/plan.h"
#include "plan/solver.h"

/* The best plan with at least one replicated stage (S < N) whose T is below T_inc, the
 * T of the one-rank-per-stage plan with ranks pipe_order[0..N-1] (NULL and INFINITY:
 * none). 0 and *out (not yet annotated) when found; 1 when none beats T_inc (out->S =
 * 0). info gets the layouts solved and whether the search was exhaustive. */
int solve_hybrid(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                 const ppdl_solve_opts *opts, double T_inc, const int *pipe_order, ppdl_plan *out,
                 ppdl_solve_info *info);

/* The exact optimum of each of n given layouts: grps[k*N .. k*N+N-1] the stage of each
 * rank (stages 0..S-1 in pipeline order, all used), into outs[k] (annotated by the
 * cost model); outs[k].S = 0 where the layout is no plan of the problem (more replicas
 * than micro-batches, more stages than layers) or none of its plans fits. Returns the
 * number of layouts solved. (The chooser, chooser.c, offers the best plan of every
 * layout kind to its ranking by the simulated step, ranking.h.) shard: the replicas
 * shard their AdamW state (ppdl_solve_opts shard_optimizer). */
int solve_layouts(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const int *grps, int n,
                  int shard, ppdl_plan *outs);

#endif
