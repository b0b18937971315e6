/* chooser.h — one schedule's plan for one method: the search that method names (the
 * stage DP engine with its replica layouts, solver.h; the chunked search for several
 * stages per rank, solve_chunked.h; or a baseline, baselines.h), then candidate plans
 * ranked by the simulated step (ranking.h) where it matters: where ranks share a
 * host's cores, the choice among them (shared_cores.h, entered only there); with a core
 * per rank, the runners-up of a close call for --plan-trials. The chooser calls the
 * searches; none of them calls it back.
 * planner.h's ppdl_plan_make is its caller for ppdl and ppdl-plan (the reserve and the
 * schedule, auto included, are decided there); schedule_choice.c calls it once per
 * candidate schedule. Pure C. */
#ifndef PPDL_CHOOSER_H
#define PPDL_CHOOSER_H

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

/* the most plans ppdl_choose_plan returns (the plan and its runners-up) */
#define PPDL_PLAN_MAX_CANDIDATES 8

/* Plan with `method` for M micro-batches under `schedule` (PPDL_SCHED_*, not auto)
 * against cl's memory as it is. opts: the solver's options (NULL: defaults; ppdl's
 * methods read them, opts->chunks the stages per rank of a chunked schedule); info:
 * what the solver did (may be NULL). Where cl's hosts put more ranks on a host than it
 * has cores, ppdl's methods (one stage per rank or replicated, not chunked) then choose
 * among candidate plans by the simulated step (shared_cores.h), and with K > 1 (at most
 * PPDL_PLAN_MAX_CANDIDATES) also return the chosen plan's K-1 runners-up by simulated
 * step in others[0 .. sc->n_others-1] (the caller frees them; others_ms and
 * others_label may be NULL). With a core per rank the plan is the search's, and with
 * K > 1 on up to 8 ranks the runners-up are those of a close call: the best plan of
 * each other family (data parallel; pipeline; some stages replicated) that simulates
 * within 10% of the plan, in simulated order. sc (may be NULL with K = 1) says what the
 * choice did. Baselines are built as they are, shared cores or not.
 * Returns 0 when *out holds a plan that fits in memory (annotated by the cost model).
 * Returns -1 with a message in err otherwise; then *out holds the plan that was built
 * (out->S > 0, out->feasible = 0, err names the stage over its memory and by how much),
 * or nothing (out->S = 0) for an unknown method or a model with fewer layers than
 * ranks. */
int ppdl_choose_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const char *method,
                     const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                     int K, ppdl_plan *others, double *others_ms, char (*others_label)[48], char *err,
                     size_t errlen);

#endif
