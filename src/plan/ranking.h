/* ranking.h — candidate plans ranked by their simulated step (simulate.h). The chooser
 * (chooser.c) makes the candidates and offers them here; the ranking keeps the best
 * distinct ones in simulated order and picks the runners-up that ppdl --plan-trials
 * measures. Two callers: the choice where ranks share a host's cores
 * (shared_cores.h), and a close call with a core per rank (chooser.c). Pure C. */
#ifndef PPDL_RANKING_H
#define PPDL_RANKING_H

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

/* the most candidates a ranking keeps */
#define PPDL_RANKING_KEEP 24

typedef struct ppdl_ranking ppdl_ranking;

/* A ranking of up to `keep` (1..PPDL_RANKING_KEEP) candidates of M micro-batches under
 * `schedule` on cl, for the method that made `order_of` (its optimum): every plan moved
 * out of the ranking is named for that method, and the layout kinds below take their
 * ranks in the order of order_of's stages (replicas in order). Free with
 * ppdl_ranking_free. */
ppdl_ranking *ppdl_ranking_new(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int keep,
                               const ppdl_plan *order_of);

/* Offer p (built and annotated by the cost model; owned by the ranking from here on):
 * it takes its place among the kept candidates, in simulated order, when it fits, can
 * be played, is not one of them already (the same layers, ranks and recompute: uniform
 * and ppdl-inorder often are one plan), and simulates shorter than a kept one by more
 * than a relative 1e-9 (ties keep the earlier candidate); else it is freed. */
void ppdl_ranking_offer(ppdl_ranking *r, ppdl_plan *p, const char *label);

/* The layout kinds to solve as stage-of-rank arrays: replicas per stage k_0..k_S-1
 * (each 1..M, S <= L), all compositions of N up to 8 ranks, else equal replica counts;
 * the ranks taken in the order of `pipeline` (NULL: of order_of), which stays the order
 * from here on. Returns how many are in *grps (N ints each), each labelled "layout
 * k_0+k_1+..." in *labels (48 bytes each); the caller frees both. */
int ppdl_ranking_layout_kinds(ppdl_ranking *r, const ppdl_plan *pipeline, int **grps, char **labels);

/* candidates offered that fit and were simulated */
int ppdl_ranking_simulated(const ppdl_ranking *r);

/* Move the kept candidate of least simulated step into *out (its label into label[48]
 * and its step into *ms, either may be NULL); -1 where none is kept. */
int ppdl_ranking_take_best(ppdl_ranking *r, ppdl_plan *out, char *label, double *ms);

/* The runners-up of `plan` (the plan chosen; not among the kept candidates as such):
 * first the kept candidate of least simulated step of each family plan is not (data
 * parallel; pipeline, no stage replicated; some stages replicated) that simulates to at
 * most max_ms, in simulated order; then, with `rest`, the other kept candidates in
 * simulated order. Up to n of them are moved to others[] (the caller frees them), with
 * its simulated step in others_ms and its label in
 * others_label (either may be NULL). Returns how many. */
int ppdl_ranking_runners_up(ppdl_ranking *r, const ppdl_plan *plan, double max_ms, int rest, int n,
                            ppdl_plan *others, double *others_ms, char (*others_label)[48]);

/* frees the ranking and every candidate still in it */
void ppdl_ranking_free(ppdl_ranking *r);

#endif
