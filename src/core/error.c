#include "core/error.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int log_rank = -1;

void ppdl_set_log_rank(int rank) { log_rank = rank; }
int ppdl_log_rank(void) { return log_rank; }

/* Abort everything: MPI_Abort when MPI runs (all ranks end), exit otherwise. */
PPDL_NORETURN static void abort_job(int code)
{
    int up = 0, down = 0;
    fflush(stdout);
    fflush(stderr);
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) {
        /* hydra kills the job on MPI_Abort, sometimes before its proxy has forwarded this
         * rank's last output: on a loaded machine the message explaining the abort is
         * lost now and then, and this pause keeps it */
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    _exit(code);
}

static void vprint(const char *file, int line, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    if (file && log_rank >= 0)
        fprintf(stderr, "ppdl: rank %d (%s): %s:%d: %s\n", log_rank, host, file, line, msg);
    else if (file) /* not an MPI rank (ppdl-plan, or before MPI_Init): no rank to name */
        fprintf(stderr, "ppdl: (%s): %s:%d: %s\n", host, file, line, msg);
    else if (log_rank >= 0)
        fprintf(stderr, "ppdl: rank %d: %s\n", log_rank, msg);
    else
        fprintf(stderr, "ppdl: %s\n", msg);
}

void ppdl_die_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(file, line, fmt, ap);
    va_end(ap);
    abort_job(70); /* EX_SOFTWARE */
}

void ppdl_fail(int exit_code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(NULL, 0, fmt, ap);
    va_end(ap);
    abort_job(exit_code);
}

int ppdl_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void ppdl_die_mpi(const char *file, int line, const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, s, &len);
    ppdl_die_at(file, line, "%s failed: %s", what, s);
}
