/* run_log.c — --log FILE.jsonl, the run log: one JSON object per line (keys in
 * snake_case), written by rank 0 as the run goes, each line flushed when its step's
 * numbers reach rank 0 and the file synced at every checkpoint and at the end.
 *
 * A batch chain leaves one continuous log: a resumed run first drops the lines of
 * steps after its checkpoint (a job killed after step 150 with its last checkpoint at
 * step 100 logged 101-150, which the resumed run trains again) and a line cut short by
 * the kill, then appends. A fresh run starts the file anew. The trimmed log replaces
 * the old one only once written whole (FILE.tmp, then rename).
 *
 * The loss history of --loss-plot lives here too: this job's steps and evaluations,
 * after the lines a resumed run's log kept, so that a chain's plot shows the whole run. */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "prof/loss_plot.h"

void loss_history_add(loss_history *h, long step, double loss, int validation)
{
    long **steps = validation ? &h->val_step : &h->step;
    double **losses = validation ? &h->val_loss : &h->loss;
    int *n = validation ? &h->n_val : &h->n, *cap = validation ? &h->cap_val : &h->cap;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        *steps = realloc(*steps, (size_t)*cap * sizeof **steps);
        *losses = realloc(*losses, (size_t)*cap * sizeof **losses);
        PPDL_CHECK(*steps && *losses, "out of host memory for the loss history");
    }
    (*steps)[*n] = step;
    (*losses)[(*n)++] = loss;
}

void loss_history_free(loss_history *h)
{
    free(h->step);
    free(h->loss);
    free(h->val_step);
    free(h->val_loss);
    memset(h, 0, sizeof *h);
}

/* The log's lines up to and including step `keep` (a resume point) into path.tmp,
 * renamed onto path, their losses into h. Lines without a step (none are written
 * today) are kept. */
static int trim(const char *path, long keep, long *dropped, loss_history *h, char *err, size_t errlen)
{
    *dropped = 0;
    FILE *in = fopen(path, "r");
    if (!in) return errno == ENOENT ? 0 : ppdl_errf(err, errlen, "--log %s: cannot read it: %s", path, strerror(errno));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return ppdl_errf(err, errlen, "--log %s: cannot write %s: %s", path, tmp, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        json_t *j = line[n - 1] == '\n' ? json_loads(line, 0, NULL) : NULL; /* a cut line is dropped */
        json_t *step = j ? json_object_get(j, "step") : NULL;
        if (j && (!json_is_integer(step) || json_integer_value(step) <= keep)) {
            fputs(line, out);
            json_t *loss = json_object_get(j, "loss"), *val = json_object_get(j, "val_loss");
            if (json_is_integer(step) && json_is_number(loss))
                loss_history_add(h, (long)json_integer_value(step), json_number_value(loss), 0);
            if (json_is_integer(step) && json_is_number(val))
                loss_history_add(h, (long)json_integer_value(step), json_number_value(val), 1);
        } else {
            (*dropped)++;
        }
        json_decref(j);
    }
    free(line);
    fclose(in);
    int bad = ferror(out) | (fflush(out) != 0) | (fsync(fileno(out)) != 0);
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return ppdl_errf(err, errlen, "--log %s: cannot rewrite it: %s", path, strerror(errno));
    }
    return 0;
}

void run_log_open(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    int failed = 0;
    if (r->rank == 0 && o->log) {
        long dropped = 0;
        failed = r->resume ? trim(o->log, r->start_step, &dropped, &r->totals.history, err, sizeof err) : 0;
        if (!failed && !(r->log = fopen(o->log, r->resume ? "a" : "w")))
            failed = ppdl_errf(err, sizeof err, "--log %s: cannot open it: %s", o->log, strerror(errno)) != 0;
        if (!failed && dropped)
            printf("--log %s: dropped %ld line%s after step %ld, the checkpoint resumed from\n", o->log, dropped,
                   dropped == 1 ? "" : "s", r->start_step);
    }
    agree_or_end_job(failed, err, 1);
}

/* a write that failed: said once; the run goes on and ends with status 1 (an output failed) */
static void log_failed(run *r, const char *what)
{
    if (!r->output_failed) fprintf(stderr, "ppdl: --log %s: %s failed: %s\n", r->o.log, what, strerror(errno));
    r->output_failed = 1;
}

void run_log_line(run *r, json_t *entry)
{
    if (!r->log) return;
    char *text = json_dumps(entry, JSON_COMPACT | JSON_REAL_PRECISION(17));
    PPDL_CHECK(text, "out of host memory for the run log");
    if (fprintf(r->log, "%s\n", text) < 0 || fflush(r->log) != 0) log_failed(r, "a write");
    free(text);
}

void run_log_sync(run *r)
{
    if (r->log && (fflush(r->log) != 0 || fsync(fileno(r->log)) != 0)) log_failed(r, "a sync");
}

void run_log_close(run *r)
{
    if (!r->log) return;
    run_log_sync(r);
    if (fclose(r->log) != 0) log_failed(r, "closing it");
    r->log = NULL;
}

void run_write_loss_plot(run *r)
{
    const options *o = &r->o;
    if (r->rank != 0 || !o->loss_plot) return;
    const loss_history *h = &r->totals.history;
    int tokens = r->data.kind == PPDL_DATA_TOKENS;
    char title[512], err[PPDL_ERR_LEN];
    snprintf(title, sizeof title, "%s on %s: loss", o->model, o->data);
    ppdl_loss_curve c = {
        .step = h->step, .loss = h->loss, .n = h->n, .val_step = h->val_step, .val_loss = h->val_loss,
        .n_val = h->n_val, .per_step = (double)o->batch_size * (tokens ? ppdl_model_loss_rows(&r->model) : 1),
        .per_step_unit = tokens ? "tokens" : "samples", .log_scale = o->loss_plot_log, .title = title,
    };
    if (h->n + h->n_val == 0) return; /* nothing to draw yet */
    if (ppdl_loss_plot_write_svg(o->loss_plot, &c, err, sizeof err)) {
        fprintf(stderr, "ppdl: %s\n", err);
        r->output_failed = 1;
    }
}
