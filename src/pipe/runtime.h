/* runtime.h — execute a schedule's op list for this rank's stage.
 *
 * The runtime owns the stage's activation memory: for each of the n micro-batches a
 * stage can hold at once (schedule.h: ppdl_schedule_max_in_flight) one "slot" with
 * the inputs of the stage's layers (what backward needs), the layers' saved tensors
 * (unless recomputed), the outgoing activation and gradient buffers and the incoming
 * gradient buffer. Slots are allocated once and reused every step: micro-batch mb
 * lives in slot mb mod n.
 *
 * Receives are posted as soon as a buffer is free for them, so transfers overlap
 * computation: a gradient's when its slot holds the micro-batch, an activation's into
 * the stage's inbox, which has a buffer more than the slots wherever slots are reused
 * (runtime.c); sends are non-blocking and completed before their buffer is reused.
 */
#ifndef PPDL_RUNTIME_H
#define PPDL_RUNTIME_H

#include <stdint.h>

#include "net/comm.h"
#include "nn/stage.h"
#include "sched/schedule.h"
#include "sched/event.h"

/* Where stage 0 gets its inputs and the last stage its targets: fill `inputs` (host,
 * b samples: int32 tokens or floats; NULL when not needed) and `targets` (host, int32,
 * b * loss rows; NULL when not needed) for micro-batch mb of step `step`. Returns 0,
 * or -1 with a message (the job then aborts). */
typedef struct ppdl_batch_source {
    void *ctx;
    int (*read)(void *ctx, long step, int mb, int b, void *inputs, int32_t *targets,
                char *err, size_t errlen);
} ppdl_batch_source;

typedef struct ppdl_runtime_cfg {
    int schedule;              /* PPDL_SCHED_* */
    int S, stage;              /* stages, this rank's stage */
    /* data parallelism inside a stage: micro-batch j runs on replica j mod k of each
     * stage; the replicas' gradients are summed before the update: MPI_Iallreduce on
     * replica_comm, or under --netem a ring of comm's messages (net/ring.h) over the
     * replicas 0..k-1 in that order */
    int replica, n_replicas;   /* this rank's replica of its stage, and k */
    const int *prev_ranks;     /* the replicas of stage-1 (NULL on stage 0) */
    int n_prev;
    const int *next_ranks;     /* the replicas of stage+1 (NULL on the last stage) */
    int n_next;
    MPI_Comm replica_comm;     /* this stage's replicas; MPI_COMM_NULL when n_replicas == 1 */
    int M;                     /* micro-batches per step */
    int batch_size;            /* B: samples per step (M divides it) */
    const int *recompute;      /* option per layer of the stage (NULL: all 0) */
    double lr, beta1, beta2, eps, weight_decay;
    int record_events;         /* keep per-op timings for trace/timeline */
    struct ppdl_papi *papi;    /* counters per op kind (prof/papi.h), or NULL */
    int skip_nonfinite;        /* 1: a step with a non-finite loss or gradient is skipped
                                * (no update) instead of stopping the run */
    /* global gradient-norm clipping: scale every gradient by min(1, X / (||g|| + 1e-6))
     * with ||g|| the L2 norm over all parameters of the model (every stage, a
     * replicated stage once); 0: off. The norm is bitwise the same for any split of the
     * layers: each parameter tensor's sum of squares (ppdl_be_sumsq: fixed chunks, in
     * double) is summed in the model's parameter order by every rank, from one
     * all-reduce in which each layer has exactly one non-zero contribution (an exact
     * sum). Then g += (c - 1) g, elementwise, the same on every rank. The sums and
     * that all-reduce are those of the non-finite agreement every step makes anyway
     * (update.c, agree_nonfinite_and_norm): clipping adds no reduction. */
    double clip_grad_norm;
    /* weight decay on every parameter (1), or, as nanoGPT and llm.c do, only on the
     * tensors of two or more dimensions: the matrices, convolution kernels and the
     * embeddings, not biases or layer-norm weights (0, the default) */
    int decay_all;
    /* tied embeddings (nn/model.h, pipe/tie.h), where the embedding and the head are
     * on different stages: on stage 0 the ranks of stage S-1's replicas, on stage S-1
     * those of stage 0's; NULL otherwise */
    const int *tie_peers;
    int n_tie_peers;
    /* the messages between stages through NCCL (backend/cuda/nccl_p2p.h; the cuda
     * backend, --p2p nccl): activations on nccl_act, gradients on nccl_grad, two
     * communicators made by ppdl_nccl_create over comm's ranks, each with its own
     * send and receive streams. Both NULL: MPI, host-staged where the backend needs it.
     * Two, not one: a stage between two others receives activations from the one
     * before and gradients from the one after, and on one FIFO receive stream each
     * receive waits for every receive posted before it, whichever peer it is from.
     * Whether that can close a cycle (an activation receive posted early holding back
     * a gradient receive that its sender needs first) would depend on the order the
     * runtime posts them in (the inbox's early receives, the slots' gradient
     * receives), which MPI leaves free. Per direction, sends and receives are issued in
     * micro-batch order on both sides (the op lists), so FIFO streams match them
     * whatever the posting order. */
    struct ppdl_nccl *nccl_act, *nccl_grad;
    /* the replicas' gradient sums through NCCL (ncclAllReduce among replica_comm's
     * ranks, made by ppdl_nccl_create over it; --p2p nccl and n_replicas > 1), started
     * layer by layer in the last backward as MPI's are, the host waiting for them at
     * the OPTIMIZER op; NULL: MPI (or the ring under --netem) */
    struct ppdl_nccl *nccl_replicas;
    /* A rank holding several stages (the interleaved and zb-v schedules, sched/schedule.h
     * ppdl_rank_schedule): one runtime per stage, each given its stage's op list here
     * (copied; proven with the other ranks' lists by ppdl_schedule_check_ranks before),
     * run together by ppdl_runtime_step. Then no NCCL, prev_ranks / next_ranks
     * the ranks of the stage before / after (this rank where it holds that stage too:
     * the message goes to itself), and the messages' tags carry the receiving stage, as
     * two ranks exchange those of several pairs of stages. The plan may be k copies of
     * the chunked pipeline (plan/plan.h): then every stage has k replicas, the list is
     * this replica's (its micro-batches q, q+k, ..), prev_ranks / next_ranks hold k
     * ranks each, replica_ranks the k ranks of this stage's replicas and replica_comm
     * their communicator (one per stage: a rank's stages sum on communicators of their
     * own, so their all-reduces need no common order). NULL: the list is built from
     * schedule, S, stage and the layout every rank tells (collective). */
    const ppdl_op_list *ops;
    const int *replica_ranks;
    /* The zero-bubble schedules of one stage per rank (zb-v's lists come in cfg.ops,
     * ordered by cmd/run_plan.c): the passes' times their lists are ordered by (sched/zero_bubble.h's timed play, plan/pass_times.h), the same on
     * every rank; NULL: the unit play. Other schedules ignore it. */
    const ppdl_zb_times *pass_times;
} ppdl_runtime_cfg;

/* bytes by what they hold, for the memory report */
typedef struct ppdl_mem_breakdown {
    size_t params, optimizer, stash, buffers;
    size_t weight_keep;        /* a split backward's W buffers (what W needs, from B to W) */
    size_t allocations;        /* device allocations (each rounded up to 256 bytes) */
} ppdl_mem_breakdown;

/* What a stage will hold, from the layers' sizes alone, before anything is allocated:
 * the cost model's (docs/cost-model.md: mem_s = 4 * param bytes + n_s * sum of stash bytes) and the
 * runtime's own buffers, which the cost model leaves out: the activation/gradient
 * messages in flight, scratch for a recomputed forward, two gradient buffers between
 * layers, the layers' work space. */
typedef struct ppdl_mem_prediction {
    double params_optimizer;   /* 4 * parameter bytes: values, gradients, AdamW m, v */
    double stash;              /* n_slots * sum over the stage's layers of stash bytes */
    double weight_keep;        /* n_wbufs * sum over the layers of what a split backward keeps
                                * from B to W (nn/layer.h ppdl_layer_weight_keep_bytes, less the
                                * last layer's output gradient: the slot's) */
    double tie;                /* a tied weight of b bytes (costmodel.h): - 3 b where the
                                   stage holds it once (the head has only its gradient
                                   buffer), + b where it holds one of its two layers (the
                                   other stage's gradient, received); 0 otherwise */
    double cost_model;         /* params_optimizer + stash + weight_keep + tie */
    double buffers;
    double total;              /* cost_model + buffers */
} ppdl_mem_prediction;

/* n_slots: ppdl_schedule_max_in_flight of the stage's list; n_inbox: ppdl_runtime_inbox_size;
 * n_wbufs: ppdl_schedule_max_pending_weight; bf16: --precision bf16 (the layer inputs
 * after the stage's first are stashed packed as bf16, and one more fp32 buffer widens them) */
ppdl_mem_prediction ppdl_runtime_predict_memory(const ppdl_model *m, int first, int last, int b,
                                                int n_slots, int n_inbox, int n_wbufs, const int *recompute,
                                                int first_stage, int last_stage, int bf16);
/* the buffers a stage other than the first receives activations into: one per slot,
 * and one more where the list receives more micro-batches than it holds at once (so
 * that the next receive is posted early); 0 for a list without RECV_ACT */
int ppdl_runtime_inbox_size(const ppdl_op_list *ops);

typedef struct ppdl_step_stats {
    double loss_sum;           /* last stage: sum of per-row losses of the step; else 0 */
    double step_ms;            /* wall time of this rank's step */
    double compute_ms;         /* forward + backward + recompute + optimizer */
    double wait_ms;            /* blocked in receives/sends */
    /* where the time went: backward_ms (fused, B and W) excludes recompute_ms;
     * backward_weight_ms: the W's of a split backward (recompute included) */
    double forward_ms, backward_ms, recompute_ms, optimizer_ms, backward_weight_ms;
    double comm_ms;            /* posting sends and receives, staging copies (waits excluded) */
    double message_bytes;      /* bytes of the activations and gradients this rank sent to
                                * other stages (halved by --precision bf16) */
    /* non-finite values: the first stage (lowest index) with a non-finite loss or
     * gradient this step, -1 when all were finite; every rank gets the same value.
     * The step's update was not applied. */
    int nonfinite_stage;
    int skipped;               /* the step was skipped (skip_nonfinite) */
    double grad_norm;          /* the global gradient norm before clipping (clip_grad_norm
                                * set), else -1 */
    double agree_ms;           /* the ranks' agreement before the update: the pass over the
                                * gradients and the all-reduce (waits included), with
                                * clip_grad_norm the norm in the same pass and all-reduce and
                                * the scaling. Within optimizer_ms and wait_ms */
    double lr;                 /* the learning rate the update used */
} ppdl_step_stats;

typedef struct ppdl_runtime ppdl_runtime;


/* Collective over comm's ranks (each tells the others its stage and replica). */
ppdl_runtime *ppdl_runtime_create(ppdl_stage *st, const ppdl_runtime_cfg *cfg,
                                  ppdl_batch_source src, ppdl_comm *comm);
/* One training step of the rank's local stages (one, or several virtual stages): all
 * micro-batches forward and backward, then the update. rts[0..n-1] the runtimes of its
 * stages, order[0..n_order-1] which of them runs its next op, in the rank's order
 * (ppdl_rank_schedule's order; with one stage all zeros; every list ends with its
 * OPTIMIZER, and the order puts those last). At the updates, one agreement of all
 * ranks covers the rank's stages (one all-reduce: with clipping the norm over all of
 * them), then every stage updates, or none. stats: the rank's (losses, times and bytes
 * summed over its stages). */
void ppdl_runtime_step(ppdl_runtime **rts, int n, const int *order, int n_order, long step,
                       ppdl_step_stats *stats);
/* Evaluation between steps: n_batches batches of the mini-batch size, each through this
 * rank's part of the pipeline forward only (the same plan, slots and messages; no
 * gradient, no stash kept past its micro-batch, no weight touched); batch e's
 * micro-batch mb comes from src.read(ctx, e, mb, ...). rts[0..n-1] the rank's local
 * stages' runtimes in ascending stage order; batch by batch, each stage's part in that
 * order (a stage waits only for the ones before it). Returns the sum over the batches
 * (in order, in double) of each batch's summed per-row losses on the last stage (its
 * replica's micro-batches), 0 on other stages. Collective over the pipeline. */
double ppdl_runtime_eval(ppdl_runtime **rts, int n, ppdl_batch_source src, int n_batches);
/* After a step with nonfinite_stage == this rank's stage: what was found, e.g.
 * "layer 3 (block): gradient of attn.qkv.weight is not finite" */
const char *ppdl_runtime_nonfinite_what(const ppdl_runtime *rt);
/* the events of the last step (times in ms from the step's start), if recorded */
const ppdl_event_rec *ppdl_runtime_events(const ppdl_runtime *rt, int *n);
/* when the last step began on this rank (ppdl_now_s's clock): the origin of its events */
double ppdl_runtime_step_start(const ppdl_runtime *rt);
ppdl_mem_breakdown ppdl_runtime_memory(const ppdl_runtime *rt);
int ppdl_runtime_slots(const ppdl_runtime *rt);
/* AdamW steps taken so far (for checkpoints) and setting it on resume */
int ppdl_runtime_adam_t(const ppdl_runtime *rt);
void ppdl_runtime_set_adam_t(ppdl_runtime *rt, int t);
/* the learning rate of the next steps' updates (nn/lr_schedule.h gives it per step);
 * cfg->lr until set */
void ppdl_runtime_set_lr(ppdl_runtime *rt, double lr);
void ppdl_runtime_destroy(ppdl_runtime *rt);

#endif
