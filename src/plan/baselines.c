/* baselines.c — uniform, balanced-parameters, balanced-time and PipeDream-style plans. */
#include "plan/baselines.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"dp", "dp-rc", "uniform", "uniform-rc", "params", "params-rc", "time",
                                    "time-rc", "pipedream", "pipedream-rc", NULL};

int ppdl_is_baseline(const char *name)
{
    for (int k = 0; names[k]; k++)
        if (!strcmp(names[k], name)) return 1;
    return 0;
}

/* Cut L layers of cost w[l] into S non-empty runs, with bnd[j] the cost of cutting after
 * layer j (NULL: 0): first the least possible max(run sums, cut costs) B* (DP, O(S L^2)),
 * then among cuts with every term <= B* the least sum of squared run sums. */
static void balanced_cut(const double *w, const double *bnd, int L, int S, int *first)
{
    double *pre = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    for (int l = 0; l < L; l++) pre[l + 1] = pre[l] + w[l];
    double *g = ppdl_xmalloc((size_t)S * L * sizeof(double));
    int *arg = ppdl_xmalloc((size_t)S * L * sizeof(int));
    /* pass 1: min-max */
    for (int s = 0; s < S; s++)
        for (int j = s; j <= L - S + s; j++) {
            double best = INFINITY;
            if (s == 0) best = pre[j + 1];
            else
                for (int i = s; i <= j; i++) {
                    double v = fmax(g[(size_t)(s - 1) * L + i - 1], pre[j + 1] - pre[i]);
                    if (bnd) v = fmax(v, bnd[i - 1]);
                    if (v < best) best = v;
                }
            g[(size_t)s * L + j] = best;
        }
    double Bstar = g[(size_t)(S - 1) * L + L - 1];
    /* pass 2: least sum of squares under B* (a relative slack absorbs rounding) */
    double lim = Bstar * (1 + 1e-12);
    for (int s = 0; s < S; s++)
        for (int j = s; j <= L - S + s; j++) {
            double best = INFINITY;
            int bi = -1;
            if (s == 0) {
                double r = pre[j + 1];
                if (r <= lim) best = r * r, bi = 0;
            } else
                for (int i = j; i >= s; i--) {
                    double r = pre[j + 1] - pre[i], prev = g[(size_t)(s - 1) * L + i - 1];
                    if (r > lim) break;
                    if (!(prev < INFINITY) || (bnd && bnd[i - 1] > lim)) continue;
                    if (prev + r * r < best) best = prev + r * r, bi = i;
                }
            g[(size_t)s * L + j] = best;
            arg[(size_t)s * L + j] = bi;
        }
    for (int s = S - 1, j = L - 1; s >= 0; s--) {
        first[s] = arg[(size_t)s * L + j];
        PPDL_CHECK(first[s] >= 0, "balanced_cut: no cut under its own optimum (stage %d)", s);
        j = first[s] - 1;
    }
    free(pre);
    free(g);
    free(arg);
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) { /* insertion sort: n is N^2, called once */
        double x = v[i];
        int k = i;
        for (; k > 0 && v[k - 1] > x; k--) v[k] = v[k - 1];
        v[k] = x;
    }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int ppdl_baseline(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                  const char *method, ppdl_plan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!ppdl_is_baseline(method)) return ppdl_errf(err, errlen, "unknown baseline method '%s'", method);
    int L = c->L, S = cl->N;
    size_t blen = strcspn(method, "-");
    int rc_all = strstr(method, "-rc") != NULL;
    if (!strncmp(method, "dp", blen)) {
        if (M < S)
            return ppdl_errf(err, errlen, "data parallelism on %d ranks needs at least %d micro-batches (one per "
                                          "replica), not %d", S, S, M);
        if (ppdl_plan_data_parallel(L, S, out, err, errlen)) return -1;
    } else if (L < S) {
        return ppdl_errf(err, errlen, "the model has %d layers but the cluster has %d ranks: every rank "
                                      "runs one stage of at least one layer", L, S);
    } else if (!strncmp(method, "uniform", blen)) {
        if (ppdl_plan_uniform(L, S, out, err, errlen)) return -1;
    } else {
        double *w = ppdl_xmalloc((size_t)L * sizeof(double)), *bnd = NULL;
        for (int l = 0; l < L; l++)
            w[l] = !strncmp(method, "params", blen) ? c->layers[l].param_bytes
                                                    : c->layers[l].fwd_ms + c->layers[l].bwd_ms;
        if (!strncmp(method, "pipedream", blen) && S > 1) {
            /* one bandwidth and one latency for every link: the medians off the diagonal */
            int n = 0, N = cl->N;
            double *bw = ppdl_xmalloc((size_t)N * N * sizeof(double)), *lat = ppdl_xmalloc((size_t)N * N * sizeof(double));
            for (int a = 0; a < N; a++)
                for (int b = 0; b < N; b++)
                    if (a != b) {
                        bw[n] = cl->bw[a * N + b];
                        lat[n++] = cl->lat[a * N + b];
                    }
            double mbw = median(bw, n), mlat = median(lat, n);
            bnd = ppdl_xmalloc((size_t)L * sizeof(double));
            for (int l = 0; l < L; l++) bnd[l] = 1000.0 * (mlat + ppdl_msg_bytes(c, l) / mbw);
            free(bw);
            free(lat);
        }
        int *first = ppdl_xmalloc((size_t)S * sizeof(int));
        balanced_cut(w, bnd, L, S, first);
        ppdl_plan_uniform(L, S, out, err, errlen); /* ranks in order; cut replaced below */
        for (int s = 0; s < S; s++) {
            ppdl_plan_stage *st = &out->stages[s];
            st->first = first[s];
            st->last = s + 1 < S ? first[s + 1] - 1 : L - 1;
            free(st->recompute);
            st->recompute = ppdl_xcalloc((size_t)(st->last - st->first + 1), sizeof(int));
        }
        free(first);
        free(w);
        free(bnd);
    }
    snprintf(out->method, sizeof out->method, "%s", method);
    if (rc_all) {
        int *nopt = ppdl_xmalloc((size_t)L * sizeof(int));
        for (int l = 0; l < L; l++) nopt[l] = c->layers[l].n_opts;
        ppdl_plan_set_recompute(out, 1, nopt);
        free(nopt);
    }
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, err, errlen)) {
        ppdl_plan_free(out);
        return -1;
    }
    ppdl_cost_annotate(out, &ev);
    ppdl_cost_eval_free(&ev);
    return 0;
}
