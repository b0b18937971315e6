/* cluster.c — the cluster's table: links, nodes, memory, speed and hosts per rank. */
#include "net/cluster.h"
#include "core/util.h"

/* ---- printing ---- */

static void print_matrix(const ppdl_cluster_model *cl, FILE *f, const char *title, const double *m, double scale,
                         const char *fmt)
{
    int n = cl->N;
    fprintf(f, "  %s\n  %6s", title, "");
    for (int j = 0; j < n; j++) fprintf(f, " %7d", j);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %6d", i);
        for (int j = 0; j < n; j++) {
            if (i == j) fprintf(f, " %7s", "-");
            else fprintf(f, fmt, m[i * n + j] * scale);
        }
        fprintf(f, "\n");
    }
}

/* the probe's samples per link and their spread, "5 x 12%": the bandwidth above is
 * the median of 5 samples that lay within 12% of it, smallest to largest */
static void print_samples(const ppdl_cluster_model *cl, FILE *f)
{
    int n = cl->N;
    fprintf(f, "  samples x spread (N samples a link was measured from; their spread, largest - smallest)\n  %6s", "");
    for (int j = 0; j < n; j++) fprintf(f, " %7d", j);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %6d", i);
        for (int j = 0; j < n; j++) {
            double pc = 100 * cl->spread[i * n + j];
            if (i == j) fprintf(f, " %7s", "-");
            else fprintf(f, " %2d x%3.0f%%", cl->samples[i * n + j], pc < 999 ? pc : 999);
        }
        fprintf(f, "\n");
    }
}

/* min / max of the off-diagonal values within nodes (same = 1) or between (same = 0) */
static int range_of(const ppdl_cluster_model *cl, const double *m, int same, double *lo, double *hi)
{
    int n = cl->N, any = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j || (cl->node[i] == cl->node[j]) != same) continue;
            double v = m[i * n + j];
            if (!any || v < *lo) *lo = v;
            if (!any || v > *hi) *hi = v;
            any = 1;
        }
    return any;
}

void ppdl_cluster_print(const ppdl_cluster_model *cl, FILE *f)
{
    int n = cl->N;
    fprintf(f, "cluster: %d rank%s in %d node%s", n, n == 1 ? "" : "s", cl->n_nodes, cl->n_nodes == 1 ? "" : "s");
    if (cl->probe_ms > 0) {
        char b[32];
        fprintf(f, ", probed in %.0f ms (%d rounds of pairs, %d pass%s, %s messages through %s)", cl->probe_ms,
                cl->probe_rounds, cl->probe_passes, cl->probe_passes == 1 ? "" : "es",
                ppdl_fmt_bytes((size_t)cl->probe_bytes, b, sizeof b), cl->probe_nccl ? "NCCL" : "MPI");
    }
    fprintf(f, "\n");
    if (n > 1 && n <= 16) {
        print_matrix(cl, f, "bandwidth GB/s (row sends to column)", cl->bw, 1e-9, " %7.3f");
        print_matrix(cl, f, "latency us (one way)", cl->lat, 1e6, " %7.1f");
        if (cl->samples && cl->spread) print_samples(cl, f);
    } else if (n > 1) {
        for (int same = 1; same >= 0; same--) {
            double blo = 0, bhi = 0, llo = 0, lhi = 0;
            if (!range_of(cl, cl->bw, same, &blo, &bhi)) continue;
            range_of(cl, cl->lat, same, &llo, &lhi);
            fprintf(f, "  %s nodes: bandwidth %.3f-%.3f GB/s, latency %.1f-%.1f us\n", same ? "within " : "between",
                    blo * 1e-9, bhi * 1e-9, llo * 1e6, lhi * 1e6);
        }
    }
    fprintf(f, "  nodes:");
    for (int g = 0; g < cl->n_nodes; g++) {
        fprintf(f, " {");
        int first = 1;
        for (int i = 0; i < n; i++)
            if (cl->node[i] == g) { fprintf(f, "%s%d", first ? "" : ",", i); first = 0; }
        fprintf(f, "}");
    }
    const ppdl_hosts *h = &cl->hosts;
    fprintf(f, "\n  rank  node      memory  speed%s\n", h->n > 0 ? "  host (cores)" : "");
    for (int i = 0; i < n; i++) {
        char b[32];
        fprintf(f, "  %4d  %4d  %10s  %5.2f", i, cl->node[i], ppdl_fmt_bytes((size_t)cl->mem[i], b, sizeof b),
                cl->speed[i]);
        if (h->n > 0) fprintf(f, "  %s (%d)", h->name[h->of_rank[i]][0] ? h->name[h->of_rank[i]] : "?",
                              h->cores[h->of_rank[i]]);
        fprintf(f, "\n");
    }
    if (ppdl_hosts_oversubscribed(h, n))
        fprintf(f, "  (more ranks than cores on a host: the simulator shares its cores among them)\n");
    for (int g = 0; h->contention && g < h->n; g++)
        if (h->contention[g] != 1.0)
            fprintf(f, "  host %s: memory contention %.2f (an AdamW pass with its cores all running one, against "
                       "one alone; the planner stretches the optimizer step by it)\n",
                    h->name[g][0] ? h->name[g] : "?", h->contention[g]);
}
