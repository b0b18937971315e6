/* cluster.h — what the network and the devices of a job look like: the CLUSTER.json of
 * docs/formats.md, in memory.
 *
 *   {"ranks": N,
 *    "bandwidth_Bps": [[N] x N],   bytes/s from row rank to column rank
 *    "latency_s":     [[N] x N],   one-way seconds, same layout
 *    "mem_bytes":     [N],         memory each rank may use
 *    "speed":         [N],         relative compute speed, 1.0 = rank 0's device
 *    "nodes":         [[ranks], ...]   (written, informational: recomputed on read)
 *    "hosts":         [{"name", "cores", "ranks"}, ...]   (optional: the real machines,
 *                                   plan/cluster_model.h's ppdl_hosts; the probe writes it)
 *    "probe": {...}}               (written by the probe: sizes, repetitions, time)
 *
 * The diagonal describes a rank talking to itself: bandwidth is a large finite number
 * (the probe writes the rank's memcpy rate), latency 0. Every value is finite, so
 * nothing downstream divides by zero or reads a NaN.
 *
 * Pure C and jansson: no MPI, no device — ppdl-plan and unit tests can use it. */
#ifndef PPDL_CLUSTER_H
#define PPDL_CLUSTER_H

#include <stddef.h>
#include <stdio.h>

#include "plan/cluster_model.h"

typedef struct ppdl_cluster {
    int n;                     /* ranks */
    double *bw;                /* [n*n] bytes/s, bw[i*n+j]: from rank i to rank j */
    double *lat;               /* [n*n] one-way seconds, same layout */
    double *mem;               /* [n] bytes each rank may use */
    double *speed;             /* [n] relative compute speed (1.0 = rank 0) */
    int *node;                 /* [n] node (group of fast-linked ranks) of each rank */
    int n_nodes;
    ppdl_hosts hosts;          /* the real machines (n = 0: not known, a core per rank) */
    /* what the probe did, 0 when the cluster was read from a file */
    double probe_ms;           /* wall time of the whole probe */
    double probe_bytes;        /* the largest message size measured */
    double act_bytes;          /* the model's boundary activation size measured (0: none) */
    int probe_rounds, probe_slots;  /* of the first pass (the schedule) */
    int probe_passes;
    int probe_nccl;            /* 1: the pairs were timed through NCCL (--p2p nccl), 0: MPI */
    int *samples;              /* [n*n] the probe's samples of each link; NULL: read from a file */
    double *spread;            /* [n*n] their (largest - smallest) / median */
} ppdl_cluster;

/* Allocate an n-rank cluster: bandwidth 1e12 B/s, latency 0, memory 0, speed 1, one node. */
void ppdl_cluster_alloc(ppdl_cluster *cl, int n);
void ppdl_cluster_free(ppdl_cluster *cl);

/* Read and validate CLUSTER.json. n_expected > 0: the file must describe exactly that
 * many ranks (the job's). Errors name the file and the field: "cluster.json:
 * bandwidth_Bps[2][3] is -5: expected a positive finite number (bytes/s)". The node
 * grouping is recomputed from the bandwidth. */
int ppdl_cluster_read(const char *path, int n_expected, ppdl_cluster *cl, char *err, size_t errlen);
/* The same from JSON text; `what` names the source in messages. */
int ppdl_cluster_parse(const char *text, const char *what, int n_expected, ppdl_cluster *cl,
                       char *err, size_t errlen);
/* Check an in-memory cluster: sizes, bandwidth > 0, latency >= 0, memory > 0, speed > 0,
 * all finite. */
int ppdl_cluster_validate(const ppdl_cluster *cl, const char *what, char *err, size_t errlen);

/* The cluster as CLUSTER.json text (malloc'd; caller frees). */
char *ppdl_cluster_to_json(const ppdl_cluster *cl);
/* Write CLUSTER.json atomically (a temporary file renamed over the target). */
int ppdl_cluster_write(const ppdl_cluster *cl, const char *path, char *err, size_t errlen);

/* Group ranks into "nodes": ranks joined by links much faster than the rest.
 * The link between i and j counts max(bw[i][j], bw[j][i]): a disturbed measurement
 * only ever makes a direction slower, so the faster direction is the evidence of what
 * the link can do, and one slow reading cannot split a node (the probe's medians are
 * the first defence, probe.h; this is the second). Sort the distinct link
 * speeds, find the largest ratio between neighbours; if it is at least `min_ratio`
 * (the caller's choice; ppdl uses PPDL_NODE_RATIO), links at or above the gap are
 * "fast" and the connected components of fast links are the nodes. Otherwise the
 * network shows no hierarchy and all ranks form one node. Nodes are numbered in the
 * order of their smallest rank. Fills cl->node and cl->n_nodes. */
#define PPDL_NODE_RATIO 2.0
void ppdl_cluster_group_nodes(ppdl_cluster *cl, double min_ratio);

/* A readable table: bandwidth GB/s and latency us (full matrices up to 16 ranks,
 * a summary within / between nodes beyond), the nodes, memory and speed per rank. */
void ppdl_cluster_print(const ppdl_cluster *cl, FILE *f);

#endif
