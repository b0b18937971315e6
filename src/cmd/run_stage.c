/* run_stage.c — this rank's stages (r->local: one, or the virtual stages of a chunked
 * plan): each one's layers' weights on its device (from the model file, or with the
 * AdamW moments from the checkpoint it resumes) and the runtime that runs its op list;
 * the checkpoint writer of them all. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_CUDA
#include "backend/cuda/nccl_p2p.h"
#include "backend/xfer.h"
#endif
#include "cmd/run.h"
#include "core/error.h"
#include "core/permute.h"
#include "core/util.h"
#include "io/model_io.h"
#include "pipe/p2p_choice.h"

#if HAVE_CUDA
/* --p2p nccl (asked, or taken by auto): the runtime's two objects, one per direction
 * of the messages, each a communicator per link it carries (backend/cuda/nccl_p2p.h
 * says why), collective over the job, and a replicated stage's all-reduce over its
 * replicas. Where NCCL cannot be used after all (ppdl_nccl_create refuses ranks that
 * share a GPU, which the choice has ruled out already), everything goes through MPI,
 * on every rank alike (create says NULL on all of them), and the header says why. */
static void open_nccl(run *r, const ppdl_runtime_cfg *cfg, int n_replicas)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_nccl_links act = {.to = cfg->next_ranks, .n_to = cfg->n_next, .from = cfg->prev_ranks, .n_from = cfg->n_prev};
    ppdl_nccl_links grad = {.to = cfg->prev_ranks, .n_to = cfg->n_prev, .from = cfg->next_ranks, .n_from = cfg->n_next};
    r->nccl_act = ppdl_nccl_create(MPI_COMM_WORLD, r->be, &act, err, sizeof err);
    if (r->nccl_act) r->nccl_grad = ppdl_nccl_create(MPI_COMM_WORLD, r->be, &grad, err, sizeof err);
    if (r->nccl_act && r->nccl_grad) {
        if (n_replicas > 1)
            r->nccl_replicas = ppdl_nccl_create(r->local[0].replica_comm, r->be, NULL, err, sizeof err);
        return; /* a stage's replicas share no GPU if no two ranks of the job do */
    }
    ppdl_nccl_destroy(r->nccl_act);
    r->nccl_act = NULL;
    r->p2p = PPDL_P2P_MPI;
    snprintf(r->p2p_why, sizeof r->p2p_why, "NCCL could not be used: %s", err);
}
#endif

void host_state_get(host_state *h, ppdl_stage *st, int from_device, MPI_Comm replicas)
{
    float *arena[3] = {st->params, st->adam_m, st->adam_v};
    size_t bytes = st->n_params * sizeof(float);
    int dev = ppdl_be_device_memory(st->be);
    for (int a = 0; a < 3; a++) {
        int sharded = a > 0 && st->opt_k > 1;
        h->own[a] = dev || sharded;
        h->a[a] = h->own[a] ? ppdl_xmalloc(bytes + 1) : arena[a];
        if (!from_device) continue;
        if (!sharded) {
            if (dev) ppdl_be_copy_d2h(st->be, h->a[a], arena[a], bytes);
            continue;
        }
        ppdl_be_copy_d2h(st->be, h->a[a] + st->opt_lo, arena[a], st->opt_n * sizeof(float));
        PPDL_CHECK(st->n_params <= INT_MAX, "layers %d-%d have too many parameters for one gather", st->first,
                   st->last);
        int *counts = ppdl_xmalloc((size_t)st->opt_k * sizeof(int)), *displs = ppdl_xmalloc((size_t)st->opt_k * sizeof(int));
        for (int r = 0; r < st->opt_k; r++) {
            displs[r] = (int)st->opt_bounds[r];
            counts[r] = (int)(st->opt_bounds[r + 1] - st->opt_bounds[r]);
        }
        PPDL_CHECK_MPI(MPI_Gatherv(st->opt_r == 0 ? MPI_IN_PLACE : h->a[a] + st->opt_lo, (int)st->opt_n, MPI_FLOAT,
                                   h->a[a], counts, displs, MPI_FLOAT, 0, replicas));
        free(counts);
        free(displs);
    }
}

void host_state_put(host_state *h, ppdl_stage *st)
{
    float *arena[3] = {st->params, st->adam_m, st->adam_v};
    for (int a = 0; a < 3; a++) {
        if (a > 0 && st->opt_k > 1)
            ppdl_be_copy_h2d(st->be, arena[a], h->a[a] + st->opt_lo, st->opt_n * sizeof(float));
        else if (h->own[a])
            ppdl_be_copy_h2d(st->be, arena[a], h->a[a], st->n_params * sizeof(float));
    }
}

void host_state_free(host_state *h)
{
    for (int a = 0; a < 3; a++)
        if (h->own[a]) free(h->a[a]);
}

long long data_position_of(const data_source *ds, long step)
{
    return ds->pos0 + (step - ds->step0) * (long long)ds->batch_size;
}

long long data_epoch_of(const data_source *ds, long step) { return 1 + data_position_of(ds, step) / ds->data->n; }

static int read_batch(void *ctx, long step, int mb, int b, void *inputs, int32_t *targets, char *err, size_t errlen)
{
    data_source *ds = ctx;
    long long pos = data_position_of(ds, step) + (long long)mb * b, n = ds->data->n;
    if (ds->shuffle < 0) return ppdl_data_read(ds->data, (long)(pos % n), b, inputs, targets, err, errlen);
    long *rows = ppdl_xmalloc((size_t)(b > 0 ? b : 1) * sizeof *rows);
    for (int i = 0; i < b; i++) {
        long long p = pos + i;
        rows[i] = (long)ppdl_permute(ppdl_permute_key((uint64_t)ds->shuffle, (uint64_t)(p / n)), (uint64_t)n,
                                     (uint64_t)(p % n));
    }
    int rc = ppdl_data_read_rows(ds->data, rows, b, inputs, targets, err, errlen);
    free(rows);
    return rc;
}

ppdl_batch_source run_batch_source(data_source *ds) { return (ppdl_batch_source){ds, read_batch}; }

int run_runtimes(const run *r, ppdl_runtime **rts)
{
    for (int c = 0; c < r->n_local; c++) rts[c] = r->local[c].rt;
    return r->n_local;
}

/* The checkpoint writer of this rank's stages: their layer ranges; a stage's replicas
 * after the first hold the same weights, only the first writes (the others' ranges
 * are empty) */
static ppdl_ckpt *ckpt_create(run *r, char *err, size_t errlen)
{
    int first[PPDL_MAX_CHUNKS], last[PPDL_MAX_CHUNKS];
    for (int c = 0; c < r->n_local; c++) {
        first[c] = r->plan.stages[r->local[c].stage].first;
        last[c] = r->replica == 0 ? r->plan.stages[r->local[c].stage].last : first[c] - 1;
    }
    return ppdl_ckpt_create_ranges(r->o.model, &r->model, r->n_local, first, last, err, errlen);
}

/* The weights of this rank's c-th stage on its device: from the model file, or with
 * their AdamW moments from the checkpoint resumed, wherever they were before
 * (collective: every rank reads its c-th stage at once; the seconds it took are added
 * to r->resume_read_s) */
static void load_local(run *r, int c)
{
    const options *o = &r->o;
    run_local *l = &r->local[c];
    const ppdl_plan_stage *ps = &r->plan.stages[l->stage];
    ppdl_stage *st = &l->st;
    char err[PPDL_ERR_LEN] = "";
    ppdl_stage_alloc_params(st, &r->model, r->be, ps->first, ps->last);
    l->host = ppdl_xmalloc((st->n_params ? st->n_params : 1) * sizeof(float));
    if (r->shard_optimizer) ppdl_stage_shard_optimizer(st, run_stage_replicas(r, l->stage), r->replica,
                                                        run_slice_weights(r, l->stage));
    ppdl_stage_alloc_optimizer(st);
    if (!r->resume) {
        int rc = ppdl_model_load_params(o->model, &r->model, ps->first, ps->last, l->host, err, sizeof err);
        agree_or_end_job(rc != 0, err, 1);
        ppdl_be_copy_h2d(r->be, st->params, l->host, st->n_params * sizeof(float));
        return;
    }
    host_state h;
    host_state_get(&h, st, 0, MPI_COMM_NULL);
    double read_s = 0;
    int rc = ppdl_ckpt_read_layers(r->resume, MPI_COMM_WORLD, &r->model, ps->first, ps->last, h.a[0], h.a[1],
                                   h.a[2], &read_s, err, sizeof err);
    agree_or_end_job(rc != 0, err, 1);
    host_state_put(&h, st);
    host_state_free(&h);
    r->resume_read_s += read_s;
}

/* Where this rank's c-th stage sits in the pipeline, into its runtime's config. A rank
 * of one stage gives the plan's neighbours and lets its runtime build its op list; a
 * rank of several gives each runtime its list and, for the k copies of a chunked
 * pipeline, every neighbour's k ranks (pipe/runtime.h cfg.ops). */
static void local_cfg(run *r, int c, ppdl_runtime_cfg *cfg)
{
    const ppdl_plan *plan = &r->plan;
    int s = r->local[c].stage, S = plan->S;
    const ppdl_plan_stage *ps = &plan->stages[s];
    const ppdl_plan_stage *prev = s > 0 ? &plan->stages[s - 1] : NULL;
    const ppdl_plan_stage *next = s + 1 < S ? &plan->stages[s + 1] : NULL;
    /* tied embeddings: stage 0 and stage S-1 exchange their parts (pipe/tie.h), also
     * when one rank holds both (zb-v's rank 0): it sends to itself */
    int tie_other = !r->model.tie_embeddings || S == 1 ? -1 : s == 0 ? S - 1 : s == S - 1 ? 0 : -1;
    const ppdl_plan_stage *tie = tie_other >= 0 ? &plan->stages[tie_other] : NULL;
    cfg->stage = s;
    cfg->replica = r->replica;
    cfg->recompute = ps->recompute;
    if (r->n_local == 1) {
        cfg->n_replicas = ps->n_replicas;
        cfg->prev_ranks = prev ? prev->ranks : NULL;
        cfg->n_prev = prev ? prev->n_replicas : 0;
        cfg->next_ranks = next ? next->ranks : NULL;
        cfg->n_next = next ? next->n_replicas : 0;
        cfg->replica_comm = ps->n_replicas > 1 ? r->local[c].replica_comm : MPI_COMM_NULL;
        cfg->tie_peers = tie ? tie->ranks : NULL;
        cfg->n_tie_peers = tie ? tie->n_replicas : 0;
        return;
    }
    int k = ppdl_plan_chunk_replicas(plan); /* every stage's replicas: copy q's is ranks[q] */
    cfg->n_replicas = k;
    cfg->prev_ranks = prev ? run_ranks_of(prev) : NULL;
    cfg->n_prev = prev ? k : 0;
    cfg->next_ranks = next ? run_ranks_of(next) : NULL;
    cfg->n_next = next ? k : 0;
    cfg->replica_ranks = run_ranks_of(ps);
    cfg->replica_comm = k == 1 ? MPI_COMM_NULL : r->local[c].replica_comm;
    cfg->tie_peers = tie ? run_ranks_of(tie) : NULL;
    cfg->n_tie_peers = tie ? k : 0;
    cfg->ops = &r->rs.lists[c];
}

void run_build_stage(run *r)
{
    const options *o = &r->o;
    const ppdl_plan_stage *ps = &r->plan.stages[r->local[0].stage];
    ppdl_backend *be = r->be;
    char err[PPDL_ERR_LEN] = "";
    ppdl_be_set_stage(be, r->local[0].stage);
    size_t mem_limit = 0;
    int rc = run_options_mem_limit(o->mem_limit, r->rank, &mem_limit, err, sizeof err);
    agree_or_end_job(rc != 0, err, 2);
    ppdl_be_set_limit(be, mem_limit);
    /* A stage that cannot fit is refused before anything is allocated, by every rank
     * together (status 3): an allocation past the limit later ends the job from one rank
     * alone (MPI_Abort), and srun then reports 137 (killed) instead of 3. The
     * prediction is the runtime's own (the report holds it, predicted_bytes, beside
     * the run's peak_bytes); the allocations keep their own check. */
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], fit[256];
    /* what would fit: full recompute (when this plan does not already), or this limit */
    double full = r->pred_own_full.total;
    /* the advice as a --mem-limit a user can paste: whole KiB, rounded up */
    size_t need_k = (size_t)ceil(r->pred_own.total / 1024), full_k = (size_t)ceil(full / 1024);
    if (full < r->pred_own.total && full <= (double)mem_limit)
        snprintf(fit, sizeof fit, "--recompute full would need %s and fit; or --mem-limit %zuK or more",
                 ppdl_fmt_bytes((size_t)full, b6, sizeof b6), need_k);
    else if (full < r->pred_own.total)
        snprintf(fit, sizeof fit, "even --recompute full needs %s; give --mem-limit %zuK or more (%zuK with full "
                 "recompute), more ranks to split the layers over, or a smaller micro-batch",
                 ppdl_fmt_bytes((size_t)full, b6, sizeof b6), need_k, full_k);
    else
        snprintf(fit, sizeof fit, "give --mem-limit %zuK or more, more ranks to split the layers over, or a smaller "
                 "micro-batch", need_k);
    snprintf(err, sizeof err, "rank %d, stage %d (layers %d-%d): the stage needs %s (parameters and AdamW %s, "
             "stashed activations %s, buffers %s), over the memory limit of %s (--mem-limit); %s", r->rank,
             r->local[0].stage, ps->first, ps->last, ppdl_fmt_bytes((size_t)r->pred_own.total, b1, sizeof b1),
             ppdl_fmt_bytes((size_t)r->pred_own.params_optimizer, b2, sizeof b2),
             ppdl_fmt_bytes((size_t)r->pred_own.stash, b3, sizeof b3),
             ppdl_fmt_bytes((size_t)r->pred_own.buffers, b4, sizeof b4), ppdl_fmt_bytes(mem_limit, b5, sizeof b5), fit);
    agree_or_end_job(mem_limit > 0 && r->pred_own.total > (double)mem_limit, err, 3);

    r->ds = (data_source){&r->data, o->batch_size, r->start_step, r->resume ? r->ck.data_position : 0, o->shuffle};
    ppdl_runtime_cfg base = {
        .schedule = o->schedule, .S = r->plan.S, .M = (int)o->micro_batches, .batch_size = (int)o->batch_size,
        .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->weight_decay,
        .record_events = o->record_events, .clip_grad_norm = o->clip_grad_norm,
        .decay_all = o->decay_all, .skip_nonfinite = o->skip_nonfinite, .papi = o->papi ? &r->papi : NULL,
        .pass_times = r->pass_ticks ? &r->pass_times : NULL,
    };
#if HAVE_CUDA
    if (r->p2p == PPDL_P2P_NCCL) { /* one stage per rank: its links */
        ppdl_runtime_cfg cfg = base;
        local_cfg(r, 0, &cfg);
        open_nccl(r, &cfg, cfg.n_replicas);
    }
#endif
    base.nccl_act = r->nccl_act;
    base.nccl_grad = r->nccl_grad;
    base.nccl_replicas = r->nccl_replicas;
    /* each stage's weights, then its runtime (collective: every rank builds its c-th
     * stage at once) */
    r->resume_read_s = 0;
    for (int c = 0; c < r->n_local; c++) {
        run_local *l = &r->local[c];
        load_local(r, c);
        ppdl_runtime_cfg cfg = base;
        local_cfg(r, c, &cfg);
        l->rt = ppdl_runtime_create(&l->st, &cfg, run_batch_source(&r->ds), &r->comm);
        if (r->resume) ppdl_runtime_set_adam_t(l->rt, (int)r->ck.adam_t);
    }
    if (r->resume)
        PPDL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &r->resume_read_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    if (o->papi && r->rank == 0 && r->papi.note[0]) printf("--papi: %s\n", r->papi.note);
    /* checkpoints */
    run_ctl *ctl = &r->ctl;
    ctl->ckpt_step = r->resume ? r->start_step : -1;
    ctl->log = json_array();
    if (o->checkpoint) {
        ctl->ckpt = ckpt_create(r, err, sizeof err);
        agree_or_end_job(ctl->ckpt == NULL, err, 1);
        ctl->plan_json = ppdl_plan_to_json(&r->plan);
        /* before the first checkpoint, guess its time pessimistically: 50 MB/s for the
         * weights and moments, plus a second */
        ctl->ckpt_est_s = 1.0 + 3.0 * 4 * (double)ppdl_model_param_count(&r->model) / 50e6;
    }
}

void run_free_stage(run *r)
{
    for (int c = 0; c < r->n_local; c++)
        if (r->local[c].rt) ppdl_runtime_destroy(r->local[c].rt);
#if HAVE_CUDA
    ppdl_nccl_destroy(r->nccl_act); /* after the runtimes: their last transfers are done */
    ppdl_nccl_destroy(r->nccl_grad);
    ppdl_nccl_destroy(r->nccl_replicas);
    r->nccl_act = r->nccl_grad = r->nccl_replicas = NULL;
#endif
    for (int c = 0; c < r->n_local; c++) {
        run_local *l = &r->local[c];
        if (l->st.be) ppdl_stage_free(&l->st);
        free(l->host);
        if (l->replica_comm != MPI_COMM_NULL) PPDL_CHECK_MPI(MPI_Comm_free(&l->replica_comm));
        *l = (run_local){.replica_comm = MPI_COMM_NULL};
    }
    r->n_local = 0;
    ppdl_rank_schedule_free(&r->rs);
    free(r->pred);
    r->pred = NULL;
    free(r->pass_ticks);
    r->pass_ticks = NULL;
    ppdl_ckpt_destroy(r->ctl.ckpt);
    free(r->ctl.plan_json);
    json_decref(r->ctl.log);
    memset(&r->ctl, 0, sizeof r->ctl);
}
