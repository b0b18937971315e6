/* papi.c — see papi.h. Counting is per kind: begin() reads the counters (or starts
 * them), end() adds the difference to the kind's totals. */
#include "config.h"

#include "prof/papi.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

#if HAVE_PAPI
#include <papi.h>
#endif

const char *ppdl_papi_kind_name(int kind)
{
    static const char *const names[] = {"forward", "backward", "optimizer"};
    return kind >= 0 && kind < PPDL_PAPI_N_KINDS ? names[kind] : "?";
}

static int parse_events(ppdl_papi *p, const char *events, char names[][64], int *n, char *err, size_t errlen)
{
    char buf[1024];
    if (!events || !*events) return ppdl_errf(err, errlen, "--papi: expected a comma-separated list of PAPI events, e.g. PAPI_TOT_CYC,PAPI_TOT_INS");
    snprintf(buf, sizeof buf, "%s", events);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == PPDL_PAPI_MAX_EVENTS)
            return ppdl_errf(err, errlen, "--papi %s: at most %d events", events, PPDL_PAPI_MAX_EVENTS);
        if (strlen(t) >= 64) return ppdl_errf(err, errlen, "--papi: event name '%.20s...' is too long", t);
        snprintf(names[(*n)++], 64, "%s", t);
    }
    if (*n == 0) return ppdl_errf(err, errlen, "--papi %s: no event names", events);
    (void)p;
    return 0;
}

#if HAVE_PAPI
int ppdl_papi_init(ppdl_papi *p, const char *events, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->active = -1;
    p->event_set = PAPI_NULL;
    char want[PPDL_PAPI_MAX_EVENTS][64];
    int n_want;
    if (parse_events(p, events, want, &n_want, err, errlen)) return -1;
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT) {
        snprintf(p->note, sizeof p->note, "PAPI_library_init failed (%s): no counters, PAPI timers only",
                 rc > 0 ? "version mismatch" : PAPI_strerror(rc));
        return 0;
    }
    if ((rc = PAPI_create_eventset(&p->event_set)) != PAPI_OK) {
        snprintf(p->note, sizeof p->note, "PAPI_create_eventset: %s: no counters, PAPI timers only", PAPI_strerror(rc));
        return 0;
    }
    size_t off = 0;
    for (int i = 0; i < n_want; i++) {
        int code;
        rc = PAPI_event_name_to_code(want[i], &code);
        if (rc == PAPI_OK) rc = PAPI_add_event(p->event_set, code);
        if (rc == PAPI_OK) {
            memcpy(p->names[p->n_events++], want[i], sizeof want[i]); /* both 64 bytes, NUL-terminated */
        } else if (off < sizeof p->note) {
            off += (size_t)snprintf(p->note + off, sizeof p->note - off, "%s%s: %s", off ? "; " : "", want[i],
                                    rc == PAPI_ECMP_DISABLED ? "this machine exposes no hardware counters (a VM?)"
                                                             : PAPI_strerror(rc));
        }
    }
    if (p->n_events) {
        rc = PAPI_start(p->event_set);
        if (rc != PAPI_OK) {
            snprintf(p->note, sizeof p->note, "PAPI_start: %s: no counters, PAPI timers only", PAPI_strerror(rc));
            p->n_events = 0;
        }
    } else if (off < sizeof p->note) {
        snprintf(p->note + off, sizeof p->note - off, " -- no counters here (papi_avail lists the "
                                                      "machine's; a VM often has none): PAPI timers only");
    }
    return 0;
}

void ppdl_papi_begin(ppdl_papi *p, int kind)
{
    if (!p) return;
    p->active = kind;
    p->t0_ns = PAPI_get_real_nsec();
    if (p->n_events) {
        long long v[PPDL_PAPI_MAX_EVENTS];
        int rc = PAPI_read(p->event_set, v);
        PPDL_CHECK(rc == PAPI_OK, "PAPI_read: %s", PAPI_strerror(rc));
        for (int i = 0; i < p->n_events; i++) p->counts[kind][i] -= v[i];
    }
}

void ppdl_papi_end(ppdl_papi *p, int kind)
{
    if (!p || p->active != kind) return;
    p->real_ns[kind] += PAPI_get_real_nsec() - p->t0_ns;
    if (p->n_events) {
        long long v[PPDL_PAPI_MAX_EVENTS];
        int rc = PAPI_read(p->event_set, v);
        PPDL_CHECK(rc == PAPI_OK, "PAPI_read: %s", PAPI_strerror(rc));
        for (int i = 0; i < p->n_events; i++) p->counts[kind][i] += v[i];
    }
    p->active = -1;
}

void ppdl_papi_finish(ppdl_papi *p)
{
    if (p->n_events) {
        long long v[PPDL_PAPI_MAX_EVENTS];
        PAPI_stop(p->event_set, v);
    }
    if (p->event_set != PAPI_NULL) {
        PAPI_cleanup_eventset(p->event_set);
        PAPI_destroy_eventset(&p->event_set);
    }
}
#else
#include "core/util.h"
int ppdl_papi_init(ppdl_papi *p, const char *events, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->active = -1;
    char want[PPDL_PAPI_MAX_EVENTS][64];
    int n_want;
    if (parse_events(p, events, want, &n_want, err, errlen)) return -1;
    snprintf(p->note, sizeof p->note, "this ppdl was built without PAPI (install libpapi-dev and reconfigure): "
                                      "no counters, wall-clock timers only");
    return 0;
}
void ppdl_papi_begin(ppdl_papi *p, int kind)
{
    if (!p) return;
    p->active = kind;
    p->t0_ns = (long long)(1e9 * ppdl_now_s());
}
void ppdl_papi_end(ppdl_papi *p, int kind)
{
    if (!p || p->active != kind) return;
    p->real_ns[kind] += (long long)(1e9 * ppdl_now_s()) - p->t0_ns;
    p->active = -1;
}
void ppdl_papi_finish(ppdl_papi *p) { (void)p; }
#endif
