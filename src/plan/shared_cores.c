/* shared_cores.c — the choice among candidate plans by the simulated step where a
 * host's ranks outnumber its cores (shared_cores.h says which candidates and why; the
 * chooser, chooser.c, makes them and offers them to the ranking begun here). */
#include "plan/shared_cores.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ppdl_shared_choice_host(const ppdl_cluster_model *cl, ppdl_shared_choice *sc)
{
    int *cnt = ppdl_xcalloc((size_t)cl->hosts.n, sizeof(int));
    for (int r = 0; r < cl->N; r++) cnt[cl->hosts.of_rank[r]]++;
    sc->max_ranks = sc->cores = 0;
    for (int h = 0; h < cl->hosts.n; h++)
        if (sc->max_ranks == 0 || (double)cnt[h] / cl->hosts.cores[h] > (double)sc->max_ranks / sc->cores) {
            sc->max_ranks = cnt[h];
            sc->cores = cl->hosts.cores[h];
        }
    free(cnt);
}

ppdl_ranking *ppdl_shared_begin(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                ppdl_plan *plan, ppdl_shared_choice *sc, int K)
{
    memset(sc, 0, sizeof *sc);
    ppdl_shared_choice_host(cl, sc);
    sc->active = 1;
    ppdl_plan_kind(plan, sc->optimum_kind, sizeof sc->optimum_kind);
    double ms = ppdl_simulated_ms(c, cl, plan, M, schedule);
    sc->optimum_sim_ms = isnan(ms) ? INFINITY : ms;
    if (!(ms < INFINITY)) { /* cannot be played: keep it as it is */
        snprintf(sc->chosen, sizeof sc->chosen, "the optimum of T (not simulated)");
        return NULL;
    }
    /* every candidate is kept for the runners-up, picked from them at the finish; the
     * layout kinds take the ranks in the optimum's order (before it moves) */
    ppdl_ranking *r = ppdl_ranking_new(c, cl, M, schedule, K > 1 ? PPDL_RANKING_KEEP : 1, plan);
    ppdl_ranking_offer(r, plan, "the optimum of T");
    memset(plan, 0, sizeof *plan);
    return r;
}

void ppdl_shared_finish(ppdl_ranking *r, ppdl_plan *plan, ppdl_shared_choice *sc, int K, ppdl_plan *others,
                        double *others_ms, char (*others_label)[48])
{
    ppdl_ranking_take_best(r, plan, sc->chosen, &sc->chosen_sim_ms);
    sc->candidates = ppdl_ranking_simulated(r);
    sc->n_others = ppdl_ranking_runners_up(r, plan, sc->chosen_sim_ms * PPDL_SHARED_FAMILY_FIRST, 1, K - 1, others,
                                           others_ms, others_label);
    ppdl_ranking_free(r);
}

const char *ppdl_shared_choice_line(const ppdl_shared_choice *sc, char *buf, size_t len)
{
    if (!sc->active) {
        snprintf(buf, len, "%s", "");
        return buf;
    }
    size_t n = (size_t)snprintf(buf, len, "ranks share cores (%d ranks on a host of %d core%s): ", sc->max_ranks,
                                sc->cores, sc->cores == 1 ? "" : "s");
    if (n >= len) return buf;
    if (!strcmp(sc->chosen, "the optimum of T"))
        snprintf(buf + n, len - n, "of %d candidate plans, the optimum of T (%s) simulates fastest (%.2f ms)",
                 sc->candidates, sc->optimum_kind, sc->chosen_sim_ms);
    else if (sc->candidates == 0)
        snprintf(buf + n, len - n, "kept the optimum of T (%s): the simulator cannot play it", sc->optimum_kind);
    else
        snprintf(buf + n, len - n, "of %d candidate plans, %s simulates fastest (%.2f ms); the optimum of T, %s, "
                 "simulates to %.2f ms", sc->candidates, sc->chosen, sc->chosen_sim_ms, sc->optimum_kind,
                 sc->optimum_sim_ms);
    return buf;
}
