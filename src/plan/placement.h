/* placement.h — placement.c, the search over rank orders for one rank per stage (a
 * driver of the engine; solver.c and hybrid.c use it). Not a public interface. */
#ifndef PPDL_PLACEMENT_H
#define PPDL_PLACEMENT_H

#include "plan/engine.h"

/* groups of fast-linked ranks: group[r] in 0..n-1; returns n */
int rank_groups(const plan_ctx *x, int *group);
/* the order of G groups minimising the sum of 1/(best bandwidth between consecutive
 * groups): an exact path over subsets up to 12 groups, else nearest neighbour */
void order_groups(const ppdl_cluster_model *cl, const int *group, int G, int *gorder);
/* candidate orders (ranks in order first), written to orders[k*N..]; returns how many
 * (at most max) */
int candidate_orders(const plan_ctx *x, int *orders, int max, int *n_groups);
/* append order o (N ranks) to the n candidates unless it is one of them or max are
 * there; returns the new count */
int add_candidate_order(int *orders, int n, int max, int N, const int *o);
/* Improve (order, first, T) by local search, at most about `budget` solves, with the
 * tables tb (factored) and the layout ly the engine solves the orders in. */
void local_search(plan_ctx *x, stage_tables *tb, layout *ly, int *order, int *first, double *T, long budget);
/* swaps towards an order whose smallest-stash plan fits; 1 when found */
int feasible_search(const plan_ctx *x, int *order, long budget);

#endif
