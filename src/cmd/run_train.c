/* run_train.c — the steps: each runs the schedule once (runtime.h), rank 0 prints a
 * progress line and keeps the report's entry; between steps the ranks agree on
 * signals and time and write the checkpoints that are due. */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/stop.h"
#include "core/util.h"
#include "sched/schedule.h"

/* ---- checkpoints and early stops (io/checkpoint.h, core/stop.h) ---- */

/* The weights and AdamW moments of the rank's stages on the host, back to back in
 * layer order (what ppdl_ckpt_write takes; freed by host_state_free): one stage's are
 * its own host views, several stages' copied into one array each. */
static void local_host_state(run *r, host_state *h)
{
    if (r->n_local == 1) {
        host_state_get(h, &r->local[0].st, 1, r->local[0].replica_comm);
        return;
    }
    size_t n = 0;
    for (int c = 0; c < r->n_local; c++) n += r->local[c].st.n_params;
    for (int a = 0; a < 3; a++) {
        h->own[a] = 1;
        h->a[a] = ppdl_xmalloc(n * sizeof(float) + 1);
    }
    size_t off = 0;
    for (int c = 0; c < r->n_local; c++) {
        ppdl_stage *st = &r->local[c].st;
        host_state one;
        host_state_get(&one, st, 1, r->local[c].replica_comm);
        for (int a = 0; a < 3; a++) memcpy(h->a[a] + off, one.a[a], st->n_params * sizeof(float));
        host_state_free(&one);
        off += st->n_params;
    }
}

void run_write_checkpoint(run *r, long done, double at_s)
{
    const options *o = &r->o;
    run_ctl *c = &r->ctl;
    char err[PPDL_ERR_LEN] = "";
    host_state h;
    local_host_state(r, &h);
    ppdl_ckpt_info info = {
        .step = done, .data_position = data_position_of(&r->ds, done), .shuffle = o->shuffle,
        .adam_t = ppdl_runtime_adam_t(r->local[0].rt), .seed = o->seed, .batch_size = o->batch_size,
        .micro_batches = o->micro_batches, .ranks = r->n_ranks, .lr = o->lr, .beta1 = o->beta1,
        .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->weight_decay, .plan_json = c->plan_json,
        .warmup = o->lr_sched.warmup, .decay_steps = o->lr_sched.decay_steps, .min_lr = o->lr_sched.min_lr,
        .decay_fraction = o->lr_sched.decay_fraction, .clip_grad_norm = o->clip_grad_norm,
    };
    snprintf(info.lr_schedule, sizeof info.lr_schedule, "%s", ppdl_lr_name(o->lr_sched.kind));
    snprintf(info.schedule, sizeof info.schedule, "%s", ppdl_schedule_name(o->schedule));
    snprintf(info.precision, sizeof info.precision, "%s", run_precision_name(o->precision));
    ppdl_ckpt_stats cs;
    int rc = ppdl_ckpt_write(c->ckpt, o->checkpoint, MPI_COMM_WORLD, h.a[0], h.a[1], h.a[2], &info, &cs,
                             err, sizeof err);
    host_state_free(&h);
    agree_or_end_job(rc == -1, err, 1);   /* the rank that failed explains */
    agree_or_end_job(rc != 0, err, 1);
    c->ckpt_est_s = cs.total_s;
    run_log_sync(r); /* the log is as durable as the checkpoint */
    run_write_loss_plot(r);
    c->ckpt_total_s += cs.total_s;
    c->ckpt_at_s = at_s + cs.total_s;
    c->ckpt_step = done;
    if (r->rank != 0) return;
    char b[32];
    printf("checkpoint %s: step %ld, %s in %.2f s (write %.2f s, %.0f MB/s; sync %.2f s; verify %.2f s)\n",
           o->checkpoint, done, ppdl_fmt_bytes((size_t)cs.bytes, b, sizeof b), cs.total_s, cs.write_s,
           cs.write_s > 0 ? cs.bytes / cs.write_s / 1e6 : 0, cs.sync_s, cs.verify_s);
    fflush(stdout);
    json_t *j = json_object();
    json_object_set_new(j, "step", json_integer(done));
    json_object_set_new(j, "bytes", json_integer((json_int_t)cs.bytes));
    json_object_set_new(j, "write_s", json_real(cs.write_s));
    json_object_set_new(j, "sync_s", json_real(cs.sync_s));
    json_object_set_new(j, "verify_s", json_real(cs.verify_s));
    json_object_set_new(j, "total_s", json_real(cs.total_s));
    json_array_append_new(c->log, j);
}

/* Between two steps (`done` steps done): the ranks agree on a signal caught by any of
 * them, the time used and the slowest step, then write a checkpoint when one is due.
 * Every rank takes the same decisions from the same agreed numbers, so every rank
 * stops after the same step. 1: stop now. (One all-reduce of 3 doubles a step, with
 * or without --checkpoint: a signal must stop every rank at the same step.) */
static int between_steps(run *r, long done)
{
    const options *o = &r->o;
    run_ctl *c = &r->ctl;
    if (o->step_delay_ms) {
        struct timespec ts = {o->step_delay_ms / 1000, (o->step_delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    double now = ppdl_now_s();
    double mine[3] = {ppdl_stop_signal(), now - r->t_start, now - c->t_prev}, all[3];
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
    ppdl_comm_wait(&r->comm, &req);
    if (all[2] > c->step_est_s) c->step_est_s = all[2];
    int stop = (int)all[0];
    if (!stop && o->time_limit_s > 0 && ppdl_stop_for_time(all[1], o->time_limit_s, c->step_est_s, c->ckpt_est_s))
        stop = -1;
    int due = c->ckpt && (stop || (o->checkpoint_every && done % o->checkpoint_every == 0) ||
                          (o->checkpoint_every_s > 0 && all[1] - c->ckpt_at_s >= o->checkpoint_every_s));
    if (due) run_write_checkpoint(r, done, all[1]);
    c->stopped = stop;
    c->t_prev = ppdl_now_s();
    return stop != 0;
}

/* rank 0 says why the run stopped after `done` steps, and with which status */
static void print_stop(const run *r, long done)
{
    const options *o = &r->o;
    int stop = r->ctl.stopped;
    if (r->rank != 0) return;
    const char *why = stop == SIGUSR1 ? "SIGUSR1" : stop == SIGTERM ? "SIGTERM" : "the time limit is near";
    if (r->ctl.ckpt)
        printf("stopped after step %ld of %ld (%s): resubmit the same command with --resume %s to continue "
               "(exit status %d)\n", done, o->steps, why, o->resume_auto ? "auto" : o->checkpoint,
               ppdl_exit_stopped(stop, 1));
    else
        printf("stopped after step %ld of %ld (%s): no --checkpoint, so there is nothing to resume from "
               "(exit status %d)\n", done, o->steps, why, ppdl_exit_stopped(stop, 0));
    fflush(stdout);
}

/* ---- the per-step line and report entry ----
 * Rank 0 needs every rank's step time and the last stage's loss. Gathered at the end of
 * the step and waited for there, rank 0 (the first stage, the one that starts the next
 * step) would start it only after the slowest rank's optimizer, and the pipeline would
 * lose that overlap every step (most where ranks share cores). So
 * step k's gather is waited for after step k + 1, and its line printed then. */
typedef struct step_log {
    int rank, n_ranks;
    long pending;              /* the step whose gather is in flight, or -1 */
    MPI_Request req;
    double mine[2][3], *all[2]; /* per rank: loss sum (last stage), step ms, compute ms */
    ppdl_comm *comm;
    const options *o;
    long start_step, log_every;
    int loss_rows;
    double flops_step;
    train_totals *t;           /* rank 0's totals and per-step entries */
    double lr[2], grad_norm[2]; /* of the step in flight (the same on every rank) */
    int show_lr, show_norm;    /* the progress line shows them (a schedule, clipping) */
    const data_source *ds;
    run *run;                  /* its --log */
    double val[2];             /* the validation loss after the step in flight, NaN: none */
    int tokens;                /* samples are sequences of loss_rows tokens */
    int show_epoch;            /* the progress line shows the epoch (shuffled, or more than one) */
} step_log;

static void step_log_finish(step_log *lg)
{
    long step = lg->pending;
    if (step < 0) return;
    lg->pending = -1;
    ppdl_comm_wait(lg->comm, &lg->req);
    if (lg->rank != 0) return;
    const options *o = lg->o;
    const double *all = lg->all[step % 2];
    /* the last stage's replicas each summed the loss of their micro-batches */
    double loss_sum = 0;
    for (int r = 0; r < lg->n_ranks; r++) loss_sum += all[3 * r];
    double loss = loss_sum / ((double)o->batch_size * lg->loss_rows);
    double ms = 0, busy = 0;
    for (int r = 0; r < lg->n_ranks; r++) {
        if (all[3 * r + 1] > ms) ms = all[3 * r + 1];
        busy += all[3 * r + 2];
    }
    double bubble = ms > 0 ? 1.0 - busy / (lg->n_ranks * ms) : 0;
    if (bubble < 0) bubble = 0;
    lg->t->final_loss = loss;
    loss_history_add(&lg->t->history, step + 1, loss, 0);
    /* the first step of a job warms up (allocation, caches, first messages): timed only
     * when it is the only one */
    if (step > lg->start_step || o->steps - lg->start_step == 1) {
        lg->t->total_ms += ms;
        lg->t->timed_steps++;
        lg->t->sum_bubble += bubble;
    }
    json_t *js = json_object();
    json_object_set_new(js, "step", json_integer(step + 1)); /* numbered from 1, as the progress line */
    json_object_set_new(js, "epoch", json_integer((json_int_t)data_epoch_of(lg->ds, step)));
    json_object_set_new(js, "loss", json_real(loss));
    json_object_set_new(js, "ms", json_real(ms));
    json_object_set_new(js, "bubble", json_real(bubble));
    json_object_set_new(js, "lr", json_real(lg->lr[step % 2]));
    double val = lg->val[step % 2];
    if (!isnan(val)) json_object_set_new(js, "val_loss", json_real(val));
    if (lg->grad_norm[step % 2] >= 0) json_object_set_new(js, "grad_norm", json_real(lg->grad_norm[step % 2]));
    if (lg->run->log) { /* the run log's line: the report's entry and the rates */
        json_t *line = json_deep_copy(js);
        double per_s = ms > 0 ? 1e3 / ms : 0; /* steps per second */
        json_object_set_new(line, "samples_per_s", json_real((double)o->batch_size * per_s));
        if (lg->tokens) json_object_set_new(line, "tokens_per_s", json_real((double)o->batch_size * lg->loss_rows * per_s));
        run_log_line(lg->run, line);
        json_decref(line);
    }
    json_array_append_new(lg->t->steps_json, js);
    if ((step + 1) % lg->log_every == 0 || step == lg->start_step || step + 1 == o->steps || !isnan(val)) {
        printf("step %5ld/%ld  loss %.4f  %8.1f ms  %8.1f samples/s  %6.2f GFLOP/s  bubble %4.1f%%", step + 1,
               o->steps, loss, ms, o->batch_size / (ms / 1e3), lg->flops_step / (ms / 1e3) / 1e9, 100 * bubble);
        if (lg->show_epoch) printf("  epoch %lld", data_epoch_of(lg->ds, step));
        if (lg->show_lr) printf("  lr %.3e", lg->lr[step % 2]);
        if (lg->show_norm) printf("  norm %.4f", lg->grad_norm[step % 2]);
        if (!isnan(val)) printf("  val %.4f", val);
        printf("\n");
        fflush(stdout);
    }
}

/* step's numbers start on their way to rank 0; the previous step's are finished first */
static void step_log_post(step_log *lg, long step, const ppdl_step_stats *stats, double val)
{
    step_log_finish(lg);
    lg->val[step % 2] = val;
    lg->lr[step % 2] = stats->lr;
    lg->grad_norm[step % 2] = stats->grad_norm;
    double *mine = lg->mine[step % 2];
    mine[0] = stats->loss_sum;
    mine[1] = stats->step_ms;
    mine[2] = stats->compute_ms;
    PPDL_CHECK_MPI(MPI_Igather(mine, 3, MPI_DOUBLE, lg->all[step % 2], 3, MPI_DOUBLE, 0, MPI_COMM_WORLD, &lg->req));
    lg->pending = step;
}

/* ---- evaluation (--val-data) ----
 * The mean loss over the validation set's first eval_batches batches of B samples (the
 * same batches every time), forward only through the pipeline (ppdl_runtime_eval).
 * Every rank calls it; rank 0 gets every rank's sum (the last stage's replicas each
 * hold the sum of their micro-batches) and adds them in rank order, as it does the
 * training loss; other ranks get NaN. The time is counted apart from the steps'. */
static double run_evaluate(run *r, long after_step)
{
    const options *o = &r->o;
    double t0 = ppdl_now_s();
    data_source vs = {&r->val_data, o->batch_size, 0, 0, -1};
    /* each of the rank's stages' part, batch by batch, in stage order */
    ppdl_runtime *rts[PPDL_MAX_CHUNKS];
    int n = run_runtimes(r, rts);
    double mine = ppdl_runtime_eval(rts, n, run_batch_source(&vs), (int)r->eval_batches);
    double val = NAN;
    double *all = r->rank == 0 ? ppdl_xmalloc((size_t)r->n_ranks * sizeof(double)) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (r->rank == 0) {
        double sum = 0;
        for (int q = 0; q < r->n_ranks; q++) sum += all[q];
        val = sum / ((double)r->eval_batches * o->batch_size * ppdl_model_loss_rows(&r->model));
        json_array_append_new(r->totals.evals_json, json_pack("{s:I, s:f}", "step", (json_int_t)after_step,
                                                              "val_loss", val));
        loss_history_add(&r->totals.history, after_step, val, 1);
        free(all);
    }
    r->totals.eval_ms += 1e3 * (ppdl_now_s() - t0);
    return val;
}

/* forward FLOPs of the whole model for `samples` samples, x3 for forward + backward */
static double model_train_flops(const ppdl_model *m, long samples)
{
    double f = 0;
    for (int i = 0; i < m->L; i++) f += m->layers[i].kind->flops_fwd(&m->layers[i], (int)samples);
    return 3 * f;
}

/* where this rank's time went, summed over the run (the report's breakdown) */
static void add_step_times(rank_summary *s, const ppdl_step_stats *st)
{
    s->forward_ms += st->forward_ms;
    s->backward_ms += st->backward_ms;
    s->backward_weight_ms += st->backward_weight_ms;
    s->agree_ms += st->agree_ms;
    s->recompute_ms += st->recompute_ms;
    s->optimizer_ms += st->optimizer_ms;
    s->wait_ms += st->wait_ms;
    s->comm_ms += st->comm_ms;
    s->message_bytes += st->message_bytes;
    s->step_ms += st->step_ms;
}

void run_step(run *r, long step, ppdl_step_stats *stats)
{
    ppdl_runtime *rts[PPDL_MAX_CHUNKS];
    int n = run_runtimes(r, rts);
    for (int c = 0; c < n; c++) ppdl_runtime_set_lr(rts[c], ppdl_lr_at(&r->o.lr_sched, step));
    ppdl_runtime_step(rts, n, r->rs.order, r->rs.n, step, stats);
}

void run_train(run *r)
{
    const options *o = &r->o;
    run_ctl *ctl = &r->ctl;
    train_totals *t = &r->totals;
    r->flops_step = model_train_flops(&r->model, o->batch_size);
    t->steps_json = json_array();
    t->final_loss = NAN;
    step_log lg = {.val = {NAN, NAN}, .rank = r->rank, .n_ranks = r->n_ranks, .pending = -1, .comm = &r->comm, .o = o,
                   .start_step = r->start_step,
                   .log_every = o->log_every ? o->log_every : (o->steps > 20 ? o->steps / 20 : 1),
                   .loss_rows = ppdl_model_loss_rows(&r->model), .flops_step = r->flops_step, .t = t,
                   .show_lr = o->lr_sched.kind != PPDL_LR_CONSTANT || o->lr_sched.warmup > 0,
                   .show_norm = o->clip_grad_norm > 0, .ds = &r->ds, .run = r,
                   .tokens = r->data.kind == PPDL_DATA_TOKENS,
                   .show_epoch = o->shuffle >= 0 || data_epoch_of(&r->ds, o->steps - 1) > 1};
    run_log_open(r);
    t->evals_json = json_array();
    if (r->eval_batches && r->start_step == 0) { /* the held-out loss before any step */
        double val = run_evaluate(r, 0);
        if (r->rank == 0) {
            printf("validation before training: loss %.4f (%ld batch%s of %ld from %s)\n", val, r->eval_batches,
                   r->eval_batches == 1 ? "" : "es", o->batch_size, o->val_data);
            json_t *line = json_pack("{s:i, s:f}", "step", 0, "val_loss", val);
            run_log_line(r, line);
            json_decref(line);
        }
    }
    for (int k = 0; k < 2; k++)
        lg.all[k] = r->rank == 0 ? ppdl_xmalloc(3 * (size_t)r->n_ranks * sizeof(double)) : NULL;
    ctl->t_prev = ppdl_now_s();
    for (long step = r->start_step; step < o->steps; step++) {
        /* a checkpoint's or a stop's message comes after the previous step's line */
        if (ctl->ckpt) step_log_finish(&lg);
        if (step > r->start_step && between_steps(r, step)) {
            step_log_finish(&lg); /* the last step's line before the stop's */
            print_stop(r, step);
            break;
        }
        ppdl_step_stats stats;
        run_step(r, step, &stats);
        add_step_times(&r->mine, &stats);
        if (stats.nonfinite_stage >= 0) {
            step_log_finish(&lg); /* the previous step's line first */
            /* every rank has the same verdict: the stage that found it explains */
            for (int c = 0; c < r->n_local; c++)
                if (stats.nonfinite_stage == r->local[c].stage)
                    fprintf(stderr, "ppdl: step %ld, stage %d (rank %d): %s; %s\n", step + 1, r->local[c].stage,
                            r->rank, ppdl_runtime_nonfinite_what(r->local[c].rt),
                            o->skip_nonfinite ? "step skipped, weights unchanged"
                                              : "stopping without writing the broken state "
                                                "(--skip-nonfinite skips such steps instead)");
            if (!o->skip_nonfinite) {
                t->nonfinite_exit = 4; /* no checkpoint, no saved model of the broken state */
                break;
            }
        }
        /* the held-out loss after the step: every --eval-every steps and after the last */
        double val = r->eval_batches && ((o->eval_every && (step + 1) % o->eval_every == 0) || step + 1 == o->steps)
                         ? run_evaluate(r, step + 1)
                         : NAN;
        step_log_post(&lg, step, &stats, val);
        if (o->sample_every && ((step + 1) % o->sample_every == 0 || step + 1 == o->steps)) {
            step_log_finish(&lg); /* the step's line before its sample */
            run_sample(r, step + 1);
        }
    }
    step_log_finish(&lg);
    for (int k = 0; k < 2; k++) free(lg.all[k]);
    /* the finished run's state, unless the last checkpoint already holds it */
    if (ctl->ckpt && !ctl->stopped && !t->nonfinite_exit &&
        ctl->ckpt_step != (r->start_step > o->steps ? r->start_step : o->steps))
        run_write_checkpoint(r, o->steps, 0);
}
