/* reserve.h — the runtime's own buffers, which the cost model leaves out: activation
 * and gradient messages in flight, scratch for a recomputed forward, the gradients
 * between layers, the layers' work space. Planning against each rank's whole memory
 * would give plans that fit the cost model and not the device, so the planner plans
 * against each rank's memory less a bound on these buffers, computed here from
 * COSTS.json's bytes alone. `ppdl --plan auto` and `ppdl-plan` both subtract exactly
 * this, so the same costs and cluster give them the same plan. Pure C, no MPI.
 *
 * The bound, for micro-batches in flight `slots` (ppdl_reserve_slots):
 *     act  = the largest in_bytes or out_bytes of any layer
 *     R    = 3 slots act                  per slot: send, receive, gradient-send buffers
 *          + max saved_bytes              the recompute scratch
 *          + 3 act                        the recompute output and two layer gradients
 *          + max work_bytes               the layers' work space
 *          + 256 (4 slots + 16)           the allocator's rounding, per buffer
 * as if every stage boundary were the largest one; the runtime's exact figure for a
 * stage (runtime.h: ppdl_mem_prediction's buffers) is never larger.
 */
#ifndef PPDL_RESERVE_H
#define PPDL_RESERVE_H

#include "plan/costs.h"

/* micro-batches a stage may hold in flight, at most: N (ranks) for 1F1B, M for GPipe */
int ppdl_reserve_slots(int schedule, int n_ranks, int M);

/* the bound R above, in bytes */
double ppdl_runtime_reserve(const ppdl_costs *c, int slots);

/* A rank of a chunked plan (interleaved with v chunks, zb-v with 2) runs v stages, each
 * with its own buffers: R is linear in the slots (R(k) = a k + b), so the v stages
 * together hold at most a * slots + v * b = R(slots) + (v - 1) R(0), slots the micro-
 * batches the rank's stages hold in flight together: counted on the lists themselves
 * (ppdl_schedule_make_all), the most of any rank. (A closed form, min(v M', (v+2) N)
 * for interleaved, held for v <= 4 only: v = 6, N = 4, M = 8 holds 36, not 32.) */
int ppdl_reserve_slots_chunked(int schedule, int n_ranks, int v, int M);
double ppdl_runtime_reserve_chunked(const ppdl_costs *c, int slots, int v);
/* ... for a chunked plan in k copies of n_ranks / k ranks (plan.h; k = 1: the one
 * pipeline): a rank holds what its copy's lists hold, at most copy 0's, which runs
 * ceil(M / k) of the M micro-batches */
double ppdl_runtime_reserve_copies(const ppdl_costs *c, int schedule, int n_ranks, int v, int k, int M);

/* mem[r] less the reserve for each of the n ranks, at least 1 byte (a rank without room
 * for the buffers fits no stage): a new array the caller frees */
double *ppdl_memory_less_reserve(const double *mem, int n, double reserve);

#endif
