/* event.h — one timed event of a pipeline step: what the runtime measures and the
 * simulator predicts, and what the trace and the timeline (prof/timeline.h) draw.
 * It lives beside the schedules so that plan/ (the simulator) and pipe/ (the runtime)
 * share it without either depending on the other or on prof/. */
#ifndef PPDL_EVENT_H
#define PPDL_EVENT_H

typedef struct ppdl_event_rec {
    int rank;              /* row */
    int stage;
    int kind;              /* ppdl_op_kind (sched/schedule.h), or a PPDL_EV_* below */
    int mb;                /* micro-batch or -1 */
    double t0_ms, t1_ms;   /* from the start of the step (or run) */
} ppdl_event_rec;

#define PPDL_EV_WAIT 100      /* time spent blocked waiting for a message */
#define PPDL_EV_RECOMPUTE 101 /* a forward run again before its backward (inside a BACKWARD) */
#define PPDL_EV_ALLREDUCE 102 /* time spent waiting for an all-reduce: the replicas' gradient sum, the
                               * step's finite check, the gradient norm (before the update) */

#endif
