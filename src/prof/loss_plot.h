/* loss_plot.h — the training curve as an SVG picture (--loss-plot FILE.svg): training
 * loss (each step, and its running mean) and validation loss against the step, with
 * the tokens (or samples) seen on a second axis along the top; linear or logarithmic
 * loss axis. Written to PATH.tmp and renamed onto PATH; the same input gives the same
 * bytes. */
#ifndef PPDL_PROF_LOSS_PLOT_H
#define PPDL_PROF_LOSS_PLOT_H

#include <stddef.h>

typedef struct ppdl_loss_curve {
    const long *step;          /* [n] steps (from 1), increasing */
    const double *loss;        /* [n] their training loss (non-finite ones are left out) */
    int n;
    const long *val_step;      /* [n_val] steps of the evaluations (0: before training) */
    const double *val_loss;    /* [n_val] */
    int n_val;
    double per_step;           /* tokens (or samples) per step, for the top axis */
    const char *per_step_unit; /* "tokens" or "samples" */
    int log_scale;             /* the loss axis logarithmic */
    const char *title;
} ppdl_loss_curve;

int ppdl_loss_plot_write_svg(const char *path, const ppdl_loss_curve *c, char *err, size_t errlen);

#endif
