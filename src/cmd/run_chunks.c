/* run_chunks.c — a rank holding several stages: the interleaved and zb-v schedules
 * (sched/schedule.h ppdl_rank_schedule) on a chunked plan (plan/plan.h: every rank the
 * same number v of stages; or k copies of such a pipeline, each stage with k
 * replicas). The rank keeps, for each of its stages,
 * its own weights (ppdl_stage) and its own runtime (pipe/runtime.h, given the stage's
 * op list), and runs them in the rank's order (ppdl_runtime_step_group). Its first
 * stage, r->local[0], is built as a rank of one stage builds it; the others here. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "io/model_io.h"
#include "pipe/p2p_choice.h"

int run_chunked(const run *r) { return r->n_local > 1; }

/* the ranks of a stage's replicas in replica order (a stage a planner built without
 * replicas names its one rank only) */
static const int *ranks_of(const ppdl_plan_stage *ps)
{
    PPDL_CHECK(ps->n_replicas <= 1 || ps->ranks, "a stage of %d replicas names no ranks", ps->n_replicas);
    return ps->n_replicas > 0 && ps->ranks ? ps->ranks : &ps->rank;
}

/* What the first version leaves out (NULL: nothing here): each of these keeps a
 * per-stage rule the several stages of a rank would break. */
static const char *chunks_unsupported(const run *r)
{
    return r->p2p == PPDL_P2P_NCCL ? "--p2p nccl (the stages' messages go through MPI)" : NULL;
}

int run_can_hold_chunks(const run *r) { return chunks_unsupported(r) == NULL; }

/* ... refused before anything runs, with the reason; where --p2p auto took NCCL, the
 * messages go through MPI instead (every rank alike: the plan is the same on all) */
static void refuse_unsupported(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    if (r->p2p == PPDL_P2P_NCCL && o->p2p == PPDL_P2P_AUTO) {
        r->p2p = PPDL_P2P_MPI;
        snprintf(r->p2p_why, sizeof r->p2p_why, "--p2p auto: several stages per rank (--schedule %s) send through MPI",
                 ppdl_schedule_name(o->schedule));
    }
    const char *what = chunks_unsupported(r);
    if (what)
        snprintf(err, sizeof err, "--schedule %s (several stages per rank) does not run with %s yet",
                 ppdl_schedule_name(o->schedule), what);
    agree_or_end_job(what != NULL, err, 2);
}

/* micro-batches of copy q of k: j < M with j mod k == q (copy 0 has the most) */
static int copy_micro_batches(int M, int k, int q) { return q < M ? (M - q + k - 1) / k : 0; }

/* every position's lists of copy q (M_q micro-batches), built and proven; 0, or -1
 * with the reason in err */
static int build_copy(run *r, int N, int v, int Mq, ppdl_rank_schedule *all, char *err, size_t errlen)
{
    const options *o = &r->o;
    /* zb-v: ordered by the passes' times where rank 0 knew them (run_plan.c) */
    if (ppdl_schedule_build_ranks_timed(o->schedule, N, v, Mq, r->pass_ticks ? &r->pass_times : NULL, all, err,
                                        errlen))
        return -1;
    if (ppdl_schedule_check_ranks(N, v, Mq, all, err, errlen)) {
        char why[PPDL_ERR_LEN];
        snprintf(why, sizeof why, "schedule %s with %d ranks, %d stages each, %d micro-batches failed its check: %s",
                 ppdl_schedule_name(o->schedule), N, v, Mq, err);
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

/* copy q runs micro-batches q, q+k, ..: its lists' micro-batch i is q + i*k */
static void map_copy_micro_batches(ppdl_rank_schedule *rs, int k, int q)
{
    for (int c = 0; c < rs->n_stages; c++)
        for (int i = 0; i < rs->lists[c].n; i++)
            if (rs->lists[c].ops[i].mb >= 0) rs->lists[c].ops[i].mb = q + rs->lists[c].ops[i].mb * k;
}

/* stage s's memory, predicted from its op list */
static ppdl_mem_prediction predict_stage(const run *r, int s, const ppdl_op_list *ol)
{
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    return ppdl_runtime_predict_memory(&r->model, ps->first, ps->last, r->o.micro_batch_size,
                                       ppdl_schedule_max_in_flight(ol), ppdl_runtime_inbox_size(ol),
                                       ppdl_schedule_max_pending_weight(ol), ps->recompute, s == 0,
                                       s == r->plan.S - 1, r->o.precision == PPDL_PREC_BF16);
}

/* After the plan is known: this rank's stages, every rank's schedule built and proven
 * (each rank checks all of them, as for the other schedules), and each stage's memory
 * predicted from its own list. A plan of k copies (plan/plan.h) runs the chunked
 * schedule on each copy's N ranks with its share of the micro-batches. */
void run_chunks_plan(run *r)
{
    const options *o = &r->o;
    const ppdl_plan *plan = &r->plan;
    int v = ppdl_plan_chunks(plan), k = ppdl_plan_chunk_replicas(plan), N = r->n_ranks / k, M = (int)o->micro_batches;
    int q = r->replica;
    char err[PPDL_ERR_LEN] = "";
    const char *from = o->plan_mode == PLAN_FILE ? o->plan : "the plan";
    snprintf(err, sizeof err, "%s holds %d stages per rank: it runs with --schedule interleaved or zb-v, not %s",
             from, v, ppdl_schedule_name(o->schedule));
    agree_or_end_job(!ppdl_schedule_chunked(o->schedule), err, 2);
    snprintf(err, sizeof err, "the plan uses %d of the %d ranks: a plan with several stages per rank must use "
             "every rank", ppdl_plan_ranks_used(plan), r->n_ranks);
    agree_or_end_job(ppdl_plan_ranks_used(plan) != r->n_ranks, err, 2);
    PPDL_CHECK(v <= PPDL_MAX_CHUNKS, "%d stages per rank: at most %d", v, PPDL_MAX_CHUNKS);
    /* the schedule's order (whatever the ranks' numbers): round-robin, or the V */
    int v_order = o->schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN;
    snprintf(err, sizeof err, "%s: its stages do not follow --schedule %s's order (%s)", from,
             ppdl_schedule_name(o->schedule), v_order == PPDL_CHUNKS_V ? "stage 2N-1-s on the rank of stage s"
                                                                       : "stage s on the rank of stage s mod N");
    agree_or_end_job(plan->S != v * N || !ppdl_plan_chunk_order_is(plan, v_order), err, 2);
    /* this rank's position in the schedule: the stage among the first N it runs (in its copy) */
    int pos = 0;
    while (pos < N && ranks_of(&plan->stages[pos])[q] != r->rank) pos++;
    PPDL_CHECK(pos < N, "rank %d runs none of the plan's first %d stages", r->rank, N);
    refuse_unsupported(r);
    /* every copy's lists are proven (they differ in their micro-batch counts only);
     * the memory is predicted from copy 0's, which holds the most, and this rank's from
     * its own copy's */
    ppdl_rank_schedule *copy0 = ppdl_xcalloc((size_t)N, sizeof *copy0);
    ppdl_rank_schedule *mine = q == 0 ? copy0 : ppdl_xcalloc((size_t)N, sizeof *mine);
    ppdl_rank_schedule *other = ppdl_xcalloc((size_t)N, sizeof *other);
    int bad = 0;
    for (int c = 0; c < k && !bad; c++) {
        ppdl_rank_schedule *to = c == 0 ? copy0 : c == q ? mine : other;
        bad = build_copy(r, N, v, copy_micro_batches(M, k, c), to, err, sizeof err) != 0;
        for (int p = 0; p < N && to == other; p++) ppdl_rank_schedule_free(&other[p]);
    }
    free(other);
    agree_or_end_job(bad, err, 2);
    int stages[PPDL_MAX_CHUNKS];
    r->n_local = ppdl_plan_stages_of_rank(plan, r->rank, stages, PPDL_MAX_CHUNKS);
    PPDL_CHECK(r->n_local == v && stages[0] == r->local[0].stage, "rank %d holds %d stages of the plan, expected %d",
               r->rank, r->n_local, v);
    for (int c = 1; c < r->n_local; c++) r->local[c].stage = stages[c];
    for (int p = 0; p < N; p++)
        for (int j = 0; j < copy0[p].n_stages; j++) {
            int s = copy0[p].stages[j];
            r->pred[s] = predict_stage(r, s, &copy0[p].lists[j]);
            r->plan.stages[s].mem_bytes = r->pred[s].cost_model;
        }
    /* this rank's: the sum over its stages */
    memset(&r->pred_own, 0, sizeof r->pred_own);
    for (int j = 0; j < mine[pos].n_stages; j++) {
        ppdl_mem_prediction pr = predict_stage(r, mine[pos].stages[j], &mine[pos].lists[j]);
        r->pred_own.params_optimizer += pr.params_optimizer;
        r->pred_own.stash += pr.stash;
        r->pred_own.weight_keep += pr.weight_keep;
        r->pred_own.buffers += pr.buffers;
        r->pred_own.cost_model += pr.cost_model;
        r->pred_own.total += pr.total;
    }
    r->pred_own_full = r->pred_own; /* no advice to recompute: the limit is the plan's */
    r->rs = mine[pos];
    map_copy_micro_batches(&r->rs, k, q);
    for (int p = 0; p < N; p++) {
        if (p != pos) ppdl_rank_schedule_free(&mine[p]);
        if (q != 0) ppdl_rank_schedule_free(&copy0[p]);
    }
    if (q != 0) free(copy0);
    free(mine);
    /* the replicas of each of this rank's stages sum on a communicator of their own
     * (the first stage's is run_plan.c's replica_comm); collective over the job, every
     * rank holding v stages */
    for (int c = 1; c < r->n_local; c++) {
        r->local[c].replica_comm = MPI_COMM_NULL;
        if (k > 1) PPDL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, r->local[c].stage, q, &r->local[c].replica_comm));
    }
}

/* The weights and the runtime of this rank's c-th stage (c >= 1; the first is built
 * as every rank's stage is, run_stage.c), with the config of the first as a model. */
static void build_one(run *r, int c, const ppdl_runtime_cfg *first_cfg)
{
    const options *o = &r->o;
    int s = r->local[c].stage;
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    char err[PPDL_ERR_LEN] = "";
    run_local *l = &r->local[c];
    ppdl_stage *st = &l->st;
    ppdl_stage_alloc_params(st, &r->model, r->be, ps->first, ps->last);
    l->host = ppdl_xmalloc((st->n_params ? st->n_params : 1) * sizeof(float));
    ppdl_stage_alloc_optimizer(st);
    if (!r->resume) {
        int rc = ppdl_model_load_params(o->model, &r->model, ps->first, ps->last, l->host, err, sizeof err);
        agree_or_end_job(rc != 0, err, 1);
        ppdl_be_copy_h2d(r->be, st->params, l->host, st->n_params * sizeof(float));
    } else {
        /* weights and AdamW moments of this stage's layers (collective: every rank
         * reads its c-th stage at once) */
        host_state h;
        host_state_get(&h, st, 0);
        double s_read = 0;
        int rc = ppdl_ckpt_read_layers(r->resume, MPI_COMM_WORLD, &r->model, ps->first, ps->last, h.a[0], h.a[1],
                                       h.a[2], &s_read, err, sizeof err);
        agree_or_end_job(rc != 0, err, 1);
        host_state_put(&h, st);
        host_state_free(&h);
        r->resume_read_s += s_read;
    }
    ppdl_runtime_cfg cfg = *first_cfg;
    run_chunk_cfg(r, c, &cfg);
    l->rt = ppdl_runtime_create(st, &cfg, run_batch_source(&r->ds), &r->comm);
    if (r->resume) ppdl_runtime_set_adam_t(l->rt, (int)r->ck.adam_t);
}

void run_chunk_cfg(run *r, int c, ppdl_runtime_cfg *cfg)
{
    int s = r->local[c].stage, k = ppdl_plan_chunk_replicas(&r->plan);
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    /* the ranks of stage t's replicas (k of them: copy q's is ranks[q]) */
    const ppdl_plan_stage *prev = s > 0 ? &r->plan.stages[s - 1] : NULL;
    const ppdl_plan_stage *next = s + 1 < r->plan.S ? &r->plan.stages[s + 1] : NULL;
    cfg->stage = s;
    cfg->replica = r->replica;
    cfg->n_replicas = k;
    cfg->prev_ranks = prev ? ranks_of(prev) : NULL;
    cfg->n_prev = prev ? k : 0;
    cfg->next_ranks = next ? ranks_of(next) : NULL;
    cfg->n_next = next ? k : 0;
    cfg->replica_ranks = ranks_of(ps);
    cfg->replica_comm = k == 1 ? MPI_COMM_NULL : r->local[c].replica_comm;
    cfg->recompute = ps->recompute;
    /* tied embeddings: stage 0 and stage S-1 exchange their parts (pipe/tie.h), also
     * when one rank holds both (zb-v's rank 0): it sends to itself */
    int tie_other = !r->model.tie_embeddings ? -1 : s == 0 ? r->plan.S - 1 : s == r->plan.S - 1 ? 0 : -1;
    cfg->tie_peers = tie_other >= 0 ? ranks_of(&r->plan.stages[tie_other]) : NULL;
    cfg->n_tie_peers = tie_other >= 0 ? k : 0;
    cfg->ops = &r->rs.lists[c];
}

void run_chunks_build(run *r, const ppdl_runtime_cfg *first_cfg)
{
    for (int c = 1; c < r->n_local; c++) build_one(r, c, first_cfg);
}

void run_chunks_free(run *r)
{
    for (int c = 1; c < r->n_local; c++) {
        run_local *l = &r->local[c];
        if (l->rt) ppdl_runtime_destroy(l->rt);
        if (l->replica_comm != MPI_COMM_NULL) MPI_Comm_free(&l->replica_comm);
        if (l->st.be) ppdl_stage_free(&l->st);
        free(l->host);
        *l = (run_local){.replica_comm = MPI_COMM_NULL};
    }
}
