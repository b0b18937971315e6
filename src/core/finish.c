/* finish.c — how every rank ends (finish.h): the meeting, the bounded MPI_Finalize, the
 * status kept for the launcher. */
#include "core/finish.h"
#include "core/hydra.h"
#include "core/stop.h"
#include "core/util.h"
#include "core/test_hooks.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ppdl_finalize_timeout(double *seconds, char *err, size_t errlen)
{
    const char *s = getenv("PPDL_FINALIZE_TIMEOUT");
    *seconds = PPDL_FINALIZE_TIMEOUT_S;
    if (!s || !*s) return 0;
    if (ppdl_parse_float(s, 0, 86400, seconds))
        return ppdl_errf(err, errlen, "PPDL_FINALIZE_TIMEOUT=%s: expected seconds from 0 (no bound) to 86400", s);
    return 0;
}

void ppdl_wait_all_idle(int n, MPI_Request *reqs)
{
    /* naps grow from 20 us to 0.5 ms: a quick answer when the wait is short, and a long
     * wait (a bystander of the probe) wakes rarely, so it steals little from the ranks
     * that work */
    long nap_ns = 20 * 1000;
    for (;;) {
        int all = 1;
        for (int k = 0; k < n; k++) {
            int done = 1;
            if (reqs[k] != MPI_REQUEST_NULL) PPDL_CHECK_MPI(MPI_Test(&reqs[k], &done, MPI_STATUS_IGNORE));
            all &= done;
        }
        if (all) return;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 500 * 1000) nap_ns *= 2;
    }
}

/* Hydra forgets a rank's status after it forwarded a signal (hydra.c): a run stopped
 * by a signal keeps a non-zero one */
static void keep_status(int status)
{
    if (status != 0 && ppdl_stop_signal()) ppdl_hydra_keep_status();
}

/* Park the main thread for good: it may be inside MPICH's PMI client, reading the
 * socket the watchdog is about to use. A signal handler that never returns keeps it
 * away (the process ends with the watchdog's _exit). */
#define PARK_SIGNAL (SIGRTMIN + 7)
static volatile sig_atomic_t parked;

static void park(int sig)
{
    (void)sig;
    parked = 1;
    for (;;) pause();
}

/* ---- the watchdog on MPI_Finalize ---- */

static struct {
    int status, rank;
    double timeout_s;
    pthread_t main;
    pid_t main_tid;
} wd;

/* a rank that waits in the PMI barrier ends this much after the others (see watchdog) */
#define PMI_GRACE_S 1

static void *watchdog(void *arg)
{
    (void)arg;
    double whole = 0, frac = modf(wd.timeout_s, &whole);
    struct timespec t = {(time_t)whole, (long)(frac * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
    /* every rank times out together (the ranks that flushed wait in a PMI barrier for
     * the ones that cannot): rank 0 speaks for all */
    char line[512];
    int len = wd.rank > 0 ? 0 : snprintf(line, sizeof line,
                       "ppdl: rank %d: MPI_Finalize had not returned after %g s (its work and files were "
                       "complete): ending with the run's exit status %d (a hang of MPICH 4.0 with UCX's TCP "
                       "transport; README \"Exit statuses and hangs\", PPDL_FINALIZE_TIMEOUT)\n",
                       wd.rank, wd.timeout_s, wd.status);
    if (len > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
        (void)w;
    }
    /* Hydra's proxy keeps a finalized rank in a pending PMI barrier: if the barrier
     * completes after the rank ended, the proxy writes to its closed socket and takes
     * mpiexec down (status 255, seen in 1 of 8 runs). The barrier completes only once
     * every rank has entered it, and a rank that ends outside it never will: so the
     * ranks waiting in it (they entered it) end a second after the others, whose end
     * keeps the barrier from ever completing. */
    if (ppdl_hydra_reads_pmi(wd.main_tid)) {
        struct timespec grace = {PMI_GRACE_S, 0};
        while (nanosleep(&grace, &grace) != 0 && errno == EINTR) {}
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = park;
    sigemptyset(&sa.sa_mask);
    if (sigaction(PARK_SIGNAL, &sa, NULL) == 0 && pthread_kill(wd.main, PARK_SIGNAL) == 0)
        for (int i = 0; i < 1000 && !parked; i++) { /* 1 s at most */
            struct timespec ms = {0, 1000 * 1000};
            nanosleep(&ms, NULL);
        }
    if (parked) ppdl_hydra_tell_finalized(); /* else ending without it beats hanging */
    keep_status(wd.status);
    _exit(wd.status);
    return NULL;
}

void ppdl_end_job(int status)
{
    int up = 0, down = 0;
    fflush(stdout);
    fflush(stderr);
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (!up || down) exit(status);
    /* every rank's outputs are complete before any rank finalizes */
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    ppdl_wait_all_idle(1, &req);
    wd.status = status;
    wd.rank = ppdl_log_rank();
    wd.main = pthread_self();
    wd.main_tid = gettid();
    /* a malformed bound was refused at the start (run_start); here it means the default */
    if (ppdl_finalize_timeout(&wd.timeout_s, NULL, 0)) wd.timeout_s = PPDL_FINALIZE_TIMEOUT_S;
    pthread_t th;
    int watched = wd.timeout_s > 0 && pthread_create(&th, NULL, watchdog, NULL) == 0;
    /* the test hook FINALIZE_HANG=RANK (core/test_hooks.h): that rank hangs where MPI_Finalize
     * would, for ever; the other ranks then hang in theirs, waiting for it */
    const char *hang = ppdl_test_hook("FINALIZE_HANG");
    long hang_rank = -1;
    if (hang && !ppdl_parse_int(hang, 0, 1 << 20, &hang_rank) && hang_rank == wd.rank)
        for (;;) {
            struct timespec s = {1, 0};
            nanosleep(&s, NULL);
        }
    MPI_Finalize();
    if (watched) {
        pthread_cancel(th);
        pthread_join(th, NULL);
    }
    keep_status(status);
    exit(status);
}
