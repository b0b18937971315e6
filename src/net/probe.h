/* probe.h — measure the job's network and devices: the CLUSTER.json of docs/formats.md.
 *
 * Rank 0 coordinates; every ordered pair (i, j) gets its bandwidth and latency:
 *   - pairs meet in a round-robin tournament (the circle method, O(N) rounds); a round's
 *     pairs run at once when they share no host, one after another otherwise;
 *   - a pair (a < b) runs ping-pongs driven by a: small both ways (latency = half the
 *     round trip, the same both ways), then messages of each large size one way with a
 *     small reply, fitted to latency + bytes/bandwidth by least squares, each size's
 *     fastest exchange kept; the large size is chosen from the warm-up (choose_large);
 *   - the schedule runs in passes, each measurement one sample of both directions; after
 *     each pass rank 0 asks another of the pairs not yet settled
 *     (ppdl_probe_pair_settled); a link's latency is its samples' median, its bandwidth
 *     the pooled fit (ppdl_probe_pooled_bw);
 *   - ranks outside the pairs being timed wait in a sleeping loop (a spinning bystander
 *     on shared cores slows the pair it waits for several-fold); the pair waits as the
 *     job's ranks do (ppdl_comm_wait). Under --netem the probe measures the emulated
 *     network: every message goes through ppdl_comm.
 * Per rank also: mem_bytes (--mem-limit, else a GPU's free memory / the ranks sharing
 * it, else physical memory / the host's ranks); speed (a 256^3 SGEMM's GFLOP/s over
 * rank 0's: 1.0 is the device that profiles the layers; one per host on the CPU
 * backend, ppdl_probe_host_speeds); the diagonal (the memcpy rate, latency 0).
 * The result is the same on every rank. */
#ifndef PPDL_PROBE_H
#define PPDL_PROBE_H

#include <stddef.h>

#include "backend/backend.h"
#include "net/cluster.h"
#include "net/comm.h"

typedef struct ppdl_probe_opts {
    size_t act_bytes;          /* the model's boundary activation per micro-batch; 0: none */
    size_t msg_bytes;          /* the large size of every pair; 0: chosen per pair (below) */
    double target_ms;          /* a pair's large size: one message of it takes this long
                                * (from its warm-up), at least max(1 MiB, act_bytes) */
    size_t max_bytes;          /* ... and at most this */
    int warmup;                /* untimed exchanges per size and direction, before a pair's
                                * first sample */
    int reps_small, reps_large;/* timed exchanges per sample (the fastest of each counts) */
    int min_samples, max_samples; /* samples per pair: at least, at most */
    double agree;              /* samples agree when within this fraction of their median */
    double asym;               /* directions whose medians differ by more: probed again */
    size_t mem_bytes;          /* this rank's memory; 0: physical / ranks on the host */
    ppdl_backend *be;          /* the speed benchmark's device; NULL: every speed is 1 */
    int all_at_once;           /* 1: run every pair of a round at once, whatever the hosts */
    /* --p2p nccl: time the pairs through NCCL between buffers in be's memory, the path
     * the runtime's messages will take (a communicator over c->comm, builds with CUDA);
     * NULL: through MPI between host buffers (ppdl_comm, which --netem shapes) */
    struct ppdl_nccl *nccl;
} ppdl_probe_opts;

void ppdl_probe_defaults(ppdl_probe_opts *o);

/* Collective over c->comm. Fills cl (allocated here; ppdl_cluster_model_free it) on every rank,
 * its hosts too (ppdl_probe_hosts). */
void ppdl_probe_run(ppdl_comm *c, const ppdl_probe_opts *o, ppdl_cluster_model *cl);

/* The real machines of the job (plan/cluster_model.h's ppdl_hosts), collective over
 * comm, the same on every rank. Ranks are on one machine when they see the same kernel
 * (/proc/sys/kernel/random/boot_id; else the same MPI_Get_processor_name), so the
 * network namespaces of scripts/cluster-emu count as the one machine they share. A
 * host's cores: the union of its ranks' CPU affinity masks (sched_getaffinity; else
 * sysconf(_SC_NPROCESSORS_ONLN)). device: the ranks compute on devices of their own
 * (a GPU backend), not on the cores: each host then counts as many cores as ranks, so
 * nothing is shared. Its name: MPI_Get_processor_name. */
void ppdl_probe_hosts(MPI_Comm comm, int device, ppdl_hosts *h);

/* ---- the statistic (pure, for tests) ---- */
/* One sample of a pair, as its driver a measures it (b < a's peer): [0] the small round
 * trip; for each of the 2 large sizes q: [1 + 3q] its bytes a->b and a small reply,
 * [2 + 3q] a small request and its bytes b->a, [3 + 3q] its bytes. Each time the
 * fastest of the sample's repetitions. */
#define PPDL_PROBE_RES_LEN 7
/* the factor around the median inside which a sample's times are pooled */
#define PPDL_PROBE_GATE 2.0
/* A direction's bandwidth from n samples (res: [n][PPDL_PROBE_RES_LEN]; fits: each
 * sample's own fitted bandwidth of that direction, dir 0 a->b, 1 b->a): the samples
 * whose fit lies within a factor `gate` of the fits' median are pooled, each size's
 * fastest time among them kept (the small round trip's too), and the line latency +
 * bytes / bandwidth fitted through those. On a loaded machine a shaped link's transfers
 * often end on the next timer tick: such a stall reads a sample well off, and when most
 * of a pair's samples stall the median moves with them, while a stall only adds time and
 * so cannot move a size's fastest reading (perf/bench-ethernet's probes). The median when
 * no sample qualifies. */
double ppdl_probe_pooled_bw(const double *res, const double *fits, int n, int dir, double gate);
typedef struct ppdl_link_stat {
    double median;             /* of the samples: the link's value */
    double spread;             /* (largest - smallest) / median: 0 when they all agree */
    int n, agreeing;           /* samples; of them within `agree` of the median */
} ppdl_link_stat;
ppdl_link_stat ppdl_probe_link_stat(const double *v, int n, double agree);
/* Is a pair sampled well enough? ab, ba: the n samples of each direction's bandwidth.
 * Yes when n >= max_samples; else when n >= min_samples, each direction has at least
 * min_samples samples agreeing with its median, and the two medians are within the
 * factor asym of each other. */
int ppdl_probe_pair_settled(const double *ab, const double *ba, int n, const ppdl_probe_opts *o);
/* Links of one class (both ends in one node, or ends in two nodes; the nodes found:
 * ppdl_cluster_group_nodes on bw) are expected alike, as on a cluster of like nodes.
 * Marks need[a*n+b] (a < b) for every pair with fewer than max samples (count[a*n+b])
 * one of whose directions reads more than a fraction tol off the median of its class
 * (either side; classes of 3 or more directed links), so that it is probed again;
 * returns how many it marked. Why: on shared cores a pair's ranks can lose their cores
 * for whole milliseconds through all of the pair's first samples, which then agree on a
 * rate well off (slow, or fast where the stalls lengthen the smaller messages more than
 * the large: the fitted slope flattens; perf/bench-ethernet's probes show it). Later
 * samples, a pass apart, may be clean, and the pooled statistic keeps each size's
 * fastest time, so clean readings win at every size. A link that truly differs stays
 * so: more samples do not change it. bw: n x n directed bandwidths (the diagonal
 * unread). */
#define PPDL_PROBE_CLASS_TOL 0.10
int ppdl_probe_class_outliers(int n, const double *bw, const int *count, int max, double tol, unsigned char *need);
/* The test hook PPDL_TEST_PROBE_SKEW="A-B:K:F[,...]" (docs/testing.md): the factor by
 * which the K-th sample (from 0) of link A->B's bandwidth is multiplied, 1 when none;
 * -1 with a message in err when the variable is malformed. */
int ppdl_probe_skew(const char *spec, int n, int a, int b, int k, double *factor, char *err, size_t errlen);
/* One speed per host for CPU ranks (the probe applies it when its backend is the CPU):
 * ranks of one host run on the same cores, so their SGEMM speeds differ only by what
 * disturbed each benchmark, and a planner reading them apart would load one of two
 * identical ranks more (on a small shared machine the speeds, and so the plans, change
 * from run to run). speed[i] becomes its host's: 1 on rank
 * 0's host (the layers were profiled on those cores), elsewhere the median of the
 * host's ranks (the mean of the middle two for an even count). host[i]: the smallest
 * rank on rank i's host. */
void ppdl_probe_host_speeds(int n, const int *host, double *speed);

/* ---- the schedule of pairs (pure, for tests and perf/) ---- */
/* rounds of the tournament for n ranks: n-1 (n even), n (n odd), 0 (n = 1) */
int ppdl_probe_rounds(int n);
/* the pairs of round r: a[k] < b[k]; returns their number (n/2 rounded down) */
int ppdl_probe_round_pairs(int n, int r, int *a, int *b);
/* split the pairs of a round into slots that run at the same time: greedy, a pair joins
 * the first slot none of whose pairs touches its hosts (host[rank]). slot[k] gets the
 * slot of pair k; returns the number of slots. all_at_once: one slot. */
int ppdl_probe_slots(int n_pairs, const int *a, const int *b, const int *host, int all_at_once, int *slot);

#endif
