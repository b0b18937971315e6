/* schedule_choice.h — `--schedule auto`: the planner chooses the schedule too.
 *
 * The schedule is one more choice next to the partition, the placement, the recompute
 * options and the replicas; each schedule has its own cost model (costmodel.h) that the
 * exact solvers optimise, so the joint optimum is the best of one solve per schedule
 * (docs/cost-model.md "`--schedule auto`"):
 *   - solve with `method` once per candidate, 1f1b, zb-1p, zb-h1, zb-h2, each against
 *     each rank's memory less that schedule's runtime reserve (reserve.h), replicated
 *     layouts included (sched/zero_bubble.h plays their replicas as devices);
 *   - take the least T among the plans that fit (where ranks share cores, shared_cores.h:
 *     the least simulated step). Ties (relative 1e-9) keep the earlier candidate: 1F1B,
 *     then the zero-bubble one holding less. GPipe is no candidate: its T is 1F1B's for
 *     every plan and it holds more, so it never wins. A zero-bubble candidate skips the
 *     search for a rank order that fits (solver.h fit_search): where none of its
 *     candidate orders fits, it is out;
 *   - then the chunked candidates, interleaved v = 2, 3, 4 and zb-v (solve_chunked.h;
 *     also as k copies, schedule_choice.c try_copies), against their chunked reserve;
 *     one is out, with the reason, with fewer than v N layers, on one rank, with a tied
 *     weight, or where the run cannot hold several stages per rank (opts->auto_chunked
 *     = 0). The chunked rule's fill factor is exact on equal stages only, so a chunked
 *     plan is taken only where its T is strictly the least and its simulated step beats
 *     every fitting plan of the four (on perf/bench-planner's heterogeneous clusters
 *     T alone would take zb-v where it simulates slower).
 * For a plan that is given (a plan file, --plan uniform): ppdl_schedule_for_plan takes
 * the schedule of least T among those that can run its layout. Pure C. */
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
/* The shared search. With PPDL_AUTO_SHARE_MIN_RANKS ranks or more (where solver.c's
 * local search tries 8N rank orders), method ppdl or ppdl-pipeline and no local search
 * budget in the solve options, the search over rank orders is most of each solve's
 * time, and the orders good for one schedule are good for the others (the same links
 * and memories; the schedules differ in the fill and the micro-batches in flight). So
 * zb-1p is solved first with the full search; the others get its best order as one more
 * candidate (solve_opts.seed_order) and try N orders around their best. Every candidate
 * searches PPDL_AUTO_FOLLOW_LAYOUTS replica layouts, and where zb-1p's best plan is a
 * pipeline (one rank per stage) zb-h1 and zb-h2 search none. The plans come out within
 * a fraction of a percent of those searched alone, in well under half the time
 * (perf/bench-planner's speed-auto cases). With two cores or more the followers run at
 * once (1F1B on a thread of its own, zb-h1 then zb-h2 on another: each solve reads only
 * its own state and the shared inputs, so the plans are the same bits), and the chunked
 * candidates on a thread of their own from the start. Below, every candidate is solved
 * alone. */
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
