/* shared_cores.h — the planner's choice where ranks share a host's cores (the chooser,
 * chooser.c, enters it only there: makes the candidates and offers them to the
 * ranking, ranking.h, begun and finished here; ppdl --plan auto and ppdl-plan both plan
 * through planner.h).
 *
 * The cost model T (costmodel.h) gives every rank a core of its own. Where a host of
 * the cluster (cluster_model.h's hosts) runs more of the job's ranks than it has cores,
 * ranks that compute at once share them, and T no longer ranks the plans: data
 * parallelism, whose replicas all compute together, is predicted as fast as on a core
 * each. There the objective is the simulated step (simulate.h), which shares a host's
 * cores among the compute ops running on it (processor sharing), and the plan is the
 * candidate with the least simulated step:
 *   - the method's optimum of T (the exact solvers are unchanged: they optimise T);
 *   - method ppdl: the one-rank-per-stage optimum of T, and for every layout kind
 *     (replicas per stage in pipeline order, k_0 + ... + k_S-1 = N, each k_s <= M,
 *     S <= L: 2^(N-1) kinds, all of them up to 8 ranks; above, the kinds with one
 *     replica count on every stage) the optimum of T of that layout, its ranks taken in
 *     the order of the method's optimum;
 *   - every baseline (baselines.h) that fits in memory (ppdl-pipeline and ppdl-inorder:
 *     those with one rank per stage, ranks in order).
 * Ties (simulated steps within a relative 1e-9) keep the earlier candidate in that
 * list, so the method's optimum wins every tie. Where no host is oversubscribed (no
 * hosts given, or cores >= ranks on each) nothing here runs and the plan is the optimum
 * of T. Pure C. */
#ifndef PPDL_SHARED_CORES_H
#define PPDL_SHARED_CORES_H

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/ranking.h"

/* What the choice did, for the plan table's line and ppdl-plan */
typedef struct ppdl_shared_choice {
    int active;                /* 1: a host runs more ranks than it has cores; the plan
                                  below was chosen by the simulated step */
    int candidates;            /* plans that fit and were simulated */
    char chosen[48];           /* the candidate taken: "the optimum of T", "the pipeline
                                  optimum of T", "layout 2+2", "uniform", ... */
    double chosen_sim_ms;      /* its simulated step, cores shared */
    double optimum_sim_ms;     /* the method's optimum of T, simulated the same way */
    char optimum_kind[64];     /* that optimum's kind (ppdl_plan_kind) */
    int max_ranks, cores;      /* the most oversubscribed host: its ranks and cores */
    int n_others;              /* runners-up returned (ppdl_shared_finish; in a close call
                                  with a core per rank, chooser.h) */
} ppdl_shared_choice;

/* Shared cores: another family's best is tried (--plan-trials) ahead of the choice's
 * other cuts only where it simulates within this factor of the choice. On shared cores
 * the simulator misranks families by a margin well inside this factor (data
 * parallelism simulated slower than the choice and ran fastest), while the families
 * that simulate further behind also run far slower: a trial is better spent on a cut of
 * the choice's own family, which the simulator ranks close together though their real
 * steps differ more (perf/bench-default-plan). Such a family still comes in the
 * simulated order after the other cuts. */
#define PPDL_SHARED_FAMILY_FIRST 1.4

/* The choice is a ranking of candidates by the simulated step (ranking.h):
 *   ppdl_shared_begin: *plan is the method's optimum of T, which fits. Returns the
 *     ranking, keeping enough candidates for K (the choice and its runners-up asked
 *     for), with the optimum its first candidate (owned by the ranking: *plan is empty
 *     until ppdl_shared_finish); sc says a choice is made. NULL, *plan as it is, where
 *     the simulator cannot play the optimum (sc says so).
 *   The chooser then offers the other candidates above, in that order.
 *   ppdl_shared_finish: *plan becomes the candidate of least simulated step; with K > 1
 *     (K <= PPDL_PLAN_MAX_CANDIDATES) also up to K-1 runners-up in others[0 ..
 *     sc->n_others-1] (the caller frees them; K = 1: none, and others may be NULL):
 *     first the least simulated step of each family the choice is not (data parallel;
 *     pipeline, no stage replicated; some stages replicated) that simulates within
 *     PPDL_SHARED_FAMILY_FIRST of the choice, in simulated order, then the next distinct
 *     plans in simulated order; their simulated steps in others_ms and their labels in
 *     others_label (either may be NULL). Families first: what the simulator leaves out
 *     on shared cores goes with how many ranks compute at once, the family's mark
 *     (perf/bench-default-plan); then other cuts, which the profile's times
 *     may rank wrongly. From the best PPDL_RANKING_KEEP candidates (all of them up to 4
 *     ranks). Frees the ranking. */
ppdl_ranking *ppdl_shared_begin(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                ppdl_plan *plan, ppdl_shared_choice *sc, int K);
void ppdl_shared_finish(ppdl_ranking *r, ppdl_plan *plan, ppdl_shared_choice *sc, int K, ppdl_plan *others,
                        double *others_ms, char (*others_label)[48]);

/* sc's max_ranks and cores: the most oversubscribed host of cl, for messages */
void ppdl_shared_choice_host(const ppdl_cluster_model *cl, ppdl_shared_choice *sc);

/* One line (no newline) saying what the choice did, into buf: "ranks share cores (4
 * ranks on a host of 2 cores): of 21 candidate plans, layout 1+1+1+1 simulates
 * fastest (8.55 ms); the optimum of T, data parallel x 4, simulates to 9.50 ms".
 * Returns buf ("" when the choice was not made). */
const char *ppdl_shared_choice_line(const ppdl_shared_choice *sc, char *buf, size_t len);

#endif
