/* replica.h — what replicating a stage changes in the cost model: how the
 * micro-batches divide among a stage's replicas, how many each holds at once, which
 * pairs of ranks carry them between stages, and what summing the gradients costs.
 * Pure C (no MPI): the planner, the cost model and the simulator share these.
 *
 * The runtime's rules (src/pipe/runtime.c, grad_sum.c), restated here without MPI:
 *  - micro-batch j runs on replica j mod k of a stage with k replicas;
 *  - replica q runs the op list ppdl_schedule_make (sched/schedule.h) gives
 *    it for the layout, the runtime and the simulator alike: its own micro-batches,
 *    and with 1F1B a warm-up that counts the later stages' replicas;
 *  - micro-batch j goes from replica j mod k_s of stage s to replica j mod k_{s+1};
 *  - after its last backward a replica sums its gradients with the stage's other
 *    replicas (MPI_Iallreduce; under --netem the ring of src/net/ring.c), and the
 *    optimizer waits for that sum.
 */
#ifndef PPDL_REPLICA_H
#define PPDL_REPLICA_H

#include "sched/schedule.h"
#include "plan/cluster_model.h"

/* micro-batches j < M with j mod k == q: ceil((M - q) / k) */
int ppdl_replica_mbs(int M, int k, int q);

/* micro-batches j < M that go from replica a (of ka) of one stage to replica b (of kb)
 * of the next: j mod ka == a and j mod kb == b */
int ppdl_pair_mbs(int M, int ka, int a, int kb, int b);

/* Micro-batches replica q of stage s holds at once in the layout k: the peak of its op
 * list (ppdl_schedule_make), what the runtime allocates stash slots for. It comes to
 *    GPipe: n_sq = ceil((M - q) / k_s)
 *    1F1B:  min(n_sq, floor(W_s / k_s) + 1),  W_s = min(M, k_s+1 + ... + k_S-1)
 * (the stage's list holds the window of micro-batches W_s+1 wide after each forward;
 * the replica the ones of them j mod k_s == q). One replica per stage gives
 * ppdl_in_flight: min(M, S - s) for 1F1B, M for GPipe. Replica 0 holds the most. */
int ppdl_replica_in_flight(int schedule, int S, int M, const int *k, int s, int q);

/* The slowest link between two distinct ranks of ranks[0..k-1] (bytes/s, either
 * direction) while they all copy at once: a memory-bound link inside a host (at least a
 * quarter of the slower end's memcpy rate, the diagonal) divided by the host's memory
 * contention (cluster_model.h); and the largest latency between them (s). k < 2:
 * INFINITY and 0. */
double ppdl_group_min_bw(const ppdl_cluster_model *cl, const int *ranks, int k);
double ppdl_group_max_lat(const ppdl_cluster_model *cl, const int *ranks, int k);

/* Over every group of k ranks, k = 2..kmax: bw[k] at least the slowest link of any
 * (ppdl_group_min_bw) and lat[k] at most the largest latency of any
 * (ppdl_group_max_lat). A group holding rank r holds k-1 others, so its slowest link
 * is no faster than r's (k-1)-th fastest, and its largest latency no less than r's
 * (k-1)-th least: the best of these over r bounds every group. bw[0..1] = 0, lat[0..1]
 * = INFINITY (no group). O(N^2 log N). */
void ppdl_group_link_bounds(const ppdl_cluster_model *cl, int kmax, double *bw, double *lat);

/* The gradient all-reduce of a stage among ranks[0..k-1], in ms: `bytes` of gradients
 * in n_msgs all-reduces (the runtime sums each layer with parameters on its own), each
 * a ring (reduce-scatter then all-gather: every rank sends and receives 2 (k-1) chunks
 * of 1/k of it):
 *   1000 * (2 (k-1)/k * bytes / slowest link + n_msgs * 2 (k-1) * largest latency)
 * "Slowest link" is over every pair of the ranks, not one ring order: MPI picks the
 * algorithm and the order, and on clusters of nodes any ring over ranks of two nodes
 * crosses the slow link anyway. 0 when k < 2 or bytes = 0. */
double ppdl_allreduce_ms(const ppdl_cluster_model *cl, const int *ranks, int k, double bytes, int n_msgs);
/* the same from the group's slowest link bw and largest latency lat */
static inline double ppdl_allreduce_ms_bw(int k, double bytes, int n_msgs, double bw, double lat)
{
    if (k < 2 || bytes <= 0) return 0;
    return 1000.0 * (2.0 * (k - 1) / k * bytes / bw + n_msgs * 2.0 * (k - 1) * lat);
}

/* The order the planner gives a stage's replicas: rank order. It is the order of the
 * stage's all-reduce communicator, and with ranks numbered node by node (Slurm's block
 * distribution, scripts/cluster-emu) a ring in rank order stays inside each node and
 * crosses between nodes once per node. (Ordering by probed speed, so that replica 0,
 * which takes micro-batch 0 and one more micro-batch when M mod k != 0, is the fastest,
 * does not pay: on equal devices the probed speeds differ from noise alone, and the
 * scrambled ring crosses the slow link up to k times.)
 * Sorts ranks[0..k-1] in place; the cluster is for future orders that need it. */
void ppdl_sort_replicas(const ppdl_cluster_model *cl, int *ranks, int k);

#endif
