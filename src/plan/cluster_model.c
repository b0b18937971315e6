/* cluster_model.c — CLUSTER.json for the planner: read, validate, write. */
#include "plan/cluster_model.h"
#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <math.h>
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
    for (size_t i = 0; i < n * n; i++) c->bw[i] = 1e9;
    for (size_t i = 0; i < n; i++) {
        c->mem[i] = 1e12;
        c->speed[i] = 1;
    }
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
    ppdl_hosts_free(&c->hosts);
    free(c->bw);
    free(c->lat);
    free(c->mem);
    free(c->speed);
    memset(c, 0, sizeof *c);
}

int ppdl_cluster_model_validate(const ppdl_cluster_model *c, const char *what, char *err, size_t errlen)
{
    int N = c->N;
    if (N < 1 || N > MAX_RANKS) return ppdl_errf(err, errlen, "%s: ranks is %d: expected 1..%d", what, N, MAX_RANKS);
    for (int a = 0; a < N; a++) {
        for (int b = 0; b < N; b++) {
            double bw = c->bw[(size_t)a * N + b], lat = c->lat[(size_t)a * N + b];
            if (a != b && (!isfinite(bw) || bw <= 0))
                return ppdl_errf(err, errlen, "%s: bandwidth_Bps[%d][%d] is %g: expected bytes/s > 0", what, a, b, bw);
            if (a != b && (!isfinite(lat) || lat < 0))
                return ppdl_errf(err, errlen, "%s: latency_s[%d][%d] is %g: expected seconds >= 0", what, a, b, lat);
        }
        if (!isfinite(c->mem[a]) || c->mem[a] <= 0)
            return ppdl_errf(err, errlen, "%s: mem_bytes[%d] is %g: expected bytes > 0", what, a, c->mem[a]);
        if (!isfinite(c->speed[a]) || c->speed[a] <= 0)
            return ppdl_errf(err, errlen, "%s: speed[%d] is %g: expected a relative speed > 0 "
                                          "(1.0 = the device the costs were profiled on)", what, a, c->speed[a]);
    }
    return 0;
}

static int get_vec(json_t *root, const char *key, int N, double *out, int required, const char *what,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v) return required ? ppdl_errf(err, errlen, "%s: \"%s\" is missing: expected an array of %d numbers", what, key, N) : 0;
    if (!json_is_array(v) || (int)json_array_size(v) != N)
        return ppdl_errf(err, errlen, "%s: %s: expected an array of %d numbers (one per rank)", what, key, N);
    for (int i = 0; i < N; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x)) return ppdl_errf(err, errlen, "%s: %s[%d]: expected a number", what, key, i);
        out[i] = json_number_value(x);
    }
    return 0;
}

static int get_mat(json_t *root, const char *key, int N, double *out, int required, const char *what,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v) return required ? ppdl_errf(err, errlen, "%s: \"%s\" is missing: expected %d rows of %d numbers", what, key, N, N) : 0;
    if (!json_is_array(v) || (int)json_array_size(v) != N)
        return ppdl_errf(err, errlen, "%s: %s: expected %d rows of %d numbers", what, key, N, N);
    for (int a = 0; a < N; a++) {
        json_t *row = json_array_get(v, (size_t)a);
        if (!json_is_array(row) || (int)json_array_size(row) != N)
            return ppdl_errf(err, errlen, "%s: %s[%d]: expected a row of %d numbers", what, key, a, N);
        for (int b = 0; b < N && out; b++) {   /* out NULL: the shape only */
            json_t *x = json_array_get(row, (size_t)b);
            /* the diagonal is never read (a rank sends nothing to itself): any value */
            if (a == b && !json_is_number(x)) { out[(size_t)a * N + b] = 0; continue; }
            if (!json_is_number(x)) return ppdl_errf(err, errlen, "%s: %s[%d][%d]: expected a number", what, key, a, b);
            out[(size_t)a * N + b] = json_number_value(x);
        }
    }
    return 0;
}

static int parse_root(json_t *root, const char *what, ppdl_cluster_model *c, char *err, size_t errlen)
{
    json_t *ranks = json_object_get(root, "ranks");
    if (!json_is_object(root) || !json_is_integer(ranks) || json_integer_value(ranks) < 1 ||
        json_integer_value(ranks) > MAX_RANKS)
        return ppdl_errf(err, errlen, "%s: expected an object with \"ranks\": an integer 1..%d (CLUSTER.json, "
                                      "see docs/formats.md)", what, MAX_RANKS);
    int N = (int)json_integer_value(ranks);
    /* the shapes before allocating: a few bytes claiming 65536 ranks must not allocate
     * and fill two 32 GiB matrices */
    if (get_mat(root, "bandwidth_Bps", N, NULL, 1, what, err, errlen) ||
        get_mat(root, "latency_s", N, NULL, 0, what, err, errlen))
        return -1;
    ppdl_cluster_model_alloc(c, N);
    if (get_mat(root, "bandwidth_Bps", N, c->bw, 1, what, err, errlen) ||
        get_mat(root, "latency_s", N, c->lat, 0, what, err, errlen) ||
        get_vec(root, "mem_bytes", N, c->mem, 1, what, err, errlen) ||
        get_vec(root, "speed", N, c->speed, 0, what, err, errlen) ||
        ppdl_hosts_from_json(root, N, what, &c->hosts, err, errlen))
        return -1;
    return ppdl_cluster_model_validate(c, what, err, errlen);
}

int ppdl_cluster_model_parse(const char *text, const char *what, ppdl_cluster_model *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) return ppdl_errf(err, errlen, "%s: line %d: %s", what, je.line, je.text);
    int rc = parse_root(root, what, c, err, errlen);
    json_decref(root);
    if (rc) ppdl_cluster_model_free(c);
    return rc;
}

int ppdl_cluster_model_read(const char *path, ppdl_cluster_model *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)   /* line -1: the file could not be opened or read */
        return je.line < 0 ? ppdl_errf(err, errlen, "%s: cannot read the cluster file: %s", path, je.text)
                           : ppdl_errf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    int rc = parse_root(root, path, c, err, errlen);
    json_decref(root);
    if (rc) ppdl_cluster_model_free(c);
    return rc;
}

static json_t *jmat(const double *m, int N)
{
    json_t *a = json_array();
    for (int i = 0; i < N; i++) {
        json_t *row = json_array();
        for (int j = 0; j < N; j++) json_array_append_new(row, json_real(m[(size_t)i * N + j]));
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *jvec(const double *v, int N)
{
    json_t *a = json_array();
    for (int i = 0; i < N; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

char *ppdl_cluster_model_to_json(const ppdl_cluster_model *c)
{
    json_t *root = json_object();
    json_object_set_new(root, "ranks", json_integer(c->N));
    json_object_set_new(root, "bandwidth_Bps", jmat(c->bw, c->N));
    json_object_set_new(root, "latency_s", jmat(c->lat, c->N));
    json_object_set_new(root, "mem_bytes", jvec(c->mem, c->N));
    json_object_set_new(root, "speed", jvec(c->speed, c->N));
    char *hs = ppdl_hosts_to_json(&c->hosts, c->N, "");
    if (hs) json_object_set_new(root, "hosts", json_loads(hs, 0, NULL));
    free(hs);
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(root);
    return s;
}

int ppdl_cluster_model_write(const char *path, const ppdl_cluster_model *c, char *err, size_t errlen)
{
    char *text = ppdl_cluster_model_to_json(c);
    int rc = ppdl_write_text_file(path, text, "cluster", err, errlen);
    free(text);
    return rc;
}
