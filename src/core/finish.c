/* finish.c — how every rank ends (finish.h): the meeting, the bounded MPI_Finalize, the
 * status kept for the launcher. */
#include "core/finish.h"
#include "core/stop.h"
#include "core/util.h"

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

/* ---- the launcher: Hydra ---- */

/* Hydra's proxy starts the ranks with MPI_LOCALNRANKS set (srun does not) and talks
 * PMI-1 with them over the socket PMI_FD. */
static int pmi_fd_of_hydra(void)
{
    const char *h = getenv("MPI_LOCALNRANKS"), *fd = getenv("PMI_FD");
    long v;
    if (!h || !fd || ppdl_parse_int(fd, 0, 1 << 20, &v)) return -1;
    return (int)v;
}

/* Keep a non-zero status for Hydra. After Hydra has forwarded a signal to the ranks
 * (SIGTERM or SIGUSR1 to mpiexec), its proxy counts the end of the job as a forced
 * cleanup: a rank it reaps after all its ranks' stdout and stderr have closed is
 * reported with status 0, whatever it returned; only a rank reaped while some of them
 * are still open keeps its status (MPICH 4.0.2, src/pm/hydra/pm/pmiserv/pmip.c).
 * mpiexec ORs the statuses, so a job whose ranks all exited 75 was reported as 0 in
 * 2 of 8 runs, and would be every time with one rank per node.
 * So the rank hands its stdout and stderr to a helper process that closes them only
 * after the rank has ended: first stdout (the proxy wakes up, finds the ended rank and
 * keeps its status; stderr is still open), then stderr. It delays the end of the job
 * by about 0.3 s. The child runs only async-signal-safe calls (the rank has threads). */
static void keep_status(int status)
{
    if (status == 0 || !ppdl_stop_signal() || pmi_fd_of_hydra() < 0) return;
    int p[2];
    if (pipe(p)) return;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid > 0) { /* the rank: keeps the pipe's write end until it ends */
        close(p[0]);
        return;
    }
    /* the helper: the same process group as the rank, so a signal Hydra forwards again
     * reaches it too: ignore them */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGUSR1, &ign, NULL);
    sigaction(SIGINT, &ign, NULL);
    close(p[1]);
    for (int fd = 3; fd < 1024; fd++) /* hold no socket or file of the rank */
        if (fd != p[0]) close(fd);
    char c;
    while (read(p[0], &c, 1) != 0 && errno == EINTR) {}
    /* end of file: the rank has closed its files, it is ending */
    struct timespec gone = {0, 100 * 1000 * 1000}, apart = {0, 200 * 1000 * 1000};
    nanosleep(&gone, NULL);
    close(STDOUT_FILENO);
    nanosleep(&apart, NULL);
    _exit(0);
}

/* Tell Hydra's proxy that this rank finalized (PMI-1's "finalize"): the proxy then no
 * longer watches the rank's PMI socket, and the rank's end is not a crash for which it
 * kills the others (with SIGKILL, which would replace their statuses). */
static void tell_hydra_finalized(void)
{
    int fd = pmi_fd_of_hydra();
    if (fd < 0) return;
    static const char msg[] = "cmd=finalize\n";
    ssize_t w = write(fd, msg, sizeof msg - 1);
    (void)w;
}

/* ---- the watchdog on MPI_Finalize ---- */

static struct {
    int status, rank;
    double timeout_s;
} wd;

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
    keep_status(wd.status);
    /* the last two steps, at once: a rank whose main thread waits in a PMI barrier
     * receives the proxy's answer to "finalize" on that socket, which it would take for
     * a broken barrier; the proxy answers tens of microseconds later at least, and this
     * thread has ended the process by then */
    tell_hydra_finalized();
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
    /* a malformed bound was refused at the start (run_start); here it means the default */
    if (ppdl_finalize_timeout(&wd.timeout_s, NULL, 0)) wd.timeout_s = PPDL_FINALIZE_TIMEOUT_S;
    pthread_t th;
    int watched = wd.timeout_s > 0 && pthread_create(&th, NULL, watchdog, NULL) == 0;
    MPI_Finalize();
    if (watched) {
        pthread_cancel(th);
        pthread_join(th, NULL);
    }
    keep_status(status);
    exit(status);
}
