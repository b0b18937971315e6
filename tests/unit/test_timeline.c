/* test_timeline.c — the Chrome trace and the SVG timeline writers.
 *
 * Events come from a tiny timing play of the real 1F1B op lists (forward 1 ms,
 * backward 2 ms, a message arrives 0.25 ms after its send, a blocked receive becomes
 * a WAIT record), so the pictures look like a real pipeline. The trace is read back
 * with jansson and compared record by record; the SVG is checked for its shape, one
 * box per forward/backward record, the title and an exact bubble fraction on a
 * hand-made case; unwritable paths fail with a message naming the file.
 *
 * Set PPDL_TIMELINE_SAMPLE=FILE.svg to also keep a S=4, M=8 sample picture there.
 */
#include "sched/schedule.h"
#include "prof/timeline.h"

#include "tap.h"
#include "unit/schedule_lists.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define F_MS 1.0      /* forward of one mb on one stage */
#define B_MS 2.0      /* backward */
#define OPT_MS 0.5    /* optimizer step */
#define AR_MS 0.3     /* the all-reduce wait before it (replicas' gradients, the finite check) */
#define LINK_MS 0.25  /* send issued -> message available at the peer */
#define POST_MS 0.05  /* cost of posting a send or completing a receive */

/* Play the S op lists with times; append records to ev (capacity cap). Returns n. */
static int play_timed(int kind, int S, int M, ppdl_event_rec *ev, int cap)
{
    ppdl_op_list l[16];
    for (int s = 0; s < S; s++) list_of(kind, S, M, NULL, NULL, s, 0, &l[s]);
    double *clock = calloc((size_t)S, sizeof(double));
    double *act_at = malloc((size_t)S * M * sizeof(double));  /* (S, M) arrival at s+1 */
    double *grad_at = malloc((size_t)S * M * sizeof(double)); /* (S, M) arrival at s-1 */
    int *pc = calloc((size_t)S, sizeof(int));
    for (int j = 0; j < S * M; j++) act_at[j] = grad_at[j] = -1;
    int n = 0, moved = 1;
    while (moved) {
        moved = 0;
        for (int s = 0; s < S; s++)
            while (pc[s] < l[s].n) {
                const ppdl_op *op = &l[s].ops[pc[s]];
                double t = clock[s], dt = 0;
                if (op->kind == PPDL_OP_RECV_ACT || op->kind == PPDL_OP_RECV_GRAD) {
                    double at = op->kind == PPDL_OP_RECV_ACT ? act_at[op->peer * M + op->mb]
                                                             : grad_at[op->peer * M + op->mb];
                    if (at < 0) break; /* not sent yet: come back next sweep */
                    if (at > t && n < cap)
                        ev[n++] = (ppdl_event_rec){s, s, PPDL_EV_WAIT, op->mb, t, at};
                    if (at > t) t = at;
                    dt = POST_MS;
                } else if (op->kind == PPDL_OP_SEND_ACT || op->kind == PPDL_OP_SEND_GRAD) {
                    dt = POST_MS;
                    double *slot = op->kind == PPDL_OP_SEND_ACT ? act_at : grad_at;
                    slot[s * M + op->mb] = t + dt + LINK_MS;
                } else {
                    if (op->kind == PPDL_OP_OPTIMIZER && n < cap) {
                        ev[n++] = (ppdl_event_rec){s, s, PPDL_EV_ALLREDUCE, -1, t, t + AR_MS};
                        t += AR_MS;
                    }
                    dt = op->kind == PPDL_OP_FORWARD    ? F_MS
                       : op->kind == PPDL_OP_BACKWARD   ? B_MS
                       : op->kind == PPDL_OP_OPTIMIZER  ? OPT_MS
                                                        : B_MS / 2; /* a split backward's B or W */
                }
                if (n < cap) ev[n++] = (ppdl_event_rec){s, s, (int)op->kind, op->mb, t, t + dt};
                clock[s] = t + dt;
                pc[s]++;
                moved = 1;
            }
    }
    for (int s = 0; s < S; s++) ppdl_op_list_free(&l[s]);
    free(clock);
    free(act_at);
    free(grad_at);
    free(pc);
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    size_t got = fread(buf, 1, (size_t)len, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static int count_substr(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) k++;
    return k;
}

static int count_kind(const ppdl_event_rec *ev, int n, int kind)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += ev[i].kind == kind;
    return k;
}

/* Every X event of the trace equals the record it came from (same order) */
static void test_trace(const char *dir, const ppdl_event_rec *ev, int n, int n_ranks)
{
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/trace.json", dir);
    int rc = ppdl_trace_write_json(path, ev, n, n_ranks, err, sizeof err);
    ok(rc == 0, "trace written: %s", rc == 0 ? path : err);

    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ok(root != NULL, "trace parses as JSON%s%s", root ? "" : ": ", root ? "" : jerr.text);
    json_t *arr = json_object_get(root, "traceEvents");
    ok(json_is_array(arr) && json_is_string(json_object_get(root, "displayTimeUnit")),
       "trace has traceEvents and displayTimeUnit");

    int n_x = 0, n_meta = 0, bad = 0;
    char first_bad[256] = "";
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (ph && strcmp(ph, "M") == 0) {
            n_meta++;
            continue;
        }
        if (!ph || strcmp(ph, "X") != 0 || n_x >= n) {
            bad++;
            continue;
        }
        const ppdl_event_rec *r = &ev[n_x++];
        json_t *args = json_object_get(e, "args");
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        char want_name[32];
        if (r->kind == PPDL_OP_FORWARD) snprintf(want_name, sizeof want_name, "F%d", r->mb);
        else if (r->kind == PPDL_OP_BACKWARD) snprintf(want_name, sizeof want_name, "B%d", r->mb);
        else if (r->kind == PPDL_OP_BACKWARD_INPUT) snprintf(want_name, sizeof want_name, "B%d", r->mb);
        else if (r->kind == PPDL_OP_BACKWARD_WEIGHT) snprintf(want_name, sizeof want_name, "W%d", r->mb);
        else if (r->kind == PPDL_OP_SEND_ACT) snprintf(want_name, sizeof want_name, "send act %d", r->mb);
        else if (r->kind == PPDL_EV_WAIT) snprintf(want_name, sizeof want_name, "wait");
        else if (r->kind == PPDL_EV_ALLREDUCE) snprintf(want_name, sizeof want_name, "allreduce wait");
        else want_name[0] = '\0';
        const char *want_cat = r->kind == PPDL_EV_WAIT        ? "wait"
                               : r->kind == PPDL_EV_ALLREDUCE ? "allreduce wait"
                                                              : ppdl_op_name((ppdl_op_kind)r->kind);
        /* ts/dur are us rounded to the ns: 1e-3 us plus float slack */
        int good = json_integer_value(json_object_get(e, "pid")) == r->rank &&
                   json_integer_value(json_object_get(args, "mb")) == r->mb &&
                   json_integer_value(json_object_get(args, "stage")) == r->stage &&
                   fabs(ts - r->t0_ms * 1e3) <= 2e-3 && fabs(dur - (r->t1_ms - r->t0_ms) * 1e3) <= 2e-3 &&
                   name && cat && strcmp(cat, want_cat) == 0 &&
                   (!want_name[0] || strcmp(name, want_name) == 0);
        if (!good && bad++ == 0)
            snprintf(first_bad, sizeof first_bad, "event %d: name %s cat %s ts %g dur %g", n_x - 1,
                     name ? name : "?", cat ? cat : "?", ts, dur);
    }
    ok(n_x == n && bad == 0, "trace has one X event per record (%d) with name, cat, ts, dur, pid, args", n);
    if (bad) diag("  %d bad; first: %s", bad, first_bad);
    ok(n_meta == 4 * n_ranks, "trace has 4 metadata events per rank (got %d)", n_meta);

    int named = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        const char *nm = json_string_value(json_object_get(e, "name"));
        const char *label = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
        if (nm && strcmp(nm, "process_name") == 0 && label && strcmp(label, "rank 2 (stage 2)") == 0) named = 1;
    }
    ok(named, "rank 2 is named \"rank 2 (stage 2)\"");
    json_decref(root);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ok(access(tmp, F_OK) != 0, "no .tmp file left behind");
}

static void test_svg(const char *dir, const ppdl_event_rec *ev, int n, int n_ranks)
{
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/timeline.svg", dir);
    int rc = ppdl_timeline_write_svg(path, ev, n, n_ranks, "1F1B, S=4 & M=8", err, sizeof err);
    ok(rc == 0, "svg written: %s", rc == 0 ? path : err);
    char *svg = slurp(path);
    ok(svg && strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>\n"),
       "svg starts with <svg and ends with </svg>");
    int nf = count_kind(ev, n, PPDL_OP_FORWARD), nb = count_kind(ev, n, PPDL_OP_BACKWARD);
    int gf = svg ? count_substr(svg, "class=\"fwd\"") : -1;
    int gb = svg ? count_substr(svg, "class=\"bwd\"") : -1;
    ok(gf == nf && gb == nb, "one box per forward (%d) and backward (%d) record", nf, nb);
    if (gf != nf || gb != nb) diag("  got %d forward and %d backward boxes", gf, gb);
    ok(svg && strstr(svg, "1F1B, S=4 &amp; M=8 \xe2\x80\x94 bubble ") &&
           strstr(svg, "rank 3 \xc2\xb7 stage 3") && strstr(svg, "time (ms)"),
       "svg has the escaped title with the bubble, row labels and the time axis");
    ok(svg && count_substr(svg, "class=\"wait\"") == count_kind(ev, n, PPDL_EV_WAIT) &&
           count_kind(ev, n, PPDL_EV_WAIT) > 0,
       "one hatched box per WAIT record (%d)", count_kind(ev, n, PPDL_EV_WAIT));
    /* an all-reduce wait is not drawn as a message wait, and the legend names each mark */
    ok(svg && count_substr(svg, "class=\"arwait\"") == count_kind(ev, n, PPDL_EV_ALLREDUCE) &&
           count_kind(ev, n, PPDL_EV_ALLREDUCE) == 4 && strstr(svg, ">waiting for an all-reduce<") &&
           strstr(svg, ">waiting for a message<") && strstr(svg, ">activation sent<") &&
           strstr(svg, ">gradient sent<") && !strstr(svg, "paler") && !strstr(svg, ">W: weight grad"),
       "one all-reduce box per ALLREDUCE record (%d), apart from the message waits; the legend names them",
       count_kind(ev, n, PPDL_EV_ALLREDUCE));

    /* same input, same bytes */
    char path2[512];
    snprintf(path2, sizeof path2, "%s/timeline2.svg", dir);
    ppdl_timeline_write_svg(path2, ev, n, n_ranks, "1F1B, S=4 & M=8", err, sizeof err);
    char *svg2 = slurp(path2);
    ok(svg && svg2 && strcmp(svg, svg2) == 0, "svg output is deterministic");
    free(svg);
    free(svg2);
    unlink(path2);
}

/* A zero-bubble step (ZB-H1, S = 2, M = 4): the trace names B and W "B3"/"W3" with
 * their own categories and colours, the SVG draws them in boxes of their own classes
 * (B red, W green) and its legend names both */
static void test_split(const char *dir)
{
    enum { CAP = 1024 };
    ppdl_event_rec ev[CAP];
    int n = play_timed(PPDL_SCHED_ZB_H1, 2, 4, ev, CAP);
    int nbi = count_kind(ev, n, PPDL_OP_BACKWARD_INPUT), nbw = count_kind(ev, n, PPDL_OP_BACKWARD_WEIGHT);
    ok(nbi > 0 && nbw == nbi, "zb-h1 S=2 M=4: the timed play has B's (%d) and W's (%d)", nbi, nbw);
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/trace.json", dir);
    char *js = ppdl_trace_write_json(path, ev, n, 2, err, sizeof err) == 0 ? slurp(path) : NULL;
    ok(js && strstr(js, "\"name\":\"W3\",\"cat\":\"backward_weight\"") &&
           strstr(js, "\"cat\":\"backward_input\"") && strstr(js, "\"cname\":\"good\""),
       "the trace names W3 (category backward_weight, coloured) and the B's (backward_input)");
    free(js);
    snprintf(path, sizeof path, "%s/timeline.svg", dir);
    int rc = ppdl_timeline_write_svg(path, ev, n, 2, "ZB-H1, S=2, M=4", err, sizeof err);
    char *svg = rc == 0 ? slurp(path) : NULL;
    ok(svg && count_substr(svg, "class=\"bin\"") == nbi && count_substr(svg, "class=\"bwt\"") == nbw &&
           strstr(svg, "fill=\"#2f6b35\"") && strstr(svg, ">B: input grad (mb)<") && strstr(svg, ">W: weight grad (mb)<"),
       "the svg draws each B and W in a box of its class (W green) and the legend names both %s", err);
    if (svg) diag("  %d B boxes, %d W boxes", count_substr(svg, "class=\"bin\""), count_substr(svg, "class=\"bwt\""));
    free(svg);
}

/* rank 0: F0 [0,1] B0 [4,6]; rank 1: F0 [1,2] B0 [2,4] (+ an overlapping send that
 * must not count as busy). Span 0..6 ms, busy 3 + 3 of 12 -> bubble 50.0%. */
static void test_bubble(const char *dir)
{
    ppdl_event_rec ev[] = {
        {0, 0, PPDL_OP_FORWARD, 0, 0.0, 1.0},  {0, 0, PPDL_OP_SEND_ACT, 0, 1.0, 1.2},
        {1, 1, PPDL_OP_FORWARD, 0, 1.0, 2.0},  {1, 1, PPDL_OP_BACKWARD, 0, 2.0, 4.0},
        {1, 1, PPDL_OP_SEND_GRAD, 0, 4.0, 5.0}, {0, 0, PPDL_OP_BACKWARD, 0, 4.0, 6.0},
    };
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/bubble.svg", dir);
    int rc = ppdl_timeline_write_svg(path, ev, 6, 2, "two stages", err, sizeof err);
    char *svg = slurp(path);
    ok(rc == 0 && svg && strstr(svg, "two stages \xe2\x80\x94 bubble 50.0%"),
       "bubble of a hand-made 2-rank case is 50.0%% (span 6 ms, 6 busy of 12)");
    free(svg);
    unlink(path);

    /* no events at all still gives a picture */
    snprintf(path, sizeof path, "%s/empty.svg", dir);
    rc = ppdl_timeline_write_svg(path, NULL, 0, 3, "empty", err, sizeof err);
    svg = slurp(path);
    ok(rc == 0 && svg && strstr(svg, "no events recorded"), "an empty event set gives a picture too");
    free(svg);
    unlink(path);
}

static void test_errors(const ppdl_event_rec *ev, int n, int n_ranks)
{
    const char *bad_path = "/nonexistent-ppdl-dir/sub/out.svg";
    char err[512] = "";
    int rc = ppdl_timeline_write_svg(bad_path, ev, n, n_ranks, "x", err, sizeof err);
    ok(rc == -1 && strstr(err, bad_path), "unwritable svg path fails naming it: %s", err);
    err[0] = '\0';
    rc = ppdl_trace_write_json("/nonexistent-ppdl-dir/trace.json", ev, n, n_ranks, err, sizeof err);
    ok(rc == -1 && strstr(err, "/nonexistent-ppdl-dir/trace.json"), "unwritable trace path fails naming it: %s",
       err);
    ppdl_event_rec wrong = {5, 0, PPDL_OP_FORWARD, 0, 0.0, 1.0};
    err[0] = '\0';
    rc = ppdl_trace_write_json("/tmp/never-written.json", &wrong, 1, 2, err, sizeof err);
    ok(rc == -1 && strstr(err, "rank 5") && access("/tmp/never-written.json", F_OK) != 0,
       "an event with a rank outside 0..n_ranks-1 is rejected: %s", err);
    ppdl_event_rec backwards = {0, 0, PPDL_OP_FORWARD, 0, 2.0, 1.0};
    err[0] = '\0';
    rc = ppdl_timeline_write_svg("/tmp/never-written.svg", &backwards, 1, 1, "x", err, sizeof err);
    ok(rc == -1 && strstr(err, "bad times"), "an event ending before it starts is rejected: %s", err);
}

int main(void)
{
    plan(24);
    enum { S = 4, M = 8, CAP = 4096 };
    ppdl_event_rec *ev = malloc(CAP * sizeof *ev);
    int n = play_timed(PPDL_SCHED_1F1B, S, M, ev, CAP);
    ok(n > 0 && n < CAP && count_kind(ev, n, PPDL_OP_FORWARD) == S * M,
       "timed play of 1F1B S=%d M=%d gives %d records", S, M, n);

    char dir[] = "/tmp/ppdl-timeline-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_trace(dir, ev, n, S);
    test_svg(dir, ev, n, S);
    test_bubble(dir);
    test_split(dir);
    test_errors(ev, n, S);

    const char *sample = getenv("PPDL_TIMELINE_SAMPLE");
    if (sample && *sample) {
        char err[512] = "";
        if (ppdl_timeline_write_svg(sample, ev, n, S, "1F1B schedule, 4 stages, 8 micro-batches", err,
                                    sizeof err) == 0)
            diag("sample timeline: %s", sample);
        else
            diag("sample timeline not written: %s", err);
    }

    char path[600];
    const char *files[] = {"trace.json", "timeline.svg"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(ev);
    return exit_status();
}
