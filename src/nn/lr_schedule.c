/* lr_schedule.c — the learning rate of each step (lr_schedule.h has the formulas) */
#include "nn/lr_schedule.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"constant", "cosine", "linear", "wsd"};

int ppdl_lr_parse(const char *name)
{
    for (int k = 0; k < 4; k++)
        if (name && !strcmp(name, names[k])) return k;
    return -1;
}

const char *ppdl_lr_name(int kind) { return kind >= 0 && kind < 4 ? names[kind] : "?"; }

/* (step - from) / (to - from), clamped to [0, 1]; 1 when the span is empty */
static double ratio(long step, double from, double to)
{
    if (!(to > from)) return 1;
    double r = ((double)step - from) / (to - from);
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

double ppdl_lr_at(const ppdl_lr_schedule *s, long step)
{
    if (s->warmup > 0 && step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    double W = (double)s->warmup, D = (double)s->decay_steps, span = s->lr - s->min_lr;
    switch (s->kind) {
    case PPDL_LR_COSINE: return s->min_lr + span * 0.5 * (1.0 + cos(M_PI * ratio(step, W, D)));
    case PPDL_LR_LINEAR: return s->lr - span * ratio(step, W, D);
    case PPDL_LR_WSD: {
        double P = W + (1.0 - s->decay_fraction) * (D - W);
        if ((double)step < P) return s->lr;
        return s->min_lr + span * (1.0 - sqrt(ratio(step, P, D)));
    }
    default: return s->lr;
    }
}
