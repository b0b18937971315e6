/* p2p_choice.c — the rules of `--p2p` (see p2p_choice.h). */
#include "pipe/p2p_choice.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"auto", "nccl", "mpi"};

int ppdl_p2p_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, names[i])) return i;
    return -1;
}

const char *ppdl_p2p_name(int p2p) { return p2p >= 0 && p2p < 3 ? names[p2p] : "?"; }

/* why NCCL cannot carry this job's messages, NULL when it can; checked in this order so
 * that the reason is the most basic one */
static const char *nccl_blocker(int build_has_nccl, const char *backend, int own_gpus)
{
    if (!build_has_nccl) return "this ppdl was built without NCCL (configure --with-cuda)";
    if (strcmp(backend, "cuda")) return "the cpu backend: its messages are in host memory, NCCL moves GPU memory";
    if (!own_gpus) return "ranks share a GPU, and NCCL needs one GPU per rank (PPDL_CUDA_SHARE=1 with more ranks "
                          "than GPUs on a node)";
    return NULL;
}

int ppdl_p2p_choose(int asked, int build_has_nccl, const char *backend, int own_gpus, char *why, size_t len)
{
    if (asked == PPDL_P2P_MPI) {
        snprintf(why, len, "--p2p mpi");
        return PPDL_P2P_MPI;
    }
    const char *blocker = nccl_blocker(build_has_nccl, backend, own_gpus);
    if (blocker && asked == PPDL_P2P_NCCL) {
        snprintf(why, len, "--p2p nccl cannot run: %s; use --p2p auto or mpi", blocker);
        return -1;
    }
    if (blocker) {
        snprintf(why, len, "--p2p auto: %s", blocker);
        return PPDL_P2P_MPI;
    }
    snprintf(why, len, "--p2p %s: the cuda backend and a GPU of its own on every rank", ppdl_p2p_name(asked));
    return PPDL_P2P_NCCL;
}
