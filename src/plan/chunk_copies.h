/* chunk_copies.h — the planner's chunked plans in k copies (plan.h: every stage k
 * replicas, copy q on ranks q N/k .. (q+1) N/k - 1, or strided on q, q+k, .. (below),
 * running micro-batches q, q+k, ..;
 * issue 22: the schedule, the partition, the placement, the recompute options and the
 * replication chosen together).
 *
 * A copy is one chunked pipeline, so its plan is solve_chunked.h's on a cluster of N/k
 * ranks for ceil(M/k) micro-batches (copy 0's, the most): the copies' worst case, rank
 * position by position (the least memory and speed, the slowest link, of the k ranks
 * at a position: the plan fits and is paced for every copy; ranks numbered node by node
 * keep a copy inside a node where N/k divides the node). The plan is then repeated on
 * every copy and evaluated whole (costmodel.h "Chunked plans in k copies": the copies'
 * sums of gradients included). Which k: k >= 2 dividing N with N/k >= 2 (a copy is a
 * pipeline), k <= M (a copy runs at least one micro-batch) and v N/k <= L. A solve per
 * k and chunked candidate would triple --schedule auto's time, so they are screened by
 * their plans of equal layer counts: schedule_choice.c solves only the candidate and
 * the k whose such plan's T, relative to the candidate's one pipeline's, predicts the
 * least T (the one pipeline's solved T times that ratio), and with no restarts of the
 * local search (solver.h chunked_restarts = 0).
 * Pure C, deterministic. */
#ifndef PPDL_CHUNK_COPIES_H
#define PPDL_CHUNK_COPIES_H

#include <stddef.h>

#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/shared_cores.h"
#include "plan/solver.h"

/* How the N ranks form k copies of n = N / k: position r of copy q on rank q n + r
 * (blocks: a copy on consecutive ranks, inside a node where ranks are numbered node by
 * node and n divides the node: the pipeline's messages stay inside, the sums cross), or
 * on rank r k + q (strided: a copy across the nodes, the sums of a stage's replicas
 * inside one; better where a stage's gradients weigh more than its activations). */
enum { PPDL_COPIES_BLOCKS = 0, PPDL_COPIES_STRIDED = 1 };
int ppdl_copies_rank(int grouping, int n, int k, int q, int r);

/* One copy's cluster: n = cl->N / k ranks, rank r standing for position r of every
 * copy q (the least memory and speed of them, the least bandwidth and the most latency
 * of their links, the diagonal included); hosts: copy 0's ranks' hosts, each with its
 * cores shared among the copies in proportion to its ranks in copy 0 (at least one).
 * Free with ppdl_cluster_model_free. */
void ppdl_cluster_model_copy_of(const ppdl_cluster_model *cl, int k, int grouping, ppdl_cluster_model *out);

/* plan `one` (ranks 0..n-1) repeated as k copies: stage s's replica q on position r_s
 * of copy q */
void ppdl_plan_copies(const ppdl_plan *one, int n, int k, int grouping, ppdl_plan *out);

/* The screen (above) for schedule/v on cl with M micro-batches: the k and grouping
 * (*grouping, may be NULL) of least T of the plan of equal layer counts in k copies,
 * or 0 when no k fits the rules; *T_one and *T_k (may be NULL) get that plan's T with
 * one copy and with k (INFINITY: no plan). */
int ppdl_copies_screen(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, double *T_one,
                       double *T_k, int *grouping);

/* Solve schedule/v as k copies grouped so on cl (above) and annotate the whole plan. Returns 0 with
 * a plan that fits; -1 with the reason (then *out may hold a plan that does not fit,
 * feasible = 0, or none, S = 0). info and sc may be NULL; sc is set where cl's ranks
 * share cores (the whole plan's simulated step). */
int ppdl_solve_chunked_copies(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, int k,
                              int grouping, const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info,
                              ppdl_shared_choice *sc, char *err, size_t errlen);

#endif
