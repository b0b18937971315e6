/* cluster_model.h — the cluster as the planner sees it: CLUSTER.json (DESIGN.md) read
 * into plain arrays. Pure C: no MPI, so ppdl-plan runs anywhere. (The probe that
 * measures a cluster and writes the file lives in src/net/.)
 *
 *   {"ranks": N,
 *    "bandwidth_Bps": [[N] x N],  bytes/s from row rank to column rank (diagonal unused)
 *    "latency_s":     [[N] x N],  one-way seconds (optional, default 0)
 *    "mem_bytes":     [N],        memory each rank may use
 *    "speed":         [N]}        relative compute speed, 1.0 = the profiled device
 *                                 (optional, default 1.0)
 */
#ifndef PPDL_CLUSTER_MODEL_H
#define PPDL_CLUSTER_MODEL_H

#include <stddef.h>

typedef struct ppdl_cluster_model {
    int N;
    double *bw;                /* [N*N] bandwidth_Bps, row-major: bw[a*N+b] from a to b */
    double *lat;               /* [N*N] latency_s */
    double *mem;               /* [N] mem_bytes */
    double *speed;             /* [N] */
} ppdl_cluster_model;

/* A view of arrays someone else owns (e.g. net/cluster.h's ppdl_cluster, which has the
 * same layout): no copy, and never ppdl_cluster_model_free it. */
static inline void ppdl_cluster_model_wrap(ppdl_cluster_model *c, int N, double *bw, double *lat, double *mem,
                                           double *speed)
{
    c->N = N;
    c->bw = bw;
    c->lat = lat;
    c->mem = mem;
    c->speed = speed;
}

/* N ranks, bandwidth 1e9 B/s everywhere, latency 0, memory 1e12, speed 1 */
void ppdl_cluster_model_alloc(ppdl_cluster_model *c, int N);
void ppdl_cluster_model_free(ppdl_cluster_model *c);

/* Read/parse and validate: N >= 1, matrices N x N, bandwidths > 0 off the diagonal,
 * latencies >= 0, memories > 0, speeds > 0, all finite. Messages name the file and
 * the field ("cluster.json: bandwidth_Bps[2][0]: expected a number > 0"). */
int ppdl_cluster_model_read(const char *path, ppdl_cluster_model *c, char *err, size_t errlen);
int ppdl_cluster_model_parse(const char *text, const char *what, ppdl_cluster_model *c, char *err,
                             size_t errlen);
int ppdl_cluster_model_validate(const ppdl_cluster_model *c, const char *what, char *err, size_t errlen);
/* the JSON text (malloc'd) and a file (PATH.tmp renamed onto PATH) */
char *ppdl_cluster_model_to_json(const ppdl_cluster_model *c);
int ppdl_cluster_model_write(const char *path, const ppdl_cluster_model *c, char *err, size_t errlen);

#endif
