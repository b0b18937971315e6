/* timeline.c — a Chrome/Perfetto trace and an SVG picture of a pipeline step.
 *
 * Input: n timed records (rank, stage, kind, mb, t0_ms, t1_ms), timed by the
 * runtime or predicted by the simulator, for ranks 0..n_ranks-1.
 *
 * Trace (ppdl_trace_write_json): one process per rank ("rank R (stage S)"), thread 0
 * "compute" (forward, backward, optimizer, wait) and thread 1 "comm" (send/recv, which
 * overlap compute because sends do not block), one "X" event per record with ts/dur
 * in microseconds, name "F3" / "B3" / "send act 3" / "wait", cat the op kind,
 * args {mb, stage}. Records are written in the order given.
 *
 * Timeline (ppdl_timeline_write_svg): ranks as rows, time as x. Each row has a compute
 * lane (forward boxes blue, backward boxes orange, shaded by mb, labelled with the mb
 * when wide enough; optimizer purple; waits hatched (grey for a message, sand for an
 * all-reduce: the replicas' gradients, the finite check, the norm); idle left as the pale row
 * background) and a thin comm lane under it (send/recv marks, activation blue,
 * gradient orange). The title carries the bubble fraction: the idle share of the
 * n_ranks compute lanes between the first start and the last end of any record,
 * where busy = the union of forward, backward and optimizer intervals. Each row also
 * shows its own busy share at the right. Same input, same bytes.
 *
 * Both files are written to PATH.tmp and renamed onto PATH, so a reader never sees a
 * half-written file. Errors return -1 with a message naming the file.
 */
#include "prof/timeline.h"

#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// shared helpers

static int is_compute(int kind)
{
    return kind == PPDL_OP_FORWARD || kind == PPDL_OP_BACKWARD || kind == PPDL_OP_OPTIMIZER ||
           kind == PPDL_OP_BACKWARD_INPUT || kind == PPDL_OP_BACKWARD_WEIGHT;
}

static int is_comm(int kind)
{
    return kind == PPDL_OP_RECV_ACT || kind == PPDL_OP_SEND_ACT || kind == PPDL_OP_RECV_GRAD ||
           kind == PPDL_OP_SEND_GRAD;
}

static const char *kind_cat(int kind)
{
    return kind == PPDL_EV_WAIT        ? "wait"
           : kind == PPDL_EV_ALLREDUCE ? "allreduce wait"
           : kind == PPDL_EV_RECOMPUTE ? "recompute"
                                       : ppdl_op_name((ppdl_op_kind)kind);
}

/* "F3", "B3", "W3", "send act 3", "recv grad 3", "optimizer", "wait" (a fused backward
 * and a split one's B are both "B3": the category tells them apart) */
static const char *event_name(const ppdl_event_rec *e, char *buf, size_t len)
{
    switch (e->kind) {
    case PPDL_OP_FORWARD: snprintf(buf, len, "F%d", e->mb); break;
    case PPDL_OP_BACKWARD:
    case PPDL_OP_BACKWARD_INPUT: snprintf(buf, len, "B%d", e->mb); break;
    case PPDL_OP_BACKWARD_WEIGHT: snprintf(buf, len, "W%d", e->mb); break;
    case PPDL_OP_SEND_ACT: snprintf(buf, len, "send act %d", e->mb); break;
    case PPDL_OP_RECV_ACT: snprintf(buf, len, "recv act %d", e->mb); break;
    case PPDL_OP_SEND_GRAD: snprintf(buf, len, "send grad %d", e->mb); break;
    case PPDL_OP_RECV_GRAD: snprintf(buf, len, "recv grad %d", e->mb); break;
    case PPDL_OP_OPTIMIZER: snprintf(buf, len, "optimizer"); break;
    case PPDL_EV_RECOMPUTE: snprintf(buf, len, "recompute %d", e->mb); break;
    case PPDL_EV_ALLREDUCE: snprintf(buf, len, "allreduce wait"); break;
    default: snprintf(buf, len, "wait"); break;
    }
    return buf;
}

static int check_events(const char *path, const ppdl_event_rec *ev, int n, int n_ranks, char *err,
                        size_t errlen)
{
    if (!path || !*path) return ppdl_errf(err, errlen, "timeline: no output file name given");
    if (n_ranks < 1) return ppdl_errf(err, errlen, "%s: need at least one rank (got %d)", path, n_ranks);
    if (n < 0 || (n > 0 && !ev))
        return ppdl_errf(err, errlen, "%s: bad event array (n = %d)", path, n);
    for (int i = 0; i < n; i++) {
        const ppdl_event_rec *e = &ev[i];
        if (e->rank < 0 || e->rank >= n_ranks)
            return ppdl_errf(err, errlen, "%s: event %d has rank %d outside 0..%d", path, i, e->rank,
                             n_ranks - 1);
        if (!(is_compute(e->kind) || is_comm(e->kind) || e->kind == PPDL_EV_WAIT || e->kind == PPDL_EV_ALLREDUCE ||
              e->kind == PPDL_EV_RECOMPUTE))
            return ppdl_errf(err, errlen, "%s: event %d has unknown kind %d", path, i, e->kind);
        if (!isfinite(e->t0_ms) || !isfinite(e->t1_ms) || e->t1_ms < e->t0_ms)
            return ppdl_errf(err, errlen, "%s: event %d has bad times %g..%g ms", path, i, e->t0_ms,
                             e->t1_ms);
    }
    return 0;
}

/* The stages of each rank, as its rows' label: "stage 2", or where a rank holds
 * several (interleaved, zb-v) "stages 0, 2"; "" when it has no record. LABEL_LEN
 * bytes per rank (n_ranks). */
#define LABEL_LEN 48
static char *stages_of_ranks(const ppdl_event_rec *ev, int n, int n_ranks)
{
    char *lab = ppdl_xcalloc((size_t)n_ranks, LABEL_LEN);
    for (int r = 0; r < n_ranks; r++) {
        char list[LABEL_LEN] = "";
        int count = 0, len = 0;
        for (int prev = -1;; count++) { /* rank r's stages, ascending */
            int next = -1;
            for (int i = 0; i < n; i++)
                if (ev[i].rank == r && ev[i].stage > prev && (next < 0 || ev[i].stage < next)) next = ev[i].stage;
            if (next < 0) break;
            if (len < (int)sizeof list - 12) len += snprintf(list + len, sizeof list - (size_t)len, "%s%d", count ? ", " : "", next);
            prev = next;
        }
        if (count) snprintf(lab + (size_t)r * LABEL_LEN, LABEL_LEN, "stage%s %s", count > 1 ? "s" : "", list);
    }
    return lab;
}

/* Open PATH.tmp for writing; the name goes to tmp (PATH + ".tmp") */
static FILE *open_tmp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    if ((size_t)snprintf(tmp, tmplen, "%s.tmp", path) >= tmplen) {
        ppdl_errf(err, errlen, "%s: file name too long", path);
        return NULL;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) ppdl_errf(err, errlen, "%s: cannot write %s: %s", path, tmp, strerror(errno));
    return f;
}

/* Close f, and rename tmp onto path when everything was written */
static int finish_tmp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int bad_write = ferror(f);
    int bad_close = fclose(f) != 0;
    if (bad_write || bad_close) {
        int e = errno;
        unlink(tmp);
        return ppdl_errf(err, errlen, "%s: write failed: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ppdl_errf(err, errlen, "%s: cannot rename %s onto it: %s", path, tmp, strerror(e));
    }
    return 0;
}

// ----------------------------------------------------------------------------
// Chrome trace JSON

/* ms -> us, rounded to the nanosecond so the numbers print short */
static double to_us(double ms) { return round(ms * 1e6) / 1e3; }

static int put_json(FILE *f, json_t *obj, int last)
{
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(obj);
    if (!s) return -1;
    fprintf(f, "%s%s\n", s, last ? "" : ",");
    free(s);
    return 0;
}

static json_t *meta_event(const char *what, int pid, int tid, const char *key, json_t *value)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:{s:o}}", "name", what, "ph", "M", "pid", pid, "tid", tid,
                     "args", key, value);
}

int ppdl_trace_write_json(const char *path, const ppdl_event_rec *ev, int n, int n_ranks,
                          char *err, size_t errlen)
{
    if (check_events(path, ev, n, n_ranks, err, errlen) != 0) return -1;
    char tmp[4096];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err, errlen);
    if (!f) return -1;
    char *stage = stages_of_ranks(ev, n, n_ranks);
    int rc = 0;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int r = 0; r < n_ranks && rc == 0; r++) {
        char label[80];
        if (stage[(size_t)r * LABEL_LEN])
            snprintf(label, sizeof label, "rank %d (%s)", r, stage + (size_t)r * LABEL_LEN);
        else
            snprintf(label, sizeof label, "rank %d", r);
        int last = n == 0 && r == n_ranks - 1;
        rc |= put_json(f, meta_event("process_name", r, 0, "name", json_string(label)), 0);
        rc |= put_json(f, meta_event("process_sort_index", r, 0, "sort_index", json_integer(r)), 0);
        rc |= put_json(f, meta_event("thread_name", r, 0, "name", json_string("compute")), 0);
        rc |= put_json(f, meta_event("thread_name", r, 1, "name", json_string("comm")), last);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        const ppdl_event_rec *e = &ev[i];
        char name[64];
        json_t *x = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:{s:i, s:i}}", "name",
                              event_name(e, name, sizeof name), "cat", kind_cat(e->kind), "ph", "X",
                              "pid", e->rank, "tid", is_comm(e->kind) ? 1 : 0, "ts", to_us(e->t0_ms),
                              "dur", to_us(e->t1_ms) - to_us(e->t0_ms), "args", "mb", e->mb, "stage",
                              e->stage);
        /* the split backward's parts in colours of their own (chrome://tracing's names) */
        if (x && e->kind == PPDL_OP_BACKWARD_WEIGHT) json_object_set_new(x, "cname", json_string("good"));
        if (x && e->kind == PPDL_OP_BACKWARD_INPUT) json_object_set_new(x, "cname", json_string("rail_animation"));
        rc |= x ? put_json(f, x, i == n - 1) : -1;
    }
    fprintf(f, "]}\n");
    free(stage);
    if (rc != 0) {
        fclose(f);
        unlink(tmp);
        return ppdl_errf(err, errlen, "%s: cannot encode the trace events as JSON", path);
    }
    return finish_tmp(f, tmp, path, err, errlen);
}

// ----------------------------------------------------------------------------
// SVG timeline: geometry and colours

enum {
    SVG_W = 1200,        /* whole picture, px */
    PLOT_X = 150,        /* left edge of the time area (row labels to its left) */
    PLOT_RIGHT = 76,     /* space right of the time area (busy share per row) */
    PLOT_Y = 84,         /* top of the first row */
    LANE_H = 30,         /* compute lane height */
    COMM_GAP = 3,        /* compute lane -> comm lane */
    COMM_H = 8,          /* comm lane height */
    ROW_PITCH = 50,      /* top of one row to the top of the next */
};

/* Forward blues and backward oranges, dark to light, picked by mb % 4: adjacent
 * micro-batches differ, and all are dark enough for white labels. */
static const char *const fwd_fill[4] = {"#1f4e8c", "#2b67b0", "#3a7fc8", "#5394d6"};
static const char *const bwd_fill[4] = {"#a84a10", "#c25b17", "#d8702a", "#e5853f"};
/* a split backward: B (the input gradient) red, W (the weight gradient) green */
static const char *const bin_fill[4] = {"#8e2a1e", "#a83526", "#c04431", "#d45a44"};
static const char *const bwt_fill[4] = {"#2f6b35", "#3b8343", "#4a9a52", "#5fae65"};
#define OPT_FILL "#6f4fa3"
#define RECOMP_FILL "#b3261e" /* forward recomputed inside a backward */
#define ACT_MARK "#2b67b0"
#define GRAD_MARK "#d8702a"
#define ROW_BG "#eef1f5"
#define GRID "#d5dbe3"
#define INK "#1d2430"
#define INK_SOFT "#5b6573"

typedef struct svg_ctx {
    FILE *f;
    double t_lo, t_hi;   /* time range of the plot, ms */
    double px_per_ms;
    double label_px_f;   /* font size of the labels in forward boxes, 0: none */
    double label_px_b;   /* the same for backward boxes */
    double label_px_bi, label_px_bw; /* the same for a split backward's B and W boxes */
} svg_ctx;

static double xpos(const svg_ctx *c, double t) { return PLOT_X + (t - c->t_lo) * c->px_per_ms; }

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f); break;
        }
    }
}

/* A tick step of 1, 2 or 5 x 10^k giving about 8..12 ticks over span */
static double tick_step(double span)
{
    double raw = span / 10.0;
    double mag = pow(10.0, floor(log10(raw)));
    if (raw <= mag) return mag;
    if (raw <= 2 * mag) return 2 * mag;
    if (raw <= 5 * mag) return 5 * mag;
    return 10 * mag;
}

static int cmp_interval(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* busy[r] = length of the union of compute intervals of rank r, ms. (n_ranks) */
static void busy_per_rank(const ppdl_event_rec *ev, int n, int n_ranks, double *busy)
{
    double *iv = ppdl_xmalloc((size_t)(n > 0 ? n : 1) * 2 * sizeof(double)); /* (k, 2) */
    for (int r = 0; r < n_ranks; r++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (ev[i].rank == r && is_compute(ev[i].kind)) {
                iv[2 * k] = ev[i].t0_ms;
                iv[2 * k + 1] = ev[i].t1_ms;
                k++;
            }
        qsort(iv, (size_t)k, 2 * sizeof(double), cmp_interval);
        double sum = 0, end = -INFINITY;
        for (int j = 0; j < k; j++) {
            double a = iv[2 * j] > end ? iv[2 * j] : end, b = iv[2 * j + 1];
            if (b > a) sum += b - a;
            if (b > end) end = b;
        }
        busy[r] = sum;
    }
    free(iv);
}

// ----------------------------------------------------------------------------
// SVG timeline: the parts, top to bottom

static void svg_header(svg_ctx *c, int height, const char *title, double bubble, int have_bubble)
{
    FILE *f = c->f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"'Helvetica Neue', Helvetica, Arial, "
               "'DejaVu Sans', sans-serif\">\n",
            SVG_W, height, SVG_W, height);
    fputs("<title>", f);
    put_escaped(f, title);
    fputs("</title>\n", f);
    fputs("<defs>\n"
          "  <pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\">\n"
          "    <rect width=\"6\" height=\"6\" fill=\"#e4e7eb\"/>\n"
          "    <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#9aa3ae\" stroke-width=\"2.2\"/>\n"
          "  </pattern>\n"
          "  <pattern id=\"arhatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(-45)\">\n"
          "    <rect width=\"6\" height=\"6\" fill=\"#efe6d6\"/>\n"
          "    <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b39b6e\" stroke-width=\"2.2\"/>\n"
          "  </pattern>\n"
          "</defs>\n",
          f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", SVG_W, height);
    fputs("<text x=\"24\" y=\"34\" font-size=\"19\" font-weight=\"600\" fill=\"" INK "\">", f);
    put_escaped(f, title);
    if (have_bubble)
        fprintf(f, " \xe2\x80\x94 bubble %.1f%%", 100.0 * bubble);
    fputs("</text>\n", f);
}

static void svg_subtitle(svg_ctx *c, int n_ranks, int n_mb, double t0, double t1, int n)
{
    if (n == 0) {
        fprintf(c->f, "<text x=\"24\" y=\"58\" font-size=\"12.5\" fill=\"" INK_SOFT "\">no events "
                      "recorded</text>\n");
        return;
    }
    fprintf(c->f,
            "<text x=\"24\" y=\"58\" font-size=\"12.5\" fill=\"" INK_SOFT "\">%d rank%s \xc2\xb7 "
            "%d micro-batch%s \xc2\xb7 %.*f ms from first start to last end \xc2\xb7 bubble = idle "
            "share of the compute lanes over that span</text>\n",
            n_ranks, n_ranks == 1 ? "" : "s", n_mb, n_mb == 1 ? "" : "es",
            t1 - t0 >= 100 ? 1 : t1 - t0 >= 1 ? 2 : 3, t1 - t0);
}

static void svg_grid_and_rows(svg_ctx *c, int n_ranks, const char *stage, const double *busy,
                              double span, int n, double step)
{
    FILE *f = c->f;
    double plot_w = SVG_W - PLOT_X - PLOT_RIGHT;
    int rows_bottom = PLOT_Y + n_ranks * ROW_PITCH - (ROW_PITCH - LANE_H - COMM_GAP - COMM_H);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"" INK_SOFT "\" "
               "text-anchor=\"middle\">busy</text>\n",
            SVG_W - PLOT_RIGHT / 2, PLOT_Y - 8);
    for (int r = 0; r < n_ranks; r++) {
        int y = PLOT_Y + r * ROW_PITCH;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"" ROW_BG "\"/>\n",
                PLOT_X, y, plot_w, LANE_H);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"" GRID "\"/>\n",
                PLOT_X, y + LANE_H + COMM_GAP + COMM_H / 2.0, PLOT_X + plot_w,
                y + LANE_H + COMM_GAP + COMM_H / 2.0);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" fill=\"" INK "\" text-anchor=\"end\">"
                   "rank %d",
                PLOT_X - 12, y + LANE_H / 2 + 5, r);
        if (stage[(size_t)r * LABEL_LEN]) fprintf(f, " \xc2\xb7 %s", stage + (size_t)r * LABEL_LEN);
        fputs("</text>\n", f);
        if (n > 0)
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"" INK_SOFT "\" "
                       "text-anchor=\"middle\">%.0f%%</text>\n",
                    SVG_W - PLOT_RIGHT / 2, y + LANE_H / 2 + 4, 100.0 * busy[r] / span);
    }
    /* vertical grid at the ticks, over the rows */
    for (double t = ceil(c->t_lo / step - 1e-9) * step; t <= c->t_hi + 1e-9 * step; t += step)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"" GRID "\" "
                   "stroke-width=\"1\" stroke-dasharray=\"2 3\"/>\n",
                xpos(c, t), PLOT_Y - 4, xpos(c, t), rows_bottom);
}

/* Whether label fits in a box w px wide at font size px: bold digits are about
 * 0.62 em wide in the sans fonts we name, plus 4 px of air */
static int label_fits(const char *label, double w, double px)
{
    return w >= 0.62 * px * (double)strlen(label) + 4.0;
}

/* One label size per kind (forward, backward) for the whole picture, so labels look
 * alike: the largest of 11, 9.5 and 8 px at which at least 95% of that kind's labels
 * fit (boxes of one kind vary a little in width); 0 (no labels of that kind) when none
 * does. Only labels that fit are drawn. */
static double pick_label_px(const svg_ctx *c, const ppdl_event_rec *ev, int n, int kind)
{
    static const double sizes[] = {11.0, 9.5, 8.0};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int total = 0, fit = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].kind != kind) continue;
            char label[16];
            snprintf(label, sizeof label, "%d", ev[i].mb);
            total++;
            fit += label_fits(label, (ev[i].t1_ms - ev[i].t0_ms) * c->px_per_ms, sizes[k]);
        }
        if (fit >= 0.95 * total) return sizes[k];
    }
    return 0.0;
}

static void svg_box(svg_ctx *c, const ppdl_event_rec *e)
{
    FILE *f = c->f;
    double x0 = xpos(c, e->t0_ms), x1 = xpos(c, e->t1_ms);
    double w = x1 - x0 < 1.0 ? 1.0 : x1 - x0; /* a zero-length event stays visible */
    int y = PLOT_Y + e->rank * ROW_PITCH;
    char name[64];
    event_name(e, name, sizeof name);
    if (e->kind == PPDL_EV_RECOMPUTE) {
        /* a forward run again inside its backward box: a stripe along the box's foot */
        fprintf(f, "<rect class=\"recomp\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"" RECOMP_FILL "\">",
                x0, y + LANE_H - LANE_H / 4, w, LANE_H / 4);
    } else if (is_comm(e->kind)) {
        int act = e->kind == PPDL_OP_SEND_ACT || e->kind == PPDL_OP_RECV_ACT;
        int send = e->kind == PPDL_OP_SEND_ACT || e->kind == PPDL_OP_SEND_GRAD;
        fprintf(f, "<rect class=\"comm\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"1\" "
                   "fill=\"%s\" fill-opacity=\"%s\">",
                x0, y + LANE_H + COMM_GAP, w < 2.0 ? 2.0 : w, COMM_H, act ? ACT_MARK : GRAD_MARK,
                send ? "1" : "0.5");
    } else {
        const char *cls, *fill;
        switch (e->kind) {
        case PPDL_OP_FORWARD: cls = "fwd", fill = fwd_fill[(e->mb < 0 ? 0 : e->mb) % 4]; break;
        case PPDL_OP_BACKWARD: cls = "bwd", fill = bwd_fill[(e->mb < 0 ? 0 : e->mb) % 4]; break;
        case PPDL_OP_BACKWARD_INPUT: cls = "bin", fill = bin_fill[(e->mb < 0 ? 0 : e->mb) % 4]; break;
        case PPDL_OP_BACKWARD_WEIGHT: cls = "bwt", fill = bwt_fill[(e->mb < 0 ? 0 : e->mb) % 4]; break;
        case PPDL_OP_OPTIMIZER: cls = "opt", fill = OPT_FILL; break;
        case PPDL_EV_ALLREDUCE: cls = "arwait", fill = "url(#arhatch)"; break;
        default: cls = "wait", fill = "url(#hatch)"; break;
        }
        fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"2.5\" "
                   "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\">",
                cls, x0, y, w, LANE_H, fill);
    }
    fprintf(f, "<title>rank %d \xc2\xb7 stage %d \xc2\xb7 %s \xc2\xb7 %.3f\xe2\x80\x93%.3f ms "
               "(%.3f ms)</title></rect>\n",
            e->rank, e->stage, name, e->t0_ms, e->t1_ms, e->t1_ms - e->t0_ms);

    /* the label: the mb for forward/backward, "opt" for the optimizer, if it fits */
    char label[16] = "";
    if ((e->kind == PPDL_OP_FORWARD || e->kind == PPDL_OP_BACKWARD || e->kind == PPDL_OP_BACKWARD_INPUT ||
         e->kind == PPDL_OP_BACKWARD_WEIGHT) && e->mb >= 0)
        snprintf(label, sizeof label, "%d", e->mb);
    else if (e->kind == PPDL_OP_OPTIMIZER)
        snprintf(label, sizeof label, "opt");
    double px = e->kind == PPDL_OP_FORWARD           ? c->label_px_f
              : e->kind == PPDL_OP_BACKWARD          ? c->label_px_b
              : e->kind == PPDL_OP_BACKWARD_INPUT    ? c->label_px_bi
              : e->kind == PPDL_OP_BACKWARD_WEIGHT   ? c->label_px_bw
                                                     : 11.0;
    if (label[0] && px > 0 && label_fits(label, w, px))
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.1f\" font-weight=\"600\" "
                   "fill=\"#ffffff\" text-anchor=\"middle\" pointer-events=\"none\">%s</text>\n",
                x0 + w / 2, y + LANE_H / 2 + 0.36 * px, px, label);
}

static void svg_axis(svg_ctx *c, int y, double step)
{
    FILE *f = c->f;
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"" INK_SOFT "\"/>\n", PLOT_X,
            y, xpos(c, c->t_hi), y);
    for (double t = ceil(c->t_lo / step - 1e-9) * step; t <= c->t_hi + 1e-9 * step; t += step) {
        double x = xpos(c, t);
        double shown = fabs(t) < 1e-9 * step ? 0.0 : t; /* no "-0" */
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"" INK_SOFT "\"/>\n", x,
                y, x, y + 5);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\" font-size=\"11\" fill=\"" INK_SOFT "\" "
                   "text-anchor=\"middle\">%.*f</text>\n",
                x, y + 18, decimals, shown);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"" INK_SOFT "\" "
               "text-anchor=\"end\">time (ms)</text>\n",
            PLOT_X - 12, y + 18);
}

/* split: the events hold a split backward's B and W, which get swatches of their own */
static void svg_legend(svg_ctx *c, int y, int split)
{
    FILE *f = c->f;
    double x = PLOT_X;
    /* forward and backward swatches show their four shades */
    const char *const *fills[4] = {fwd_fill, bwd_fill, bin_fill, bwt_fill};
    const char *names[4] = {"forward", "backward", "B: input grad", "W: weight grad"};
    for (int k = 0; k < (split ? 4 : 2); k++) {
        for (int j = 0; j < 4; j++)
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"7\" height=\"14\" fill=\"%s\"/>\n",
                    x + 7 * j, y, fills[k][j]);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"" INK "\">%s (mb)</text>\n",
                x + 34, y + 11, names[k]);
        x += k < 2 ? 130 : 170; /* the split's labels are longer */
    }
    struct {
        const char *fill, *opacity, *label;
        int h, width, new_line;
    } items[] = {
        {OPT_FILL, "1", "optimizer", 14, 100, 0},
        {RECOMP_FILL, "1", "recompute", 7, 100, 0},
        {ROW_BG, "1", "idle", 14, 70, 0},
        {"url(#hatch)", "1", "waiting for a message", 14, 170, 0},
        {"url(#arhatch)", "1", "waiting for an all-reduce", 14, 190, 0},
        /* the comm lane's marks on a line of their own */
        {ACT_MARK, "1", "activation sent", 7, 150, 1},
        {ACT_MARK, "0.5", "activation received", 7, 180, 0},
        {GRAD_MARK, "1", "gradient sent", 7, 140, 0},
        {GRAD_MARK, "0.5", "gradient received", 7, 170, 0},
    };
    for (size_t k = 0; k < sizeof items / sizeof items[0]; k++) {
        if (items[k].new_line || x + items[k].width > SVG_W - 16) {
            x = PLOT_X;
            y += 22;
        }
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"22\" height=\"%d\" rx=\"2\" fill=\"%s\" "
                   "fill-opacity=\"%s\" stroke=\"%s\"/>\n",
                x, y + (14 - items[k].h) / 2, items[k].h, items[k].fill, items[k].opacity,
                strcmp(items[k].fill, ROW_BG) == 0 ? GRID : "none");
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"" INK "\">%s</text>\n", x + 28,
                y + 11, items[k].label);
        x += items[k].width;
    }
}

int ppdl_timeline_write_svg(const char *path, const ppdl_event_rec *ev, int n, int n_ranks,
                            const char *title, char *err, size_t errlen)
{
    if (check_events(path, ev, n, n_ranks, err, errlen) != 0) return -1;
    if (!title) title = "pipeline timeline";

    double t0 = n > 0 ? INFINITY : 0, t1 = n > 0 ? -INFINITY : 1;
    int n_mb = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].t0_ms < t0) t0 = ev[i].t0_ms;
        if (ev[i].t1_ms > t1) t1 = ev[i].t1_ms;
        if (ev[i].mb + 1 > n_mb) n_mb = ev[i].mb + 1;
    }
    double span = t1 - t0 > 1e-9 ? t1 - t0 : 1e-9; /* all zero-length: avoid /0 */
    double *busy = ppdl_xcalloc((size_t)n_ranks, sizeof(double));
    busy_per_rank(ev, n, n_ranks, busy);
    double busy_sum = 0;
    for (int r = 0; r < n_ranks; r++) busy_sum += busy[r];
    double bubble = 1.0 - busy_sum / ((double)n_ranks * span);
    char *stage = stages_of_ranks(ev, n, n_ranks);

    char tmp[4096];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err, errlen);
    if (!f) {
        free(busy);
        free(stage);
        return -1;
    }
    svg_ctx c = {.f = f};
    double step = tick_step(span);
    c.t_lo = floor(t0 / step + 1e-9) * step; /* start the axis on a tick */
    c.t_hi = t1 > c.t_lo ? t1 : c.t_lo + step;
    c.px_per_ms = (SVG_W - PLOT_X - PLOT_RIGHT) / (c.t_hi - c.t_lo);
    c.label_px_f = pick_label_px(&c, ev, n, PPDL_OP_FORWARD);
    c.label_px_b = pick_label_px(&c, ev, n, PPDL_OP_BACKWARD);
    c.label_px_bi = pick_label_px(&c, ev, n, PPDL_OP_BACKWARD_INPUT);
    c.label_px_bw = pick_label_px(&c, ev, n, PPDL_OP_BACKWARD_WEIGHT);
    int split = 0;
    for (int i = 0; i < n; i++) split |= ev[i].kind == PPDL_OP_BACKWARD_INPUT || ev[i].kind == PPDL_OP_BACKWARD_WEIGHT;

    int rows_bottom = PLOT_Y + n_ranks * ROW_PITCH - (ROW_PITCH - LANE_H - COMM_GAP - COMM_H);
    /* two legend lines, three with a split backward's swatches */
    int axis_y = rows_bottom + 8, legend_y = axis_y + 40, height = legend_y + 56 + (split ? 22 : 0);

    svg_header(&c, height, title, bubble, n > 0);
    svg_subtitle(&c, n_ranks, n_mb, t0, t1, n);
    svg_grid_and_rows(&c, n_ranks, stage, busy, span, n, step);
    for (int pass = 0; pass < 2; pass++) /* recompute stripes over their backward boxes */
        for (int i = 0; i < n; i++)
            if ((ev[i].kind == PPDL_EV_RECOMPUTE) == pass) svg_box(&c, &ev[i]);
    svg_axis(&c, axis_y, step);
    svg_legend(&c, legend_y, split);
    fputs("</svg>\n", f);

    free(busy);
    free(stage);
    return finish_tmp(f, tmp, path, err, errlen);
}
