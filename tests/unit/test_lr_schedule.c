/* test_lr_schedule.c — the learning rate of each step (nn/lr_schedule.h) against its
 * formulas written out here at the points where they are known exactly: the warm-up's
 * line, the peak, the cosine's midpoint and end, the linear midpoint, wsd's stable part
 * and its 1 - sqrt decay, the clamp after the decay, and constant = --lr bit for bit. */
#include <math.h>
#include <stdio.h>

#include "nn/lr_schedule.h"
#include "tap.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-15 * fabs(b) + 1e-18; }

int main(void)
{
    ok(ppdl_lr_parse("constant") == PPDL_LR_CONSTANT && ppdl_lr_parse("cosine") == PPDL_LR_COSINE &&
           ppdl_lr_parse("linear") == PPDL_LR_LINEAR && ppdl_lr_parse("wsd") == PPDL_LR_WSD &&
           ppdl_lr_parse("step") == -1 && ppdl_lr_parse(NULL) == -1,
       "names parse; unknown names give -1");

    ppdl_lr_schedule s = {.kind = PPDL_LR_CONSTANT, .lr = 3e-4, .min_lr = 0, .warmup = 0, .decay_steps = 100};
    int same = 1;
    for (long k = 0; k < 200; k++) same &= ppdl_lr_at(&s, k) == 3e-4;
    ok(same, "constant without warm-up: exactly --lr at every step (the old behaviour, bit for bit)");

    s.warmup = 10;
    ok(close_to(ppdl_lr_at(&s, 0), 3e-5) && close_to(ppdl_lr_at(&s, 4), 1.5e-4) && close_to(ppdl_lr_at(&s, 9), 3e-4) &&
           ppdl_lr_at(&s, 10) == 3e-4,
       "warm-up: lr (step + 1) / W, then lr (got %g %g %g %g)", ppdl_lr_at(&s, 0), ppdl_lr_at(&s, 4),
       ppdl_lr_at(&s, 9), ppdl_lr_at(&s, 10));

    s = (ppdl_lr_schedule){.kind = PPDL_LR_COSINE, .lr = 1.0, .min_lr = 0.1, .warmup = 10, .decay_steps = 110};
    ok(close_to(ppdl_lr_at(&s, 10), 1.0) && close_to(ppdl_lr_at(&s, 60), 0.55) && close_to(ppdl_lr_at(&s, 110), 0.1) &&
           close_to(ppdl_lr_at(&s, 500), 0.1),
       "cosine: lr at the warm-up's end, (lr + min) / 2 halfway, min at --decay-steps and after (got %.17g %.17g "
       "%.17g)", ppdl_lr_at(&s, 10), ppdl_lr_at(&s, 60), ppdl_lr_at(&s, 110));
    ok(close_to(ppdl_lr_at(&s, 35), 0.1 + 0.9 * 0.5 * (1 + cos(M_PI * 0.25))),
       "cosine: a quarter of the way, min + (lr - min)(1 + cos(pi/4)) / 2");

    s.kind = PPDL_LR_LINEAR;
    ok(close_to(ppdl_lr_at(&s, 10), 1.0) && close_to(ppdl_lr_at(&s, 60), 0.55) && close_to(ppdl_lr_at(&s, 85), 0.325) &&
           close_to(ppdl_lr_at(&s, 110), 0.1) && close_to(ppdl_lr_at(&s, 999), 0.1),
       "linear: lr - (lr - min) r: 1, 0.55, 0.325, 0.1, and 0.1 after");

    s = (ppdl_lr_schedule){.kind = PPDL_LR_WSD, .lr = 1.0, .min_lr = 0.0, .warmup = 10, .decay_steps = 110,
                           .decay_fraction = 0.2};
    /* stable until P = 10 + 0.8 * 100 = 90, then 1 - sqrt((k - 90) / 20) */
    ok(ppdl_lr_at(&s, 10) == 1.0 && ppdl_lr_at(&s, 89) == 1.0 && ppdl_lr_at(&s, 90) == 1.0 &&
           close_to(ppdl_lr_at(&s, 95), 0.5) && close_to(ppdl_lr_at(&s, 110), 0.0) && ppdl_lr_at(&s, 200) == 0.0,
       "wsd: stable until the last 20%%, then 1 - sqrt(r): 1 at 89 and 90, 0.5 at 95, 0 at 110 (got %.17g)",
       ppdl_lr_at(&s, 95));
    s.decay_fraction = 1.0;
    ok(close_to(ppdl_lr_at(&s, 35), 0.5), "wsd with --decay-fraction 1: the decay starts after the warm-up");
    done_testing();
    return exit_status();
}
