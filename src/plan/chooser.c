/* chooser.c — one schedule's plan: the method's search, then (ranks sharing cores)
 * the choice among candidates by the simulated step (chooser.h). */
#include "plan/chooser.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/baselines.h"
#include "plan/costmodel.h"
#include "plan/solve_chunked.h"
#include "plan/solver.h"
#include "sched/schedule.h"

#include <stdio.h>
#include <string.h>

const char *const ppdl_plan_methods[] = {"ppdl", "ppdl-pipeline", "ppdl-inorder", "dp", "dp-rc", "uniform",
                                         "uniform-rc", "params", "params-rc", "time", "time-rc", "pipedream",
                                         "pipedream-rc", NULL};

int ppdl_choose_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const char *method,
                     const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                     int K, ppdl_plan *others, double *others_ms, char (*others_label)[48], char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (sc) memset(sc, 0, sizeof *sc);
    if (!strcmp(method, "ppdl") || !strcmp(method, "ppdl-pipeline") || !strcmp(method, "ppdl-inorder")) {
        ppdl_solve_opts o;
        if (opts) o = *opts;
        else ppdl_solve_opts_default(&o);
        o.placement = strcmp(method, "ppdl-inorder") != 0;
        o.replicate = o.replicate && !strcmp(method, "ppdl"); /* opts may say no replicas (schedule_choice.c) */
        /* several stages per rank: their own search (the placement is the schedule's) */
        if (ppdl_schedule_chunked(schedule))
            return ppdl_solve_chunked(c, cl, M, schedule, o.chunks, &o, out, info, sc, err, errlen);
        int rc = ppdl_solve(c, cl, M, schedule, &o, out, info, err, errlen);
        /* ranks sharing cores: the plan is the candidate of least simulated step */
        if (rc == 0)
            ppdl_choose_on_shared_cores_k(c, cl, M, schedule, method, &o, out, sc, K, others, others_ms, others_label);
        return rc;
    }
    if (!ppdl_is_baseline(method)) {
        char list[256] = "";
        size_t n = 0;
        for (int k = 0; ppdl_plan_methods[k] && n < sizeof list - 20; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", ppdl_plan_methods[k]);
        return ppdl_errf(err, errlen, "--method %s: unknown; expected one of %s", method, list);
    }
    if (ppdl_baseline(c, cl, M, schedule, method, out, err, errlen)) return -1;
    if (out->feasible) return 0;
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, err, errlen)) return -1;
    int s = ev.worst_stage;
    char a[32], b[32], d[32];
    ppdl_errf(err, errlen, "the %s plan does not fit in memory: stage %d (layers %d-%d on rank%s %d) needs %s, "
                           "%s over the rank's %s",
              method, s, out->stages[s].first, out->stages[s].last,
              out->stages[s].n_replicas > 1 ? "s including" : "", out->stages[s].rank,
              ppdl_fmt_bytes((size_t)ev.mem_bytes[s], a, sizeof a), ppdl_fmt_bytes((size_t)ev.worst_over, b, sizeof b),
              ppdl_fmt_bytes((size_t)ev.mem_limit[s], d, sizeof d));
    ppdl_cost_eval_free(&ev);
    return -1;
}
