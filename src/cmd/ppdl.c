/* ppdl.c — train a model with pipeline parallelism. The story of a run, top to bottom;
 * each step is a function of its own (src/cmd/run.h says which file holds which):
 *
 *   1. start MPI, read the command line (every rank, identically)
 *   2. read the model description and find the checkpoint to resume (a finished run
 *      stops here); start the device; know the network (probe it, read a saved
 *      CLUSTER.json, or emulate one: --netem); open the data, know what each layer
 *      costs (profiled or read)
 *   3. choose the plan: which layers each rank's stage runs, on which ranks, and what
 *      it recomputes; predict each stage's memory
 *   4. build this rank's stage: its layers on its backend, only its own weights
 *   5. run the schedule (--schedule gpipe, 1f1b, zb-h1, zb-h2, zb-1p, interleaved, zb-v,
 *      or auto: the planner's choice) step after step; rank 0 prints progress;
 *      checkpoints between steps, an early stop on a signal or the time limit
 *   6. finish: gather every rank's numbers; report, trace, timeline; save the weights
 *
 * Errors that every rank sees alike (a bad option, a bad file) are reported once by
 * rank 0 and every rank exits non-zero (agree_or_end_job); an error on one rank alone
 * aborts the job (core/error.h). Every rank ends through ppdl_end_job (core/finish.h):
 * the same exit status on every rank (docs/cli.md's table), and no hang in MPI_Finalize.
 */
#include <mpi.h>
#include <string.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/finish.h"

int main(int argc, char **argv)
{
    /* Threads other than this one never call MPI (the CPU backend's workers, the
     * planner's second solve under --schedule auto): MPI_THREAD_FUNNELED says so.
     * An MPI that grants only SINGLE runs them too: they make no MPI call. */
    int provided = MPI_THREAD_SINGLE;
    PPDL_CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    run r;

    /* ---- 1. the command line ---- */
    if (run_start(&r, argc, argv)) ppdl_end_job(0); /* --help, --version */

    /* ---- 2. the model, the device, the network; the data and the costs ---- */
    if (run_setup_model(&r)) { /* the run had finished: nothing to do */
        run_free(&r);
        MPI_Finalize();
        return 0;
    }
    run_setup_device_and_network(&r);
    if (r.o.probe_only) {
        run_free(&r);
        ppdl_end_job(0);
    }
    run_setup_data(&r);

    /* ---- 3. the plan ---- */
    run_choose_plan(&r);

    /* ---- 4. this rank's stage ---- */
    run_build_stage(&r);
    run_print_header(&r);

    /* ---- 5. train ---- */
    run_train(&r);

    /* ---- 6. report, trace, timeline, weights ---- */
    run_finish(&r);
    int status = run_exit_status(&r);
    run_free(&r);
    ppdl_end_job(status); /* every rank alike; a finalize that hangs is bounded (core/finish.h) */
}
