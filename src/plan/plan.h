/* plan.h — a pipeline plan: which layers each stage runs, on which rank, and which
 * recompute option each layer uses. Pure data + JSON (the "plan JSON" of docs/formats.md);
 * no MPI, no device. */
#ifndef PPDL_PLAN_H
#define PPDL_PLAN_H

#include <stddef.h>

typedef struct ppdl_plan_stage {
    int rank;                  /* the MPI rank running this stage (its first replica) */
    /* data parallelism inside the stage: the k >= 1 ranks holding a replica; micro-batch
     * j runs on replica j mod k, and the replicas' gradients are summed before the
     * update. ranks[0] == rank. JSON: "ranks": [...] (or just "rank" when k = 1). */
    int n_replicas;
    int *ranks;
    int first, last;           /* layer range, inclusive */
    int *recompute;            /* [last-first+1] option per layer (0 = keep everything) */
    double time_ms;            /* predicted compute time per micro-batch (0 if unknown) */
    double mem_bytes;          /* predicted peak bytes (0 if unknown) */
    double allreduce_ms;       /* predicted gradient all-reduce among the replicas (0: none
                                  or unknown); JSON "allreduce_ms", only when replicated */
} ppdl_plan_stage;

typedef struct ppdl_plan {
    char method[32];
    char schedule[16];         /* the schedule it was solved for (JSON "schedule", optional:
                                  "" when not known, as in plans written before it) */
    int feasible;
    double predicted_iter_ms;  /* 0 if unknown */
    double bottleneck_ms;
    int S;
    ppdl_plan_stage *stages;   /* [S], in pipeline order */
} ppdl_plan;

/* S stages of (nearly) equal layer counts on ranks 0..S-1, no recompute; the first
 * L mod S stages get one layer more. -1 when S > L. */
int ppdl_plan_uniform(int L, int S, ppdl_plan *p, char *err, size_t errlen);
/* Plain data parallelism: one stage of all L layers replicated on ranks 0..N-1. */
int ppdl_plan_data_parallel(int L, int N, ppdl_plan *p, char *err, size_t errlen);

/* Read a plan JSON file and validate it for a model of L layers on n_ranks ranks:
 * every layer covered once, in order, stages non-empty, ranks distinct and in range,
 * recompute arrays of the right length with options in [0, n_options[l]). */
int ppdl_plan_read(const char *path, int L, int n_ranks, const int *n_options, ppdl_plan *p,
                   char *err, size_t errlen);
/* The same from JSON text; `what` names the source in messages. */
int ppdl_plan_parse(const char *text, const char *what, int L, int n_ranks, const int *n_options,
                    ppdl_plan *p, char *err, size_t errlen);
/* Validate a plan (as above); used by the reader and for built plans. */
int ppdl_plan_validate(const ppdl_plan *p, int L, int n_ranks, const int *n_options,
                       const char *what, char *err, size_t errlen);
/* Set every layer's recompute option to `option`; layers that do not offer it get 0. */
void ppdl_plan_set_recompute(ppdl_plan *p, int option, const int *n_options);

/* The plan as JSON text (malloc'd, caller frees), in the plan format of docs/formats.md. */
char *ppdl_plan_to_json(const ppdl_plan *p);
/* ... written to a file (whole or not at all), which ppdl_plan_read reads back. */
int ppdl_plan_write(const char *path, const ppdl_plan *p, char *err, size_t errlen);
/* the stage run by `rank`, or -1; *replica (if not NULL) gets its replica index */
int ppdl_plan_stage_of_rank(const ppdl_plan *p, int rank, int *replica);
/* What kind of plan it is, in words, into buf: "one stage" (one rank), "data parallel
 * x 4" (one stage on every rank), "pipeline, 4 stages" (one rank each), "2 stages x 2
 * replicas" (every stage on as many ranks), "3 stages (stage 0 x 2 replicas)" or "4
 * stages (stage 0 x 2, stage 2 x 3 replicas)" (the replicated ones named). Returns buf. */
const char *ppdl_plan_kind(const ppdl_plan *p, char *buf, size_t len);
/* ranks used by the plan: the sum of the stages' replicas */
int ppdl_plan_ranks_used(const ppdl_plan *p);
void ppdl_plan_free(ppdl_plan *p);

#endif
