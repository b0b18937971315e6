/* loss_plot.c — see loss_plot.h. Plain SVG, no script: opens in any browser. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"
#include "prof/loss_plot.h"

enum {
    W = 960, H = 540,            /* the picture, px */
    PX0 = 84, PX1 = W - 36,      /* the plot's left and right edges */
    PY0 = 96, PY1 = H - 72,      /* its top and bottom edges */
    MAX_POINTS = 4000            /* a polyline of more steps is thinned to about this */
};
#define INK "#1f2933"
#define INK_SOFT "#616e7c"
#define GRID "#e4e7eb"
#define TRAIN_RAW "#9fc3e7"
#define TRAIN_MEAN "#1f5fa8"
#define VAL "#d9822b"

typedef struct axis {
    double lo, hi;               /* the data range shown */
    int log;                     /* logarithmic (lo > 0) */
} axis;

static double to_unit(const axis *a, double v)
{
    if (a->log) return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    return (v - a->lo) / (a->hi - a->lo);
}
static double xpx(const axis *a, double v) { return PX0 + (PX1 - PX0) * to_unit(a, v); }
static double ypx(const axis *a, double v) { return PY1 - (PY1 - PY0) * to_unit(a, v); }

/* a round tick spacing: 1, 2 or 5 x 10^k, about `want` ticks over the range */
static double nice_step(double range, int want)
{
    double raw = range / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* "12", "1.5k", "3.2M", "1.1G": short labels for the tokens axis */
static void short_number(double v, char *buf, size_t len)
{
    const char *suffix[] = {"", "k", "M", "G", "T"};
    int k = 0;
    while (fabs(v) >= 1000 && k < 4) v /= 1000, k++;
    snprintf(buf, len, fabs(v) >= 100 || v == floor(v) ? "%.0f%s" : "%.1f%s", v, suffix[k]);
}

static void grid_and_labels(FILE *f, const axis *xa, const axis *ya, const ppdl_loss_curve *c)
{
    /* steps: along the bottom; tokens (or samples) at the same places along the top */
    double xs = nice_step(xa->hi - xa->lo, 8);
    for (double t = ceil(xa->lo / xs) * xs; t <= xa->hi + 1e-9 * xs; t += xs) {
        double x = xpx(xa, t);
        char top[32];
        short_number(t * c->per_step, top, sizeof top);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"" GRID "\"/>\n", x, PY0, x, PY1);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"" INK_SOFT "\" text-anchor=\"middle\">%.0f</text>\n",
                x, PY1 + 18, t);
        if (c->per_step > 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"" INK_SOFT "\" text-anchor=\"middle\">%s</text>\n",
                    x, PY0 - 8, top);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" fill=\"" INK "\" text-anchor=\"middle\">step</text>\n",
            (PX0 + PX1) / 2, PY1 + 42);
    if (c->per_step > 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" fill=\"" INK "\" text-anchor=\"middle\">%s seen</text>\n",
                (PX0 + PX1) / 2, PY0 - 28, c->per_step_unit);
    /* loss: round values, or on a log axis 1, 2, 5 x 10^k where the range spans them */
    double ticks[64];
    int n = 0;
    if (ya->log && ya->hi / ya->lo >= 3) {
        for (double p = pow(10, floor(log10(ya->lo))); p <= ya->hi && n < 60; p *= 10)
            for (int m = 0; m < 3; m++) {
                double v = p * (m == 0 ? 1 : m == 1 ? 2 : 5);
                if (v >= ya->lo && v <= ya->hi) ticks[n++] = v;
            }
    } else {
        double ys = nice_step(ya->hi - ya->lo, 6);
        for (double v = ceil(ya->lo / ys) * ys; v <= ya->hi + 1e-9 * ys && n < 60; v += ys) ticks[n++] = v;
    }
    for (int i = 0; i < n; i++) {
        double y = ypx(ya, ticks[i]);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"" GRID "\"/>\n", PX0, y, PX1, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" fill=\"" INK_SOFT "\" text-anchor=\"end\">%g</text>\n",
                PX0 - 8, y + 4, ticks[i]);
    }
    fprintf(f, "<text x=\"22\" y=\"%d\" font-size=\"13\" fill=\"" INK "\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 22 %d)\">loss%s</text>\n",
            (PY0 + PY1) / 2, (PY0 + PY1) / 2, ya->log ? " (log scale)" : "");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"" INK_SOFT "\"/>\n", PX0,
            PY0, PX1 - PX0, PY1 - PY0);
}

/* one polyline through the finite points, every `stride`-th one (and the last) */
static void polyline(FILE *f, const axis *xa, const axis *ya, const long *x, const double *y, int n, int stride,
                     const char *colour, double width)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-linejoin=\"round\" points=\"", colour,
            width);
    for (int i = 0; i < n; i++)
        if ((i % stride == 0 || i == n - 1) && isfinite(y[i]))
            fprintf(f, "%.1f,%.1f ", xpx(xa, (double)x[i]), ypx(ya, y[i]));
    fputs("\"/>\n", f);
}

static void legend(FILE *f, const ppdl_loss_curve *c, int window)
{
    int x = PX1 - 250, y = PY0 + 18;
    struct { const char *colour, *label; double width; int dot; } items[3] = {
        {TRAIN_RAW, "training loss, each step", 1.2, 0},
        {TRAIN_MEAN, NULL, 2.4, 0},
        {VAL, "validation loss", 2.0, 1},
    };
    char mean[64];
    snprintf(mean, sizeof mean, "training loss, mean of %d step%s", window, window == 1 ? "" : "s");
    items[1].label = mean;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"240\" height=\"%d\" fill=\"#ffffff\" fill-opacity=\"0.85\" "
               "stroke=\"" GRID "\"/>\n", x - 10, y - 14, 6 + 20 * (1 + (window > 1) + (c->n_val > 0)));
    for (int k = 0; k < 3; k++) {
        if ((k == 1 && window == 1) || (k == 2 && !c->n_val)) continue;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n", x, y, x + 24,
                y, items[k].colour, items[k].width);
        if (items[k].dot) fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>\n", x + 12, y, items[k].colour);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"" INK "\">%s</text>\n", x + 32, y + 4, items[k].label);
        y += 20;
    }
}

static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int ppdl_loss_plot_write_svg(const char *path, const ppdl_loss_curve *c, char *err, size_t errlen)
{
    /* the ranges: every finite loss, every step (0 when evaluated before training) */
    axis xa = {INFINITY, -INFINITY, 0}, ya = {INFINITY, -INFINITY, c->log_scale};
    for (int i = 0; i < c->n; i++) {
        xa.lo = fmin(xa.lo, (double)c->step[i]), xa.hi = fmax(xa.hi, (double)c->step[i]);
        if (isfinite(c->loss[i]) && (!ya.log || c->loss[i] > 0))
            ya.lo = fmin(ya.lo, c->loss[i]), ya.hi = fmax(ya.hi, c->loss[i]);
    }
    for (int i = 0; i < c->n_val; i++) {
        xa.lo = fmin(xa.lo, (double)c->val_step[i]), xa.hi = fmax(xa.hi, (double)c->val_step[i]);
        if (isfinite(c->val_loss[i]) && (!ya.log || c->val_loss[i] > 0))
            ya.lo = fmin(ya.lo, c->val_loss[i]), ya.hi = fmax(ya.hi, c->val_loss[i]);
    }
    if (!(xa.lo <= xa.hi) || !(ya.lo <= ya.hi))
        return ppdl_errf(err, errlen, "--loss-plot %s: no finite loss to draw yet", path);
    if (xa.hi - xa.lo < 1) xa.hi = xa.lo + 1;
    if (ya.log) {
        double pad = pow(ya.hi / ya.lo, 0.05);
        ya.lo /= pad > 1.001 ? pad : 1.05, ya.hi *= pad > 1.001 ? pad : 1.05;
    } else {
        double pad = 0.05 * (ya.hi - ya.lo);
        if (pad <= 0) pad = 0.05 * fabs(ya.hi) + 1e-3;
        ya.lo -= pad, ya.hi += pad;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ppdl_errf(err, errlen, "--loss-plot %s: cannot write %s: %s", path, tmp, strerror(errno));
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"'Helvetica Neue', Helvetica, Arial, 'DejaVu Sans', sans-serif\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fputs("<title>", f);
    put_escaped(f, c->title);
    fputs("</title>\n<text x=\"24\" y=\"32\" font-size=\"18\" font-weight=\"600\" fill=\"" INK "\">", f);
    put_escaped(f, c->title);
    fputs("</text>\n", f);
    grid_and_labels(f, &xa, &ya, c);
    /* the running mean of the last `window` steps: the trend through each step's noise */
    int window = c->n >= 50 ? c->n / 50 : 1, stride = c->n > MAX_POINTS ? c->n / MAX_POINTS : 1;
    double *mean = ppdl_xmalloc((size_t)(c->n ? c->n : 1) * sizeof *mean), sum = 0;
    int finite = 0;
    for (int i = 0; i < c->n; i++) {
        if (isfinite(c->loss[i])) sum += c->loss[i], finite++;
        int j = i - window;
        if (j >= 0 && isfinite(c->loss[j])) sum -= c->loss[j], finite--;
        mean[i] = finite ? sum / finite : NAN;
    }
    polyline(f, &xa, &ya, c->step, c->loss, c->n, stride, TRAIN_RAW, 1.2);
    if (window > 1) polyline(f, &xa, &ya, c->step, mean, c->n, stride, TRAIN_MEAN, 2.4);
    free(mean);
    if (c->n_val) {
        polyline(f, &xa, &ya, c->val_step, c->val_loss, c->n_val, 1, VAL, 2.0);
        for (int i = 0; i < c->n_val; i++)
            if (isfinite(c->val_loss[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"" VAL "\"><title>step %ld: validation "
                           "loss %.4f</title></circle>\n",
                        xpx(&xa, (double)c->val_step[i]), ypx(&ya, c->val_loss[i]), c->val_step[i], c->val_loss[i]);
    }
    legend(f, c, window);
    fputs("</svg>\n", f);
    int bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ppdl_errf(err, errlen, "--loss-plot %s: cannot write it: %s", path, strerror(e));
    }
    return 0;
}
