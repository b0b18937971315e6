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
 * 1F1B's lists on the same layout (perf/bench-planner's first cluster). One replica
 * per stage: 1 unit,
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
#include <string.h>

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
static char next_pass(const zb_stage *z, int M, long t, long w_fit, const long *ready_act, const long *ready_grad,
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
    /* a W fills the gap before them: unit play, a gap at all (whole units: one unit at
     * least); timed, a gap as long as the W (w_fit), so that it does not delay a B or F
     * that arrives while it runs (the critical path) */
    if (z->nw < z->nb && (!kind || t + w_fit <= best)) kind = 'W', best = t;
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
static long play(int S, int M, zb_stage *z, int n_z, int D, const ppdl_zb_times *tm, int fit, int dev,
                 ppdl_zb_pass *out)
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
            char c = next_pass(&z[i], M, dv[z[i].dev].t, fit ? tm->w[z[i].s] : 1, ready_act, ready_grad, &at);
            if (c && (who < 0 || at < start || (at == start && rank_of(c) < rank_of(kind))))
                who = i, kind = c, start = at;
        }
        PPDL_CHECK(who >= 0, "ppdl_zb_order: no stage can run a pass (S=%d M=%d)", S, M);
        zb_stage *w = &z[who];
        zb_device *d = &dv[w->dev];
        int local = kind == 'F' ? w->nf++ : kind == 'B' ? w->nb++ : w->nw++, mb = w->q + w->k * local, s = w->s;
        /* a pass of a stage with k replicas takes k units (above); timed: its time */
        d->t = start + (tm ? (kind == 'F' ? tm->f[s] : kind == 'B' ? tm->b[s] : tm->w[s]) : w->k);
        if (d->t > end) end = d->t;
        if (kind == 'F' && s < S - 1) ready_act[(long)(s + 1) * M + mb] = d->t + (tm && tm->msg ? tm->msg[s] : 0);
        if (kind == 'F' && s == S - 1) ready_grad[(long)s * M + mb] = d->t;
        if (kind == 'B' && s > 0) ready_grad[(long)(s - 1) * M + mb] = d->t + (tm && tm->msg ? tm->msg[s - 1] : 0);
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

/* The step of the orders `all` (every device's passes, laid out as play's dev = -1
 * output) when each pass takes its time in tm and waits for what it needs: F for the
 * activation (the previous stage's F, plus the message), B for the gradient (the next
 * stage's B plus the message, or on the last stage its own F), W for its B (earlier on
 * the same device). */
static long replay_or_stuck(int S, int M, const zb_stage *z, int n_z, int D, const ppdl_zb_times *tm,
                            const ppdl_zb_pass *all);

static long replay(int S, int M, const zb_stage *z, int n_z, int D, const ppdl_zb_times *tm, const ppdl_zb_pass *all)
{
    long t = replay_or_stuck(S, M, z, n_z, D, tm, all);
    PPDL_CHECK(t >= 0, "ppdl_zb_order: the timed orders of S=%d M=%d cannot run", S, M);
    return t;
}

/* ... or -1 where they cannot run (a pass waits for one that never comes) */
static long replay_or_stuck(int S, int M, const zb_stage *z, int n_z, int D, const ppdl_zb_times *tm,
                            const ppdl_zb_pass *all)
{
    long *len = ppdl_xcalloc(3 * (size_t)D, sizeof(long)), *off = len + D, *t = len + 2 * D;
    int *next = ppdl_xcalloc((size_t)D, sizeof(int));
    for (int i = 0; i < n_z; i++) {
        len[z[i].dev] += 3L * z[i].n;
        for (int d = z[i].dev + 1; d < D; d++) off[d] += 3L * z[i].n;
    }
    long *end_f = ppdl_xmalloc(2 * (size_t)S * (size_t)M * sizeof(long)), *end_b = end_f + (size_t)S * M;
    for (long i = 0; i < 2L * S * M; i++) end_f[i] = NONE;
    long step = 0, left = 0;
    for (int d = 0; d < D; d++) left += len[d];
    while (left > 0) {
        long moved = 0;
        for (int d = 0; d < D; d++)
            for (; next[d] < len[d]; next[d]++, moved++) {
                ppdl_zb_pass p = all[off[d] + next[d]];
                long need = 0, at = (long)p.stage * M + p.mb, dur;
                if (p.kind == 'F') {
                    need = p.stage == 0 ? 0 : end_f[at - M] == NONE ? NONE : end_f[at - M] + (tm->msg ? tm->msg[p.stage - 1] : 0);
                    dur = tm->f[p.stage];
                } else if (p.kind == 'B') {
                    need = p.stage == S - 1 ? end_f[at]
                           : end_b[at + M] == NONE ? NONE : end_b[at + M] + (tm->msg ? tm->msg[p.stage] : 0);
                    dur = tm->b[p.stage];
                } else {
                    need = end_b[at];
                    dur = tm->w[p.stage];
                }
                if (need == NONE) break;
                t[d] = (t[d] > need ? t[d] : need) + dur;
                if (p.kind == 'F') end_f[at] = t[d];
                if (p.kind == 'B') end_b[at] = t[d];
                if (t[d] > step) step = t[d];
            }
        if (moved == 0) {
            step = -1;
            break;
        }
        left -= moved;
    }
    free(len);
    free(next);
    free(end_f);
    return step;
}

// ----------------------------------------------------------------------------
// a local search on the chosen orders

/* The local search runs where the passes are at most this many (S x 3M; e.g. 8
 * stages of 16 micro-batches), in at most this many sweeps, each pass moved at most
 * IMPROVE_REACH places: each sweep replays the orders once per candidate move, so its
 * cost grows as the square of the passes, and the planner's simulator builds the lists
 * of every plan it plays. */
#define IMPROVE_MAX_PASSES 400
#define IMPROVE_MAX_SWEEPS 8
#define IMPROVE_REACH 4
/* a device runs one stream, or ZB-V's two stages */
#define PPDL_ZB_MAX_STREAMS_PER_DEVICE 2

/* the stream of device `dev` running pass p (a device runs one stream, or ZB-V's two
 * stages: one stream per stage) */
static int stream_of(const zb_stage *z, int n_z, int dev, ppdl_zb_pass p)
{
    for (int i = 0; i < n_z; i++)
        if (z[i].dev == dev && z[i].s == p.stage && (p.mb - z[i].q) % z[i].k == 0) return i;
    return -1;
}

/* the most micro-batches each stream holds (F done, W not) and the most W's it has
 * pending (B done, W not) in the orders `all`, into held[i] / pend[i] */
static void stream_peaks(const zb_stage *z, int n_z, const long *off, const long *len, const ppdl_zb_pass *all,
                         int *held, int *pend)
{
    for (int i = 0; i < n_z; i++) {
        int f = 0, b = 0, w = 0;
        held[i] = pend[i] = 0;
        for (long j = 0; j < len[z[i].dev]; j++) {
            ppdl_zb_pass p = all[off[z[i].dev] + j];
            if (stream_of(z, n_z, z[i].dev, p) != i) continue;
            f += p.kind == 'F';
            b += p.kind == 'B';
            w += p.kind == 'W';
            if (f - w > held[i]) held[i] = f - w;
            if (b - w > pend[i]) pend[i] = b - w;
        }
    }
}

/* Device d's sequence seq[0..n-1] keeps every stream's rules: per kind in micro-batch
 * order, B after its F and W after its B, at most held[i] micro-batches held (and the
 * stream's cap) and pend[i] W's pending (the bounds the caller sets). Deadlocks are the
 * replay's to find. */
static int device_keeps_rules(const zb_stage *z, int n_z, int d, const ppdl_zb_pass *seq, long n, const int *held,
                              const int *pend)
{
    int cnt[3 * PPDL_ZB_MAX_STREAMS_PER_DEVICE] = {0}, ids[PPDL_ZB_MAX_STREAMS_PER_DEVICE], n_ids = 0;
    for (long x = 0; x < n; x++) {
        int i = stream_of(z, n_z, d, seq[x]), c = 0;
        while (c < n_ids && ids[c] != i) c++;
        if (c == n_ids) {
            if (n_ids == PPDL_ZB_MAX_STREAMS_PER_DEVICE) return 0;
            ids[n_ids++] = i;
        }
        int *f = &cnt[3 * c], *b = f + 1, *w = f + 2;
        /* the stream's local index of the pass: micro-batch q + k * index */
        int local = (seq[x].mb - z[i].q) / z[i].k;
        if (seq[x].kind == 'F') {
            if (local != *f) return 0;
            ++*f;
        } else if (seq[x].kind == 'B') {
            if (local != *b || local >= *f) return 0;
            ++*b;
        } else {
            if (local != *w || local >= *b) return 0;
            ++*w;
        }
        if (*f - *w > held[i] || *f - *w > z[i].cap || *b - *w > pend[i]) return 0;
    }
    return 1;
}

/* move seq[j] to position j + delta (delta != 0), the passes between shifting by one */
static void move_pass(ppdl_zb_pass *seq, long j, long delta)
{
    ppdl_zb_pass x = seq[j];
    if (delta > 0) memmove(&seq[j], &seq[j + 1], (size_t)delta * sizeof *seq);
    else memmove(&seq[j + delta + 1], &seq[j + delta], (size_t)(-delta) * sizeof *seq);
    seq[j + delta] = x;
}

/* Greedy plays choose locally; on two equal stages the timed play's order is the best
 * there is, but with unequal stages and messages a play can be well off the best order
 * (perf/bench-zb-orders.c searches every order exhaustively). So the best
 * play's orders are improved by moving one pass of a device up to IMPROVE_REACH places
 * earlier or later wherever the replayed step gets strictly shorter, sweep after sweep
 * until one changes nothing, within each stream's peaks of the start's and the unit
 * play's orders (what the planner counts, ppdl_schedule_timed_ok). Deterministic.
 * Returns the step. */
static long improve(int S, int M, const zb_stage *z, int n_z, int D, const ppdl_zb_times *tm, ppdl_zb_pass *all,
                    const ppdl_zb_pass *unit, long step)
{
    long *len = ppdl_xcalloc(2 * (size_t)D, sizeof(long)), *off = len + D, total = 0;
    for (int i = 0; i < n_z; i++) {
        len[z[i].dev] += 3L * z[i].n;
        for (int d = z[i].dev + 1; d < D; d++) off[d] += 3L * z[i].n;
        total += 3L * z[i].n;
    }
    if (total > IMPROVE_MAX_PASSES) {
        free(len);
        return step;
    }
    int *held = ppdl_xmalloc(4 * (size_t)n_z * sizeof(int)), *pend = held + n_z, *uh = held + 2 * n_z,
        *up = held + 3 * n_z;
    stream_peaks(z, n_z, off, len, all, held, pend);
    stream_peaks(z, n_z, off, len, unit, uh, up);
    for (int i = 0; i < n_z; i++) {
        if (uh[i] > held[i]) held[i] = uh[i];
        if (up[i] > pend[i]) pend[i] = up[i];
    }
    for (int sweep = 0, changed = 1; changed && sweep < IMPROVE_MAX_SWEEPS; sweep++) {
        changed = 0;
        for (int d = 0; d < D; d++) {
            ppdl_zb_pass *seq = all + off[d];
            for (long j = 0; j < len[d]; j++)
                for (long delta = -IMPROVE_REACH; delta <= IMPROVE_REACH; delta++) {
                    if (delta == 0 || j + delta < 0 || j + delta >= len[d]) continue;
                    move_pass(seq, j, delta);
                    long t = device_keeps_rules(z, n_z, d, seq, len[d], held, pend)
                                 ? replay_or_stuck(S, M, z, n_z, D, tm, all)
                                 : -1;
                    if (t >= 0 && t < step) {
                        step = t;
                        changed = 1;
                    } else {
                        move_pass(seq, j + delta, -delta);
                    }
                }
        }
    }
    free(held);
    free(len);
    return step;
}

/* The play of the streams z (restored to their start after), with times tm or NULL.
 * Timed, the greedy's choices are local: a W started just before a message arrives
 * delays the critical path by the W, and the unit play can beat the timed one under
 * the very times (tests/unit/test_schedule.c). So three plays are each replayed under
 * tm, and the orders of the shortest taken (ties: the earlier): the unit play's, the
 * timed play with a W wherever its stage is idle, and the timed play with a W only
 * where it fits before the next B or F. Returns the step: units, or tm's ticks. */
static long best_play(int S, int M, zb_stage *z, int n_z, int D, const ppdl_zb_times *tm, int dev, ppdl_zb_pass *out)
{
    if (!tm) return play(S, M, z, n_z, D, NULL, 0, dev, out);
    long total = 0;
    for (int i = 0; i < n_z; i++) total += 3L * z[i].n;
    ppdl_zb_pass *cand = ppdl_xmalloc(2 * (size_t)total * sizeof *cand), *best = cand + total;
    zb_stage *fresh = ppdl_xmalloc((size_t)n_z * sizeof *fresh);
    memcpy(fresh, z, (size_t)n_z * sizeof *fresh);
    long best_t = -1;
    ppdl_zb_pass *unit = ppdl_xmalloc((size_t)total * sizeof *unit);
    for (int c = 0; c < 3; c++) {
        memcpy(z, fresh, (size_t)n_z * sizeof *z);
        play(S, M, z, n_z, D, c ? tm : NULL, c == 2, -1, cand);
        long t = replay(S, M, z, n_z, D, tm, cand);
        if (c == 0) memcpy(unit, cand, (size_t)total * sizeof *cand);
        if (best_t < 0 || t < best_t) best_t = t, memcpy(best, cand, (size_t)total * sizeof *cand);
    }
    memcpy(z, fresh, (size_t)n_z * sizeof *z);
    best_t = improve(S, M, z, n_z, D, tm, best, unit, best_t);
    free(unit);
    long from = 0, n = total;
    if (dev >= 0) {
        n = 0;
        for (int i = 0; i < n_z; i++) {
            if (z[i].dev < dev) from += 3L * z[i].n;
            if (z[i].dev == dev) n += 3L * z[i].n;
        }
    }
    memcpy(out, best + from, (size_t)n * sizeof *out);
    free(cand);
    free(fresh);
    return best_t;
}

/* the play of a layout (ppdl_zb_order_layout) */
static long play_layout(int S, int M, const int *k, const int *cap, const ppdl_zb_times *tm, int dev,
                        ppdl_zb_pass *out)
{
    zb_stage *z;
    int D = layout_streams(S, M, k, cap, &z);
    long t = best_play(S, M, z, D, D, tm, dev, out);
    free(z);
    return t;
}

/* every cap at least 1 (a device that may hold nothing never runs), every stage on
 * 1..M replicas */
static void check_args(const char *fn, int S, int M, const int *k, const int *cap, const ppdl_zb_times *tm)
{
    PPDL_CHECK(S >= 1 && M >= 1 && cap != NULL, "%s: S=%d M=%d cap=%p", fn, S, M, (const void *)cap);
    int D = 0;
    for (int s = 0; s < S; s++) {
        PPDL_CHECK(!k || (k[s] >= 1 && k[s] <= M), "%s: stage %d has %d replicas (M=%d)", fn, s, k[s], M);
        D += k ? k[s] : 1;
    }
    for (int d = 0; d < D; d++) PPDL_CHECK(cap[d] >= 1, "%s: device %d of %d has cap %d", fn, d, D, cap[d]);
    for (int s = 0; tm && s < S; s++) {
        PPDL_CHECK(tm->f[s] >= 1 && tm->b[s] >= 1 && tm->w[s] >= 1, "%s: stage %d's passes take %ld, %ld, %ld ticks",
                   fn, s, tm->f[s], tm->b[s], tm->w[s]);
        PPDL_CHECK(!tm->msg || s == S - 1 || tm->msg[s] >= 0, "%s: a message after stage %d takes %ld ticks", fn, s,
                   tm->msg[s]);
    }
}

long ppdl_zb_order(int S, int M, const int *cap, int s, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order", S, M, NULL, cap, NULL);
    PPDL_CHECK(s >= 0 && s < S, "ppdl_zb_order: stage %d of %d", s, S);
    return play_layout(S, M, NULL, cap, NULL, s, out);
}

long ppdl_zb_order_all(int S, int M, const int *cap, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_all", S, M, NULL, cap, NULL);
    return play_layout(S, M, NULL, cap, NULL, -1, out);
}

long ppdl_zb_order_layout(int S, int M, const int *k, const int *cap, const ppdl_zb_times *tm, int dev,
                          ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_layout", S, M, k, cap, tm);
    return play_layout(S, M, k, cap, tm, dev, out);
}

long ppdl_zb_order_devices(int S, int M, int D, const int *dev_of, const int *cap, const ppdl_zb_times *tm, int dev,
                           ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_devices", S, M, NULL, cap, tm);
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
    long t = best_play(S, M, z, n_z, D, tm, dev, out);
    free(z);
    return t;
}

long ppdl_zb_replay_layout(int S, int M, const int *k, const ppdl_zb_pass *all, const ppdl_zb_times *tm)
{
    PPDL_CHECK(tm != NULL, "ppdl_zb_replay_layout: no times");
    int *cap = ppdl_xmalloc((size_t)(S * M + 1) * sizeof *cap);
    for (int i = 0; i < S * M + 1; i++) cap[i] = 1; /* unused by the replay */
    check_args("ppdl_zb_replay_layout", S, M, k, cap, tm);
    zb_stage *z;
    int D = layout_streams(S, M, k, cap, &z);
    long t = replay(S, M, z, D, D, tm, all);
    free(z);
    free(cap);
    return t;
}

long ppdl_zb_replay_devices(int S, int M, int D, const int *dev_of, const ppdl_zb_pass *all, const ppdl_zb_times *tm)
{
    PPDL_CHECK(tm != NULL && D >= 1, "ppdl_zb_replay_devices: no times, or %d devices", D);
    zb_stage *z = ppdl_xcalloc((size_t)S, sizeof *z);
    int n_z = 0;
    for (int d = 0; d < D; d++) /* the streams as ppdl_zb_order_devices lists them */
        for (int s = S - 1; s >= 0; s--)
            if (dev_of[s] == d) z[n_z++] = (zb_stage){.s = s, .k = 1, .n = M, .dev = d, .cap = 1};
    long t = replay(S, M, z, n_z, D, tm, all);
    free(z);
    return t;
}
