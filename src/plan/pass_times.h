/* pass_times.h — how long one micro-batch's F, B and W take on each stage of a plan,
 * and its messages between stages, in whole microseconds: the times the zero-bubble
 * schedules order their passes by (sched/zero_bubble.h's timed play).
 *
 * Why: the play in unit time (F = B = W, messages free) is the paper's idealisation.
 * On a CPU a split backward's B takes longer than its W, about as long as F, and lists
 * ordered in unit time pair the micro-batches so that ZB-H1 runs with a larger bubble
 * than 1F1B; ordered by the profiled times it runs below it (perf/bench-pipeline).
 * The same numbers go to the runtime (every rank builds its lists from rank 0's copy),
 * the simulator and the memory prediction, so all three play the same lists.
 *
 * From the costs (plan/costs.h) as the simulator counts them (plan/simulate.c): F is
 * the stage's forwards (and the data reading of the first and last stage), B its
 * backward-input passes with what they recompute, W its backward-weight passes, at
 * the speed of the stage's slowest replica's rank; the message after stage s is the
 * link's latency plus the activation's bytes over its bandwidth, from the rank of
 * stage s's first replica to that of stage s + 1's. Each pass at least 1 us. */
#ifndef PPDL_PASS_TIMES_H
#define PPDL_PASS_TIMES_H

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "sched/zero_bubble.h"

/* a pass's microseconds from its milliseconds: rounded, at least 1 */
long ppdl_pass_ticks(double ms);

/* The times of plan p's stages into t[0..4S-1]: F of every stage, then B, then W, then
 * the message after each stage (the last stage's 0). cl NULL: every rank at speed 1 and
 * messages free. The plan must be valid for c (the simulator's check). */
void ppdl_pass_times_of_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, long *t);

/* 1 when the timed orders of plan p under `schedule` for M micro-batches, by the times
 * tm, are accepted (sched/schedule.h ppdl_schedule_timed_ok) for every pipeline that
 * runs: the plan's stages with their replicas, or a chunked plan's k copies
 * (ppdl_plan_chunk_replicas), whose micro-batch counts are ceil(M/k) and floor(M/k);
 * else 0 with the reason in why. The runtime (cmd/run_plan.c) and the simulator decide
 * by this alike: the timed orders for every copy, or the unit play's for all. */
int ppdl_pass_times_accepted(const ppdl_plan *p, int schedule, int M, const ppdl_zb_times *tm, char *why,
                             size_t len);

/* The play's view of t (4S numbers as above) */
static inline ppdl_zb_times ppdl_pass_times_view(const long *t, int S)
{
    return (ppdl_zb_times){t, t + S, t + 2 * S, t + 3 * S};
}

#endif
