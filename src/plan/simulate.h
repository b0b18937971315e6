/* simulate.h — play a plan's real schedule (the op lists of sched/schedule.h that the
 * runtime executes, one per replica: ppdl_schedule_make for the plan's layout, checked
 * by ppdl_schedule_check_layout before the play) with the costs: the predicted step.
 *
 * One step:
 *  - each replica runs its op list in order on its rank, one op at a time; FORWARD(mb)
 *    takes sum fwd_ms / speed (stage 0's with input_ms, the last's with target_ms),
 *    BACKWARD(mb) sum (bwd_ms + extra_ms) / speed;
 *  - micro-batch mb goes from replica mb mod k_s to replica mb mod k_s+1 (replica.h); a
 *    SEND enters its directed rank pair's FIFO queue (the link busy bytes / bandwidth,
 *    arrival latency later, the sender not blocked); a RECV waits for the arrival; a
 *    slot's send buffer is reused only after its message arrived, and OPTIMIZER waits
 *    for all of the replica's sends;
 *  - a replicated stage's all-reduce (replica.h's ring cost) starts once every replica
 *    finished its last backward; OPTIMIZER waits for it, then takes optimizer_ms / speed;
 *    a chunked plan in k copies sums a rank's v stages one after another;
 *  - a tied weight on two stages: at OPTIMIZER its gradient crosses between the first
 *    and the last stage's replicas (simulate.c: tie_exchange);
 *  - more ranks than cores on a host (cl->hosts): the compute ops running there share
 *    the cores, min(1, cores / running) each (processor sharing); otherwise the play is
 *    the one above, bit for bit.
 * The step ends when the last rank finishes. Unlike costmodel.h's T there is no formula:
 * bubbles, queueing and the all-reduce's overlap with other stages' work come out of the
 * play, so the two can be compared.
 */
#ifndef PPDL_SIMULATE_H
#define PPDL_SIMULATE_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "sched/event.h"

typedef struct ppdl_sim {
    double step_ms;            /* predicted time of one step */
    double busy_frac;          /* compute time / (ranks * step_ms) */
    ppdl_event_rec *ev;        /* per-rank timed events (when recorded), for timeline.h */
    int n_ev;
} ppdl_sim;

/* Simulate one step of plan p for M micro-batches under `schedule`. record: keep the
 * events. Returns 0, or -1 with a message (an invalid plan, or a schedule that fails
 * its check). */
int ppdl_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M,
                  int schedule, int record, ppdl_sim *out, char *err, size_t errlen);
void ppdl_sim_free(ppdl_sim *s);
/* Just the step: ppdl_simulate's step_ms, NAN when the plan cannot be played */
double ppdl_simulated_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M, int schedule);

#endif
