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
    /* the optimizer state's slices (plan-level shard_optimizer, replicated stages only):
     * replica q owns AdamW's m and v of elements [bounds[q], bounds[q+1]) of the stage's
     * flat parameter range, bounds = ppdl_slices(n, k, slice_weights, PPDL_SLICE_ALIGN)
     * (core/slices.h). NULL: equal slices; else [n_replicas] weights, sized to the
     * replicas' memories where they differ (costmodel.h "Sharded optimizer state").
     * JSON "slice_weights", only when not NULL. */
    double *slice_weights;
    /* predicted bytes of AdamW state on each replica ([n_replicas], NULL if unknown);
     * JSON "optimizer_bytes" */
    double *opt_bytes;
} ppdl_plan_stage;

/* the alignment, in elements, of the slices' bounds (ppdl_slices' align): the planner
 * and the runtime cut with it alike */
#define PPDL_SLICE_ALIGN 1

/* vocabulary parallelism (plan/vocab.h): rows first..last of the head's vocabulary on
 * rank `rank`; first = last + 1 for an empty slice */
typedef struct ppdl_vocab_slice {
    int rank;
    long first, last;
} ppdl_vocab_slice;

typedef struct ppdl_plan {
    char method[32];
    char schedule[16];         /* the schedule it was solved for (JSON "schedule", optional:
                                  "" when not known, as in plans written before it) */
    int feasible;
    double predicted_iter_ms;  /* 0 if unknown */
    double bottleneck_ms;
    double lower_bound_ms;     /* no plan of the problem has a shorter T (costmodel.h
                                  ppdl_lower_bound_ms; JSON "lower_bound_ms", only where
                                  known); 0 if unknown */
    /* the AdamW state of every replicated stage is sharded among its replicas (each
     * holds m and v of its slice only; docs/memory.md); 0: every replica holds all of
     * it. Meaningless without replicas. JSON "shard_optimizer" (optional, false),
     * written when the plan has a replicated stage */
    int shard_optimizer;
    int S;
    ppdl_plan_stage *stages;   /* [S], in pipeline order */
    /* vocabulary parallelism (plan/vocab.h; JSON "vocab_parallel"): n_vocab = S > 0
     * slices of the head (layer vocab_layer, the last) over vocab_size rows, slice s on
     * stage s's rank, rows ascending; the stages then cover layers 0..L-2, one rank each.
     * 0: the head is a layer of the last stage, as every other layer. */
    int n_vocab;
    int vocab_layer;
    long vocab_size;
    ppdl_vocab_slice *vocab;   /* [n_vocab] */
} ppdl_plan;

/* S stages of (nearly) equal layer counts on ranks 0..S-1, no recompute; the first
 * L mod S stages get one layer more. -1 when S > L. */
int ppdl_plan_uniform(int L, int S, ppdl_plan *p, char *err, size_t errlen);

/* Chunked plans: a rank may run several stages (chunks), for interleaved 1F1B and
 * ZB-V. A plan is chunked when every rank it uses runs the same number
 * v >= 2 of stages and every stage has the same number k >= 1 of replicas, each rank
 * the same replica q of all the stages it runs: k copies of one chunked pipeline of
 * N = S / v ranks, copy q running micro-batches q, q+k, .. (data parallelism across
 * the copies, their gradients summed per stage). Uneven replicas and chunks do not mix.
 * How the ranks follow each other along the pipeline (the v_order of the builder): */
/* the most stages one rank holds (--virtual-stages; the planner's candidates) */
#define PPDL_MAX_CHUNKS 8
enum {
    PPDL_CHUNKS_ROUND_ROBIN = 0, /* stage s on the rank of stage s mod N (interleaved 1F1B) */
    PPDL_CHUNKS_V = 1            /* v = 2: stage s and stage 2N-1-s on one rank (ZB-V) */
};
/* L layers cut into S = v*N stages of (nearly) equal layer counts in pipeline order (the
 * first L mod S one layer more), no recompute; stage s on rank s mod N (round-robin) or,
 * for v = 2 and v_order PPDL_CHUNKS_V, on rank s < N ? s : 2N-1-s. v = 1 is
 * ppdl_plan_uniform(L, N). -1 with the reason when S > L or v_order does not fit v. */
int ppdl_plan_uniform_chunked(int L, int N, int v, int v_order, ppdl_plan *p, char *err, size_t errlen);
/* The same with k copies of the pipeline (--plan uniform --replicas k): the N ranks
 * form k copies of N/k ranks, copy q on ranks q*N/k .. (q+1)*N/k - 1, each stage
 * replicated k times (v = 1: N/k stages x k replicas). -1 when k does not divide N. */
int ppdl_plan_uniform_replicated(int L, int N, int v, int v_order, int k, ppdl_plan *p, char *err, size_t errlen);
/* v, the stages each rank runs: >= 2 for a chunked plan, 1 for every other plan
 * (one stage per rank, replicated stages, and plans that fit neither rule). */
int ppdl_plan_chunks(const ppdl_plan *p);
/* k, the copies of a chunked plan's pipeline (each stage's replicas); 1 for a plan
 * that is not chunked */
int ppdl_plan_chunk_replicas(const ppdl_plan *p);
/* 1 when the chunked plan p follows the order (round-robin: stage s runs on the rank of
 * stage s mod N; V: v = 2 and stage 2N-1-s runs on the rank of stage s, for s < N),
 * whatever the ranks' numbers; 0 otherwise and for plans that are not chunked. With one
 * rank and v = 2 both orders hold. */
int ppdl_plan_chunk_order_is(const ppdl_plan *p, int v_order);
/* The stages `rank` runs (or holds a replica of), ascending, into stages[0..max-1];
 * returns how many it runs (which may exceed max: only max are written). */
int ppdl_plan_stages_of_rank(const ppdl_plan *p, int rank, int *stages, int max);

/* Plain data parallelism: one stage of all L layers replicated on ranks 0..N-1. */
int ppdl_plan_data_parallel(int L, int N, ppdl_plan *p, char *err, size_t errlen);

/* Read a plan JSON file and validate it for a model of L layers on n_ranks ranks:
 * every layer covered once, in order, stages non-empty, ranks in range, every rank of
 * the job used, recompute arrays of the right length with options in [0, n_options[l]);
 * the ranks distinct (each runs one stage or one replica of one) or the plan chunked
 * (above). An optional top-level "chunks" must agree with the stages. */
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

/* The plan as JSON text (malloc'd, caller frees), in the plan format of docs/formats.md
 * ("chunks": v at the top level for a chunked plan, absent otherwise). */
char *ppdl_plan_to_json(const ppdl_plan *p);
/* ... written to a file (whole or not at all), which ppdl_plan_read reads back. */
int ppdl_plan_write(const char *path, const ppdl_plan *p, char *err, size_t errlen);
/* the stage run by `rank`, or -1; *replica (if not NULL) gets its replica index. In a
 * chunked plan: the rank's first stage (ppdl_plan_stages_of_rank gives them all). */
int ppdl_plan_stage_of_rank(const ppdl_plan *p, int rank, int *replica);
/* What kind of plan it is, in words, into buf: "one stage" (one rank), "data parallel
 * x 4" (one stage on every rank), "pipeline, 4 stages" (one rank each), "2 stages x 2
 * replicas" (every stage on as many ranks), "3 stages (stage 0 x 2 replicas)" or "4
 * stages (stage 0 x 2, stage 2 x 3 replicas)" (the replicated ones named); chunked:
 * "interleaved, 4 stages on 2 ranks (2 each)" (round-robin), "V, 4 stages on 2 ranks",
 * "chunked, 6 stages on 2 ranks (3 each)" (any other order), each followed by
 * " x 2 replicas" where the pipeline has copies; a vocabulary-parallel plan adds ", the
 * head by vocabulary over 4 ranks". Returns buf. */
const char *ppdl_plan_kind(const ppdl_plan *p, char *buf, size_t len);
/* ranks used by the plan: the sum of the stages' replicas; for a chunked plan the
 * distinct ranks k * S / v */
int ppdl_plan_ranks_used(const ppdl_plan *p);
void ppdl_plan_free(ppdl_plan *p);

#endif
