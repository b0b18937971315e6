/* vocab.c — vocabulary parallelism in the planner: the layout as a derived zb-v plan,
 * its evaluation and play, the slices' sizes and the search (vocab.h). */
#include "plan/vocab.h"
#include "core/error.h"
#include "core/slices.h"
#include "core/util.h"
#include "plan/reserve.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ppdl_vocab_mode_parse(const char *s)
{
    if (!strcmp(s, "off")) return PPDL_VOCAB_OFF;
    if (!strcmp(s, "auto")) return PPDL_VOCAB_AUTO;
    if (!strcmp(s, "on")) return PPDL_VOCAB_ON;
    return -1;
}

/* a whole number of bytes: the share n / V of b, rounded down (costs.h: bytes add up
 * exactly only as integers) */
static double share_bytes(double b, long n, long V)
{
    return floor(b * (double)n / (double)V);
}

/* the derived costs for slices of rows n[0..S-1] (vocab.h ppdl_vocab_expand) */
static void derived_costs(const ppdl_costs *c, const long *n, int S, ppdl_costs *dc)
{
    int L = c->L;
    const ppdl_layer_cost *h = &c->layers[L - 1];
    long V = c->vocab_size;
    ppdl_costs_alloc(dc, L - 1 + S);
    ppdl_layer_cost *keep = dc->layers;
    *dc = *c;
    dc->layers = keep;
    dc->L = L - 1 + S;
    dc->tied_bytes = 0; /* the slices' exchange with stage 0 is X_v, outside the V */
    memcpy(dc->layers, c->layers, (size_t)(L - 1) * sizeof *dc->layers);
    /* the hidden state x the head reads: what travels between the slices, both ways */
    double x = h->in_bytes; /* the reader defaults it to the last block's out_bytes */
    for (int j = 0; j < S; j++) {
        int s = S - 1 - j; /* derived stage S + j holds slice S-1-j */
        double f = (double)n[s] / (double)V;
        ppdl_layer_cost *d = &dc->layers[L - 1 + j];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "head[%d]", s);
        d->fwd_ms = f * h->fwd_ms;
        d->bwd_ms = f * h->bwd_ms;
        d->bwd_input_ms = f * h->bwd_input_ms;
        d->bwd_weight_ms = f * h->bwd_weight_ms;
        d->opt_ms = f * h->opt_ms;
        d->param_bytes = share_bytes(h->param_bytes, n[s], V);
        d->out_bytes = x;
        d->in_bytes = x;
        d->n_opts = 1;
        /* x and the slice's logits (the softmax its backward reads) per micro-batch */
        d->stash_bytes[0] = x + share_bytes(h->out_bytes, n[s], V);
        d->saved_bytes = d->stash_bytes[0];
        d->work_bytes = share_bytes(h->work_bytes, n[s], V);
    }
}

static int check_layout(const ppdl_costs *c, const ppdl_plan *p, char *err, size_t errlen)
{
    if (c->vocab_size < 1)
        return ppdl_errf(err, errlen, "the plan is vocabulary-parallel but the costs have no \"vocab\" (the head's "
                                      "vocabulary: ppdl --costs-out writes it for a gpt)");
    if (p->n_vocab != p->S || p->S < 1 || p->vocab_size != c->vocab_size || p->vocab_layer != c->L - 1)
        return ppdl_errf(err, errlen, "vocab_parallel: %d slices of %ld rows of layer %d on %d stages; the costs' "
                                      "head is layer %d of %ld rows, one slice per stage", p->n_vocab, p->vocab_size,
                         p->vocab_layer, p->S, c->L - 1, c->vocab_size);
    return 0;
}

int ppdl_vocab_expand(const ppdl_costs *c, const ppdl_plan *p, ppdl_costs *dc, ppdl_plan *dp, char *err,
                      size_t errlen)
{
    memset(dc, 0, sizeof *dc);
    memset(dp, 0, sizeof *dp);
    if (check_layout(c, p, err, errlen)) return -1;
    int S = p->S, L = c->L;
    long *n = ppdl_xmalloc((size_t)S * sizeof(long));
    for (int s = 0; s < S; s++) n[s] = p->vocab[s].last - p->vocab[s].first + 1;
    derived_costs(c, n, S, dc);
    free(n);
    snprintf(dp->method, sizeof dp->method, "%s", p->method);
    snprintf(dp->schedule, sizeof dp->schedule, "zb-v");
    dp->S = 2 * S;
    dp->stages = ppdl_xcalloc((size_t)dp->S, sizeof *dp->stages);
    for (int s = 0; s < dp->S; s++) {
        ppdl_plan_stage *d = &dp->stages[s];
        const ppdl_plan_stage *o = &p->stages[s < S ? s : 2 * S - 1 - s];
        d->rank = o->rank;
        d->n_replicas = 1;
        d->ranks = ppdl_xmalloc(sizeof(int));
        d->ranks[0] = o->rank;
        d->first = s < S ? o->first : L - 1 + (s - S);
        d->last = s < S ? o->last : d->first;
        int nl = d->last - d->first + 1;
        d->recompute = ppdl_xcalloc((size_t)nl, sizeof(int));
        if (s < S && o->recompute) memcpy(d->recompute, o->recompute, (size_t)nl * sizeof(int));
    }
    return 0;
}

/* each slice's share of the tied weight, b n_s / V bytes */
static double tie_share(const ppdl_costs *c, const ppdl_plan *p, int s)
{
    return share_bytes(c->tied_bytes, p->vocab[s].last - p->vocab[s].first + 1, c->vocab_size);
}

double ppdl_vocab_tie_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p)
{
    double x = 0;
    if (c->tied_bytes <= 0) return 0;
    int r0 = p->stages[0].rank, N = cl->N;
    for (int s = 0; s < p->n_vocab; s++) {
        int r = p->vocab[s].rank;
        double b = tie_share(c, p, s);
        if (r == r0 || b <= 0) continue;
        for (int d = 0; d < 2; d++) {
            int a = d ? r0 : r, z = d ? r : r0;
            x = fmax(x, 1000 * (cl->lat[a * N + z] + b / cl->bw[a * N + z]));
        }
    }
    return x;
}

int ppdl_vocab_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const ppdl_plan *p,
                        ppdl_cost_eval *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    if (schedule != PPDL_SCHED_ZB_V)
        return ppdl_errf(err, errlen, "a vocabulary-parallel plan runs under zb-v (its V: the blocks down the "
                                      "ranks, the head's slices back up), not %s", ppdl_schedule_name(schedule));
    int *nopt = ppdl_xmalloc((size_t)c->L * sizeof(int));
    for (int l = 0; l < c->L; l++) nopt[l] = c->layers[l].n_opts;
    int rc = ppdl_plan_validate(p, c->L, cl->N, nopt, "plan", err, errlen);
    free(nopt);
    if (rc) return -1;
    ppdl_costs dc;
    ppdl_plan dp;
    if (ppdl_vocab_expand(c, p, &dc, &dp, err, errlen)) return -1;
    rc = ppdl_cost_evaluate(&dc, cl, M, schedule, &dp, ev, err, errlen);
    if (rc == 0 && c->tied_bytes > 0) {
        /* the tie: stage 0 receives the slices' gradients (b), slice s its rows' (b n_s / V);
         * a rank's memory is its block stage's and its slice's together */
        int S = p->S;
        ev->feasible = 1;
        ev->worst_over = -INFINITY;
        for (int s = 0; s < S; s++) {
            int r = p->stages[s].rank;
            ev->mem_bytes[2 * S - 1 - s] += s == 0 ? c->tied_bytes : tie_share(c, p, s);
            double over = ev->mem_bytes[s] + ev->mem_bytes[2 * S - 1 - s] - cl->mem[r];
            if (over > 0) ev->feasible = 0;
            if (over > ev->worst_over) {
                ev->worst_over = over;
                ev->worst_stage = s;
            }
        }
        ev->tie = ppdl_vocab_tie_ms(c, cl, p);
        ev->T += ev->tie;
    }
    ppdl_plan_free(&dp);
    ppdl_costs_free(&dc);
    return rc;
}

int ppdl_vocab_simulate(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M, int schedule,
                        int record, ppdl_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (schedule != PPDL_SCHED_ZB_V)
        return ppdl_errf(err, errlen, "a vocabulary-parallel plan is played under zb-v, not %s",
                         ppdl_schedule_name(schedule));
    ppdl_costs dc;
    ppdl_plan dp;
    if (ppdl_vocab_expand(c, p, &dc, &dp, err, errlen)) return -1;
    int rc = ppdl_simulate(&dc, cl, &dp, M, schedule, record, out, err, errlen);
    if (rc == 0) {
        /* X_v after the step, as in T (an upper bound: it waits for no one's update) */
        double x = ppdl_vocab_tie_ms(c, cl, p);
        if (x > 0) {
            out->busy_frac *= out->step_ms / (out->step_ms + x);
            out->step_ms += x;
        }
    }
    ppdl_plan_free(&dp);
    ppdl_costs_free(&dc);
    return rc;
}

/* rows of rank s at level lam: speed_s (lam - t_s) V / H, at least 0, at most cap_s */
static double rows_at(double lam, double t, double speed, double cap, double H, long V)
{
    double n = lam > t ? speed * (lam - t) * (double)V / H : 0;
    return fmin(n, cap);
}

void ppdl_vocab_slices(const double *t, const double *speed, const double *cap, int S, double H, long V,
                       size_t *bounds)
{
    double *w = ppdl_xmalloc((size_t)S * sizeof(double));
    double lo = INFINITY, hi = -INFINITY, total_cap = 0, vmin = INFINITY;
    for (int s = 0; s < S; s++) {
        lo = fmin(lo, t[s]);
        hi = fmax(hi, t[s]);
        vmin = fmin(vmin, speed[s]);
        total_cap += cap ? cap[s] : (double)V;
    }
    hi += (H > 0 ? H : 1) / vmin; /* one rank alone takes the whole head below this level */
    if (H <= 0 || total_cap <= (double)V) {
        /* no time to balance, or the caps hold at most the vocabulary: by speed, or each its cap */
        for (int s = 0; s < S; s++) w[s] = H <= 0 ? speed[s] : (cap ? cap[s] : 1);
    } else {
        for (int it = 0; it < 200; it++) { /* the level at which the rows sum to V */
            double mid = 0.5 * (lo + hi), sum = 0;
            for (int s = 0; s < S; s++) sum += rows_at(mid, t[s], speed[s], cap ? cap[s] : INFINITY, H, V);
            if (sum < (double)V) lo = mid;
            else hi = mid;
        }
        double sum = 0;
        /* whole rows, so that a capped slice gets its cap exactly */
        for (int s = 0; s < S; s++) sum += w[s] = rint(rows_at(hi, t[s], speed[s], cap ? cap[s] : INFINITY, H, V));
        if (!(sum > 0))
            for (int s = 0; s < S; s++) w[s] = speed[s];
    }
    ppdl_slices((size_t)V, S, w, 1, bounds);
    free(w);
}

/* the plan of the cut (last layer of each stage in cut[0..S-1]) with slices bounds */
static void layout_plan(const ppdl_costs *c, const int *cut, const size_t *bounds, int S, ppdl_plan *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->method, sizeof p->method, "ppdl-vocab");
    snprintf(p->schedule, sizeof p->schedule, "zb-v");
    p->S = S;
    p->stages = ppdl_xcalloc((size_t)S, sizeof *p->stages);
    p->n_vocab = S;
    p->vocab_layer = c->L - 1;
    p->vocab_size = c->vocab_size;
    p->vocab = ppdl_xcalloc((size_t)S, sizeof *p->vocab);
    for (int s = 0; s < S; s++) {
        ppdl_plan_stage *st = &p->stages[s];
        st->rank = s;
        st->first = s ? cut[s - 1] + 1 : 0;
        st->last = cut[s];
        st->recompute = ppdl_xcalloc((size_t)(st->last - st->first + 1), sizeof(int));
        p->vocab[s].rank = s;
        p->vocab[s].first = (long)bounds[s];
        p->vocab[s].last = (long)bounds[s + 1] - 1;
    }
}

/* the water-filled slices of a cut, then (where a rank is over its memory) capped once
 * by the rows its memory holds; the plan evaluated into *ev (the caller frees) */
static int layout_eval(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const int *cut, ppdl_plan *p,
                       ppdl_cost_eval *ev, char *err, size_t errlen)
{
    int S = cl->N, L = c->L;
    const ppdl_layer_cost *h = &c->layers[L - 1];
    long V = c->vocab_size;
    double *t = ppdl_xmalloc(3 * (size_t)S * sizeof(double)), *cap = t + S, *speed = t + 2 * S;
    size_t *bounds = ppdl_xmalloc((size_t)(S + 1) * sizeof(size_t));
    for (int s = 0; s < S; s++) {
        speed[s] = cl->speed[s];
        t[s] = ppdl_stage_time_split(c, s ? cut[s - 1] + 1 : 0, cut[s], NULL, speed[s], 1) +
               (s == 0 ? c->input_ms / speed[s] : 0);
    }
    double H = ppdl_layer_sched_ms(c, L - 1, 0, 1);
    ppdl_vocab_slices(t, speed, NULL, S, H, V, bounds);
    layout_plan(c, cut, bounds, S, p);
    int rc = ppdl_vocab_evaluate(c, cl, M, PPDL_SCHED_ZB_V, p, ev, err, errlen);
    if (rc == 0 && !ev->feasible) {
        /* a row costs its parameters' state, its logits per micro-batch in flight and
         * its share of a tied weight's gradient */
        int capped = 0;
        for (int s = 0; s < S; s++) {
            int j = 2 * S - 1 - s; /* rank s's slice stage */
            double row = (c->state_multiplier * h->param_bytes + ev->in_flight[j] * h->out_bytes + c->tied_bytes) /
                         (double)V;
            double over = ev->mem_bytes[s] + ev->mem_bytes[j] - cl->mem[s];
            long n = p->vocab[s].last - p->vocab[s].first + 1;
            cap[s] = over > 0 ? fmax(0, (double)n - ceil(over / row) - 1) : INFINITY;
            capped |= over > 0;
        }
        if (capped) {
            ppdl_cost_eval_free(ev);
            ppdl_plan_free(p);
            ppdl_vocab_slices(t, speed, cap, S, H, V, bounds);
            layout_plan(c, cut, bounds, S, p);
            rc = ppdl_vocab_evaluate(c, cl, M, PPDL_SCHED_ZB_V, p, ev, err, errlen);
        }
    }
    free(t);
    free(bounds);
    return rc;
}

/* the cut of layers 0..n-1 into S stages of least largest time on ranks 0..S-1 */
static void balanced_cut(const ppdl_costs *c, const ppdl_cluster_model *cl, int n, int S, int *cut)
{
    /* best[s][j]: the least largest time of layers 0..j on stages 0..s */
    double *best = ppdl_xmalloc((size_t)S * n * sizeof(double));
    int *arg = ppdl_xmalloc((size_t)S * n * sizeof(int));
    for (int s = 0; s < S; s++)
        for (int j = 0; j < n; j++) {
            best[s * n + j] = INFINITY;
            if (s == 0) {
                best[j] = ppdl_stage_time_split(c, 0, j, NULL, cl->speed[0], 1);
                continue;
            }
            for (int i = s; i <= j; i++) { /* stage s runs i..j */
                double v = fmax(best[(s - 1) * n + i - 1], ppdl_stage_time_split(c, i, j, NULL, cl->speed[s], 1));
                if (v < best[s * n + j]) {
                    best[s * n + j] = v;
                    arg[s * n + j] = i;
                }
            }
        }
    int j = n - 1;
    for (int s = S - 1; s >= 0; s--) {
        cut[s] = j;
        if (s) j = arg[s * n + j] - 1;
    }
    free(best);
    free(arg);
}

/* the next cut of n layers into S stages in lexicographic order; 0 after the last */
static int next_cut(int *cut, int S, int n)
{
    for (int s = S - 2; s >= 0; s--)
        if (cut[s] < n - 1 - (S - 1 - s)) {
            cut[s]++;
            for (int t = s + 1; t < S - 1; t++) cut[t] = cut[t - 1] + 1;
            return 1;
        }
    return 0;
}

/* the candidates the simulator chooses among: the VOCAB_KEEP fitting layouts of least T */
#define VOCAB_KEEP 12

typedef struct cand {
    ppdl_plan p;
    double T, over;
    int fits;
} cand;

/* keep q among the best (fitting first, then by T, else by how far over); takes q */
static void keep_cand(cand *k, int *n, ppdl_plan *q, const ppdl_cost_eval *ev)
{
    cand x = {*q, ev->T, ev->worst_over, ev->feasible};
    ppdl_cost_annotate(&x.p, ev);
    int at = *n;
    while (at > 0) {
        const cand *y = &k[at - 1];
        int better = x.fits != y->fits ? x.fits : x.fits ? x.T < y->T : x.over < y->over;
        if (!better) break;
        at--;
    }
    if (at >= VOCAB_KEEP) {
        ppdl_plan_free(&x.p);
        return;
    }
    if (*n == VOCAB_KEEP) ppdl_plan_free(&k[--*n].p);
    memmove(&k[at + 1], &k[at], (size_t)(*n - at) * sizeof *k);
    k[at] = x;
    ++*n;
}

int ppdl_vocab_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, ppdl_plan *p, char *err,
                    size_t errlen)
{
    memset(p, 0, sizeof *p);
    int S = cl->N, n = c->L - 1;
    if (c->vocab_size < 1)
        return ppdl_errf(err, errlen, "the costs have no \"vocab\" (the head's vocabulary; ppdl --costs-out writes "
                                      "it for a gpt)");
    if (S < 2 || n < S)
        return ppdl_errf(err, errlen, "vocabulary parallelism needs at least 2 ranks and a layer before the head for "
                                      "each (%d ranks, %d layers before the head)", S, n);
    int *cut = ppdl_xmalloc((size_t)S * sizeof(int));
    /* cuts: C(n-1, S-1) */
    double count = 1;
    for (int i = 1; i <= S - 1; i++) count = count * (n - S + i) / i;
    int all = count <= 4096;
    if (all)
        for (int s = 0; s < S; s++) cut[s] = s < S - 1 ? s : n - 1;
    else
        balanced_cut(c, cl, n, S, cut);
    cand k[VOCAB_KEEP];
    int nk = 0;
    char e2[PPDL_ERR_LEN] = "";
    do {
        ppdl_plan q;
        ppdl_cost_eval ev;
        if (layout_eval(c, cl, M, cut, &q, &ev, e2, sizeof e2)) {
            ppdl_plan_free(&q);
            continue;
        }
        keep_cand(k, &nk, &q, &ev);
        ppdl_cost_eval_free(&ev);
    } while (all && next_cut(cut, S, n));
    free(cut);
    if (nk == 0) return ppdl_errf(err, errlen, "no vocabulary-parallel layout could be evaluated: %s", e2);
    /* T sees each rank's work as one sum, not how it splits between the V's two arms,
     * which the play does see: among the best by T, the least simulated step */
    int best = 0;
    double best_ms = INFINITY;
    for (int i = 0; i < nk && k[i].fits == k[0].fits; i++) {
        double ms = ppdl_simulated_ms(c, cl, &k[i].p, M, PPDL_SCHED_ZB_V);
        if (ms < best_ms) {
            best_ms = ms;
            best = i;
        }
    }
    *p = k[best].p;
    int fits = k[best].fits;
    double over = k[best].over;
    for (int i = 0; i < nk; i++)
        if (i != best) ppdl_plan_free(&k[i].p);
    if (!fits) {
        char a[32];
        return ppdl_errf(err, errlen, "no vocabulary-parallel layout fits in memory (the closest is over by %s)",
                         ppdl_fmt_bytes((size_t)over, a, sizeof a));
    }
    return 0;
}
