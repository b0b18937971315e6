/* runtime_impl.h — the inside of the runtime (runtime.h), shared by its parts and
 * included by them only:
 *   runtime.c    the runtime's life cycle and the op loop: a step runs the rank's op
 *                list, posting receives early
 *   passes.c     a micro-batch's forward and backward through the stage's layers
 *   transport.c  the stages' messages: the wrappers the op loop calls and the table
 *                of each transport behind them (MPI, host-staged where the backend's
 *                memory is not MPI's; NCCL)
 *   grad_sum.c   the gradients summed across the stage's replicas, and a tied
 *                weight's two gradients combined
 *   update.c     the update: the non-finite check, clipping, AdamW
 *   eval.c       evaluation, forward only
 *   runtime_hooks.c the bugs the tests plant (runtime_hooks.h)
 * The buffers of a slot, the inbox and the W buffers are described at the top of
 * runtime.c. */
#ifndef PPDL_RUNTIME_IMPL_H
#define PPDL_RUNTIME_IMPL_H

#include "pipe/runtime.h"
#include "pipe/runtime_hooks.h"
#include "pipe/tie.h"
#include "backend/xfer.h"
#include "backend/cuda/nccl_p2p.h" /* its types only, in every build; its calls under HAVE_CUDA */
#include "net/ring.h"

/* one message's request on either transport (transport.c) */
typedef struct ppdl_p2p_req {
    MPI_Request mpi;
    ppdl_xfer x;               /* MPI: the host staging of the message (xfer.h); on the
                                * CPU backend it passes the device pointer through */
    ppdl_nccl_req nc;          /* NCCL */
} ppdl_p2p_req;

typedef struct slot {
    int mb;                    /* micro-batch held, -1 when free */
    void **act;                /* [nl] */
    float **saved;             /* [nl] (NULL entries when recomputed or empty) */
    float *out, *dout, *din;
    int32_t *targets;
    ppdl_p2p_req act_send, grad_send, grad_recv;
    int grad_recv_mb;          /* micro-batch of a posted gradient receive, -1 when none */
    int in;                    /* the inbox buffer lent as act[0], -1 when none */
    /* the slot is free again once both are done: its parameter gradients added
     * (BACKWARD or BACKWARD_WEIGHT) and its input gradient sent (not on stage 0) */
    int weights_done, grad_sent;
} slot;

/* what a split backward keeps from a micro-batch's B to its W (runtime.c's top) */
typedef struct wbuf {
    int mb;                    /* -1 when free */
    float **keep;              /* [nl] the kind's keep, NULL where it keeps nothing */
    float **dout;              /* [nl] the layer's output gradient, where W reads it and it is
                                * not the slot's (NULL otherwise) */
} wbuf;

/* one buffer an activation is received into (the inbox, runtime.c's top) */
typedef struct inbox_buf {
    void *buf;
    int mb;                    /* micro-batch of the receive posted into it, -1 when none */
    int lent;                  /* 1 while a slot holds it as its act[0] */
    ppdl_p2p_req req;
} inbox_buf;

/* one message between stages, as the transports see it */
typedef struct ppdl_msg {
    void *dev;                 /* its buffer (device memory) */
    size_t n;                  /* bytes, fp32 */
    size_t wire;               /* bytes on the wire: n, or half of it under bf16 */
    int peer, tag;
    ppdl_nccl *nc;             /* NCCL: the direction's communicator; NULL on MPI */
    ppdl_p2p_req *req;
} ppdl_msg;

/* A transport (transport.c). Each message has a post, a completion before its buffer
 * is read (receives) or written again (sends), and, for sends, a completion the host
 * knows of before the update. With MPI every completion is the host's (MPI_Wait, then
 * the staged copy in); with NCCL the first kind is the compute stream's wait on the
 * transfer's event. The wrappers of the same names (ppdl_rt_*, below) add what every
 * transport shares: the bf16 packing, the byte count. */
typedef struct ppdl_p2p_ops {
    const char *name;
    void (*recv_post)(ppdl_runtime *rt, const ppdl_msg *m, int mb);
    /* the message is in its buffer for the work queued from here on */
    void (*recv_complete)(ppdl_runtime *rt, const ppdl_msg *m, int mb);
    /* returns the clock read just before the post (runtime.c: record_instant) */
    double (*send_post)(ppdl_runtime *rt, const ppdl_msg *m, int mb);
    /* the buffer's last send is done before the work queued from here on writes it */
    void (*send_wait_before_write)(ppdl_runtime *rt, const ppdl_msg *m, int mb);
    /* the host knows the buffer's last send is complete */
    void (*send_complete)(ppdl_runtime *rt, const ppdl_msg *m, int mb);
    /* at the end: no transfer still uses the request's buffers, and its own are freed */
    void (*req_free)(ppdl_runtime *rt, ppdl_nccl *nc, ppdl_p2p_req *r);
} ppdl_p2p_ops;

struct ppdl_runtime {
    ppdl_stage *st;
    ppdl_backend *be;
    ppdl_runtime_cfg cfg;
    ppdl_batch_source src;
    ppdl_comm *comm;
    const ppdl_p2p_ops *p2p;   /* the stages' messages (transport.c) */
    /* cfg.nccl_act, cfg.nccl_grad: the stages' messages through NCCL, the activations
     * on one communicator and its streams, the gradients on another; NULL: MPI */
    ppdl_nccl *nc_act, *nc_grad;
    ppdl_nccl *nc_replicas;    /* cfg.nccl_replicas: the replicas' gradient sums, NULL: MPI */
    int nl;                    /* layers in the stage */
    int b;                     /* micro-batch size */
    int first_stage, last_stage, model_first; /* booleans */
    int *recompute;            /* [nl] recompute option per layer */
    ppdl_op_list ops;
    int n_slots;
    slot *slots;
    int n_inbox;               /* 0 on the first stage */
    inbox_buf *inbox;
    int n_wbufs;               /* W buffers: the most B's whose W is pending at once */
    wbuf *wbufs;
    float *scratch_saved, *scratch_out, *grad[2], *work;
    float *loss_dev;
    void *host_in;             /* staging of data inputs (stage 0) */
    int32_t *host_tg;          /* staging of targets (last stage) */
    size_t in_bytes, out_bytes; /* per micro-batch, of the stage */
    /* --precision bf16 (docs/precision.md): every layer's output and input gradient is
     * rounded to bf16 as it is made, so a message carries values that are already bf16:
     * it travels packed as bf16, half its fp32 bytes (ppdl_msg.wire), and is
     * widened exactly on arrival. The bits then do not depend on where the stages are cut. */
    int bf16;
    int bf16_layers;           /* 1: round at every layer boundary; 0 only under the planted
                                * bug PPDL_TEST_BF16=stage-only (rounded only when sent) */
    /* bf16: a slot keeps its layer-boundary inputs act[i], i >= 1, packed as bf16 (the
     * values are already bf16, so packing is exact; under PPDL_TEST_BF16=stage-only it
     * rounds them). The forward runs on fp32 copies in the ping-pong buffers grad[] (free
     * outside a backward) and packs each input once its layer has read it; a backward or
     * recompute widens it into `widened` first.
     * The stage's input act[0] (data, or the inbox buffer widened on arrival) and the
     * layers' saved tensors (not bf16 values) stay fp32. */
    int stash_bf16;
    float *widened;            /* [max_act] layer input widened from the stash (stash_bf16) */
    /* bf16 and the stage ends in a gpt head (layer.h bf16_saved): a slot keeps the logits'
     * gradient packed as bf16 in sl->out (the head reads it only as a GEMM operand, which
     * rounds it anyway); forward computes the logits in scratch_out, backward widens the
     * gradient into the layer-gradient buffer the head's backward does not use */
    int logits_bf16;
    double sent_bytes;         /* message bytes this rank posted this step */
    int loss_rows, classes;
    int adam_t;
    double lr;                 /* this step's learning rate (ppdl_runtime_set_lr) */
    double *layer_sumsq;       /* [norm_slots + L] (clip_grad_norm): a slot per chunk of
                                * every tensor of the model (update.c: agree_nonfinite_and_norm),
                                * then a flag per stage index */
    size_t norm_slots, norm_slot0; /* the chunks' slots, and the first of the stage's */
    ppdl_mem_breakdown mem;
    /* receive pre-posting: index of the next RECV_ACT / RECV_GRAD op not yet posted */
    int next_act_recv, next_grad_recv;
    /* events of the last step */
    ppdl_event_rec *ev;
    int n_ev, cap_ev;
    double t_step0;
    double busy_s;             /* compute time of the current step */
    double comm_s;             /* time posting messages and staging them, this step */
    int k;                     /* replicas of this stage */
    int chunked;               /* cfg.ops given: this rank holds several stages */
    int last_backward;         /* index in ops of this step's last op adding parameter gradients
                                * (BACKWARD or BACKWARD_WEIGHT), -1 if none */
    /* the gradient all-reduce of each layer across replicas (grad_sum.c): a ring through
     * the comm layer under --netem (use_ring), MPI_Iallreduce on the stage's
     * communicator else */
    int use_ring;
    ppdl_ring *rings;          /* [nl] */
    MPI_Request *grad_reqs;    /* [nl] */
    ppdl_xfer *grad_x;         /* [nl] their host staging */
    ppdl_nccl_req *grad_nreq;  /* [nl] the same sums through NCCL (nc_replicas) */
    int grads_posted;          /* this step's all-reduces have been started */
    int bucket_lo, bucket_hi;  /* MPI's sums gathered in buckets: the layers with
                                  parameters finalised and not yet started, -1: none */
    size_t bucket_n;           /* their gradient floats */
    /* the optimizer state sharded (nn/stage.h: st->opt_k > 1, on MPI's buckets only): a
     * bucket's gradients are reduced to the owners of its slices (a reduce-scatter),
     * each replica left with the sum over its own slice only; the tied weight's gradients, at the
     * arena's ends, are all-reduced whole (pipe/tie.h adds them across the stages after) */
    int rs;
    size_t tie_head;           /* floats at the arena's start all-reduced whole (wte), or 0 */
    size_t tie_tail;           /* the arena offset from which they are again (lm_head), or n_grads */
    MPI_Request *rs_reqs;      /* [nl * k] a bucket's reductions to each slice's owner, at
                                * its lowest layer */
    MPI_Request *tie_reqs;     /* [2 nl] a bucket's all-reduces of tied gradients */
    /* the chunks of the norm (PPDL_SUMSQ_CHUNK floats of a tensor, update.c) that a slice
     * bound cuts: each also all-reduced whole, from a copy, for the norm only */
    int n_cut;
    size_t *cut_off, *cut_n;   /* [n_cut] a cut chunk's arena offset and floats */
    float *cut_buf;            /* their sums, back to back (host memory: rs is MPI's memory) */
    size_t *cut_at;            /* [n_cut] where each starts in cut_buf */
    MPI_Request *cut_reqs;     /* [n_cut] */
    ppdl_tie tie;              /* a tied weight's gradients (pipe/tie.h) */
    ppdl_runtime_hooks test;      /* the planted bugs (runtime_hooks.h); read at creation */
    double t_kind[PPDL_OP_N_KINDS + 1]; /* seconds per op kind this step; [N_KINDS]: recompute */
    char nonfinite_what[256];
};

/* ---- small helpers every part uses ---- */

static inline const ppdl_layer *rt_layer(const ppdl_runtime *rt, int i)
{
    return &rt->st->model->layers[rt->st->first + i];
}

/* replica r of k holds micro-batches r, r+k, r+2k...: the local index is mb / k */
static inline slot *rt_slot_of(ppdl_runtime *rt, int mb) { return &rt->slots[(mb / rt->k) % rt->n_slots]; }

/* layer i's gradients: its parameters' gradients are one run of the stage's arena */
static inline size_t rt_layer_grad_floats(const ppdl_runtime *rt, int i)
{
    const ppdl_layer *l = rt_layer(rt, i);
    size_t n = 0;
    for (int j = 0; j < l->n_params; j++) n += l->params[j].numel;
    return n;
}

/* tags: direction in the low bit, micro-batch above; where a rank holds several stages
 * (cfg.ops given), two ranks can exchange the messages of several pairs of stages, so
 * the receiving stage goes above the micro-batch. Then the gradient all-reduce of each
 * layer (messages between replicas of one stage, which exchange no activations, kept
 * apart anyway). */
static inline int rt_tag_base(const ppdl_runtime *rt) { return 2 * rt->cfg.M * (rt->chunked ? rt->cfg.S : 1); }
static inline int rt_tag_msg(const ppdl_runtime *rt, int to_stage, int mb, int grad)
{
    return 2 * (mb + (rt->chunked ? to_stage * rt->cfg.M : 0)) + grad;
}

/* ---- runtime.c ---- */

/* an event of `kind` from t0 to t1, counted in the step's times and, with
 * cfg.record_events, kept for the trace */
void ppdl_rt_record(ppdl_runtime *rt, int kind, int mb, double t0, double t1);
/* wait for a request, recording the time blocked as an event of `kind` (PPDL_EV_WAIT
 * for a message, PPDL_EV_ALLREDUCE for the replicas' gradient sum) */
void ppdl_rt_wait(ppdl_runtime *rt, MPI_Request *req, int mb, int kind);
/* post the receives whose buffers are free, in op-list order */
void ppdl_rt_post_receives(ppdl_runtime *rt);

/* ---- passes.c ---- */

/* micro-batch mb's forward through the stage's layers (reading its inputs on the end
 * stages: batch `step` of the runtime's batch source); on the last stage the loss
 * is added into loss_dev and its gradient left in the slot */
void ppdl_rt_forward(ppdl_runtime *rt, long step, int mb);
/* a backward op of micro-batch mb: BACKWARD (both parts), BACKWARD_INPUT (B) or
 * BACKWARD_WEIGHT (W), `kind`; `last`: the step's last op adding parameter gradients,
 * which finalises them (the replicas' sums start) */
void ppdl_rt_backward(ppdl_runtime *rt, int mb, int kind, int last);

/* ---- transport.c ---- */

/* the transport a runtime's messages take: NCCL where cfg.nccl_act is given, else MPI */
const ppdl_p2p_ops *ppdl_rt_p2p_of(const ppdl_runtime *rt);
/* the messages: an activation received into inbox buffer ib, a gradient received into
 * the slot, and what a slot sends: its activation (act 1, sl->out) or its input
 * gradient (act 0, sl->din) */
ppdl_msg ppdl_rt_act_in(ppdl_runtime *rt, inbox_buf *ib, int mb);
ppdl_msg ppdl_rt_grad_in(ppdl_runtime *rt, slot *sl, int mb);
ppdl_msg ppdl_rt_out_of(ppdl_runtime *rt, slot *sl, int mb, int act);
void ppdl_rt_recv_post(ppdl_runtime *rt, ppdl_msg m, int mb);
/* (under bf16 the message is widened back to fp32 in place, exactly) */
void ppdl_rt_recv_complete(ppdl_runtime *rt, ppdl_msg m, int mb);
/* (under bf16 packed in place first: the buffer is not read again before it is rewritten) */
double ppdl_rt_send_post(ppdl_runtime *rt, ppdl_msg m, int mb);
void ppdl_rt_send_wait_before_write(ppdl_runtime *rt, ppdl_msg m, int mb);
void ppdl_rt_send_complete(ppdl_runtime *rt, ppdl_msg m, int mb);
#if HAVE_CUDA
/* the host waits for an NCCL transfer: before its request is reused, or before the
 * weights change; timed as an event of `kind`, as MPI's waits are (ppdl_rt_wait) */
void ppdl_rt_nccl_host_wait(ppdl_runtime *rt, ppdl_nccl *nc, ppdl_nccl_req *req, int mb, int kind);
/* the request's last transfer is complete, and its event is freed (at the end) */
void ppdl_rt_nccl_req_release(ppdl_nccl *nc, ppdl_nccl_req *req);
#endif

/* ---- grad_sum.c ---- */

/* the sums' state, at creation (members: the ranks of the stage's replicas, in order) */
void ppdl_rt_grad_sum_init(ppdl_runtime *rt, const int *members);
/* a step begins: no sum started */
void ppdl_rt_grad_sum_begin(ppdl_runtime *rt);
/* during the step's last backward: layer i's gradients are final; start their sum and
 * advance the sums started before, without blocking */
void ppdl_rt_grad_sum_layer(ppdl_runtime *rt, int i);
/* at the update: every sum started (a replica without micro-batches this step still
 * joins them) and complete */
void ppdl_rt_grad_sum_finish(ppdl_runtime *rt);
/* the tied weight's gradient g = g_emb + g_head (pipe/tie.h), after the replicas'
 * sums, its messages posted for every stage of the rank before any is waited for (a
 * rank may hold both ends); the time waiting for the other stage's part shows as a wait */
void ppdl_rt_grad_sum_tie(ppdl_runtime **rts, int n);
void ppdl_rt_grad_sum_free(ppdl_runtime *rt);
/* the whole sum of the cut chunk (rt->cut_off) starting at arena offset `at`, NULL if
 * no bound cuts one there */
const float *ppdl_rt_cut_chunk(const ppdl_runtime *rt, size_t at);

/* ---- update.c ---- */

/* the update of the stages rts[0..n-1] of this rank, after the replicas' sums: one
 * agreement of all ranks (with clipping the global norm in it), then each stage's
 * AdamW, or none anywhere after a non-finite value; the outcome in stats */
void ppdl_rt_update(ppdl_runtime **rts, int n, ppdl_step_stats *stats);
/* the update's state, at creation */
void ppdl_rt_update_init(ppdl_runtime *rt);

#endif
