/* reserve.c — the runtime's buffer reserve the planner subtracts (reserve.h) */
#include "plan/reserve.h"

#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <stdlib.h>

int ppdl_reserve_slots(int schedule, int n_ranks, int M)
{
    switch (schedule) {
    case PPDL_SCHED_1F1B:
    case PPDL_SCHED_ZB_H1: /* zero_bubble.h: at most S held */
    case PPDL_SCHED_ZB_1P: return n_ranks; /* S - s held on stage s: S on the first */
    case PPDL_SCHED_ZB_H2: return 2 * n_ranks - 1;
    default: return M;
    }
}

double ppdl_runtime_reserve(const ppdl_costs *c, int slots)
{
    double max_act = 0, max_saved = 0, max_work = 0;
    for (int l = 0; l < c->L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        max_act = lc->in_bytes > max_act ? lc->in_bytes : max_act;
        max_act = lc->out_bytes > max_act ? lc->out_bytes : max_act;
        max_saved = lc->saved_bytes > max_saved ? lc->saved_bytes : max_saved;
        max_work = lc->work_bytes > max_work ? lc->work_bytes : max_work;
    }
    return slots * 3.0 * max_act + max_saved + 3.0 * max_act + max_work + 256.0 * (4.0 * slots + 16);
}

int ppdl_reserve_slots_chunked(int schedule, int n_ranks, int v, int M)
{
    int N = n_ranks > 0 ? n_ranks : 1, most = 0;
    ppdl_rank_schedule *rs = ppdl_xcalloc((size_t)N, sizeof *rs);
    char err[PPDL_ERR_LEN];
    ppdl_schedule_spec sp = {schedule, v * N, M, v, NULL, NULL};
    if (ppdl_schedule_make_all(&sp, rs, err, sizeof err) == 0)
        for (int r = 0; r < N; r++) {
            int held = 0;
            for (int c = 0; c < rs[r].n_stages; c++) held += ppdl_schedule_max_in_flight(&rs[r].lists[c]);
            most = held > most ? held : most;
        }
    else
        most = v * M; /* a schedule that cannot be built: every stage all its micro-batches */
    for (int r = 0; r < N; r++) ppdl_rank_schedule_free(&rs[r]);
    free(rs);
    return most;
}

double ppdl_runtime_reserve_chunked(const ppdl_costs *c, int slots, int v)
{
    return ppdl_runtime_reserve(c, slots) + (v - 1) * ppdl_runtime_reserve(c, 0);
}

double ppdl_runtime_reserve_copies(const ppdl_costs *c, int schedule, int n_ranks, int v, int k, int M)
{
    int M0 = (M + k - 1) / k;
    return ppdl_runtime_reserve_chunked(c, ppdl_reserve_slots_chunked(schedule, n_ranks / k, v, M0), v);
}

double *ppdl_memory_less_reserve(const double *mem, int n, double reserve)
{
    double *out = ppdl_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int r = 0; r < n; r++) out[r] = mem[r] > reserve ? mem[r] - reserve : 1;
    return out;
}
