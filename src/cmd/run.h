/* run.h — one training run of ppdl, as the steps of src/cmd/ppdl.c's main() see it.
 *
 * main() calls one function per step of the flow; each step is in a file of its own:
 *   run_options.c   the command line: parse, check, derive (options)
 *   run_setup.c     the model, the device, the network, the data, the resume point,
 *                   the layers' costs
 *   run_plan.c      the plan (auto, uniform, dp, a file), this rank's stages in it
 *                   (one, or several virtual stages) and their memory prediction
 *   run_stage.c     this rank's stages: weights, optimizer state, runtimes, checkpoints
 *   run_train.c     the step loop: progress lines, checkpoints, early stops
 *   run_finish.c    what rank 0 gathers at the end: summaries, trace, timeline, --save
 *   run_report.c    what is printed (header, plan table, the closing tables) and
 *                   the --report JSON
 *   run_agree.c     the job-ending agreement every rank reaches
 *   run_log.c       the run log (--log FILE.jsonl)
 * Every value derived from the options is derived once, in run_options.c.
 */
#ifndef PPDL_CMD_RUN_H
#define PPDL_CMD_RUN_H

#include <jansson.h>
#include <mpi.h>
#include <stddef.h>

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "io/data_io.h"
#include "net/cluster.h"
#include "net/comm.h"
#include "nn/lr_schedule.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "pipe/runtime.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "prof/papi.h"
#include "sched/schedule.h"

typedef enum plan_mode { PLAN_UNIFORM = 0, PLAN_AUTO, PLAN_DP, PLAN_FILE } plan_mode;

typedef struct options {
    const char *model, *data, *plan, *report, *trace, *timeline, *save, *backend, *recompute;
    const char *log;           /* --log FILE.jsonl */
    const char *loss_plot;     /* --loss-plot FILE.svg */
    int loss_plot_log;         /* --loss-plot-scale log */
    const char *val_data;      /* --val-data FILE.h5 */
    long sample_every, sample_tokens; /* --sample-every K (0: never), --sample-tokens N */
    const char *sample_prompt; /* --sample-prompt TEXT */
    const char *tokenizer;     /* --tokenizer FILE: samples as text (io/tokenizer.h) */
    long eval_every, eval_batches; /* 0: at the start and the end only; 0: the default count */
    const char *mem_limit;
    long steps, batch_size, micro_batches, threads, seed, log_every;
    int schedule, wait;        /* wait: -1 auto, 0 block, 1 yield */
    int copies;                /* --copies k: copies of the uniform pipeline (1: one) */
    int old_replicas;          /* given as --replicas, the old spelling: a note says so */
    int plan_trials;           /* --plan-trials K: -1 (default) 4 within the time budget,
                                  0 none, K >= 2: K whatever they cost */
    int trial_passes;          /* --trial-passes P: runs of each candidate (default 2) */
    int plan_files;            /* --plan F1,F2,...: how many files (0: one, or no file) */
    int virtual_stages;        /* --virtual-stages v: stages per rank of --schedule interleaved
                                  (default 2; zb-v: 2) with --plan uniform */
    int p2p;                   /* --p2p: PPDL_P2P_* (pipe/p2p_choice.h) */
    int precision;             /* --precision: PPDL_PREC_FP32 or PPDL_PREC_BF16 */
    int skip_nonfinite;
    int shard_optimizer;       /* --shard-optimizer: 1 on, 0 off, -1 (default) on wherever it can */
    const char *papi;          /* --papi EVENTS */
    const char *method;        /* --method: the planner's method for --plan auto */
    double lr, beta1, beta2, eps, weight_decay;
    /* the learning-rate schedule (nn/lr_schedule.h) and gradient clipping */
    const char *lr_schedule_name;
    long long shuffle;                 /* --shuffle SEED, -1: sequential */
    long warmup, decay_steps;          /* decay_steps 0: --steps */
    double min_lr, min_lr_ratio;       /* < 0: not given */
    double decay_fraction, clip_grad_norm;
    int decay_all;                     /* --decay-all: weight decay on every parameter */
    /* checkpoints: every `checkpoint_every` steps, or every `checkpoint_every_s` s */
    const char *checkpoint, *resume;
    long checkpoint_every, step_delay_ms;
    double checkpoint_every_s, time_limit_s;
    /* the network: a saved cluster, where to write the probed one, an emulated one */
    const char *cluster, *cluster_out, *netem;
    int probe_only;
    /* the layers' costs for the planner: where to write the profile, a saved one */
    const char *costs, *costs_out;
    const char *plan_out;      /* --plan-out: write the plan that runs */
    /* derived once from the above */
    plan_mode plan_mode;       /* --plan: auto, uniform, dp, or a file (o->plan names it) */
    int plan_defaulted;        /* no --plan: auto on 2 or more ranks, uniform on 1 */
    int micro_batch_size;      /* b = B / M, samples per micro-batch */
    int resume_auto;           /* --resume auto */
    int record_events;         /* --trace or --timeline: the runtime records its events */
    ppdl_lr_schedule lr_sched; /* the learning rate of every step */
} options;

/* Parse argv (every rank alike) for a job of n_ranks ranks (the default plan depends
 * on it). 0: run; 1: --help; 2: --version; -1: a bad option, explained in err. */
int run_options_parse(int argc, char **argv, int n_ranks, options *o, char *err, size_t errlen);
/* "fp32" or "bf16" (PPDL_PREC_*) */
const char *run_precision_name(int precision);
void run_options_usage(FILE *f);
/* rank 0: every output file named can be created (0), else -1 with the option named */
int run_options_check_outputs(const options *o, char *err, size_t errlen);
/* --mem-limit for `rank`: one size for all or one per rank; 0 bytes when not given */
int run_options_mem_limit(const char *s, int rank, size_t *bytes, char *err, size_t errlen);

/* The job-ending agreement: every rank calls it at the same point. If any rank failed,
 * the lowest failing rank prints "ppdl: msg", and every rank exits with `code` (no rank
 * is left waiting, no launcher abort noise). Returns only when no rank failed. */
void agree_or_end_job(int failed, const char *msg, int code);
/* the same, waiting without spinning (for the ranks idle while rank 0 works alone) */
void agree_or_end_job_idle(int failed, const char *msg, int code);

/* the data each step reads: the samples at positions step*B ... step*B + B-1, micro-batch
 * mb the mb-th contiguous B/M of them. Position p is row p mod N of the data set, or
 * with --shuffle SEED row perm_e(p mod N), perm_e the permutation of epoch e = p / N
 * drawn from SEED and e alone (core/permute.h). A resumed run continues from the data
 * position its checkpoint recorded (pos0 samples consumed by step0 steps), which is
 * step0*B unless the batch size changed. */
typedef struct data_source {
    ppdl_data *data;
    long batch_size;
    long long step0, pos0;
    long long shuffle;         /* the seed, -1: sequential */
} data_source;
/* the batches of a data source, as the runtime reads them (run_stage.c) */
ppdl_batch_source run_batch_source(data_source *ds);
/* the position of step's first sample, and its epoch (from 1) */
long long data_position_of(const data_source *ds, long step);
long long data_epoch_of(const data_source *ds, long step);

/* what the loop needs to checkpoint and to stop early */
typedef struct run_ctl {
    ppdl_ckpt *ckpt;               /* NULL without --checkpoint */
    char *plan_json;
    double t_prev;                 /* this rank's clock at the last agreement */
    double step_est_s;             /* the slowest step so far, over all ranks */
    double ckpt_est_s;             /* the last checkpoint's duration (a guess before the first) */
    double ckpt_total_s;           /* all checkpoints' time on this rank, for the report */
    double ckpt_at_s;              /* the agreed time of the last checkpoint */
    long ckpt_step;                /* steps done at the last checkpoint, -1: none yet */
    int stopped;                   /* the stopping signal, -1: the time limit, 0: not stopped */
    json_t *log;                   /* the checkpoints, for the report */
} run_ctl;

/* Where one rank's time went over all steps (the report's breakdown), and its memory:
 * what rank 0 gathers from every rank at the end. All doubles, so that one MPI_Gather
 * of sizeof / sizeof(double) values carries it. */
typedef struct rank_summary {
    double forward_ms, backward_ms, recompute_ms, optimizer_ms, wait_ms, comm_ms, step_ms;
    double message_bytes;          /* activations and gradients sent to other stages */
    double backward_weight_ms;     /* the W's of a split backward, within backward_ms */
    double agree_ms;               /* the agreement before the update (and clipping), within
                                    * optimizer_ms and wait_ms */
    double checkpoint_ms;          /* written between steps, outside step_ms */
    double peak_bytes, params_bytes, optimizer_bytes, stash_bytes, buffer_bytes, allocations;
    double weight_keep_bytes;      /* a split backward's W buffers */
    double stage;
} rank_summary;

/* The training's totals over the timed steps (after the first, or the only one), on
 * rank 0 */
/* the losses so far, for --loss-plot (rank 0): this job's steps and evaluations, and a
 * resumed run's earlier ones from its --log */
typedef struct loss_history {
    long *step, *val_step;
    double *loss, *val_loss;
    int n, n_val, cap, cap_val;
} loss_history;
void loss_history_add(loss_history *h, long step, double loss, int validation);
void loss_history_free(loss_history *h);

typedef struct train_totals {
    double total_ms, final_loss, sum_bubble;
    long timed_steps;
    json_t *steps_json;            /* [{"step", "loss", "ms", "bubble"}] */
    json_t *evals_json;            /* [{"step", "val_loss"}] */
    double eval_ms;                /* time spent evaluating, all evaluations */
    loss_history history;          /* rank 0, for --loss-plot */
    int nonfinite_exit;            /* 4: stopped at a non-finite step */
} train_totals;

/* --plan-trials (run_trials.c): the chosen plan's runners-up by the simulated step where
 * ranks share cores (every rank; labels and simulated steps on rank 0), and what the
 * trials timed (rank 0 prints them; every rank has the timed steps) */
#define PPDL_MAX_TRIAL_PASSES 50
typedef struct trial_candidates {
    int n;
    char label0[48];           /* the label of the run's plan, the first candidate ("": the
                                  planner's own words) */
    ppdl_plan plan[PPDL_PLAN_MAX_CANDIDATES];
    double sim_ms[PPDL_PLAN_MAX_CANDIDATES];
    char label[PPDL_PLAN_MAX_CANDIDATES][48];
} trial_candidates;
typedef struct trial_result {
    char kind[96], label[48];
    double sim_ms, measured_ms;    /* measured_ms: INFINITY where the plan did not fit */
} trial_result;

/* One of this rank's stages (a run of consecutive layers of the plan). A rank holds one
 * stage, or on a chunked plan (--schedule interleaved or zb-v) its v virtual stages;
 * either way they are a list, stepped together (pipe/runtime.h ppdl_runtime_step). */
typedef struct run_local {
    int stage;                 /* its index in the plan */
    ppdl_stage st;             /* its weights and AdamW moments on the device */
    float *host;               /* host buffer of its parameters */
    ppdl_runtime *rt;          /* the runtime that runs its op list */
    MPI_Comm replica_comm;     /* its replicas' (they sum their gradients on it) */
} run_local;

typedef struct run {
    options o;
    int rank, n_ranks;
    double t_start;
    ppdl_papi papi;
    /* set up (run_setup.c) */
    ppdl_model model;
    long threads;
    ppdl_backend *be;
    char backend_why[256];         /* --backend auto: why it chose what it chose */
    int p2p;                       /* the stages' messages: PPDL_P2P_NCCL or PPDL_P2P_MPI */
    char p2p_why[256];             /* why (the header prints it) */
    ppdl_comm comm;
    ppdl_cluster_model cluster;
    int have_cluster;
    ppdl_data data;
    ppdl_data val_data;            /* --val-data (val_data.file > 0 when open) */
    long eval_batches;             /* batches per evaluation */
    const char *resume;            /* the checkpoint resumed from, NULL: a fresh start */
    ppdl_ckpt_info ck;             /* its /train record */
    long start_step;
    ppdl_costs costs;
    int have_costs;
    ppdl_hosts own_hosts;          /* the job's machines when no cluster is known (else
                                      cluster.hosts): for the warning on shared cores */
    /* how the plan came about, for the timing line: rank 0's seconds, < 0 not done */
    double probe_s, profile_s, solve_s;
    /* the plan (run_plan.c) */
    int *n_options;                /* recompute options per layer */
    ppdl_plan plan;
    double simulated_ms;           /* the simulator's step for --plan auto (or a plan file
                                    * predicted again), 0 otherwise */
    double file_predicted_ms;      /* --plan FILE: the prediction the file carried (its own
                                    * costs and cluster), 0: none; -1: predicted again */
    ppdl_shared_choice shared;     /* --plan auto, rank 0: the choice where ranks share cores */
    /* --plan-trials: the plans tried (the simulator's choice first), the one taken
     * (-1: none tried), the seconds they took (< 0: none), or why none ran */
    int n_trials, trial_chosen;
    trial_result trials[PPDL_PLAN_MAX_CANDIDATES];
    double trials_s;
    char trials_note[256];
    char schedule_why[256];        /* --schedule auto, rank 0: why the schedule that runs was
                                      taken ("" otherwise) */
    /* a zero-bubble schedule of one stage per rank: its passes' times (rank 0's, from the
     * costs and the cluster: plan/pass_times.h), 4 S ticks, or NULL: the unit play */
    long *pass_ticks;
    ppdl_zb_times pass_times;      /* the view of pass_ticks */
    int replica;                   /* this rank's replica of its stages */
    int shard_optimizer;           /* the optimizer state is sharded across the replicas (every rank agrees) */
    /* this rank's stages in ascending order (run_plan.c names them, run_stage.c builds
     * them): one, or the virtual stages of a chunked plan; local[0] is the first */
    int n_local;
    run_local local[PPDL_MAX_CHUNKS];
    ppdl_mem_prediction *pred;     /* per stage (its first replica) */
    ppdl_mem_prediction pred_own;  /* this rank's stages and replica */
    ppdl_mem_prediction pred_own_full; /* the same with every layer fully recomputed */
    double resume_read_s;
    data_source ds;
    struct ppdl_nccl *nccl_act, *nccl_grad; /* --p2p nccl: the runtime's communicators
                                               (pipe/runtime.h), NULL otherwise */
    struct ppdl_nccl *nccl_replicas;        /* --p2p nccl, a replicated stage: its sums */
    run_ctl ctl;
    /* this rank's op lists, one per local stage, and the order their ops run in (one
     * stage: its list, which its runtime builds again for itself, in its own order) */
    ppdl_rank_schedule rs;
    /* training (run_train.c) and its end (run_finish.c) */
    double flops_step;             /* forward + backward FLOPs of one mini-batch */
    rank_summary mine;
    train_totals totals;
    rank_summary *all;             /* rank 0: every rank's summary */
    double *papi_all;              /* rank 0: every rank's PAPI counts */
    double *clock_all;             /* rank 0: per rank, its clock's offset and bound (s) */
    int output_failed;             /* rank 0: a requested output could not be written */
    FILE *log;                     /* rank 0: --log, open while training (run_log.c) */
    struct ppdl_tokenizer *tok;    /* rank 0: --tokenizer, loaded by run_setup_data */
} run;

/* ---- the steps of main(), in order ---- */
/* 1. MPI is up: read the command line; 1: stop now with status 0 (--help, --version) */
int run_start(run *r, int argc, char **argv);
/* 2. the model description and the checkpoint resumed from, if any; 1: it has --steps
 *    steps already (said in one line: nothing to do or write) */
int run_setup_model(run *r);
/*    the device, the network (probed, read, or emulated) */
void run_setup_device_and_network(run *r);
/*    the data, the layers' costs */
void run_setup_data(run *r);
/* 3. the plan every rank runs, and each stage's memory predicted */
void run_choose_plan(run *r);
/*    (run_plan.c) everything the plan in r->plan decides before a stage is built: this
 *    rank's stages, their op lists and replica, each one's replicas' communicator, the
 *    passes' times, each stage's memory predicted; and --recompute applied to r->plan */
void run_adopt_plan(run *r);
void run_apply_recompute(run *r);
/*    (run_trials.c) --plan-trials: how many candidates --plan auto asks the planner
 *    for (1: no trials); then each run for a few steps and the fastest kept in
 *    r->plan (tc's plans are taken over and freed) */
int run_trial_count(const run *r);
void run_plan_trials(run *r, trial_candidates *tc);
/*    undo run_adopt_plan and run_build_stage: the stages, their runtimes and buffers freed,
 *    ready for another plan (run_stage.c) */
void run_free_stage(run *r);
/* 4. this rank's stages, their weights (from the model or the checkpoint), runtimes */
void run_build_stage(run *r);
/*    rank 0: what is about to run (header, plan table, the resume point) */
void run_print_header(const run *r);
/* 5. the steps; ends with the final checkpoint */
void run_train(run *r);
/* 6. gather every rank's summary; trace, timeline, --save; the closing tables and
 *    --report (rank 0) */
void run_finish(run *r);
/* the exit status: 4 non-finite, 75 stopped with a checkpoint, 1 an output failed, 0 */
int run_exit_status(const run *r);
/* free everything (any step may have been the last one run) */
void run_free(run *r);

/* --log FILE.jsonl (run_log.c), rank 0: opened (a resumed run's log trimmed to its
 * checkpoint's step) by every rank at the start of training; a step's line; synced at
 * checkpoints; closed (synced) at the end */
void run_log_open(run *r);
void run_log_line(run *r, json_t *entry);
void run_log_sync(run *r);
void run_log_close(run *r);
/* rank 0: --loss-plot from the history so far (at checkpoints and at the end) */
void run_write_loss_plot(run *r);

/* Every stage's weights on rank 0, in the held layout of layers 0..L-1 (a tied weight
 * once): a Gatherv of each stage's first replica's values, nothing else (run_finish.c;
 * --save and --sample-every). Collective; rank 0 gets the malloc'd array, others NULL. */
float *run_gather_weights(run *r);

/* the ranks of a plan stage's replicas in replica order (a stage a planner built
 * without replicas names its one rank only) (run_plan.c) */
const int *run_ranks_of(const ppdl_plan_stage *ps);
/* the replicas of plan stage s (a chunked pipeline's: its copies) (run_plan.c) */
int run_stage_replicas(const run *r, int s);
/* the plan's slice weights of stage s's optimizer state (plan.h slice_weights): NULL for
 * equal slices, and on a chunked plan */
const double *run_slice_weights(const run *r, int s);
/* the bytes of AdamW state replica `replica` of stage s holds beyond replica 0's (their
 * slices differ: sized to memories, or by the rounding of equal slices); 0 unsharded */
double run_slice_extra_bytes(const run *r, int s, int replica);
/* the runtimes of this rank's stages, rts[0..n_local-1] (run_stage.c); n_local */
int run_runtimes(const run *r, ppdl_runtime **rts);
/* one training step of this rank's stages at the step's learning rate (run_train.c) */
void run_step(run *r, long step, ppdl_step_stats *stats);
/* --sample-every (run_sample.c): a sample of the model as it is after `after_step`
 * steps, printed by rank 0. Collective. */
void run_sample(run *r, long after_step);

/* helpers shared between the steps */
/* Host views of a stage's weights and AdamW moments, each the stage's whole held
 * layout: the arenas themselves when the host can address device memory (the CPU),
 * else host copies (from the device when from_device; host_state_put copies them
 * back). Moments sharded across the replicas (nn/stage.h) are always whole-size host
 * arrays: from_device gathers every replica's slice into replica 0's over `replicas`
 * (collective on it; the other replicas' arrays hold their own slice only), and
 * host_state_put takes each replica's own slice back. */
typedef struct host_state {
    float *a[3];
    int own[3];                /* a[i] is a host array, freed by host_state_free */
} host_state;
void host_state_get(host_state *h, ppdl_stage *st, int from_device, MPI_Comm replicas);
void host_state_put(host_state *h, ppdl_stage *st);
void host_state_free(host_state *h);
void run_write_checkpoint(run *r, long done, double at_s);
void run_print_closing(const run *r);
void run_write_report(run *r);

#endif
