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
 *     least squares; the bandwidth is the fit's slope. Each size has untimed warm-up
 *     exchanges (connection set-up), then timed ones of which the fastest counts (noise
 *     on a shared machine only adds time, see probe.c);
 *   - the sizes: 8 bytes, the model's boundary activation (if given) and a large
 *     message of at least 1 MiB;
 *   - ranks outside the pairs being measured wait for rank 0's "go" in a sleeping loop
 *     (MPI_Test, then nanosleep), not spinning: on 2 cores a spinning bystander cuts a
 *     measured rate several-fold (ENVIRONMENT.md). The pair itself waits as the job's
 *     ranks do (ppdl_comm_wait: yielding when ranks outnumber cores); a spinning wait
 *     was far worse on a busy machine (a partner on the same core waits a time slice).
 * Every message of a pair goes through ppdl_comm, so under --netem the probe measures the
 * emulated network.
 *
 * Per rank also:
 *   - mem_bytes: the given limit (--mem-limit), else physical memory / ranks on the host;
 *   - speed: GFLOP/s of a fixed 256x256x256 SGEMM on the rank's backend (the fastest of 10+ runs),
 *     divided by rank 0's: 1.0 = rank 0's device, the one that profiles the layers.
 *     Ranks sharing a host run it one after another, like the pairs.
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
    size_t msg_bytes;          /* the large size; 0: max(1 MiB, act_bytes) */
    int warmup;                /* untimed exchanges per size and direction */
    int reps_small, reps_large;/* timed exchanges (the fastest counts) */
    size_t mem_bytes;          /* this rank's memory; 0: physical / ranks on the host */
    ppdl_backend *be;          /* the speed benchmark's device; NULL: every speed is 1 */
    int all_at_once;           /* 1: run every pair of a round at once, whatever the hosts */
} ppdl_probe_opts;

void ppdl_probe_defaults(ppdl_probe_opts *o);

/* Collective over c->comm. Fills cl (allocated here; ppdl_cluster_free it) on every rank,
 * its hosts too (ppdl_probe_hosts). */
void ppdl_probe_run(ppdl_comm *c, const ppdl_probe_opts *o, ppdl_cluster *cl);

/* The real machines of the job (plan/cluster_model.h's ppdl_hosts), collective over
 * comm, the same on every rank. Ranks are on one machine when they see the same kernel
 * (/proc/sys/kernel/random/boot_id; else the same MPI_Get_processor_name), so the
 * network namespaces of scripts/cluster-emu count as the one machine they share. A
 * host's cores: the union of its ranks' CPU affinity masks (sched_getaffinity; else
 * sysconf(_SC_NPROCESSORS_ONLN)). device: the ranks compute on devices of their own
 * (a GPU backend), not on the cores: each host then counts as many cores as ranks, so
 * nothing is shared. Its name: MPI_Get_processor_name. */
void ppdl_probe_hosts(MPI_Comm comm, int device, ppdl_hosts *h);

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
