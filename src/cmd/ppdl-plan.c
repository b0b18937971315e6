/* ppdl-plan.c — plan offline: read COSTS.json and CLUSTER.json, choose the stages, the
 * rank of each stage and what each layer recomputes, print the plan, the predicted and
 * the simulated step time. No MPI ranks or devices needed.
 *
 *   1. read the command line, the costs and the cluster
 *   2. plan with the chosen method (or every method with --compare)
 *   3. print the table (or the plan JSON), simulate, draw the timeline
 */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/planner.h"
#include "plan/reserve.h"
#include "plan/schedule_choice.h"
#include "plan/simulate.h"
#include "plan/solver.h"
#include "plan/vocab.h"
#include "prof/timeline.h"

typedef struct options {
    const char *costs, *cluster, *method, *timeline;
    long M, exact_ranks, exact_layouts, virtual_stages;
    int schedule, json, compare, method_given, vocab;
    int shard;                 /* --shard-optimizer: 1 on (default), 0 off */
} options;

static void usage(FILE *f)
{
    fprintf(f,
"usage: ppdl-plan --costs COSTS.json --cluster CLUSTER.json --micro-batches M [options]\n"
"\n"
"Plan a pipeline offline. The costs say what each layer of the model costs (forward\n"
"and backward ms, parameter, activation and stash bytes, recompute options); ppdl\n"
"writes them with `ppdl MODEL.h5 --costs-out COSTS.json`. The cluster says how fast\n"
"each pair of ranks talks (bandwidth and latency matrices), and each rank's memory and\n"
"relative speed (docs/formats.md: CLUSTER.json). ppdl-plan chooses the stages, which layers\n"
"each runs, which ranks run it (one, or several replicas that split the micro-batches\n"
"and sum their gradients) and what each layer recomputes, to minimise the predicted\n"
"time of one training step. With one rank per stage:\n"
"\n"
"  T = sum of stage times + 2 x sum of link times + (M-1) x the slowest stage or link\n"
"\n"
"with every stage inside its rank's memory (stage s holds min(M, N-s) micro-batches\n"
"under 1f1b, M under gpipe). With replicas (micro-batch j on replica j mod k):\n"
"\n"
"  T = micro-batch 0's path + the busiest replica or rank pair's other micro-batches\n"
"      + the slowest stage's gradient all-reduce (ring: 2(k-1)/k bytes / slowest link)\n"
"\n"
"A tied weight (COSTS.json \"tied\": a gpt's wte = lm_head.weight) is held once where\n"
"one stage has the first and the last layer; else both stages hold it and add the time\n"
"of exchanging its gradient to T, and the memory of the gradient they receive.\n"
"(docs/cost-model.md in the source tree). Then it plays the schedule with these costs (links as\n"
"queues) and prints the simulated step time next to the prediction, and (gpipe, 1f1b) a\n"
"lower bound no plan's T beats, with how far above it the plan is.\n"
"\n"
"Options:\n"
"  --costs FILE            per-layer costs (COSTS.json; required)\n"
"  --cluster FILE          the ranks and their links (CLUSTER.json; required)\n"
"  --micro-batches M       micro-batches per step (required)\n"
"  --schedule 1f1b|gpipe|zb-h1|zb-h2|zb-1p|interleaved|zb-v|auto\n"
"                          default 1f1b; zb-h1, zb-h2, zb-1p (zero bubble, ppdl\n"
"                          --help) run pipelines and replicated stages, B and W from\n"
"                          COSTS.json, and have their own memory (zb-1p: 1f1b's on\n"
"                          every stage) and T: phi x sum of stage times + 2 x links +\n"
"                          (M-1) x bottleneck, phi < 1 the share of the fill W cannot\n"
"                          hide (docs/cost-model.md); auto: plan once per schedule,\n"
"                          print each one's best plan and take the least T (ties:\n"
"                          1f1b, zb-1p, zb-h1, zb-h2, interleaved v=2, 3, 4, zb-v in\n"
"                          that order; gpipe, 1f1b's T with more memory, never wins\n"
"                          and is not solved);\n"
"                          interleaved, zb-v (several stages per rank): --method ppdl\n"
"                          (default) searches the cut and the recompute options, the\n"
"                          ranks in the schedule's order (round-robin, or a V);\n"
"                          --method uniform: V x N equal stages; both evaluated,\n"
"                          simulated and drawn as ppdl runs them\n"
"  --virtual-stages V      stages per rank of --schedule interleaved (2 to 8, default\n"
"                          2; zb-v: 2)\n"
"  --method NAME           ppdl (default): stages, replicas, placement and recompute\n"
"                          together; ppdl-pipeline: one stage per rank (partition,\n"
"                          placement, recompute); ppdl-inorder: one stage per rank, ranks\n"
"                          kept in order 0..N-1; baselines (ranks in order, no memory\n"
"                          awareness; '-rc' adds full recompute on every layer):\n"
"                          dp[-rc] (data parallelism: every layer on every rank, as\n"
"                          ppdl --plan dp), uniform[-rc] (equal layer\n"
"                          counts), params[-rc] (balanced parameters, DeepSpeed),\n"
"                          time[-rc] (balanced time, torchgpipe), pipedream[-rc]\n"
"                          (time and transfers, one bandwidth for every link)\n"
"  --compare               plan with every method and print their T side by side\n"
"  --json                  print the plan as JSON (the format `ppdl --plan FILE` reads)\n"
"  --timeline FILE.svg     draw the simulated step (ranks as rows, time as x)\n"
"  --vocab-parallel auto|on|off\n"
"                          cut the head (COSTS.json \"vocab\": a gpt's) by vocabulary\n"
"                          into one slice per rank, the blocks one stage per rank,\n"
"                          played as a zb-v V (docs/cost-model.md \"Vocabulary\n"
"                          parallelism\"); auto (default): where it fits and both its\n"
"                          T and its simulated step beat the plan without; on: always\n"
"                          (--schedule zb-v or auto); off: never. ppdl does not run\n"
"                          such plans yet\n"
"  --exact-ranks N         exact placement (one stage per rank) up to N ranks (default\n"
"                          10; above: groups of fast-linked ranks and local search)\n"
"  --exact-layouts N       every layout of replicated stages up to N ranks (default 6;\n"
"                          above: layouts from the groups of fast-linked ranks and local\n"
"                          moves)\n"
"  --shard-optimizer on|off\n"
"                          on (default): the replicas of a stage shard its AdamW state\n"
"                          (m and v), each holding its slice's only, the slices sized to\n"
"                          the replicas' memories where they differ; off: every replica\n"
"                          holds all of it (as ppdl --shard-optimizer)\n"
"  --help, --version\n"
"\n"
"Ranks column: the stage's replicas (replica 0 first). Recompute column, one character\n"
"per layer: . keeps everything, F full recompute (the\n"
"layer's forward runs again before its backward), S selective (transformer blocks:\n"
"attention and MLP internals recomputed), a digit for any other option.\n"
"\n"
"Example:\n"
"  mpiexec -n 1 ./ppdl gpt.h5 --data text.h5 --steps 1 --batch-size 16 --micro-batches 4 \\\n"
"      --costs-out costs.json\n"
"  ppdl-plan --costs costs.json --cluster cluster.json --micro-batches 4 --compare\n"
"  ppdl-plan --costs costs.json --cluster cluster.json --micro-batches 4 --json > plan.json\n"
"  mpiexec -n 4 ./ppdl gpt.h5 --data text.h5 --micro-batches 4 --plan plan.json\n"
"\n"
"Exit status: 0 a plan that fits; 1 no plan fits in memory (the message names the\n"
"stage and by how much it is over) or a bad input file; 2 a bad command line.\n"
"The file formats, field by field: docs/formats.md; the planner: docs/planner.md.\n"
"Every option with its default, and the exit statuses: docs/cli.md.\n");
}

/* several stages per rank (interleaved, zb-v): the chunked search (method ppdl, and
 * the names of one stage per rank's searches, which mean it here) or the uniform cut */
static int chunked_options(options *o, char *err, size_t errlen)
{
    int chunked = o->schedule != PPDL_SCHED_AUTO && ppdl_schedule_chunked(o->schedule);
    const char *name = chunked ? ppdl_schedule_name(o->schedule) : "";
    if (!chunked && o->virtual_stages)
        return ppdl_errf(err, errlen, "--virtual-stages %ld: only --schedule interleaved (or zb-v, 2) holds several "
                         "stages per rank", o->virtual_stages);
    if (!chunked) return 0;
    if (o->schedule == PPDL_SCHED_ZB_V && o->virtual_stages && o->virtual_stages != 2)
        return ppdl_errf(err, errlen, "--virtual-stages %ld: zb-v holds 2 stages per rank (its V)", o->virtual_stages);
    if (strcmp(o->method, "uniform") && strncmp(o->method, "ppdl", 4))
        return ppdl_errf(err, errlen, "--schedule %s --method %s: several stages per rank are planned by --method "
                         "ppdl (the default: the cut and the recompute options searched) or uniform (V x N equal "
                         "stages); the baselines plan one stage per rank", name, o->method);
    if (o->compare)
        return ppdl_errf(err, errlen, "--schedule %s --compare: the baselines plan one stage per rank; compare "
                         "--method ppdl and --method uniform by running both", name);
    if (!o->virtual_stages) o->virtual_stages = 2;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->method = "ppdl";
    o->schedule = PPDL_SCHED_1F1B;
    o->exact_ranks = 10;
    o->exact_layouts = 6;
    o->shard = 1;
    o->vocab = PPDL_VOCAB_AUTO;
    enum { O_COSTS = 256, O_CLUSTER, O_M, O_SCHED, O_METHOD, O_JSON, O_TIMELINE, O_COMPARE, O_EXACT, O_LAYOUTS,
           O_VSTAGES, O_SHARD, O_VOCAB, O_HELP, O_VERSION };
    static const struct option longopts[] = {
        {"costs", required_argument, 0, O_COSTS}, {"cluster", required_argument, 0, O_CLUSTER},
        {"micro-batches", required_argument, 0, O_M}, {"schedule", required_argument, 0, O_SCHED},
        {"method", required_argument, 0, O_METHOD}, {"json", no_argument, 0, O_JSON},
        {"timeline", required_argument, 0, O_TIMELINE}, {"compare", no_argument, 0, O_COMPARE},
        {"exact-ranks", required_argument, 0, O_EXACT}, {"exact-layouts", required_argument, 0, O_LAYOUTS},
        {"virtual-stages", required_argument, 0, O_VSTAGES}, {"shard-optimizer", required_argument, 0, O_SHARD},
        {"vocab-parallel", required_argument, 0, O_VOCAB},
        {"help", no_argument, 0, O_HELP},
        {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0}};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case O_COSTS: o->costs = a; break;
        case O_CLUSTER: o->cluster = a; break;
        case O_M:
            if (ppdl_parse_int(a, 1, 1 << 20, &o->M)) return ppdl_errf(err, errlen, "--micro-batches %s: expected an integer >= 1", a);
            break;
        case O_SCHED:
            o->schedule = ppdl_schedule_parse(a);
            if (o->schedule < 0)
                return ppdl_errf(err, errlen, "--schedule %s: expected 1f1b, gpipe, zb-h1, zb-h2, zb-1p, interleaved, "
                                 "zb-v or auto", a);
            break;
        case O_METHOD:
            o->method = a;
            o->method_given = 1;
            break;
        case O_VSTAGES:
            if (ppdl_parse_int(a, 2, 8, &o->virtual_stages)) /* ppdl's bound (PPDL_MAX_CHUNKS) */
                return ppdl_errf(err, errlen, "--virtual-stages %s: expected stages per rank from 2 to 8", a);
            break;
        case O_SHARD:
            if (strcmp(a, "on") && strcmp(a, "off"))
                return ppdl_errf(err, errlen, "--shard-optimizer %s: expected on or off", a);
            o->shard = !strcmp(a, "on");
            break;
        case O_VOCAB:
            o->vocab = ppdl_vocab_mode_parse(a);
            if (o->vocab < 0) return ppdl_errf(err, errlen, "--vocab-parallel %s: expected auto, on or off", a);
            break;
        case O_JSON: o->json = 1; break;
        case O_TIMELINE: o->timeline = a; break;
        case O_COMPARE: o->compare = 1; break;
        case O_EXACT:
            if (ppdl_parse_int(a, 0, 20, &o->exact_ranks)) return ppdl_errf(err, errlen, "--exact-ranks %s: expected an integer in [0, 20]", a);
            break;
        case O_LAYOUTS:
            if (ppdl_parse_int(a, 0, 8, &o->exact_layouts))
                return ppdl_errf(err, errlen, "--exact-layouts %s: expected an integer in [0, 8]", a);
            break;
        case 'h':
        case O_HELP: return 1;
        case O_VERSION: return 2;
        case ':': return ppdl_errf(err, errlen, "%s needs a value (see --help)", argv[optind - 1]);
        default: return ppdl_option_refused(argv[optind - 1], longopts, "ppdl-plan", err, errlen);
        }
    }
    if (optind < argc) return ppdl_errf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->costs) return ppdl_errf(err, errlen, "--costs is required: the per-layer costs (ppdl --costs-out writes them)");
    if (!o->cluster) return ppdl_errf(err, errlen, "--cluster is required: the ranks' links, memories and speeds (CLUSTER.json)");
    if (!o->M) return ppdl_errf(err, errlen, "--micro-batches is required: micro-batches per step");
    if (chunked_options(o, err, errlen)) return -1;
    int known = 0;
    for (int k = 0; ppdl_plan_methods[k]; k++) known |= !strcmp(ppdl_plan_methods[k], o->method);
    if (!known) {
        char list[256] = "";
        size_t n = 0;
        for (int k = 0; ppdl_plan_methods[k]; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", ppdl_plan_methods[k]);
        return ppdl_errf(err, errlen, "--method %s: unknown; expected one of %s", o->method, list);
    }
    return 0;
}

/* one character per layer: . F S or a digit; long runs compressed as "12x." */
static void recompute_str(const ppdl_plan_stage *st, char *buf, size_t len)
{
    int n = st->last - st->first + 1;
    static const char sym[] = ".FS3456789";
    size_t k = 0;
    if (n <= 24) {
        for (int i = 0; i < n && k + 1 < len; i++) buf[k++] = sym[st->recompute[i] < 10 ? st->recompute[i] : 9];
        buf[k] = '\0';
        return;
    }
    buf[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && st->recompute[j] == st->recompute[i]) j++;
        if (k + 12 >= len) break;
        k += (size_t)snprintf(buf + k, len - k, "%s%dx%c", i ? " " : "", j - i, sym[st->recompute[i] < 10 ? st->recompute[i] : 9]);
        i = j;
    }
}

/* "2,3" : the replicas of a stage (at most len chars, "..." when cut) */
static void ranks_str(const ppdl_plan_stage *st, char *buf, size_t len)
{
    int k = st->n_replicas > 0 ? st->n_replicas : 1;
    size_t n = 0;
    buf[0] = '\0';
    for (int q = 0; q < k; q++) {
        char one[16];
        snprintf(one, sizeof one, "%s%d", q ? "," : "", st->n_replicas > 0 ? st->ranks[q] : st->rank);
        if (n + strlen(one) + 4 > len) {
            snprintf(buf + n, len - n, ",..");
            return;
        }
        n += (size_t)snprintf(buf + n, len - n, "%s", one);
    }
}

/* the AdamW state of stage s's replicas: "1.5M" where they hold the same, else each's */
static void opt_str(const ppdl_cost_eval *ev, int s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!ev->replica_opt_bytes) return;
    int d0 = 0, k = ev->replicas[s], same = 1;
    for (int t = 0; t < s; t++) d0 += ev->replicas[t];
    const double *b = &ev->replica_opt_bytes[d0];
    for (int q = 1; q < k; q++) same &= b[q] == b[0];
    size_t n = 0;
    for (int q = 0; q < (same ? 1 : k) && n + 12 < len; q++) {
        char one[32];
        n += (size_t)snprintf(buf + n, len - n, "%s%s", q ? "," : "", ppdl_fmt_bytes((size_t)b[q], one, sizeof one));
    }
}

/* a vocabulary-parallel plan: each rank's stage of blocks and slice of the head */
static void print_vocab_table(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const ppdl_plan *p)
{
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(c, cl, M, PPDL_SCHED_ZB_V, p, &ev, err, sizeof err)) {
        printf("  (cannot evaluate the plan: %s)\n", err);
        return;
    }
    int S = p->S;
    printf("vocabulary parallel over %d ranks: the head (layer %d, %ld rows) cut into slices of", S, p->vocab_layer,
           p->vocab_size);
    for (int s = 0; s < S; s++) printf(" %ld", p->vocab[s].last - p->vocab[s].first + 1);
    printf(" rows\n");
    printf("  stage  rank  layers     time ms  head rows          slice ms  in flight  memory / limit           "
           "link ms\n");
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        int j = 2 * S - 1 - s;
        char lay[32], rows[40], m1[32], m2[32], link[48] = "";
        snprintf(lay, sizeof lay, "%d-%d", st->first, st->last);
        snprintf(rows, sizeof rows, "%ld-%ld", p->vocab[s].first, p->vocab[s].last);
        if (s + 1 < S) snprintf(link, sizeof link, "%8.3f -> rank %d", ev.link_ms[s], p->stages[s + 1].rank);
        double mem = ev.mem_bytes[s] + ev.mem_bytes[j];
        printf("  %5d  %4d  %-9s  %8.3f  %-17s  %8.3f  %4d + %-3d  %9s / %-9s %s%s\n", s, st->rank, lay, ev.time_ms[s],
               rows, ev.time_ms[j], ev.in_flight[s], ev.in_flight[j], ppdl_fmt_bytes((size_t)mem, m1, sizeof m1),
               ppdl_fmt_bytes((size_t)cl->mem[st->rank], m2, sizeof m2), mem > cl->mem[st->rank] ? "OVER " : "", link);
    }
    printf("  each rank's x (B*T*C) goes down the ranks to the slices and the hidden-state gradient comes back up "
           "on the same links: a zb-v V of %d stages\n", 2 * S);
    printf("predicted T  %10.3f ms per step (cost model, the V: %.3f x sum %.3f + 2 x links %.3f + pace %.3f + "
           "tail %.3f + tie %.3f ms)\n", ev.T, ev.phi, ev.sum_time, ev.sum_link, ev.pace, ev.tail, ev.tie);
    ppdl_cost_eval_free(&ev);
}

static void print_table(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const ppdl_plan *p)
{
    if (p->n_vocab > 0) {
        print_vocab_table(c, cl, M, p);
        return;
    }
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, sizeof err)) {
        printf("  (cannot evaluate the plan: %s)\n", err);
        return;
    }
    int rep = 0;
    for (int s = 0; s < p->S; s++) rep |= ev.replicas[s] > 1;
    printf("  stage  ranks     layers     recompute                time ms  in flight  memory / limit              "
           "optimizer/rank  link ms%s\n", rep ? "             all-reduce ms" : "");
    for (int s = 0; s < p->S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        char rcs[64], lay[32], m1[32], m2[32], link[48] = "", rk[24], ar[24] = "", ob[40];
        recompute_str(st, rcs, sizeof rcs);
        ranks_str(st, rk, sizeof rk);
        snprintf(lay, sizeof lay, "%d-%d", st->first, st->last);
        if (s + 1 < p->S) snprintf(link, sizeof link, "%8.3f -> rank %d", ev.link_ms[s], p->stages[s + 1].rank);
        if (ev.replicas[s] > 1) snprintf(ar, sizeof ar, "%8.3f", ev.allreduce_ms[s]);
        opt_str(&ev, s, ob, sizeof ob);
        printf("  %5d  %-8s  %-9s  %-24s %8.3f  %9d  %9s / %-9s %-4s %-15s %-19s %s\n", s, rk, lay, rcs,
               ev.time_ms[s], ev.in_flight[s], ppdl_fmt_bytes((size_t)ev.mem_bytes[s], m1, sizeof m1),
               ppdl_fmt_bytes((size_t)ev.mem_limit[s], m2, sizeof m2), ev.mem_bytes[s] > ev.mem_limit[s] ? "OVER" : "",
               ob, link, ar);
    }
    if (rep)
        printf("  optimizer/rank: AdamW's m and v on each replica, %s\n",
               p->shard_optimizer ? "sharded among the stage's replicas (--shard-optimizer on)"
                                  : "all of them on every replica (--shard-optimizer off)");
    printf("  recompute: . keep  F full  S selective%s\n",
           rep ? "; time: the slowest replica's; in flight and memory: the replica closest to its memory limit" : "");
    char phi[32] = "";
    if (ev.phi != 1) snprintf(phi, sizeof phi, "%.3f x ", ev.phi); /* the zero-bubble fill factor */
    if (ppdl_schedule_chunked(schedule)) /* costmodel.h "Chunked plans": a rank is the resource */
        printf("memory: each stage's own; a rank holds the sum of its stages', against its limit\n"
               "predicted T  %10.3f ms per step (cost model, several stages per rank: %ssum %.3f + 2 x links %.3f + "
               "pace %.3f (busiest: %s %d) + %s %.3f ms)\n", ev.T, phi, ev.sum_time, ev.sum_link,
               ev.pace, ev.bottleneck_is_link ? "the rank pair from stage" : "rank", ev.bottleneck_is_link
               ? ev.bottleneck_stage : p->stages[ev.bottleneck_stage].rank,
               /* copies of the pipeline: a rank's all-reduces come before its updates */
               ev.allreduce > 0 ? "all-reduces and optimizer steps" : "optimizer steps", ev.tail);
    else if (!rep)
        printf("predicted T  %10.3f ms per step (cost model: %ssum %.3f + 2 x links %.3f + %d x bottleneck %.3f ms, %s %d)\n",
               ev.T, phi, ev.sum_time, ev.sum_link, M - 1, ev.bottleneck,
               ev.bottleneck_is_link ? "link after stage" : "stage", ev.bottleneck_stage);
    else
        printf("predicted T  %10.3f ms per step (cost model: sum %.3f + 2 x links %.3f + pace %.3f (busiest: %s %d) + "
               "all-reduce %.3f ms)\n", ev.T, ev.sum_time, ev.sum_link, ev.pace,
               ev.bottleneck_is_link ? "link after stage" : "stage", ev.bottleneck_stage, ev.allreduce);
    if (c->tied_bytes > 0) {
        char tb[32];
        printf("tied weight  %s of layers 0 and %d: %s\n", ppdl_fmt_bytes((size_t)c->tied_bytes, tb, sizeof tb),
               c->L - 1, p->S > 1 ? "the first and the last stage exchange its gradient" : "held once, on one stage");
        if (p->S > 1) printf("             + %.3f ms in T for that exchange (docs/cost-model.md, \"Tied weights\")\n", ev.tie);
    }
    ppdl_cost_eval_free(&ev);
}

/* every method under `schedule` (the plans, the cost model and the simulator) */
static void print_compare(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int shard)
{
    ppdl_solve_opts so; /* the defaults, but for --shard-optimizer */
    ppdl_solve_opts_default(&so);
    so.shard_optimizer = shard;
    double T_ppdl = NAN;
    printf("  method              T ms   vs ppdl  bottleneck ms  simulated ms  fits in memory           kind\n");
    for (int k = 0; ppdl_plan_methods[k]; k++) {
        ppdl_plan p;
        char err[PPDL_ERR_LEN] = "", fits[160] = "yes";
        int rc = ppdl_choose_plan(c, cl, M, schedule, ppdl_plan_methods[k], &so, &p, NULL, NULL, 1, NULL, NULL, NULL, err, sizeof err);
        if (p.S == 0) {
            printf("  %-14s  %s\n", ppdl_plan_methods[k], err);
            continue;
        }
        ppdl_cost_eval ev;
        if (ppdl_cost_evaluate(c, cl, M, schedule, &p, &ev, err, sizeof err) == 0) {
            if (!ev.feasible) {
                char a[32];
                snprintf(fits, sizeof fits, "no: stage %d over by %s", ev.worst_stage,
                         ppdl_fmt_bytes((size_t)ev.worst_over, a, sizeof a));
            }
            ppdl_cost_eval_free(&ev);
        }
        if (k == 0 && rc == 0) T_ppdl = p.predicted_iter_ms;
        double sim_ms = ppdl_simulated_ms(c, cl, &p, M, schedule);
        char ratio[16] = "     -", kind[96];
        if (T_ppdl > 0) snprintf(ratio, sizeof ratio, "%6.2fx", p.predicted_iter_ms / T_ppdl);
        printf("  %-14s %10.3f  %s  %13.3f  %12.3f  %-23s  %s\n", ppdl_plan_methods[k], p.predicted_iter_ms, ratio,
               p.bottleneck_ms, sim_ms, fits, ppdl_plan_kind(&p, kind, sizeof kind));
        ppdl_plan_free(&p);
    }
}

/* --schedule auto: each schedule's best plan, one line each, and the one taken */
static void print_schedules(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const ppdl_schedule_choice *ch,
                            int taken, const ppdl_plan *plan, double plan_s)
{
    printf("schedules (--schedule auto: the best plan of each, in %.1f ms together):\n", 1e3 * plan_s);
    printf("  schedule             T ms   simulated ms  fits in memory  planned ms  kind\n");
    for (int k = 0; k < PPDL_AUTO_N; k++) {
        const ppdl_schedule_option *o = &ch->opt[k];
        char name[32];
        ppdl_auto_name(k, name, sizeof name);
        /* candidate `taken`'s plan moved to the caller */
        const ppdl_plan *p = k == taken ? plan : &o->plan;
        if (p->S == 0) {
            printf("  %-15s  none: %s\n", name, o->why);
            continue;
        }
        double sim_ms = ppdl_simulated_ms(c, cl, p, M, o->schedule);
        char kind[96] = "";
        ppdl_plan_kind(p, kind, sizeof kind);
        printf("  %-15s %10.3f  %13.3f  %-14s  %10.1f  %s%s\n", name, p->predicted_iter_ms, sim_ms,
               o->rc == 0 ? "yes" : "no", 1e3 * o->plan_s, kind, k == ch->chosen ? "   <- chosen" : "");
    }
    printf("  gpipe            not solved: its T is 1f1b's for every plan, with M micro-batches in flight (1f1b: at most N), "
           "so it never wins\n");
    char line[512], name[32];
    if (ch->chosen >= 0)
        printf("picked %s: %s\n", ppdl_auto_name(ch->chosen, name, sizeof name),
               ppdl_schedule_choice_line(ch, line, sizeof line));
    else
        printf("picked none: no schedule's plan fits in memory (1f1b's plan and message below)\n");
}

int main(int argc, char **argv)
{
    /* ---- 1. the command line and the inputs ---- */
    char err[PPDL_ERR_LEN] = "";
    options o;
    int prc = parse_options(argc, argv, &o, err, sizeof err);
    if (prc == 1) { usage(stdout); return 0; }
    if (prc == 2) { printf("ppdl-plan %s\n", PACKAGE_VERSION); return 0; }
    if (prc) { fprintf(stderr, "ppdl-plan: %s\n", err); return 2; }
    ppdl_costs costs;
    ppdl_cluster_model cl;
    if (ppdl_costs_read(o.costs, &costs, err, sizeof err)) {
        fprintf(stderr, "ppdl-plan: --costs %s\n", err);
        return 1;
    }
    if (ppdl_cluster_model_read(o.cluster, 0, &cl, err, sizeof err)) {
        fprintf(stderr, "ppdl-plan: --cluster %s\n", err);
        ppdl_costs_free(&costs);
        return 1;
    }
    int M = (int)o.M;
    ppdl_solve_opts so;
    ppdl_solve_opts_default(&so);
    so.exact_max_ranks = (int)o.exact_ranks;
    so.exact_hybrid_ranks = (int)o.exact_layouts;
    so.shard_optimizer = o.shard;

    if (o.virtual_stages) so.chunks = (int)o.virtual_stages;

    /* ---- 2. plan: once, or once per schedule (auto) ---- */
    /* against each rank's memory less the runtime's buffers, as ppdl --plan auto does
     * (plan/reserve.h; auto: each schedule against its own reserve): the same costs and
     * cluster give both the same plan. The table and the comparison below evaluate
     * against the memory the plan was made for. */
    int autos = o.schedule == PPDL_SCHED_AUTO, rc;
    double t0 = ppdl_now_s();
    /* the head cut by vocabulary: for the ppdl method's one pipeline (the baselines and
     * the comparison keep the head whole) */
    int vocab = strcmp(o.method, "ppdl") || o.compare ? PPDL_VOCAB_OFF : o.vocab;
    if (o.vocab == PPDL_VOCAB_ON && vocab == PPDL_VOCAB_OFF) {
        fprintf(stderr, "ppdl-plan: --vocab-parallel on: planned by --method ppdl alone, without --compare\n");
        return 2;
    }
    ppdl_plan_request rq = {&costs, &cl, M, o.schedule, o.method, &so, 1, 1, vocab};
    ppdl_plan_result res;
    rc = ppdl_plan_make(&rq, &res, err, sizeof err);
    double plan_s = ppdl_now_s() - t0;
    o.schedule = res.schedule;
    double reserve = res.reserve;
    ppdl_plan plan = res.plan;
    memset(&res.plan, 0, sizeof res.plan); /* owned by `plan` from here on */
    const ppdl_solve_info info = res.info;
    const ppdl_shared_choice sc = res.sc;
    /* from here on: the memory the plan was made for */
    double *less = ppdl_memory_less_reserve(cl.mem, cl.N, reserve);
    memcpy(cl.mem, less, (size_t)cl.N * sizeof(double));
    free(less);
    if (plan.S == 0) {
        fprintf(stderr, "ppdl-plan: %s\n", err);
        ppdl_plan_result_free(&res);
        ppdl_costs_free(&costs);
        ppdl_cluster_model_free(&cl);
        return 1;
    }

    /* ---- 3. print, simulate, draw ---- */
    ppdl_sim sim;
    char serr[PPDL_ERR_LEN] = "";
    int sim_rc = ppdl_simulate(&costs, &cl, &plan, M, o.schedule, o.timeline != NULL, &sim, serr, sizeof serr);
    if (o.json) {
        char *js = ppdl_plan_to_json(&plan);
        printf("%s\n", js);
        free(js);
    } else {
        printf("ppdl-plan: %d layers on %d ranks, %s%s, M = %d micro-batches of %d sample%s\n", costs.L, cl.N,
               ppdl_schedule_name(o.schedule), autos ? " (chosen by --schedule auto)" : "", M, costs.micro_batch_size, costs.micro_batch_size == 1 ? "" : "s");
        printf("method %s", o.method);
        if (!strncmp(o.method, "ppdl", 4) && (info.placement[0] || info.hybrid[0])) {
            if (info.placement[0])
                printf(": placement %s; %ld order solves, %ld frontier points", info.placement, info.orders_solved,
                       info.frontier_points);
            if (info.hybrid[0]) printf("; replicas: %s, %ld layouts solved", info.hybrid, info.layouts_solved);
            if (info.exact) printf(" (optimal)");
        }
        printf("; planned in %.1f ms\n", 1e3 * plan_s);
        if (ppdl_schedule_splits_backward(o.schedule))
            printf("%s: B and W %s\n", ppdl_schedule_name(o.schedule),
                   costs.split_given ? "as profiled" : "each half of bwd_ms (COSTS.json has no bwd_input_ms)");
        if (autos) print_schedules(&costs, &cl, M, &res.choice, res.choice.chosen >= 0 ? res.choice.chosen : 0,
                                   res.vocab_taken ? &res.novocab_plan : &plan, plan_s);
        char line[512], kind[96];
        if (sc.active) printf("%s\n", ppdl_shared_choice_line(&sc, line, sizeof line));
        printf("plan: %s\n", ppdl_plan_kind(&plan, kind, sizeof kind));
        char rb[32];
        printf("memory: each rank's mem_bytes less the runtime's buffer reserve of %s (messages in flight, "
               "recompute scratch, work space), as ppdl --plan auto plans\n",
               ppdl_fmt_bytes((size_t)reserve, rb, sizeof rb));
        if (res.vocab_why[0]) printf("vocabulary parallel: %s\n", res.vocab_why);
        print_table(&costs, &cl, M, o.schedule, &plan);
        if (res.lower_bound_ms > 0 && plan.predicted_iter_ms > 0)
            printf("lower bound  %10.3f ms per step (no plan's T is shorter: %s); this plan is %.1f%% above it\n",
                   res.lower_bound_ms, res.bound_why, 100 * (plan.predicted_iter_ms / res.lower_bound_ms - 1));
        else if (plan.predicted_iter_ms > 0)
            printf("lower bound  (%s)\n", res.bound_why);
        if (sim_rc == 0)
            printf("simulated T  %10.3f ms per step (the %s op lists played with these costs, links as queues; "
                   "%.0f%% busy)\n", sim.step_ms, ppdl_schedule_name(o.schedule), 100 * sim.busy_frac);
        else
            printf("simulated T  (not available: %s)\n", serr);
        if (o.compare) {
            printf("\ncompare (same cost model, same cluster%s):\n",
                   ppdl_hosts_oversubscribed(&cl.hosts, cl.N)
                       ? "; ranks share cores, so ppdl's methods chose by the simulated step, not by T" : "");
            print_compare(&costs, &cl, M, o.schedule, o.shard);
        }
    }
    int ret = rc ? 1 : 0;
    if (rc) fprintf(stderr, "ppdl-plan: %s\n", err);
    if (o.timeline && sim_rc == 0) {
        char title[160], e2[PPDL_ERR_LEN];
        snprintf(title, sizeof title, "ppdl-plan: %s, %d ranks, %s, M=%d, simulated %.1f ms", plan.method, cl.N,
                 ppdl_schedule_name(o.schedule), M, sim.step_ms);
        if (ppdl_timeline_write_svg(o.timeline, sim.ev, sim.n_ev, cl.N, title, e2, sizeof e2)) {
            fprintf(stderr, "ppdl-plan: --timeline %s\n", e2);
            ret = 1;
        }
    }
    if (sim_rc == 0) ppdl_sim_free(&sim);
    ppdl_plan_result_free(&res);
    ppdl_plan_free(&plan);
    ppdl_costs_free(&costs);
    ppdl_cluster_model_free(&cl);
    return ret;
}
