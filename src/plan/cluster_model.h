/* cluster_model.h — the cluster as the planner sees it: CLUSTER.json (docs/formats.md) read
 * into plain arrays. Pure C: no MPI, so ppdl-plan runs anywhere. (The probe that
 * measures a cluster and writes the file lives in src/net/.)
 *
 *   {"ranks": N,
 *    "bandwidth_Bps": [[N] x N],  bytes/s from row rank to column rank (diagonal unused)
 *    "latency_s":     [[N] x N],  one-way seconds (optional, default 0)
 *    "mem_bytes":     [N],        memory each rank may use
 *    "speed":         [N],        relative compute speed, 1.0 = the profiled device
 *                                 (optional, default 1.0)
 *    "hosts": [{"name": "n07", "cores": 2, "ranks": [0, 1, 2, 3],
 *               "memory_contention": 1.4}, ...]}
 *                                 (optional, an extension: see ppdl_hosts below)
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
    int N;
    double *bw;                /* [N*N] bandwidth_Bps, row-major: bw[a*N+b] from a to b */
    double *lat;               /* [N*N] latency_s */
    double *mem;               /* [N] mem_bytes */
    double *speed;             /* [N] */
    ppdl_hosts hosts;          /* n = 0: none given (a core per rank) */
} ppdl_cluster_model;

/* A view of arrays someone else owns (e.g. net/cluster.h's ppdl_cluster, which has the
 * same layout): no copy, and never ppdl_cluster_model_free it. No hosts: set c->hosts
 * to a view of them after (e.g. c->hosts = cl->hosts). */
static inline void ppdl_cluster_model_wrap(ppdl_cluster_model *c, int N, double *bw, double *lat, double *mem,
                                           double *speed)
{
    c->N = N;
    c->bw = bw;
    c->lat = lat;
    c->mem = mem;
    c->speed = speed;
    c->hosts = (ppdl_hosts){0};
}

/* the rate rank r runs its optimizer step at, against the profile's: its speed, over its
 * host's memory contention (every rank updates at once, at the step's end) */
static inline double ppdl_opt_speed(const ppdl_cluster_model *c, int r)
{
    return c->speed[r] / ppdl_hosts_contention(&c->hosts, r);
}

/* N ranks, bandwidth 1e9 B/s everywhere, latency 0, memory 1e12, speed 1 */
void ppdl_cluster_model_alloc(ppdl_cluster_model *c, int N);
void ppdl_cluster_model_free(ppdl_cluster_model *c);

/* Read/parse and validate: N >= 1, matrices N x N, bandwidths > 0 off the diagonal,
 * latencies >= 0, memories > 0, speeds > 0, all finite, hosts as above. Messages name the file and
 * the field ("cluster.json: bandwidth_Bps[2][0]: expected a number > 0"). */
int ppdl_cluster_model_read(const char *path, ppdl_cluster_model *c, char *err, size_t errlen);
int ppdl_cluster_model_parse(const char *text, const char *what, ppdl_cluster_model *c, char *err,
                             size_t errlen);
int ppdl_cluster_model_validate(const ppdl_cluster_model *c, const char *what, char *err, size_t errlen);
/* the JSON text (malloc'd) and a file (PATH.tmp renamed onto PATH) */
char *ppdl_cluster_model_to_json(const ppdl_cluster_model *c);
int ppdl_cluster_model_write(const char *path, const ppdl_cluster_model *c, char *err, size_t errlen);

#endif
