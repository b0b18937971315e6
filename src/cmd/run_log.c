/* run_log.c — --log FILE.jsonl, the run log: one JSON object per line (keys in
 * snake_case), written by rank 0 as the run goes, each line flushed when its step's
 * numbers reach rank 0 and the file synced at every checkpoint and at the end.
 *
 * A batch chain leaves one continuous log: a resumed run first drops the lines of
 * steps after its checkpoint (a job killed after step 150 with its last checkpoint at
 * step 100 logged 101-150, which the resumed run trains again) and a line cut short by
 * the kill, then appends. A fresh run starts the file anew. The trimmed log replaces
 * the old one only once written whole (FILE.tmp, then rename). */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/run.h"
#include "core/error.h"

/* The log's lines up to and including step `keep` (a resume point) into path.tmp,
 * renamed onto path. Lines without a step (none are written today) are kept. */
static int trim(const char *path, long keep, long *dropped, char *err, size_t errlen)
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
        if (j && (!json_is_integer(step) || json_integer_value(step) <= keep)) fputs(line, out);
        else (*dropped)++;
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
        failed = r->resume ? trim(o->log, r->start_step, &dropped, err, sizeof err) : 0;
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
