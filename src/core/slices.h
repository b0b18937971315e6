/* slices.h — n elements cut into k contiguous slices, one per member of a group, in
 * proportion to each member's weight: how the replicas of a stage share its optimizer
 * state (a replica owns the state of its slice of the stage's parameters). The planner
 * and the runtime both cut with this one function, so the memory the plan predicts for
 * a replica is the memory it allocates.
 *
 * Slice r is [bounds[r], bounds[r + 1]), bounds[0] = 0, bounds[k] = n. Bound r is the
 * largest multiple of align (1 if 0) at or below n * (w_0 + ... + w_{r-1}) / W, W the
 * sum of the weights (with weight NULL: n r / k in integers); a slice may be empty. A
 * pure function of its arguments: members that agree on n, k and the weights' bits
 * agree on every bound. Weights are finite and >= 0 with a positive sum. */
#ifndef PPDL_CORE_SLICES_H
#define PPDL_CORE_SLICES_H

#include <stddef.h>

void ppdl_slices(size_t n, int k, const double *weight, size_t align, size_t *bounds);

#endif
