/* cluster.c — CLUSTER.json: read, validate, write, print, and group ranks into nodes. */
#include "net/cluster.h"
#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void ppdl_cluster_alloc(ppdl_cluster *cl, int n)
{
    memset(cl, 0, sizeof *cl);
    cl->n = n;
    size_t nn = (size_t)n * (size_t)n;
    cl->bw = ppdl_xmalloc(nn * sizeof(double));
    cl->lat = ppdl_xcalloc(nn, sizeof(double));
    cl->mem = ppdl_xcalloc((size_t)n, sizeof(double));
    cl->speed = ppdl_xmalloc((size_t)n * sizeof(double));
    cl->node = ppdl_xcalloc((size_t)n, sizeof(int));
    for (size_t k = 0; k < nn; k++) cl->bw[k] = 1e12;
    for (int i = 0; i < n; i++) cl->speed[i] = 1.0;
    cl->n_nodes = n > 0 ? 1 : 0;
}

void ppdl_cluster_free(ppdl_cluster *cl)
{
    if (!cl) return;
    free(cl->bw);
    free(cl->lat);
    free(cl->mem);
    free(cl->speed);
    free(cl->node);
    free(cl->samples);
    free(cl->spread);
    ppdl_hosts_free(&cl->hosts);
    memset(cl, 0, sizeof *cl);
}

/* ---- validation ---- */

int ppdl_cluster_validate(const ppdl_cluster *cl, const char *what, char *err, size_t errlen)
{
    int n = cl->n;
    if (n < 1) return ppdl_errf(err, errlen, "%s: ranks is %d: expected at least 1", what, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double b = cl->bw[i * n + j], l = cl->lat[i * n + j];
            if (i == j) continue; /* never read */
            if (!(b > 0) || !isfinite(b))
                return ppdl_errf(err, errlen, "%s: bandwidth_Bps[%d][%d] is %g: expected a positive finite "
                                 "number of bytes/s", what, i, j, b);
            if (!(l >= 0) || !isfinite(l))
                return ppdl_errf(err, errlen, "%s: latency_s[%d][%d] is %g: expected a finite number of "
                                 "seconds >= 0", what, i, j, l);
        }
    for (int i = 0; i < n; i++) {
        if (!(cl->mem[i] > 0) || !isfinite(cl->mem[i]))
            return ppdl_errf(err, errlen, "%s: mem_bytes[%d] is %g: expected a positive number of bytes",
                             what, i, cl->mem[i]);
        if (!(cl->speed[i] > 0) || !isfinite(cl->speed[i]))
            return ppdl_errf(err, errlen, "%s: speed[%d] is %g: expected a positive finite number "
                             "(1.0 = rank 0's device)", what, i, cl->speed[i]);
    }
    return 0;
}

/* ---- reading ---- */

static int read_number(const json_t *v, double *out)
{
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

static int read_vector(const json_t *root, const char *key, int n, double *out, const char *what,
                       char *err, size_t errlen)
{
    const json_t *a = json_object_get(root, key);
    if (!a) return ppdl_errf(err, errlen, "%s: missing \"%s\" (an array of %d numbers)", what, key, n);
    if (!json_is_array(a) || (int)json_array_size(a) != n)
        return ppdl_errf(err, errlen, "%s: \"%s\" must be an array of %d numbers (one per rank)%s", what, key,
                         n, json_is_array(a) ? ", it has a different length" : "");
    for (int i = 0; i < n; i++)
        if (read_number(json_array_get(a, (size_t)i), &out[i]))
            return ppdl_errf(err, errlen, "%s: %s[%d] is not a number", what, key, i);
    return 0;
}

static int read_matrix(const json_t *root, const char *key, int n, double *out, const char *what,
                       char *err, size_t errlen)
{
    const json_t *a = json_object_get(root, key);
    if (!a) return ppdl_errf(err, errlen, "%s: missing \"%s\" (a %d x %d matrix)", what, key, n, n);
    if (!json_is_array(a) || (int)json_array_size(a) != n)
        return ppdl_errf(err, errlen, "%s: \"%s\" must be an array of %d rows (one per sending rank), "
                         "it has %d", what, key, n, json_is_array(a) ? (int)json_array_size(a) : 0);
    for (int i = 0; i < n; i++) {
        const json_t *row = json_array_get(a, (size_t)i);
        if (!json_is_array(row) || (int)json_array_size(row) != n)
            return ppdl_errf(err, errlen, "%s: %s[%d] must be an array of %d numbers (a square matrix), "
                             "it has %d", what, key, i, n, json_is_array(row) ? (int)json_array_size(row) : 0);
        for (int j = 0; j < n && out; j++) {   /* out NULL: the shape only */
            /* the diagonal is never read (a rank sends nothing to itself): any value,
             * a number kept, anything else 0 */
            if (i == j) {
                if (read_number(json_array_get(row, (size_t)j), &out[(size_t)i * n + j])) out[(size_t)i * n + j] = 0;
                continue;
            }
            if (read_number(json_array_get(row, (size_t)j), &out[(size_t)i * n + j]))
                return ppdl_errf(err, errlen, "%s: %s[%d][%d] is not a number", what, key, i, j);
        }
    }
    return 0;
}

static int from_json(const json_t *root, const char *what, int n_expected, ppdl_cluster *cl, char *err,
                     size_t errlen)
{
    if (!json_is_object(root)) return ppdl_errf(err, errlen, "%s: expected a JSON object (CLUSTER.json)", what);
    const json_t *jn = json_object_get(root, "ranks");
    if (!json_is_integer(jn) || json_integer_value(jn) < 1 || json_integer_value(jn) > 1 << 20)
        return ppdl_errf(err, errlen, "%s: \"ranks\" must be an integer >= 1", what);
    int n = (int)json_integer_value(jn);
    if (n_expected > 0 && n != n_expected)
        return ppdl_errf(err, errlen, "%s: describes %d rank%s but the job has %d; probe this job "
                         "(--cluster-out) or write a file for %d ranks", what, n, n == 1 ? "" : "s",
                         n_expected, n_expected);
    /* the shapes before allocating: a few bytes claiming 2^20 ranks must not allocate
     * two 8 TiB matrices */
    if (read_matrix(root, "bandwidth_Bps", n, NULL, what, err, errlen) ||
        read_matrix(root, "latency_s", n, NULL, what, err, errlen))
        return -1;
    ppdl_cluster_alloc(cl, n);
    if (read_matrix(root, "bandwidth_Bps", n, cl->bw, what, err, errlen) ||
        read_matrix(root, "latency_s", n, cl->lat, what, err, errlen) ||
        read_vector(root, "mem_bytes", n, cl->mem, what, err, errlen) ||
        read_vector(root, "speed", n, cl->speed, what, err, errlen) ||
        ppdl_cluster_validate(cl, what, err, errlen) ||
        ppdl_hosts_from_json(root, n, what, &cl->hosts, err, errlen)) {
        ppdl_cluster_free(cl);
        return -1;
    }
    ppdl_cluster_group_nodes(cl, PPDL_NODE_RATIO);
    return 0;
}

int ppdl_cluster_parse(const char *text, const char *what, int n_expected, ppdl_cluster *cl, char *err,
                       size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return ppdl_errf(err, errlen, "%s: line %d: %s", what, je.line, je.text);
    int rc = from_json(root, what, n_expected, cl, err, errlen);
    json_decref(root);
    return rc;
}

int ppdl_cluster_read(const char *path, int n_expected, ppdl_cluster *cl, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (je.line < 0) return ppdl_errf(err, errlen, "%s: cannot read the cluster file: %s", path, je.text);
        return ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    }
    int rc = from_json(root, path, n_expected, cl, err, errlen);
    json_decref(root);
    return rc;
}

/* ---- node grouping ---- */

static int find_root(int *parent, int i)
{
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* a link is as fast as its faster direction (cluster.h) */
static double link_bw(const ppdl_cluster *cl, int i, int j)
{
    double a = cl->bw[i * cl->n + j], b = cl->bw[j * cl->n + i];
    return a > b ? a : b;
}

void ppdl_cluster_group_nodes(ppdl_cluster *cl, double min_ratio)
{
    int n = cl->n;
    for (int i = 0; i < n; i++) cl->node[i] = 0;
    cl->n_nodes = n > 0 ? 1 : 0;
    if (n < 3) return; /* one link (or none): no contrast to group by */
    int n_links = n * (n - 1) / 2, k = 0;
    double *v = ppdl_xmalloc((size_t)n_links * sizeof(double));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) v[k++] = link_bw(cl, i, j);
    qsort(v, (size_t)n_links, sizeof *v, cmp_desc);
    /* the largest ratio between neighbouring link speeds; fast = at or above it */
    double best = 1, cut = 0;
    for (k = 0; k + 1 < n_links; k++) {
        double r = v[k] / v[k + 1];
        if (r > best) { best = r; cut = v[k]; }
    }
    free(v);
    if (best < min_ratio) return;
    int *parent = ppdl_xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) parent[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (link_bw(cl, i, j) >= cut) parent[find_root(parent, j)] = find_root(parent, i);
    /* number the components in the order of their smallest rank */
    int *id = ppdl_xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) id[i] = -1;
    cl->n_nodes = 0;
    for (int i = 0; i < n; i++) {
        int r = find_root(parent, i);
        if (id[r] < 0) id[r] = cl->n_nodes++;
        cl->node[i] = id[r];
    }
    free(id);
    free(parent);
}

/* ---- writing ---- */

/* a growing text buffer */
typedef struct { char *s; size_t len, cap; } text;

static void put(text *t, const char *fmt, ...) PPDL_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        PPDL_CHECK(k >= 0, "formatting the cluster JSON failed");
        if (t->len + (size_t)k < t->cap) { t->len += (size_t)k; return; }
        t->cap = 2 * (t->cap + (size_t)k);
        t->s = realloc(t->s, t->cap);
        PPDL_CHECK(t->s, "out of host memory writing the cluster JSON");
    }
}

/* finite by construction (validated). %.17g: reading the file back gives the same
 * doubles, so `--cluster saved.json` groups nodes and plans exactly as the run that
 * wrote it (with %.7g, links 1e-7 apart swapped places in the node grouping's search
 * for the largest gap: found by perf/fuzz) */
static void put_matrix(text *t, const char *key, const double *m, int n)
{
    put(t, "  \"%s\": [\n", key);
    for (int i = 0; i < n; i++) {
        put(t, "    [");
        for (int j = 0; j < n; j++) put(t, "%s%.17g", j ? ", " : "", m[i * n + j]);
        put(t, "]%s\n", i + 1 < n ? "," : "");
    }
    put(t, "  ],\n");
}

char *ppdl_cluster_to_json(const ppdl_cluster *cl)
{
    text t = {ppdl_xmalloc(4096), 0, 4096};
    t.s[0] = 0;
    int n = cl->n;
    put(&t, "{\n  \"ranks\": %d,\n", n);
    put_matrix(&t, "bandwidth_Bps", cl->bw, n);
    put_matrix(&t, "latency_s", cl->lat, n);
    put(&t, "  \"mem_bytes\": [");
    /* %.17g, not %.0f: 1e20 bytes as 21 digits is an integer too big to read back, and
     * 0.4 would become 0, which the reader refuses (found by perf/fuzz) */
    for (int i = 0; i < n; i++) put(&t, "%s%.17g", i ? ", " : "", cl->mem[i]);
    put(&t, "],\n  \"speed\": [");
    for (int i = 0; i < n; i++) put(&t, "%s%.17g", i ? ", " : "", cl->speed[i]);
    put(&t, "],\n  \"nodes\": [");
    for (int g = 0; g < cl->n_nodes; g++) {
        put(&t, "%s[", g ? ", " : "");
        int first = 1;
        for (int i = 0; i < n; i++)
            if (cl->node[i] == g) { put(&t, "%s%d", first ? "" : ", ", i); first = 0; }
        put(&t, "]");
    }
    put(&t, "]");
    char *hs = ppdl_hosts_to_json(&cl->hosts, n, "    ");
    if (hs) put(&t, ",\n  \"hosts\": %s", hs);
    free(hs);
    if (cl->probe_ms > 0) {
        put(&t, ",\n  \"probe\": {\"ms\": %.1f, \"message_bytes\": %.0f, \"activation_bytes\": %.0f, "
                "\"rounds\": %d, \"slots\": %d, \"passes\": %d, \"path\": \"%s\"",
            cl->probe_ms, cl->probe_bytes, cl->act_bytes, cl->probe_rounds, cl->probe_slots, cl->probe_passes,
            cl->probe_nccl ? "nccl" : "mpi");
        if (cl->samples && cl->spread) {
            /* per link: how many samples its median is of, and how far apart they were */
            put(&t, ",\n    \"samples\": [");
            for (int i = 0; i < n; i++) {
                put(&t, "%s[", i ? ", " : "");
                for (int j = 0; j < n; j++) put(&t, "%s%d", j ? ", " : "", cl->samples[i * n + j]);
                put(&t, "]");
            }
            put(&t, "],\n    \"spread\": [");
            for (int i = 0; i < n; i++) {
                put(&t, "%s[", i ? ", " : "");
                for (int j = 0; j < n; j++) put(&t, "%s%.4f", j ? ", " : "", cl->spread[i * n + j]);
                put(&t, "]");
            }
            put(&t, "]");
        }
        put(&t, "}");
    }
    put(&t, "\n}\n");
    return t.s;
}

int ppdl_cluster_write(const ppdl_cluster *cl, const char *path, char *err, size_t errlen)
{
    char *s = ppdl_cluster_to_json(cl);
    size_t plen = strlen(path) + 8;
    char *tmp = ppdl_xmalloc(plen);
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(s, f) >= 0;
    if (f && fclose(f)) ok = 0;
    if (ok && rename(tmp, path)) ok = 0;
    if (!ok) {
        remove(tmp);
        ppdl_errf(err, errlen, "--cluster-out %s: cannot write the cluster file", path);
    }
    free(tmp);
    free(s);
    return ok ? 0 : -1;
}

/* ---- printing ---- */

static void print_matrix(const ppdl_cluster *cl, FILE *f, const char *title, const double *m, double scale,
                         const char *fmt)
{
    int n = cl->n;
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
static void print_samples(const ppdl_cluster *cl, FILE *f)
{
    int n = cl->n;
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
static int range_of(const ppdl_cluster *cl, const double *m, int same, double *lo, double *hi)
{
    int n = cl->n, any = 0;
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

void ppdl_cluster_print(const ppdl_cluster *cl, FILE *f)
{
    int n = cl->n;
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
