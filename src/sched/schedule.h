/* schedule.h — pipeline schedules as data: for each stage, the ordered list of
 * operations of one training step. The runtime executes these lists, the checker
 * proves them, the planner's simulator plays them: one source of truth.
 *
 * Stages s = 0..S-1, micro-batches mb = 0..M-1. Activations flow s -> s+1, gradients
 * s+1 -> s. Communication model (what the runtime guarantees and the checker assumes):
 * a SEND does not block (non-blocking send, buffer kept until complete); a RECV blocks
 * until the matching SEND (same micro-batch, same direction, adjacent stage) has been
 * issued by the peer. A stage holds ppdl_schedule_max_in_flight micro-batches, each in
 * a slot with its own send buffers: a FORWARD (BACKWARD) reusing a slot waits until the
 * slot's previous activation (gradient) has been received, and OPTIMIZER until every
 * send of the step has; the checker plays the lists under these waits too.
 */
#ifndef PPDL_SCHEDULE_H
#define PPDL_SCHEDULE_H

#include <stddef.h>

typedef enum ppdl_op_kind {
    PPDL_OP_RECV_ACT = 0,  /* receive the activation of mb from stage s-1 */
    PPDL_OP_FORWARD,       /* forward of mb through this stage's layers */
    PPDL_OP_SEND_ACT,      /* send the output of mb to stage s+1 */
    PPDL_OP_RECV_GRAD,     /* receive d(output) of mb from stage s+1 */
    PPDL_OP_BACKWARD,      /* backward of mb (recomputing first if the plan says so) */
    PPDL_OP_SEND_GRAD,     /* send d(input) of mb to stage s-1 */
    PPDL_OP_OPTIMIZER,     /* AdamW step, once, after the flush */
    PPDL_OP_N_KINDS
} ppdl_op_kind;

typedef struct ppdl_op {
    ppdl_op_kind kind;
    int mb;                /* micro-batch, -1 for OPTIMIZER */
    int peer;              /* stage on the other end of a send/recv, -1 otherwise */
} ppdl_op;

typedef struct ppdl_op_list {
    int stage;
    int n;
    ppdl_op *ops;          /* malloc'd; free with ppdl_op_list_free */
} ppdl_op_list;

typedef enum ppdl_schedule_kind { PPDL_SCHED_GPIPE = 0, PPDL_SCHED_1F1B = 1 } ppdl_schedule_kind;

/* "gpipe" or "1f1b" -> kind; -1 when unknown */
int ppdl_schedule_parse(const char *name);
const char *ppdl_schedule_name(int kind);
const char *ppdl_op_name(ppdl_op_kind k);

/* The op list of stage s for S stages and M micro-batches.
 * GPipe: all forwards (recv, fwd, send) then all backwards in reverse... see schedule.c.
 * 1F1B (PipeDream-Flush): warm-up of min(S-s-1, M) forwards, then alternate one
 * forward and one backward, then the cool-down backwards; ends with OPTIMIZER. */
void ppdl_schedule_build(int kind, int S, int M, int s, ppdl_op_list *out);
/* Data parallelism inside a stage (a layout): stage s runs on k[s] replicas, and
 * replica q of it takes the micro-batches j with j mod k[s] == q. Its list is the
 * stage's list restricted to those micro-batches, where the stage's list is built as
 * above except that 1F1B's warm-up counts the micro-batches the later stages hold at
 * once, one per replica:
 *     W_s = min(M, k[s+1] + ... + k[S-1])        (S-s-1 when every k is 1)
 * so a replica's first backward comes after as many of its own forwards as keep every
 * later replica busy. When all stages have k replicas, replica q's list is exactly 1F1B
 * over its own micro-batches q, q+k, .. with warm-up min(S-s-1, its count). (Warm-ups
 * counted over the stage's M micro-batches, W_s = S-s-1, make two replicated
 * neighbours wait for each gradient before the next forward.) Deadlock-free: W_s never
 * increases along the pipeline, so the unreplicated lists with these warm-ups run, and
 * splitting a stage's list into order-preserving subsequences only removes ordering
 * constraints; ppdl_schedule_check_layout proves each layout anyway. GPipe's replica
 * list is GPipe over its own micro-batches. k == NULL: one replica per stage
 * (ppdl_schedule_build). */
void ppdl_schedule_build_replica(int kind, int S, int M, const int *k, int s, int q, ppdl_op_list *out);
void ppdl_op_list_free(ppdl_op_list *l);

/* Play the S lists against each other under the communication model above and check:
 * every SEND has exactly one matching RECV and vice versa, no deadlock (all lists run
 * to the end), each BACKWARD(mb) comes after FORWARD(mb) on its stage, every mb is
 * forwarded and backwarded exactly once per stage, OPTIMIZER last. Returns 0, or -1
 * with a message naming the stage, op index and problem. */
int ppdl_schedule_check(int S, int M, const ppdl_op_list *lists, char *err, size_t errlen);
/* The same for a layout with replicated stages: stage s has k[s] >= 1 replicas and
 * `lists` holds k[0] + ... + k[S-1] lists, stage by stage, replica q of stage s at
 * index k[0] + ... + k[s-1] + q. Replica q of stage s must do exactly the micro-batches
 * j mod k[s] == q; a message of micro-batch j goes from the replica of one stage that
 * holds j to the replica of the next that holds j (so the play matches messages by
 * stage and micro-batch, as without replicas). k == NULL: one replica per stage. */
int ppdl_schedule_check_layout(int S, int M, const int *k, const ppdl_op_list *lists, char *err,
                               size_t errlen);

/* Largest number of micro-batches whose activations a stage holds at once (forwarded,
 * not yet backwarded) in its list: min(M, S-s) for 1F1B, M for GPipe. */
int ppdl_schedule_max_in_flight(const ppdl_op_list *l);

#endif
