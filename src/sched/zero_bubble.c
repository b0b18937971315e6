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
 */
#include "sched/zero_bubble.h"

#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

typedef struct zb_stage {
    int nf, nb, nw;        /* next F, B, W (each in micro-batch order) */
    long t;                /* when the stage is free */
    int n;                 /* passes played */
} zb_stage;

enum { NONE = -1 };

/* the pass stage s would start next and when: kind 'F'/'B'/'W', or 0 when it can start
 * none yet */
static char next_pass(const zb_stage *z, int s, int M, int cap, const long *ready_act, const long *ready_grad,
                      long *start)
{
    char kind = 0;
    long best = 0;
    /* in priority order: B, F, W; a later one wins only by starting strictly earlier */
    if (z->nb < z->nf && ready_grad[(long)s * M + z->nb] != NONE) {
        long r = ready_grad[(long)s * M + z->nb];
        kind = 'B';
        best = r > z->t ? r : z->t;
    }
    if (z->nf < M && z->nf - z->nw < cap && ready_act[(long)s * M + z->nf] != NONE) {
        long r = ready_act[(long)s * M + z->nf], at = r > z->t ? r : z->t;
        if (!kind || at < best) kind = 'F', best = at;
    }
    if (z->nw < z->nb && (!kind || z->t < best)) kind = 'W', best = z->t;
    *start = best;
    return kind;
}

/* the play, recording stage s's passes into out[0..3M-1], or (s = -1) every stage's,
 * stage r's into out[r*3M ..] */
static long play(int S, int M, const int *cap, int s, ppdl_zb_pass *out)
{
    zb_stage *z = ppdl_xcalloc((size_t)S, sizeof *z);
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
        for (int r = 0; r < S; r++) {
            long at;
            char k = next_pass(&z[r], r, M, cap[r], ready_act, ready_grad, &at);
            if (k && (who < 0 || at < start)) who = r, kind = k, start = at;
        }
        PPDL_CHECK(who >= 0, "ppdl_zb_order: no stage can run a pass (S=%d M=%d)", S, M);
        zb_stage *w = &z[who];
        int mb = kind == 'F' ? w->nf++ : kind == 'B' ? w->nb++ : w->nw++;
        w->t = start + 1;
        if (w->t > end) end = w->t;
        if (kind == 'F' && who < S - 1) ready_act[(long)(who + 1) * M + mb] = w->t;
        if (kind == 'F' && who == S - 1) ready_grad[(long)who * M + mb] = w->t;
        if (kind == 'B' && who > 0) ready_grad[(long)(who - 1) * M + mb] = w->t;
        if (who == s) out[w->n] = (ppdl_zb_pass){kind, mb};
        if (s < 0) out[(long)who * 3 * M + w->n] = (ppdl_zb_pass){kind, mb};
        w->n++;
    }
    free(z);
    free(ready_act);
    free(ready_grad);
    return end;
}

/* every cap at least 1 (a stage that may hold nothing never runs) */
static void check_args(const char *fn, int S, int M, const int *cap)
{
    PPDL_CHECK(S >= 1 && M >= 1 && cap != NULL, "%s: S=%d M=%d cap=%p", fn, S, M, (const void *)cap);
    for (int r = 0; r < S; r++) PPDL_CHECK(cap[r] >= 1, "%s: stage %d of %d has cap %d", fn, r, S, cap[r]);
}

long ppdl_zb_order(int S, int M, const int *cap, int s, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order", S, M, cap);
    PPDL_CHECK(s >= 0 && s < S, "ppdl_zb_order: stage %d of %d", s, S);
    return play(S, M, cap, s, out);
}

long ppdl_zb_order_all(int S, int M, const int *cap, ppdl_zb_pass *out)
{
    check_args("ppdl_zb_order_all", S, M, cap);
    return play(S, M, cap, -1, out);
}
