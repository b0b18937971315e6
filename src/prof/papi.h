/* papi.h — hardware counters per operation kind (forward, backward, optimizer) with
 * PAPI, for `ppdl --papi EVENTS`.
 *
 * Where the machine exposes no counters (a VM: PAPI_add_event fails with
 * PAPI_ECMP_DISABLED, PAPI_start with PAPI_ECMP), ppdl_papi_create still succeeds,
 * with no events, and says why in one line: the run continues, and PAPI's real-time
 * clock still measures each kind's time. Built without PAPI (./configure found no
 * libpapi), the same API exists and only reports that. */
#ifndef PPDL_PAPI_H
#define PPDL_PAPI_H

#include <stddef.h>

#define PPDL_PAPI_MAX_EVENTS 8
enum { PPDL_PAPI_FORWARD = 0, PPDL_PAPI_BACKWARD, PPDL_PAPI_OPTIMIZER, PPDL_PAPI_N_KINDS };

typedef struct ppdl_papi {
    int n_events;                                   /* events counting (0 without counters) */
    char names[PPDL_PAPI_MAX_EVENTS][64];
    int event_set;
    int active;                                     /* kind being counted, -1 when none */
    long long t0_ns;
    long long counts[PPDL_PAPI_N_KINDS][PPDL_PAPI_MAX_EVENTS];
    long long real_ns[PPDL_PAPI_N_KINDS];           /* PAPI_get_real_nsec per kind */
    char note[256];                                 /* why counters are missing, "" when counting */
} ppdl_papi;

/* events: comma-separated PAPI event names (PAPI_TOT_CYC,PAPI_TOT_INS,...). Returns -1
 * only for a malformed list (too many, empty); an unknown or unavailable event is not
 * an error: it is left out and explained in p->note. */
int ppdl_papi_init(ppdl_papi *p, const char *events, char *err, size_t errlen);
void ppdl_papi_begin(ppdl_papi *p, int kind);
void ppdl_papi_end(ppdl_papi *p, int kind);
void ppdl_papi_finish(ppdl_papi *p);
const char *ppdl_papi_kind_name(int kind);

#endif
