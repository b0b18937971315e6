/* planner.h — one entry point for every planning method: ppdl's solver or a baseline.
 * This is what `ppdl --plan auto` and `ppdl-plan --method NAME` call. Pure C. */
#ifndef PPDL_PLANNER_H
#define PPDL_PLANNER_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/shared_cores.h"
#include "plan/solver.h"

/* method names, NULL-terminated: "ppdl" (the default: stages, their replicas, placement
 * and recompute), "ppdl-pipeline" (one stage per rank: partition, placement and
 * recompute), "ppdl-inorder" (one stage per rank, ranks in order 0..N-1, partition and
 * recompute), then the baselines of baselines.h: dp, dp-rc, uniform, uniform-rc,
 * params, params-rc, time, time-rc, pipedream, pipedream-rc */
extern const char *const ppdl_plan_methods[];

/* Plan with `method` for M micro-batches under `schedule` (PPDL_SCHED_*). Returns 0
 * when *out holds a plan that fits in memory (annotated by the cost model). Returns -1
 * with a message in err otherwise; then *out holds the plan that was built (out->S > 0,
 * out->feasible = 0, err names the stage over its memory and by how much), or nothing
 * (out->S = 0) for an unknown method or a model with fewer layers than ranks. */
int ppdl_plan_solve(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                    const char *method, ppdl_plan *out, char *err, size_t errlen);
/* The same with the solver's options (NULL: defaults; used by ppdl's methods), what
 * the solver did (info, may be NULL) and, where cl's hosts put more ranks on a host
 * than it has cores, the choice among candidate plans by the simulated step that
 * ppdl's methods then make (shared_cores.h; sc may be NULL). Baselines are built as
 * they are, shared cores or not. */
int ppdl_plan_solve_ex(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                       const char *method, const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info,
                       ppdl_shared_choice *sc, char *err, size_t errlen);
/* The same, and where ranks share cores (ppdl's methods, one stage per rank or
 * replicated, not chunked) also the chosen plan's K-1 runners-up by simulated step
 * (ppdl_choose_on_shared_cores_k: others[0 .. sc->n_others-1], the caller frees them);
 * sc must not be NULL. With K = 1 it is ppdl_plan_solve_ex. */
int ppdl_plan_solve_k(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const char *method,
                      const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                      int K, ppdl_plan *others, double *others_ms, char (*others_label)[48], char *err,
                      size_t errlen);

#endif
