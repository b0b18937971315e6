/* cluster_model.c — CLUSTER.json: read, validate, write, the hosts, and the ranks grouped
 * into nodes. */
#include "plan/cluster_model.h"
#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 65536

void ppdl_cluster_model_alloc(ppdl_cluster_model *c, int N)
{
    memset(c, 0, sizeof *c);
    c->N = N;
    size_t n = (size_t)(N > 0 ? N : 1);
    c->bw = ppdl_xcalloc(n * n, sizeof(double));
    c->lat = ppdl_xcalloc(n * n, sizeof(double));
    c->mem = ppdl_xcalloc(n, sizeof(double));
    c->speed = ppdl_xcalloc(n, sizeof(double));
    c->node = ppdl_xcalloc(n, sizeof(int));
    for (size_t i = 0; i < n * n; i++) c->bw[i] = 1e9;
    for (size_t i = 0; i < n; i++) {
        c->mem[i] = 1e12;
        c->speed[i] = 1;
    }
    c->n_nodes = N > 0 ? 1 : 0;
}

/* ---- hosts ---- */

void ppdl_hosts_free(ppdl_hosts *h)
{
    for (int i = 0; h->name && i < h->n; i++) free(h->name[i]);
    free(h->name);
    free(h->of_rank);
    free(h->cores);
    free(h->contention);
    memset(h, 0, sizeof *h);
}

double ppdl_hosts_contention(const ppdl_hosts *h, int r)
{
    return h->n > 0 && h->contention ? h->contention[h->of_rank[r]] : 1.0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = ppdl_xmalloc(n);
    memcpy(d, s ? s : "", n);
    return d;
}

void ppdl_hosts_build(ppdl_hosts *h, int N, const char *const *key, const char *const *name, const int *cores)
{
    memset(h, 0, sizeof *h);
    h->of_rank = ppdl_xmalloc((size_t)N * sizeof(int));
    h->cores = ppdl_xmalloc((size_t)N * sizeof(int));
    h->name = ppdl_xcalloc((size_t)N, sizeof(char *));
    for (int r = 0; r < N; r++) {
        int g = -1;
        for (int q = 0; q < r && g < 0; q++)
            if (!strcmp(key[q], key[r])) g = h->of_rank[q];
        if (g < 0) {
            g = h->n++;
            h->cores[g] = cores[r] >= 1 ? (cores[r] <= PPDL_MAX_CORES ? cores[r] : PPDL_MAX_CORES) : 1;
            h->name[g] = dup_str(name ? name[r] : NULL);
        }
        h->of_rank[r] = g;
    }
}

void ppdl_hosts_copy(ppdl_hosts *dst, const ppdl_hosts *src, int N)
{
    memset(dst, 0, sizeof *dst);
    if (src->n <= 0) return;
    dst->n = src->n;
    dst->of_rank = ppdl_xmalloc((size_t)N * sizeof(int));
    memcpy(dst->of_rank, src->of_rank, (size_t)N * sizeof(int));
    dst->cores = ppdl_xmalloc((size_t)src->n * sizeof(int));
    memcpy(dst->cores, src->cores, (size_t)src->n * sizeof(int));
    dst->name = ppdl_xmalloc((size_t)src->n * sizeof(char *));
    for (int i = 0; i < src->n; i++) dst->name[i] = dup_str(src->name[i]);
    if (src->contention) {
        dst->contention = ppdl_xmalloc((size_t)src->n * sizeof(double));
        memcpy(dst->contention, src->contention, (size_t)src->n * sizeof(double));
    }
}

int ppdl_hosts_oversubscribed(const ppdl_hosts *h, int N)
{
    if (h->n <= 0) return 0;
    int *cnt = ppdl_xcalloc((size_t)h->n, sizeof(int)), over = 0;
    for (int r = 0; r < N; r++) cnt[h->of_rank[r]]++;
    for (int i = 0; i < h->n; i++) over |= cnt[i] > h->cores[i];
    free(cnt);
    return over;
}

int ppdl_hosts_from_json(const void *jroot, int N, const char *what, ppdl_hosts *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    json_t *v = json_object_get((const json_t *)jroot, "hosts");
    if (!v) return 0;
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > (size_t)N)
        return ppdl_errf(err, errlen, "%s: hosts: expected an array of 1..%d hosts, each {\"name\": \"...\", "
                                      "\"cores\": C, \"ranks\": [...]}", what, N);
    int n = (int)json_array_size(v);
    h->n = n;
    h->of_rank = ppdl_xmalloc((size_t)N * sizeof(int));
    h->cores = ppdl_xcalloc((size_t)n, sizeof(int));
    h->name = ppdl_xcalloc((size_t)n, sizeof(char *));
    for (int r = 0; r < N; r++) h->of_rank[r] = -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        json_t *o = json_array_get(v, (size_t)i), *nm = json_object_get(o, "name");
        json_t *co = json_object_get(o, "cores"), *rk = json_object_get(o, "ranks");
        json_t *mc = json_object_get(o, "memory_contention");
        if (!json_is_object(o))
            rc = ppdl_errf(err, errlen, "%s: hosts[%d]: expected an object {\"name\", \"cores\", \"ranks\"}", what, i);
        else if (nm && !json_is_string(nm))
            rc = ppdl_errf(err, errlen, "%s: hosts[%d].name: expected a string", what, i);
        else if (!co)
            rc = ppdl_errf(err, errlen, "%s: hosts[%d].cores is missing: expected an integer >= 1 (the cores of "
                                        "that machine)", what, i);
        else if (!json_is_integer(co) || json_integer_value(co) < 1 || json_integer_value(co) > PPDL_MAX_CORES)
            rc = json_is_number(co)
                     ? ppdl_errf(err, errlen, "%s: hosts[%d].cores is %g: expected an integer 1..%d (the cores of "
                                              "that machine)", what, i, json_number_value(co), PPDL_MAX_CORES)
                     : ppdl_errf(err, errlen, "%s: hosts[%d].cores: expected an integer 1..%d (the cores of that "
                                              "machine)", what, i, PPDL_MAX_CORES);
        else if (!json_is_array(rk) || json_array_size(rk) < 1)
            rc = ppdl_errf(err, errlen, "%s: hosts[%d].ranks: expected a non-empty array of ranks", what, i);
        else if (mc && (!json_is_number(mc) || !(json_number_value(mc) >= 1) ||
                        !(json_number_value(mc) <= PPDL_MAX_CONTENTION)))
            rc = ppdl_errf(err, errlen, "%s: hosts[%d].memory_contention: expected a number 1..%g (how much longer a "
                                        "memory-bound pass takes with the host's cores all running it than alone)",
                           what, i, PPDL_MAX_CONTENTION);
        if (rc) break;
        if (mc) {
            if (!h->contention) {
                h->contention = ppdl_xmalloc((size_t)n * sizeof(double));
                for (int q = 0; q < n; q++) h->contention[q] = 1.0;
            }
            h->contention[i] = json_number_value(mc);
        }
        h->cores[i] = (int)json_integer_value(co);
        h->name[i] = dup_str(nm ? json_string_value(nm) : "");
        for (size_t k = 0; k < json_array_size(rk) && !rc; k++) {
            json_t *x = json_array_get(rk, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= N)
                rc = ppdl_errf(err, errlen, "%s: hosts[%d].ranks[%zu]: expected a rank 0..%d", what, i, k, N - 1);
            else if (h->of_rank[json_integer_value(x)] >= 0)
                rc = ppdl_errf(err, errlen, "%s: hosts[%d].ranks[%zu]: rank %d is already in hosts[%d]", what, i, k,
                               (int)json_integer_value(x), h->of_rank[json_integer_value(x)]);
            else
                h->of_rank[json_integer_value(x)] = i;
        }
    }
    for (int r = 0; r < N && !rc; r++)
        if (h->of_rank[r] < 0) rc = ppdl_errf(err, errlen, "%s: hosts: rank %d is in no host (every rank is on one)", what, r);
    if (rc) ppdl_hosts_free(h);
    return rc;
}

char *ppdl_hosts_to_json(const ppdl_hosts *h, int N, const char *indent)
{
    if (h->n <= 0) return NULL;
    size_t cap = 256, len = 0;
    char *s = ppdl_xmalloc(cap);
    s[0] = 0;
#define APPEND(...)                                                                   \
    do {                                                                              \
        int k_ = snprintf(s + len, cap - len, __VA_ARGS__);                           \
        if (len + (size_t)k_ >= cap) {                                                \
            cap = 2 * (len + (size_t)k_ + 1);                                         \
            s = realloc(s, cap);                                                      \
            PPDL_CHECK(s, "out of host memory writing the hosts");                    \
            snprintf(s + len, cap - len, __VA_ARGS__);                                \
        }                                                                             \
        len += (size_t)k_;                                                            \
    } while (0)
    APPEND("[");
    for (int i = 0; i < h->n; i++) {
        json_t *js = json_string(h->name[i] ? h->name[i] : "");
        char *nm = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL; /* quoted and escaped */
        json_decref(js);
        APPEND("%s\n%s{\"name\": %s, \"cores\": %d, \"ranks\": [", i ? "," : "", indent, nm ? nm : "\"\"", h->cores[i]);
        free(nm);
        int first = 1;
        for (int r = 0; r < N; r++)
            if (h->of_rank[r] == i) {
                APPEND("%s%d", first ? "" : ", ", r);
                first = 0;
            }
        APPEND("]");
        if (h->contention && h->contention[i] != 1.0) APPEND(", \"memory_contention\": %.4g", h->contention[i]);
        APPEND("}");
    }
    APPEND("]");
#undef APPEND
    return s;
}


void ppdl_cluster_model_free(ppdl_cluster_model *c)
{
    if (!c) return;
    ppdl_hosts_free(&c->hosts);
    free(c->bw);
    free(c->lat);
    free(c->mem);
    free(c->speed);
    free(c->node);
    free(c->samples);
    free(c->spread);
    memset(c, 0, sizeof *c);
}

/* ---- validation ---- */

int ppdl_cluster_model_validate(const ppdl_cluster_model *c, const char *what, char *err, size_t errlen)
{
    int N = c->N;
    if (N < 1 || N > MAX_RANKS) return ppdl_errf(err, errlen, "%s: ranks is %d: expected 1..%d", what, N, MAX_RANKS);
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            double bw = c->bw[(size_t)a * N + b], lat = c->lat[(size_t)a * N + b];
            if (a == b) continue; /* a rank sends nothing to itself */
            if (!(bw > 0) || !isfinite(bw))
                return ppdl_errf(err, errlen, "%s: bandwidth_Bps[%d][%d] is %g: expected a positive finite "
                                 "number of bytes/s", what, a, b, bw);
            if (!(lat >= 0) || !isfinite(lat))
                return ppdl_errf(err, errlen, "%s: latency_s[%d][%d] is %g: expected a finite number of "
                                 "seconds >= 0", what, a, b, lat);
        }
    for (int a = 0; a < N; a++) {
        if (!(c->mem[a] > 0) || !isfinite(c->mem[a]))
            return ppdl_errf(err, errlen, "%s: mem_bytes[%d] is %g: expected a positive number of bytes", what, a,
                             c->mem[a]);
        if (!(c->speed[a] > 0) || !isfinite(c->speed[a]))
            return ppdl_errf(err, errlen, "%s: speed[%d] is %g: expected a positive finite number (1.0 = the "
                             "device the costs were profiled on)", what, a, c->speed[a]);
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

static int read_vector(const json_t *root, const char *key, int N, double *out, const char *what, char *err,
                       size_t errlen)
{
    const json_t *a = json_object_get(root, key);
    if (!a) return ppdl_errf(err, errlen, "%s: missing \"%s\" (an array of %d numbers)", what, key, N);
    if (!json_is_array(a) || (int)json_array_size(a) != N)
        return ppdl_errf(err, errlen, "%s: \"%s\" must be an array of %d numbers (one per rank)%s", what, key, N,
                         json_is_array(a) ? ", it has a different length" : "");
    for (int i = 0; i < N; i++)
        if (read_number(json_array_get(a, (size_t)i), &out[i]))
            return ppdl_errf(err, errlen, "%s: %s[%d] is not a number", what, key, i);
    return 0;
}

static int read_matrix(const json_t *root, const char *key, int N, double *out, const char *what, char *err,
                       size_t errlen)
{
    const json_t *a = json_object_get(root, key);
    if (!a) return ppdl_errf(err, errlen, "%s: missing \"%s\" (a %d x %d matrix)", what, key, N, N);
    if (!json_is_array(a) || (int)json_array_size(a) != N)
        return ppdl_errf(err, errlen, "%s: \"%s\" must be an array of %d rows (one per sending rank), "
                         "it has %d", what, key, N, json_is_array(a) ? (int)json_array_size(a) : 0);
    for (int i = 0; i < N; i++) {
        const json_t *row = json_array_get(a, (size_t)i);
        if (!json_is_array(row) || (int)json_array_size(row) != N)
            return ppdl_errf(err, errlen, "%s: %s[%d] must be an array of %d numbers (a square matrix), "
                             "it has %d", what, key, i, N, json_is_array(row) ? (int)json_array_size(row) : 0);
        for (int j = 0; j < N && out; j++) {   /* out NULL: the shape only */
            double *x = &out[(size_t)i * N + j];
            /* the diagonal: any value, a number kept, anything else 0 */
            if (i == j) {
                if (read_number(json_array_get(row, (size_t)j), x)) *x = 0;
                continue;
            }
            if (read_number(json_array_get(row, (size_t)j), x))
                return ppdl_errf(err, errlen, "%s: %s[%d][%d] is not a number", what, key, i, j);
        }
    }
    return 0;
}

static int from_json(const json_t *root, const char *what, int n_expected, ppdl_cluster_model *c, char *err,
                     size_t errlen)
{
    if (!json_is_object(root))
        return ppdl_errf(err, errlen, "%s: expected a JSON object (CLUSTER.json, docs/formats.md)", what);
    const json_t *jn = json_object_get(root, "ranks");
    if (!json_is_integer(jn) || json_integer_value(jn) < 1 || json_integer_value(jn) > MAX_RANKS)
        return ppdl_errf(err, errlen, "%s: \"ranks\" must be an integer >= 1 and at most %d", what, MAX_RANKS);
    int N = (int)json_integer_value(jn);
    if (n_expected > 0 && N != n_expected)
        return ppdl_errf(err, errlen, "%s: describes %d rank%s but the job has %d; probe this job "
                         "(--cluster-out) or write a file for %d ranks", what, N, N == 1 ? "" : "s",
                         n_expected, n_expected);
    /* the shapes before allocating: a few bytes claiming 65536 ranks must not allocate
     * and fill two 32 GiB matrices */
    if (read_matrix(root, "bandwidth_Bps", N, NULL, what, err, errlen) ||
        read_matrix(root, "latency_s", N, NULL, what, err, errlen))
        return -1;
    ppdl_cluster_model_alloc(c, N);
    if (read_matrix(root, "bandwidth_Bps", N, c->bw, what, err, errlen) ||
        read_matrix(root, "latency_s", N, c->lat, what, err, errlen) ||
        read_vector(root, "mem_bytes", N, c->mem, what, err, errlen) ||
        read_vector(root, "speed", N, c->speed, what, err, errlen) ||
        ppdl_cluster_model_validate(c, what, err, errlen) ||
        ppdl_hosts_from_json(root, N, what, &c->hosts, err, errlen)) {
        ppdl_cluster_model_free(c);
        return -1;
    }
    ppdl_cluster_group_nodes(c, PPDL_NODE_RATIO);
    return 0;
}

int ppdl_cluster_model_parse(const char *text, const char *what, int n_expected, ppdl_cluster_model *c, char *err,
                             size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return ppdl_errf(err, errlen, "%s: line %d: %s", what, je.line, je.text);
    int rc = from_json(root, what, n_expected, c, err, errlen);
    json_decref(root);
    return rc;
}

int ppdl_cluster_model_read(const char *path, int n_expected, ppdl_cluster_model *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)   /* line -1: the file could not be opened or read */
        return je.line < 0 ? ppdl_errf(err, errlen, "%s: cannot read the cluster file: %s", path, je.text)
                           : ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    int rc = from_json(root, path, n_expected, c, err, errlen);
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

/* a link is as fast as its faster direction (cluster_model.h) */
static double link_bw(const ppdl_cluster_model *c, int i, int j)
{
    double a = c->bw[(size_t)i * c->N + j], b = c->bw[(size_t)j * c->N + i];
    return a > b ? a : b;
}

void ppdl_cluster_group_nodes(ppdl_cluster_model *c, double min_ratio)
{
    int N = c->N;
    for (int i = 0; i < N; i++) c->node[i] = 0;
    c->n_nodes = N > 0 ? 1 : 0;
    if (N < 3) return; /* one link (or none): no contrast to group by */
    int n_links = N * (N - 1) / 2, k = 0;
    double *v = ppdl_xmalloc((size_t)n_links * sizeof(double));
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) v[k++] = link_bw(c, i, j);
    qsort(v, (size_t)n_links, sizeof *v, cmp_desc);
    /* the largest ratio between neighbouring link speeds; fast = at or above it */
    double best = 1, cut = 0;
    for (k = 0; k + 1 < n_links; k++) {
        double r = v[k] / v[k + 1];
        if (r > best) { best = r; cut = v[k]; }
    }
    free(v);
    if (best < min_ratio) return;
    int *parent = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) parent[i] = i;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            if (link_bw(c, i, j) >= cut) parent[find_root(parent, j)] = find_root(parent, i);
    /* number the components in the order of their smallest rank */
    int *id = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) id[i] = -1;
    c->n_nodes = 0;
    for (int i = 0; i < N; i++) {
        int r = find_root(parent, i);
        if (id[r] < 0) id[r] = c->n_nodes++;
        c->node[i] = id[r];
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
static void put_matrix(text *t, const char *key, const double *m, int N)
{
    put(t, "  \"%s\": [\n", key);
    for (int i = 0; i < N; i++) {
        put(t, "    [");
        for (int j = 0; j < N; j++) put(t, "%s%.17g", j ? ", " : "", m[(size_t)i * N + j]);
        put(t, "]%s\n", i + 1 < N ? "," : "");
    }
    put(t, "  ],\n");
}

char *ppdl_cluster_model_to_json(const ppdl_cluster_model *c)
{
    text t = {ppdl_xmalloc(4096), 0, 4096};
    t.s[0] = 0;
    int N = c->N;
    put(&t, "{\n  \"ranks\": %d,\n", N);
    put_matrix(&t, "bandwidth_Bps", c->bw, N);
    put_matrix(&t, "latency_s", c->lat, N);
    put(&t, "  \"mem_bytes\": [");
    /* %.17g, not %.0f: 1e20 bytes as 21 digits is an integer too big to read back, and
     * 0.4 would become 0, which the reader refuses (found by perf/fuzz) */
    for (int i = 0; i < N; i++) put(&t, "%s%.17g", i ? ", " : "", c->mem[i]);
    put(&t, "],\n  \"speed\": [");
    for (int i = 0; i < N; i++) put(&t, "%s%.17g", i ? ", " : "", c->speed[i]);
    put(&t, "],\n  \"nodes\": [");
    /* a cluster built without a node array (not allocated here) is one node */
    int n_nodes = c->node ? c->n_nodes : N > 0;
    for (int g = 0; g < n_nodes; g++) {
        put(&t, "%s[", g ? ", " : "");
        int first = 1;
        for (int i = 0; i < N; i++)
            if ((c->node ? c->node[i] : 0) == g) { put(&t, "%s%d", first ? "" : ", ", i); first = 0; }
        put(&t, "]");
    }
    put(&t, "]");
    char *hs = ppdl_hosts_to_json(&c->hosts, N, "    ");
    if (hs) put(&t, ",\n  \"hosts\": %s", hs);
    free(hs);
    if (c->probe_ms > 0) {
        put(&t, ",\n  \"probe\": {\"ms\": %.1f, \"message_bytes\": %.0f, \"activation_bytes\": %.0f, "
                "\"rounds\": %d, \"slots\": %d, \"passes\": %d, \"path\": \"%s\"",
            c->probe_ms, c->probe_bytes, c->act_bytes, c->probe_rounds, c->probe_slots, c->probe_passes,
            c->probe_nccl ? "nccl" : "mpi");
        if (c->samples && c->spread) {
            /* per link: how many samples its median is of, and how far apart they were */
            put(&t, ",\n    \"samples\": [");
            for (int i = 0; i < N; i++) {
                put(&t, "%s[", i ? ", " : "");
                for (int j = 0; j < N; j++) put(&t, "%s%d", j ? ", " : "", c->samples[(size_t)i * N + j]);
                put(&t, "]");
            }
            put(&t, "],\n    \"spread\": [");
            for (int i = 0; i < N; i++) {
                put(&t, "%s[", i ? ", " : "");
                for (int j = 0; j < N; j++) put(&t, "%s%.4f", j ? ", " : "", c->spread[(size_t)i * N + j]);
                put(&t, "]");
            }
            put(&t, "]");
        }
        put(&t, "}");
    }
    put(&t, "\n}\n");
    return t.s;
}

int ppdl_cluster_model_write(const char *path, const ppdl_cluster_model *c, char *err, size_t errlen)
{
    char *s = ppdl_cluster_model_to_json(c);
    size_t plen = strlen(path) + 8;
    char *tmp = ppdl_xmalloc(plen);
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(s, f) >= 0;
    if (f && fclose(f)) ok = 0;
    if (ok && rename(tmp, path)) ok = 0;
    if (!ok) {
        remove(tmp);
        ppdl_errf(err, errlen, "%s: cannot write the cluster file", path);
    }
    free(tmp);
    free(s);
    return ok ? 0 : -1;
}
