/* baselines.h — the plans other systems would make, for comparison with ppdl's.
 *
 * Every pipeline baseline keeps the ranks in order (stage s on rank s) and ignores
 * memory; each baseline comes without recompute and with recompute everywhere ("-rc":
 * option 1, full recompute, on every layer that has it). All are judged by the same
 * cost model.
 *   dp          plain data parallelism: one stage of every layer replicated on all N
 *               ranks (ppdl --plan dp; needs M >= N)
 *   uniform     the same number of layers per stage (the first L mod N stages get one
 *               more): Megatron/DeepSpeed "uniform"
 *   params      balanced parameter bytes: DeepSpeed's default partition_method
 *               "parameters"
 *   time        balanced fwd+bwd time of one device, no network: torchgpipe's
 *               balance_by_time
 *   pipedream   balanced stage time and transfer time with one bandwidth and latency
 *               (the medians of the matrix) for every link: PipeDream's optimizer for
 *               one level of its hierarchy
 * Balanced means: the smallest possible largest stage (exact DP), and among the cuts
 * that reach it the one with the least sum of squared stage costs.
 */
#ifndef PPDL_BASELINES_H
#define PPDL_BASELINES_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

/* 1 when name is a baseline method */
int ppdl_is_baseline(const char *name);
/* Build and evaluate a baseline plan. 0 on success, even when it does not fit (then
 * out->feasible = 0); -1 with a message for an unknown method, L < N for a pipeline
 * baseline or M < N for dp. */
int ppdl_baseline(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                  const char *method, ppdl_plan *out, char *err, size_t errlen);

#endif
