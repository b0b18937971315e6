/* netem.c — the emulated network: per-link queues at the sender, arrival times in a
 * header beside each message, receivers that wait for the emulated arrival. */
#include "net/netem.h"
#include "net/cluster.h"
#include "core/error.h"
#include "core/util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* One message in flight, known by the address of the caller's MPI_Request variable:
 * not by the handle's value, since MPICH hands out one shared handle for every send
 * that completed at once (seen: four MPI_Isend, four times 0x6c000001). */
typedef struct pending {
    MPI_Request *key;          /* where the caller keeps the data's request */
    MPI_Request hdr;           /* the header's send or receive */
    double hdr_buf[2];         /* arrival time (sender's clock, s), bytes */
    double not_before;         /* send: when its last byte left the link */
    int is_recv;
} pending;

struct ppdl_netem {
    MPI_Comm meta;             /* headers travel here */
    int rank, size;
    double *lat, *bw;          /* [size] this rank's row: to each destination */
    double *link_free;         /* [size] when the link to each destination is free */
    pending **live;
    int n_live, cap_live;
};

/* The nap: 50 us (about 100 with the kernel's default timer slack). On a host with
 * more ranks than cores each hand-off waits for the receiver's nap to end, so a longer
 * nap slows runs of 3 or 4 ranks on 2 cores and speeds up none (perf/bench-default-plan's
 * presets, the naps compared by hand); a shorter one only adds wake-ups, as the timer
 * slack makes any nap about 50 us. */
#define WAIT_NAP_NS (50 * 1000)

void ppdl_wait_pause(double t0, int nap)
{
    if (!nap || ppdl_now_s() - t0 < 100e-6) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, WAIT_NAP_NS};
    nanosleep(&ts, NULL);
}

void ppdl_sleep_until(double t)
{
    /* Sleep, waking 300 us early, then spin. A nanosleep overshoots by tens of us on an
     * idle machine and by hundreds on a busy one (a woken thread waits for the running
     * one's slice); the spin ends on time. Spinning, not sched_yield: a rank that yields
     * while other processes are runnable can lose its core for a whole time slice (ms).
     * On a loaded machine a wake-up 50 us early still misses the emulated time, 300 us
     * early almost never does. */
    for (;;) {
        double d = t - ppdl_now_s();
        if (d <= 0) return;
        if (d > 350e-6) {
            double s = d - 300e-6;
            struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

ppdl_netem *ppdl_netem_create(MPI_Comm comm, const ppdl_cluster_model *cl, char *err, size_t errlen)
{
    int rank, size;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &size));
    if (cl->N != size) {
        ppdl_errf(err, errlen, "--netem: the cluster describes %d ranks but the job has %d", cl->N, size);
        return NULL;
    }
    /* one machine, one CLOCK_MONOTONIC: compare the hosts' names */
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    PPDL_CHECK_MPI(MPI_Get_processor_name(name, &len));
    char *all = ppdl_xcalloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    PPDL_CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm));
    for (int r = 1; r < size; r++)
        if (strcmp(all, all + (size_t)r * MPI_MAX_PROCESSOR_NAME)) {
            ppdl_errf(err, errlen, "--netem: ranks 0 and %d run on different hosts (%s, %s); the emulated "
                      "network compares CLOCK_MONOTONIC across ranks, which only one machine shares. "
                      "Run all ranks on one host (scripts/cluster-emu shapes a real network there)",
                      r, all, all + (size_t)r * MPI_MAX_PROCESSOR_NAME);
            free(all);
            return NULL;
        }
    free(all);

    ppdl_netem *ne = ppdl_xcalloc(1, sizeof *ne);
    ne->rank = rank;
    ne->size = size;
    PPDL_CHECK_MPI(MPI_Comm_dup(comm, &ne->meta));
    ne->lat = ppdl_xmalloc((size_t)size * sizeof(double));
    ne->bw = ppdl_xmalloc((size_t)size * sizeof(double));
    ne->link_free = ppdl_xcalloc((size_t)size, sizeof(double));
    for (int j = 0; j < size; j++) {
        ne->lat[j] = cl->lat[rank * size + j];
        ne->bw[j] = cl->bw[rank * size + j];
    }
    /* timers of this thread fire within 1 us instead of the default 50 us slack, so a
     * sleep for an emulated arrival ends close to it */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    return ne;
}

static pending *track(ppdl_netem *ne, MPI_Request *key, int is_recv)
{
    for (int k = 0; k < ne->n_live; k++)
        PPDL_CHECK(ne->live[k]->key != key, "a request variable was reused before ppdl_comm_wait completed "
                   "its previous message (the emulated network tracks requests by variable)");
    if (ne->n_live == ne->cap_live) {
        ne->cap_live = ne->cap_live ? 2 * ne->cap_live : 32;
        ne->live = realloc(ne->live, (size_t)ne->cap_live * sizeof *ne->live);
        PPDL_CHECK(ne->live, "out of host memory tracking emulated messages");
    }
    /* each entry is its own allocation: MPI holds a pointer to its header buffer */
    pending *p = ppdl_xcalloc(1, sizeof *p);
    p->key = key;
    p->is_recv = is_recv;
    ne->live[ne->n_live++] = p;
    return p;
}

void ppdl_netem_on_send(ppdl_netem *ne, int dst, size_t n_bytes, int tag, MPI_Request *req)
{
    pending *p = track(ne, req, 0);
    double now = ppdl_now_s(), arrival = now;
    p->not_before = now;
    if (dst != ne->rank) { /* a rank's messages to itself are not on the network */
        double start = now > ne->link_free[dst] ? now : ne->link_free[dst];
        ne->link_free[dst] = start + (double)n_bytes / ne->bw[dst];
        p->not_before = ne->link_free[dst];
        arrival = p->not_before + ne->lat[dst];
    }
    p->hdr_buf[0] = arrival;
    p->hdr_buf[1] = (double)n_bytes;
    PPDL_CHECK_MPI(MPI_Isend(p->hdr_buf, 2, MPI_DOUBLE, dst, tag, ne->meta, &p->hdr));
}

void ppdl_netem_on_recv(ppdl_netem *ne, int src, int tag, MPI_Request *req)
{
    PPDL_CHECK(src != MPI_ANY_SOURCE && tag != MPI_ANY_TAG,
               "--netem cannot pair a wildcard receive (MPI_ANY_SOURCE/TAG) with its message's header");
    pending *p = track(ne, req, 1);
    PPDL_CHECK_MPI(MPI_Irecv(p->hdr_buf, 2, MPI_DOUBLE, src, tag, ne->meta, &p->hdr));
}

static int find_live(const ppdl_netem *ne, const MPI_Request *req)
{
    int k = 0;
    while (k < ne->n_live && ne->live[k]->key != req) k++;
    return k < ne->n_live ? k : -1;
}

static void forget(ppdl_netem *ne, int k)
{
    free(ne->live[k]);
    ne->live[k] = ne->live[--ne->n_live];
}

int ppdl_netem_test(ppdl_netem *ne, MPI_Request *req, int *done)
{
    int k = find_live(ne, req);
    if (k < 0) return 0;
    pending *p = ne->live[k];
    /* MPI_Test of a request already completed (MPI_REQUEST_NULL) says done again */
    int d = 0, h = 0;
    PPDL_CHECK_MPI(MPI_Test(req, &d, MPI_STATUS_IGNORE));
    PPDL_CHECK_MPI(MPI_Test(&p->hdr, &h, MPI_STATUS_IGNORE));
    *done = d && h && ppdl_now_s() >= (p->is_recv ? p->hdr_buf[0] : p->not_before);
    if (*done) forget(ne, k);
    return 1;
}

int ppdl_netem_wait(ppdl_netem *ne, MPI_Request *req, int yield)
{
    int k = find_live(ne, req);
    if (k < 0) return 0;
    pending *p = ne->live[k];
    if (yield) {
        /* the comm layer's yielding wait (ppdl_wait_pause), for data and header together */
        int d = 0, h = 0;
        double t0 = ppdl_now_s();
        for (;;) {
            if (!d) PPDL_CHECK_MPI(MPI_Test(req, &d, MPI_STATUS_IGNORE));
            if (!h) PPDL_CHECK_MPI(MPI_Test(&p->hdr, &h, MPI_STATUS_IGNORE));
            if (d && h) break;
            ppdl_wait_pause(t0, yield > 1);
        }
    } else {
        PPDL_CHECK_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
        PPDL_CHECK_MPI(MPI_Wait(&p->hdr, MPI_STATUS_IGNORE));
    }
    ppdl_sleep_until(p->is_recv ? p->hdr_buf[0] : p->not_before);
    forget(ne, k);
    return 1;
}

void ppdl_netem_free(ppdl_netem *ne)
{
    if (!ne) return;
    for (int k = 0; k < ne->n_live; k++) {
        pending *p = ne->live[k];
        if (p->is_recv) PPDL_CHECK_MPI(MPI_Cancel(&p->hdr));
        PPDL_CHECK_MPI(MPI_Wait(&p->hdr, MPI_STATUS_IGNORE));
        free(p);
    }
    free(ne->live);
    PPDL_CHECK_MPI(MPI_Comm_free(&ne->meta));
    free(ne->lat);
    free(ne->bw);
    free(ne->link_free);
    free(ne);
}
