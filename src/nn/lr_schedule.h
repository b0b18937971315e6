/* lr_schedule.h — the learning rate of each step: constant, cosine, linear, or wsd
 * (warmup-stable-decay), each after an optional linear warm-up, the formulas of
 * llm.c's schedulers (in double precision). Steps count from 0; lr is the peak.
 *
 *   warm-up       step < W:          lr * (step + 1) / W
 *   constant      after it:          lr
 *   cosine        r = (step - W) / (D - W) clamped to [0, 1]:
 *                                    min + (lr - min) * (1 + cos(pi r)) / 2
 *   linear        r as for cosine:   lr - (lr - min) * r
 *   wsd           P = W + (1 - F) (D - W), the stable part's end (F: --decay-fraction):
 *                 step < P:          lr
 *                 else r = (step - P) / (D - P) clamped:  min + (lr - min) (1 - sqrt(r))
 * D is --decay-steps (default: --steps), min --min-lr (or --min-lr-ratio x lr). A
 * schedule is a pure function of the step and these numbers, so a resumed run (or a
 * run on any number of ranks) takes the same learning rate at every step.
 */
#ifndef PPDL_LR_SCHEDULE_H
#define PPDL_LR_SCHEDULE_H

typedef enum ppdl_lr_kind { PPDL_LR_CONSTANT = 0, PPDL_LR_COSINE, PPDL_LR_LINEAR, PPDL_LR_WSD } ppdl_lr_kind;

typedef struct ppdl_lr_schedule {
    int kind;                  /* ppdl_lr_kind */
    double lr;                 /* the peak (after the warm-up) */
    double min_lr;             /* where cosine, linear and wsd end */
    long warmup;               /* W: linear warm-up steps, 0: none */
    long decay_steps;          /* D: the step the decay ends at */
    double decay_fraction;     /* F: wsd's decaying part of the steps after the warm-up */
} ppdl_lr_schedule;

/* "constant", "cosine", "linear", "wsd" -> kind; -1 when unknown */
int ppdl_lr_parse(const char *name);
const char *ppdl_lr_name(int kind);
/* the learning rate of step `step` (from 0) */
double ppdl_lr_at(const ppdl_lr_schedule *s, long step);

#endif
