/* schedule.h — pipeline schedules as data: for each stage, the ordered list of
 * operations of one training step. The runtime executes these lists, the checker
 * proves them, the planner's simulator plays them: one source of truth.
 *
 * Stages s = 0..S-1, micro-batches mb = 0..M-1. Activations flow s -> s+1, gradients
 * s+1 -> s. Communication model (what the runtime guarantees and the checker assumes):
 * a SEND does not block (non-blocking send, buffer kept until complete); a RECV blocks
 * until the matching SEND (same micro-batch, same direction, adjacent stage) has been
 * issued by the peer. A stage holds ppdl_schedule_max_in_flight micro-batches, each in
 * a slot with its own send buffers: a FORWARD (BACKWARD, BACKWARD_INPUT) reusing a slot
 * waits until the slot's previous activation (gradient) has been received, and
 * OPTIMIZER until every send of the step has; the checker plays the lists under these
 * waits too.
 *
 * The backward split (nn/layer.h "The backward split"): a micro-batch's backward
 * is either one BACKWARD, or a BACKWARD_INPUT (B: the input gradient, which SEND_GRAD
 * sends) and a later BACKWARD_WEIGHT (W: the parameter gradients). A slot holds its
 * micro-batch from its RECV_ACT or FORWARD until its BACKWARD or BACKWARD_WEIGHT, and
 * its SEND_GRAD, whichever is later; between a B and its W the stage also holds what
 * W needs that the slot does not (nn/layer.h's keep), in one of
 * ppdl_schedule_max_pending_weight buffers.
 */
#ifndef PPDL_SCHEDULE_H
#define PPDL_SCHEDULE_H

#include <stddef.h>

#include "sched/zero_bubble.h"

typedef enum ppdl_op_kind {
    PPDL_OP_RECV_ACT = 0,  /* receive the activation of mb from stage s-1 */
    PPDL_OP_FORWARD,       /* forward of mb through this stage's layers */
    PPDL_OP_SEND_ACT,      /* send the output of mb to stage s+1 */
    PPDL_OP_RECV_GRAD,     /* receive d(output) of mb from stage s+1 */
    PPDL_OP_BACKWARD,      /* backward of mb (recomputing first if the plan says so) */
    PPDL_OP_SEND_GRAD,     /* send d(input) of mb to stage s-1 */
    PPDL_OP_OPTIMIZER,     /* AdamW step, once, after the flush */
    PPDL_OP_BACKWARD_INPUT,  /* B: d(input) of mb alone (recomputing first if the plan says so) */
    PPDL_OP_BACKWARD_WEIGHT, /* W: the parameter gradients of mb, after its B */
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

typedef enum ppdl_schedule_kind {
    PPDL_SCHED_GPIPE = 0,
    PPDL_SCHED_1F1B = 1,
    PPDL_SCHED_ZB_H1 = 2,  /* zero bubble, 1F1B's peak memory (sched/zero_bubble.h) */
    PPDL_SCHED_ZB_H2 = 3,  /* zero bubble, about twice 1F1B's peak memory */
    PPDL_SCHED_ZB_1P = 4,  /* zero bubble, 1F1B's memory on every stage (S - s held) */
    PPDL_SCHED_INTERLEAVED = 5, /* Megatron's interleaved 1F1B: v chunks per rank (chunked) */
    PPDL_SCHED_ZB_V = 6,   /* zero bubble, two chunks per rank in a V (chunked) */
    PPDL_SCHED_N_KINDS,
    PPDL_SCHED_AUTO = 100  /* --schedule auto: no schedule of its own, the planner chooses
                              one (plan/schedule_choice.h); never built or played */
} ppdl_schedule_kind;

/* "gpipe", "1f1b", "zb-h1", "zb-h2", "zb-1p", "interleaved", "zb-v" -> kind, "auto" ->
 * PPDL_SCHED_AUTO; -1 when unknown */
int ppdl_schedule_parse(const char *name);
const char *ppdl_schedule_name(int kind);
const char *ppdl_op_name(ppdl_op_kind k);
/* 1 for the schedules that split backwards into B and W (the zero-bubble ones, zb-v
 * included) */
int ppdl_schedule_splits_backward(int kind);
/* Why the schedule cannot run stages replicated k[0..S-1] (k NULL: one replica
 * each), written into err; 0 when it can. Every schedule runs every layout with
 * k[s] >= 1 (the zero-bubble ones since their play treats each replica as a device,
 * sched/zero_bubble.h), so only a stage without replicas is refused. */
int ppdl_schedule_supports(int kind, int S, const int *k, char *err, size_t errlen);

/* What a device runs (ppdl_schedule_make): the op list of each stage it holds (one,
 * or a chunked schedule's several; peers are STAGE indices s-1 / s+1, each list ends
 * with its OPTIMIZER), and the order in which it runs them: order[i] is the index into
 * stages[] whose next op runs i-th. The OPTIMIZERs come last, in stages[] order. */
typedef struct ppdl_rank_schedule {
    int rank, n_stages;
    int *stages;               /* [n_stages] ascending */
    ppdl_op_list *lists;       /* [n_stages] */
    int n;                     /* sum of the lists' lengths */
    int *order;                /* [n] */
} ppdl_rank_schedule;

/* ---- building a schedule: one description, one builder ----
 *
 * The lists of stage s for S stages and M micro-batches, one rank per stage:
 * GPipe: all forwards (recv, fwd, send) then all backwards in reverse... see schedule.c.
 * 1F1B (PipeDream-Flush): warm-up of min(S-s-1, M) forwards, then alternate one
 * forward and one backward, then the cool-down backwards; ends with OPTIMIZER.
 * ZB-H1, ZB-H2, ZB-1P: the passes of sched/zero_bubble.h, at most S (ZB-H1), 2S-1
 * (ZB-H2) or S-s (ZB-1P, as 1F1B) micro-batches held on stage s
 * (ppdl_schedule_zb_caps); a B directly followed by its W on a stage that sends no
 * gradient (the first) is one fused BACKWARD.
 *
 * Data parallelism inside a stage (a layout): stage s runs on k[s] replicas, and
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
 * list is GPipe over its own micro-batches. A zero-bubble replica list is the
 * replica's passes in sched/zero_bubble.h's play of the whole layout, every replica a
 * device with its own cap (ppdl_schedule_zb_caps_layout); W's run in micro-batch
 * order, so a replica accumulates its weight gradients as its 1F1B list does.
 *
 * Timed zero-bubble lists (tm): the passes ordered by their times (sched/zero_bubble.h's
 * timed play). Only the order of a stage's F, B and W passes changes; F's, B's and W's
 * each still run in micro-batch order (the same bits), and no stage holds more than
 * its cap. Other schedules ignore tm. The timed play does not see the send buffers a
 * stage reuses, so its orders are proven before they are used (ppdl_schedule_timed_ok):
 * a run, the simulator and the memory prediction use the unit play's lists together
 * where it says 0.
 *
 * The chunked kinds (interleaved, zb-v, "Chunked schedules" below) give a rank several
 * stages: its lists and the order it runs them in. */
typedef struct ppdl_schedule_spec {
    int kind;                  /* ppdl_schedule_kind (not PPDL_SCHED_AUTO) */
    int S;                     /* stages; the chunked kinds: v per rank, S = v N */
    int M;                     /* micro-batches of a step */
    int v;                     /* stages per rank: 1, or the chunked kinds' v */
    const int *k;              /* replicas of each stage (v = 1 only); NULL: one each */
    const ppdl_zb_times *tm;   /* the zero-bubble passes' times over the S stages, used as
                                  given (prove them with ppdl_schedule_timed_ok); NULL:
                                  the unit play */
} ppdl_schedule_spec;
/* The devices of a spec, each running one ppdl_rank_schedule: with v = 1 every replica
 * of every stage, stage by stage (k[0] + ... + k[S-1], as ppdl_schedule_check_layout
 * numbers them); for the chunked kinds the N = S / v ranks */
int ppdl_schedule_devices(const ppdl_schedule_spec *sp);
/* the device of replica q of stage s (v = 1): k[0] + ... + k[s-1] + q */
int ppdl_schedule_device(const ppdl_schedule_spec *sp, int s, int q);
/* The one builder: device d's lists into out (free with ppdl_rank_schedule_free). With
 * v = 1 one list, stage s's replica q, its order all zeros; for the chunked kinds rank
 * d's stages ascending, their lists and its order. 0, or -1 with the reason where the
 * spec cannot run (an unknown kind, S, M or v out of range, a stage without replicas,
 * d not a device). */
int ppdl_schedule_make(const ppdl_schedule_spec *sp, int d, ppdl_rank_schedule *out, char *err, size_t errlen);
/* Every device's into out[0 .. ppdl_schedule_devices(sp) - 1] (zb-v plays its V once) */
int ppdl_schedule_make_all(const ppdl_schedule_spec *sp, ppdl_rank_schedule *out, char *err, size_t errlen);
/* 1 when sp's timed lists (sp->tm) pass the check of every device's lists
 * (ppdl_schedule_check_layout, ppdl_schedule_check_ranks) and none holds more
 * micro-batches, nor W's pending, than the unit play's (the planner counts those:
 * plan/costmodel.h), or tm is NULL, or the kind has no timed lists; else 0 with the
 * reason. */
int ppdl_schedule_timed_ok(const ppdl_schedule_spec *sp, char *err, size_t errlen);
void ppdl_op_list_free(ppdl_op_list *l);

/* The caps of a zero-bubble schedule's play (sched/zero_bubble.h): cap[s] for
 * s = 0..S-1, the most micro-batches stage s may hold (forwarded, W not yet run) */
void ppdl_schedule_zb_caps(int kind, int S, int *cap);
/* The same for a layout k (NULL, or every k[s] = 1: ppdl_schedule_zb_caps): cap[d]
 * for every replica d (numbered as in ppdl_schedule_check_layout). With replicas,
 * ZB-1P's cap is what 1F1B's replica holds on the layout (1F1B's memory), ZB-H1's the
 * largest of those on every replica, ZB-H2's twice that less one. */
void ppdl_schedule_zb_caps_layout(int kind, int S, int M, const int *k, int *cap);

/* The step of the schedule's play on S stages with M micro-batches when every F, B and
 * W takes one unit and messages none (a fused backward: two units): 3M + 3(S - 1) for
 * GPipe and 1F1B, sched/zero_bubble.h's greedy play for zb-h1, zb-h2 and zb-1p (at most
 * that; 3M + S - 1 for zb-h2 and 3M + 2(S - 1) for zb-1p when M >= S). The cost model's fill factor
 * (plan/costmodel.h) comes from it. */
long ppdl_schedule_unit_step(int kind, int S, int M);
/* The same on the layout k (replicas as devices, a pass of a stage with k_s replicas
 * k_s units long: sched/zero_bubble.h; NULL: ppdl_schedule_unit_step); only for the
 * zero-bubble schedules when a stage is replicated */
long ppdl_schedule_unit_step_layout(int kind, int S, int M, const int *k);

/* held[s] = ppdl_schedule_max_in_flight and pending[s] = ppdl_schedule_max_pending_weight
 * of every stage's list (ppdl_schedule_make, one replica per stage), from one play for
 * the zero-bubble schedules instead of S (the planner's cost on many ranks) */
void ppdl_schedule_counts(int kind, int S, int M, int *held, int *pending);
/* The same for every replica d of the layout k (numbered as in
 * ppdl_schedule_check_layout; k NULL: ppdl_schedule_counts): held[d], pending[d].
 * Returns the play's step for the zero-bubble schedules (that one play is
 * ppdl_schedule_unit_step_layout's), 0 for the others. */
long ppdl_schedule_counts_layout(int kind, int S, int M, const int *k, int *held, int *pending);
/* The same for the timed lists (ppdl_schedule_spec.tm; NULL: the above); the
 * step returned is then in tm's ticks */
long ppdl_schedule_counts_timed(int kind, int S, int M, const int *k, const ppdl_zb_times *tm, int *held,
                                int *pending);

/* Play the S lists against each other under the communication model above and check:
 * every SEND has exactly one matching RECV and vice versa, no deadlock (all lists run
 * to the end), each BACKWARD(mb) comes after FORWARD(mb) on its stage, every mb is
 * forwarded and backwarded exactly once per stage (one BACKWARD, or one B and one W, W
 * after B and after SEND_GRAD), OPTIMIZER last; in a list with a W, the weight
 * gradients (BACKWARD, W) accumulate in micro-batch order (the bitwise promise: the
 * sums of 1F1B); no slot, and no W buffer, is taken while its micro-batch still holds
 * it. Returns 0, or -1 with a message naming the stage, op index and problem. */
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
 * not yet backwarded, or for a split backward not yet W'd) in its list: min(M, S-s) for
 * 1F1B, M for GPipe. */
int ppdl_schedule_max_in_flight(const ppdl_op_list *l);
/* Largest number of micro-batches between their B and their W at once (0 without a
 * split backward): the buffers of what W keeps */
int ppdl_schedule_max_pending_weight(const ppdl_op_list *l);

/* ----------------------------------------------------------------------------
 * Chunked schedules: a rank holds several non-adjacent stages ("chunks") of S = v*N
 * stages on N ranks, runs one list per stage it holds, and interleaves them in an
 * order of its own (sched/chunked.c).
 *  - interleaved (Narayanan et al., SC'21; Megatron-LM): stage s on rank s mod N,
 *    v >= 2 chunks per rank, fused backwards; forwards in groups of N micro-batches
 *    through chunk 0, then the same group through chunk 1, ...; backwards in the same
 *    groups, chunks reversed; rank r warms up with (N-r-1)*2 + (v-1)*N forwards (at
 *    most M*v), then alternates one forward and one backward. Any M >= 1 (the last
 *    group holds M mod N micro-batches).
 *  - zb-v (Qi et al., "Pipeline parallelism with controllable memory", the ZB-V of
 *    Zero Bubble): v = 2, stage s on rank s for s < N and on rank 2N-1-s after (a V:
 *    rank 0 holds the first and the last stage), backward split into B and W; the
 *    order is sched/zero_bubble.h's greedy play with the ranks as devices
 *    (ppdl_zb_order_devices) under a cap per stage, 2N - s on stage s (1F1B's on
 *    2N stages: rank r holds at most 2N + 1 chunk-micro-batches, 1F1B's first rank
 *    2N; counted in tests/unit/test_schedule_chunked.c).
 * A message between two stages of one rank (zb-v: stages N-1 and N; interleaved with
 * N = 1) is an ordinary SEND and RECV that the rank sends itself; the order puts
 * the SEND first. Within every stage the weight gradients accumulate in micro-batch
 * order (the bits of 1F1B), fused backwards included. */

/* 1 for the schedules where a rank holds several stages */
int ppdl_schedule_chunked(int kind);
/* the rank holding stage s of S = v*N stages (interleaved: s mod N; zb-v (v must be 2):
 * s < N ? s : 2N-1-s); for other kinds with v == 1: s */
int ppdl_schedule_stage_rank(int kind, int N, int v, int s);
void ppdl_rank_schedule_free(ppdl_rank_schedule *r);
/* list c of r, moved out; the rest of r freed */
ppdl_op_list ppdl_rank_schedule_take(ppdl_rank_schedule *r, int c);
/* Play the N ranks' schedules ranks[0..N-1] (S = v*N stages) against each other, each
 * rank running its order as ONE sequential thread, under the communication model above
 * (each stage's slots: ppdl_schedule_max_in_flight of its list), and check: every stage
 * 0..S-1 on exactly one rank, each stage's list valid as ppdl_schedule_check requires,
 * its backwards (fused or W) in micro-batch order, the order consistent with the lists
 * (each list consumed exactly, in its own order; the OPTIMIZERs last), every SEND
 * matched by exactly one RECV, no deadlock for any timing (a RECV of a message the
 * same rank sends later is one). 0, or -1 with a message naming the rank, the stage,
 * the op index and the problem. */
int ppdl_schedule_check_ranks(int N, int v, int M, const ppdl_rank_schedule *ranks, char *err, size_t errlen);
/* The step when every F, B, W of a CHUNK takes one unit (a fused backward two) and
 * messages none; for the bubble: (step - 3*M*v) / step is the bubble fraction of a rank.
 * For kinds that are not chunked: 1F1B's value in the same units, 1F1B on N ranks with a
 * whole stage (v chunks' worth) per rank: v*(3M + 3(N-1)). Interleaved (M a multiple of
 * N): 3Mv + 3(N-1), 1F1B's bubble divided by v (tests/unit/test_schedule_chunked.c). */
long ppdl_schedule_unit_step_chunked(int kind, int N, int v, int M);

#endif
