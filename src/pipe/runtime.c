/* runtime.c — run one stage's op list, step after step.
 *
 * Buffers of one slot (b = batch_size / M samples, layers first..last, nl of them):
 *   act[0]          stage input: data on stage 0; elsewhere the received activation, a
 *                   buffer of the inbox (below) lent to the slot
 *   act[i], i >= 1  input of layer first+i = output of layer first+i-1 (kept for
 *                   backward); under bf16 kept packed, half its bytes (stash_bf16)
 *   saved[i]        what layer first+i saved in forward (none when it is recomputed)
 *   out             stage output: the activation sent on, or on the last stage the
 *                   logits, overwritten by d(loss)/d(logits) right after forward
 *   dout, din       gradient received from the next stage, sent to the previous one
 *   targets         the last stage's targets of the micro-batch
 * Shared by all slots: a recomputed forward's scratch `saved` and output, two ping-pong
 * gradient buffers between the stage's layers, and the layers' work space.
 * A split backward (BACKWARD_INPUT, later BACKWARD_WEIGHT; schedule.h) keeps the slot
 * until its W, and from B to W one of the W buffers (micro-batch mb in buffer mb mod n):
 * per layer the kind's `keep` (nn/layer.h) and, where W reads it, the layer's output
 * gradient. A layer under full recompute runs its forward again before B and, where W
 * reads `saved`, before W.
 * The inbox (every stage but the first) holds the buffers activations are received
 * into; at RECV_ACT one becomes the slot's act[0] (no copy) until the slot is freed.
 * Where slots are reused within a step (1F1B) it has one buffer more than the slots, so
 * the next activation's receive is posted, and its data moves (a rendezvous protocol
 * waits for the receive), while the stage still computes on all its slots.
 * Messages go through transport.c (MPI or NCCL); other parts: runtime_impl.h. */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"
#include "core/test_hooks.h"
#include "prof/range.h"

#include <stdlib.h>
#include <string.h>

int ppdl_runtime_inbox_size(const ppdl_op_list *ops)
{
    int recvs = 0, slots = ppdl_schedule_max_in_flight(ops);
    for (int i = 0; i < ops->n; i++) recvs += ops->ops[i].kind == PPDL_OP_RECV_ACT;
    if (recvs == 0) return 0;
    return recvs > slots ? slots + 1 : slots;
}

/* the tied weight's exchange between stage 0 and S-1: above every stage's all-reduce
 * tags (each layer of the model has its own), the same on both; it uses this tag and the next
 * (pipe/tie.h) */
static int tag_tie(const ppdl_runtime *rt) { return rt_tag_base(rt) + rt->st->model->L; }

static void *alloc_counted(ppdl_runtime *rt, size_t bytes, const char *what, size_t *category)
{
    void *p = ppdl_be_alloc(rt->be, bytes, what);
    *category += ppdl_be_alloc_size(bytes ? bytes : 1);
    rt->mem.allocations++;
    return p;
}

/* bytes a slot keeps of the stage's layer i's input of fp32_bytes: half where it is
 * stashed as bf16 (stash_bf16; the stage's input act[0] stays fp32) */
static size_t stashed_input_bytes(int stash_bf16, int i, size_t fp32_bytes)
{
    return stash_bf16 && i > 0 ? fp32_bytes / 2 : fp32_bytes;
}

static int is_backward_op(int kind)
{
    return kind == PPDL_OP_BACKWARD || kind == PPDL_OP_BACKWARD_INPUT || kind == PPDL_OP_BACKWARD_WEIGHT;
}

void ppdl_rt_record(ppdl_runtime *rt, int kind, int mb, double t0, double t1)
{
    if (kind == PPDL_OP_FORWARD || is_backward_op(kind) || kind == PPDL_OP_OPTIMIZER)
        rt->busy_s += t1 - t0;
    if (kind >= 0 && kind < PPDL_OP_N_KINDS) rt->t_kind[kind] += t1 - t0;
    else if (kind == PPDL_EV_RECOMPUTE) rt->t_kind[PPDL_OP_N_KINDS] += t1 - t0;
    if (!rt->cfg.record_events) return;
    if (rt->n_ev == rt->cap_ev) {
        rt->cap_ev = rt->cap_ev ? 2 * rt->cap_ev : 256;
        rt->ev = realloc(rt->ev, (size_t)rt->cap_ev * sizeof *rt->ev);
        PPDL_CHECK(rt->ev, "out of host memory for trace events");
    }
    ppdl_event_rec *e = &rt->ev[rt->n_ev++];
    e->rank = rt->comm->rank;
    e->stage = rt->cfg.stage;
    e->kind = kind;
    e->mb = mb;
    e->t0_ms = 1e3 * (t0 - rt->t_step0);
    e->t1_ms = 1e3 * (t1 - rt->t_step0);
}

/* a zero-length event (a send posted, a receive completed): one clock reading, so
 * that its end is never before its start. A receive reads the clock after its wait;
 * a send reads it just before it posts (the SEND_ cases of step_op, which
 * call record): a rank preempted between posting and reading the clock (more ranks
 * than cores) would otherwise time its send after the peer had the message, and the
 * merged trace would show an effect before its cause. */
static void record_instant(ppdl_runtime *rt, int kind, int mb)
{
    double t = ppdl_now_s();
    ppdl_rt_record(rt, kind, mb, t, t);
}

void ppdl_rt_wait(ppdl_runtime *rt, MPI_Request *req, int mb, int kind)
{
    if (*req == MPI_REQUEST_NULL) return;
    double t0 = ppdl_now_s();
    ppdl_comm_wait(rt->comm, req);
    double t1 = ppdl_now_s();
    if (t1 - t0 > 20e-6) ppdl_rt_record(rt, kind, mb, t0, t1);
}

/* The layout (replicas of every stage) and the ranks of this stage's replicas
 * (members[q]), from every rank's (stage, replica, replicas): collective over the comm
 * layer's ranks. Then the schedule, proven before it runs: every rank builds and checks
 * the lists of every replica of every stage, and keeps its own. */
static void create_ops(ppdl_runtime *rt, int *members)
{
    const ppdl_runtime_cfg *cfg = &rt->cfg;
    ppdl_comm *comm = rt->comm;
    int S = cfg->S, mine[3] = {cfg->stage, cfg->replica, rt->k};
    int *all_ranks = ppdl_xmalloc(3 * (size_t)comm->size * sizeof(int));
    PPDL_CHECK_MPI(MPI_Allgather(mine, 3, MPI_INT, all_ranks, 3, MPI_INT, comm->comm));
    int *layout = ppdl_xcalloc((size_t)S, sizeof(int));     /* replicas of each stage */
    for (int q = 0; q < rt->k; q++) members[q] = -1;
    for (int r = 0; r < comm->size; r++) {
        int s = all_ranks[3 * r], q = all_ranks[3 * r + 1], k = all_ranks[3 * r + 2];
        PPDL_CHECK(s >= 0 && s < S && q >= 0 && q < k && (layout[s] == 0 || layout[s] == k),
                   "rank %d says it is replica %d of %d of stage %d (of %d; other ranks say %d replicas)", r, q, k,
                   s, S, layout[s]);
        layout[s] = k;
        if (s != cfg->stage) continue;
        PPDL_CHECK(members[q] == -1, "ranks %d and %d are both replica %d of stage %d", members[q], r, q, s);
        members[q] = r;
    }
    for (int s = 0; s < S; s++) PPDL_CHECK(layout[s] >= 1, "stage %d of %d has no rank", s, S);
    for (int q = 0; q < rt->k; q++) PPDL_CHECK(members[q] >= 0, "stage %d has no replica %d", cfg->stage, q);
    free(all_ranks);

    /* the schedule, proven before it runs: every rank builds and checks the lists of
     * every replica of every stage, and keeps its own */
    ppdl_schedule_spec sp = {cfg->schedule, S, cfg->M, 1, layout, cfg->pass_times};
    int n_lists = ppdl_schedule_devices(&sp), own = ppdl_schedule_device(&sp, cfg->stage, cfg->replica);
    ppdl_rank_schedule *rs = ppdl_xcalloc((size_t)n_lists, sizeof *rs);
    ppdl_op_list *all = ppdl_xcalloc((size_t)n_lists, sizeof *all);
    char err[PPDL_ERR_LEN];
    if (ppdl_schedule_make_all(&sp, rs, err, sizeof err)) ppdl_die("schedule %s: %s", ppdl_schedule_name(cfg->schedule), err);
    for (int i = 0; i < n_lists; i++) all[i] = ppdl_rank_schedule_take(&rs[i], 0);
    if (ppdl_schedule_check_layout(S, cfg->M, layout, all, err, sizeof err))
        ppdl_die("schedule %s with %d stages and %d micro-batches failed its check: %s",
                 ppdl_schedule_name(cfg->schedule), S, cfg->M, err);
    rt->ops = all[own];
    all[own] = (ppdl_op_list){0};
    for (int i = 0; i < n_lists; i++) ppdl_op_list_free(&all[i]);
    free(all);
    free(rs);
    free(layout);
}

/* A rank holding several stages: the stage's list is given (cfg.ops, proven with the
 * rank's other lists by ppdl_schedule_check_ranks before); its neighbours are
 * cfg.prev_ranks / next_ranks (this rank itself where it holds them too), its
 * replicas' ranks (k copies of the pipeline) cfg.replica_ranks. */
static void create_chunk_ops(ppdl_runtime *rt, int *members)
{
    const ppdl_runtime_cfg *cfg = &rt->cfg;
    PPDL_CHECK(rt->k == 1 || cfg->replica_ranks, "stage %d: %d replicas but their ranks not given", cfg->stage, rt->k);
    PPDL_CHECK(rt->k == 1 || cfg->replica_ranks[cfg->replica] == rt->comm->rank,
               "stage %d: rank %d is not its replica %d", cfg->stage, rt->comm->rank, cfg->replica);
    PPDL_CHECK(cfg->ops->n > 0 && cfg->ops->ops[cfg->ops->n - 1].kind == PPDL_OP_OPTIMIZER,
               "stage %d: its op list does not end with the update", cfg->stage);
    PPDL_CHECK(!cfg->nccl_act && !cfg->nccl_replicas, "stage %d: a rank holding several stages sends through MPI",
               cfg->stage);
    for (int q = 0; q < rt->k; q++) members[q] = rt->k == 1 ? rt->comm->rank : cfg->replica_ranks[q];
    rt->ops.stage = cfg->stage;
    rt->ops.n = cfg->ops->n;
    rt->ops.ops = ppdl_xmalloc((size_t)cfg->ops->n * sizeof *rt->ops.ops);
    memcpy(rt->ops.ops, cfg->ops->ops, (size_t)cfg->ops->n * sizeof *rt->ops.ops);
}

ppdl_runtime *ppdl_runtime_create(ppdl_stage *st, const ppdl_runtime_cfg *cfg,
                                  ppdl_batch_source src, ppdl_comm *comm)
{
    ppdl_runtime *rt = ppdl_xcalloc(1, sizeof *rt);
    rt->st = st;
    rt->be = st->be;
    rt->cfg = *cfg;
    rt->src = src;
    rt->comm = comm;
    rt->nc_act = cfg->nccl_act;
    rt->nc_grad = cfg->nccl_grad;
    rt->nc_replicas = cfg->nccl_replicas;
    PPDL_CHECK(!rt->nc_act == !rt->nc_grad, "NCCL for one direction of the messages only");
#if !HAVE_CUDA
    PPDL_CHECK(!rt->nc_act && !rt->nc_replicas, "NCCL transfers asked of a build without CUDA");
#endif
    rt->p2p = ppdl_rt_p2p_of(rt);
    rt->nl = st->last - st->first + 1;
    PPDL_CHECK(cfg->M >= 1 && cfg->batch_size % cfg->M == 0, "batch size %d is not a multiple of %d micro-batches",
               cfg->batch_size, cfg->M);
    rt->b = cfg->batch_size / cfg->M;
    rt->first_stage = cfg->stage == 0;
    rt->last_stage = cfg->stage == cfg->S - 1;
    rt->model_first = st->first == 0;
    PPDL_CHECK(rt->last_stage == (st->last == st->model->L - 1), "the last stage must hold the last layer");
    rt->recompute = ppdl_xcalloc((size_t)rt->nl, sizeof(int));
    rt->lr = cfg->lr;
    ppdl_rt_update_init(rt);
    ppdl_runtime_hooks_read(&rt->test, comm->rank);
    for (int i = 0; i < rt->nl; i++) rt->recompute[i] = cfg->recompute ? cfg->recompute[i] : 0;
    rt->loss_rows = ppdl_model_loss_rows(st->model);
    rt->classes = ppdl_model_classes(st->model);
    size_t arena = ppdl_be_alloc_size((st->n_params ? st->n_params : 1) * sizeof(float));
    rt->mem.params = arena + ppdl_be_alloc_size((st->n_grads ? st->n_grads : 1) * sizeof(float)); /* values + gradients */
    /* AdamW m and v, of this replica's slice where they are sharded */
    rt->mem.optimizer = st->adam_m ? 2 * ppdl_be_alloc_size((st->opt_n ? st->opt_n : 1) * sizeof(float)) : 0;
    rt->mem.allocations = st->adam_m ? 4 : 2;

    /* the op list, and the ranks of this stage's replicas */
    rt->k = cfg->n_replicas > 0 ? cfg->n_replicas : 1;
    rt->chunked = cfg->ops != NULL;
    int *members = ppdl_xmalloc((size_t)rt->k * sizeof(int)); /* rank of each replica of this stage */
    if (rt->chunked)
        create_chunk_ops(rt, members);
    else
        create_ops(rt, members);
    rt->last_backward = -1;
    for (int i = 0; i < rt->ops.n; i++)
        if (rt->ops.ops[i].kind == PPDL_OP_BACKWARD || rt->ops.ops[i].kind == PPDL_OP_BACKWARD_WEIGHT)
            rt->last_backward = i;

    /* the replicas' gradient sums: a ring under --netem (grad_sum.c says why) */
    rt->use_ring = comm->netem != NULL;
    PPDL_CHECK(rt->k == 1 || rt->use_ring || cfg->replica_comm != MPI_COMM_NULL,
               "stage %d has %d replicas but no communicator among them", cfg->stage, rt->k);
    int *tag_ub = NULL, has_ub = 0;
    PPDL_CHECK_MPI(MPI_Comm_get_attr(comm->comm, MPI_TAG_UB, &tag_ub, &has_ub));
    PPDL_CHECK(!has_ub || tag_tie(rt) + 1 <= *tag_ub,
               "%d micro-batches and %d layers need message tags up to %d; this MPI allows %d", cfg->M,
               st->model->L, tag_tie(rt) + 1, has_ub ? *tag_ub : 0);
    PPDL_CHECK(st->opt_k <= 1 || (st->opt_k == rt->k && st->opt_r == cfg->replica && !rt->use_ring &&
                                   !rt->nc_replicas && !ppdl_xfer_staged(rt->be)),
               "stage %d: optimizer state sharded %d ways (slice %d) on replica %d of %d, or where the parameters "
               "are not gathered by MPI (--netem, NCCL, a staged backend)", cfg->stage, st->opt_k, st->opt_r,
               cfg->replica, rt->k);
    ppdl_rt_grad_sum_init(rt, members);
    free(members);
    ppdl_tie_init(&rt->tie, st, cfg->tie_peers, cfg->n_tie_peers, cfg->replica, rt->k, tag_tie(rt));
    rt->mem.params += rt->tie.bytes ? ppdl_be_alloc_size(rt->tie.bytes) : 0; /* a gradient */
    rt->mem.allocations += rt->tie.bytes > 0;
    rt->n_slots = ppdl_schedule_max_in_flight(&rt->ops);

    int b = rt->b;
    rt->in_bytes = (size_t)b * rt_layer(rt, 0)->in_bytes;
    rt->out_bytes = (size_t)b * rt_layer(rt, rt->nl - 1)->out_bytes;
    rt->bf16 = ppdl_be_precision(rt->be) == PPDL_PREC_BF16;
    rt->bf16_layers = rt->bf16 && !rt->test.bf16_stage_only;
    rt->stash_bf16 = rt->bf16 && rt->nl > 1;
    rt->logits_bf16 = rt->last_stage && rt_layer(rt, rt->nl - 1)->bf16_saved;
    size_t max_act = rt->out_bytes, max_saved = 0, max_work = 0;
    for (int i = 0; i < rt->nl; i++) {
        const ppdl_layer *l = rt_layer(rt, i);
        size_t a = (size_t)b * l->out_bytes, in = (size_t)b * l->in_bytes;
        if (a > max_act) max_act = a;
        if (in > max_act) max_act = in;
        size_t s0 = l->kind->saved_floats(l, b, 0), w = l->kind->work_floats(l, b);
        if (s0 > max_saved) max_saved = s0;
        if (w > max_work) max_work = w;
    }

    rt->slots = ppdl_xcalloc((size_t)rt->n_slots, sizeof *rt->slots);
    for (int k = 0; k < rt->n_slots; k++) {
        slot *sl = &rt->slots[k];
        sl->mb = sl->grad_recv_mb = sl->in = -1;
        sl->act_send.mpi = sl->grad_send.mpi = sl->grad_recv.mpi = MPI_REQUEST_NULL;
        sl->act = ppdl_xcalloc((size_t)rt->nl, sizeof *sl->act);
        sl->saved = ppdl_xcalloc((size_t)rt->nl, sizeof *sl->saved);
        for (int i = 0; i < rt->nl; i++) {
            const ppdl_layer *l = rt_layer(rt, i);
            /* a received input is an inbox buffer, lent at RECV_ACT */
            if (i > 0 || rt->first_stage)
                sl->act[i] = alloc_counted(rt, stashed_input_bytes(rt->stash_bf16, i, (size_t)b * l->in_bytes),
                                           "stashed layer inputs", &rt->mem.stash);
            if (rt->recompute[i] != PPDL_RC_FULL) {
                size_t n = l->kind->saved_floats(l, b, rt->recompute[i]);
                if (n) sl->saved[i] = alloc_counted(rt, n * sizeof(float), "saved activations", &rt->mem.stash);
            }
        }
        /* the last stage keeps d(logits) of the micro-batch until its backward */
        sl->out = alloc_counted(rt, rt->out_bytes / (rt->logits_bf16 ? 2 : 1), rt->last_stage ? "logits" : "send buffer",
                                rt->last_stage ? &rt->mem.stash : &rt->mem.buffers);
        if (!rt->last_stage)
            sl->dout = alloc_counted(rt, rt->out_bytes, "gradient receive buffer", &rt->mem.buffers);
        else
            sl->targets = alloc_counted(rt, (size_t)b * rt->loss_rows * sizeof(int32_t), "targets", &rt->mem.buffers);
        if (!rt->first_stage)
            sl->din = alloc_counted(rt, rt->in_bytes, "gradient send buffer", &rt->mem.buffers);
    }
    /* the inbox: one buffer per slot (the stage inputs a slot keeps for backward) and,
     * where slots are reused, one more to receive into early */
    rt->n_inbox = rt->first_stage ? 0 : ppdl_runtime_inbox_size(&rt->ops);
    rt->inbox = ppdl_xcalloc((size_t)rt->n_inbox + 1, sizeof *rt->inbox);
    for (int j = 0; j < rt->n_inbox; j++) {
        inbox_buf *ib = &rt->inbox[j];
        ib->mb = -1;
        ib->req.mpi = MPI_REQUEST_NULL;
        ib->buf = j < rt->n_slots ? alloc_counted(rt, rt->in_bytes, "stashed layer inputs", &rt->mem.stash)
                                  : alloc_counted(rt, rt->in_bytes, "activation receive buffer", &rt->mem.buffers);
    }
    /* the W buffers of a split backward */
    rt->n_wbufs = ppdl_schedule_max_pending_weight(&rt->ops);
    rt->wbufs = ppdl_xcalloc((size_t)rt->n_wbufs + 1, sizeof *rt->wbufs);
    for (int j = 0; j < rt->n_wbufs; j++) {
        wbuf *wb = &rt->wbufs[j];
        wb->mb = -1;
        wb->keep = ppdl_xcalloc((size_t)rt->nl, sizeof *wb->keep);
        wb->dout = ppdl_xcalloc((size_t)rt->nl, sizeof *wb->dout);
        for (int i = 0; i < rt->nl; i++) {
            const ppdl_layer *l = rt_layer(rt, i);
            size_t n = l->kind->keep_floats(l, b, rt->recompute[i]);
            if (n) wb->keep[i] = alloc_counted(rt, n * sizeof(float), "kept for W", &rt->mem.weight_keep);
            if (i < rt->nl - 1 && l->n_params && (l->kind->weight_reads(l, rt->recompute[i]) & PPDL_W_DOUT))
                wb->dout[i] = alloc_counted(rt, (size_t)b * l->out_bytes, "kept for W", &rt->mem.weight_keep);
        }
    }
    if (max_saved)
        rt->scratch_saved = alloc_counted(rt, max_saved * sizeof(float), "recompute scratch", &rt->mem.buffers);
    rt->scratch_out = alloc_counted(rt, max_act, "recompute output", &rt->mem.buffers);
    rt->grad[0] = alloc_counted(rt, max_act, "layer gradients", &rt->mem.buffers);
    rt->grad[1] = alloc_counted(rt, max_act, "layer gradients", &rt->mem.buffers);
    if (rt->stash_bf16) rt->widened = alloc_counted(rt, max_act, "widened layer input", &rt->mem.buffers);
    if (max_work) rt->work = alloc_counted(rt, max_work * sizeof(float), "layer work space", &rt->mem.buffers);
    rt->loss_dev = alloc_counted(rt, sizeof(float), "loss", &rt->mem.buffers);
    if (rt->first_stage) rt->host_in = ppdl_xmalloc(rt->in_bytes);
    if (rt->last_stage) rt->host_tg = ppdl_xmalloc((size_t)b * rt->loss_rows * sizeof(int32_t));
    return rt;
}

ppdl_mem_prediction ppdl_runtime_predict_memory(const ppdl_model *m, int first, int last, int b,
                                                int n_slots, int n_inbox, int n_wbufs, const int *recompute,
                                                int first_stage, int last_stage, int bf16)
{
    int stash_bf16 = bf16 && last > first; /* as ppdl_runtime_create's */
    ppdl_mem_prediction p = {0};
    size_t params = 0, stash = 0, keep = 0, max_act = 0, max_saved = 0, max_work = 0;
    /* a tied weight (pipe/tie.h): held once, or one of its two layers here */
    double tied = (double)(ppdl_model_tied_floats(m) * sizeof(float));
    if (ppdl_model_tie_within(m, first, last)) p.tie = -3.0 * tied;
    else if (first == 0 || last == m->L - 1) p.tie = tied;
    for (int l = first; l <= last; l++) {
        const ppdl_layer *ly = &m->layers[l];
        int option = recompute ? recompute[l - first] : 0;
        params += ppdl_layer_param_count(ly) * sizeof(float);
        stash += ppdl_model_stash_bytes(m, l, b, option);
        /* the layer's input packed as bf16 (stashed_input_bytes) */
        stash -= (size_t)b * ly->in_bytes - stashed_input_bytes(stash_bf16, l - first, (size_t)b * ly->in_bytes);
        keep += ppdl_layer_weight_keep_bytes(ly, b, option);
        /* the last layer's output gradient is the slot's, counted in its buffers */
        if (l == last && ly->n_params && (ly->kind->weight_reads(ly, option) & PPDL_W_DOUT))
            keep -= (size_t)b * ly->out_bytes;
        size_t in = (size_t)b * ly->in_bytes, out = (size_t)b * ly->out_bytes;
        max_act = in > max_act ? in : max_act;
        max_act = out > max_act ? out : max_act;
        size_t sv = sizeof(float) * ly->kind->saved_floats(ly, b, 0);
        size_t wk = sizeof(float) * ly->kind->work_floats(ly, b);
        max_saved = sv > max_saved ? sv : max_saved;
        max_work = wk > max_work ? wk : max_work;
    }
    size_t in_b = (size_t)b * m->layers[first].in_bytes, out_b = (size_t)b * m->layers[last].out_bytes;
    size_t per_slot = (last_stage ? (size_t)b * ppdl_model_loss_rows(m) * sizeof(int32_t) : 2 * out_b) +
                      (first_stage ? 0 : in_b);
    p.params_optimizer = 4.0 * (double)params;
    p.stash = (double)n_slots * (double)stash;
    p.weight_keep = (double)n_wbufs * (double)keep;
    p.cost_model = p.params_optimizer + p.stash + p.weight_keep + p.tie;
    /* the inbox's buffer beyond the slots' inputs (which the stash counts) */
    double spare_in = !first_stage && n_inbox > n_slots ? (double)(n_inbox - n_slots) * (double)in_b : 0;
    /* scratch_out, grad[2] and, under a bf16 stash, widened */
    p.buffers = (double)n_slots * (double)per_slot + spare_in + (double)max_saved +
                (3.0 + stash_bf16) * (double)max_act +
                (double)max_work + sizeof(float);
    p.total = p.cost_model + p.buffers;
    return p;
}

/* Post the receives whose buffers are free, in op-list order, so data can arrive
 * while this rank computes. A RECV_ACT(mb) needs a free inbox buffer; a RECV_GRAD(mb)
 * needs the slot to hold mb (forwarded, not yet backwarded). */
void ppdl_rt_post_receives(ppdl_runtime *rt)
{
    while (rt->next_act_recv < rt->ops.n) {
        const ppdl_op *op = &rt->ops.ops[rt->next_act_recv];
        if (op->kind != PPDL_OP_RECV_ACT) { rt->next_act_recv++; continue; }
        inbox_buf *ib = NULL;
        for (int j = 0; j < rt->n_inbox && !ib; j++)
            if (rt->inbox[j].mb == -1 && !rt->inbox[j].lent) ib = &rt->inbox[j];
        if (!ib) break;
        ppdl_rt_recv_post(rt, ppdl_rt_act_in(rt, ib, op->mb), op->mb);
        ib->mb = op->mb;
        rt->next_act_recv++;
    }
    while (rt->next_grad_recv < rt->ops.n) {
        const ppdl_op *op = &rt->ops.ops[rt->next_grad_recv];
        if (op->kind != PPDL_OP_RECV_GRAD) { rt->next_grad_recv++; continue; }
        slot *sl = rt_slot_of(rt, op->mb);
        if (sl->mb != op->mb || sl->grad_recv_mb != -1) break;
        ppdl_rt_recv_post(rt, ppdl_rt_grad_in(rt, sl, op->mb), op->mb);
        sl->grad_recv_mb = op->mb;
        rt->next_grad_recv++;
    }
}

/* The slot of a micro-batch is free once its parameter gradients are added and its
 * input gradient is sent (stage 0 sends none): its input goes back to the inbox */
static void release_if_done(ppdl_runtime *rt, slot *sl)
{
    if (!sl->weights_done || !(rt->first_stage || sl->grad_sent)) return;
    sl->mb = -1;
    sl->weights_done = sl->grad_sent = 0;
    if (rt->first_stage) return;
    rt->inbox[sl->in].lent = 0;
    sl->in = -1;
    sl->act[0] = NULL;
}

/* the step's counters back to zero and the first receives posted */
static void step_begin(ppdl_runtime *rt, double t0)
{
    memset(rt->t_kind, 0, sizeof rt->t_kind);
    rt->nonfinite_what[0] = 0;
    rt->n_ev = 0;
    rt->busy_s = 0;
    rt->comm_s = 0;
    rt->sent_bytes = 0;
    rt->t_step0 = t0;
    if (rt->last_stage) ppdl_be_zero(rt->be, rt->loss_dev, sizeof(float));
    rt->next_act_recv = rt->next_grad_recv = 0;
    ppdl_rt_grad_sum_begin(rt);
    ppdl_rt_post_receives(rt);
}

/* a SEND_ACT (act 1) or SEND_GRAD (act 0) op: posted, and recorded at the clock read
 * just before the post (record_instant says why) */
static void send_op(ppdl_runtime *rt, slot *sl, const ppdl_op *op, int act)
{
    ppdl_range_push("send", op->mb);
    double t_post = ppdl_rt_send_post(rt, ppdl_rt_out_of(rt, sl, op->mb, act), op->mb);
    ppdl_range_pop();
    ppdl_rt_record(rt, op->kind, op->mb, t_post, t_post);
}

/* op k of the rank's list, any kind but OPTIMIZER (step_update) */
static void step_op(ppdl_runtime *rt, long step, int k)
{
    const ppdl_op *op = &rt->ops.ops[k];
    double t_op = ppdl_now_s(), w_op = rt->comm->wait_s;
    /* the test hook FAIL_STEP (runtime_hooks.h): a planted internal error halfway
     * through this rank's op list, while the other ranks wait for its messages */
    if (step == rt->test.fail_step && k == rt->ops.n / 2)
        ppdl_die("%s: the planted error of stage %d at step %ld, op %d of %d", ppdl_test_hook_var("FAIL_STEP"),
                 rt->cfg.stage, step + 1, k, rt->ops.n);
    slot *sl = op->mb >= 0 ? rt_slot_of(rt, op->mb) : NULL;
    switch (op->kind) {
    case PPDL_OP_RECV_ACT: {
        int j = 0;
        while (j < rt->n_inbox && rt->inbox[j].mb != op->mb) j++;
        PPDL_CHECK(j < rt->n_inbox, "receive of activation %d was not posted", op->mb);
        PPDL_CHECK(sl->mb == -1 && sl->in == -1, "activation %d arrives in a slot still holding %d", op->mb,
                   sl->mb);
        inbox_buf *ib = &rt->inbox[j];
        ppdl_range_push("recv", op->mb);
        ppdl_rt_recv_complete(rt, ppdl_rt_act_in(rt, ib, op->mb), op->mb);
        ppdl_range_pop();
        record_instant(rt, op->kind, op->mb);
        ib->mb = -1;
        ib->lent = 1;
        sl->in = j;
        sl->act[0] = ib->buf;
        sl->mb = op->mb;
        break;
    }
    case PPDL_OP_FORWARD:
        ppdl_rt_forward(rt, step, op->mb);
        break;
    case PPDL_OP_SEND_ACT:
        send_op(rt, sl, op, 1);
        break;
    case PPDL_OP_RECV_GRAD:
        PPDL_CHECK(sl->grad_recv_mb == op->mb, "receive of gradient %d was not posted", op->mb);
        ppdl_range_push("recv", op->mb);
        ppdl_rt_recv_complete(rt, ppdl_rt_grad_in(rt, sl, op->mb), op->mb);
        ppdl_range_pop();
        record_instant(rt, op->kind, op->mb);
        sl->grad_recv_mb = -1;
        break;
    case PPDL_OP_BACKWARD:
    case PPDL_OP_BACKWARD_INPUT:
    case PPDL_OP_BACKWARD_WEIGHT:
        ppdl_rt_backward(rt, op->mb, op->kind, k == rt->last_backward);
        sl->weights_done |= op->kind != PPDL_OP_BACKWARD_INPUT;
        release_if_done(rt, sl);
        break;
    case PPDL_OP_SEND_GRAD:
        send_op(rt, sl, op, 0);
        sl->grad_sent = 1;
        release_if_done(rt, sl);
        break;
    default:
        ppdl_die("unknown op %d", op->kind);
    }
    /* communication: what sends and receives cost beyond waiting for the peer */
    if (op->kind == PPDL_OP_SEND_ACT || op->kind == PPDL_OP_SEND_GRAD || op->kind == PPDL_OP_RECV_ACT ||
        op->kind == PPDL_OP_RECV_GRAD)
        rt->comm_s += (ppdl_now_s() - t_op) - (rt->comm->wait_s - w_op);
    ppdl_rt_post_receives(rt);
}

/* The OPTIMIZER op of the stages rts[0..n-1] of this rank (one, or several where it
 * holds several: their lists all end with it): the replicas' and a tied weight's sums,
 * every send complete, one agreement of all ranks (with clipping the global norm in
 * it), then each stage's update, or none anywhere after a non-finite value. */
static void step_update(ppdl_runtime **rts, int n, ppdl_step_stats *stats)
{
    for (int c = 0; c < n; c++) ppdl_rt_grad_sum_finish(rts[c]);
    /* then the tied weight's two gradients, summed the same way on every plan */
    ppdl_rt_grad_sum_tie(rts, n);
    for (int c = 0; c < n; c++) {
        ppdl_runtime *rt = rts[c];
        /* every send of the step is complete before the weights change */
        for (int j = 0; j < rt->n_slots; j++) {
            slot *sj = &rt->slots[j];
            ppdl_rt_send_complete(rt, ppdl_rt_out_of(rt, sj, sj->mb, 1), sj->mb);
            ppdl_rt_send_complete(rt, ppdl_rt_out_of(rt, sj, sj->mb, 0), sj->mb);
        }
    }
    ppdl_rt_update(rts, n, stats);
}

/* the step's numbers of one stage, added into stats (its loss, times and bytes) */
static void step_add_stats(ppdl_runtime *rt, ppdl_step_stats *stats)
{
    if (rt->last_stage) {
        float loss = 0;
        ppdl_be_copy_d2h(rt->be, &loss, rt->loss_dev, sizeof loss);
        stats->loss_sum += loss;
    }
    stats->comm_ms += 1e3 * rt->comm_s;
    stats->message_bytes += rt->sent_bytes;
    stats->compute_ms += 1e3 * rt->busy_s;
    stats->forward_ms += 1e3 * rt->t_kind[PPDL_OP_FORWARD];
    stats->recompute_ms += 1e3 * rt->t_kind[PPDL_OP_N_KINDS];
    double w = 1e3 * rt->t_kind[PPDL_OP_BACKWARD_WEIGHT];
    stats->backward_weight_ms += w;
    stats->backward_ms += 1e3 * (rt->t_kind[PPDL_OP_BACKWARD] + rt->t_kind[PPDL_OP_BACKWARD_INPUT]) + w -
                          1e3 * rt->t_kind[PPDL_OP_N_KINDS];
    stats->optimizer_ms += 1e3 * rt->t_kind[PPDL_OP_OPTIMIZER];
}

void ppdl_runtime_step(ppdl_runtime **rts, int n, const int *order, int n_order, long step,
                       ppdl_step_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->nonfinite_stage = -1;
    stats->grad_norm = -1;
    double t0 = ppdl_now_s(), wait0 = rts[0]->comm->wait_s;
    for (int c = 0; c < n; c++) step_begin(rts[c], t0);
    int *next = ppdl_xcalloc((size_t)n, sizeof(int));
    int updates = 0;
    for (int i = 0; i < n_order; i++) {
        int c = order[i];
        PPDL_CHECK(c >= 0 && c < n && next[c] < rts[c]->ops.n, "the rank's order runs past stage list %d", c);
        if (rts[c]->ops.ops[next[c]].kind == PPDL_OP_OPTIMIZER) {
            next[c]++;
            if (++updates == n) step_update(rts, n, stats); /* the last stage's update: all at once */
            continue;
        }
        PPDL_CHECK(updates == 0, "stage %d runs an op after another stage's update", rts[c]->cfg.stage);
        step_op(rts[c], step, next[c]++);
    }
    for (int c = 0; c < n; c++)
        PPDL_CHECK(next[c] == rts[c]->ops.n, "the rank's order leaves %d ops of stage %d", rts[c]->ops.n - next[c],
                   rts[c]->cfg.stage);
    PPDL_CHECK(updates == n, "the rank's order runs %d updates for %d stages", updates, n);
    free(next);
    ppdl_be_sync(rts[0]->be);
    for (int c = 0; c < n; c++) step_add_stats(rts[c], stats);
    stats->step_ms = 1e3 * (ppdl_now_s() - t0);
    stats->wait_ms = 1e3 * (rts[0]->comm->wait_s - wait0);
}

const ppdl_event_rec *ppdl_runtime_events(const ppdl_runtime *rt, int *n)
{
    *n = rt->n_ev;
    return rt->ev;
}

double ppdl_runtime_step_start(const ppdl_runtime *rt) { return rt->t_step0; }
ppdl_mem_breakdown ppdl_runtime_memory(const ppdl_runtime *rt) { return rt->mem; }
int ppdl_runtime_slots(const ppdl_runtime *rt) { return rt->n_slots; }
int ppdl_runtime_adam_t(const ppdl_runtime *rt) { return rt->adam_t; }
void ppdl_runtime_set_adam_t(ppdl_runtime *rt, int t) { rt->adam_t = t; }
void ppdl_runtime_set_lr(ppdl_runtime *rt, double lr) { rt->lr = lr; }

void ppdl_runtime_destroy(ppdl_runtime *rt)
{
    if (!rt) return;
    for (int k = 0; k < rt->n_slots; k++) {
        slot *sl = &rt->slots[k];
        /* no transfer still reads or writes a buffer freed below */
        rt->p2p->req_free(rt, rt->nc_act, &sl->act_send);
        rt->p2p->req_free(rt, rt->nc_grad, &sl->grad_send);
        rt->p2p->req_free(rt, rt->nc_grad, &sl->grad_recv);
        for (int i = 0; i < rt->nl; i++) {
            if (i > 0 || rt->first_stage) ppdl_be_free(rt->be, sl->act[i]); /* else the inbox's */
            ppdl_be_free(rt->be, sl->saved[i]);
        }
        free(sl->act);
        free(sl->saved);
        ppdl_be_free(rt->be, sl->out);
        ppdl_be_free(rt->be, sl->dout);
        ppdl_be_free(rt->be, sl->din);
        ppdl_be_free(rt->be, sl->targets);
    }
    free(rt->slots);
    for (int j = 0; j < rt->n_inbox; j++) {
        rt->p2p->req_free(rt, rt->nc_act, &rt->inbox[j].req);
        ppdl_be_free(rt->be, rt->inbox[j].buf);
    }
    free(rt->inbox);
    for (int j = 0; j < rt->n_wbufs; j++) {
        for (int i = 0; i < rt->nl; i++) {
            ppdl_be_free(rt->be, rt->wbufs[j].keep[i]);
            ppdl_be_free(rt->be, rt->wbufs[j].dout[i]);
        }
        free(rt->wbufs[j].keep);
        free(rt->wbufs[j].dout);
    }
    free(rt->wbufs);
    ppdl_be_free(rt->be, rt->scratch_saved);
    ppdl_be_free(rt->be, rt->scratch_out);
    ppdl_be_free(rt->be, rt->grad[0]);
    ppdl_be_free(rt->be, rt->grad[1]);
    ppdl_be_free(rt->be, rt->widened);
    ppdl_be_free(rt->be, rt->work);
    ppdl_be_free(rt->be, rt->loss_dev);
    free(rt->host_in);
    free(rt->host_tg);
    free(rt->recompute);
    free(rt->layer_sumsq);
    free(rt->ev);
    ppdl_rt_grad_sum_free(rt);
    ppdl_tie_free(&rt->tie, rt->be);
    ppdl_op_list_free(&rt->ops);
    free(rt);
}
