/* test_p2p_choice.c — `--p2p auto|nccl|mpi` (pipe/p2p_choice.h): which path runs for
 * which set-up, and why.
 *
 *  - Every combination of the inputs (asked auto/nccl/mpi x a build with or without
 *    NCCL x the cpu or cuda backend x every rank on a GPU of its own or not: 24 cases),
 *    written out below one by one, gives the expected path, and its reason names what
 *    decided it: mpi asked -> mpi, "--p2p mpi"; auto -> nccl only with NCCL built, the
 *    cuda backend and a GPU per rank, else mpi naming the first thing missing (the
 *    build, then the backend, then the GPUs); nccl asked where it cannot run -> -1 with
 *    a message naming --p2p nccl and that same thing.
 *  - The own-GPU flag is read only for the cuda backend (a cpu case with it 0 or 1
 *    gives the same answer: those rows are in the table).
 *  - The parser takes exactly auto, nccl, mpi (case matters; empty and NULL are
 *    refused), and ppdl_p2p_name gives the names back.
 */
#include "pipe/p2p_choice.h"

#include "tap.h"

#include <string.h>

enum { AUTO = PPDL_P2P_AUTO, NCCL = PPDL_P2P_NCCL, MPI = PPDL_P2P_MPI, REFUSED = -1 };

typedef struct row {
    int asked, nccl_built;
    const char *backend;
    int own_gpus;
    int want;              /* the path, or REFUSED */
    const char *because;   /* a phrase the reason must hold */
} row;

#define NO_BUILD "built without NCCL"
#define CPU_BE "the cpu backend"
#define SHARED "ranks share a GPU"
#define ALL_OK "a GPU of its own on every rank"

static const row rows[] = {
    /* asked  built backend own  want     because */
    {AUTO, 0, "cpu", 0, MPI, NO_BUILD},
    {AUTO, 0, "cpu", 1, MPI, NO_BUILD},
    {AUTO, 0, "cuda", 0, MPI, NO_BUILD},
    {AUTO, 0, "cuda", 1, MPI, NO_BUILD},
    {AUTO, 1, "cpu", 0, MPI, CPU_BE},
    {AUTO, 1, "cpu", 1, MPI, CPU_BE},
    {AUTO, 1, "cuda", 0, MPI, SHARED},
    {AUTO, 1, "cuda", 1, NCCL, ALL_OK},
    {NCCL, 0, "cpu", 0, REFUSED, NO_BUILD},
    {NCCL, 0, "cpu", 1, REFUSED, NO_BUILD},
    {NCCL, 0, "cuda", 0, REFUSED, NO_BUILD},
    {NCCL, 0, "cuda", 1, REFUSED, NO_BUILD},
    {NCCL, 1, "cpu", 0, REFUSED, CPU_BE},
    {NCCL, 1, "cpu", 1, REFUSED, CPU_BE},
    {NCCL, 1, "cuda", 0, REFUSED, SHARED},
    {NCCL, 1, "cuda", 1, NCCL, ALL_OK},
    {MPI, 0, "cpu", 0, MPI, "--p2p mpi"},
    {MPI, 0, "cpu", 1, MPI, "--p2p mpi"},
    {MPI, 0, "cuda", 0, MPI, "--p2p mpi"},
    {MPI, 0, "cuda", 1, MPI, "--p2p mpi"},
    {MPI, 1, "cpu", 0, MPI, "--p2p mpi"},
    {MPI, 1, "cpu", 1, MPI, "--p2p mpi"},
    {MPI, 1, "cuda", 0, MPI, "--p2p mpi"},
    {MPI, 1, "cuda", 1, MPI, "--p2p mpi"},
};

static const char *path_name(int p) { return p == REFUSED ? "refused" : ppdl_p2p_name(p); }

int main(void)
{
    int n = (int)(sizeof rows / sizeof rows[0]);
    plan(n + 11);
    for (int i = 0; i < n; i++) {
        const row *c = &rows[i];
        char why[256] = "";
        int got = ppdl_p2p_choose(c->asked, c->nccl_built, c->backend, c->own_gpus, why, sizeof why);
        int good = got == c->want && strstr(why, c->because) != NULL;
        /* a refusal is an error message: it names the option that asked */
        if (c->want == REFUSED) good = good && strstr(why, "--p2p nccl") != NULL;
        /* auto says it was auto, so the header tells a choice from an order */
        if (c->asked == AUTO) good = good && strstr(why, "--p2p auto") != NULL;
        ok(good, "asked %s, NCCL %s, backend %s, %s -> %s (%s)", ppdl_p2p_name(c->asked),
           c->nccl_built ? "built" : "not built", c->backend, c->own_gpus ? "a GPU per rank" : "GPUs shared",
           path_name(c->want), c->because);
        if (!good) diag("  got %s: \"%s\"", path_name(got), why);
    }
    is_int(ppdl_p2p_parse("auto"), AUTO, "parse auto");
    is_int(ppdl_p2p_parse("nccl"), NCCL, "parse nccl");
    is_int(ppdl_p2p_parse("mpi"), MPI, "parse mpi");
    is_int(ppdl_p2p_parse("foo"), -1, "parse foo: refused");
    is_int(ppdl_p2p_parse("NCCL"), -1, "parse NCCL: refused (the names are lower case)");
    is_int(ppdl_p2p_parse(""), -1, "parse the empty string: refused");
    is_int(ppdl_p2p_parse(NULL), -1, "parse NULL: refused");
    ok(!strcmp(ppdl_p2p_name(AUTO), "auto"), "name of auto");
    ok(!strcmp(ppdl_p2p_name(NCCL), "nccl"), "name of nccl");
    ok(!strcmp(ppdl_p2p_name(MPI), "mpi"), "name of mpi");
    /* a short buffer: the reason is cut, never overrun */
    char small[8];
    memset(small, 'x', sizeof small);
    int got = ppdl_p2p_choose(NCCL, 0, "cpu", 0, small, sizeof small);
    ok(got == REFUSED && strlen(small) == sizeof small - 1, "a short reason buffer: refused, cut to %zu chars",
       sizeof small - 1);
    return exit_status();
}
