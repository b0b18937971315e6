/* vocab.h — vocabulary parallelism in the planner (docs/cost-model.md "Vocabulary
 * parallelism"): the head (the last layer, logits = ln_f(x) @ lm_head^T) cut by its
 * vocabulary's rows into one slice per pipeline stage, so the head's compute and its
 * B*T*V logits no longer sit on one rank (Yeung et al., MLSys 2025).
 *
 * The layout: a pipeline of one rank per stage over the layers before the head (stage s
 * on rank r_s), and slice s of the head's rows on r_s (plan.h ppdl_plan.vocab). Per
 * micro-batch the last block's output x (B*T*C) goes down the pipeline's own links from
 * r_{S-1} to r_0, each rank computing its slice's logits and carrying on the running
 * softmax statistics (max, sum of exp, target logit: O(B*T), left out of the bytes);
 * at r_0 the loss is known; the hidden-state gradient then comes back up r_0 -> r_{S-1},
 * each rank adding its slice's contribution (B*T*C), and the last block's backward
 * starts from the sum. The slices' weight gradients stay on their ranks.
 *
 * That is a V-shaped pipeline of 2S stages, the shape ZB-V runs (sched/schedule.h):
 * stage s < S the blocks of r_s, stage S + j the slice of r_{S-1-j}. The planner
 * evaluates and plays the layout as exactly that chunked zb-v plan over derived costs
 * (ppdl_vocab_expand: the head replaced by S slice layers, each its rows' share of the
 * head's time, parameters and logits), so the cost model's rule and the simulator's play
 * are the ones of chunked plans (costmodel.h "Chunked plans"), and the vocabulary passes
 * go where ZB-V's play puts them: into the bubbles. A tied weight (a gpt's wte =
 * lm_head.weight) stays whole on stage 0 for the embedding; each slice exchanges its
 * rows' gradient with stage 0 after the step (X_v below), counted in T and added to the
 * simulated step alike. Pure C. */
#ifndef PPDL_PLAN_VOCAB_H
#define PPDL_PLAN_VOCAB_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/simulate.h"

/* --vocab-parallel (ppdl-plan; ppdl's planner request keeps it off: no runtime yet) */
enum { PPDL_VOCAB_OFF = 0, PPDL_VOCAB_AUTO = 1, PPDL_VOCAB_ON = 2 };
/* "off", "auto", "on" -> PPDL_VOCAB_*; -1 when unknown */
int ppdl_vocab_mode_parse(const char *s);

/* The derived problem of a vocabulary-parallel plan p (p->n_vocab = S > 0): costs dc of
 * L - 1 + S layers (layers 0..L-2 as c's, then slice s = S-1, .., 0's head layer: fwd,
 * B and W, optimizer ms its rows' share n_s / V of the head's; param_bytes that share of
 * the head's; out_bytes the head's input x; stash x plus its share of the logits) with no
 * tie, and the zb-v plan dp of 2S stages (p's stages, then the slices in the V). -1
 * with the reason when p is not a layout of one rank per stage with S slices. */
int ppdl_vocab_expand(const ppdl_costs *c, const ppdl_plan *p, ppdl_costs *dc, ppdl_plan *dp, char *err,
                      size_t errlen);
/* X_v: with a tied weight of b bytes, the slowest of each slice's exchange of its rows'
 * gradient (b n_s / V bytes) with stage 0's rank, both ways, in ms (0 without a tie, or
 * for the slice on stage 0's rank) */
double ppdl_vocab_tie_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p);

/* ppdl_cost_evaluate and ppdl_simulate of a vocabulary-parallel plan (they call these
 * for p->n_vocab > 0): the derived zb-v plan's, plus X_v, and the tie's memory (stage 0
 * receives the slices' gradients, b; each slice its rows', b n_s / V). ev's arrays are
 * the derived plan's 2S stages. The schedule must be zb-v. */
int ppdl_vocab_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const ppdl_plan *p,
                        ppdl_cost_eval *ev, char *err, size_t errlen);
int ppdl_vocab_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M, int schedule,
                        int record, ppdl_sim *out, char *err, size_t errlen);

/* The rows of each slice for a cut of the pipeline: water-filling, each rank's rows in
 * proportion to its speed times what it lacks of the level lambda at which the slices
 * take the whole head,
 *     t_s + n_s H / (V speed_s) = lambda  where n_s > 0,   t_s >= lambda where n_s = 0
 * (t_s the stage's time per micro-batch, H the head's), cut by ppdl_slices (core/slices.h)
 * into bounds[0..S] of V rows; cap[s] (NULL: none) the most rows rank s may hold (its
 * memory), the rest going to the others. */
void ppdl_vocab_slices(const double *t, const double *speed, const double *cap, int S, double H, long V,
                       size_t *bounds);

/* The best vocabulary-parallel plan for M micro-batches under zb-v: the pipeline over
 * ranks 0..N-1 in order, one stage each, no recompute; every cut of layers 0..L-2 into
 * N stages where there are at most 4096, else the cut that balances the stages' times;
 * each cut's slices by ppdl_vocab_slices (then capped by memory once where a rank is
 * over), the least T that fits. 0 with the plan (annotated: T in predicted_iter_ms),
 * -1 with the reason (no "vocab" in the costs, fewer layers than ranks, nothing fits:
 * the plan that was closest is still returned, p->S > 0). */
int ppdl_vocab_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, ppdl_plan *p, char *err,
                    size_t errlen);

#endif
