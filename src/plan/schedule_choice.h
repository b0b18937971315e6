/* schedule_choice.h — `--schedule auto`: the planner chooses the schedule too.
 *
 * The schedule is one more choice next to the partition, the placement, the recompute
 * options and the replicas. Each schedule has its own cost model (costmodel.h: its T,
 * what it holds in memory) and the exact solvers optimise it, so the joint optimum is
 * the best of one solve per schedule:
 *   - solve with `method` once per candidate, in the order 1f1b, zb-1p, zb-h1, zb-h2,
 *     each against each rank's memory less that schedule's runtime reserve (reserve.h;
 *     ZB-H2 holds up to 2N - 1 micro-batches);
 *   - among the candidates whose plan fits, take the least T; where ranks share cores
 *     (shared_cores.h: every candidate was then chosen by its simulated step) the least
 *     simulated step. Ties (within a relative 1e-9) keep the earlier candidate, so 1F1B
 *     wins every tie, and among the zero-bubble ones the one holding less wins: ZB-1P
 *     (1F1B's S - s on stage s), then ZB-H1 (S on every stage), then ZB-H2 (2S - 1).
 * GPipe is not a candidate: for every plan its T is 1F1B's (costmodel.h: the same
 * formula) and it holds more micro-batches (M against at most N), so it never beats
 * 1F1B and would lose every tie; solving it costs time (with M far above N nothing may
 * fit, and the search for a plan that does is slow on many ranks). For the same
 * reason a zero-bubble candidate skips that search (solver.h fit_search): where none of
 * its candidate rank orders fits (above the exact placement's 10 ranks), it is out.
 * Every candidate, the zero-bubble ones included, searches replicated layouts too
 * (their replicas play as devices of their own, sched/zero_bubble.h; the cost model
 * scales the fill by the layout's phi, costmodel.h). In the shared search below zb-1p
 * searches PPDL_AUTO_FOLLOW_LAYOUTS replica layouts, as the followers do, and where
 * its best plan is a pipeline (one rank per stage) zb-h1 and zb-h2 search none: the
 * layouts that suit one zero-bubble schedule suit the others.
 *
 * Many ranks (25 or more, where solver.c's local search tries 8N rank orders; method
 * ppdl or ppdl-pipeline, no local search budget in the solve options), the four
 * solves share the search
 * over rank orders, which is most of their time (200 layers on 64 ranks: 8N = 512
 * orders tried per schedule, 0.45 of each zero-bubble solve's 0.55 s): zb-1p is
 * solved first, with the full search; the others get its best order as one more
 * candidate (solve_opts.seed_order) and try N orders around their best candidate, and
 * 1F1B 10 replica layouts instead of 40. The orders that are good for one schedule
 * are good for the others (the same links and memories; the schedules differ in the
 * fill factor and the micro-batches in flight). Measured on that case: zb-h1's T
 * 605.26 ms against 605.24 searched alone, 1F1B's 843.63 against 841.64; auto takes
 * 1.0-1.3 s instead of 2.7-3.4 s (perf/RESULTS.md). The three after the first run
 * at once where the process has two cores or more: 1F1B, the longest, on a thread of
 * its own, zb-h1 and zb-h2 after each other (each solve reads only its own state and
 * the shared inputs: the plans are the same bits as one after another). Below 25
 * ranks every candidate is solved alone, as before.
 *
 * The chunked candidates (a rank holds v stages: interleaved v = 2, 3, 4, then zb-v)
 * come after those four, each solved by solve_chunked.h's search (the cut and the
 * recompute options; the placement is the schedule's), against each rank's memory less
 * its chunked reserve (reserve.h). Where the four share their search (many ranks) and
 * the process has two cores, the chunked ones run on a thread of their own from the
 * start (200 layers on 64 ranks: 0.56 s of chunked solves beside zb-1p's 0.52 s). One is out, with the reason, where the model has
 * fewer than v N layers, on one rank, with a tied weight, or where the run cannot run
 * several stages per rank (opts->auto_chunked = 0). Ties keep the earlier candidate, so
 * a chunked plan is taken only when it is strictly better than all four; and, because
 * the chunked rule's fill factor is exact on equal stages only, only when the simulator
 * agrees: where a chunked plan has the least T, it and the plans of the four that fit
 * are played (simulate.h), and the chunked one is taken only if its simulated step is
 * shorter than all of theirs; else the best of the four by T (on the heterogeneous
 * clusters of perf/bench-planner, T alone took zb-v in 9 of 60 cases, whose simulated
 * steps were on average about 6% longer than the plan of one stage per rank it
 * displaced; perf/RESULTS.md).
 *
 * A chunked candidate may also be k copies of a shorter chunked pipeline (plan.h; method
 * ppdl, which replicates; solve_chunked.h "k copies"): after the four chunked solves, on their
 * thread, the candidate and the k predicted best by the plans of equal layer counts is
 * solved as copies, and its copies replace its one pipeline where that does not fit or
 * where they are strictly better (T, or the simulated step where ranks share cores);
 * the rules above then compare it as any chunked plan (the simulator's check included).
 * One solve more: 200 layers on 64 ranks, M = 16, about 0.2 s more CPU on the chunked
 * thread (perf/bench-planner-bin speed-auto 200 64 16).
 *
 * For a plan that is given (a plan file, --plan uniform): ppdl_schedule_for_plan takes
 * the schedule of least T for that plan among those that can run its layout. Pure C. */
#ifndef PPDL_SCHEDULE_CHOICE_H
#define PPDL_SCHEDULE_CHOICE_H

#include <stddef.h>

#include "core/error.h"

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/shared_cores.h"
#include "plan/solver.h"

/* the candidates: the first PPDL_AUTO_ONE run one stage per rank (the shared search
 * below is theirs), then interleaved v = 2, 3, 4 and zb-v, chunked (solve_chunked.h) */
#define PPDL_AUTO_N 8
#define PPDL_AUTO_ONE 4
/* the shared search's budgets for the candidates after the first (schedule_choice.h) */
#define PPDL_AUTO_SHARE_MIN_RANKS 25
#define PPDL_AUTO_FOLLOW_EVALS(N) ((long)(N)) /* orders tried by the local search (alone: 8N) */
#define PPDL_AUTO_FOLLOW_LAYOUTS 10L          /* replica layouts (alone: 40 above 16 ranks) */
extern const int ppdl_auto_solve_order[PPDL_AUTO_ONE];
/* 1: with these options the candidates share the search (many ranks: the placement is
 * heuristic; method ppdl or ppdl-pipeline; no local search budget given) */
int ppdl_auto_shares_search(int N, int L, const char *method, const ppdl_solve_opts *o);

/* the candidates, in tie-breaking order: 1f1b, zb-1p, zb-h1, zb-h2, interleaved v = 2,
 * 3, 4, zb-v: their schedules and their stages per rank (1: one) */
extern const int ppdl_auto_schedules[PPDL_AUTO_N];
extern const int ppdl_auto_chunks[PPDL_AUTO_N];
/* "1f1b", ..., "interleaved v=3", "zb-v": candidate k's name, into buf */
const char *ppdl_auto_name(int k, char *buf, size_t len);

typedef struct ppdl_schedule_option {
    int schedule;              /* PPDL_SCHED_* */
    int chunks;                /* its stages per rank (1: one stage per rank) */
    int rc;                    /* 0: plan fits (ppdl_choose_plan's return) */
    ppdl_plan plan;            /* its plan (S = 0: none, see why); a caller may take it */
    double T;                  /* its plan's T (kept when the plan is taken) */
    ppdl_solve_info info;
    ppdl_shared_choice sc;
    double reserve;            /* bytes taken off each rank's memory for the runtime */
    double plan_s;             /* seconds its solve took */
    char why[PPDL_ERR_LEN];     /* rc != 0: the solver's message */
} ppdl_schedule_option;

typedef struct ppdl_schedule_choice {
    ppdl_schedule_option opt[PPDL_AUTO_N]; /* in ppdl_auto_schedules order */
    int chosen;                /* index of the plan taken, -1: no schedule's plan fits */
    int by_sim;                /* chosen by the simulated step (ranks share cores) */
    /* a chunked plan of least T is checked by the simulator against the plans of one
     * stage per rank (schedule_choice.h): its simulated step and their shortest, and 1
     * when the chunked one lost there and the best of them by T was taken (0, 0, 0: no
     * check made) */
    double chunked_sim_ms, one_sim_ms;
    int chunked_vetoed;
} ppdl_schedule_choice;

/* Solve with `method` once per candidate schedule and choose (above). reserve: 1 to
 * plan against each rank's memory less the schedule's runtime reserve (as ppdl --plan
 * auto and ppdl-plan do), 0 against cl's memory as it is. Returns 0 with ch->chosen >=
 * 0, or -1 with ch->chosen = -1 and err holding 1F1B's message (a method that is not
 * known, or no plan that fits: then "no plan fits" is in it). Free with
 * ppdl_schedule_choice_free. */
int ppdl_choose_schedule(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const char *method,
                         const ppdl_solve_opts *opts, int reserve, ppdl_schedule_choice *ch, char *err,
                         size_t errlen);
void ppdl_schedule_choice_free(ppdl_schedule_choice *ch);

/* "chosen by the planner: T 10.20 ms against 1f1b's 11.90 ms" (or "by the simulated
 * step ..." where ranks share cores): why the chosen schedule won, into buf */
const char *ppdl_schedule_choice_line(const ppdl_schedule_choice *ch, char *buf, size_t len);

/* The schedule of least T (feasible plans first; ties to the earlier candidate) for
 * plan p among the candidates that can run its layout; *T (may be NULL) its T.
 * Returns the schedule, or -1 with a message when p cannot be evaluated. */
int ppdl_schedule_for_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const ppdl_plan *p, double *T,
                           char *err, size_t errlen);

#endif
