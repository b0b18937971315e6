/* probe.h — measure the job's network and devices: the CLUSTER.json of docs/formats.md.
 *
 * Rank 0 coordinates; every ordered pair (i, j) gets its bandwidth and latency:
 *   - pairs come from a round-robin tournament (the circle method): N-1 rounds for even
 *     N, N for odd, each round a set of disjoint pairs, so every unordered pair meets
 *     once in O(N) rounds;
 *   - inside a round, pairs run at the same time when they share no host (an MPI
 *     shared-memory node), one after another otherwise: on one machine ranks compete
 *     for cores and memory, and two pairs crossing the same host's link would halve
 *     each other's bandwidth. On a cluster with one rank per host every round runs all
 *     its pairs at once;
 *   - a pair (a < b) runs ping-pongs driven by a: small both ways (latency = half the
 *     round trip, the OSU osu_latency method; one-way asymmetry needs synchronised
 *     clocks, so i->j and j->i get the same latency), then for each large size S a
 *     message of S one way and a small reply. The one-way time of S from a to b is
 *     round trip - (small one-way), fitted over the sizes to latency + S/bandwidth by
 *     least squares; the bandwidth is the fit's slope. The pair's first measurement
 *     starts with untimed warm-up exchanges (connection set-up); each size's timed
 *     exchanges keep their fastest (noise on a shared machine only adds time);
 *   - the sizes: 8 bytes, the model's boundary activation (else a quarter of S) and a
 *     large size S per pair, chosen by its driver from the warm-up so that one message
 *     takes target_ms (25 ms) on the link: between max(1 MiB, activation) and 8 MiB. A
 *     short message is mostly the wake-ups around it on a busy machine (1 MiB at
 *     1 Gbit/s takes 8.7 ms; a wake-up there can take several);
 *   - samples: one such measurement of a pair is one sample of each direction. The
 *     whole schedule of pairs runs in passes, so a pair's samples lie a pass apart
 *     (whatever disturbs one sample, a burst of other work, a stall of TCP, has
 *     usually passed by the next). After each pass rank 0 decides which pairs need
 *     another (ppdl_probe_pair_settled): fewer than min_samples samples; or the
 *     samples of a direction do not agree (fewer than min_samples of them within
 *     `agree` of their median); or the two directions' medians differ by more than
 *     the factor `asym` (re-measured: a real asymmetry stays, a misreading goes);
 *     never more than max_samples. The latency of a link is the MEDIAN of its
 *     samples. Its bandwidth is fitted once more, through the fastest time of each
 *     size over all its samples within a factor 2 of their median
 *     (ppdl_probe_pooled_bw): a sample far off either way, however far, is left out
 *     by the median, and a disturbance that only adds time (a lost time slice, a
 *     transfer whose tail waits for the next timer tick) cannot move the fastest
 *     reading of a size unless it struck every repetition of every sample;
 *   - ranks outside the pairs being measured wait for rank 0's "go" in a sleeping loop
 *     (MPI_Test, then nanosleep), not spinning: on 2 cores a spinning bystander cuts a
 *     measured rate several-fold (ENVIRONMENT.md). The pair itself waits as the job's
 *     ranks do (ppdl_comm_wait: yielding when ranks outnumber cores); a spinning wait
 *     was far worse on a busy machine (a partner on the same core waits a time slice).
 * Every message of a pair goes through ppdl_comm, so under --netem the probe measures the
 * emulated network.
 *
 * Per rank also:
 *   - mem_bytes: the given limit (--mem-limit), else on a GPU its free memory when probed
 *     (cudaMemGetInfo) / the node's ranks sharing that GPU, else physical memory / ranks
 *     on the host;
 *   - speed: GFLOP/s of a fixed 256x256x256 SGEMM on the rank's backend (the fastest of 10+ runs),
 *     divided by rank 0's: 1.0 = rank 0's device, the one that profiles the layers.
 *     Ranks sharing a host run it one after another, like the pairs. On the CPU backend
 *     the ranks of a host share its cores, and get one speed (ppdl_probe_host_speeds).
 *   - the diagonal: bandwidth = the rank's memcpy rate at the large size, latency 0.
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
    double asym;               /* directions whose medians differ by more: measured again */
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
 * bytes / bandwidth fitted through those. On 2 vCPUs under a token bucket, transfers
 * often end on the VM's 4 ms timer tick: one such stall reads a sample 7-30% off,
 * and when most of a pair's samples stall the median moves with them (perf/RESULTS.md,
 * issue 19). The median when no sample qualifies. */
double ppdl_probe_pooled_bw(const double *res, const double *fits, int n, int dir, double gate);
typedef struct ppdl_link_stat {
    double median;             /* of the samples: the link's value */
    double spread;             /* (largest - smallest) / median: 0 when they all agree */
    int n, agreeing;           /* samples; of them within `agree` of the median */
} ppdl_link_stat;
ppdl_link_stat ppdl_probe_link_stat(const double *v, int n, double agree);
/* Is a pair measured well enough? ab, ba: the n samples of each direction's bandwidth.
 * Yes when n >= max_samples; else when n >= min_samples, each direction has at least
 * min_samples samples agreeing with its median, and the two medians are within the
 * factor asym of each other. */
int ppdl_probe_pair_settled(const double *ab, const double *ba, int n, const ppdl_probe_opts *o);
/* Links of one class (both ends in one node, or ends in two nodes; the nodes measured:
 * ppdl_cluster_group_nodes on bw) are expected alike, as on a cluster of like nodes.
 * Marks need[a*n+b] (a < b) for every pair with fewer than max samples (count[a*n+b])
 * one of whose directions reads more than a fraction tol off the median of its class
 * (either side; classes of 3 or more directed links), so that it is measured again;
 * returns how many it marked. Why: on 2 vCPUs a pair's ranks can lose their cores for
 * whole milliseconds through all three of the pair's samples, which then agree on a
 * rate 15-24% off (slow, or fast where the stalls lengthen the smaller messages more
 * than the large: the fitted slope flattens; perf/RESULTS.md, issue 19). Later
 * samples, a pass apart, may be clean, and the pooled statistic keeps each size's
 * fastest time, so clean readings win at every size. A link that truly differs stays
 * so: more samples do not change it. bw: n x n directed bandwidths (the diagonal
 * unread). */
#define PPDL_PROBE_CLASS_TOL 0.10
int ppdl_probe_class_outliers(int n, const double *bw, const int *count, int max, double tol, unsigned char *need);
/* The test hook PPDL_TEST_PROBE_SKEW="A-B:K:F[,...]" (README "Tests"): the factor by
 * which the K-th sample (from 0) of link A->B's bandwidth is multiplied, 1 when none;
 * -1 with a message in err when the variable is malformed. */
int ppdl_probe_skew(const char *spec, int n, int a, int b, int k, double *factor, char *err, size_t errlen);
/* One speed per host for CPU ranks (the probe applies it when its backend is the CPU):
 * ranks of one host run on the same cores, so their SGEMM speeds differ only by what
 * disturbed each benchmark, and a planner reading 0.85 against 1.08 would load one of
 * two identical ranks more (seen: 3 ranks on this 2-core VM, 0.86-1.08 from run to
 * run, three different plans in five runs). speed[i] becomes its host's: 1 on rank
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
