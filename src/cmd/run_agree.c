/* run_agree.c — the job-ending agreement. Errors that every rank sees alike (a bad
 * option, a bad file) and errors of one rank (its memory limit, its checkpoint part)
 * end the job the same way: every rank reaches the same call, the lowest failing rank
 * explains once, and all exit with the same status. No rank is left waiting and the
 * launcher sees no abort. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/finish.h"
#include "net/comm.h"

static void agree(int failed, const char *msg, int code, int idle)
{
    int rank, first_bad = INT_MAX, mine;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mine = failed ? rank : INT_MAX;
    if (idle) {
        /* the other ranks nap while one works alone (a spinning rank on the same cores
         * would slow it) */
        MPI_Request req;
        PPDL_CHECK_MPI(MPI_Iallreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req));
        ppdl_comm_waitall_idle(1, &req);
    } else {
        PPDL_CHECK_MPI(MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    }
    if (first_bad == INT_MAX) return;
    if (rank == first_bad) fprintf(stderr, "ppdl: %s\n", msg);
    ppdl_end_job(code);
}

/* Napping, not spinning: where ranks share cores, a rank spinning in a blocking
 * MPI_Allreduce holds a core the others need to reach it, and each agreement (a plan
 * trial's set-up has many) can take up to a time slice; napping makes the set-up
 * shorter. An answer comes up to a nap late, 20 us at first. */
void agree_or_end_job(int failed, const char *msg, int code) { agree(failed, msg, code, 1); }
void agree_or_end_job_idle(int failed, const char *msg, int code) { agree(failed, msg, code, 1); }
