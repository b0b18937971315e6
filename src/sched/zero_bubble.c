/* zero_bubble.c — the greedy play behind the zero-bubble schedules (zero_bubble.h).
 *
 * Times are whole units. ready_act[s*M + mb] is when the activation of mb reaches stage
 * s (0 on stage 0), ready_grad[s*M + mb] when its output gradient does (on the last
 * stage: when its own forward ends); -1 while not known. The play repeatedly takes,
 * over all unfinished stages, the pass that can start earliest (ties: the lower stage;
 * on one stage B, then F, then W) and runs it. Every pass that starts before time t
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
 */
#include "sched/zero_bubble.h"

#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

/* A device: one stage (k = 1), or replica q of a stage with k replicas, which runs
 * the micro-batches q, q + k, q + 2k, .. (n of them) */
typedef struct zb_stage {
    int s, q, k, n;
    int nf, nb, nw;        /* next F, B, W, as local indices (micro-batch q + k * index) */
    long t;                /* when the device is free */
    int played;            /* passes played */
    long off;              /* where its passes go in an all-devices output */
} zb_stage;

enum { NONE = -1 };

/* the pass device z would start next and when: kind 'F'/'B'/'W', or 0 when it can
 * start none yet */
static char next_pass(const zb_stage *z, int M, int cap, const long *ready_act, const long *ready_grad,
                      long *start)
{
    char kind = 0;
    long best = 0, row = (long)z->s * M;
    /* in priority order: B, F, W; a later one wins only by starting strictly earlier */
    if (z->nb < z->nf && ready_grad[row + z->q + (long)z->k * z->nb] != NONE) {
        long r = ready_grad[row + z->q + (long)z->k * z->nb];
        kind = 'B';
        best = r > z->t ? r : z->t;
    }
    if (z->nf < z->n && z->nf - z->nw < cap && ready_act[row + z->q + (long)z->k * z->nf] != NONE) {
        long r = ready_act[row + z->q + (long)z->k * z->nf], at = r > z->t ? r : z->t;
        if (!kind || at < best) kind = 'F', best = at;
    }
    if (z->nw < z->nb && (!kind || z->t < best)) kind = 'W', best = z->t;
    *start = best;
    return kind;
}

/* the devices of the layout k (NULL: one per stage), in stage order then replica
 * order; returns their number */
static int devices(int S, int M, const int *k, zb_stage **out)
{
    int D = 0;
    for (int s = 0; s < S; s++) D += k ? k[s] : 1;
    zb_stage *z = ppdl_xcalloc((size_t)D, sizeof *z);
    long off = 0;
    for (int s = 0, d = 0; s < S; s++)
        for (int q = 0; q < (k ? k[s] : 1); q++, d++) {
            z[d].s = s;
            z[d].q = q;
            z[d].k = k ? k[s] : 1;
            z[d].n = q < M ? (M - q + z[d].k - 1) / z[d].k : 0;
            z[d].off = off;
            off += 3L * z[d].n;
        }
    *out = z;
    return D;
}

/* the play, recording device `dev`'s passes into out[0..3n-1], or (dev = -1) every
 * device's, device d's from its offset (3 x the micro-batches of the devices before) */
static long play(int S, int M, const int *k, const int *cap, int dev, ppdl_zb_pass *out)
{
    zb_stage *z;
    int D = devices(S, M, k, &z);
    long *ready_act = ppdl_xmalloc((size_t)S * (size_t)M * sizeof(long));
    long *ready_grad = ppdl_xmalloc((size_t)S * (size_t)M * sizeof(long));
    for (long i = 0; i < (long)S * M; i++) {
        ready_act[i] = i < M ? 0 : NONE;
        ready_grad[i] = NONE;
    }
    long end = 0;
    for (long played = 0; played < 3L * S * M; played++) {
        int who = -1;
        char kind = 0;
        long start = 0;
        for (int d = 0; d < D; d++) {
            long at;
            char c = next_pass(&z[d], M, cap[d], ready_act, ready_grad, &at);
            if (c && (who < 0 || at < start)) who = d, kind = c, start = at;
        }
        PPDL_CHECK(who >= 0, "ppdl_zb_order: no stage can run a pass (S=%d M=%d)", S, M);
        zb_stage *w = &z[who];
        int local = kind == 'F' ? w->nf++ : kind == 'B' ? w->nb++ : w->nw++, mb = w->q + w->k * local, s = w->s;
        w->t = start + w->k; /* a pass of a stage with k replicas takes k units (below) */
        if (w->t > end) end = w->t;
        if (kind == 'F' && s < S - 1) ready_act[(long)(s + 1) * M + mb] = w->t;
        if (kind == 'F' && s == S - 1) ready_grad[(long)s * M + mb] = w->t;
        if (kind == 'B' && s > 0) ready_grad[(long)(s - 1) * M + mb] = w->t;
        if (who == dev) out[w->played] = (ppdl_zb_pass){kind, mb};
        if (dev < 0) out[w->off + w->played] = (ppdl_zb_pass){kind, mb};
        w->played++;
    }
    free(z);
    free(ready_act);
    free(ready_grad);
    return end;
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
    return play(S, M, NULL, cap, s, out);
}

long ppdl_zb_order_all(int S, int M, const int *cap, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_all", S, M, NULL, cap);
    return play(S, M, NULL, cap, -1, out);
}

long ppdl_zb_order_layout(int S, int M, const int *k, const int *cap, int dev, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_layout", S, M, k, cap);
    return play(S, M, k, cap, dev, out);
}
