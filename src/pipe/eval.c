/* eval.c — evaluation: forward only, through the same stages, slots and messages.
 * Between steps every slot is free. An evaluation batch runs this rank's forward-only
 * list (RECV_ACT, FORWARD, SEND_ACT of each of its micro-batches, in order: a list
 * without backward cannot wait on a later stage), each slot freed as soon as its
 * activation is sent (or its loss taken on the last stage). Nothing of it is kept: no
 * gradient is computed (the loss's gradient is written into the logits' buffer and
 * dropped), no weight changes, and the step's events, times and counters stay those
 * of the training step. */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

static void eval_ops(const ppdl_runtime *rt, ppdl_op_list *l)
{
    l->stage = rt->cfg.stage;
    l->n = 0;
    l->ops = ppdl_xmalloc(3 * (size_t)rt->cfg.M * sizeof *l->ops);
    for (int mb = rt->cfg.replica; mb < rt->cfg.M; mb += rt->k) {
        if (!rt->first_stage) l->ops[l->n++] = (ppdl_op){PPDL_OP_RECV_ACT, mb, rt->cfg.stage - 1};
        l->ops[l->n++] = (ppdl_op){PPDL_OP_FORWARD, mb, -1};
        if (!rt->last_stage) l->ops[l->n++] = (ppdl_op){PPDL_OP_SEND_ACT, mb, rt->cfg.stage + 1};
    }
}

/* the slot of mb is done with: its input buffer back to the inbox (not on stage 0,
 * whose input is the slot's own) */
static void eval_free_slot(ppdl_runtime *rt, slot *sl)
{
    if (!rt->first_stage && sl->in >= 0) {
        rt->inbox[sl->in].lent = 0;
        sl->in = -1;
        sl->act[0] = NULL;
    }
    sl->mb = -1;
}

/* what evaluation swaps out of a runtime and puts back */
typedef struct eval_saved {
    ppdl_op_list train;
    ppdl_batch_source src;
    ppdl_runtime_cfg cfg;
    double t_kind[PPDL_OP_N_KINDS + 1], busy, comm;
} eval_saved;

static void eval_enter(ppdl_runtime *rt, ppdl_batch_source src, eval_saved *sv)
{
    sv->train = rt->ops;
    sv->src = rt->src;
    sv->cfg = rt->cfg;
    sv->busy = rt->busy_s;
    sv->comm = rt->comm_s;
    memcpy(sv->t_kind, rt->t_kind, sizeof sv->t_kind);
    ppdl_op_list ev;
    eval_ops(rt, &ev);
    rt->ops = ev;
    rt->src = src;
    rt->cfg.record_events = 0;
    rt->cfg.papi = NULL;
}

static void eval_leave(ppdl_runtime *rt, const eval_saved *sv)
{
    ppdl_op_list_free(&rt->ops);
    rt->ops = sv->train;
    rt->src = sv->src;
    rt->cfg = sv->cfg;
    memcpy(rt->t_kind, sv->t_kind, sizeof sv->t_kind);
    rt->busy_s = sv->busy;
    rt->comm_s = sv->comm;
}

/* batch e's forward-only ops on this runtime from op *k on, while they are micro-batch
 * mb's (mb < 0: all of them); *k is left at the first op not run */
static void eval_batch_ops(ppdl_runtime *rt, int e, int mb, int *k)
{
    const ppdl_op_list *ev = &rt->ops;
    for (; *k < ev->n && (mb < 0 || ev->ops[*k].mb == mb); (*k)++) {
        const ppdl_op *op = &ev->ops[*k];
        slot *sl = rt_slot_of(rt, op->mb);
        if (op->kind == PPDL_OP_RECV_ACT) {
            int j = 0;
            while (j < rt->n_inbox && rt->inbox[j].mb != op->mb) j++;
            PPDL_CHECK(j < rt->n_inbox, "evaluation: receive of activation %d was not posted", op->mb);
            ppdl_rt_recv_complete(rt, ppdl_rt_act_in(rt, &rt->inbox[j], op->mb), op->mb);
            rt->inbox[j].mb = -1;
            rt->inbox[j].lent = 1;
            sl->in = j;
            sl->act[0] = rt->inbox[j].buf;
            sl->mb = op->mb;
        } else if (op->kind == PPDL_OP_FORWARD) {
            ppdl_rt_forward(rt, e, op->mb);
            if (rt->last_stage) eval_free_slot(rt, sl);
        } else {
            ppdl_rt_send_post(rt, ppdl_rt_out_of(rt, sl, op->mb, 1), op->mb);
            eval_free_slot(rt, sl);
        }
        ppdl_rt_post_receives(rt);
    }
}

/* Several stages of one rank (or one): batch by batch, every runtime's receives posted
 * first, then micro-batch by micro-batch each stage's ops for it in ascending stage
 * order, then every send complete before the slots take the next batch. Why no rank
 * waits forever: every wait is for an earlier (micro-batch, stage) pair, in that
 * lexicographic order. A receive waits for the same micro-batch's earlier stage; a
 * forward waits for its slot's last send (an earlier micro-batch of this stage) to be
 * received, and the next stage posts that receive once it has taken the micro-batch
 * before it (an earlier pair too), or at the batch's start. Every rank runs its pairs
 * in that order, so the earliest pair not done anywhere can always run. (Stage by
 * stage, all of a stage's micro-batches first, deadlocks: a stage's forward would wait
 * for a later stage of its own rank to post a receive.) */
double ppdl_runtime_eval(ppdl_runtime **rts, int n, ppdl_batch_source src, int n_batches)
{
    eval_saved *sv = ppdl_xmalloc((size_t)n * sizeof *sv);
    int *k = ppdl_xmalloc((size_t)n * sizeof(int)), M = 0;
    for (int i = 0; i < n; i++) {
        eval_enter(rts[i], src, &sv[i]);
        M = rts[i]->cfg.M > M ? rts[i]->cfg.M : M; /* eval_ops: micro-batches 0..M-1 */
    }
    double loss_sum = 0;
    for (int e = 0; e < n_batches; e++) {
        for (int i = 0; i < n; i++) {
            ppdl_runtime *rt = rts[i];
            if (rt->last_stage) ppdl_be_zero(rt->be, rt->loss_dev, sizeof(float));
            rt->next_act_recv = 0;
            ppdl_rt_post_receives(rt);
            k[i] = 0;
        }
        for (int mb = 0; mb < M; mb++)
            for (int i = 0; i < n; i++) eval_batch_ops(rts[i], e, mb, &k[i]);
        for (int i = 0; i < n; i++) /* (nothing is left: every op has its micro-batch) */
            PPDL_CHECK(k[i] == rts[i]->ops.n, "evaluation: stage %d has ops out of micro-batch order",
                       rts[i]->cfg.stage);
        for (int i = 0; i < n; i++) {
            ppdl_runtime *rt = rts[i];
            for (int j = 0; j < rt->n_slots; j++) ppdl_rt_send_complete(rt, ppdl_rt_out_of(rt, &rt->slots[j], rt->slots[j].mb, 1), -1);
            if (rt->last_stage) {
                float loss = 0;
                ppdl_be_copy_d2h(rt->be, &loss, rt->loss_dev, sizeof loss);
                loss_sum += loss; /* batch by batch, in order, in double */
            }
        }
    }
    for (int i = 0; i < n; i++) eval_leave(rts[i], &sv[i]);
    free(sv);
    free(k);
    return loss_sum;
}
