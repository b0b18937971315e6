/* ppdl.c — train a model with pipeline parallelism. The story of a run, top to bottom:
 *
 *   1. start MPI, read the command line (every rank, identically)
 *   2. read the model description; start the device; know the network (probe it, read a
 *      saved CLUSTER.json, or emulate one: --netem); check the data against the model
 *   3. choose the plan: which layers each rank's stage runs, and what it recomputes
 *   4. build this rank's stage: its layers on its backend, only its own weights
 *   5. run the schedule (GPipe or 1F1B) step after step; rank 0 prints progress
 *   6. report: losses, throughput, memory per rank, trace and timeline; save weights
 *
 * Errors that every rank sees alike (a bad option, a bad file) are reported once by
 * rank 0 and every rank exits non-zero; an error on one rank alone aborts the job.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/stop.h"
#include "core/util.h"
#include "io/checkpoint.h"
#include "io/data_io.h"
#include "io/model_io.h"
#include "net/clock_sync.h"
#include "net/cluster.h"
#include "net/comm.h"
#include "net/probe.h"
#include "nn/model.h"
#include "prof/profile.h"
#include "nn/stage.h"
#include "pipe/runtime.h"
#include "sched/schedule.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/simulate.h"
#include "prof/papi.h"
#include "prof/timeline.h"

typedef struct options {
    const char *model, *data, *plan, *report, *trace, *timeline, *save, *backend, *recompute;
    const char *mem_limit;
    long steps, batch_size, micro_batches, threads, seed, log_every;
    int schedule, wait;        /* wait: -1 auto, 0 block, 1 yield */
    int skip_nonfinite;
    const char *papi;          /* --papi EVENTS */
    const char *method;        /* --method: the planner's method for --plan auto */
    double lr, beta1, beta2, eps, weight_decay;
    /* checkpoints: every `checkpoint_every` steps, or every `checkpoint_every_s` s */
    const char *checkpoint, *resume;
    long checkpoint_every, step_delay_ms;
    double checkpoint_every_s, time_limit_s;
    /* the network: a saved cluster, where to write the measured one, an emulated one */
    const char *cluster, *cluster_out, *netem;
    int probe_only;
    /* the layers' costs for the planner: where to write the profile, a saved one */
    const char *costs, *costs_out;
} options;

static void usage(FILE *f)
{
    fprintf(f,
"usage: mpiexec -n N ppdl MODEL.h5 --data DATA.h5 [options]\n"
"\n"
"Train MODEL.h5 with its layers split into N pipeline stages, one per MPI rank.\n"
"Micro-batches flow forward through the stages and gradients flow back; after every\n"
"step (all micro-batches of one mini-batch) each stage updates its weights with AdamW.\n"
"The losses and weights do not depend on N or on the number of micro-batches.\n"
"\n"
"Training:\n"
"  --data FILE.h5          training data made by ppdl-data (required)\n"
"  --steps K               optimizer steps (default 10)\n"
"  --batch-size B          samples per step, the mini-batch (default 8)\n"
"  --micro-batches M       micro-batches per step; must divide B (default 4)\n"
"  --lr X                  AdamW learning rate (default 1e-3)\n"
"  --weight-decay X        AdamW weight decay (default 1e-2); --beta1, --beta2, --eps too\n"
"  --seed S                recorded in the report (data order is sequential)\n"
"  --skip-nonfinite        skip a step whose loss or gradients are not finite (default:\n"
"                          stop, naming the step, stage and layer; nothing is written)\n"
"\n"
"Pipeline:\n"
"  --schedule 1f1b|gpipe   1f1b (default): PipeDream-Flush, stage s keeps at most\n"
"                          min(M, N-s) micro-batches of activations; gpipe keeps M\n"
"  --plan auto|uniform|dp|FILE\n"
"                          auto: measure the network, profile the layers, and solve\n"
"                          for the stages, their ranks and recompute (--method picks\n"
"                          ppdl's solver, the default, or a baseline; see ppdl-plan);\n"
"                          uniform (default): equal layer counts on ranks 0..N-1;\n"
"                          dp: data parallelism, the whole model on every rank;\n"
"                          FILE: a plan JSON (stages, ranks or replicas, recompute;\n"
"                          see README)\n"
"  --recompute none|full|selective\n"
"                          recompute option for every layer (overrides the plan):\n"
"                          full keeps only each layer's input and runs its forward\n"
"                          again before backward; selective (transformer blocks)\n"
"                          drops attention probabilities and the MLP hidden layer\n"
"  --mem-limit SIZE[,SIZE...]  device memory each rank may use, e.g. 512M (one size\n"
"                          for all ranks, or one per rank)\n"
"  --wait auto|yield|block how a rank waits for messages; auto yields the core when\n"
"                          ranks outnumber cores (default auto)\n"
"\n"
"Device:\n"
"  --backend cpu|cuda      compute device (default cpu)\n"
"  --threads T             compute threads per rank (default: cores / ranks on the node)\n"
"\n"
"Network:\n"
"  --probe-only            measure the network and devices, print them, and stop\n"
"                          (MODEL.h5 and --data are optional then; a model sets the\n"
"                          activation size measured)\n"
"  --cluster-out FILE.json write the measurement (CLUSTER.json); the probe runs with\n"
"                          this, --probe-only or --report (a few 100 ms)\n"
"  --cluster FILE.json     use a saved measurement instead of probing\n"
"  --netem FILE.json       emulate that cluster's network: every message between\n"
"                          ranks i, j takes latency + bytes/bandwidth of the link\n"
"  --costs-out FILE.json   profile every layer on rank 0's device at this run's\n"
"                          micro-batch size (forward, backward, each recompute option,\n"
"                          bytes; median of 5 timed runs) and write COSTS.json, what\n"
"                          ppdl-plan plans with (well under a second for gpt-tiny)\n"
"  --costs FILE.json       use saved layer costs instead (checked against the model\n"
"                          and the micro-batch size)\n"
"\n"
"Output:\n"
"  --papi EVENTS           count PAPI events (e.g. PAPI_TOT_CYC,PAPI_TOT_INS) per stage\n"
"                          and per forward/backward/optimizer, in the report; where\n"
"                          the machine has no counters it says why and times only\n"
"  --log-every K           progress line every K steps (default: about 20 lines per run)\n"
"  --report FILE.json      losses, throughput, plan and memory per rank\n"
"  --trace FILE.json       the last step as a Chrome/Perfetto trace (ui.perfetto.dev)\n"
"  --timeline FILE.svg     the last step as a pipeline diagram (open in a browser)\n"
"  --save FILE.h5          write the trained model (a model.h5 ppdl can train again)\n"
"\n"
"Checkpoints and batch jobs:\n"
"  --checkpoint FILE.h5    write the weights, the AdamW state and the step here (one\n"
"                          file, all ranks in parallel; replaced atomically), at the\n"
"                          end and --checkpoint-every; it is a model.h5 too\n"
"  --checkpoint-every K|DURATION\n"
"                          every K steps, or every DURATION of wall time such as 30m\n"
"                          (default 15m)\n"
"  --resume FILE.h5|auto   continue the run saved in FILE.h5 (any number of ranks and\n"
"                          plan) until --steps steps in all; auto: resume from\n"
"                          --checkpoint if it exists, else start, so the same command\n"
"                          line starts and resumes a run\n"
"  --time-limit DURATION   stop with a checkpoint before this much wall time has\n"
"                          passed (90s, 10m, 2h, 1:30:00, 1-12:00:00)\n"
"  SIGUSR1, SIGTERM        with --checkpoint: finish the step, write a checkpoint and\n"
"                          exit with status 75 (resubmit the same command to continue)\n"
"  --step-delay MS         sleep MS after every step (tests and demos of long runs)\n"
"  --help, --version\n"
"\n"
"Example:\n"
"  ppdl-init --preset gpt-tiny -o gpt.h5\n"
"  ppdl-data text README.md --seq-len 64 -o text.h5\n"
"  mpiexec -n 2 ./ppdl gpt.h5 --data text.h5 --steps 50 --batch-size 16 --micro-batches 4\n");
}

/* Every rank parses the same argv; on an error rank 0 explains and all exit. */
static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->steps = 10;
    o->batch_size = 8;
    o->micro_batches = 4;
    o->schedule = PPDL_SCHED_1F1B;
    o->plan = "uniform";
    o->method = "ppdl";
    o->backend = "cpu";
    o->wait = -1;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 1e-2;
    o->seed = 1234;
    enum { O_DATA = 256, O_STEPS, O_BATCH, O_MICRO, O_SCHED, O_PLAN, O_MEM, O_LR, O_WD, O_B1, O_B2,
           O_EPS, O_SEED, O_REPORT, O_TRACE, O_TIMELINE, O_SAVE, O_THREADS, O_BACKEND, O_WAIT,
           O_RECOMP, O_LOG, O_SKIPNF, O_CKPT, O_CKPT_EVERY, O_RESUME, O_TIME_LIMIT, O_STEP_DELAY,
           O_PROBE_ONLY, O_CLUSTER, O_CLUSTER_OUT, O_NETEM, O_PAPI, O_COSTS, O_COSTS_OUT, O_METHOD, O_HELP, O_VERSION };
    static const struct option longopts[] = {
        {"probe-only", no_argument, 0, O_PROBE_ONLY}, {"cluster", required_argument, 0, O_CLUSTER},
        {"costs", required_argument, 0, O_COSTS}, {"costs-out", required_argument, 0, O_COSTS_OUT},
        {"cluster-out", required_argument, 0, O_CLUSTER_OUT}, {"netem", required_argument, 0, O_NETEM},
        {"data", required_argument, 0, O_DATA}, {"steps", required_argument, 0, O_STEPS},
        {"batch-size", required_argument, 0, O_BATCH}, {"micro-batches", required_argument, 0, O_MICRO},
        {"schedule", required_argument, 0, O_SCHED}, {"plan", required_argument, 0, O_PLAN},
        {"mem-limit", required_argument, 0, O_MEM}, {"lr", required_argument, 0, O_LR},
        {"weight-decay", required_argument, 0, O_WD}, {"beta1", required_argument, 0, O_B1},
        {"beta2", required_argument, 0, O_B2}, {"eps", required_argument, 0, O_EPS},
        {"seed", required_argument, 0, O_SEED}, {"report", required_argument, 0, O_REPORT},
        {"trace", required_argument, 0, O_TRACE}, {"timeline", required_argument, 0, O_TIMELINE},
        {"save", required_argument, 0, O_SAVE}, {"threads", required_argument, 0, O_THREADS},
        {"backend", required_argument, 0, O_BACKEND}, {"wait", required_argument, 0, O_WAIT},
        {"recompute", required_argument, 0, O_RECOMP}, {"log-every", required_argument, 0, O_LOG},
        {"skip-nonfinite", no_argument, 0, O_SKIPNF}, {"papi", required_argument, 0, O_PAPI},
        {"method", required_argument, 0, O_METHOD},
        {"checkpoint", required_argument, 0, O_CKPT}, {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
        {"resume", required_argument, 0, O_RESUME}, {"time-limit", required_argument, 0, O_TIME_LIMIT},
        {"step-delay", required_argument, 0, O_STEP_DELAY},
        {"help", no_argument, 0, O_HELP}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0}};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const char *a = optarg;
        double d;
        switch (c) {
        case O_DATA: o->data = a; break;
        case O_STEPS:
            if (ppdl_parse_int(a, 0, LONG_MAX / 2, &o->steps)) return ppdl_errf(err, errlen, "--steps %s: expected an integer >= 0", a);
            break;
        case O_BATCH:
            if (ppdl_parse_int(a, 1, 1 << 24, &o->batch_size)) return ppdl_errf(err, errlen, "--batch-size %s: expected an integer >= 1", a);
            break;
        case O_MICRO:
            if (ppdl_parse_int(a, 1, 1 << 20, &o->micro_batches)) return ppdl_errf(err, errlen, "--micro-batches %s: expected an integer >= 1", a);
            break;
        case O_SCHED:
            o->schedule = ppdl_schedule_parse(a);
            if (o->schedule < 0) return ppdl_errf(err, errlen, "--schedule %s: expected 1f1b or gpipe", a);
            break;
        case O_PLAN: o->plan = a; break;
        case O_MEM: o->mem_limit = a; break;
        case O_LR:
            if (ppdl_parse_float(a, 0, 10, &o->lr)) return ppdl_errf(err, errlen, "--lr %s: expected a number in [0, 10]", a);
            break;
        case O_WD:
            if (ppdl_parse_float(a, 0, 10, &o->weight_decay)) return ppdl_errf(err, errlen, "--weight-decay %s: expected a number in [0, 10]", a);
            break;
        case O_B1:
            if (ppdl_parse_float(a, 0, 0.999999, &o->beta1)) return ppdl_errf(err, errlen, "--beta1 %s: expected a number in [0, 1)", a);
            break;
        case O_B2:
            if (ppdl_parse_float(a, 0, 0.999999999, &o->beta2)) return ppdl_errf(err, errlen, "--beta2 %s: expected a number in [0, 1)", a);
            break;
        case O_EPS:
            if (ppdl_parse_float(a, 1e-30, 1, &d)) return ppdl_errf(err, errlen, "--eps %s: expected a number in (0, 1]", a);
            o->eps = d;
            break;
        case O_SEED:
            if (ppdl_parse_int(a, 0, LONG_MAX, &o->seed)) return ppdl_errf(err, errlen, "--seed %s: expected an integer >= 0", a);
            break;
        case O_REPORT: o->report = a; break;
        case O_TRACE: o->trace = a; break;
        case O_TIMELINE: o->timeline = a; break;
        case O_SAVE: o->save = a; break;
        case O_THREADS:
            if (ppdl_parse_int(a, 1, 1024, &o->threads)) return ppdl_errf(err, errlen, "--threads %s: expected an integer in [1, 1024]", a);
            break;
        case O_BACKEND: o->backend = a; break;
        case O_WAIT:
            if (!strcmp(a, "auto")) o->wait = -1;
            else if (!strcmp(a, "yield")) o->wait = 1;
            else if (!strcmp(a, "block")) o->wait = 0;
            else return ppdl_errf(err, errlen, "--wait %s: expected auto, yield or block", a);
            break;
        case O_RECOMP:
            if (strcmp(a, "none") && strcmp(a, "full") && strcmp(a, "selective"))
                return ppdl_errf(err, errlen, "--recompute %s: expected none, full or selective", a);
            o->recompute = a;
            break;
        case O_LOG:
            if (ppdl_parse_int(a, 1, LONG_MAX, &o->log_every)) return ppdl_errf(err, errlen, "--log-every %s: expected an integer >= 1", a);
            break;
        case O_SKIPNF: o->skip_nonfinite = 1; break;
        case O_CKPT: o->checkpoint = a; break;
        case O_CKPT_EVERY:
            /* a bare integer is steps; a duration has a unit or colons */
            o->checkpoint_every = 0;
            o->checkpoint_every_s = 0;
            if (ppdl_parse_int(a, 1, LONG_MAX, &o->checkpoint_every) && ppdl_parse_duration(a, &o->checkpoint_every_s))
                return ppdl_errf(err, errlen, "--checkpoint-every %s: expected a number of steps >= 1 or a duration "
                                              "like 30m", a);
            break;
        case O_RESUME: o->resume = a; break;
        case O_TIME_LIMIT:
            if (ppdl_parse_duration(a, &o->time_limit_s))
                return ppdl_errf(err, errlen, "--time-limit %s: expected a duration like 90s, 10m, 2h, 1:30:00 or "
                                              "1-12:00:00", a);
            break;
        case O_STEP_DELAY:
            if (ppdl_parse_int(a, 0, 3600000, &o->step_delay_ms))
                return ppdl_errf(err, errlen, "--step-delay %s: expected milliseconds in [0, 3600000]", a);
            break;
        case O_PROBE_ONLY: o->probe_only = 1; break;
        case O_CLUSTER: o->cluster = a; break;
        case O_CLUSTER_OUT: o->cluster_out = a; break;
        case O_NETEM: o->netem = a; break;
        case O_COSTS: o->costs = a; break;
        case O_COSTS_OUT: o->costs_out = a; break;
        case O_PAPI: o->papi = a; break;
        case O_METHOD: {
            int known = 0;
            for (int i = 0; ppdl_plan_methods[i]; i++) known |= !strcmp(a, ppdl_plan_methods[i]);
            if (!known) return ppdl_errf(err, errlen, "--method %s: unknown (see ppdl-plan --help for the methods)", a);
            o->method = a;
            break;
        }
        case 'h':
        case O_HELP: return 1;
        case O_VERSION: return 2;
        case ':': return ppdl_errf(err, errlen, "%s needs a value (see --help)", argv[optind - 1]);
        default: return ppdl_errf(err, errlen, "unknown option %s (see --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc && !o->probe_only)
        return ppdl_errf(err, errlen, "no model file given (usage: ppdl MODEL.h5 --data DATA.h5; see --help)");
    if (optind + 1 < argc) return ppdl_errf(err, errlen, "unexpected argument '%s' (one model file only)", argv[optind + 1]);
    o->model = optind < argc ? argv[optind] : NULL;
    if (!o->data && !o->probe_only) return ppdl_errf(err, errlen, "--data is required: the training data made by ppdl-data");
    if (o->batch_size % o->micro_batches)
        return ppdl_errf(err, errlen, "--micro-batches %ld does not divide --batch-size %ld", o->micro_batches, o->batch_size);
    if (!o->checkpoint) {
        if (o->resume && !strcmp(o->resume, "auto"))
            return ppdl_errf(err, errlen, "--resume auto needs --checkpoint FILE.h5 (the file to resume from when it exists)");
        if (o->time_limit_s > 0)
            return ppdl_errf(err, errlen, "--time-limit needs --checkpoint FILE.h5 (where the run is saved before the limit)");
        if (o->checkpoint_every || o->checkpoint_every_s > 0)
            return ppdl_errf(err, errlen, "--checkpoint-every needs --checkpoint FILE.h5");
    } else {
        if (o->save && !strcmp(o->save, o->checkpoint))
            return ppdl_errf(err, errlen, "--save and --checkpoint name the same file %s: --save would replace the "
                                          "checkpoint with a model without optimizer state", o->save);
        if (!o->checkpoint_every && !(o->checkpoint_every_s > 0)) o->checkpoint_every_s = 15 * 60;
    }
    return 0;
}

/* A check every rank reaches: if any rank failed, the lowest failing rank prints its
 * message and every rank exits with `code`. No rank is left waiting. */
static void all_ranks_ok(int failed, const char *msg, int code)
{
    int rank, first_bad = INT_MAX, mine;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mine = failed ? rank : INT_MAX;
    PPDL_CHECK_MPI(MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad == INT_MAX) return;
    if (rank == first_bad) fprintf(stderr, "ppdl: %s\n", msg);
    MPI_Finalize();
    exit(code);
}

/* the data each step reads: samples step*B ... step*B + B-1 (mod N), micro-batch
 * mb takes the mb-th contiguous B/M of them. A resumed run continues from the data
 * position its checkpoint recorded (pos0 samples consumed by step0 steps), which is
 * step0*B unless the batch size changed. */
typedef struct data_source {
    ppdl_data *data;
    long batch_size;
    long long step0, pos0;
} data_source;

static int read_batch(void *ctx, long step, int mb, int b, void *inputs, int32_t *targets, char *err, size_t errlen)
{
    data_source *ds = ctx;
    long long pos = ds->pos0 + (step - ds->step0) * (long long)ds->batch_size + (long long)mb * b;
    long start = (long)(pos % ds->data->n);
    return ppdl_data_read(ds->data, start, b, inputs, targets, err, errlen);
}

/* the report's per-rank time breakdown: forward, backward, recompute, optimizer,
 * waiting for messages (the bubble), communication (posting and staging messages,
 * waits excluded), the whole step */
static double breakdown_of(const ppdl_step_stats *s, int k)
{
    const double v[] = {s->forward_ms, s->backward_ms, s->recompute_ms, s->optimizer_ms, s->wait_ms,
                        s->comm_ms, s->step_ms};
    return v[k];
}
static const char *const breakdown_names[] = {"forward_ms", "backward_ms", "recompute_ms", "optimizer_ms",
                                              "wait_ms", "comm_ms", "step_ms"};

/* the report's "papi" section: what was asked, what counted, and per rank and kind the
 * PAPI real time and the counts (gathered as doubles, see main) */
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

/* forward FLOPs of the whole model for `samples` samples, x3 for forward + backward */
static double model_train_flops(const ppdl_model *m, long samples)
{
    double f = 0;
    for (int i = 0; i < m->L; i++) f += m->layers[i].kind->flops_fwd(&m->layers[i], (int)samples);
    return 3 * f;
}

static int parse_mem_limit(const char *s, int rank, size_t *bytes, char *err, size_t errlen)
{
    *bytes = 0;
    if (!s) return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    char *rest = buf;
    size_t v = 0, mine = 0;
    /* strsep, not strtok: an empty item ("1G,,1G") is a mistake, not a separator */
    for (char *t = strsep(&rest, ","); t; t = strsep(&rest, ","), n++) {
        if (ppdl_parse_size(t, &v) || v == 0)
            return ppdl_errf(err, errlen, "--mem-limit %s: '%s' is not a size like 512M or 2G", s, t);
        if (n == rank) mine = v;
    }
    if (n == 1) mine = v;
    else if (rank >= n)
        return ppdl_errf(err, errlen, "--mem-limit %s: %d sizes for more ranks; give one size, or one per rank", s, n);
    *bytes = mine;
    return 0;
}

/* An output rank 0 writes at the end of the run must be writable now: the path names no
 * folder and its folder takes new files. (A run of hours must not end in "cannot write".) */
static int check_output(const char *opt, const char *path, char *err, size_t errlen)
{
    if (!path) return 0;
    struct stat sb;
    if (!*path) return ppdl_errf(err, errlen, "%s needs a file name", opt);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return ppdl_errf(err, errlen, "%s %s: is a folder; expected a file name", opt, path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    const char *d = dirname(dir);
    if (access(d, W_OK | X_OK) != 0)
        return ppdl_errf(err, errlen, "%s %s: cannot create files in folder %s: %s", opt, path, d, strerror(errno));
    return 0;
}

static int check_outputs(const options *o, char *err, size_t errlen)
{
    return check_output("--report", o->report, err, errlen) || check_output("--trace", o->trace, err, errlen) ||
           check_output("--timeline", o->timeline, err, errlen) || check_output("--save", o->save, err, errlen) ||
           check_output("--cluster-out", o->cluster_out, err, errlen) ||
           check_output("--costs-out", o->costs_out, err, errlen);
}

/* ---- the network (net/probe.h, net/cluster.h, net/netem.h) ---- */

/* The network the job runs on. --netem: the comm layer emulates a cluster file's links
 * from now on (so the probe below measures them too). --cluster: a saved measurement.
 * Otherwise the probe measures when something uses it (--probe-only, --cluster-out,
 * --report), with messages of the model's largest boundary activation per
 * micro-batch; a plain training run skips it. Either way the cluster knows the job's
 * machines (a --cluster file's "hosts", else the job's own). Rank 0 prints the table
 * and writes --cluster-out. Returns 1 when `cl` holds a cluster. */
static int setup_network(const options *o, const ppdl_model *m, ppdl_backend *be, ppdl_comm *comm,
                         ppdl_cluster *cl)
{
    char err[PPDL_ERR_LEN] = "", msg[PPDL_ERR_LEN + 32];
    int rc;
    if (o->netem) {
        ppdl_cluster em;
        rc = ppdl_cluster_read(o->netem, comm->size, &em, err, sizeof err);
        snprintf(msg, sizeof msg, "--netem %s", err);
        all_ranks_ok(rc != 0, msg, 1);
        rc = ppdl_comm_set_netem(comm, &em, err, sizeof err);
        all_ranks_ok(rc != 0, err, 1);
        ppdl_cluster_free(&em);
    }
    if (o->cluster) {
        rc = ppdl_cluster_read(o->cluster, comm->size, cl, err, sizeof err);
        snprintf(msg, sizeof msg, "--cluster %s", err);
        all_ranks_ok(rc != 0, msg, 1);
        /* a file without the machines ("hosts"): this job's, whose cores its ranks share */
        if (cl->hosts.n == 0) ppdl_probe_hosts(comm->comm, be && ppdl_be_device_memory(be), &cl->hosts);
    } else if (o->probe_only || o->cluster_out || o->report || !strcmp(o->plan, "auto")) {
        ppdl_probe_opts po;
        ppdl_probe_defaults(&po);
        long b = o->batch_size / o->micro_batches;
        for (int l = 0; m && l + 1 < m->L; l++)
            if (m->layers[l].out_bytes * (size_t)b > po.act_bytes) po.act_bytes = m->layers[l].out_bytes * (size_t)b;
        rc = parse_mem_limit(o->mem_limit, comm->rank, &po.mem_bytes, err, sizeof err);
        all_ranks_ok(rc != 0, err, 2);
        po.be = be;
        ppdl_probe_run(comm, &po, cl);
    } else {
        return 0;
    }
    int failed = 0;
    if (comm->rank == 0) {
        ppdl_cluster_print(cl, stdout);
        fflush(stdout);
        if (o->cluster_out) failed = ppdl_cluster_write(cl, o->cluster_out, err, sizeof err) != 0;
    }
    all_ranks_ok(failed, err, 1);
    return 1;
}

/* ---- the layers' costs (prof/profile.h, plan/costs.h) ---- */

/* What each layer costs, the planner's input. --costs: every rank reads the file and
 * checks it against the model and this run's micro-batch size. --costs-out: rank 0
 * times every layer alone on its device and writes the file, while the other ranks
 * wait napping (a spinning rank on the same cores would slow the timings). Returns 1
 * when `c` holds costs: with --costs on every rank, with --costs-out on rank 0. */
/* The data reading per micro-batch of b samples (median of 5 after a warm-up): the
 * first stage reads the inputs, the last the targets (runtime.c's load_batch). In a
 * step the layers' work passes through the CPU's caches between two reads, so each
 * timed read here follows a sweep over a buffer the size of the last-level cache: read
 * back to back, HDF5's own structures stayed in cache and a read measured 0.012 ms,
 * against 0.15-0.17 ms inside a step (gpt, 2 ranks), ~7% of the cnn's 8 ms step. */
static int profile_reading(const ppdl_model *m, ppdl_data *data, int b, ppdl_costs *c, char *err, size_t errlen)
{
    size_t in_b = (size_t)b * m->layers[0].in_bytes, tg_b = (size_t)b * ppdl_model_loss_rows(m) * sizeof(int32_t);
    void *in = ppdl_xmalloc(in_b ? in_b : 1);
    int32_t *tg = ppdl_xmalloc(tg_b ? tg_b : 1);
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t sweep_n = llc >= (1L << 20) && llc <= (256L << 20) ? (size_t)llc : (size_t)32 << 20;
    unsigned char *sweep = ppdl_xmalloc(sweep_n);
    double t[2][6];
    int rc = 0;
    for (int r = 0; r < 6 && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++) {
            memset(sweep, r + k, sweep_n);
            double t0 = ppdl_now_s();
            rc = ppdl_data_read(data, (long)r * b % data->n, b, k ? NULL : in, k ? tg : NULL, err, errlen);
            t[k][r] = 1e3 * (ppdl_now_s() - t0);
        }
    for (int k = 0; k < 2 && !rc; k++) { /* median of runs 1..5 */
        double *v = &t[k][1];
        for (int a = 0; a < 5; a++)
            for (int q = a + 1; q < 5; q++)
                if (v[q] < v[a]) { double x = v[a]; v[a] = v[q]; v[q] = x; }
        if (k) c->target_ms = v[2];
        else c->input_ms = v[2];
    }
    free(sweep);
    free(in);
    free(tg);
    return rc;
}

static int setup_costs(const options *o, const ppdl_model *m, ppdl_backend *be, ppdl_comm *comm, ppdl_data *data,
                       ppdl_costs *c)
{
    char err[PPDL_ERR_LEN] = "", msg[PPDL_ERR_LEN + 32] = "";
    int b = (int)(o->batch_size / o->micro_batches), rc = 0;
    memset(c, 0, sizeof *c);
    if (o->costs) {
        rc = ppdl_costs_read(o->costs, c, err, sizeof err);
        if (!rc && ppdl_costs_check_model(c, m, b, o->costs, err, sizeof err)) {
            ppdl_costs_free(c);
            rc = -1;
        }
        snprintf(msg, sizeof msg, "--costs %s", err);
        all_ranks_ok(rc != 0, msg, 1);
        return 1;
    }
    if (!o->costs_out && strcmp(o->plan, "auto")) return 0;
    if (comm->rank == 0) {
        double t0 = ppdl_now_s();
        size_t peak = ppdl_be_peak(be);
        rc = ppdl_profile_layers(m, be, b, NULL, c, err, sizeof err);
        ppdl_be_restore_peak(be, peak); /* the report's peak is the training's, not the profile's */
        if (!rc && profile_reading(m, data, b, c, err, sizeof err)) ppdl_costs_free(c), rc = -1;
        if (!rc && o->costs_out && ppdl_costs_write(o->costs_out, c, err, sizeof err)) {
            ppdl_costs_free(c);
            rc = -1;
        }
        if (!rc) {
            double f = 0, bw = 0;
            for (int l = 0; l < c->L; l++) f += c->layers[l].fwd_ms, bw += c->layers[l].bwd_ms;
            printf("costs: %d layers profiled on rank 0 (%s) at micro-batch size %d in %.2f s: forward %.3f ms, "
                   "backward %.3f ms per micro-batch, %s%s%s\n", c->L, ppdl_be_name(be), b, ppdl_now_s() - t0,
                   f, bw,
                   c->ordered ? "the layers timed in their order"
                              : "each layer timed alone (the device cannot hold the whole model at once)",
                   o->costs_out ? "; written to " : "", o->costs_out ? o->costs_out : "");
            fflush(stdout);
        }
        snprintf(msg, sizeof msg, "%s %s", o->costs_out ? "--costs-out" : "--plan auto: profiling:", err);
    }
    /* everyone learns whether rank 0 succeeded */
    int mine = rc != 0, any = 0;
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    ppdl_comm_waitall_idle(1, &req);
    if (any) {
        if (comm->rank == 0) fprintf(stderr, "ppdl: %s\n", msg);
        MPI_Finalize();
        exit(1);
    }
    return comm->rank == 0;
}

/* ---- --plan auto: rank 0 solves, every rank gets the same plan ---- */

/* An upper bound of any stage's runtime buffers (runtime.h: ppdl_mem_prediction's
 * buffers) for micro-batches of b samples and at most `slots` in flight: the largest
 * layer's saved tensors, work space and activations, as if every boundary were the
 * largest one. */
static double runtime_buffer_bound(const ppdl_model *m, int b, int slots)
{
    double max_act = 0, max_saved = 0, max_work = 0;
    for (int l = 0; l < m->L; l++) {
        const ppdl_layer *ly = &m->layers[l];
        double in = (double)b * ly->in_bytes, out = (double)b * ly->out_bytes;
        max_act = in > max_act ? in : max_act;
        max_act = out > max_act ? out : max_act;
        double sv = 4.0 * ly->kind->saved_floats(ly, b, 0), wk = 4.0 * ly->kind->work_floats(ly, b);
        max_saved = sv > max_saved ? sv : max_saved;
        max_work = wk > max_work ? wk : max_work;
    }
    /* per slot: send + receive + gradient-send buffers; shared: scratch, 3 activations,
     * work; plus 256 bytes of allocator rounding per buffer */
    return slots * 3.0 * max_act + max_saved + 3.0 * max_act + max_work + 256.0 * (4.0 * slots + 16);
}

/* Rank 0 (which holds the probed cluster and the profiled costs) solves for the plan
 * with --method and simulates its step; the plan travels to every rank as JSON text
 * and is read back there like a plan file, so every rank runs exactly what rank 0
 * printed. Returns 0 on every rank, or -1 with the same message on every rank. */
static int plan_auto(const options *o, const ppdl_model *m, const ppdl_costs *costs, const ppdl_cluster *cl,
                     const int *n_options, ppdl_plan *plan, double *simulated_ms, char *err, size_t errlen)
{
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    char *text = NULL;
    long len = 0;
    double sim_ms = 0;
    if (rank == 0) {
        /* The cost model counts parameters, optimizer state and stashes; the runtime
         * also needs its buffers (messages in flight, recompute scratch, work space).
         * Plan with each rank's memory less a bound on those, so that a plan that fits
         * the model fits the device. */
        double reserve = runtime_buffer_bound(m, (int)(o->batch_size / o->micro_batches),
                                              o->schedule == PPDL_SCHED_1F1B ? n_ranks : (int)o->micro_batches);
        double *mem = ppdl_xmalloc((size_t)cl->n * sizeof(double));
        for (int r = 0; r < cl->n; r++) mem[r] = cl->mem[r] > reserve ? cl->mem[r] - reserve : 1;
        ppdl_cluster_model cm;
        ppdl_cluster_model_wrap(&cm, cl->n, cl->bw, cl->lat, mem, cl->speed);
        cm.hosts = cl->hosts; /* the simulator shares a host's cores among its ranks */
        ppdl_plan p;
        memset(&p, 0, sizeof p);
        if (ppdl_plan_solve(costs, &cm, (int)o->micro_batches, o->schedule, o->method, &p, err, errlen) == 0) {
            ppdl_sim sim;
            char serr[PPDL_ERR_LEN];
            if (ppdl_simulate(costs, &cm, &p, (int)o->micro_batches, o->schedule, 0, &sim, serr, sizeof serr) == 0) {
                sim_ms = sim.step_ms;
                ppdl_sim_free(&sim);
            }
            text = ppdl_plan_to_json(&p);
            len = (long)strlen(text) + 1;
        } else {
            char msg[PPDL_ERR_LEN + 16];
            snprintf(msg, sizeof msg, "--plan auto: %s", err);
            text = strdup(msg);
            PPDL_CHECK(text, "out of host memory");
            len = -(long)strlen(text) - 1; /* a failure: the message travels instead */
        }
        ppdl_plan_free(&p);
        free(mem);
    }
    PPDL_CHECK_MPI(MPI_Bcast(&len, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    PPDL_CHECK_MPI(MPI_Bcast(&sim_ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    long n = len < 0 ? -len : len;
    if (rank != 0) text = ppdl_xmalloc((size_t)n);
    PPDL_CHECK_MPI(MPI_Bcast(text, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD));
    int rc;
    if (len < 0) {
        snprintf(err, errlen, "%s", text);
        rc = -1;
    } else {
        rc = ppdl_plan_parse(text, "--plan auto", m->L, n_ranks, n_options, plan, err, errlen);
        if (!rc) snprintf(plan->method, sizeof plan->method, "auto (%s)", o->method);
    }
    free(text);
    *simulated_ms = sim_ms;
    return rc;
}

/* ---- checkpoints and early stops (io/checkpoint.h, core/stop.h) ---- */

/* The checkpoint to resume from: --resume FILE, or with --resume auto the --checkpoint
 * file when it exists (rank 0 looks, every rank gets its answer). NULL: start fresh. */
static const char *resume_path(const options *o)
{
    if (!o->resume) return NULL;
    if (strcmp(o->resume, "auto")) return o->resume;
    int rank, exists = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) exists = access(o->checkpoint, F_OK) == 0;
    PPDL_CHECK_MPI(MPI_Bcast(&exists, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return exists ? o->checkpoint : NULL;
}

/* Host views of a stage's weights and AdamW moments: the arenas themselves when the
 * host can address device memory (the CPU), else host copies. */
typedef struct host_state {
    float *a[3];
    int copies;
} host_state;

static void host_state_get(host_state *h, ppdl_stage *st, int from_device)
{
    float *arena[3] = {st->params, st->adam_m, st->adam_v};
    size_t bytes = st->n_params * sizeof(float);
    h->copies = ppdl_be_device_memory(st->be);
    for (int a = 0; a < 3; a++) {
        h->a[a] = h->copies ? ppdl_xmalloc(bytes + 1) : arena[a];
        if (h->copies && from_device) ppdl_be_copy_d2h(st->be, h->a[a], arena[a], bytes);
    }
}

static void host_state_put(host_state *h, ppdl_stage *st)
{
    float *arena[3] = {st->params, st->adam_m, st->adam_v};
    for (int a = 0; a < 3 && h->copies; a++)
        ppdl_be_copy_h2d(st->be, arena[a], h->a[a], st->n_params * sizeof(float));
}

static void host_state_free(host_state *h)
{
    for (int a = 0; a < 3 && h->copies; a++) free(h->a[a]);
}

/* what the loop needs to checkpoint and to stop early */
typedef struct run_ctl {
    const options *o;
    ppdl_ckpt *ckpt;               /* NULL without --checkpoint */
    ppdl_stage *st;
    ppdl_runtime *rt;
    ppdl_comm *comm;
    const data_source *ds;
    char *plan_json;
    int rank, n_ranks;
    double t0, t_prev;             /* this rank's clock: the run's start, the last agreement */
    double step_est_s;             /* the slowest step so far, over all ranks */
    double ckpt_est_s;             /* the last checkpoint's duration (a guess before the first) */
    double ckpt_total_s;           /* all checkpoints' time on this rank, for the report */
    double ckpt_at_s;              /* the agreed time of the last checkpoint */
    long ckpt_step;                /* steps done at the last checkpoint, -1: none yet */
    int stopped;                   /* the stopping signal, -1: the time limit, 0: not stopped */
    json_t *log;                   /* the checkpoints, for the report */
} run_ctl;

static void write_checkpoint(run_ctl *c, long done, double at_s)
{
    const options *o = c->o;
    char err[PPDL_ERR_LEN] = "";
    host_state h;
    host_state_get(&h, c->st, 1);
    ppdl_ckpt_info info = {
        .step = done, .data_position = c->ds->pos0 + (done - c->ds->step0) * (long long)c->ds->batch_size,
        .adam_t = ppdl_runtime_adam_t(c->rt), .seed = o->seed, .batch_size = o->batch_size,
        .micro_batches = o->micro_batches, .ranks = c->n_ranks, .lr = o->lr, .beta1 = o->beta1,
        .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->weight_decay, .plan_json = c->plan_json,
    };
    snprintf(info.schedule, sizeof info.schedule, "%s", ppdl_schedule_name(o->schedule));
    ppdl_ckpt_stats cs;
    int rc = ppdl_ckpt_write(c->ckpt, o->checkpoint, MPI_COMM_WORLD, h.a[0], h.a[1], h.a[2], &info, &cs,
                             err, sizeof err);
    host_state_free(&h);
    all_ranks_ok(rc == -1, err, 1);   /* the rank that failed explains */
    all_ranks_ok(rc != 0, err, 1);
    c->ckpt_est_s = cs.total_s;
    c->ckpt_total_s += cs.total_s;
    c->ckpt_at_s = at_s + cs.total_s;
    c->ckpt_step = done;
    if (c->rank != 0) return;
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
 * Every rank takes the same decisions from the same agreed numbers. 1: stop now. */
static int between_steps(run_ctl *c, long done)
{
    const options *o = c->o;
    if (o->step_delay_ms) {
        struct timespec ts = {o->step_delay_ms / 1000, (o->step_delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    if (!c->ckpt) return 0;
    double now = ppdl_now_s();
    double mine[3] = {ppdl_stop_signal(), now - c->t0, now - c->t_prev}, all[3];
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
    ppdl_comm_wait(c->comm, &req);
    if (all[2] > c->step_est_s) c->step_est_s = all[2];
    int stop = (int)all[0];
    if (!stop && o->time_limit_s > 0 && ppdl_stop_for_time(all[1], o->time_limit_s, c->step_est_s, c->ckpt_est_s))
        stop = -1;
    int due = stop || (o->checkpoint_every && done % o->checkpoint_every == 0) ||
              (o->checkpoint_every_s > 0 && all[1] - c->ckpt_at_s >= o->checkpoint_every_s);
    if (due) write_checkpoint(c, done, all[1]);
    if (stop && c->rank == 0) {
        printf("stopped after step %ld of %ld (%s): resubmit the same command with --resume %s to continue "
               "(exit status %d)\n", done, o->steps,
               stop == SIGUSR1 ? "SIGUSR1" : stop == SIGTERM ? "SIGTERM" : "the time limit is near",
               o->resume && !strcmp(o->resume, "auto") ? "auto" : o->checkpoint, PPDL_EXIT_CHECKPOINTED);
        fflush(stdout);
    }
    c->stopped = stop;
    c->t_prev = ppdl_now_s();
    return stop != 0;
}

/* ---- the per-step line and report entry ----
 * Rank 0 needs every rank's step time and the last stage's loss. Gathered at the end of
 * the step and waited for there, rank 0 (the first stage, the one that starts the next
 * step) would start it only after the slowest rank's optimizer: measured 3.6 ms a step
 * of lost overlap with 4 ranks on 2 cores. So step k's gather is waited for after step
 * k + 1, and its line printed then. */
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
    json_t *steps_json;
    double total_ms, final_loss, sum_bubble;
    long timed_steps;
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
    lg->final_loss = loss;
    if (step > 0 || o->steps == 1) {
        lg->total_ms += ms;
        lg->timed_steps++;
        lg->sum_bubble += bubble;
    }
    json_t *js = json_object();
    json_object_set_new(js, "step", json_integer(step));
    json_object_set_new(js, "loss", json_real(loss));
    json_object_set_new(js, "ms", json_real(ms));
    json_object_set_new(js, "bubble", json_real(bubble));
    json_array_append_new(lg->steps_json, js);
    if ((step + 1) % lg->log_every == 0 || step == lg->start_step || step + 1 == o->steps) {
        printf("step %5ld/%ld  loss %.4f  %8.1f ms  %8.1f samples/s  %6.2f GFLOP/s  bubble %4.1f%%\n", step + 1,
               o->steps, loss, ms, o->batch_size / (ms / 1e3), lg->flops_step / (ms / 1e3) / 1e9, 100 * bubble);
        fflush(stdout);
    }
}

/* step's numbers start on their way to rank 0; the previous step's are finished first */
static void step_log_post(step_log *lg, long step, const ppdl_step_stats *stats)
{
    step_log_finish(lg);
    double *mine = lg->mine[step % 2];
    mine[0] = stats->loss_sum;
    mine[1] = stats->step_ms;
    mine[2] = stats->compute_ms;
    PPDL_CHECK_MPI(MPI_Igather(mine, 3, MPI_DOUBLE, lg->all[step % 2], 3, MPI_DOUBLE, 0, MPI_COMM_WORLD, &lg->req));
    lg->pending = step;
}

int main(int argc, char **argv)
{
    /* ---- 1. MPI and the command line ---- */
    PPDL_CHECK_MPI(MPI_Init(&argc, &argv));
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    ppdl_set_log_rank(rank);
    char err[PPDL_ERR_LEN] = "";
    options o;
    int prc = parse_options(argc, argv, &o, err, sizeof err);
    if (prc > 0) {
        if (rank == 0) {
            if (prc == 1) usage(stdout);
            else printf("ppdl %s\n", PACKAGE_VERSION);
        }
        MPI_Finalize();
        return 0;
    }
    all_ranks_ok(prc != 0, err, 2);
    all_ranks_ok(rank == 0 && check_outputs(&o, err, sizeof err), err, 2);
    ppdl_papi papi;
    memset(&papi, 0, sizeof papi);
    if (o.papi) all_ranks_ok(ppdl_papi_init(&papi, o.papi, err, sizeof err) != 0, err, 2);
    double t_start = ppdl_now_s();
    /* with somewhere to save the run, a batch system's signal stops it cleanly */
    if (o.checkpoint) ppdl_stop_signals_install();

    /* ---- 2. the model and the data ---- */
    ppdl_model model;
    memset(&model, 0, sizeof model);
    int rc = o.model ? ppdl_model_load_desc(o.model, &model, err, sizeof err) : 0;
    all_ranks_ok(rc != 0, err, 1);
    /* the device, and the network between the ranks: measured, read or emulated */
    long threads = o.threads;
    if (!threads) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int local = ppdl_comm_node_ranks(MPI_COMM_WORLD);
        threads = cores > local ? cores / local : 1;
    }
    ppdl_backend *be = ppdl_backend_create(o.backend, (int)threads, rank, err, sizeof err);
    all_ranks_ok(be == NULL, err, 1);
    ppdl_comm comm;
    ppdl_comm_init(&comm, MPI_COMM_WORLD, o.wait);
    ppdl_cluster cluster;
    int have_cluster = setup_network(&o, o.model ? &model : NULL, be, &comm, &cluster);
    if (o.probe_only) {
        if (have_cluster) ppdl_cluster_free(&cluster);
        ppdl_comm_free(&comm);
        ppdl_backend_destroy(be);
        ppdl_model_free(&model);
        MPI_Finalize();
        return 0;
    }
    ppdl_data data;
    memset(&data, 0, sizeof data);
    rc = ppdl_data_open(o.data, &model, &data, err, sizeof err);
    all_ranks_ok(rc != 0, err, 1);
    /* the run to continue, if any: a checkpoint of this model, whose state and step
     * replace the model file's weights and a fresh optimizer */
    const char *resume = resume_path(&o);
    ppdl_ckpt_info ck;
    memset(&ck, 0, sizeof ck);
    rc = resume ? ppdl_ckpt_read_info(resume, &model, &ck, err, sizeof err) : 0;
    all_ranks_ok(rc != 0, err, 1);
    /* after the resume file's own checks, so that a bad one is named as such */
    rc = o.checkpoint ? ppdl_ckpt_check_path(o.checkpoint, err, sizeof err) : 0;
    all_ranks_ok(rc != 0, err, 1);
    long start_step = resume ? (long)ck.step : 0;
    /* what each layer costs: profiled on rank 0's device (--costs-out) or read (--costs) */
    ppdl_costs costs;
    int have_costs = setup_costs(&o, &model, be, &comm, &data, &costs);

    /* ---- 3. the plan ---- */
    int *n_options = ppdl_xcalloc((size_t)model.L, sizeof(int));
    for (int l = 0; l < model.L; l++) n_options[l] = model.layers[l].kind->n_options;
    ppdl_plan plan;
    double simulated_ms = 0;
    if (!strcmp(o.plan, "auto")) rc = plan_auto(&o, &model, &costs, &cluster, n_options, &plan, &simulated_ms, err, sizeof err);
    else if (!strcmp(o.plan, "uniform")) rc = ppdl_plan_uniform(model.L, n_ranks, &plan, err, sizeof err);
    else if (!strcmp(o.plan, "dp")) rc = ppdl_plan_data_parallel(model.L, n_ranks, &plan, err, sizeof err);
    else rc = ppdl_plan_read(o.plan, model.L, n_ranks, n_options, &plan, err, sizeof err);
    all_ranks_ok(rc != 0, err, 1);
    if (o.recompute) {
        int opt = !strcmp(o.recompute, "full") ? PPDL_RC_FULL
                  : !strcmp(o.recompute, "selective") ? PPDL_RC_SELECTIVE : PPDL_RC_NONE;
        ppdl_plan_set_recompute(&plan, opt, n_options);
    }
    int replica = 0;
    int stage = ppdl_plan_stage_of_rank(&plan, rank, &replica);
    PPDL_CHECK(stage >= 0, "rank %d has no stage in the plan", rank);
    const ppdl_plan_stage *ps = &plan.stages[stage];
    int max_replicas = 1, *layout = ppdl_xcalloc((size_t)plan.S, sizeof(int)); /* replicas per stage */
    for (int s = 0; s < plan.S; s++)
        if ((layout[s] = plan.stages[s].n_replicas) > max_replicas) max_replicas = plan.stages[s].n_replicas;
    snprintf(err, sizeof err, "--micro-batches %ld: a stage has %d replicas, each needs at least one "
                              "micro-batch (give at least %d)", o.micro_batches, max_replicas, max_replicas);
    all_ranks_ok(o.micro_batches < max_replicas, err, 2);
    /* the replicas of this rank's stage sum their gradients among themselves */
    MPI_Comm replica_comm = MPI_COMM_NULL;
    PPDL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, stage, replica, &replica_comm));
    /* each stage's memory, predicted from the layers' sizes before anything is allocated */
    ppdl_mem_prediction *pred = ppdl_xcalloc((size_t)plan.S, sizeof *pred);
    for (int s = 0; s < plan.S; s++) {
        ppdl_op_list ol;
        const ppdl_plan_stage *p = &plan.stages[s];
        ppdl_schedule_build_replica(o.schedule, plan.S, (int)o.micro_batches, layout, s, 0, &ol);
        pred[s] = ppdl_runtime_predict_memory(&model, p->first, p->last, (int)(o.batch_size / o.micro_batches),
                                              ppdl_schedule_max_in_flight(&ol), ppdl_runtime_inbox_size(&ol),
                                              p->recompute, s == 0, s == plan.S - 1);
        plan.stages[s].mem_bytes = pred[s].cost_model;
        ppdl_op_list_free(&ol);
    }
    free(layout);

    /* ---- 4. this rank's stage ---- */
    ppdl_be_set_stage(be, stage);
    size_t mem_limit = 0;
    rc = parse_mem_limit(o.mem_limit, rank, &mem_limit, err, sizeof err);
    ppdl_be_set_limit(be, mem_limit);
    all_ranks_ok(rc != 0, err, 2);

    ppdl_stage st;
    ppdl_stage_alloc_params(&st, &model, be, ps->first, ps->last);
    float *host = ppdl_xmalloc((st.n_params ? st.n_params : 1) * sizeof(float));
    ppdl_stage_alloc_optimizer(&st);
    double resume_read_s = 0;
    if (!resume) {
        rc = ppdl_model_load_params(o.model, &model, ps->first, ps->last, host, err, sizeof err);
        all_ranks_ok(rc != 0, err, 1);
        ppdl_be_copy_h2d(be, st.params, host, st.n_params * sizeof(float));
    } else {
        /* weights and AdamW moments of this stage's layers, wherever they were before */
        host_state h;
        host_state_get(&h, &st, 0);
        rc = ppdl_ckpt_read_layers(resume, MPI_COMM_WORLD, &model, ps->first, ps->last, h.a[0], h.a[1], h.a[2],
                                   &resume_read_s, err, sizeof err);
        all_ranks_ok(rc != 0, err, 1);
        host_state_put(&h, &st);
        host_state_free(&h);
        PPDL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &resume_read_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    }

    data_source ds = {&data, o.batch_size, start_step, resume ? ck.data_position : 0};
    ppdl_runtime_cfg cfg = {
        .schedule = o.schedule, .S = plan.S, .stage = stage,
        .replica = replica, .n_replicas = ps->n_replicas,
        .prev_ranks = stage > 0 ? plan.stages[stage - 1].ranks : NULL,
        .n_prev = stage > 0 ? plan.stages[stage - 1].n_replicas : 0,
        .next_ranks = stage + 1 < plan.S ? plan.stages[stage + 1].ranks : NULL,
        .n_next = stage + 1 < plan.S ? plan.stages[stage + 1].n_replicas : 0,
        .replica_comm = ps->n_replicas > 1 ? replica_comm : MPI_COMM_NULL,
        .M = (int)o.micro_batches, .batch_size = (int)o.batch_size, .recompute = ps->recompute,
        .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay, .record_events = o.trace || o.timeline,
        .skip_nonfinite = o.skip_nonfinite, .papi = o.papi ? &papi : NULL,
    };
    ppdl_runtime *rt = ppdl_runtime_create(&st, &cfg, (ppdl_batch_source){&ds, read_batch}, &comm);
    if (o.papi && rank == 0 && papi.note[0]) printf("--papi: %s\n", papi.note);
    if (resume) ppdl_runtime_set_adam_t(rt, (int)ck.adam_t);
    /* checkpoints: stage replicas after the first hold the same weights, only the first writes */
    run_ctl ctl = {.o = &o, .st = &st, .rt = rt, .comm = &comm, .ds = &ds, .rank = rank, .n_ranks = n_ranks,
                   .t0 = t_start, .ckpt_step = resume ? start_step : -1, .log = json_array()};
    if (o.checkpoint) {
        ctl.ckpt = ppdl_ckpt_create(o.model, &model, ps->first, replica == 0 ? ps->last : ps->first - 1, err,
                                    sizeof err);
        all_ranks_ok(ctl.ckpt == NULL, err, 1);
        ctl.plan_json = ppdl_plan_to_json(&plan);
        /* before the first checkpoint, guess its time pessimistically: 50 MB/s for the
         * weights and moments, plus a second */
        ctl.ckpt_est_s = 1.0 + 3.0 * 4 * (double)ppdl_model_param_count(&model) / 50e6;
    }

    if (rank == 0) {
        char pb[32];
        printf("ppdl %s: %s model %s, %d layers, %.2f M parameters (%s); data %s, %ld samples\n",
               PACKAGE_VERSION, model.family, o.model, model.L, ppdl_model_param_count(&model) / 1e6,
               ppdl_fmt_bytes(ppdl_model_param_count(&model) * sizeof(float), pb, sizeof pb), o.data, data.n);
        printf("%d rank%s, schedule %s, batch %ld = %ld micro-batches of %ld, backend %s, %ld thread%s/rank, %s wait\n",
               n_ranks, n_ranks > 1 ? "s" : "", ppdl_schedule_name(o.schedule), o.batch_size,
               o.micro_batches, o.batch_size / o.micro_batches, ppdl_be_name(be), threads,
               threads > 1 ? "s" : "", comm.yield ? "yielding" : "blocking");
        printf("plan (%s):\n  stage  rank  layers     memory (predicted)      kinds (rc: full recompute, sel: selective)\n",
               plan.method);
        for (int s = 0; s < plan.S; s++) {
            const ppdl_plan_stage *p = &plan.stages[s];
            char kinds[256] = "";
            size_t len = 0;
            for (int l = p->first; l <= p->last && len < sizeof kinds - 40; l++) {
                int opt = p->recompute[l - p->first];
                len += (size_t)snprintf(kinds + len, sizeof kinds - len, "%s%s%s", l > p->first ? " " : "",
                                        model.layers[l].kind->name,
                                        opt == PPDL_RC_FULL ? "(rc)" : opt == PPDL_RC_SELECTIVE ? "(sel)" : "");
            }
            char mb1[32], ranks[64] = "";
            size_t rl = 0;
            for (int i = 0; i < p->n_replicas && rl + 12 < sizeof ranks; i++)
                rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d", i ? "," : "", p->ranks[i]);
            printf("  %5d  %4s  %4d-%-5d %10s             %s\n", s, ranks, p->first, p->last,
                   ppdl_fmt_bytes((size_t)pred[s].total, mb1, sizeof mb1), kinds);
        }
        if (plan.predicted_iter_ms > 0)
            printf("predicted step: %.2f ms by the cost model, %.2f ms by the simulator (bottleneck %.2f ms)\n",
                   plan.predicted_iter_ms, simulated_ms, plan.bottleneck_ms);
        fflush(stdout);
    }
    if (resume && rank == 0) {
        printf("resumed from %s: %lld steps done (AdamW step %lld, data position %lld), written by %lld rank%s "
               "(%s); read in %.2f s (the slowest rank)\n", resume, ck.step, ck.adam_t, ck.data_position,
               ck.ranks, ck.ranks > 1 ? "s" : "", ck.schedule, resume_read_s);
        if (ck.batch_size != o.batch_size)
            printf("note: the checkpoint ran with --batch-size %lld, now %ld: the data goes on from sample %lld\n",
                   ck.batch_size, o.batch_size, ck.data_position);
        if (ck.lr != o.lr || ck.beta1 != o.beta1 || ck.beta2 != o.beta2 || ck.eps != o.eps ||
            ck.weight_decay != o.weight_decay)
            printf("note: AdamW's hyperparameters differ from the checkpoint's (lr %g, betas %g %g, eps %g, "
                   "weight decay %g): the command line's are used\n", ck.lr, ck.beta1, ck.beta2, ck.eps,
                   ck.weight_decay);
        if (start_step >= o.steps)
            printf("nothing to train: the checkpoint has %ld steps, --steps is %ld\n", start_step, o.steps);
        fflush(stdout);
    }

    /* ---- 5. train ---- */
    double flops_step = model_train_flops(&model, o.batch_size);
    int loss_rows = ppdl_model_loss_rows(&model);
    long log_every = o.log_every ? o.log_every : (o.steps > 20 ? o.steps / 20 : 1);
    json_t *steps_json = json_array();
    /* where each rank's time went, summed over the run (the report's breakdown) */
    enum { N_BREAKDOWN = 7 };
    double breakdown[N_BREAKDOWN] = {0};
    step_log lg = {.rank = rank, .n_ranks = n_ranks, .pending = -1, .comm = &comm, .o = &o, .start_step = start_step,
                   .log_every = log_every, .loss_rows = loss_rows, .flops_step = flops_step,
                   .steps_json = steps_json, .final_loss = NAN};
    for (int k = 0; k < 2; k++) lg.all[k] = rank == 0 ? ppdl_xmalloc(3 * (size_t)n_ranks * sizeof(double)) : NULL;
    ctl.t_prev = ppdl_now_s();
    int nonfinite_exit = 0;
    int output_failed = 0;     /* rank 0: a requested output file could not be written */
    for (long step = start_step; step < o.steps; step++) {
        /* a checkpoint's or a stop's message comes after the previous step's line */
        if (ctl.ckpt) step_log_finish(&lg);
        if (step > start_step && between_steps(&ctl, step)) break;
        ppdl_step_stats stats;
        ppdl_runtime_step(rt, step, &stats);
        for (int k = 0; k < N_BREAKDOWN; k++) breakdown[k] += breakdown_of(&stats, k);
        if (stats.nonfinite_stage >= 0) {
            step_log_finish(&lg); /* the previous step's line first */
            /* every rank has the same verdict: the stage that found it explains */
            if (stats.nonfinite_stage == stage)
                fprintf(stderr, "ppdl: step %ld, stage %d (rank %d): %s; %s\n", step + 1, stage, rank,
                        ppdl_runtime_nonfinite_what(rt),
                        o.skip_nonfinite ? "step skipped, weights unchanged"
                                         : "stopping without writing the broken state "
                                           "(--skip-nonfinite skips such steps instead)");
            if (!o.skip_nonfinite) {
                nonfinite_exit = 4; /* no checkpoint, no saved model of the broken state */
                break;
            }
        }
        step_log_post(&lg, step, &stats);
    }
    step_log_finish(&lg);
    double total_ms = lg.total_ms, final_loss = lg.final_loss, sum_bubble = lg.sum_bubble;
    long timed_steps = lg.timed_steps;
    for (int k = 0; k < 2; k++) free(lg.all[k]);
    /* the finished run's state, unless the last checkpoint already holds it */
    if (ctl.ckpt && !ctl.stopped && !nonfinite_exit &&
        ctl.ckpt_step != (start_step > o.steps ? start_step : o.steps))
        write_checkpoint(&ctl, o.steps, 0);

    /* ---- 6. report, trace, timeline, weights ---- */
    ppdl_mem_breakdown mb = ppdl_runtime_memory(rt);
    double mem_mine[7] = {(double)ppdl_be_peak(be), (double)mb.params, (double)mb.optimizer,
                          (double)mb.stash, (double)mb.buffers, (double)stage, (double)mb.allocations};
    enum { MEM_FIELDS = 7 };
    double *bd_all = rank == 0 ? ppdl_xmalloc(N_BREAKDOWN * (size_t)n_ranks * sizeof(double)) : NULL;
    /* PAPI: per kind, the real time and each event's count (as doubles: exact to 2^53) */
    enum { PAPI_FIELDS = PPDL_PAPI_N_KINDS * (1 + PPDL_PAPI_MAX_EVENTS) };
    double papi_mine[PAPI_FIELDS] = {0}, *papi_all = NULL;
    if (o.papi) {
        for (int k = 0; k < PPDL_PAPI_N_KINDS; k++) {
            papi_mine[k * (1 + PPDL_PAPI_MAX_EVENTS)] = (double)papi.real_ns[k];
            for (int e = 0; e < papi.n_events; e++)
                papi_mine[k * (1 + PPDL_PAPI_MAX_EVENTS) + 1 + e] = (double)papi.counts[k][e];
        }
        papi_all = rank == 0 ? ppdl_xmalloc(PAPI_FIELDS * (size_t)n_ranks * sizeof(double)) : NULL;
        PPDL_CHECK_MPI(MPI_Gather(papi_mine, PAPI_FIELDS, MPI_DOUBLE, papi_all, PAPI_FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    }
    PPDL_CHECK_MPI(MPI_Gather(breakdown, N_BREAKDOWN, MPI_DOUBLE, bd_all, N_BREAKDOWN, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    double ckpt_ms = 1e3 * ctl.ckpt_total_s, *ckpt_ms_all = rank == 0 ? ppdl_xmalloc((size_t)n_ranks * sizeof(double)) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(&ckpt_ms, 1, MPI_DOUBLE, ckpt_ms_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    double *mem_all = rank == 0 ? ppdl_xmalloc(MEM_FIELDS * (size_t)n_ranks * sizeof(double)) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(mem_mine, MEM_FIELDS, MPI_DOUBLE, mem_all, MEM_FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD));

    double *clock_all = NULL; /* per rank: its clock's offset from rank 0's and the bound, ms */
    if (o.trace || o.timeline) {
        /* one time axis for all ranks: each rank's events are relative to its own step
         * start, which differ (each began after its own optimizer), and ranks on other
         * nodes have other clocks; shift all onto rank 0's clock, origin the earliest
         * start (net/clock_sync.h) */
        double clk[2];
        ppdl_clock_offset(MPI_COMM_WORLD, &clk[0], &clk[1]);
        double start = ppdl_runtime_step_start(rt) - clk[0], first_start;
        PPDL_CHECK_MPI(MPI_Allreduce(&start, &first_start, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
        clock_all = rank == 0 ? ppdl_xmalloc(2 * (size_t)n_ranks * sizeof(double)) : NULL;
        PPDL_CHECK_MPI(MPI_Gather(clk, 2, MPI_DOUBLE, clock_all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        int n_ev;
        const ppdl_event_rec *ev_own = ppdl_runtime_events(rt, &n_ev);
        ppdl_event_rec *ev = ppdl_xmalloc((size_t)n_ev * sizeof *ev + 1);
        double shift_ms = 1e3 * (start - first_start);
        for (int i = 0; i < n_ev; i++) {
            ev[i] = ev_own[i];
            ev[i].t0_ms += shift_ms;
            ev[i].t1_ms += shift_ms;
        }
        int nbytes = n_ev * (int)sizeof *ev, *counts = NULL, *displs = NULL, total = 0;
        if (rank == 0) {
            counts = ppdl_xmalloc((size_t)n_ranks * sizeof(int));
            displs = ppdl_xmalloc((size_t)n_ranks * sizeof(int));
        }
        PPDL_CHECK_MPI(MPI_Gather(&nbytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (rank == 0)
            for (int r = 0; r < n_ranks; r++) { displs[r] = total; total += counts[r]; }
        ppdl_event_rec *all_ev = rank == 0 ? ppdl_xmalloc((size_t)total + 1) : NULL;
        PPDL_CHECK_MPI(MPI_Gatherv(ev, nbytes, MPI_BYTE, all_ev, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            int n_all = total / (int)sizeof *ev;
            char title[256];
            snprintf(title, sizeof title, "ppdl: %s, %d ranks, %s, M=%ld, last step", model.family, n_ranks,
                     ppdl_schedule_name(o.schedule), o.micro_batches);
            if (o.trace && ppdl_trace_write_json(o.trace, all_ev, n_all, n_ranks, err, sizeof err)) {
                fprintf(stderr, "ppdl: --trace %s\n", err);
                output_failed = 1;
            }
            if (o.timeline && ppdl_timeline_write_svg(o.timeline, all_ev, n_all, n_ranks, title, err, sizeof err)) {
                fprintf(stderr, "ppdl: --timeline %s\n", err);
                output_failed = 1;
            }
        }
        free(all_ev);
        free(ev);
        free(counts);
        free(displs);
    }

    if (o.save && ctl.stopped && rank == 0)
        printf("--save %s skipped: the run stopped before step %ld (its state is in %s)\n", o.save, o.steps,
               o.checkpoint);
    if (o.save && !ctl.stopped && !nonfinite_exit) {
        /* gather the stages' weights to rank 0 in layer order (from each stage's first
         * replica: the replicas hold the same weights), write one model file */
        ppdl_be_copy_d2h(be, host, st.params, st.n_params * sizeof(float));
        int n_mine = replica == 0 ? (int)st.n_params : 0, *counts = NULL, *displs = NULL;
        float *all_p = NULL;
        if (rank == 0) {
            counts = ppdl_xcalloc((size_t)n_ranks, sizeof(int));
            displs = ppdl_xcalloc((size_t)n_ranks, sizeof(int));
        }
        PPDL_CHECK_MPI(MPI_Gather(&n_mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            int off = 0;
            for (int s = 0; s < plan.S; s++) {
                displs[plan.stages[s].rank] = off;
                off += counts[plan.stages[s].rank];
            }
            all_p = ppdl_xmalloc((size_t)off * sizeof(float) + 1);
        }
        PPDL_CHECK_MPI(MPI_Gatherv(host, n_mine, MPI_FLOAT, all_p, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD));
        int failed = 0;
        if (rank == 0) failed = ppdl_model_save(o.save, &model, all_p, err, sizeof err) != 0;
        free(all_p);
        free(counts);
        free(displs);
        all_ranks_ok(failed, err, 1);
    }

    if (rank == 0) {
        double mean_ms = timed_steps ? total_ms / timed_steps : 0;
        double sps = mean_ms > 0 ? o.batch_size / (mean_ms / 1e3) : 0;
        printf("done: %ld steps, final loss %.4f, %.1f ms/step, %.1f samples/s, %.2f GFLOP/s, bubble %.1f%% "
               "(steps after the first)\n",
               ctl.stopped ? ctl.ckpt_step : o.steps, final_loss, mean_ms, sps,
               mean_ms > 0 ? flops_step / (mean_ms / 1e3) / 1e9 : 0,
               timed_steps ? 100 * sum_bubble / timed_steps : 0);
        printf("memory per rank (measured peak vs predicted before the run):\n"
               "  rank  stage       peak  predicted     params  optimizer      stash    buffers\n");
        for (int r = 0; r < n_ranks; r++) {
            char a[32], b1[32], c[32], d[32], e[32], f[32];
            double *m = &mem_all[MEM_FIELDS * r];
            printf("  %4d  %5d  %9s  %9s  %9s  %9s  %9s  %9s\n", r, (int)m[5],
                   ppdl_fmt_bytes((size_t)m[0], a, sizeof a), ppdl_fmt_bytes((size_t)pred[(int)m[5]].total, f, sizeof f),
                   ppdl_fmt_bytes((size_t)m[1], b1, sizeof b1), ppdl_fmt_bytes((size_t)m[2], c, sizeof c),
                   ppdl_fmt_bytes((size_t)m[3], d, sizeof d), ppdl_fmt_bytes((size_t)m[4], e, sizeof e));
        }
        if (o.report) {
            json_t *rep = json_object();
            json_object_set_new(rep, "ppdl_version", json_string(PACKAGE_VERSION));
            json_object_set_new(rep, "model", json_string(o.model));
            json_object_set_new(rep, "family", json_string(model.family));
            json_object_set_new(rep, "parameters", json_integer((json_int_t)ppdl_model_param_count(&model)));
            json_object_set_new(rep, "ranks", json_integer(n_ranks));
            json_object_set_new(rep, "schedule", json_string(ppdl_schedule_name(o.schedule)));
            json_object_set_new(rep, "micro_batches", json_integer(o.micro_batches));
            json_object_set_new(rep, "batch_size", json_integer(o.batch_size));
            json_object_set_new(rep, "threads", json_integer(threads));
            json_object_set_new(rep, "backend", json_string(ppdl_be_name(be)));
            json_object_set_new(rep, "seed", json_integer(o.seed));
            char *pj = ppdl_plan_to_json(&plan);
            json_object_set_new(rep, "plan", json_loads(pj, 0, NULL));
            free(pj);
            if (have_cluster) {
                char *cj = ppdl_cluster_to_json(&cluster);
                json_object_set_new(rep, "cluster", json_loads(cj, 0, NULL));
                free(cj);
            } else {
                json_object_set_new(rep, "cluster", json_null());
            }
            json_object_set_new(rep, "steps", steps_json);
            steps_json = NULL;
            json_object_set_new(rep, "samples_per_s", json_real(sps));
            json_object_set_new(rep, "gflops", json_real(mean_ms > 0 ? flops_step / (mean_ms / 1e3) / 1e9 : 0));
            json_object_set_new(rep, "bubble", json_real(timed_steps ? sum_bubble / timed_steps : 0));
            json_t *mem = json_array();
            for (int r = 0; r < n_ranks; r++) {
                double *m = &mem_all[MEM_FIELDS * r];
                const ppdl_mem_prediction *pr = &pred[(int)m[5]];
                json_t *jm = json_object();
                json_object_set_new(jm, "rank", json_integer(r));
                json_object_set_new(jm, "stage", json_integer((int)m[5]));
                json_object_set_new(jm, "peak_bytes", json_integer((json_int_t)m[0]));
                json_object_set_new(jm, "predicted_bytes", json_integer((json_int_t)pr->total));
                json_object_set_new(jm, "cost_model_bytes", json_integer((json_int_t)pr->cost_model));
                json_object_set_new(jm, "predicted_buffer_bytes", json_integer((json_int_t)pr->buffers));
                json_object_set_new(jm, "params_bytes", json_integer((json_int_t)m[1]));
                json_object_set_new(jm, "optimizer_bytes", json_integer((json_int_t)m[2]));
                json_object_set_new(jm, "stash_bytes", json_integer((json_int_t)m[3]));
                json_object_set_new(jm, "buffer_bytes", json_integer((json_int_t)m[4]));
                json_object_set_new(jm, "allocations", json_integer((json_int_t)m[6]));
                json_array_append_new(mem, jm);
            }
            json_object_set_new(rep, "memory", mem);
            /* per rank: where the time of all steps went; communication that is not
             * waited for overlaps compute, so "other" is bookkeeping and data loading */
            json_t *bd = json_array();
            for (int r = 0; r < n_ranks; r++) {
                json_t *jb = json_object();
                double *b = &bd_all[N_BREAKDOWN * r], accounted = 0;
                json_object_set_new(jb, "rank", json_integer(r));
                json_object_set_new(jb, "stage", json_integer((int)mem_all[MEM_FIELDS * r + 5]));
                for (int k = 0; k < N_BREAKDOWN; k++) {
                    json_object_set_new(jb, breakdown_names[k], json_real(b[k]));
                    if (k < N_BREAKDOWN - 1) accounted += b[k];
                }
                json_object_set_new(jb, "other_ms", json_real(b[N_BREAKDOWN - 1] - accounted));
                /* checkpoints are written between steps, outside step_ms */
                json_object_set_new(jb, "checkpoint_ms", json_real(ckpt_ms_all ? ckpt_ms_all[r] : 0));
                json_array_append_new(bd, jb);
            }
            json_object_set_new(rep, "breakdown", bd);
            /* what the planner predicted next to what was measured (steps after the first) */
            json_t *pv = json_object();
            json_object_set_new(pv, "cost_model_ms", plan.predicted_iter_ms > 0 ? json_real(plan.predicted_iter_ms) : json_null());
            json_object_set_new(pv, "simulated_ms", simulated_ms > 0 ? json_real(simulated_ms) : json_null());
            json_object_set_new(pv, "measured_ms", json_real(mean_ms));
            json_object_set_new(rep, "prediction", pv);
            if (clock_all) {
                /* how the trace's ranks were put on one time axis (net/clock_sync.h) */
                json_t *jc = json_array();
                for (int r = 0; r < n_ranks; r++)
                    json_array_append_new(jc, json_pack("{s:i, s:f, s:f}", "rank", r, "offset_ms",
                                                        1e3 * clock_all[2 * r], "error_ms", 1e3 * clock_all[2 * r + 1]));
                json_object_set_new(rep, "trace_clock", jc);
            }
            if (o.papi) json_object_set_new(rep, "papi", papi_report(&papi, papi_all, n_ranks, o.papi));
            json_object_set_new(rep, "final_loss", isfinite(final_loss) ? json_real(final_loss) : json_null());
            json_object_set_new(rep, "resumed_from", resume ? json_pack("{s:s, s:I, s:f}", "file", resume, "step",
                                                                        (json_int_t)start_step, "read_s",
                                                                        resume_read_s) : json_null());
            json_object_set_new(rep, "checkpoints", json_incref(ctl.log));
            json_object_set_new(rep, "stopped", !ctl.stopped ? json_null()
                                : json_string(ctl.stopped == SIGUSR1 ? "SIGUSR1" : ctl.stopped == SIGTERM ? "SIGTERM"
                                                                                                          : "time limit"));
            char tmp[4200];
            snprintf(tmp, sizeof tmp, "%s.tmp", o.report);
            if (json_dump_file(rep, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) ||
                rename(tmp, o.report)) {
                fprintf(stderr, "ppdl: --report %s: cannot write the report\n", o.report);
                remove(tmp);
                output_failed = 1;
            }
            json_decref(rep);
        }
        fflush(stdout);
    }
    json_decref(steps_json);

    ppdl_runtime_destroy(rt);
    ppdl_stage_free(&st);
    ppdl_data_close(&data);
    ppdl_plan_free(&plan);
    if (have_costs) ppdl_costs_free(&costs);
    ppdl_model_free(&model);
    ppdl_backend_destroy(be);
    ppdl_comm_free(&comm);
    if (have_cluster) ppdl_cluster_free(&cluster);
    free(host);
    free(mem_all);
    free(clock_all);
    free(n_options);
    free(pred);
    free(bd_all);
    free(ckpt_ms_all);
    free(papi_all);
    if (o.papi) ppdl_papi_finish(&papi);
    MPI_Comm_free(&replica_comm);
    ppdl_ckpt_destroy(ctl.ckpt);
    ppdl_ckpt_info_free(&ck);
    free(ctl.plan_json);
    json_decref(ctl.log);
    MPI_Finalize();
    /* stopped early with a checkpoint: the job script resubmits on this status */
    return nonfinite_exit ? nonfinite_exit : ctl.stopped ? PPDL_EXIT_CHECKPOINTED : output_failed ? 1 : 0;
}
