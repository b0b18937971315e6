/* zero_bubble.c — the greedy play behind the zero-bubble schedules (zero_bubble.h).
 *
 * Times are whole units. ready_act[s*M + mb] is when the activation of mb reaches stage
 * s (0 on stage 0), ready_grad[s*M + mb] when its output gradient does (on the last
 * stage: when its own forward ends); -1 while not known. The play repeatedly takes,
 * over all unfinished stages, the pass that can start earliest (ties: B, then F, then
 * W; then the stage listed first) and runs it. Every pass that starts before time t
 * has run when one starting at t is chosen, and a pass ends after it starts, so every
 * arrival at or before t is known by then: the choice is the one a real stage would
 * make at t. Cost: O(S) per pass, O(S^2 M) in all.
 *
 * Replicated stages: every replica is a device, and a pass of a stage with k replicas
 * takes k units. A plan replicates a stage k times when it holds about k times the
 * work of a stage on one rank (the planner balances each replica's share: its
 * micro-batches, M / k, times its pass), so k units is the shape of the plans that
 * run; with every pass one unit, the orders of a wide stage feeding a narrow one
 * were made for passes k times shorter than they are, and in the simulator lost to
 * 1F1B's lists on the same layout (perf/RESULTS.md). One replica per stage: 1 unit,
 * the play above.
 *
 * Several stages per device (ZB-V): each stage is a stream of passes with its own
 * cap, a device runs one pass of its streams at a time (its clock is shared), and
 * its streams are listed later stage first, so a tie goes to the later stage.
 */
#include "sched/zero_bubble.h"

#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

/* A stream of passes: one stage (k = 1), or replica q of a stage with k replicas,
 * which runs the micro-batches q, q + k, q + 2k, .. (n of them), on device dev. A
 * device runs its streams' passes one at a time: one stream per device for the
 * layouts, a rank's stages for the chunked schedules (ppdl_zb_order_devices). */
typedef struct zb_stage {
    int s, q, k, n;
    int dev;               /* the device it runs on */
    int cap;               /* the most micro-batches it may hold (F done, W not yet) */
    int nf, nb, nw;        /* next F, B, W, as local indices (micro-batch q + k * index) */
} zb_stage;

/* A device: when it is free, the passes it has played, where they go in an
 * all-devices output */
typedef struct zb_device {
    long t;
    int played;
    long off;
} zb_device;

enum { NONE = -1 };

/* the pass stream z would start next on a device free at t, and when: kind
 * 'F'/'B'/'W', or 0 when it can start none yet */
static char next_pass(const zb_stage *z, int M, long t, const long *ready_act, const long *ready_grad,
                      long *start)
{
    char kind = 0;
    long best = 0, row = (long)z->s * M;
    /* in priority order: B, F, W; a later one wins only by starting strictly earlier */
    if (z->nb < z->nf && ready_grad[row + z->q + (long)z->k * z->nb] != NONE) {
        long r = ready_grad[row + z->q + (long)z->k * z->nb];
        kind = 'B';
        best = r > t ? r : t;
    }
    if (z->nf < z->n && z->nf - z->nw < z->cap && ready_act[row + z->q + (long)z->k * z->nf] != NONE) {
        long r = ready_act[row + z->q + (long)z->k * z->nf], at = r > t ? r : t;
        if (!kind || at < best) kind = 'F', best = at;
    }
    if (z->nw < z->nb && (!kind || t < best)) kind = 'W', best = t;
    *start = best;
    return kind;
}

/* B before F before W when two passes of one device could start at the same time */
static int rank_of(char kind) { return kind == 'B' ? 0 : kind == 'F' ? 1 : 2; }

/* the streams of the layout k (NULL: one per stage), in stage order then replica
 * order, each its own device with its own cap; returns their number */
static int layout_streams(int S, int M, const int *k, const int *cap, zb_stage **out)
{
    int D = 0;
    for (int s = 0; s < S; s++) D += k ? k[s] : 1;
    zb_stage *z = ppdl_xcalloc((size_t)D, sizeof *z);
    for (int s = 0, d = 0; s < S; s++)
        for (int q = 0; q < (k ? k[s] : 1); q++, d++) {
            z[d].s = s;
            z[d].q = q;
            z[d].k = k ? k[s] : 1;
            z[d].n = q < M ? (M - q + z[d].k - 1) / z[d].k : 0;
            z[d].dev = d;
            z[d].cap = cap[d];
        }
    *out = z;
    return D;
}

/* The play of the streams z[0..n_z-1] on D devices, recording device `dev`'s passes
 * into out[0..] in the order it runs them, or (dev = -1) every device's, device d's
 * from 3 x the micro-batches of the streams of the devices before it. Of the passes
 * that can start earliest it runs (ties) a B before an F before a W, then the stream
 * listed first: passes of two devices that start at the same time do not depend on
 * each other, so only a device's own ties matter. */
static long play(int S, int M, zb_stage *z, int n_z, int D, int dev, ppdl_zb_pass *out)
{
    zb_device *dv = ppdl_xcalloc((size_t)D, sizeof *dv);
    for (int i = 0; i < n_z; i++)
        for (int d = z[i].dev + 1; d < D; d++) dv[d].off += 3L * z[i].n;
    long total = 0;
    for (int i = 0; i < n_z; i++) total += 3L * z[i].n;
    long *ready_act = ppdl_xmalloc((size_t)S * (size_t)M * sizeof(long));
    long *ready_grad = ppdl_xmalloc((size_t)S * (size_t)M * sizeof(long));
    for (long i = 0; i < (long)S * M; i++) {
        ready_act[i] = i < M ? 0 : NONE;
        ready_grad[i] = NONE;
    }
    long end = 0;
    for (long played = 0; played < total; played++) {
        int who = -1;
        char kind = 0;
        long start = 0;
        for (int i = 0; i < n_z; i++) {
            long at;
            char c = next_pass(&z[i], M, dv[z[i].dev].t, ready_act, ready_grad, &at);
            if (c && (who < 0 || at < start || (at == start && rank_of(c) < rank_of(kind))))
                who = i, kind = c, start = at;
        }
        PPDL_CHECK(who >= 0, "ppdl_zb_order: no stage can run a pass (S=%d M=%d)", S, M);
        zb_stage *w = &z[who];
        zb_device *d = &dv[w->dev];
        int local = kind == 'F' ? w->nf++ : kind == 'B' ? w->nb++ : w->nw++, mb = w->q + w->k * local, s = w->s;
        d->t = start + w->k; /* a pass of a stage with k replicas takes k units (above) */
        if (d->t > end) end = d->t;
        if (kind == 'F' && s < S - 1) ready_act[(long)(s + 1) * M + mb] = d->t;
        if (kind == 'F' && s == S - 1) ready_grad[(long)s * M + mb] = d->t;
        if (kind == 'B' && s > 0) ready_grad[(long)(s - 1) * M + mb] = d->t;
        ppdl_zb_pass pass = {kind, mb, s};
        if (w->dev == dev) out[d->played] = pass;
        if (dev < 0) out[d->off + d->played] = pass;
        d->played++;
    }
    free(dv);
    free(ready_act);
    free(ready_grad);
    return end;
}

/* the play of a layout (ppdl_zb_order_layout) */
static long play_layout(int S, int M, const int *k, const int *cap, int dev, ppdl_zb_pass *out)
{
    zb_stage *z;
    int D = layout_streams(S, M, k, cap, &z);
    long t = play(S, M, z, D, D, dev, out);
    free(z);
    return t;
}

/* every cap at least 1 (a device that may hold nothing never runs), every stage on
 * 1..M replicas */
static void check_args(const char *fn, int S, int M, const int *k, const int *cap)
{
    PPDL_CHECK(S >= 1 && M >= 1 && cap != NULL, "%s: S=%d M=%d cap=%p", fn, S, M, (const void *)cap);
    int D = 0;
    for (int s = 0; s < S; s++) {
        PPDL_CHECK(!k || (k[s] >= 1 && k[s] <= M), "%s: stage %d has %d replicas (M=%d)", fn, s, k[s], M);
        D += k ? k[s] : 1;
    }
    for (int d = 0; d < D; d++) PPDL_CHECK(cap[d] >= 1, "%s: device %d of %d has cap %d", fn, d, D, cap[d]);
}

long ppdl_zb_order(int S, int M, const int *cap, int s, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order", S, M, NULL, cap);
    PPDL_CHECK(s >= 0 && s < S, "ppdl_zb_order: stage %d of %d", s, S);
    return play_layout(S, M, NULL, cap, s, out);
}

long ppdl_zb_order_all(int S, int M, const int *cap, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_all", S, M, NULL, cap);
    return play_layout(S, M, NULL, cap, -1, out);
}

long ppdl_zb_order_layout(int S, int M, const int *k, const int *cap, int dev, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_layout", S, M, k, cap);
    return play_layout(S, M, k, cap, dev, out);
}

long ppdl_zb_order_devices(int S, int M, int D, const int *dev_of, const int *cap, int dev, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_devices", S, M, NULL, cap);
    PPDL_CHECK(D >= 1 && dev >= -1 && dev < D, "ppdl_zb_order_devices: device %d of %d", dev, D);
    zb_stage *z = ppdl_xcalloc((size_t)S, sizeof *z);
    int n_z = 0;
    /* the streams device by device, a device's later stages first (see zero_bubble.h) */
    for (int d = 0; d < D; d++)
        for (int s = S - 1; s >= 0; s--) {
            PPDL_CHECK(dev_of[s] >= 0 && dev_of[s] < D, "ppdl_zb_order_devices: stage %d on device %d of %d", s,
                       dev_of[s], D);
            if (dev_of[s] == d) z[n_z++] = (zb_stage){.s = s, .k = 1, .n = M, .dev = d, .cap = cap[s]};
        }
    long t = play(S, M, z, n_z, D, dev, out);
    free(z);
    return t;
}
