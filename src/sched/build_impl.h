/* build_impl.h — the builders behind ppdl_schedule_make (build.c), private to sched/:
 * the lists of one stage per rank (schedule.c) and of the chunked schedules
 * (chunked.c). They take arguments build.c has checked. */
#ifndef PPDL_SCHED_BUILD_IMPL_H
#define PPDL_SCHED_BUILD_IMPL_H

#include "sched/schedule.h"

/* the list of replica q of stage s (schedule.h: ppdl_schedule_make with v = 1) */
void ppdl_sched_build_list(int kind, int S, int M, const int *k, int s, int q, const ppdl_zb_times *tm,
                           ppdl_op_list *out);
/* 0, or -1 with the reason: (kind, N, v, M) is not a chunked schedule that can run */
int ppdl_sched_chunked_args(int kind, int N, int v, int M, char *err, size_t errlen);
/* rank `rank`'s stages, lists and order; every rank's into out[0..N-1] (zb-v plays its
 * V once for all) */
void ppdl_sched_build_rank(int kind, int N, int v, int M, const ppdl_zb_times *tm, int rank, ppdl_rank_schedule *out);
void ppdl_sched_build_ranks(int kind, int N, int v, int M, const ppdl_zb_times *tm, ppdl_rank_schedule *out);

#endif
