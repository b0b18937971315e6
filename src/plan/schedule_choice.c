/* schedule_choice.c — one solve per candidate schedule, then the least T
 * (schedule_choice.h). */
#include "plan/schedule_choice.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/solve_chunked.h"
#include "plan/costmodel.h"
#include "plan/chooser.h"
#include "plan/reserve.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int ppdl_auto_schedules[PPDL_AUTO_N] = {PPDL_SCHED_1F1B,        PPDL_SCHED_ZB_1P,        PPDL_SCHED_ZB_H1,
                                                 PPDL_SCHED_ZB_H2,        PPDL_SCHED_INTERLEAVED, PPDL_SCHED_INTERLEAVED,
                                                 PPDL_SCHED_INTERLEAVED, PPDL_SCHED_ZB_V};
const int ppdl_auto_chunks[PPDL_AUTO_N] = {1, 1, 1, 1, 2, 3, 4, 2};

const char *ppdl_auto_name(int k, char *buf, size_t len)
{
    if (ppdl_auto_schedules[k] == PPDL_SCHED_INTERLEAVED)
        snprintf(buf, len, "%s v=%d", ppdl_schedule_name(ppdl_auto_schedules[k]), ppdl_auto_chunks[k]);
    else
        snprintf(buf, len, "%s", ppdl_schedule_name(ppdl_auto_schedules[k]));
    return buf;
}

/* the order of the solves where they share the search: zb-1p (the least memory of the
 * zero-bubble ones) first */
const int ppdl_auto_solve_order[PPDL_AUTO_ONE] = {1, 0, 2, 3};

int ppdl_auto_shares_search(int N, int L, const char *method, const ppdl_solve_opts *o)
{
    if (strcmp(method, "ppdl") && strcmp(method, "ppdl-pipeline")) return 0; /* no placement search */
    if (o->local_search_evals > 0 || L < N) return 0; /* a budget asked for; no one-rank-per-stage plan */
    /* from 25 ranks solver.c's local search tries 8N orders (below, 200), and the
     * replica search 40 layouts (up to 16 ranks, 400): there the search is the time.
     * (solver.c's exact placement stops at 20 ranks: above it the search is heuristic) */
    return N >= PPDL_AUTO_SHARE_MIN_RANKS;
}

/* a strictly better key, beyond a relative 1e-9 (ties keep the earlier candidate) */
static int better(double a, double b) { return a < b * (1 - 1e-9); }

/* what the choice compares for option o */
static double key(const ppdl_schedule_option *o, int by_sim)
{
    return by_sim ? o->sc.chosen_sim_ms : o->T;
}

/* one candidate's solve: everything it reads is its own or read-only, so the followers
 * of a shared search can run on threads */
typedef struct solve_job {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int M, reserve;
    const char *method;
    ppdl_solve_opts opts;
    ppdl_schedule_option *o;
} solve_job;

static void *run_job(void *arg)
{
    solve_job *j = arg;
    ppdl_schedule_option *o = j->o;
    ppdl_cluster_model mine = *j->cl; /* the same cluster with the candidate's memory */
    double *mem = NULL;
    int N = j->cl->N, v = o->chunks;
    if (v > 1 && (!j->opts.auto_chunked || N < 2)) { /* out before any solve */
        snprintf(o->why, sizeof o->why, "%s", N < 2 ? "one rank: no pipeline to interleave"
                                                    : "not a candidate: this run cannot hold several stages per rank");
        o->rc = -1;
        o->T = INFINITY;
        return NULL;
    }
    if (j->reserve) {
        o->reserve = v > 1 ? ppdl_runtime_reserve_copies(j->c, o->schedule, N, v, 1, j->M)
                           : ppdl_runtime_reserve(j->c, ppdl_reserve_slots(o->schedule, N, j->M));
        mem = ppdl_memory_less_reserve(j->cl->mem, N, o->reserve);
        mine.mem = mem;
    }
    j->opts.chunks = v > 1 ? v : j->opts.chunks;
    double t0 = ppdl_now_s();
    o->rc = ppdl_choose_plan(j->c, &mine, j->M, o->schedule, j->method, &j->opts, &o->plan, &o->info, &o->sc, 1,
                             NULL, NULL, NULL, o->why, sizeof o->why);
    o->plan_s = ppdl_now_s() - t0;
    o->T = o->plan.S > 0 ? o->plan.predicted_iter_ms : INFINITY;
    free(mem);
    return NULL;
}

/* the chunked candidates (job[0..n-1]) one after another, on a thread of their own */
typedef struct job_run {
    solve_job *job;
    int n;
} job_run;

/* Chunked candidate o as k copies of a shorter pipeline (solve_chunked.h "k copies"): taken
 * instead of its one pipeline where that does not fit, or where the copies are strictly
 * better (the simulated step where ranks share cores, else T), as the chunked candidates
 * are against the others */
static void try_copies(solve_job *j, int k, int grouping)
{
    ppdl_schedule_option *o = j->o;
    int N = j->cl->N, v = o->chunks;
    ppdl_cluster_model mine = *j->cl;
    double reserve = j->reserve ? ppdl_runtime_reserve_copies(j->c, o->schedule, N, v, k, j->M) : 0, *mem = NULL;
    if (j->reserve) mine.mem = mem = ppdl_memory_less_reserve(j->cl->mem, N, reserve);
    ppdl_solve_opts opts = j->opts;
    opts.chunked_restarts = 0; /* solve_chunked.h "k copies": the screen's time */
    ppdl_plan p;
    ppdl_solve_info info;
    ppdl_shared_choice sc;
    char why[PPDL_ERR_LEN];
    double t0 = ppdl_now_s();
    int rc = ppdl_solve_chunked_copies(j->c, &mine, j->M, o->schedule, v, k, grouping, &opts, &p, &info, &sc, why, sizeof why);
    o->plan_s += ppdl_now_s() - t0;
    free(mem);
    double T = p.S > 0 ? p.predicted_iter_ms : INFINITY;
    int by_sim = sc.active && o->sc.active;
    if (rc == 0 && (o->rc != 0 || better(by_sim ? sc.chosen_sim_ms : T, by_sim ? o->sc.chosen_sim_ms : o->T))) {
        ppdl_plan_free(&o->plan);
        o->plan = p;
        o->T = T;
        o->rc = 0;
        o->info = info;
        o->sc = sc;
        o->reserve = reserve;
        o->why[0] = 0;
    } else {
        ppdl_plan_free(&p);
    }
}

/* The chunked candidates' copies, screened (solve_chunked.h "k copies"): of every candidate that
 * ran and every k, the one predicted best, solved; only method ppdl (which replicates) */
static void copies_of_best(job_run *jr)
{
    int best = -1, best_k = 0, best_g = PPDL_COPIES_BLOCKS;
    double best_pred = INFINITY;
    for (int i = 0; i < jr->n; i++) {
        const solve_job *j = &jr->job[i];
        const ppdl_schedule_option *o = j->o;
        if (strcmp(j->method, "ppdl") || !j->opts.replicate || !j->opts.auto_chunked) continue;
        double T1, Tk;
        int g, k = ppdl_copies_screen(j->c, j->cl, j->M, o->schedule, o->chunks, &T1, &Tk, &g);
        /* the one pipeline's solved T, scaled as the plans of equal counts scale */
        double pred = o->rc == 0 && isfinite(T1) ? o->T * (Tk / T1) : Tk;
        if (k && pred < best_pred) {
            best_pred = pred;
            best = i;
            best_k = k;
            best_g = g;
        }
    }
    if (best >= 0) try_copies(&jr->job[best], best_k, best_g);
}

static void *run_jobs(void *arg)
{
    job_run *jr = arg;
    for (int k = 0; k < jr->n; k++) run_job(&jr->job[k]);
    copies_of_best(jr);
    return NULL;
}

/* cores this process may run on (at least 1) */
static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

int ppdl_choose_schedule(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const char *method,
                         const ppdl_solve_opts *opts, int reserve, ppdl_schedule_choice *ch, char *err,
                         size_t errlen)
{
    memset(ch, 0, sizeof *ch);
    ch->chosen = -1;
    ppdl_solve_opts o_zb;
    if (opts) o_zb = *opts;
    else ppdl_solve_opts_default(&o_zb);
    /* where no candidate order fits a zero-bubble schedule, it is out: the search for
     * an order that fits is left to 1F1B (whose message a failure reports) */
    o_zb.fit_search = 0;
    solve_job job[PPDL_AUTO_N];
    for (int k = 0; k < PPDL_AUTO_N; k++) {
        ch->opt[k].schedule = ppdl_auto_schedules[k];
        ch->opt[k].chunks = ppdl_auto_chunks[k];
        job[k] = (solve_job){c, cl, M, reserve, method, o_zb, &ch->opt[k]};
        if (!k) {
            if (opts) job[k].opts = *opts;
            else ppdl_solve_opts_default(&job[k].opts);
        }
    }
    /* Many ranks (heuristic placement): the first candidate solved searches the orders,
     * the others start from its best order with a small budget, at once on two cores
     * where there are (schedule_choice.h) */
    /* the chunked candidates: their own search each (no rank orders to share); where
     * the others share theirs (many ranks) and there are two cores, on a thread from
     * the start (each solve reads only its own state and the shared inputs) */
    job_run chunked = {&job[PPDL_AUTO_ONE], PPDL_AUTO_N - PPDL_AUTO_ONE};
    pthread_t ctid;
    int cthreaded = ppdl_auto_shares_search(cl->N, c->L, method, &o_zb) && usable_cores() > 1 &&
                    !pthread_create(&ctid, NULL, run_jobs, &chunked);
    if (!ppdl_auto_shares_search(cl->N, c->L, method, &o_zb)) {
        for (int k = 0; k < PPDL_AUTO_ONE; k++) run_job(&job[k]);
    } else {
        const int first = ppdl_auto_solve_order[0];
        /* zb-1p's replica layouts: the followers' budget (1F1B, which searched them
         * first before zero bubble ran replicas, follows with the same) */
        if (job[first].opts.hybrid_evals <= 0) job[first].opts.hybrid_evals = PPDL_AUTO_FOLLOW_LAYOUTS;
        run_job(&job[first]);
        const ppdl_schedule_option *f = &ch->opt[first];
        int *seed = NULL;
        if (f->rc == 0 && f->plan.S == cl->N) { /* a one-rank-per-stage plan: its order */
            seed = ppdl_xmalloc((size_t)cl->N * sizeof(int));
            for (int s = 0; s < cl->N; s++) seed[s] = f->plan.stages[s].rank;
        }
        for (int q = 1; q < PPDL_AUTO_ONE && f->rc == 0; q++) {
            ppdl_solve_opts *mo = &job[ppdl_auto_solve_order[q]].opts;
            mo->seed_order = seed;
            if (mo->local_search_evals <= 0) mo->local_search_evals = PPDL_AUTO_FOLLOW_EVALS(cl->N);
            if (mo->hybrid_evals <= 0) mo->hybrid_evals = PPDL_AUTO_FOLLOW_LAYOUTS;
            /* the other zero-bubble schedules search replicas where zb-1p's best plan
             * has them: the layouts that suit one suit the others (the same fill
             * factors' shape; they differ in what they hold) */
            if (ppdl_schedule_splits_backward(ch->opt[ppdl_auto_solve_order[q]].schedule) && seed) mo->replicate = 0;
        }
        /* the second in the solve order (1F1B, which also searches replica layouts: the
         * longest) on a thread of its own, the rest here */
        pthread_t tid;
        int threaded = usable_cores() > 1 && !pthread_create(&tid, NULL, run_job, &job[ppdl_auto_solve_order[1]]);
        for (int q = threaded ? 2 : 1; q < PPDL_AUTO_ONE; q++) run_job(&job[ppdl_auto_solve_order[q]]);
        if (threaded) PPDL_CHECK(!pthread_join(tid, NULL), "--schedule auto: pthread_join failed");
        free(seed);
    }
    if (cthreaded) PPDL_CHECK(!pthread_join(ctid, NULL), "--schedule auto: pthread_join failed");
    else run_jobs(&chunked);
    /* by the simulated step where every plan that fits was chosen by it */
    int n_fit = 0, n_sim = 0;
    for (int k = 0; k < PPDL_AUTO_N; k++) {
        const ppdl_schedule_option *o = &ch->opt[k];
        if (o->rc != 0) continue;
        n_fit++;
        n_sim += o->sc.active && o->sc.chosen_sim_ms > 0;
    }
    ch->by_sim = n_fit > 0 && n_sim == n_fit;
    for (int k = 0; k < PPDL_AUTO_N; k++)
        if (ch->opt[k].rc == 0 &&
            (ch->chosen < 0 || better(key(&ch->opt[k], ch->by_sim), key(&ch->opt[ch->chosen], ch->by_sim))))
            ch->chosen = k;
    /* a chunked plan of least T: only where the simulator agrees (schedule_choice.h) */
    if (ch->chosen >= PPDL_AUTO_ONE && !ch->by_sim) {
        int one = -1; /* the best of one stage per rank by T, taken if the chunked one is not */
        double one_sim = INFINITY; /* the shortest simulated step of those that fit */
        for (int k = 0; k < PPDL_AUTO_ONE; k++) {
            const ppdl_schedule_option *o = &ch->opt[k];
            if (o->rc != 0) continue;
            if (one < 0 || better(o->T, ch->opt[one].T)) one = k;
            double sim = ppdl_simulated_ms(c, cl, &o->plan, M, o->schedule);
            if (sim < one_sim) one_sim = sim;
        }
        if (one >= 0) {
            const ppdl_schedule_option *w = &ch->opt[ch->chosen];
            ch->chunked_sim_ms = ppdl_simulated_ms(c, cl, &w->plan, M, w->schedule);
            ch->one_sim_ms = one_sim;
            if (!(ch->chunked_sim_ms < ch->one_sim_ms)) { /* NAN included: not played, not taken */
                ch->chosen = one;
                ch->chunked_vetoed = 1;
            }
        }
    }
    if (ch->chosen >= 0) return 0;
    snprintf(err, errlen, "%s", ch->opt[0].why);
    return -1;
}

void ppdl_schedule_choice_free(ppdl_schedule_choice *ch)
{
    for (int k = 0; k < PPDL_AUTO_N; k++) ppdl_plan_free(&ch->opt[k].plan);
}

const char *ppdl_schedule_choice_line(const ppdl_schedule_choice *ch, char *buf, size_t len)
{
    buf[0] = 0;
    if (ch->chosen < 0) return buf;
    const ppdl_schedule_option *w = &ch->opt[ch->chosen];
    const char *what = ch->by_sim ? "simulated step" : "T";
    size_t n = (size_t)snprintf(buf, len, "chosen by the planner: %s %.2f ms", what, key(w, ch->by_sim));
    if ((ch->chunked_sim_ms > 0 || ch->chunked_vetoed) && n < len)
        n += (size_t)snprintf(buf + n, len - n, ch->chunked_vetoed
                              ? " (a chunked plan had a lower T, but the simulator plays it %.2f ms against %.2f)"
                              : " (the simulator agrees: %.2f ms against %.2f, the best of one stage per rank)",
                              ch->chunked_sim_ms, ch->one_sim_ms);
    /* the runner-up, or why the others lost */
    for (int k = 0; k < PPDL_AUTO_N && n < len; k++) {
        const ppdl_schedule_option *o = &ch->opt[k];
        if (k == ch->chosen) continue;
        char name[32];
        ppdl_auto_name(k, name, sizeof name);
        if (o->rc == 0)
            n += (size_t)snprintf(buf + n, len - n, "; %s %.2f", name, key(o, ch->by_sim));
        else if (o->plan.S > 0 || k < PPDL_AUTO_ONE) /* (a chunked one that cannot be cut is left out) */
            n += (size_t)snprintf(buf + n, len - n, "; %s %s", name, o->plan.S > 0 ? "does not fit" : "no plan");
    }
    return buf;
}

int ppdl_schedule_for_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, const ppdl_plan *p, double *T,
                           char *err, size_t errlen)
{
    int best = -1, best_fit = 0;
    double best_T = INFINITY;
    char first_err[PPDL_ERR_LEN] = "";
    int v = ppdl_plan_chunks(p);
    for (int k = 0; k < PPDL_AUTO_N; k++) {
        int s = ppdl_auto_schedules[k];
        /* the candidates that hold the plan's stages per rank; a chunked plan runs
         * interleaved with its own v (whatever the candidates' v) or, in a V, zb-v */
        if ((v > 1) != (ppdl_auto_chunks[k] > 1)) continue;
        if (v > 1 && s == PPDL_SCHED_INTERLEAVED && ppdl_auto_chunks[k] != 2) continue;
        if (v > 1 && !ppdl_plan_chunk_order_is(p, s == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN))
            continue;
        ppdl_cost_eval ev;
        char e[PPDL_ERR_LEN];
        if (ppdl_cost_evaluate(c, cl, M, s, p, &ev, e, sizeof e)) { /* e.g. replicas under zero bubble */
            if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", e);
            continue;
        }
        /* a schedule whose plan fits beats one that does not, then the least T */
        if (best < 0 || (ev.feasible && !best_fit) || (ev.feasible == best_fit && better(ev.T, best_T))) {
            best = s;
            best_T = ev.T;
            best_fit = ev.feasible;
        }
        ppdl_cost_eval_free(&ev);
    }
    if (best < 0)
        return ppdl_errf(err, errlen, "--schedule auto: %s", first_err[0] ? first_err
                         : "the plan's stages per rank follow neither the round-robin order (interleaved) nor the V (zb-v)");
    if (T) *T = best_T;
    return best;
}
