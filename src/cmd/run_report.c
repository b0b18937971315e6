/* run_report.c — what rank 0 tells the user: the header and the plan table before the
 * first step, the resume point, and at the end the closing line, the memory table and
 * the --report JSON (docs/formats.md, "The --report JSON"). */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#endif
#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "pipe/p2p_choice.h"
#include "sched/schedule.h"

/* one row of the plan table: the stage's ranks ("0" or "0,1") and its layers' kinds,
 * each marked with its recompute option */
static void plan_row(const run *r, int s)
{
    const ppdl_plan_stage *p = &r->plan.stages[s];
    char kinds[256] = "";
    size_t len = 0;
    for (int l = p->first; l <= p->last && len < sizeof kinds - 40; l++) {
        int option = p->recompute[l - p->first];
        len += (size_t)snprintf(kinds + len, sizeof kinds - len, "%s%s%s", l > p->first ? " " : "",
                                r->model.layers[l].kind->name,
                                option == PPDL_RC_FULL ? "(rc)" : option == PPDL_RC_SELECTIVE ? "(sel)" : "");
    }
    char mem[32], ranks[64] = "";
    size_t rl = 0;
    for (int i = 0; i < p->n_replicas && rl + 12 < sizeof ranks; i++)
        rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d", i ? "," : "", p->ranks[i]);
    printf("  %5d  %4s  %4d-%-5d %10s             %s\n", s, ranks, p->first, p->last,
           ppdl_fmt_bytes((size_t)r->pred[s].total, mem, sizeof mem), kinds);
}

/* the job's machines: the cluster's, else those found without a probe (run_setup.c) */
static const ppdl_hosts *job_hosts(const run *r)
{
    return r->have_cluster ? &r->cluster.hosts : &r->own_hosts;
}

/* One line when a host runs more of the job's ranks than it has cores (the host with
 * the most ranks per core is named). */
static void warn_shared_cores(const run *r)
{
    const ppdl_hosts *h = job_hosts(r);
    if (!ppdl_hosts_oversubscribed(h, r->n_ranks)) return;
    int *cnt = ppdl_xcalloc((size_t)h->n, sizeof(int)), w = 0;
    for (int q = 0; q < r->n_ranks; q++) cnt[h->of_rank[q]]++;
    for (int i = 1; i < h->n; i++)
        if ((double)cnt[i] / h->cores[i] > (double)cnt[w] / h->cores[w]) w = i;
    printf("warning: %d ranks share the %d core%s of host %s: ranks that compute at once slow each other down, and "
           "fewer ranks may train as fast or faster; %s\n", cnt[w], h->cores[w], h->cores[w] == 1 ? "" : "s",
           h->name[w][0] ? h->name[w] : "?",
           r->o.plan_mode == PLAN_AUTO ? "the plan was chosen for the shared cores"
                                       : "--plan auto (the default) chooses a plan for them");
    free(cnt);
}

/* How the plan came about, one line: "planned in 0.84 s: probe 0.12 s, profile 0.61 s,
 * solve 0.11 s", saying what a file replaced ("profile skipped (--costs c.json)"),
 * or for a plan file what ran anyway. Nothing for uniform and dp. */
static void print_plan_timing(const run *r)
{
    const options *o = &r->o;
    char probe[160], prof[160];
    if (r->probe_s >= 0) snprintf(probe, sizeof probe, "probe %.2f s", r->probe_s);
    else if (o->cluster) snprintf(probe, sizeof probe, "probe skipped (--cluster %s)", o->cluster);
    else snprintf(probe, sizeof probe, "no probe");
    if (r->profile_s >= 0) snprintf(prof, sizeof prof, "profile %.2f s", r->profile_s);
    else if (o->costs) snprintf(prof, sizeof prof, "profile skipped (--costs %s)", o->costs);
    else snprintf(prof, sizeof prof, "no profile");
    double total = fmax(r->probe_s, 0) + fmax(r->profile_s, 0) + fmax(r->solve_s, 0) + fmax(r->trials_s, 0);
    char trials[64] = "";
    if (r->trials_s >= 0) snprintf(trials, sizeof trials, ", trials %.2f s", r->trials_s);
    if (o->plan_mode == PLAN_AUTO)
        printf("planned in %.2f s: %s, %s, solve %.2f s%s\n", total, probe, prof, r->solve_s, trials);
    else if (o->plan_mode == PLAN_FILE)
        printf("plan read from %s: nothing solved; %s%s, %s%s%s\n", o->plan, probe,
               r->probe_s >= 0 ? " (for --report or --cluster-out)" : "", prof,
               r->profile_s >= 0 ? " (for --costs-out)" : "", trials);
}

/* a zero-bubble schedule: what its passes were ordered by (run_plan.c share_pass_times) */
static void print_pass_order(const run *r)
{
    int S = r->plan.S;
    if (S < 2 || !ppdl_schedule_splits_backward(r->o.schedule)) return;
    if (!r->pass_ticks) {
        printf("passes of %s ordered in unit time (F = B = W: no costs known, or the timed orders refused)\n",
               ppdl_schedule_name(r->o.schedule));
        return;
    }
    printf("passes of %s ordered by their times (rank 0's costs), per micro-batch in ms, F/B/W:",
           ppdl_schedule_name(r->o.schedule));
    for (int s = 0; s < S && s < 8; s++)
        printf(" %s%.2f/%.2f/%.2f", s ? "| " : "", r->pass_ticks[s] / 1e3, r->pass_ticks[S + s] / 1e3,
               r->pass_ticks[2 * S + s] / 1e3);
    printf("%s\n", S > 8 ? " | ..." : "");
}

void run_print_header(const run *r)
{
    if (r->rank != 0) return;
    const options *o = &r->o;
    const ppdl_model *m = &r->model;
    char pb[32];
    printf("ppdl %s: %s model %s, %d layers, %.2f M parameters (%s%s); data %s, %ld samples\n", PACKAGE_VERSION,
           m->family, o->model, m->L, ppdl_model_param_count(m) / 1e6,
           ppdl_fmt_bytes(ppdl_model_param_count(m) * sizeof(float), pb, sizeof pb),
           m->tie_embeddings ? ", embeddings tied" : "", o->data, r->data.n);
    printf("%d rank%s, schedule %s, batch %ld = %ld micro-batches of %d, backend %s, %ld thread%s/rank, %s wait\n",
           r->n_ranks, r->n_ranks > 1 ? "s" : "", ppdl_schedule_name(o->schedule), o->batch_size, o->micro_batches,
           o->micro_batch_size, ppdl_be_name(r->be), r->threads, r->threads > 1 ? "s" : "",
           r->comm.yield ? "yielding" : "blocking");
    if (r->backend_why[0]) printf("backend %s (--backend auto: %s)\n", ppdl_be_name(r->be), r->backend_why);
#if HAVE_CUDA
    if (!strcmp(ppdl_be_name(r->be), "cuda")) { /* rank 0's GPU: bus id, how many ranks share it */
        char gpu[384];
        printf("gpu of rank 0: %s\n", ppdl_cuda_describe(r->be, gpu, sizeof gpu));
    }
#endif
    printf("p2p %s (%s)\n", ppdl_p2p_name(r->p2p), r->p2p_why);
    if (o->precision == PPDL_PREC_BF16) printf("precision bf16 (%s)\n", ppdl_be_bf16_gemm_name(r->be));
    if (r->shard_optimizer)
        printf("optimizer state sharded across each stage's replicas (--shard-optimizer on)\n");
    if (r->schedule_why[0]) printf("schedule %s (--schedule auto, %s)\n", ppdl_schedule_name(o->schedule), r->schedule_why);
    print_pass_order(r);
    warn_shared_cores(r);
    if (o->shuffle >= 0)
        printf("data order: shuffled, a new permutation of the %ld samples each epoch from --shuffle %lld\n",
               r->data.n, o->shuffle);
    if (o->val_data && r->eval_batches * o->batch_size > r->val_data.n)
        printf("note: --eval-batches %ld x --batch-size %ld is more than the %ld samples of %s: an evaluation "
               "repeats samples\n", r->eval_batches, o->batch_size, r->val_data.n, o->val_data);
    if (o->batch_size > r->data.n)
        printf("note: --batch-size %ld is more than the %ld samples of %s: every step repeats samples (step k "
               "takes samples kB ... kB+B-1, mod %ld)\n", o->batch_size, r->data.n, o->data, r->data.n);
    char kind[96], line[512];
    printf("plan (%s%s%s): %s\n  stage  rank  layers     memory (predicted)      kinds (rc: full recompute, sel: "
           "selective)\n", r->plan.method, o->plan_mode == PLAN_FILE ? ", from " : "",
           o->plan_mode != PLAN_FILE               ? ""
           : o->plan_files && r->trial_chosen >= 0 ? r->trials[r->trial_chosen].label
                                                   : o->plan,
           ppdl_plan_kind(&r->plan, kind, sizeof kind));
    for (int s = 0; s < r->plan.S; s++) plan_row(r, s);
    if (r->plan.predicted_iter_ms > 0 && r->simulated_ms > 0)
        printf("predicted step: %.2f ms by the cost model, %.2f ms by the simulator (bottleneck %.2f ms)\n",
               r->plan.predicted_iter_ms, r->simulated_ms, r->plan.bottleneck_ms);
    else if (r->plan.predicted_iter_ms > 0)
        printf("predicted step: %.2f ms by the cost model (bottleneck %.2f ms)\n", r->plan.predicted_iter_ms,
               r->plan.bottleneck_ms);
    if (o->plan_mode == PLAN_FILE && r->file_predicted_ms < 0) {
        printf("  (predicted again for this run, from %s and %s: a plan file's own prediction is for the costs, "
               "network and micro-batches it was made with)\n",
               o->costs ? o->costs : "the profile", o->cluster ? o->cluster : "the probe");
    } else if (o->plan_mode == PLAN_FILE) {
        printf("predicted step: none for this run");
        if (r->file_predicted_ms > 0)
            printf(" (the file's %.2f ms was for the costs, network and micro-batches it was made with)",
                   r->file_predicted_ms);
        printf(": give --costs FILE (or --costs-out) and --cluster FILE (or --report) to predict this plan for "
               "this run\n");
    }
    if (r->shared.active) printf("%s\n", ppdl_shared_choice_line(&r->shared, line, sizeof line));
    if (r->trial_chosen >= 0 && o->plan_files)
        printf("plan trials: %s (%s) measured fastest of %d plan files (%.2f ms a step) and runs\n",
               r->trials[r->trial_chosen].label, r->trials[r->trial_chosen].kind, r->n_trials,
               r->trials[r->trial_chosen].measured_ms);
    else if (r->trial_chosen > 0)
        printf("plan trials: %s measured fastest (%.2f ms a step) and runs; the planner's choice, %s, measured "
               "%.2f ms\n", r->trials[r->trial_chosen].kind, r->trials[r->trial_chosen].measured_ms, r->trials[0].kind,
               r->trials[0].measured_ms);
    else if (r->trial_chosen == 0)
        printf("plan trials: the planner's choice measured fastest of %d (%.2f ms a step)\n", r->n_trials,
               r->trials[0].measured_ms);
    if (r->trials_note[0]) /* none (skipped), or fewer than all: why */
        printf("%s\n", r->trials_note);
    print_plan_timing(r);
    if (r->resume) {
        const ppdl_ckpt_info *ck = &r->ck;
        printf("resumed from %s: %lld steps done (AdamW step %lld, data position %lld), written by %lld rank%s "
               "(%s); read in %.2f s (the slowest rank)\n", r->resume, ck->step, ck->adam_t, ck->data_position,
               ck->ranks, ck->ranks > 1 ? "s" : "", ck->schedule, r->resume_read_s);
        if (ck->batch_size != o->batch_size)
            printf("note: the checkpoint ran with --batch-size %lld, now %ld: the data goes on from sample %lld\n",
                   ck->batch_size, o->batch_size, ck->data_position);
        if (ck->lr != o->lr || ck->beta1 != o->beta1 || ck->beta2 != o->beta2 || ck->eps != o->eps ||
            ck->weight_decay != o->weight_decay)
            printf("note: AdamW's hyperparameters differ from the checkpoint's (lr %g, betas %g %g, eps %g, "
                   "weight decay %g): the command line's are used\n", ck->lr, ck->beta1, ck->beta2, ck->eps,
                   ck->weight_decay);
        const ppdl_lr_schedule *ls = &o->lr_sched;
        /* decay steps, floor and fraction matter only to a decaying schedule */
        if (strcmp(ck->lr_schedule, ppdl_lr_name(ls->kind)) || ck->warmup != ls->warmup ||
            ck->clip_grad_norm != o->clip_grad_norm ||
            (ls->kind != PPDL_LR_CONSTANT && (ck->decay_steps != ls->decay_steps || ck->min_lr != ls->min_lr ||
                                              ck->decay_fraction != ls->decay_fraction)))
            printf("note: the learning-rate schedule or clipping differs from the checkpoint's (%s, warmup %lld, "
                   "decay steps %lld, min lr %g, decay fraction %g, clip %g): the command line's is used\n",
                   ck->lr_schedule, ck->warmup, ck->decay_steps, ck->min_lr, ck->decay_fraction, ck->clip_grad_norm);
        if (strcmp(ck->precision, run_precision_name(o->precision)))
            printf("note: the checkpoint trained with --precision %s, now %s: its fp32 weights and AdamW state go "
                   "on in %s\n", ck->precision, run_precision_name(o->precision), run_precision_name(o->precision));
        if (ck->shuffle != o->shuffle)
            printf("note: the data order differs from the checkpoint's (%s%lld): the command line's is used\n",
                   ck->shuffle < 0 ? "in order" : "--shuffle ", ck->shuffle < 0 ? 0LL : ck->shuffle);
    }
    fflush(stdout);
}

/* the mean step and its rates over the timed steps */
typedef struct run_rates {
    double mean_ms, samples_per_s, gflops, bubble;
} run_rates;

static run_rates rates_of(const run *r)
{
    const train_totals *t = &r->totals;
    run_rates x;
    x.mean_ms = t->timed_steps ? t->total_ms / t->timed_steps : 0;
    x.samples_per_s = x.mean_ms > 0 ? r->o.batch_size / (x.mean_ms / 1e3) : 0;
    x.gflops = x.mean_ms > 0 ? r->flops_step / (x.mean_ms / 1e3) / 1e9 : 0;
    x.bubble = t->timed_steps ? t->sum_bubble / t->timed_steps : 0;
    return x;
}

/* rank q's memory predicted before the run: its stage's, or the sum over the stages it
 * holds (a chunked plan: interleaved, zb-v) */
static ppdl_mem_prediction rank_prediction(const run *r, int q)
{
    int own[PPDL_MAX_CHUNKS];
    int n = ppdl_plan_stages_of_rank(&r->plan, q, own, PPDL_MAX_CHUNKS);
    ppdl_mem_prediction sum = {0};
    for (int c = 0; c < n && c < PPDL_MAX_CHUNKS; c++) {
        const ppdl_mem_prediction *p = &r->pred[own[c]]; /* replica 0's */
        /* rank q's own slice of a sharded state, where it is not replica 0 */
        double extra = 0;
        if (ppdl_plan_chunks(&r->plan) == 1) {
            const ppdl_plan_stage *ps = &r->plan.stages[own[c]];
            const int *ranks = run_ranks_of(ps);
            for (int j = 1; j < ps->n_replicas; j++)
                if (ranks[j] == q) extra = run_slice_extra_bytes(r, own[c], j);
        }
        sum.params_optimizer += p->params_optimizer + extra;
        sum.cost_model += extra;
        sum.total += extra;
        sum.stash += p->stash;
        sum.weight_keep += p->weight_keep;
        sum.tie += p->tie;
        sum.cost_model += p->cost_model;
        sum.buffers += p->buffers;
        sum.total += p->total;
    }
    return sum;
}


void run_print_closing(const run *r)
{
    run_rates x = rates_of(r);
    long done = r->ctl.stopped ? r->ctl.ckpt_step : r->o.steps;
    /* what the rates average: the steps after this job's first, or its only step */
    int only_one = r->totals.timed_steps == 1 && done - r->start_step <= 1;
    printf("done: %ld step%s, final loss %.4f, %.1f ms/step, %.1f samples/s, %.2f GFLOP/s, bubble %.1f%% (%s)\n",
           done, done == 1 ? "" : "s", r->totals.final_loss, x.mean_ms, x.samples_per_s, x.gflops, 100 * x.bubble,
           only_one ? "one step, its warm-up included" : "steps after the first");
    /* a split backward's W buffers get a column where the schedule has them */
    int split = ppdl_schedule_splits_backward(r->o.schedule);
    printf("memory per rank (measured peak vs predicted before the run):\n"
           "  rank  stage       peak  predicted     params  optimizer      stash%s    buffers\n",
           split ? " kept for W" : "");
    for (int q = 0; q < r->n_ranks; q++) {
        char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
        const rank_summary *s = &r->all[q];
        printf("  %4d  %5d  %9s  %9s  %9s  %9s  %9s", q, (int)s->stage, ppdl_fmt_bytes((size_t)s->peak_bytes, a, sizeof a),
               ppdl_fmt_bytes((size_t)rank_prediction(r, q).total, f, sizeof f),
               ppdl_fmt_bytes((size_t)s->params_bytes, b, sizeof b),
               ppdl_fmt_bytes((size_t)s->optimizer_bytes, c, sizeof c), ppdl_fmt_bytes((size_t)s->stash_bytes, d, sizeof d));
        if (split) printf("  %10s", ppdl_fmt_bytes((size_t)s->weight_keep_bytes, g, sizeof g));
        printf("  %9s\n", ppdl_fmt_bytes((size_t)s->buffer_bytes, e, sizeof e));
    }
}

/* the report's "papi" section: what was asked, what counted, and per rank and kind the
 * PAPI real time and the counts (gathered as doubles, run_finish.c) */
static json_t *papi_report(const ppdl_papi *p, const double *all, int n_ranks, const char *requested)
{
    json_t *j = json_object();
    json_object_set_new(j, "requested", json_string(requested));
    json_t *ev = json_array();
    for (int e = 0; e < p->n_events; e++) json_array_append_new(ev, json_string(p->names[e]));
    json_object_set_new(j, "events", ev);
    json_object_set_new(j, "note", json_string(p->note));
    json_t *ranks = json_array();
    for (int r = 0; r < n_ranks; r++) {
        json_t *jr = json_object();
        json_object_set_new(jr, "rank", json_integer(r));
        for (int k = 0; k < PPDL_PAPI_N_KINDS; k++) {
            const double *v = all + (size_t)r * PPDL_PAPI_N_KINDS * (1 + PPDL_PAPI_MAX_EVENTS) +
                              (size_t)k * (1 + PPDL_PAPI_MAX_EVENTS);
            json_t *jk = json_object();
            json_object_set_new(jk, "real_ns", json_integer((json_int_t)v[0]));
            for (int e = 0; e < p->n_events; e++) json_object_set_new(jk, p->names[e], json_integer((json_int_t)v[1 + e]));
            json_object_set_new(jr, ppdl_papi_kind_name(k), jk);
        }
        json_array_append_new(ranks, jr);
    }
    json_object_set_new(j, "ranks", ranks);
    return j;
}

static json_t *memory_report(const run *r)
{
    json_t *mem = json_array();
    for (int q = 0; q < r->n_ranks; q++) {
        const rank_summary *s = &r->all[q];
        ppdl_mem_prediction own = rank_prediction(r, q);
        const ppdl_mem_prediction *pr = &own;
        json_t *jm = json_object();
        json_object_set_new(jm, "rank", json_integer(q));
        json_object_set_new(jm, "stage", json_integer((int)s->stage));
        json_object_set_new(jm, "peak_bytes", json_integer((json_int_t)s->peak_bytes));
        json_object_set_new(jm, "predicted_bytes", json_integer((json_int_t)pr->total));
        json_object_set_new(jm, "cost_model_bytes", json_integer((json_int_t)pr->cost_model));
        json_object_set_new(jm, "predicted_buffer_bytes", json_integer((json_int_t)pr->buffers));
        json_object_set_new(jm, "params_bytes", json_integer((json_int_t)s->params_bytes));
        json_object_set_new(jm, "optimizer_bytes", json_integer((json_int_t)s->optimizer_bytes));
        json_object_set_new(jm, "stash_bytes", json_integer((json_int_t)s->stash_bytes));
        json_object_set_new(jm, "buffer_bytes", json_integer((json_int_t)s->buffer_bytes));
        json_object_set_new(jm, "weight_keep_bytes", json_integer((json_int_t)s->weight_keep_bytes));
        json_object_set_new(jm, "predicted_weight_keep_bytes", json_integer((json_int_t)pr->weight_keep));
        json_object_set_new(jm, "allocations", json_integer((json_int_t)s->allocations));
        json_array_append_new(mem, jm);
    }
    return mem;
}

/* per rank: where the time of all steps went; communication that is not waited for
 * overlaps compute, so "other" is bookkeeping and data loading */
static json_t *breakdown_report(const run *r)
{
    json_t *bd = json_array();
    for (int q = 0; q < r->n_ranks; q++) {
        const rank_summary *s = &r->all[q];
        json_t *jb = json_object();
        json_object_set_new(jb, "rank", json_integer(q));
        json_object_set_new(jb, "stage", json_integer((int)s->stage));
        json_object_set_new(jb, "forward_ms", json_real(s->forward_ms));
        json_object_set_new(jb, "backward_ms", json_real(s->backward_ms));
        json_object_set_new(jb, "backward_weight_ms", json_real(s->backward_weight_ms));
        json_object_set_new(jb, "agree_ms", json_real(s->agree_ms));
        json_object_set_new(jb, "recompute_ms", json_real(s->recompute_ms));
        json_object_set_new(jb, "optimizer_ms", json_real(s->optimizer_ms));
        json_object_set_new(jb, "wait_ms", json_real(s->wait_ms));
        json_object_set_new(jb, "comm_ms", json_real(s->comm_ms));
        json_object_set_new(jb, "message_bytes", json_real(s->message_bytes));
        json_object_set_new(jb, "step_ms", json_real(s->step_ms));
        double accounted = s->forward_ms + s->backward_ms + s->recompute_ms + s->optimizer_ms + s->wait_ms + s->comm_ms;
        json_object_set_new(jb, "other_ms", json_real(s->step_ms - accounted));
        json_object_set_new(jb, "checkpoint_ms", json_real(s->checkpoint_ms));
        json_array_append_new(bd, jb);
    }
    return bd;
}

void run_write_report(run *r)
{
    const options *o = &r->o;
    run_rates x = rates_of(r);
    json_t *rep = json_object();
    json_object_set_new(rep, "ppdl_version", json_string(PACKAGE_VERSION));
    json_object_set_new(rep, "model", json_string(o->model));
    json_object_set_new(rep, "family", json_string(r->model.family));
    json_object_set_new(rep, "parameters", json_integer((json_int_t)ppdl_model_param_count(&r->model)));
    json_object_set_new(rep, "tie_embeddings", json_boolean(r->model.tie_embeddings)); /* parameters count it once */
    json_object_set_new(rep, "ranks", json_integer(r->n_ranks));
    json_object_set_new(rep, "schedule", json_string(ppdl_schedule_name(o->schedule)));
    json_object_set_new(rep, "micro_batches", json_integer(o->micro_batches));
    json_object_set_new(rep, "batch_size", json_integer(o->batch_size));
    json_object_set_new(rep, "threads", json_integer(r->threads));
    json_object_set_new(rep, "backend", json_string(ppdl_be_name(r->be)));
    json_object_set_new(rep, "p2p", json_string(ppdl_p2p_name(r->p2p)));
    json_object_set_new(rep, "precision", json_string(run_precision_name(o->precision)));
    json_object_set_new(rep, "shard_optimizer", json_string(r->shard_optimizer ? "on" : "off"));
    json_object_set_new(rep, "seed", json_integer(o->seed));
    const ppdl_lr_schedule *ls = &o->lr_sched;
    json_object_set_new(rep, "lr_schedule",
                        json_pack("{s:s, s:f, s:f, s:I, s:I, s:f}", "kind", ppdl_lr_name(ls->kind), "lr", ls->lr,
                                  "min_lr", ls->min_lr, "warmup", (json_int_t)ls->warmup, "decay_steps",
                                  (json_int_t)ls->decay_steps, "decay_fraction", ls->decay_fraction));
    json_object_set_new(rep, "weight_decay_on", json_string(o->decay_all ? "all" : "2-d"));
    json_object_set_new(rep, "clip_grad_norm", o->clip_grad_norm > 0 ? json_real(o->clip_grad_norm) : json_null());
    json_object_set_new(rep, "shuffle", o->shuffle >= 0 ? json_integer((json_int_t)o->shuffle) : json_null());
    if (o->val_data) {
        json_object_set_new(rep, "validation", json_pack("{s:s, s:I, s:I, s:I, s:f}", "data", o->val_data, "batches",
                                                          (json_int_t)r->eval_batches, "every",
                                                          (json_int_t)o->eval_every, "samples", (json_int_t)r->val_data.n,
                                                          "eval_ms", r->totals.eval_ms));
        json_object_set(rep, "evals", r->totals.evals_json);
    }
    char *pj = ppdl_plan_to_json(&r->plan);
    json_object_set_new(rep, "plan", json_loads(pj, 0, NULL));
    free(pj);
    if (r->have_cluster) {
        char *cj = ppdl_cluster_model_to_json(&r->cluster);
        json_object_set_new(rep, "cluster", json_loads(cj, 0, NULL));
        free(cj);
    } else {
        json_object_set_new(rep, "cluster", json_null());
    }
    json_object_set_new(rep, "steps", json_incref(r->totals.steps_json));
    json_object_set_new(rep, "samples_per_s", json_real(x.samples_per_s));
    json_object_set_new(rep, "gflops", json_real(x.gflops));
    json_object_set_new(rep, "bubble", json_real(x.bubble));
    json_object_set_new(rep, "memory", memory_report(r));
    json_object_set_new(rep, "breakdown", breakdown_report(r));
    /* what the planner predicted next to the run's own step (steps after the first) */
    json_t *pv = json_object();
    json_object_set_new(pv, "cost_model_ms", r->plan.predicted_iter_ms > 0 ? json_real(r->plan.predicted_iter_ms) : json_null());
    json_object_set_new(pv, "simulated_ms", r->simulated_ms > 0 ? json_real(r->simulated_ms) : json_null());
    json_object_set_new(pv, "measured_ms", json_real(x.mean_ms));
    json_object_set_new(rep, "prediction", pv);
    /* how the plan came about (the timing line): seconds, null where not done; the
     * plan's kind; the choice where ranks share cores */
    char kind[96];
    json_t *pl = json_object();
    json_object_set_new(pl, "mode", json_string(o->plan_mode == PLAN_AUTO ? "auto" : o->plan_mode == PLAN_FILE ? "file"
                                                : o->plan_mode == PLAN_DP ? "dp" : "uniform"));
    json_object_set_new(pl, "defaulted", json_boolean(o->plan_defaulted));
    json_object_set_new(pl, "kind", json_string(ppdl_plan_kind(&r->plan, kind, sizeof kind)));
    json_object_set_new(pl, "probe_s", r->probe_s >= 0 ? json_real(r->probe_s) : json_null());
    json_object_set_new(pl, "profile_s", r->profile_s >= 0 ? json_real(r->profile_s) : json_null());
    json_object_set_new(pl, "solve_s", r->solve_s >= 0 ? json_real(r->solve_s) : json_null());
    json_object_set_new(pl, "trials_s", r->trials_s >= 0 ? json_real(r->trials_s) : json_null());
    if (r->n_trials) { /* --plan-trials: each candidate, the planner's choice first */
        json_t *tr = json_array();
        for (int i = 0; i < r->n_trials; i++) {
            const trial_result *t = &r->trials[i];
            json_array_append_new(tr, json_pack("{s:s, s:s, s:o, s:o, s:b}", "kind", t->kind, "candidate", t->label,
                                                "simulated_ms", t->sim_ms >= 0 ? json_real(t->sim_ms) : json_null(),
                                                "measured_ms", isfinite(t->measured_ms) ? json_real(t->measured_ms)
                                                                                        : json_null(),
                                                "taken", i == r->trial_chosen));
        }
        json_object_set_new(pl, "trials", tr);
        if (r->trials_note[0]) json_object_set_new(pl, "trials_note", json_string(r->trials_note));
    } else if (r->trials_note[0]) {
        json_object_set_new(pl, "trials_skipped", json_string(r->trials_note));
    }
    if (r->shared.active)
        json_object_set_new(pl, "shared_cores", json_pack("{s:i, s:i, s:i, s:s, s:f, s:s, s:f}", "ranks",
                                                          r->shared.max_ranks, "cores", r->shared.cores, "candidates",
                                                          r->shared.candidates, "chosen", r->shared.chosen,
                                                          "chosen_simulated_ms", r->shared.chosen_sim_ms,
                                                          "optimum_of_T", r->shared.optimum_kind,
                                                          "optimum_simulated_ms", r->shared.optimum_sim_ms));
    json_object_set_new(rep, "planning", pl);
    if (r->clock_all) {
        /* how the trace's ranks were put on one time axis (net/clock_sync.h) */
        json_t *jc = json_array();
        for (int q = 0; q < r->n_ranks; q++)
            json_array_append_new(jc, json_pack("{s:i, s:f, s:f}", "rank", q, "offset_ms", 1e3 * r->clock_all[2 * q],
                                                "error_ms", 1e3 * r->clock_all[2 * q + 1]));
        json_object_set_new(rep, "trace_clock", jc);
    }
    if (o->papi) json_object_set_new(rep, "papi", papi_report(&r->papi, r->papi_all, r->n_ranks, o->papi));
    double final_loss = r->totals.final_loss;
    json_object_set_new(rep, "final_loss", isfinite(final_loss) ? json_real(final_loss) : json_null());
    json_object_set_new(rep, "resumed_from",
                        r->resume ? json_pack("{s:s, s:I, s:f}", "file", r->resume, "step", (json_int_t)r->start_step,
                                              "read_s", r->resume_read_s)
                                  : json_null());
    json_object_set_new(rep, "checkpoints", json_incref(r->ctl.log));
    int stopped = r->ctl.stopped;
    json_object_set_new(rep, "stopped", !stopped ? json_null()
                                        : json_string(stopped == SIGUSR1   ? "SIGUSR1"
                                                      : stopped == SIGTERM ? "SIGTERM"
                                                                           : "time limit"));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->report);
    if (json_dump_file(rep, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) ||
        rename(tmp, o->report)) {
        fprintf(stderr, "ppdl: --report %s: cannot write the report\n", o->report);
        remove(tmp);
        r->output_failed = 1;
    }
    json_decref(rep);
}
