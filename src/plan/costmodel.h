/* costmodel.h — the cost model of docs/cost-model.md, evaluated for one plan: the
 * predicted step T and each rank's memory, term by term, straight from the formulas.
 * The planner (solver.h, engine.h) minimises exactly this T; this file is the
 * independent check the tests hold it to.
 *
 * One rank per stage (docs/cost-model.md "One rank per stage"):
 *   T = sum_s time_s + 2 * sum_{s<S-1} link_s + (M - 1) * max(max_s time_s, max_s link_s)
 * feasible when every stage's mem_s <= mem_bytes[r_s]: the first micro-batch goes through
 * every stage and link forward and back, the other M-1 follow at the pace of the slowest.
 *
 * Replicated stages ("Replicated stages"; micro-batch j on replica j mod k_s, replica.h):
 *   T = sum_s time_s + 2 * sum_{s<S-1} link_s + P + max_s (AR_s + OPT_s)
 * with time_s and link_s the slowest replica's and rank pair's, P the busiest replica's
 * or pair's other micro-batches, AR_s the stage's ring all-reduce counted without
 * overlap (an overestimate the simulator corrects) and OPT_s its optimizer step
 * ("Step costs": input_ms, target_ms, optimizer_ms; 0 when COSTS.json has none). With
 * k_s = 1 everywhere this is the form above exactly.
 *
 * A tied weight (costs.h tied_bytes, "Tied weights") changes the memory of the stages
 * holding its layers and adds the gradient exchange X after every tail (an upper bound).
 * The zero-bubble and chunked schedules scale the fill by a factor phi; their formulas
 * are below, next to the functions that evaluate them. */
#ifndef PPDL_COSTMODEL_H
#define PPDL_COSTMODEL_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

/* The zero-bubble schedules (zb-h1, zb-h2, zb-1p: every backward split into B and W, the
 * W's filling the bubble; docs/schedules.md, docs/cost-model.md "zero-bubble"), one
 * rank per stage:
 *
 *   time_s = sum_{l in s} (fwd_ms_l + B_l(c_l) + W_l(c_l)) / speed[r_s]  (costs.h's split:
 *            B and W each pay their recompute, so time_s >= 1F1B's when a layer recomputes)
 *   mem_s  = state_multiplier * params + n_s * sum stash_l(c_l) + w_s * sum keep_l(c_l)
 *            n_s, w_s: the most micro-batches the stage's op list holds at once and the
 *            most between their B and their W (ppdl_schedule_max_in_flight,
 *            ppdl_schedule_max_pending_weight), keep_l: COSTS.json weight_keep_bytes
 *   T      = phi * sum_s time_s + 2 * sum links + (M - 1) * max(max time_s, max link_s)
 *            (+ the tail and the tie, as above)
 *   phi    = (e + 3) / (3 S), e = the unit play's step less 3M (sched/zero_bubble.h:
 *            the greedy play with F = B = W = 1 unit takes 3M + e units)
 *
 * phi scales the fill (the first micro-batch's way through the pipeline) so that on S
 * equal stages with F = B = W and free links T is the play's step exactly: 1F1B takes
 * 3M + 3(S - 1) units (phi = 1), ZB-H2 3M + S - 1 when M >= S (phi = (S + 2) / 3S:
 * about the forward ramp alone), ZB-1P 3M + 2(S - 1) (phi = (2S + 1) / 3S), ZB-H1
 * between ZB-H2 and ZB-1P. The first stage runs a B and its W as one fused backward
 * where they are adjacent: counted as B + W (equal without recompute, an upper bound
 * with it). The planner (engine.h) solves this T exactly,
 * except that it counts keep_l for every micro-batch in flight (w_s <= n_s: its plans
 * fit, and it may miss one that fits only by the difference). GPipe and 1F1B: phi = 1,
 * no split, w_s = 0: the formulas above.
 *
 * Replicated stages under a zero-bubble schedule: the replica form above with tau_sq
 * the split time, f_sq and w_sq the replica's own op list's peaks (its passes in the
 * play of the layout with the replicas as devices, sched/zero_bubble.h), and the fill
 * scaled by the layout's phi (ppdl_fill_factor_layout):
 *   T = phi sum_s time_s + 2 sum_s link_s + P + max_s (AR_s + OPT_s) (+ the tie)
 *
 * Chunked plans (interleaved, zb-v: S = v N stages, stage s on rank r_s as the schedule
 * places it, sched/schedule.h): a rank runs its v stages' lists on one device, one op at
 * a time, so the rank, not the stage, is the resource:
 *
 *   time_s = as above (split for zb-v), on r_s's speed; OPT_s as above
 *   mem_s  = state_multiplier * params + n_s * stash + w_s * keep, n_s and w_s the
 *            peaks of stage s's own list in its rank's schedule (ppdl_schedule_make)
 *   R_r    = sum_{s on r} time_s                  (rank r's work per micro-batch)
 *   link_s = lam_s(r_s, r_s+1), 0 when both stages are on one rank
 *   L_ab   = sum of lam_s(a, b) over the boundaries whose activations go a -> b and
 *            those whose gradients do (one micro-batch's messages on the directed pair)
 *   P      = max( max_r (M - 1) R_r, max_{a != b} (M - 1) L_ab )
 *   T      = phi sum_s time_s + 2 sum_s link_s + P + max_r sum_{s on r} OPT_s
 *   phi    = (U - 3 v (M - 1)) / (3 S), U = ppdl_schedule_unit_step_chunked(kind, N, v, M)
 *
 * feasible when sum_{s on r} mem_s <= mem_bytes[r] for every rank. phi makes T the
 * unit play's step exactly on S equal stages (F + B = 3 units, fused or B + W) with
 * free links: phi 3S + 3v(M - 1) = U (interleaved, N | M: phi = (v + N - 1) / (v N),
 * the fill divided by about v). As for the zero-bubble schedules, the rest is a
 * stated rule, not a play: the simulator (simulate.h) plays the lists themselves and
 * is the prediction to trust (tests/unit/test_simulate_chunked.c: both against steps
 * computed by hand).
 *
 * Chunked plans in k copies (k = ppdl_plan_chunk_replicas > 1, plan.h: every stage k
 * replicas, copy q on the ranks R_s[q] running micro-batches q, q+k, ..): each copy is
 * the chunked pipeline above on N = N_all / k ranks with at most M0 = ceil(M / k)
 * micro-batches (copy 0's), and each stage's gradients are summed among its replicas:
 *
 *   n_s, w_s  the peaks of stage s's list in one copy's schedule for M0 micro-batches
 *             (every copy's memory is counted with them: copy 0 holds the most)
 *   time_s, OPT_s  the slowest replica's, link_s the slowest copy's pair
 *   R_r, L_ab as above, for every rank and pair of every copy; M0 replaces M in P:
 *   P      = max( max_r (M0 - 1) R_r, max_{a != b} (M0 - 1) L_ab )
 *   AR_s   = the ring all-reduce of stage s among its k replicas' ranks, as for a
 *            replicated stage above (ppdl_stage_allreduce_ms: link_bw_at_once's memory
 *            contention included)
 *   AR_r   = sum_{s on r} AR_s    (a rank's v stages have their replicas on the same k
 *            ranks: their sums share those links, one after another)
 *   T      = phi sum_s time_s + 2 sum_s link_s + P + max_r (AR_r + sum_{s on r} OPT_s) (+ the tie)
 *   phi    as above for one copy: U = ppdl_schedule_unit_step_chunked(kind, N, v, M0)
 *
 * On equal copies that is one copy's T for M0 micro-batches plus the all-reduce, with
 * no overlap credited (as for replicated stages: the runtime starts a stage's sum at its
 * last backward, which for the rank's last chunk is the end of its pipeline, and the
 * simulator plays the overlap of the earlier chunks' sums). With k = 1 this is the rule
 * above, bit for bit. */

/* phi: 1 for GPipe and 1F1B, (e + 3) / (3 S) for the zero-bubble schedules */
double ppdl_fill_factor(int schedule, int S, int M);
/* phi on the layout k (stage s on k[s] replicas; NULL: one each): 1 for GPipe and 1F1B,
 * for the zero-bubble schedules (U - P) / (3 sum_s k_s), U the step of the layout's
 * play (replicas as devices, a pass of stage s k_s units long:
 * ppdl_schedule_unit_step_layout) and P = max_s (ceil(M / k_s) - 1) 3 k_s: so that on
 * a layout whose stage s's F, B and W each take k_s units (the balanced plans the
 * planner makes: k_s times the layers of a one-rank stage) with free links T is the
 * play's step exactly; one replica each: (e + 3) / (3 S) as above */
double ppdl_fill_factor_layout(int schedule, int S, int M, const int *k);
/* the same from the play's step, when the caller has played it already
 * (ppdl_schedule_counts_layout returns it) */
double ppdl_fill_factor_step(int schedule, int S, int M, const int *k, long step);
/* layer l's fwd + backward ms at speed 1 under option o: fwd_ms + bwd_ms + extra_ms[o],
 * or with split (a zero-bubble schedule) fwd_ms + B(o) + W(o) (costs.h) */
double ppdl_layer_sched_ms(const ppdl_costs *c, int l, int o, int split);
/* micro-batches stage s of S holds at once under the schedule (PPDL_SCHED_*), one rank
 * per stage: min(M, S - s) for 1F1B, M for GPipe, the op list's count for the
 * zero-bubble schedules; and of them between their B and their W (0 without a split) */
int ppdl_in_flight(int schedule, int S, int M, int s);
int ppdl_pending_weight(int schedule, int S, int M, int s);

/* time_s of layers i..j under options recompute[0..j-i] (NULL: all 0) on a rank of `speed` */
double ppdl_stage_time(const ppdl_costs *c, int i, int j, const int *recompute, double speed);
/* the same with split backwards (split: a zero-bubble schedule's B + W) */
double ppdl_stage_time_split(const ppdl_costs *c, int i, int j, const int *recompute, double speed, int split);
/* the optimizer step of layers i..j on a rank of `speed` (0 without optimizer_ms) */
double ppdl_stage_opt_ms(const ppdl_costs *c, int i, int j, double speed);
/* mem_s of layers i..j under options recompute (NULL: all 0) with n micro-batches in flight */
double ppdl_stage_mem(const ppdl_costs *c, int i, int j, const int *recompute, int n);
/* ... and w of them between their B and their W (weight_keep_bytes each) */
double ppdl_stage_mem_split(const ppdl_costs *c, int i, int j, const int *recompute, int n, int w);
/* link_s after layer j from rank a to rank b, in ms */
double ppdl_link_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int j, int a, int b);
/* AR_s, the gradient all-reduce among stage st's replicas (replica.h's ring over their
 * ranks, one message per layer with parameters), in ms; 0 with one replica */
double ppdl_stage_allreduce_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan_stage *st);
/* Sharded optimizer state (plan.h shard_optimizer; docs/cost-model.md "Sharded optimizer
 * state"). A stage of layers i..j with `params` parameter bytes holds AdamW's m and v for
 *   n = floor((params - t) / 4) elements      t = the tied weight's bytes where the
 *                                              stage holds both its layers (held once), else 0
 * min(2, state_multiplier) x 4 bytes each (ppdl_opt_elem_bytes: 8 for fp32 m and v, the
 * part of state_multiplier's 4 that sharding divides). Sharded among k >= 2 replicas,
 * replica q holds those of its slice only (ppdl_slices(n, k, weights, PPDL_SLICE_ALIGN)):
 *   mem_sq = mem_sq (unsharded) - e n + e |slice_q|
 * With weights NULL (equal slices) every replica is charged the largest slice; with
 * weights (replicas of different memories: each one's headroom, ppdl_slices_sized) its
 * own. k = 1 or sharding off: the unsharded memory, bit for bit. */
double ppdl_opt_elem_bytes(const ppdl_costs *c);
size_t ppdl_stage_opt_elems(const ppdl_costs *c, int i, int j, double params);
/* e |slice_q| of n elements in k slices (weights NULL: the largest slice, q unread) */
double ppdl_slice_opt_bytes(const ppdl_costs *c, size_t n, int k, const double *weights, int q);
/* mem_sq of replica q of k of a stage sharded with `weights` (k < 2: unsharded) */
double ppdl_stage_mem_sharded(const ppdl_costs *c, int i, int j, const int *recompute, int n, int w, int k,
                              const double *weights, int q);
/* Slices sized to the replicas' memories: n elements among k replicas with headroom[q]
 * bytes each for their AdamW state (their memory less everything else the replica
 * holds); weights[q] = headroom[q] (negative: 0). 1 when every replica's slice fits its
 * headroom (then weights holds them: ppdl_slices cuts the slices with them), 0 when not
 * (some headroom negative, or together less than the state). */
int ppdl_slices_sized(const ppdl_costs *c, size_t n, int k, const double *headroom, double *weights);
/* what divides a replica's optimizer step (OPT): k for a stage of k >= 2 replicas in
 * equal slices of a sharded state (each updates 1/k of it), else 1 (unsharded, or
 * sized slices: each replica charged the whole step, an upper bound) */
int ppdl_opt_divisor(int shard, const ppdl_plan_stage *st);
/* the tie's memory term of a stage of layers i..j (above; 0 without a tie) */
double ppdl_tie_mem(const ppdl_costs *c, int i, int j);
/* X, the tie's exchange (above) between the first stage's replicas r0[0..k0-1] and the
 * last stage's rl[0..kl-1], in ms; 0 without a tie */
double ppdl_tie_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const int *r0, int k0, const int *rl, int kl);

typedef struct ppdl_cost_eval {
    int S;
    int schedule;              /* the schedule evaluated (PPDL_SCHED_*) */
    int feasible;              /* every replica fits its rank's memory */
    double T;                  /* predicted iteration ms */
    double bottleneck;         /* the busiest resource's time per micro-batch of the step:
                                  max over replicas and links of (its micro-batches x its
                                  time) / M; max(max time_s, max link_s) when S = N */
    int bottleneck_stage;      /* stage (or link after stage) that sets it */
    int bottleneck_is_link;
    double sum_time, sum_link;
    double pace;               /* P: (M-1) * bottleneck when S = N */
    double allreduce;          /* max_s AR_s */
    double tail;               /* after the flush: max_s (AR_s + OPT_s); = allreduce
                                  when the costs have no optimizer_ms */
    double tie;                /* X, the tied weight's exchange (0 without, or on one stage) */
    double phi;                /* the fill factor (1 but for the zero-bubble schedules) */
    double *time_ms;           /* [S] time_s: the slowest replica's */
    double *mem_bytes;         /* [S] of the replica furthest over (or closest to) its limit */
    double *mem_limit;         /* [S] mem_bytes of that replica's rank */
    double *link_ms;           /* [S] link_s after stage s, its slowest pair (0 for the last) */
    double *allreduce_ms;      /* [S] AR_s */
    double *optimizer_ms;      /* [S] OPT_s: the slowest replica's optimizer step */
    int *in_flight;            /* [S] that replica's in-flight micro-batches */
    int *pending_weight;       /* [S] ... of them between B and W (0 without a split) */
    int *replicas;             /* [S] k_s */
    double *replica_opt_bytes; /* [sum k_s] each replica's AdamW state, stage by stage
                                  (NULL for chunked plans) */
    int worst_stage;           /* the stage furthest over (or closest to) its limit */
    double worst_over;         /* mem - limit of that stage, bytes (> 0 when infeasible) */
} ppdl_cost_eval;

/* Evaluate plan p (which must cover the costs' L layers with every one of the
 * cluster's N ranks in one stage, valid recompute options and at most M replicas per
 * stage; -1 with a message otherwise). */
int ppdl_cost_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                       const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen);
void ppdl_cost_eval_free(ppdl_cost_eval *ev);
/* ev's S, schedule and per-stage arrays (zeroed) for S stages */
void ppdl_cost_eval_alloc(ppdl_cost_eval *ev, int S, int schedule);
/* Copy the evaluation into the plan: its schedule's name, feasible, predicted_iter_ms,
 * bottleneck_ms and each stage's time_ms, mem_bytes, allreduce_ms and (where evaluated)
 * each replica's optimizer bytes (opt_bytes). */
void ppdl_cost_annotate(ppdl_plan *p, const ppdl_cost_eval *ev);
/* A lower bound on T over every plan of the problem (any stages, replicas, placement
 * and recompute; memory aside), for GPipe and 1F1B, with the term that sets it in why
 * (may be NULL): the larger of
 *   work    T >= M W / (the ranks' speeds summed) + OPT
 *   spread  T >= W / vmax + min over k of (ceil(M/k) - 1) k W / (N vmax) + max(AR_k, OPT)
 * with W = the layers' fwd_ms + bwd_ms plus input_ms and target_ms, OPT = the largest
 * layer's optimizer_ms on the fastest rank for it, and AR_k the least all-reduce of a
 * stage of k replicas holding k W / N of the work (some stage holds at least that per
 * replica); docs/cost-model.md, "A lower bound", derives both. 0 (and why says so)
 * for the zero-bubble and chunked schedules: their fill factor comes from a play of
 * the layout, with no closed form to bound. */
double ppdl_lower_bound_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, char *why,
                           size_t len);
/* ... with the AdamW state sharded among replicas (shard 1): OPT divided by min(M, N),
 * the most replicas a stage can have (a sharded replica updates its slice only) */
double ppdl_lower_bound_shard_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int shard,
                                 char *why, size_t len);

/* Evaluate and annotate in one call; returns T (INFINITY when p is not valid). */
double ppdl_cost_apply(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p);

#endif
