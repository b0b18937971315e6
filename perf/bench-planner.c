/* bench-planner.c — the planner's speed and the quality of its plans, on generated
 * models and clusters (driven by perf/bench-planner; no MPI, no device).
 *
 * Models: a GPT-like chain (embedding, L-2 transformer blocks, head) with costs of the
 * shape ppdl's profiler measures: blocks ~1 ms forward, ~2 ms backward (3% noise, as
 * measured costs have), three recompute options (keep; full: the forward again, stash =
 * the input; selective: ~15% of the forward again, stash in between), a head with a
 * large logits stash.
 * Clusters: G nodes of R ranks, ranks numbered node by node (as Slurm's block
 * distribution does); links inside a node 100-300 GB/s, between nodes 10-100x slower,
 * 5% measurement noise per entry; heterogeneous: some ranks are older devices (half
 * the speed, half the memory); memory tight: around what an even split needs without
 * recompute, so some stages must recompute. Homogeneous: equal devices, one bandwidth,
 * ample memory.
 *
 *   bench-planner-bin speed [L N M]     planner time for one case (default 200 64 128)
 *   bench-planner-bin exact [N L M]     exact placement time (default 10 64 32)
 *   bench-planner-bin quality [CASES [1]] ppdl vs every baseline on generated clusters
 *                                       (1: print every case, not the first dozen); each
 *                                       heterogeneous case under 1.3x is listed with
 *                                       whether ppdl's plan is proven optimal (exact
 *                                       placement and layout search: solver info.exact)
 *   bench-planner-bin heuristic [CASES] heuristic placement vs exact on N = 6..10
 *   bench-planner-bin schedule [CASES [ALL [MEM%]]] --schedule auto against the best
 *                                       1F1B plan on the quality command's heterogeneous
 *                                       clusters (the same seed; memory MEM% of theirs,
 *                                       default 100): T of each, their ratio, the schedule
 *                                       chosen, and the simulated steps' ratio
 *   bench-planner-bin speed-auto [L N M] --schedule auto's planner time (one solve per
 *                                       schedule; default 200 64 128)
 *   bench-planner-bin scale L N M       the default method on a cluster-scale case: L
 *                                       layers of forward 1-5 ms, backward 2-10 ms, 1-8
 *                                       MiB of parameters and of output, 8-64 MiB of
 *                                       stash and one recompute option; N ranks in
 *                                       nodes of 8 (40 GB/s inside, 2.5 GB/s between),
 *                                       8 GiB each, equal speeds (default 200 64 32)
 *   bench-planner-bin write L G R M DIR write costs.json and cluster.json of one case
 * Each prints a table and "result KEY VALUE" lines.
 */
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/baselines.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/planner.h"
#include "plan/schedule_choice.h"
#include "plan/simulate.h"
#include "plan/solver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* this process's CPU seconds: the machine is shared, so wall time alone overstates */
static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static double uni(ppdl_rng *g, double a, double b) { return a + (b - a) * ppdl_rng_uniform(g); }

/* a GPT-like chain of L layers (micro-batch 4 x 512 tokens, width 768, 12 heads) */
static void gen_model(ppdl_rng *g, int L, ppdl_costs *c)
{
    ppdl_costs_alloc(c, L);
    c->micro_batch_size = 4;
    double act = 4.0 * 512 * 768 * 4; /* one activation [b, T, C] in bytes */
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        double noise = uni(g, 0.97, 1.03);
        if (l == 0) {
            snprintf(lc->name, sizeof lc->name, "embedding");
            lc->fwd_ms = 0.05 * noise;
            lc->bwd_ms = 0.2 * noise;
            lc->param_bytes = 4.0 * (50257 + 1024) * 768;
            lc->out_bytes = act;
            lc->n_opts = 2;
            lc->stash_bytes[0] = lc->stash_bytes[1] = 4.0 * 512 * 4;
            lc->extra_ms[1] = lc->fwd_ms;
        } else if (l == L - 1) {
            snprintf(lc->name, sizeof lc->name, "head");
            lc->fwd_ms = 2.2 * noise;
            lc->bwd_ms = 4.4 * noise;
            lc->param_bytes = 4.0 * 50257 * 768;
            lc->out_bytes = 4.0 * 4 * 512 * 50257;
            lc->n_opts = 2;
            lc->stash_bytes[0] = act + act + lc->out_bytes; /* input, layernorm out, logits */
            lc->stash_bytes[1] = act + lc->out_bytes;
            lc->extra_ms[1] = lc->fwd_ms;
        } else {
            snprintf(lc->name, sizeof lc->name, "block%d", l - 1);
            lc->fwd_ms = 1.0 * noise;
            lc->bwd_ms = 2.0 * noise;
            lc->param_bytes = 4.0 * 12 * 768 * 768;
            lc->out_bytes = act;
            lc->n_opts = 3;
            double att = 4.0 * 4 * 12 * 512 * 512;
            lc->stash_bytes[0] = act + 15 * act + att; /* input + saved (7NC, 8NC, attention) */
            lc->stash_bytes[1] = act;
            lc->extra_ms[1] = lc->fwd_ms;
            lc->stash_bytes[2] = act + 7 * act;
            lc->extra_ms[2] = 0.15 * lc->fwd_ms * uni(g, 0.95, 1.05);
        }
        for (int o = 0; o < lc->n_opts; o++) lc->stash_bytes[o] = floor(lc->stash_bytes[o]);
        lc->param_bytes = floor(lc->param_bytes);
        lc->out_bytes = floor(lc->out_bytes);
    }
}

/* G nodes x R ranks. hetero: slower ranks, 10-100x slower links between nodes, tight
 * memory. Returns the inter-node slowdown used. */
static double gen_cluster(ppdl_rng *g, const ppdl_costs *c, int G, int R, int M, int sched, int hetero,
                          ppdl_cluster_model *cl)
{
    int N = G * R;
    ppdl_cluster_model_alloc(cl, N);
    double intra = uni(g, 1e11, 3e11), ratio = hetero ? exp(uni(g, log(10), log(100))) : 1;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            int same = a / R == b / R;
            double noise = hetero ? uni(g, 0.95, 1.05) : 1;
            cl->bw[a * N + b] = (same ? intra : intra / ratio) * noise;
            cl->lat[a * N + b] = a == b ? 0 : same ? 3e-6 : 2e-5;
        }
    /* memory: what an even split needs with no recompute, at the first stage's count */
    double P = 0, S0 = 0;
    for (int l = 0; l < c->L; l++) {
        P += c->layers[l].param_bytes;
        S0 += c->layers[l].stash_bytes[0];
    }
    int n0 = sched == PPDL_SCHED_GPIPE ? M : (M < N ? M : N);
    double even = c->state_multiplier * P / N + n0 * S0 / N;
    for (int r = 0; r < N; r++) {
        int old = hetero && ppdl_rng_uniform(g) < 0.2;
        cl->speed[r] = old ? 0.5 : hetero ? uni(g, 0.97, 1.03) : 1;
        cl->mem[r] = floor((hetero ? uni(g, 0.6, 1.0) : 4.0) * even * (old ? 0.5 : 1));
    }
    return ratio;
}

static double plan_T(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int sched, const char *method,
                     int *fits)
{
    ppdl_plan p;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_choose_plan(c, cl, M, sched, method, NULL, &p, NULL, NULL, 1, NULL, NULL, NULL, err, sizeof err);
    double T = p.S ? p.predicted_iter_ms : INFINITY;
    *fits = rc == 0;
    if (p.S) ppdl_plan_free(&p);
    return T;
}

/* the speed case: L generated layers on N ranks in nodes of up to 8 (one node where N
 * does not divide), heterogeneous, seed 1; *G and *R the nodes and ranks per node */
static void speed_case(int L, int N, int M, ppdl_costs *c, ppdl_cluster_model *cl, int *G, int *R)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 1);
    gen_model(&g, L, c);
    *R = N >= 8 ? 8 : N;
    *G = N / *R;
    if (*G * *R != N) *G = 1, *R = N;
    gen_cluster(&g, c, *G, *R, M, PPDL_SCHED_1F1B, 1, cl);
}

static int cmd_speed(int L, int N, int M)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    int G, R;
    speed_case(L, N, M, &c, &cl, &G, &R);
    printf("planner speed: L = %d layers, N = %d ranks (%d nodes x %d), M = %d, 1f1b, heterogeneous\n", L, N, G, R, M);
    printf("  method         wall s   CPU s   T ms      orders solved  DP passes  frontier points  layouts  placement\n");
    const char *methods[] = {"ppdl", "ppdl-pipeline", "ppdl-inorder", "time-rc"};
    for (int k = 0; k < 4; k++) {
        double t0 = ppdl_now_s(), c0 = cpu_s();
        ppdl_plan p;
        ppdl_solve_info info;
        memset(&info, 0, sizeof info);
        char err[PPDL_ERR_LEN];
        int rc;
        if (k < 3) {
            ppdl_solve_opts o;
            ppdl_solve_opts_default(&o);
            o.placement = k < 2;
            o.replicate = k == 0;
            if (getenv("BENCH_LS_EVALS")) o.local_search_evals = atol(getenv("BENCH_LS_EVALS"));
            if (getenv("BENCH_HYBRID_EVALS")) o.hybrid_evals = atol(getenv("BENCH_HYBRID_EVALS"));
            rc = ppdl_solve(&c, &cl, M, PPDL_SCHED_1F1B, &o, &p, &info, err, sizeof err);
        } else {
            rc = ppdl_choose_plan(&c, &cl, M, PPDL_SCHED_1F1B, methods[k], NULL, &p, NULL, NULL, 1, NULL, NULL, NULL, err, sizeof err);
        }
        double dt = ppdl_now_s() - t0, dc = cpu_s() - c0;
        printf("  %-13s %7.3f %7.3f  %9.2f  %13ld  %9ld  %15ld  %7ld  %s%s%s%s\n", methods[k], dt, dc,
               p.S ? p.predicted_iter_ms : NAN, info.orders_solved, info.dp_runs, info.frontier_points,
               info.layouts_solved, k < 3 ? info.placement : "-", k == 0 ? "; " : "", k == 0 ? info.hybrid : "",
               rc ? " (does not fit)" : "");
        printf("result planner_seconds_%s_L%d_N%d_M%d %.4f\nresult planner_cpu_seconds_%s_L%d_N%d_M%d %.4f\n",
               methods[k], L, N, M, dt, methods[k], L, N, M, dc);
        if (p.S) ppdl_plan_free(&p);
    }
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return 0;
}

static int cmd_exact(int N, int L, int M)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 2);
    ppdl_costs c;
    ppdl_cluster_model cl;
    gen_model(&g, L, &c);
    int G = N % 2 == 0 ? 2 : 1, R = N / G;
    gen_cluster(&g, &c, G, R, M, PPDL_SCHED_1F1B, 1, &cl);
    /* make every rank distinct (no interchangeable ranks to exploit): the worst case */
    for (int r = 0; r < N; r++) cl.speed[r] *= 1 + 1e-3 * r;
    double t0 = ppdl_now_s(), c0 = cpu_s();
    ppdl_plan p;
    ppdl_solve_info info;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_solve(&c, &cl, M, PPDL_SCHED_1F1B, NULL, &p, &info, err, sizeof err);
    double dt = ppdl_now_s() - t0, dc = cpu_s() - c0;
    printf("exact placement: N = %d distinct ranks (%d nodes), L = %d, M = %d: %.3f s wall, %.3f s CPU, T = %.3f ms, "
           "%s, %ld solves (orders and subset-DP passes)%s\n", N, G, L, M, dt, dc, p.S ? p.predicted_iter_ms : NAN, info.placement,
           info.orders_solved, rc ? " (does not fit)" : "");
    printf("result exact_placement_seconds_N%d_L%d %.4f\nresult exact_placement_cpu_seconds_N%d_L%d %.4f\n", N, L, dt,
           N, L, dc);
    if (p.S) ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return 0;
}

/* the next case of the quality series: 2-8 nodes of 2-8 ranks, a GPT-like model of
 * 2N+2..4N+2 layers, M = 2N; returns the inter-node slowdown */
static double quality_case(ppdl_rng *g, int hetero, ppdl_costs *c, ppdl_cluster_model *cl, int *G, int *R, int *L,
                           int *M)
{
    *G = 2 + (int)(ppdl_rng_u64(g) % 7);
    *R = 2 + (int)(ppdl_rng_u64(g) % 7);
    int N = *G * *R;
    *L = 2 * N + 2 + (int)(ppdl_rng_u64(g) % (uint64_t)(2 * N + 1));
    *M = 2 * N;
    gen_model(g, *L, c);
    return gen_cluster(g, c, *G, *R, *M, PPDL_SCHED_1F1B, hetero, cl);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* a case whose best baseline / ppdl ratio is under the 1.3x goal */
typedef struct {
    int k, G, R, L, M, best, exact;
    double ratio;
} low_case;

static int cmd_quality(int cases, int all)
{
    static const char *bl[] = {"dp",   "dp-rc",   "uniform",   "uniform-rc",   "params", "params-rc",
                               "time", "time-rc", "pipedream", "pipedream-rc"};
    enum { NB = 10 };
    for (int hetero = 1; hetero >= 0; hetero--) {
        ppdl_rng g;
        ppdl_rng_seed(&g, 100 + hetero);
        printf("\n%s clusters (%d cases; 2-8 nodes of 2-8 ranks, GPT-like model of 2N+2..4N+2 layers, "
               "M = 2N, 1f1b):\n", hetero ? "heterogeneous" : "homogeneous", cases);
        printf("  case  nodes x ranks  layers  inter-node  ppdl ms   best baseline      ratio  (T ms of each "
               "baseline; - = does not fit)\n");
        double *ratio = ppdl_xmalloc((size_t)cases * sizeof(double));
        low_case *low = ppdl_xmalloc((size_t)cases * sizeof *low);
        int n_ratio = 0, none_fit = 0, ppdl_fail = 0, n_low = 0, n_low_exact = 0;
        int wins[NB] = {0}, n_rep = 0, n_pipe = 0;
        double plan_s = 0, geo_pipe = 0;
        for (int k = 0; k < cases; k++) {
            int G, R, L, M;
            ppdl_costs c;
            ppdl_cluster_model cl;
            double slow = quality_case(&g, hetero, &c, &cl, &G, &R, &L, &M);
            /* ppdl ("ppdl" of ppdl_choose_plan, with the solver's info: was the search exact?) */
            ppdl_plan pp;
            ppdl_solve_info pinfo;
            char perr[PPDL_ERR_LEN];
            double t0 = ppdl_now_s();
            int fits = ppdl_solve(&c, &cl, M, PPDL_SCHED_1F1B, NULL, &pp, &pinfo, perr, sizeof perr) == 0;
            plan_s += ppdl_now_s() - t0;
            double Tp = pp.S ? pp.predicted_iter_ms : INFINITY;
            if (pp.S) ppdl_plan_free(&pp);
            if (!fits) ppdl_fail++;
            /* what replication adds: the best one-rank-per-stage plan */
            int fp;
            double Tpipe = plan_T(&c, &cl, M, PPDL_SCHED_1F1B, "ppdl-pipeline", &fp);
            if (fits && fp) {
                geo_pipe += log(Tpipe / Tp);
                n_pipe++;
                n_rep += Tpipe > Tp * (1 + 1e-9);
            }
            double best = INFINITY, Tb[NB];
            int bi = -1;
            for (int b = 0; b < NB; b++) {
                int f;
                Tb[b] = plan_T(&c, &cl, M, PPDL_SCHED_1F1B, bl[b], &f);
                if (!f) Tb[b] = INFINITY;
                if (Tb[b] < best) best = Tb[b], bi = b;
            }
            if (bi >= 0) wins[bi]++;
            char line[512], rs[16] = "-";
            if (bi >= 0 && fits) {
                ratio[n_ratio++] = best / Tp;
                snprintf(rs, sizeof rs, "%.2fx", best / Tp);
                if (best / Tp < 1.3) {
                    low[n_low++] = (low_case){k, G, R, L, M, bi, pinfo.exact, best / Tp};
                    n_low_exact += pinfo.exact != 0;
                }
            } else if (bi < 0) {
                none_fit++;
            }
            int n = snprintf(line, sizeof line, "  %4d  %5d x %-5d  %6d  %9.0fx  %8.2f  %-12s %6s", k, G, R, L, slow, Tp,
                             bi >= 0 ? bl[bi] : "none fits", rs);
            for (int b = 0; b < NB && n < (int)sizeof line - 12; b++)
                n += snprintf(line + n, sizeof line - n, Tb[b] < INFINITY ? " %.1f" : " -", Tb[b]);
            if (all || k < 12 || k == cases - 1) printf("%s\n", line);
            else if (k == 12) printf("  ...\n");
            ppdl_costs_free(&c);
            ppdl_cluster_model_free(&cl);
        }
        qsort(ratio, (size_t)n_ratio, sizeof *ratio, cmp_d);
        double geo = 0;
        int ge13 = 0;
        for (int k = 0; k < n_ratio; k++) {
            geo += log(ratio[k]);
            ge13 += ratio[k] >= 1.3;
        }
        geo = n_ratio ? exp(geo / n_ratio) : NAN;
        const char *tag = hetero ? "hetero" : "homo";
        printf("  best baseline / ppdl over %d cases where both fit: geometric mean %.3fx, min %.3fx, median %.3fx, "
               "max %.3fx; >= 1.3x in %d; no baseline fits in %d; ppdl finds nothing in %d; mean planner time %.3f s\n",
               n_ratio, geo, n_ratio ? ratio[0] : NAN, n_ratio ? ratio[n_ratio / 2] : NAN,
               n_ratio ? ratio[n_ratio - 1] : NAN, ge13, none_fit, ppdl_fail, plan_s / cases);
        printf("  ppdl-pipeline (one rank per stage) / ppdl: geometric mean %.3fx; replication chosen in %d of %d\n",
               n_pipe ? exp(geo_pipe / n_pipe) : NAN, n_rep, n_pipe);
        printf("result quality_%s_pipeline_over_ppdl_geomean %.4f\n", tag, n_pipe ? exp(geo_pipe / n_pipe) : NAN);
        printf("  best baseline was:");
        for (int b = 0; b < NB; b++)
            if (wins[b]) printf(" %s %d", bl[b], wins[b]);
        printf("\n");
        printf("result quality_%s_geomean %.4f\nresult quality_%s_min %.4f\nresult quality_%s_cases_ge_1.3 %d/%d\n",
               tag, geo, tag, n_ratio ? ratio[0] : NAN, tag, ge13, n_ratio);
        printf("result quality_%s_no_baseline_fits %d/%d\n", tag, none_fit, cases);
        /* the cases under the goal, and whether any planner could do better there: where
         * ppdl's search was exact its plan is optimal in the cost model, so the ratio is
         * the most any plan of one rank per stage or of replicated stages can reach */
        if (hetero) {
            printf("  under 1.3x: %d of %d cases; ppdl's plan proven optimal (exact placement and layout search) in "
                   "%d of them%s\n", n_low, n_ratio, n_low_exact, n_low ? ":" : "");
            for (int q = 0; q < n_low; q++)
                printf("    case %d: %d x %d ranks, L = %d, M = %d: best baseline %s, %.3fx: %s\n", low[q].k, low[q].G,
                       low[q].R, low[q].L, low[q].M, bl[low[q].best], low[q].ratio,
                       low[q].exact ? "ppdl optimal (exact search)" : "not proven optimal");
        } else {
            printf("  under 1.3x (the goal here is equal): %d of %d cases; ppdl's plan proven optimal in %d of them\n",
                   n_low, n_ratio, n_low_exact);
        }
        printf("result quality_%s_cases_below_1.3 %d/%d\nresult quality_%s_below_1.3_proven_optimal %d/%d\n", tag,
               n_low, n_ratio, tag, n_low_exact, n_low);
        free(low);
        free(ratio);
    }
    return 0;
}

/* The heuristic search against the exact one over generated instances: how often it
 * finds the optimum, its worst and mean ratio of T, and both searches' mean time. */
typedef struct {
    int n, equal;
    double worst, geo, t_exact, t_heur;
} vs_stats;

static void vs_one(vs_stats *st, const ppdl_costs *c, const ppdl_cluster_model *cl, int M,
                   const ppdl_solve_opts *exact, const ppdl_solve_opts *heur)
{
    ppdl_plan pe, ph;
    char err[PPDL_ERR_LEN];
    double t0 = ppdl_now_s();
    int re = ppdl_solve(c, cl, M, PPDL_SCHED_1F1B, exact, &pe, NULL, err, sizeof err);
    double t1 = ppdl_now_s();
    int rh = ppdl_solve(c, cl, M, PPDL_SCHED_1F1B, heur, &ph, NULL, err, sizeof err);
    double t2 = ppdl_now_s();
    if (re == 0 && rh == 0) {
        double r = ph.predicted_iter_ms / pe.predicted_iter_ms;
        st->n++;
        st->equal += r <= 1 + 1e-9;
        if (r > st->worst) st->worst = r;
        st->geo += log(r);
        st->t_exact += t1 - t0;
        st->t_heur += t2 - t1;
    }
    if (pe.S) ppdl_plan_free(&pe);
    if (ph.S) ppdl_plan_free(&ph);
}

/* what: "heuristic" / "heuristic layouts"; exact_name: how the exact search is called;
 * key: the result lines' prefix */
static void vs_print(const vs_stats *st, const char *what, const char *exact_name, const char *key)
{
    int n = st->n ? st->n : 1;
    printf("  %d cases: %s optimal in %d, worst %.3fx the optimum, geometric mean %.4fx; mean time %s %.3f s, "
           "heuristic %.3f s\n", st->n, what, st->equal, st->worst, exp(st->geo / n), exact_name, st->t_exact / n,
           st->t_heur / n);
    printf("result %s_optimal %d/%d\nresult %s_worst_ratio %.4f\n", key, st->equal, st->n, key, st->worst);
}

static int cmd_heuristic(int cases)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 7);
    printf("heuristic placement vs exact (one rank per stage; the same instance, N = 6..10, heterogeneous, 1f1b, "
           "M = 2N):\n");
    vs_stats st = {0, 0, 1, 0, 0, 0};
    for (int k = 0; k < cases; k++) {
        int N = 6 + k % 5, G = N % 2 == 0 ? 2 : 1;
        if (N == 9) G = 3;
        int R = N / G, L = 3 * N + (int)(ppdl_rng_u64(&g) % (uint64_t)N), M = 2 * N;
        ppdl_costs c;
        ppdl_cluster_model cl;
        gen_model(&g, L, &c);
        gen_cluster(&g, &c, G, R, M, PPDL_SCHED_1F1B, 1, &cl);
        ppdl_solve_opts exact, heur;
        ppdl_solve_opts_default(&exact);
        exact.replicate = 0;
        heur = exact;
        heur.exact_max_ranks = 0;
        vs_one(&st, &c, &cl, M, &exact, &heur);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    vs_print(&st, "heuristic", "exact", "heuristic");
    /* replica layouts: every layout (N = 6) against the candidates and local moves */
    printf("heuristic replica layouts vs every layout (N = 6: 2 nodes x 3 or 3 x 2, heterogeneous, 1f1b, M = 2N):\n");
    vs_stats sl = {0, 0, 1, 0, 0, 0};
    for (int k = 0; k < cases; k++) {
        int N = 6, G = k % 2 ? 2 : 3, R = N / G, L = 3 * N + (int)(ppdl_rng_u64(&g) % (uint64_t)N), M = 2 * N;
        ppdl_costs c;
        ppdl_cluster_model cl;
        gen_model(&g, L, &c);
        gen_cluster(&g, &c, G, R, M, PPDL_SCHED_1F1B, 1, &cl);
        ppdl_solve_opts exact, heur;
        ppdl_solve_opts_default(&exact);
        heur = exact;
        heur.exact_hybrid_ranks = 0;
        vs_one(&sl, &c, &cl, M, &exact, &heur);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    vs_print(&sl, "heuristic layouts", "every layout", "heuristic_layouts");
    return 0;
}

/* --schedule auto (one exact solve per schedule, the least T) against ppdl's best 1F1B
 * plan, on the heterogeneous clusters of cmd_quality (same generator, same seed) */
/* the same cluster with its ranks numbered cyclically over the G nodes (srun
 * --distribution=cyclic): new rank q is old rank (q mod G) R + q / G */
static void number_cyclically(ppdl_cluster_model *cl, int G, int R)
{
    int N = cl->N;
    ppdl_cluster_model o;
    ppdl_cluster_model_alloc(&o, N);
    memcpy(o.bw, cl->bw, (size_t)N * N * sizeof(double));
    memcpy(o.lat, cl->lat, (size_t)N * N * sizeof(double));
    memcpy(o.mem, cl->mem, (size_t)N * sizeof(double));
    memcpy(o.speed, cl->speed, (size_t)N * sizeof(double));
    for (int a = 0; a < N; a++) {
        int oa = (a % G) * R + a / G;
        cl->mem[a] = o.mem[oa];
        cl->speed[a] = o.speed[oa];
        for (int b = 0; b < N; b++) {
            int ob = (b % G) * R + b / G;
            cl->bw[a * N + b] = o.bw[oa * N + ob];
            cl->lat[a * N + b] = o.lat[oa * N + ob];
        }
    }
    ppdl_cluster_model_free(&o);
}

static int cmd_schedule(int cases, int all, int mem_pct, int m_per_rank, int cyclic)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 101); /* cmd_quality's heterogeneous series */
    printf("\n--schedule auto vs the best 1f1b plan, heterogeneous clusters (%d cases, as quality's; memory %d%% of "
           "theirs; M = %d x ranks%s):\n", cases, mem_pct, m_per_rank > 0 ? m_per_rank : 2,
           cyclic ? "; ranks numbered cyclically over the nodes" : "");
    printf("  case  nodes x ranks  layers    M ");
    char name[32];
    for (int q = 0; q < PPDL_AUTO_N; q++) printf(" %8s", ppdl_auto_name(q, name, sizeof name) + (q >= 4 && q < 7 ? 9 : 0));
    printf("  chosen   T ratio  sim ratio   (ms; v=2..4: interleaved)\n");
    double geo = 0, geo_sim = 0, plan_s = 0, worst = INFINITY, best = 0;
    double geo1 = 0, geo_sim1 = 0; /* the same against the best of one stage per rank (the four) */
    int n = 0, n_sim = 0, chosen[PPDL_AUTO_N] = {0}, none = 0;
    for (int k = 0; k < cases; k++) {
        int G, R, L, M;
        ppdl_costs c;
        ppdl_cluster_model cl;
        quality_case(&g, 1, &c, &cl, &G, &R, &L, &M);
        for (int r = 0; r < cl.N; r++) cl.mem[r] = floor(cl.mem[r] * mem_pct / 100.0);
        if (m_per_rank > 0) M = m_per_rank * cl.N; /* (the clusters as generated for 2N) */
        if (cyclic) number_cyclically(&cl, G, R);
        ppdl_schedule_choice ch;
        char err[PPDL_ERR_LEN];
        double t0 = ppdl_now_s();
        int rc = ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &ch, err, sizeof err);
        plan_s += ppdl_now_s() - t0;
        const ppdl_schedule_option *one = &ch.opt[0]; /* 1f1b: the first candidate */
        char line[512];
        int len = snprintf(line, sizeof line, "  %4d  %5d x %-5d  %6d  %3d", k, G, R, L, M);
        for (int q = 0; q < PPDL_AUTO_N; q++) {
            if (ch.opt[q].rc == 0) len += snprintf(line + len, sizeof line - (size_t)len, "  %8.2f", ch.opt[q].T);
            else len += snprintf(line + len, sizeof line - (size_t)len, "  %8s", "-");
        }
        if (rc == 0 && one->rc == 0) {
            const ppdl_schedule_option *w = &ch.opt[ch.chosen];
            double r = one->T / w->T;
            double s1 = ppdl_simulated_ms(&c, &cl, &one->plan, M, one->schedule);
            double sw = ppdl_simulated_ms(&c, &cl, &w->plan, M, w->schedule);
            geo += log(r);
            n++;
            worst = fmin(worst, r);
            best = fmax(best, r);
            chosen[ch.chosen]++;
            /* the best of the four that hold one stage per rank (auto before chunked plans) */
            int b1 = 0;
            for (int q = 1; q < PPDL_AUTO_ONE; q++)
                if (ch.opt[q].rc == 0 && ch.opt[q].T < ch.opt[b1].T * (1 - 1e-9)) b1 = q;
            double sb1 = ppdl_simulated_ms(&c, &cl, &ch.opt[b1].plan, M, ch.opt[b1].schedule);
            geo1 += log(ch.opt[b1].T / w->T);
            if (isfinite(s1) && isfinite(sw)) {
                geo_sim += log(s1 / sw);
                geo_sim1 += log(sb1 / sw);
                n_sim++;
            }
            snprintf(line + len, sizeof line - (size_t)len, "  %-8s  %6.3fx  %7.3fx", ppdl_auto_name(ch.chosen, name, sizeof name), r,
                     s1 / sw);
        } else {
            none++;
            snprintf(line + len, sizeof line - (size_t)len, "  %s", rc == 0 ? "(no 1f1b plan fits)" : "(none fits)");
        }
        if (all || k < 12 || k == cases - 1) printf("%s\n", line);
        else if (k == 12) printf("  ...\n");
        ppdl_schedule_choice_free(&ch);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    printf("  best 1f1b T / --schedule auto T over %d cases: geometric mean %.3fx (goal >= 1.1x), min %.3fx, max "
           "%.3fx; simulated steps' ratio: geometric mean %.3fx over %d; mean planner time (%d candidates) %.3f s; no "
           "plan in %d\n", n, n ? exp(geo / n) : NAN, worst, best, n_sim ? exp(geo_sim / n_sim) : NAN, n_sim,
           PPDL_AUTO_N, plan_s / cases, none);
    printf("  the best plan of one stage per rank (1f1b, zb-1p, zb-h1, zb-h2) / auto: T %.3fx, simulated %.3fx "
           "(geometric means: what the chunked candidates add)\n  chosen:", n ? exp(geo1 / n) : NAN,
           n_sim ? exp(geo_sim1 / n_sim) : NAN);
    int n_zb = 0, n_chunked = 0;
    for (int q = 0; q < PPDL_AUTO_N; q++) {
        printf(" %s %d%s", ppdl_auto_name(q, name, sizeof name), chosen[q], q + 1 < PPDL_AUTO_N ? "," : "\n");
        n_zb += q > 0 && q < PPDL_AUTO_ONE ? chosen[q] : 0;
        n_chunked += q >= PPDL_AUTO_ONE ? chosen[q] : 0;
    }
    if (m_per_rank > 0) mem_pct = mem_pct * 100 + m_per_rank; /* the result keys: memory and M/N apart */
    if (cyclic) mem_pct = mem_pct * 10 + 9;
    printf("result schedule_auto_hetero_mem%d_geomean %.4f\nresult schedule_auto_hetero_mem%d_sim_geomean %.4f\n"
           "result schedule_auto_hetero_mem%d_min %.4f\nresult schedule_auto_hetero_mem%d_zb_chosen %d/%d\n"
           "result schedule_auto_hetero_mem%d_chunked_chosen %d/%d\n", mem_pct,
           n ? exp(geo / n) : NAN, mem_pct, n_sim ? exp(geo_sim / n_sim) : NAN, mem_pct, n ? worst : NAN, mem_pct,
           n_zb, n, mem_pct, n_chunked, n);
    return 0;
}

/* --schedule auto's planner time on one case of cmd_speed */
static int cmd_speed_auto(int L, int N, int M)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    int G, R;
    speed_case(L, N, M, &c, &cl, &G, &R);
    ppdl_schedule_choice ch;
    char err[PPDL_ERR_LEN];
    double t0 = ppdl_now_s(), c0 = cpu_s();
    int rc = ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &ch, err, sizeof err);
    double dt = ppdl_now_s() - t0, dc = cpu_s() - c0;
    char name[32];
    printf("planner speed, --schedule auto: L = %d, N = %d (%d nodes x %d), M = %d: %.3f s wall, %.3f s CPU; chosen %s\n",
           L, N, G, R, M, dt, dc, rc == 0 ? ppdl_auto_name(ch.chosen, name, sizeof name) : "none");
    for (int q = 0; q < PPDL_AUTO_N; q++)
        printf("  %-15s %.3f s, T %.2f ms%s\n", ppdl_auto_name(q, name, sizeof name), ch.opt[q].plan_s, ch.opt[q].T,
               ch.opt[q].rc == 0 ? "" : ch.opt[q].plan.S ? " (does not fit)" : " (no plan)");
    printf("result planner_seconds_auto_L%d_N%d_M%d %.4f\nresult planner_cpu_seconds_auto_L%d_N%d_M%d %.4f\n", L, N, M,
           dt, L, N, M, dc);
    ppdl_schedule_choice_free(&ch);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return 0;
}

/* the scale case (the usage above), seed 4 */
static void scale_case(int L, int N, ppdl_costs *c, ppdl_cluster_model *cl)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 4);
    ppdl_costs_alloc(c, L);
    c->micro_batch_size = 1;
    const double MiB = 1024.0 * 1024;
    double in = floor(uni(&g, 1, 8) * MiB); /* the first layer's input */
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "layer%d", l);
        lc->fwd_ms = uni(&g, 1, 5);
        lc->bwd_ms = 2 * lc->fwd_ms * uni(&g, 0.9, 1.1);
        lc->param_bytes = floor(uni(&g, 1, 8) * MiB);
        lc->out_bytes = floor(uni(&g, 1, 8) * MiB);
        lc->n_opts = 2;
        lc->stash_bytes[0] = floor(uni(&g, 8, 64) * MiB);
        lc->stash_bytes[1] = in; /* full recompute: keep the input, run the forward again */
        lc->extra_ms[1] = lc->fwd_ms;
        in = lc->out_bytes;
    }
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->speed[a] = 1;
        cl->mem[a] = 8.0 * 1024 * MiB;
        for (int b = 0; b < N; b++) {
            int same = a / 8 == b / 8;
            cl->bw[(size_t)a * N + b] = same ? 40e9 : 2.5e9;
            cl->lat[(size_t)a * N + b] = a == b ? 0 : same ? 3e-6 : 2e-5;
        }
    }
}

/* this process's peak resident memory in MB */
static double peak_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int cmd_scale(int L, int N, int M)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    scale_case(L, N, &c, &cl);
    double m0 = peak_mb(), t0 = ppdl_now_s(), c0 = cpu_s();
    ppdl_plan p;
    ppdl_solve_info info;
    memset(&info, 0, sizeof info);
    char err[PPDL_ERR_LEN], kind[96] = "";
    int rc = ppdl_solve(&c, &cl, M, PPDL_SCHED_1F1B, NULL, &p, &info, err, sizeof err);
    double dt = ppdl_now_s() - t0, dc = cpu_s() - c0, dm = peak_mb() - m0;
    if (p.S) ppdl_plan_kind(&p, kind, sizeof kind);
    char why[160];
    double lb = ppdl_lower_bound_ms(&c, &cl, M, PPDL_SCHED_1F1B, why, sizeof why);
    printf("planner at scale: L = %d layers, N = %d ranks (nodes of 8), M = %d, 1f1b, the default method: %.3f s wall, "
           "%.3f s CPU, peak memory +%.0f MB; T = %.2f ms, %s%s%s\n  lower bound %.2f ms (%s): T is %.1f%% above it\n"
           "  placement: %s; layouts: %s (%ld solved)\n", L, N, M, dt, dc, dm, p.S ? p.predicted_iter_ms : NAN, kind,
           rc ? ": " : "", rc ? err : "", lb, why, 100 * (p.predicted_iter_ms / lb - 1), info.placement, info.hybrid,
           info.layouts_solved);
    printf("result scale_seconds_L%d_N%d_M%d %.4f\nresult scale_peak_mb_L%d_N%d_M%d %.1f\nresult scale_T_ms_L%d_N%d_M%d %.4f\n"
           "result scale_lower_bound_ms_L%d_N%d_M%d %.4f\n", L, N, M, dt, L, N, M, dm, L, N, M,
           rc ? NAN : p.predicted_iter_ms, L, N, M, lb);
    if (p.S) ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return 0;
}

static int cmd_write(int L, int G, int R, int M, const char *dir)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 3);
    ppdl_costs c;
    ppdl_cluster_model cl;
    gen_model(&g, L, &c);
    gen_cluster(&g, &c, G, R, M, PPDL_SCHED_1F1B, 1, &cl);
    char path[4096], err[PPDL_ERR_LEN];
    snprintf(path, sizeof path, "%s/costs.json", dir);
    int rc = ppdl_costs_write(path, &c, err, sizeof err);
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    if (!rc) rc = ppdl_cluster_model_write(path, &cl, err, sizeof err);
    if (rc) fprintf(stderr, "bench-planner: %s\n", err);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0, c = argc > 4 ? atoi(argv[4]) : 0;
    if (!strcmp(cmd, "speed")) return cmd_speed(a ? a : 200, b ? b : 64, c ? c : 128);
    if (!strcmp(cmd, "exact")) return cmd_exact(a ? a : 10, b ? b : 64, c ? c : 32);
    if (!strcmp(cmd, "quality")) return cmd_quality(a ? a : 60, b);
    if (!strcmp(cmd, "heuristic")) return cmd_heuristic(a ? a : 20);
    if (!strcmp(cmd, "schedule"))
        return cmd_schedule(a ? a : 60, b, c ? c : 100, argc > 5 ? atoi(argv[5]) : 0, argc > 6 && atoi(argv[6]));
    if (!strcmp(cmd, "speed-auto")) return cmd_speed_auto(a ? a : 200, b ? b : 64, c ? c : 128);
    if (!strcmp(cmd, "scale")) return cmd_scale(a ? a : 200, b ? b : 64, c ? c : 32);
    if (!strcmp(cmd, "write") && argc == 7) return cmd_write(a, b, c, atoi(argv[5]), argv[6]);
    fprintf(stderr, "usage: bench-planner-bin speed [L N M] | exact [N L M] | quality [CASES [1]] | heuristic [CASES] | "
                    "schedule [CASES [ALL [MEM%% [M/N [CYCLIC]]]]] | speed-auto [L N M] | scale [L N M] | write L G R M DIR\n");
    return 2;
}
