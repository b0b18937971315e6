/* build.c — the one builder of schedules (schedule.h, "building a schedule"): a spec
 * in, checked here; a device's lists or every device's out, from the lists of one stage
 * per rank (schedule.c) or the chunked schedules' (chunked.c); and the proof that a
 * spec's timed orders may run. */
#include "sched/schedule.h"
#include "sched/build_impl.h"

#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

int ppdl_schedule_devices(const ppdl_schedule_spec *sp)
{
    if (ppdl_schedule_chunked(sp->kind)) return sp->v >= 1 ? sp->S / sp->v : 0;
    int D = 0;
    for (int s = 0; s < sp->S; s++) D += sp->k ? sp->k[s] : 1;
    return D;
}

int ppdl_schedule_device(const ppdl_schedule_spec *sp, int s, int q)
{
    int d = q;
    for (int t = 0; t < s; t++) d += sp->k ? sp->k[t] : 1;
    return d;
}

/* 0, or -1 with why the spec cannot be built */
static int spec_ok(const ppdl_schedule_spec *sp, char *err, size_t errlen)
{
    const char *name = ppdl_schedule_name(sp->kind);
    if (sp->kind < 0 || sp->kind >= PPDL_SCHED_N_KINDS) return ppdl_errf(err, errlen, "unknown schedule kind %d", sp->kind);
    if (ppdl_schedule_chunked(sp->kind)) {
        if (sp->v < 1 || sp->S % sp->v)
            return ppdl_errf(err, errlen, "schedule %s: %d stages are not %d per rank", name, sp->S, sp->v);
        if (sp->k)
            return ppdl_errf(err, errlen, "schedule %s: a rank holding several stages runs no replicas of a stage "
                             "(copies of the whole pipeline instead)", name);
        return ppdl_sched_chunked_args(sp->kind, sp->S / sp->v, sp->v, sp->M, err, errlen);
    }
    if (sp->v != 1) return ppdl_errf(err, errlen, "schedule %s holds one stage per rank, not %d", name, sp->v);
    if (sp->S < 1 || sp->M < 1)
        return ppdl_errf(err, errlen, "schedule %s: need S >= 1 stages and M >= 1 micro-batches (got S=%d M=%d)", name,
                         sp->S, sp->M);
    return ppdl_schedule_supports(sp->kind, sp->S, sp->k, err, errlen);
}

/* device d's lists, the spec checked */
static void make_one(const ppdl_schedule_spec *sp, int d, ppdl_rank_schedule *out)
{
    if (ppdl_schedule_chunked(sp->kind)) {
        ppdl_sched_build_rank(sp->kind, sp->S / sp->v, sp->v, sp->M, sp->tm, d, out);
        return;
    }
    int s = 0, q = d;
    while (q >= (sp->k ? sp->k[s] : 1)) {
        q -= sp->k ? sp->k[s] : 1;
        s++;
    }
    *out = (ppdl_rank_schedule){0};
    out->rank = d;
    out->n_stages = 1;
    out->stages = ppdl_xmalloc(sizeof(int));
    out->stages[0] = s;
    out->lists = ppdl_xcalloc(1, sizeof(ppdl_op_list));
    ppdl_sched_build_list(sp->kind, sp->S, sp->M, sp->k, s, q, sp->tm, &out->lists[0]);
    out->n = out->lists[0].n;
    out->order = ppdl_xcalloc((size_t)(out->n ? out->n : 1), sizeof(int));
}

int ppdl_schedule_make(const ppdl_schedule_spec *sp, int d, ppdl_rank_schedule *out, char *err, size_t errlen)
{
    if (spec_ok(sp, err, errlen)) return -1;
    int D = ppdl_schedule_devices(sp);
    if (d < 0 || d >= D)
        return ppdl_errf(err, errlen, "schedule %s: %s %d is not in 0..%d", ppdl_schedule_name(sp->kind),
                         ppdl_schedule_chunked(sp->kind) ? "rank" : "device", d, D - 1);
    make_one(sp, d, out);
    return 0;
}

int ppdl_schedule_make_all(const ppdl_schedule_spec *sp, ppdl_rank_schedule *out, char *err, size_t errlen)
{
    if (spec_ok(sp, err, errlen)) return -1;
    if (ppdl_schedule_chunked(sp->kind))
        ppdl_sched_build_ranks(sp->kind, sp->S / sp->v, sp->v, sp->M, sp->tm, out);
    else
        for (int d = 0; d < ppdl_schedule_devices(sp); d++) make_one(sp, d, &out[d]);
    return 0;
}

/* the most micro-batches held and W's pending on list c of device d */
static void counts(const ppdl_rank_schedule *r, int c, int *held, int *pending)
{
    *held = ppdl_schedule_max_in_flight(&r->lists[c]);
    *pending = ppdl_schedule_max_pending_weight(&r->lists[c]);
}

int ppdl_schedule_timed_ok(const ppdl_schedule_spec *sp, char *err, size_t errlen)
{
    if (!sp->tm || !ppdl_schedule_splits_backward(sp->kind)) return 1;
    int D = ppdl_schedule_devices(sp), chunked = ppdl_schedule_chunked(sp->kind), rc = 0;
    ppdl_schedule_spec unit = *sp;
    unit.tm = NULL;
    ppdl_rank_schedule *t = ppdl_xcalloc((size_t)(D ? D : 1), sizeof *t), *u = ppdl_xcalloc((size_t)(D ? D : 1), sizeof *u);
    if (ppdl_schedule_make_all(sp, t, err, errlen) || ppdl_schedule_make_all(&unit, u, err, errlen)) {
        rc = -1;
    } else if (chunked) {
        /* The timed play does not see the send buffers a rank reuses: where one rank
         * holds both ends of a message (the V's turn, or N = 1), a timed order can make
         * a B wait for its own rank's receive that comes later (found by tests/unit/
         * test_schedule_chunked.c). And the planner counts the unit play's lists'
         * memory: a timed order may hold no more. */
        rc = ppdl_schedule_check_ranks(D, sp->v, sp->M, t, err, errlen);
        int ht = 0, pt = 0, hu = 0, pu = 0, h, p;
        for (int r = 0; r < D && !rc; r++)
            for (int c = 0; c < t[r].n_stages; c++) {
                counts(&t[r], c, &h, &p);
                ht = h > ht ? h : ht, pt = p > pt ? p : pt;
                counts(&u[r], c, &h, &p);
                hu = h > hu ? h : hu, pu = p > pu ? p : pu;
            }
        if (!rc && (ht > hu || pt > pu))
            rc = ppdl_errf(err, errlen, "the timed orders hold %d micro-batches and %d W's at most, the unit play's "
                           "%d and %d", ht, pt, hu, pu);
    } else {
        ppdl_op_list *lists = ppdl_xmalloc((size_t)D * sizeof *lists);
        for (int d = 0; d < D; d++) lists[d] = t[d].lists[0];
        rc = ppdl_schedule_check_layout(sp->S, sp->M, sp->k, lists, err, errlen);
        free(lists);
        for (int d = 0; d < D && !rc; d++) {
            int ht, pt, hu, pu;
            counts(&t[d], 0, &ht, &pt);
            counts(&u[d], 0, &hu, &pu);
            if (ht > hu || pt > pu)
                rc = ppdl_errf(err, errlen, "stage %d replica %d: the timed list holds %d micro-batches and %d W's, the "
                               "unit play's %d and %d", t[d].stages[0], d - ppdl_schedule_device(sp, t[d].stages[0], 0),
                               ht, pt, hu, pu);
        }
    }
    for (int d = 0; d < D; d++) ppdl_rank_schedule_free(&t[d]), ppdl_rank_schedule_free(&u[d]);
    free(t);
    free(u);
    return rc == 0;
}
