/* schedule_lists.h — the unit tests' short ways to the one builder (sched/schedule.h
 * ppdl_schedule_make): a stage's list, a rank's chunked schedule, every rank's. */
#ifndef PPDL_TEST_SCHEDULE_LISTS_H
#define PPDL_TEST_SCHEDULE_LISTS_H

#include "core/error.h"
#include "sched/schedule.h"

/* the list of replica q of stage s (k NULL: one replica each; tm NULL: the unit play),
 * or the test stops with the reason */
static inline void list_of(int kind, int S, int M, const int *k, const ppdl_zb_times *tm, int s, int q,
                           ppdl_op_list *out)
{
    ppdl_schedule_spec sp = {kind, S, M, 1, k, tm};
    ppdl_rank_schedule rs;
    char err[PPDL_ERR_LEN];
    if (ppdl_schedule_make(&sp, ppdl_schedule_device(&sp, s, q), &rs, err, sizeof err)) ppdl_die("%s", err);
    *out = ppdl_rank_schedule_take(&rs, 0);
}

/* rank r's share of a chunked schedule on N ranks, v stages each (unit play) */
static inline int rank_of(int kind, int N, int v, int M, int r, ppdl_rank_schedule *out, char *err, size_t errlen)
{
    ppdl_schedule_spec sp = {kind, v * N, M, v, NULL, NULL};
    return ppdl_schedule_make(&sp, r, out, err, errlen);
}

/* every rank's, ordered by tm where ppdl_schedule_timed_ok proves those orders, else
 * the unit play's (as a run and the simulator take them) */
static inline int ranks_of(int kind, int N, int v, int M, const ppdl_zb_times *tm, ppdl_rank_schedule *out, char *err,
                           size_t errlen)
{
    ppdl_schedule_spec sp = {kind, v * N, M, v, NULL, tm};
    char why[PPDL_ERR_LEN];
    if (tm && !ppdl_schedule_timed_ok(&sp, why, sizeof why)) sp.tm = NULL;
    return ppdl_schedule_make_all(&sp, out, err, errlen);
}

#endif
