/* simulate.h — play a plan's real schedule (the op lists of src/sched/schedule.h, the
 * same lists the runtime executes, one per replica: ppdl_schedule_make for
 * the plan's layout, proven by ppdl_schedule_check_layout before the play)
 * with the costs, and predict the step time.
 *
 * The model, one step:
 *  - each replica of each stage runs its op list in order on its rank, one op at a
 *    time; FORWARD(mb) takes sum fwd_ms / speed, BACKWARD(mb) sum (bwd_ms + extra_ms)
 *    / speed of that rank;
 *  - micro-batch mb goes from replica mb mod k_s of stage s to replica mb mod k_s+1 of
 *    the next (replica.h); a SEND enters the FIFO queue of its directed rank pair:
 *    the transfer starts when the link is free, occupies it for bytes / bandwidth, and
 *    arrives latency later; sends do not block the sender;
 *  - a RECV waits for the arrival (recorded as a wait);
 *  - like the runtime, a slot's send buffer is reused only after its previous message
 *    arrived, and OPTIMIZER waits for all of the replica's sends;
 *  - a replicated stage sums its gradients once every replica has finished its last
 *    backward: the all-reduce (replica.h's ring cost) runs from then, and each
 *    replica's OPTIMIZER waits for it (recorded as a wait); the optimizer step then
 *    takes the stage's optimizer_ms / speed (0 when COSTS.json has none);
 *  - a chunked plan in k copies (plan.h): copy q's ranks run the runtime's lists for
 *    one copy (its ranks, ceil((M - q) / k) micro-batches, the i-th numbered q + i k);
 *    a rank's v stages have their replicas on the same k ranks, so their sums run one
 *    after another, each from when all its replicas are done (in that order; ties: the
 *    earlier stage) and each stage's OPTIMIZER waits for its own;
 *  - the first stage's FORWARD includes reading the inputs (input_ms), the last
 *    stage's the targets (target_ms).
 *  - a tied weight on two stages (COSTS.json "tied"): at OPTIMIZER, once its gradient
 *    is ready, a replica of the first or the last stage sends it over its link to the
 *    other stage's replicas that take it from this one, and waits for its own part
 *    before the update (simulate.c: tie_exchange).
 *  - more ranks than cores on a host (cl->hosts, cluster_model.h): the FORWARD,
 *    BACKWARD and OPTIMIZER ops running on the host's ranks at a moment each get
 *    min(1, cores / running) of a core (processor sharing; a waiting rank takes none),
 *    their remaining work re-rated whenever that set changes. Otherwise (no hosts, or
 *    cores >= ranks everywhere) the play is the one above, bit for bit.
 * The step ends when the last rank finishes. Unlike the analytic T of costmodel.h
 * there is no formula: bubbles, warm-up, cool-down, queueing, the gradient direction
 * and the overlap of an all-reduce with other stages' work come out of the play
 * itself, so the two can be compared.
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
