/* planner.h — the planner's one entry: a request (the costs, the cluster, M, the
 * schedule or auto, the method, the solver's options, the runtime reserve, how many
 * candidates) in, a result (the plan, its predicted and simulated step, why it was
 * chosen, its runners-up) out. `ppdl --plan auto` (cmd/run_plan.c) and `ppdl-plan`
 * (cmd/ppdl-plan.c) plan through it, so the same costs and cluster give both the same
 * plan.
 *
 * Below it, one way down: the schedule (schedule_choice.h for auto) → the chooser
 * (chooser.h: the method's search, and where ranks share cores the choice among
 * candidates by the simulated step, shared_cores.h) → the searches (solver.h: the
 * stage DP engine and the replica layouts; solve_chunked.h: several stages per rank)
 * and the baselines (baselines.h). Pure C. */
#ifndef PPDL_PLANNER_H
#define PPDL_PLANNER_H

#include <stddef.h>

#include "plan/chooser.h"
#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/schedule_choice.h"
#include "plan/shared_cores.h"
#include "plan/solver.h"
#include "plan/vocab.h"

typedef struct ppdl_plan_request {
    const ppdl_costs *costs;
    const ppdl_cluster_model *cluster; /* each rank's whole memory (the reserve comes off here) */
    int M;                     /* micro-batches per step */
    int schedule;              /* PPDL_SCHED_*, or PPDL_SCHED_AUTO: one solve per candidate
                                  schedule and the best of them (schedule_choice.h) */
    const char *method;        /* one of ppdl_plan_methods; "uniform" under a chunked
                                  schedule: v equal stages per rank, round-robin or in a V */
    const ppdl_solve_opts *opts; /* NULL: defaults; opts->chunks is a chunked schedule's v */
    int reserve;               /* 1: plan against each rank's memory less the schedule's
                                  runtime reserve (reserve.h); 0: the memory as it is */
    int candidates;            /* K >= 1: the plan and up to K-1 runners-up (not with auto) */
    int vocab_parallel;        /* PPDL_VOCAB_* (vocab.h): off (0, ppdl's: no runtime yet) never
                                  plans the head cut by vocabulary; auto takes that layout
                                  where it fits and predicts a shorter T and simulated step
                                  than the plan without; on takes it (schedule zb-v or auto) */
} ppdl_plan_request;

typedef struct ppdl_plan_result {
    int rc;                    /* 0: the plan fits; -1: see the error (plan.S > 0: the plan
                                  that was built and does not fit) */
    ppdl_plan plan;            /* the caller may take it (then zero it) */
    int schedule;              /* the schedule it was made for (auto: the one chosen; where
                                  none fits, 1F1B) */
    double reserve;            /* bytes taken off each rank's memory for that schedule */
    double predicted_ms;       /* the cost model's T of the plan (0: no plan) */
    double simulated_ms;       /* its simulated step (0: no plan, or it cannot be played) */
    double lower_bound_ms;     /* no plan has a shorter T (costmodel.h ppdl_lower_bound_ms;
                                  0: none for the schedule), also in plan.lower_bound_ms */
    char bound_why[160];       /* the term that sets it */
    ppdl_solve_info info;      /* what the search did */
    ppdl_shared_choice sc;     /* ranks sharing cores: the choice by the simulated step */
    int is_auto;               /* the schedule was chosen: `choice` holds every candidate */
    ppdl_schedule_choice choice;
    char why[512];             /* auto: why this schedule ("" otherwise) */
    int vocab_taken;           /* the plan cuts the head by vocabulary (plan.n_vocab > 0) */
    double vocab_T, vocab_sim; /* vocab_parallel auto/on: that layout's T and simulated step
                                  (0: none was planned) */
    double novocab_T, novocab_sim; /* ... and the plan's without it (0: none) */
    ppdl_plan novocab_plan;    /* vocab_taken: the plan without it, which it displaced */
    char vocab_why[256];       /* why it was taken or not ("" with vocab_parallel off) */
    int n_others;              /* runners-up: others[0 .. n_others-1], their simulated
                                  steps and labels (shared_cores.h) */
    ppdl_plan others[PPDL_PLAN_MAX_CANDIDATES];
    double others_ms[PPDL_PLAN_MAX_CANDIDATES];
    char others_label[PPDL_PLAN_MAX_CANDIDATES][48];
} ppdl_plan_result;

/* Plan as rq asks. Returns res->rc (0: a plan that fits), with the message in err on
 * failure (a method that is not known, a model with fewer layers than ranks, or no plan
 * that fits: then "no plan fits" is in it). Free with ppdl_plan_result_free. */
int ppdl_plan_make(const ppdl_plan_request *rq, ppdl_plan_result *res, char *err, size_t errlen);
void ppdl_plan_result_free(ppdl_plan_result *res);

#endif
