/* run_options.c — ppdl's command line: --help's text, the parser (every rank parses
 * the same argv), the checks that need no file, and the values derived from it. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/finish.h"
#include "core/options.h"
#include "core/stop.h"
#include "core/util.h"
#include "pipe/p2p_choice.h"
#include "plan/planner.h"
#include "sched/schedule.h"

void run_options_usage(FILE *f)
{
    fprintf(f,
"usage: mpiexec -n N ppdl MODEL.h5 --data DATA.h5 [options]\n"
"\n"
"Train MODEL.h5 on N MPI ranks with its layers split into pipeline stages, each on\n"
"one rank or on several (replicas that split the micro-batches). On 2 or more ranks\n"
"ppdl plans this itself (--plan auto): it measures the network and the layers, and\n"
"picks the stages, their ranks and what each layer recomputes. Micro-batches flow\n"
"forward through the stages and gradients flow back; after every step (all\n"
"micro-batches of one mini-batch) each stage updates its weights with AdamW. The\n"
"losses and weights do not depend on N (to float rounding where a stage has replicas).\n"
"\n"
"Training:\n"
"  --data FILE.h5          training data made by ppdl-data (required)\n"
"  --steps K               optimizer steps (default 10)\n"
"  --batch-size B          samples per step, the mini-batch (default 8)\n"
"  --micro-batches M       micro-batches per step; must divide B (default 4)\n"
"  --lr X                  AdamW learning rate (default 1e-3)\n"
"  --weight-decay X        AdamW weight decay (default 1e-2) on the tensors of 2 or more\n"
"                          dimensions (matrices, kernels, embeddings), not on biases or\n"
"                          layer-norm weights, as nanoGPT and llm.c; --decay-all: on\n"
"                          every parameter; --beta1, --beta2, --eps too\n"
"  --lr-schedule constant|cosine|linear|wsd\n"
"                          the learning rate of each step (default constant), llm.c's\n"
"                          formulas: after --warmup K steps rising linearly to --lr,\n"
"                          cosine: min + (lr - min)(1 + cos(pi r))/2, linear:\n"
"                          lr - (lr - min) r, with r going 0 -> 1 up to --decay-steps\n"
"                          (default --steps); wsd: --lr until the last --decay-fraction\n"
"                          F (default 0.2) of the steps after the warm-up, then\n"
"                          min + (lr - min)(1 - sqrt(r)) over them\n"
"  --warmup K, --min-lr X (or --min-lr-ratio R: R x lr), --decay-steps K, --decay-fraction F\n"
"  --clip-grad-norm X      scale every gradient by min(1, X / ||g||), ||g|| the L2 norm\n"
"                          over all parameters of the model (every stage; a replicated\n"
"                          stage once): the same bits on any number of ranks\n"
"  --seed S                recorded in the report\n"
"  --shuffle SEED          visit the rows in a new random order each epoch, drawn from\n"
"                          SEED and the epoch alone: the same order on any number of\n"
"                          ranks and across resumes (default: in order, row k*B on)\n"
"  --val-data FILE.h5      held-out data (ppdl-data ... --val-fraction or --val-out):\n"
"                          its mean loss over --eval-batches N batches of the\n"
"                          mini-batch size (default: as many as it holds, at most 50),\n"
"                          forward only through the same pipeline, before the first\n"
"                          step, every --eval-every K steps and after the last\n"
"  --sample-every K        every K steps (and after the last) rank 0 prints what the\n"
"                          model writes: --sample-tokens N tokens (default 64) after\n"
"                          --sample-prompt TEXT (byte-level models, or any with\n"
"                          --tokenizer; default: the first 8 tokens of the data's first\n"
"                          row), temperature 0.8, top-k 40, seed --seed + step (gpt\n"
"                          models; the weights are gathered to rank 0 for it, nothing else)\n"
"  --tokenizer FILE        with --sample-every: the data's tokenizer (tokenizer.json, or\n"
"                          llm.c's gpt2_tokenizer.bin): samples print as text\n"
"  --skip-nonfinite        skip a step whose loss or gradients are not finite (default:\n"
"                          stop, naming the step, stage and layer; nothing is written)\n"
"  --shard-optimizer on|off\n"
"                          the AdamW moments of a stage with k replicas cut into k\n"
"                          slices, each replica keeping and updating its own and then\n"
"                          gathering the weights (ZeRO-1): 8 + 8/k bytes per parameter\n"
"                          instead of 16, the same bits (default: on wherever a stage\n"
"                          has replicas, the backend's memory is MPI's and there is no\n"
"                          --netem)\n"
"\n"
"Pipeline:\n"
"  --schedule 1f1b|gpipe|zb-h1|zb-h2|zb-1p|interleaved|zb-v|auto\n"
"                          1f1b (default): PipeDream-Flush, stage s keeps at most\n"
"                          min(M, N-s) micro-batches of activations; gpipe keeps M;\n"
"                          zb-h1, zb-h2, zb-1p: zero bubble, each backward split into\n"
"                          B (the input gradient, sent at once) and W (the weight\n"
"                          gradient, run where a stage would wait): 1f1b's bubble\n"
"                          shrinks (where F = B = W: by about 2/3 with zb-h1, to the\n"
"                          pipeline's fill with zb-h2, by 1/3 with zb-1p; less where\n"
"                          W is shorter than B); stage s keeps up to N\n"
"                          (zb-h1, the most 1f1b keeps on a stage), 2N-1 (zb-h2) or\n"
"                          min(M, N-s) (zb-1p, as 1f1b) micro-batches, plus what W\n"
"                          needs until it runs. Same losses and weights as 1f1b, bit\n"
"                          for bit, replicated stages included (each replica plays\n"
"                          its own micro-batches' passes). Their passes (zb-v's too)\n"
"                          are ordered by each stage's F, B and W times: rank 0\n"
"                          profiles the layers at start (or reads --costs);\n"
"                          auto: the planner chooses (with --plan auto: it plans once\n"
"                          per schedule, each with its own cost model and memory, and\n"
"                          takes the least predicted step, 1f1b on ties; interleaved\n"
"                          v=2..4 and zb-v too, taken only where the simulator also\n"
"                          plays them faster; with a plan\n"
"                          file: the schedule the file records; one stage: 1f1b;\n"
"                          else, given --costs and --cluster, the least predicted\n"
"                          step for that plan); the header says which ran and why;\n"
"                          interleaved (Megatron's interleaved 1F1B) and zb-v (zero\n"
"                          bubble in a V) give each rank several stages (chunks of\n"
"                          layers): the bubble shrinks by about the number of\n"
"                          chunks, for as many more messages; with --plan uniform\n"
"                          (their default), --plan auto (the planner's cut) or a plan\n"
"                          file; tied embeddings included; not yet with --p2p nccl\n"
"  --virtual-stages V      stages per rank of --schedule interleaved (2 to 8, default\n"
"                          2; zb-v: 2): --plan uniform cuts the layers into V x N\n"
"                          equal stages placed round-robin (zb-v: in a V), --plan\n"
"                          auto chooses the cut and the recompute options\n"
"  --copies K              with --plan uniform: K copies of the pipeline, each on N/K\n"
"                          ranks (copy q on ranks qN/K..), each running every K-th\n"
"                          micro-batch, their gradients summed per stage (data\n"
"                          parallelism across copies; with interleaved and zb-v too;\n"
"                          --replicas K, the old spelling, still works)\n"
"  --plan auto|uniform|dp|FILE\n"
"                          auto (the default on 2 or more ranks): measure the network,\n"
"                          profile the layers, and solve for the stages, their ranks\n"
"                          (one each, or replicas) and recompute; prints the plan, its\n"
"                          kind (\"pipeline, 4 stages\", \"2 stages x 2 replicas\") and\n"
"                          how long the probe, the profile and the solve took. Where\n"
"                          ranks outnumber a machine's cores, the plan is the one whose\n"
"                          simulated step, cores shared, is the least;\n"
"                          uniform: equal layer counts on ranks 0..N-1 (1 rank: the\n"
"                          default, nothing to plan); dp: data parallelism, the whole\n"
"                          model on every rank; FILE: a plan JSON (stages, ranks or\n"
"                          replicas, recompute; docs/planner.md), nothing probed or solved;\n"
"                          FILE,FILE,...: 2 to 8 plan files, each run in trials (as\n"
"                          --plan-trials) and the fastest trains\n"
"  --method NAME           how --plan auto solves: ppdl (default: partition, placement,\n"
"                          recompute and replicas, exact where ppdl-plan says so),\n"
"                          ppdl-pipeline (one stage per rank), ppdl-inorder (ranks in\n"
"                          order), or a baseline to compare with: dp, uniform, params,\n"
"                          time, pipedream, each also with -rc (full recompute); the\n"
"                          plan's line names it (ppdl-plan --compare shows them all)\n"
"  --plan-trials K         where ranks outnumber a machine's cores (--plan auto; or a\n"
"                          close call: another family simulated within 10%%), the\n"
"                          plan chosen and K-1 others (other families first: data\n"
"                          parallel, pipeline, replicated stages) each run 2 x 6 steps\n"
"                          and the fastest trains (the trials change no result);\n"
"                          default: 4, or the first 2 or 3 of them, as many as cost\n"
"                          under max(1 s, 5%% of the run), else none; 0: none\n"
"  --trial-passes P        runs of each candidate in the trials, interleaved (A B A B),\n"
"                          its least median counting (default 2, up to 50): more for a\n"
"                          surer choice where the candidates are close\n"
"  --plan-out FILE.json    write the plan that runs (any --plan), in the format\n"
"                          --plan FILE reads: plan once, reuse it\n"
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
"  --backend auto|cpu|cuda compute device; auto (default): CUDA where this build has\n"
"                          it and every rank sees a usable GPU of its own (or\n"
"                          PPDL_CUDA_SHARE=1), the CPU otherwise; it says which and why\n"
"  --p2p auto|nccl|mpi     how stages send each other activations and gradients, and\n"
"                          replicas sum gradients: nccl, NCCL between the GPUs'\n"
"                          memories; mpi, MPI from host memory (on GPUs staged\n"
"                          through it); auto (default): nccl with the cuda backend\n"
"                          where every rank has a GPU of its own, mpi otherwise; the\n"
"                          header says which runs and why\n"
"  --threads T             compute threads per rank (default: cores / ranks on the node)\n"
"  --precision fp32|bf16   arithmetic (default fp32). bf16: mixed precision as PyTorch's\n"
"                          autocast: fp32 weights and AdamW state, GEMMs on bf16-rounded\n"
"                          operands summed in fp32, every layer's output and input\n"
"                          gradient rounded to bf16, messages between stages sent as\n"
"                          bf16 (half the bytes); layer norm, softmax and the loss in\n"
"                          fp32. Bitwise the same on any ranks and plans (CPU backend)\n"
"\n"
"Network:\n"
"  --probe-only            measure the network and devices, print them, and stop\n"
"                          (MODEL.h5 and --data are optional then; a model sets the\n"
"                          activation size measured)\n"
"  --cluster-out FILE.json write the measurement (CLUSTER.json); the probe runs with\n"
"                          this, --probe-only, --report or --plan auto (a few 100 ms;\n"
"                          its table is printed with the first two and an explicit\n"
"                          --plan auto)\n"
"  --cluster FILE.json     use a saved measurement instead of probing\n"
"  --netem FILE.json       emulate that cluster's network: every message between\n"
"                          ranks i, j takes latency + bytes/bandwidth of the link\n"
"  --costs-out FILE.json   write the layers' costs --plan auto profiles (COSTS.json,\n"
"                          what ppdl-plan plans with): every distinct layer timed on\n"
"                          rank 0's device at this run's micro-batch size (forward,\n"
"                          backward, each recompute option; median of 5, or of 3 for\n"
"                          layers over 20 ms), then the model in its order; bytes\n"
"  --costs FILE.json       use saved layer costs instead: no profile (checked against\n"
"                          the model and the micro-batch size)\n"
"\n"
"Output:\n"
"  --papi EVENTS           count PAPI events (e.g. PAPI_TOT_CYC,PAPI_TOT_INS) per stage\n"
"                          and per forward/backward/optimizer, in the report; where\n"
"                          the machine has no counters it says why and times only\n"
"  --log-every K           progress line every K steps (default: about 20 lines per run)\n"
"  --report FILE.json      losses, throughput, plan and memory per rank\n"
"  --log FILE.jsonl        one JSON line per step as the run goes (step, epoch, loss,\n"
"                          lr, grad_norm, ms, samples/s, tokens/s, bubble); a resumed\n"
"                          run continues the file, so a chain of jobs leaves one log\n"
"  --loss-plot FILE.svg    training and validation loss against the step (and the\n"
"                          tokens seen), at every checkpoint and at the end; open it in\n"
"                          a browser; --loss-plot-scale log for a logarithmic loss axis\n"
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
"  mpiexec -n 2 ./ppdl gpt.h5 --data text.h5 --steps 50 --batch-size 16 --micro-batches 4\n"
"  mpiexec -n 4 ./ppdl gpt.h5 --data text.h5 --steps 5 --plan-out plan.json   # plan once\n"
"  mpiexec -n 4 ./ppdl gpt.h5 --data text.h5 --steps 5000 --plan plan.json    # reuse it\n"
"\n"
"Every file's fields (model, data, checkpoint, plan, cluster, costs, report, trace):\n"
"docs/formats.md; the manual: docs/README.md in the source tree.\n"
"Every option with its default, and the exit statuses: docs/cli.md.\n");
}


const char *run_precision_name(int precision) { return precision == PPDL_PREC_BF16 ? "bf16" : "fp32"; }

/* Every rank parses the same argv; on an error rank 0 explains and all exit. */
int run_options_parse(int argc, char **argv, int n_ranks, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->steps = 10;
    o->batch_size = 8;
    o->micro_batches = 4;
    o->schedule = PPDL_SCHED_1F1B;
    o->plan = NULL; /* not given: auto on 2 or more ranks, uniform (nothing to plan) on 1 */
    o->method = "ppdl";
    o->plan_trials = -1;
    o->trial_passes = 0; /* not given: 2 */
    o->backend = "auto";
    o->p2p = PPDL_P2P_AUTO;
    o->shard_optimizer = -1;
    o->wait = -1;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 1e-2;
    o->seed = 1234;
    o->lr_schedule_name = "constant";
    o->shuffle = -1;
    o->min_lr = -1;
    o->min_lr_ratio = -1;
    o->decay_fraction = 0.2;
    enum { O_DATA = 256, O_STEPS, O_BATCH, O_MICRO, O_SCHED, O_PLAN, O_MEM, O_LR, O_WD, O_B1, O_B2,
           O_EPS, O_SEED, O_REPORT, O_TRACE, O_TIMELINE, O_SAVE, O_THREADS, O_BACKEND, O_WAIT,
           O_RECOMP, O_LOG, O_SKIPNF, O_CKPT, O_CKPT_EVERY, O_RESUME, O_TIME_LIMIT, O_STEP_DELAY,
           O_PROBE_ONLY, O_CLUSTER, O_CLUSTER_OUT, O_NETEM, O_PAPI, O_COSTS, O_COSTS_OUT, O_METHOD, O_LR_SCHED, O_WARMUP, O_MIN_LR, O_MIN_LR_RATIO,
           O_DECAY_STEPS, O_DECAY_FRAC, O_CLIP, O_DECAY_ALL, O_SHUFFLE, O_RUNLOG, O_VAL_DATA, O_EVAL_EVERY,
           O_EVAL_BATCHES, O_LOSS_PLOT, O_LOSS_PLOT_SCALE, O_PLAN_OUT, O_SAMPLE_EVERY, O_SAMPLE_TOKENS,
           O_SAMPLE_PROMPT, O_TOKENIZER, O_SHARD_OPT, O_P2P, O_PRECISION, O_VSTAGES, O_COPIES, O_REPLICAS, O_PLAN_TRIALS, O_TRIAL_PASSES, O_HELP, O_VERSION };
    static const struct option longopts[] = {
        {"probe-only", no_argument, 0, O_PROBE_ONLY}, {"cluster", required_argument, 0, O_CLUSTER},
        {"costs", required_argument, 0, O_COSTS}, {"costs-out", required_argument, 0, O_COSTS_OUT},
        {"cluster-out", required_argument, 0, O_CLUSTER_OUT}, {"netem", required_argument, 0, O_NETEM},
        {"data", required_argument, 0, O_DATA}, {"steps", required_argument, 0, O_STEPS},
        {"batch-size", required_argument, 0, O_BATCH}, {"micro-batches", required_argument, 0, O_MICRO},
        {"schedule", required_argument, 0, O_SCHED}, {"plan", required_argument, 0, O_PLAN},
        {"plan-out", required_argument, 0, O_PLAN_OUT}, {"virtual-stages", required_argument, 0, O_VSTAGES},
        {"copies", required_argument, 0, O_COPIES}, {"replicas", required_argument, 0, O_REPLICAS}, {"plan-trials", required_argument, 0, O_PLAN_TRIALS},
        {"trial-passes", required_argument, 0, O_TRIAL_PASSES},
        {"mem-limit", required_argument, 0, O_MEM}, {"lr", required_argument, 0, O_LR},
        {"weight-decay", required_argument, 0, O_WD}, {"beta1", required_argument, 0, O_B1},
        {"beta2", required_argument, 0, O_B2}, {"eps", required_argument, 0, O_EPS},
        {"seed", required_argument, 0, O_SEED}, {"report", required_argument, 0, O_REPORT},
        {"trace", required_argument, 0, O_TRACE}, {"timeline", required_argument, 0, O_TIMELINE},
        {"save", required_argument, 0, O_SAVE}, {"threads", required_argument, 0, O_THREADS},
        {"backend", required_argument, 0, O_BACKEND}, {"wait", required_argument, 0, O_WAIT},
        {"p2p", required_argument, 0, O_P2P}, {"precision", required_argument, 0, O_PRECISION},
        {"recompute", required_argument, 0, O_RECOMP}, {"log-every", required_argument, 0, O_LOG},
        {"skip-nonfinite", no_argument, 0, O_SKIPNF}, {"shard-optimizer", required_argument, 0, O_SHARD_OPT},
        {"papi", required_argument, 0, O_PAPI},
        {"method", required_argument, 0, O_METHOD},
        {"lr-schedule", required_argument, 0, O_LR_SCHED}, {"warmup", required_argument, 0, O_WARMUP},
        {"min-lr", required_argument, 0, O_MIN_LR}, {"min-lr-ratio", required_argument, 0, O_MIN_LR_RATIO},
        {"decay-steps", required_argument, 0, O_DECAY_STEPS}, {"decay-fraction", required_argument, 0, O_DECAY_FRAC},
        {"clip-grad-norm", required_argument, 0, O_CLIP}, {"decay-all", no_argument, 0, O_DECAY_ALL},
        {"checkpoint", required_argument, 0, O_CKPT}, {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
        {"resume", required_argument, 0, O_RESUME}, {"time-limit", required_argument, 0, O_TIME_LIMIT},
        {"step-delay", required_argument, 0, O_STEP_DELAY}, {"shuffle", required_argument, 0, O_SHUFFLE},
        {"log", required_argument, 0, O_RUNLOG}, {"val-data", required_argument, 0, O_VAL_DATA},
        {"eval-every", required_argument, 0, O_EVAL_EVERY}, {"loss-plot", required_argument, 0, O_LOSS_PLOT},
        {"loss-plot-scale", required_argument, 0, O_LOSS_PLOT_SCALE},
        {"sample-every", required_argument, 0, O_SAMPLE_EVERY}, {"sample-tokens", required_argument, 0, O_SAMPLE_TOKENS},
        {"sample-prompt", required_argument, 0, O_SAMPLE_PROMPT}, {"tokenizer", required_argument, 0, O_TOKENIZER}, {"eval-batches", required_argument, 0, O_EVAL_BATCHES},
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
            if (o->schedule < 0)
                return ppdl_errf(err, errlen, "--schedule %s: expected 1f1b, gpipe, zb-h1, zb-h2, zb-1p, interleaved, "
                                 "zb-v or auto", a);
            break;
        case O_VSTAGES: {
            long v;
            if (ppdl_parse_int(a, 2, PPDL_MAX_CHUNKS, &v))
                return ppdl_errf(err, errlen, "--virtual-stages %s: expected stages per rank from 2 to %d", a,
                                 PPDL_MAX_CHUNKS);
            o->virtual_stages = (int)v;
            break;
        }
        case O_COPIES:
        case O_REPLICAS: { /* --replicas: the old spelling of --copies */
            long k;
            if (ppdl_parse_int(a, 1, 1 << 20, &k))
                return ppdl_errf(err, errlen, "--%s %s: expected copies of the pipeline, an integer >= 1",
                                 c == O_COPIES ? "copies" : "replicas", a);
            o->copies = (int)k;
            o->old_replicas = c == O_REPLICAS;
            break;
        }
        case O_PLAN_TRIALS: {
            long k;
            if (ppdl_parse_int(a, 0, PPDL_PLAN_MAX_CANDIDATES, &k) || k == 1)
                return ppdl_errf(err, errlen, "--plan-trials %s: expected 0 (none) or the candidate plans to measure, "
                                 "2 to %d", a, PPDL_PLAN_MAX_CANDIDATES);
            o->plan_trials = (int)k;
            break;
        }
        case O_TRIAL_PASSES: {
            long k;
            if (ppdl_parse_int(a, 1, PPDL_MAX_TRIAL_PASSES, &k))
                return ppdl_errf(err, errlen, "--trial-passes %s: expected the runs of each candidate, 1 to %d", a,
                                 PPDL_MAX_TRIAL_PASSES);
            o->trial_passes = (int)k;
            break;
        }
        case O_PLAN: o->plan = a; break;
        case O_PLAN_OUT: o->plan_out = a; break;
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
        case O_RUNLOG: o->log = a; break;
        case O_VAL_DATA: o->val_data = a; break;
        case O_LOSS_PLOT: o->loss_plot = a; break;
        case O_SAMPLE_EVERY:
            if (ppdl_parse_int(a, 1, LONG_MAX, &o->sample_every)) return ppdl_errf(err, errlen, "--sample-every %s: expected a number of steps >= 1", a);
            break;
        case O_SAMPLE_TOKENS:
            if (ppdl_parse_int(a, 1, 100000, &o->sample_tokens)) return ppdl_errf(err, errlen, "--sample-tokens %s: expected an integer in [1, 100000]", a);
            break;
        case O_SAMPLE_PROMPT:
            if (!*a) return ppdl_errf(err, errlen, "--sample-prompt is empty: give some text to continue");
            o->sample_prompt = a;
            break;
        case O_TOKENIZER:
            o->tokenizer = a;
            break;
        case O_LOSS_PLOT_SCALE:
            if (strcmp(a, "linear") && strcmp(a, "log"))
                return ppdl_errf(err, errlen, "--loss-plot-scale %s: expected linear or log", a);
            o->loss_plot_log = !strcmp(a, "log");
            break;
        case O_EVAL_EVERY:
            if (ppdl_parse_int(a, 1, LONG_MAX, &o->eval_every)) return ppdl_errf(err, errlen, "--eval-every %s: expected a number of steps >= 1", a);
            break;
        case O_EVAL_BATCHES:
            if (ppdl_parse_int(a, 1, 1 << 20, &o->eval_batches)) return ppdl_errf(err, errlen, "--eval-batches %s: expected an integer in [1, 1048576]", a);
            break;
        case O_TRACE: o->trace = a; break;
        case O_TIMELINE: o->timeline = a; break;
        case O_SAVE: o->save = a; break;
        case O_THREADS:
            if (ppdl_parse_int(a, 1, 1024, &o->threads)) return ppdl_errf(err, errlen, "--threads %s: expected an integer in [1, 1024]", a);
            break;
        case O_BACKEND:
            if (strcmp(a, "auto") && strcmp(a, "cpu") && strcmp(a, "cuda"))
                return ppdl_errf(err, errlen, "--backend %s: expected auto, cpu or cuda", a);
            o->backend = a;
            break;
        case O_P2P:
            o->p2p = ppdl_p2p_parse(a);
            if (o->p2p < 0) return ppdl_errf(err, errlen, "--p2p %s: expected auto, nccl or mpi", a);
            break;
        case O_PRECISION:
            if (!strcmp(a, "fp32")) o->precision = PPDL_PREC_FP32;
            else if (!strcmp(a, "bf16")) o->precision = PPDL_PREC_BF16;
            else return ppdl_errf(err, errlen, "--precision %s: expected fp32 or bf16", a);
            break;
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
        case O_SHARD_OPT:
            if (!strcmp(a, "on")) o->shard_optimizer = 1;
            else if (!strcmp(a, "off")) o->shard_optimizer = 0;
            else return ppdl_errf(err, errlen, "--shard-optimizer %s: expected on or off", a);
            break;
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
        case O_LR_SCHED:
            if (ppdl_lr_parse(a) < 0)
                return ppdl_errf(err, errlen, "--lr-schedule %s: expected constant, cosine, linear or wsd", a);
            o->lr_schedule_name = a;
            break;
        case O_WARMUP:
            if (ppdl_parse_int(a, 0, LONG_MAX / 2, &o->warmup)) return ppdl_errf(err, errlen, "--warmup %s: expected a number of steps >= 0", a);
            break;
        case O_MIN_LR:
            if (ppdl_parse_float(a, 0, 10, &o->min_lr)) return ppdl_errf(err, errlen, "--min-lr %s: expected a number in [0, 10]", a);
            break;
        case O_MIN_LR_RATIO:
            if (ppdl_parse_float(a, 0, 1, &o->min_lr_ratio)) return ppdl_errf(err, errlen, "--min-lr-ratio %s: expected a number in [0, 1]", a);
            break;
        case O_DECAY_STEPS:
            if (ppdl_parse_int(a, 1, LONG_MAX / 2, &o->decay_steps)) return ppdl_errf(err, errlen, "--decay-steps %s: expected a number of steps >= 1", a);
            break;
        case O_DECAY_FRAC:
            if (ppdl_parse_float(a, 0, 1, &o->decay_fraction)) return ppdl_errf(err, errlen, "--decay-fraction %s: expected a number in [0, 1]", a);
            break;
        case O_CLIP:
            if (ppdl_parse_float(a, 0, 1e30, &o->clip_grad_norm) || !(o->clip_grad_norm > 0))
                return ppdl_errf(err, errlen, "--clip-grad-norm %s: expected a norm > 0 (e.g. 1.0)", a);
            break;
        case O_DECAY_ALL: o->decay_all = 1; break;
        case O_SHUFFLE: {
            long seed;
            if (ppdl_parse_int(a, 0, LONG_MAX, &seed)) return ppdl_errf(err, errlen, "--shuffle %s: expected a seed, an integer >= 0", a);
            o->shuffle = seed;
            break;
        }
        case 'h':
        case O_HELP: return 1;
        case O_VERSION: return 2;
        case ':': return ppdl_errf(err, errlen, "%s needs a value (see --help)", argv[optind - 1]);
        default: return ppdl_option_refused(argv[optind - 1], longopts, "ppdl", err, errlen);
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
    if (!o->sample_every && (o->sample_tokens || o->sample_prompt || o->tokenizer))
        return ppdl_errf(err, errlen, "%s needs --sample-every K (how often to sample)",
                         o->sample_tokens ? "--sample-tokens" : o->sample_prompt ? "--sample-prompt" : "--tokenizer");
    if (!o->sample_tokens) o->sample_tokens = 64;
    if (!o->val_data && (o->eval_every || o->eval_batches))
        return ppdl_errf(err, errlen, "%s needs --val-data FILE.h5 (the data to evaluate on)",
                         o->eval_every ? "--eval-every" : "--eval-batches");
    /* derived once, read everywhere */
    o->plan_defaulted = o->plan == NULL;
    /* the schedules of several stages per rank: their default plan is uniform
     * (--virtual-stages v per rank); --plan auto searches the cut (plan/solve_chunked.h) */
    int chunked = o->schedule >= 0 && o->schedule < PPDL_SCHED_N_KINDS && ppdl_schedule_chunked(o->schedule);
    if (!o->plan) o->plan = n_ranks > 1 && !chunked ? "auto" : "uniform";
    if (o->virtual_stages && !chunked)
        return ppdl_errf(err, errlen, "--virtual-stages %d: only --schedule interleaved (or zb-v, 2) holds several "
                         "stages per rank", o->virtual_stages);
    if (o->schedule == PPDL_SCHED_ZB_V && o->virtual_stages && o->virtual_stages != 2)
        return ppdl_errf(err, errlen, "--virtual-stages %d: zb-v holds 2 stages per rank (its V)", o->virtual_stages);
    if (!o->virtual_stages) o->virtual_stages = 2;
    o->plan_mode = !strcmp(o->plan, "auto")      ? PLAN_AUTO
                   : !strcmp(o->plan, "uniform") ? PLAN_UNIFORM
                   : !strcmp(o->plan, "dp")      ? PLAN_DP
                                                 : PLAN_FILE;
    if (o->copies > 1 && o->plan_mode != PLAN_UNIFORM)
        return ppdl_errf(err, errlen, "--%s %d: only --plan uniform takes it (a plan file names its replicas, "
                         "--plan auto chooses them)", o->old_replicas ? "replicas" : "copies", o->copies);
    if (o->copies > 1 && n_ranks % o->copies != 0)
        return ppdl_errf(err, errlen, "--%s %d: expected a divisor of the %d ranks (each copy of the pipeline "
                         "runs on as many ranks)", o->old_replicas ? "replicas" : "copies", o->copies, n_ranks);
    if (!o->copies) o->copies = 1;
    if (o->plan_trials > 0 && o->plan_mode != PLAN_AUTO && !o->plan_defaulted)
        return ppdl_errf(err, errlen, "--plan-trials %d: only --plan auto takes it (it measures the planner's "
                         "candidates)", o->plan_trials);
    /* --plan F1,F2,...: the files are the trials' candidates (run_trials.c), with the
     * trials' limits */
    o->plan_files = 0;
    if (o->plan_mode == PLAN_FILE && strchr(o->plan, ',')) {
        o->plan_files = 1;
        for (const char *ch = o->plan; *ch; ch++) o->plan_files += *ch == ',';
        if (o->plan_files > PPDL_PLAN_MAX_CANDIDATES)
            return ppdl_errf(err, errlen, "--plan %s: %d plan files, expected at most %d to measure against each "
                             "other", o->plan, o->plan_files, PPDL_PLAN_MAX_CANDIDATES);
        if (o->schedule == PPDL_SCHED_AUTO || chunked)
            return ppdl_errf(err, errlen, "--plan %s: several plan files are measured against each other under one "
                             "schedule of one stage per rank (gpipe, 1f1b, zb-h1, zb-h2, zb-1p), not --schedule %s",
                             o->plan, o->schedule == PPDL_SCHED_AUTO ? "auto" : ppdl_schedule_name(o->schedule));
    }
    if (o->trial_passes && o->plan_mode != PLAN_AUTO && !o->plan_files)
        return ppdl_errf(err, errlen, "--trial-passes %d: only the trials take it (--plan auto, or several plan "
                         "files)", o->trial_passes);
    if (!o->trial_passes) o->trial_passes = 2;
    o->micro_batch_size = (int)(o->batch_size / o->micro_batches);
    o->resume_auto = o->resume && !strcmp(o->resume, "auto");
    o->record_events = o->trace || o->timeline;
    if (o->min_lr >= 0 && o->min_lr_ratio >= 0)
        return ppdl_errf(err, errlen, "--min-lr and --min-lr-ratio both given: give one");
    ppdl_lr_schedule *ls = &o->lr_sched;
    ls->kind = ppdl_lr_parse(o->lr_schedule_name);
    ls->lr = o->lr;
    ls->min_lr = o->min_lr >= 0 ? o->min_lr : o->min_lr_ratio >= 0 ? o->min_lr_ratio * o->lr : 0;
    ls->warmup = o->warmup;
    ls->decay_steps = o->decay_steps ? o->decay_steps : o->steps;
    ls->decay_fraction = o->decay_fraction;
    if (ls->min_lr > o->lr)
        return ppdl_errf(err, errlen, "--min-lr %g is above --lr %g: the schedule decays from --lr to it", ls->min_lr, o->lr);
    if (ls->kind != PPDL_LR_CONSTANT && ls->decay_steps <= ls->warmup)
        return ppdl_errf(err, errlen, "--decay-steps %ld (default --steps) must be above --warmup %ld: the %s "
                                      "decay runs between them", ls->decay_steps, ls->warmup, o->lr_schedule_name);
    return 0;
}

int run_options_mem_limit(const char *s, int rank, size_t *bytes, char *err, size_t errlen)
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

int run_options_check_outputs(const options *o, char *err, size_t errlen)
{
    return check_output("--report", o->report, err, errlen) || check_output("--trace", o->trace, err, errlen) ||
           check_output("--timeline", o->timeline, err, errlen) || check_output("--save", o->save, err, errlen) ||
           check_output("--cluster-out", o->cluster_out, err, errlen) ||
           check_output("--costs-out", o->costs_out, err, errlen) || check_output("--log", o->log, err, errlen) ||
           check_output("--loss-plot", o->loss_plot, err, errlen) ||
           check_output("--plan-out", o->plan_out, err, errlen);
}

int run_start(run *r, int argc, char **argv)
{
    memset(r, 0, sizeof *r);
    for (int c = 0; c < PPDL_MAX_CHUNKS; c++) r->local[c].replica_comm = MPI_COMM_NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->n_ranks);
    ppdl_set_log_rank(r->rank);
    char err[PPDL_ERR_LEN] = "";
    int prc = run_options_parse(argc, argv, r->n_ranks, &r->o, err, sizeof err);
    if (prc > 0) {
        if (r->rank == 0) {
            if (prc == 1) run_options_usage(stdout);
            else printf("ppdl %s\n", PACKAGE_VERSION);
        }
        return 1;
    }
    agree_or_end_job(prc != 0, err, 2);
    if (r->o.old_replicas && r->rank == 0)
        printf("note: --replicas is the old name of --copies (copies of the whole pipeline; a replica is a copy "
               "of one stage)\n");
    agree_or_end_job(r->rank == 0 && run_options_check_outputs(&r->o, err, sizeof err), err, 2);
    if (r->o.papi) agree_or_end_job(ppdl_papi_init(&r->papi, r->o.papi, err, sizeof err) != 0, err, 2);
    double fin_s;
    agree_or_end_job(ppdl_finalize_timeout(&fin_s, err, sizeof err) != 0, err, 2);
    r->t_start = ppdl_now_s();
    /* a batch system's signal stops the run cleanly after a step: with a checkpoint to
     * resume from (status 75), or without (128 + the signal, as a shell reports it) */
    ppdl_stop_signals_install();
    return 0;
}
