/* mpich_end.c — the end of a job under MPICH 4.0's Hydra and UCX's TCP transport: the
 * bounded MPI_Finalize and the status kept for Hydra (mpich_end.h). */
#include "core/mpich_end.h"
#include "core/stop.h"
#include "core/test_hooks.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Hydra's proxy starts the ranks with MPI_LOCALNRANKS set (srun does not) and talks
 * PMI-1 with them over the socket PMI_FD. */
static int pmi_fd(void)
{
    const char *h = getenv("MPI_LOCALNRANKS"), *fd = getenv("PMI_FD");
    long v;
    if (!h || !fd || ppdl_parse_int(fd, 0, 1 << 20, &v)) return -1;
    return (int)v;
}

/* Linux shows a thread's current system call and its first argument in
 * /proc/self/task/TID/syscall: "0 0x6 ..." is a read() of descriptor 6 */
static int reads_pmi(pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    int pfd = pmi_fd(), fd = pfd < 0 ? -1 : open(path, O_RDONLY), nr = -1;
    if (fd < 0) return 0;
    ssize_t got = read(fd, line, sizeof line - 1);
    close(fd);
    if (got <= 0) return 0;
    line[got] = 0;
    unsigned long arg = 0;
    return sscanf(line, "%d %lx", &nr, &arg) == 2 && nr == SYS_read && (int)arg == pfd;
}

/* Tell Hydra's proxy that this rank finalized (PMI-1's "finalize"): the proxy then no
 * longer watches the rank's PMI socket, and the rank's end is not a crash for which it
 * kills the others (with SIGKILL, which would replace their statuses). The rank waits
 * for the proxy's answer: ending before it, the proxy's write would fail and take
 * mpiexec down with an error (status 255, seen). */
static void tell_finalized(void)
{
    int fd = pmi_fd();
    if (fd < 0) return;
    static const char msg[] = "cmd=finalize\n", ack[] = "cmd=finalize_ack";
    if (send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof msg - 1)) return;
    /* read lines (a barrier's answer may come first) until the acknowledgement, 2 s at most */
    char buf[256];
    size_t len = 0;
    double until = ppdl_now_s() + 2;
    while (ppdl_now_s() < until) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t got = read(fd, buf + len, sizeof buf - 1 - len);
        if (got <= 0) return;
        len += (size_t)got;
        buf[len] = 0;
        if (strstr(buf, ack)) return;
        char *nl = strrchr(buf, '\n'); /* keep only the unfinished line */
        if (nl) {
            len = strlen(nl + 1);
            memmove(buf, nl + 1, len + 1);
        }
        if (len >= sizeof buf - 1) len = 0;
    }
}

/* The state letter of process `pid` in /proc/PID/stat ('Z': ended, not yet reaped),
 * 0 when it is gone (reaped). Async-signal-safe: it runs in a forked child. */
static char proc_state(pid_t pid)
{
    char path[40] = "/proc/", buf[256], digits[16];
    int nd = 0, len = 6;
    for (long v = pid; v > 0 && nd < 15; v /= 10) digits[nd++] = (char)('0' + v % 10);
    while (nd > 0) path[len++] = digits[--nd];
    memcpy(path + len, "/stat", 6);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return 0;
    buf[got] = 0;
    char *p = strrchr(buf, ')'); /* "pid (name) S ...": the name may hold spaces */
    return p && p[1] == ' ' ? p[2] : 0;
}

/* wait (naps of 5 ms, `limit_s` at most) until pid has ended (until_zombie) or has
 * been reaped (else) */
static void wait_state(pid_t pid, int until_zombie, double limit_s)
{
    for (int i = 0; i < (int)(limit_s * 200); i++) {
        char st = proc_state(pid);
        if (st == 0 || (until_zombie && st == 'Z')) return;
        struct timespec nap = {0, 5 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

/* Keep a non-zero status for Hydra. After Hydra has forwarded a signal to the ranks
 * (SIGTERM or SIGUSR1 to mpiexec), its proxy counts the end of the job as a forced
 * cleanup: a rank it reaps after all its ranks' stdout and stderr have closed is
 * reported with status 0, whatever it returned; only a rank reaped while some of them
 * are still open keeps its status (MPICH 4.0.2, src/pm/hydra/pm/pmiserv/pmip.c: each
 * event on those pipes is followed by one waitpid). mpiexec ORs the statuses, so a job
 * whose ranks all exited 75 is now and then reported as 0, and would be every time
 * with one rank per node.
 * So the rank hands its stdout and stderr to a helper process, which closes stdout once
 * the rank has ended (an event: the proxy reaps a rank that has ended, with its
 * status), and stderr only once the rank has been reaped (so the proxy keeps watching
 * until then; the closing of another helper's stderr is the event that reaps the
 * next rank). Bounded: 5 s at most. The child runs only async-signal-safe calls (the
 * rank has threads). */
static void keep_status_helper(void)
{
    if (pmi_fd() < 0) return;
    int p[2];
    if (pipe(p)) return;
    pid_t rank = getpid(), pid = fork();
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
    /* end of file: the rank is ending */
    wait_state(rank, 1, 2);
    close(STDOUT_FILENO);
    wait_state(rank, 0, 3);
    _exit(0);
}

/* Hydra forgets a rank's status after it forwarded a signal (keep_status_helper): a
 * run stopped by a signal keeps a non-zero one */
void ppdl_mpich_keep_status(int status)
{
    if (status != 0 && ppdl_stop_signal()) keep_status_helper();
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
                       "transport; docs/clusters.md, PPDL_FINALIZE_TIMEOUT)\n",
                       wd.rank, wd.timeout_s, wd.status);
    if (len > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
        (void)w;
    }
    /* Hydra's proxy keeps a finalized rank in a pending PMI barrier: if the barrier
     * completes after the rank ended, the proxy writes to its closed socket and takes
     * mpiexec down (status 255, now and then). The barrier completes only once
     * every rank has entered it, and a rank that ends outside it never will: so the
     * ranks waiting in it (they entered it) end a second after the others, whose end
     * keeps the barrier from ever completing. */
    if (reads_pmi(wd.main_tid)) {
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
    if (parked) tell_finalized(); /* else ending without it beats hanging */
    ppdl_mpich_keep_status(wd.status);
    _exit(wd.status);
    return NULL;
}

void ppdl_mpich_finalize(int status, double timeout_s)
{
    wd.status = status;
    wd.rank = ppdl_log_rank();
    wd.main = pthread_self();
    wd.main_tid = gettid();
    wd.timeout_s = timeout_s;
    pthread_t th;
    int watched = wd.timeout_s > 0 && pthread_create(&th, NULL, watchdog, NULL) == 0;
    /* the test hook FINALIZE_HANG=RANK (core/test_hooks.h): that rank hangs where
     * MPI_Finalize would, for ever; the other ranks then hang in theirs, waiting for it */
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
}
