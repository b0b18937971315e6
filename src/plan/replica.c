/* replica.c — micro-batches per replica, in-flight counts, ring all-reduce cost. */
#include "plan/replica.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdlib.h>

int ppdl_replica_mbs(int M, int k, int q)
{
    if (k < 1 || q < 0 || q >= k || q >= M) return 0;
    return (M - q + k - 1) / k;
}

int ppdl_pair_mbs(int M, int ka, int a, int kb, int b)
{
    int n = 0;
    for (int j = a; j < M; j += ka) n += j % kb == b;
    return n;
}

int ppdl_replica_in_flight(int schedule, int S, int M, const int *k, int s, int q)
{
    ppdl_schedule_spec sp = {schedule, S, M, 1, k, NULL};
    ppdl_rank_schedule rs;
    char err[PPDL_ERR_LEN];
    PPDL_CHECK(ppdl_schedule_make(&sp, ppdl_schedule_device(&sp, s, q), &rs, err, sizeof err) == 0, "%s", err);
    int n = ppdl_schedule_max_in_flight(&rs.lists[0]);
    ppdl_rank_schedule_free(&rs);
    return n;
}

/* a link's bandwidth while every rank of its host copies at once: a link inside a host
 * that runs at a quarter or more of the slower end's memcpy rate (the diagonal) is bound by the
 * host's memory, and shares it (ppdl_hosts.contention); a slower one (a network, --netem)
 * is bound by itself */
static double link_bw_at_once(const ppdl_cluster_model *cl, int a, int b)
{
    int N = cl->N;
    double bw = cl->bw[a * N + b];
    const ppdl_hosts *h = &cl->hosts;
    if (h->n <= 0 || !h->contention || h->of_rank[a] != h->of_rank[b]) return bw;
    double da = cl->bw[a * N + a], db = cl->bw[b * N + b], c = h->contention[h->of_rank[a]];
    if (!(da > 0) || !(db > 0) || !isfinite(da) || !isfinite(db) || bw < 0.25 * fmin(da, db)) return bw;
    return bw / c;
}

double ppdl_group_min_bw(const ppdl_cluster_model *cl, const int *ranks, int k)
{
    double bw = INFINITY;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++)
            if (a != b) bw = fmin(bw, link_bw_at_once(cl, ranks[a], ranks[b]));
    return bw;
}

double ppdl_group_max_lat(const ppdl_cluster_model *cl, const int *ranks, int k)
{
    double lat = 0;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++)
            if (a != b) lat = fmax(lat, cl->lat[ranks[a] * cl->N + ranks[b]]);
    return lat;
}

double ppdl_allreduce_ms(const ppdl_cluster_model *cl, const int *ranks, int k, double bytes, int n_msgs)
{
    if (k < 2 || bytes <= 0) return 0;
    return ppdl_allreduce_ms_bw(k, bytes, n_msgs, ppdl_group_min_bw(cl, ranks, k), ppdl_group_max_lat(cl, ranks, k));
}

void ppdl_sort_replicas(const ppdl_cluster_model *cl, int *ranks, int k)
{
    (void)cl;
    for (int i = 1; i < k; i++) { /* insertion sort: a stage has few replicas */
        int v = ranks[i], j = i;
        for (; j > 0 && v < ranks[j - 1]; j--) ranks[j] = ranks[j - 1];
        ranks[j] = v;
    }
}

static int by_value_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

void ppdl_group_link_bounds(const ppdl_cluster_model *cl, int kmax, double *bw, double *lat)
{
    int N = cl->N;
    for (int k = 0; k <= kmax; k++) {
        bw[k] = 0;
        lat[k] = INFINITY;
    }
    double *u = ppdl_xmalloc(2 * (size_t)N * sizeof(double)), *v = u + N;
    for (int r = 0; r < N; r++) {
        int n = 0;
        for (int b = 0; b < N; b++) {
            if (b == r) continue;
            /* a group holding r and b has a link at most this fast, a latency at least this */
            u[n] = fmin(link_bw_at_once(cl, r, b), link_bw_at_once(cl, b, r));
            v[n++] = -fmax(cl->lat[r * N + b], cl->lat[b * N + r]);
        }
        qsort(u, (size_t)n, sizeof *u, by_value_desc);
        qsort(v, (size_t)n, sizeof *v, by_value_desc); /* the latencies, least first */
        for (int k = 2; k <= kmax && k - 2 < n; k++) {
            bw[k] = fmax(bw[k], u[k - 2]);
            lat[k] = fmin(lat[k], -v[k - 2]);
        }
    }
    free(u);
}
