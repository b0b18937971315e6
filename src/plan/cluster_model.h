/* cluster_model.h — the ranks of a job, their links and their devices: the CLUSTER.json of
 * docs/formats.md, in memory. One type and one reader for ppdl (--cluster, --netem, the
 * probe's --cluster-out, in src/net/) and ppdl-plan (--cluster) alike. Pure C and
 * jansson: no MPI, no device, so ppdl-plan and the unit tests run anywhere.
 *
 *   {"ranks": N,
 *    "bandwidth_Bps": [[N] x N],   bytes/s from row rank to column rank
 *    "latency_s":     [[N] x N],   one-way seconds, same layout
 *    "mem_bytes":     [N],         memory each rank may use
 *    "speed":         [N],         relative compute speed, 1.0 = the profiled device
 *    "nodes":         [[ranks], ...]   (written, informational: recomputed on read)
 *    "hosts": [{"name": "n07", "cores": 2, "ranks": [0, 1, 2, 3],
 *               "memory_contention": 1.4}, ...]
 *                                  (optional, an extension: see ppdl_hosts below)
 *    "probe": {...}}               (written by the probe: sizes, repetitions, time)
 *
 * The diagonal describes a rank talking to itself: any value is read (a number kept,
 * anything else 0) and only a host's memory contention looks at it (the probe writes the
 * rank's memcpy rate there). Off the diagonal every value is finite, so nothing
 * downstream divides by zero or reads a NaN. A key given twice is an error.
 */
#ifndef PPDL_CLUSTER_MODEL_H
#define PPDL_CLUSTER_MODEL_H

#include <stddef.h>

/* The real machines the ranks run on (an extension of CLUSTER.json, docs/formats.md;
 * optional): each host's name, its cores (those its ranks may run on) and its ranks;
 * every rank is on exactly one host. Not the same as the "nodes" of fast-linked ranks:
 * --netem and scripts/cluster-emu emulate several nodes on one machine, whose ranks
 * still share its cores. The simulator shares a host's cores among the compute ops
 * running on its ranks (simulate.h). Absent (n = 0): every rank has a core of its own,
 * the one-rank-per-stage model of docs/cost-model.md. */
typedef struct ppdl_hosts {
    int n;                     /* hosts; 0: not given */
    int *of_rank;              /* [N] the host of each rank */
    int *cores;                /* [n] cores of each host, >= 1 */
    char **name;               /* [n] names ("" when not given) */
    double *contention;        /* [n] "memory_contention" (optional, >= 1; NULL: 1 on every
                                  host): how much longer a memory-bound pass (AdamW, a copy)
                                  takes when min(ranks, cores) of the host's ranks run it at
                                  once than when one runs it alone. Every rank updates its
                                  weights at the same moment (the step's end), so the
                                  planner stretches each rank's optimizer step by its
                                  host's factor, and an all-reduce among ranks of one host
                                  over memory-bound links (at least a quarter of the
                                  slower end's memcpy rate, the diagonal) by the same;
                                  the probe measures it on CPU ranks (probe.c
                                  measure_contention). */
} ppdl_hosts;

#define PPDL_MAX_CONTENTION 64.0
/* the memory contention of rank r's host (1 without hosts or without the field) */
double ppdl_hosts_contention(const ppdl_hosts *h, int r);

#define PPDL_MAX_CORES (1 << 20)

/* Build from per-rank facts: key[r] identifies rank r's machine (equal keys, one
 * host; hosts numbered in the order of their smallest rank), name[r] its name (NULL:
 * ""), cores[r] the cores rank r's host has (the host takes its first rank's). */
void ppdl_hosts_build(ppdl_hosts *h, int N, const char *const *key, const char *const *name, const int *cores);
void ppdl_hosts_copy(ppdl_hosts *dst, const ppdl_hosts *src, int N);
void ppdl_hosts_free(ppdl_hosts *h);
/* 1 when some host has more ranks than cores (the simulator then shares cores) */
int ppdl_hosts_oversubscribed(const ppdl_hosts *h, int N);
/* Read the optional "hosts" of a CLUSTER.json object (json_t *; absent: h->n = 0).
 * Messages name the source and the field: "c.json: hosts[1].cores is 0: expected an
 * integer >= 1 (the cores of that machine)", "c.json: hosts: rank 3 is in no host". */
int ppdl_hosts_from_json(const void *root, int N, const char *what, ppdl_hosts *h, char *err, size_t errlen);
/* The "hosts" value as JSON text (malloc'd), one host per line each prefixed by
 * `indent`; NULL when h->n = 0. */
char *ppdl_hosts_to_json(const ppdl_hosts *h, int N, const char *indent);

typedef struct ppdl_cluster_model {
    int N;                     /* ranks */
    double *bw;                /* [N*N] bandwidth_Bps, row-major: bw[a*N+b] from a to b */
    double *lat;               /* [N*N] latency_s, same layout */
    double *mem;               /* [N] mem_bytes */
    double *speed;             /* [N] relative compute speed */
    int *node;                 /* [N] node (group of fast-linked ranks) of each rank */
    int n_nodes;
    ppdl_hosts hosts;          /* n = 0: none given (a core per rank) */
    /* what the probe did (net/probe.h), 0 when the cluster was read from a file */
    double probe_ms;           /* wall time of the whole probe */
    double probe_bytes;        /* the largest message size probed */
    double act_bytes;          /* the model's boundary activation size probed (0: none) */
    int probe_rounds, probe_slots;  /* of the first pass (the schedule) */
    int probe_passes;
    int probe_nccl;            /* 1: the pairs were timed through NCCL (--p2p nccl), 0: MPI */
    int *samples;              /* [N*N] the probe's samples of each link; NULL: read from a file */
    double *spread;            /* [N*N] their (largest - smallest) / median */
} ppdl_cluster_model;

/* the rate rank r runs its optimizer step at, against the profile's: its speed, over its
 * host's memory contention (every rank updates at once, at the step's end) */
static inline double ppdl_opt_speed(const ppdl_cluster_model *c, int r)
{
    return c->speed[r] / ppdl_hosts_contention(&c->hosts, r);
}

/* N ranks, bandwidth 1e9 B/s everywhere, latency 0, memory 1e12, speed 1, one node */
void ppdl_cluster_model_alloc(ppdl_cluster_model *c, int N);
void ppdl_cluster_model_free(ppdl_cluster_model *c);

/* Read/parse and validate CLUSTER.json: N 1..65536, matrices N x N, bandwidths > 0 and
 * latencies >= 0 off the diagonal, memories > 0, speeds > 0, all finite, hosts as above;
 * every field but "hosts" required, no key twice. n_expected > 0: the file must describe
 * exactly that many ranks (ppdl's job; ppdl-plan plans for the file's ranks, 0). Messages
 * name the file (`what` for text) and the field: "cluster.json: bandwidth_Bps[2][3] is -5:
 * expected a positive finite number of bytes/s". The node grouping is recomputed from the
 * bandwidth. On failure *c holds nothing to free. */
int ppdl_cluster_model_read(const char *path, int n_expected, ppdl_cluster_model *c, char *err, size_t errlen);
int ppdl_cluster_model_parse(const char *text, const char *what, int n_expected, ppdl_cluster_model *c, char *err,
                             size_t errlen);
int ppdl_cluster_model_validate(const ppdl_cluster_model *c, const char *what, char *err, size_t errlen);
/* The JSON text (malloc'd; 17 digits, so a saved file reads back as the same doubles),
 * and a file (PATH.tmp renamed onto PATH) */
char *ppdl_cluster_model_to_json(const ppdl_cluster_model *c);
int ppdl_cluster_model_write(const char *path, const ppdl_cluster_model *c, char *err, size_t errlen);

/* Group ranks into "nodes": ranks joined by links much faster than the rest.
 * The link between i and j counts max(bw[i][j], bw[j][i]): a disturbed measurement
 * only ever makes a direction slower, so the faster direction is the evidence of what
 * the link can do, and one slow reading cannot split a node (the probe's medians are
 * the first defence, net/probe.h; this is the second). Sort the distinct link
 * speeds, find the largest ratio between neighbours; if it is at least `min_ratio`
 * (the caller's choice; the reader and the probe use PPDL_NODE_RATIO), links at or above
 * the gap are "fast" and the connected components of fast links are the nodes.
 * Otherwise the network shows no hierarchy and all ranks form one node. Nodes are
 * numbered in the order of their smallest rank. Fills c->node and c->n_nodes. */
#define PPDL_NODE_RATIO 2.0
void ppdl_cluster_group_nodes(ppdl_cluster_model *c, double min_ratio);

#endif
