/* p2p_choice.h — `--p2p auto|nccl|mpi`: how pipeline stages send each other their
 * activations and gradients, and how a stage's replicas sum their gradients.
 *
 *   mpi:  MPI messages from host memory; with the CUDA backend each one is staged through
 *         a page-locked host buffer (backend/xfer.h). Runs everywhere.
 *   nccl: NCCL send/recv between the GPUs' memories, on streams of their own, and
 *         ncclAllReduce among a stage's replicas (backend/cuda/nccl_p2p.h). Needs a
 *         build with NCCL (HAVE_CUDA), the cuda backend, and every rank on a GPU of
 *         its own: NCCL refuses two ranks on one device (PPDL_CUDA_SHARE=1 with more
 *         ranks than GPUs on a node).
 *
 * auto takes nccl where all three hold, else mpi; nccl asked where one fails is refused
 * (the caller ends the job with status 2, as for any bad option). A pure function of its
 * inputs, so that every rank, given the same (agreed) inputs, takes the same path. */
#ifndef PPDL_P2P_CHOICE_H
#define PPDL_P2P_CHOICE_H

#include <stddef.h>

enum { PPDL_P2P_AUTO = 0, PPDL_P2P_NCCL, PPDL_P2P_MPI };

/* "auto", "nccl", "mpi" -> PPDL_P2P_*; -1 for anything else */
int ppdl_p2p_parse(const char *s);
/* "auto", "nccl", "mpi" */
const char *ppdl_p2p_name(int p2p);

/* The path for `asked` (PPDL_P2P_*), given whether this build has NCCL, the backend's name
 * ("cpu", "cuda") and whether every rank of the job has a GPU of its own (read only for
 * the cuda backend). Returns PPDL_P2P_NCCL or PPDL_P2P_MPI with the reason in why (one
 * line, e.g. "the cpu backend: its messages are in host memory, NCCL moves GPU memory"),
 * or -1 when --p2p nccl cannot run, with why the message naming --p2p nccl. */
int ppdl_p2p_choose(int asked, int build_has_nccl, const char *backend, int own_gpus, char *why, size_t len);

#endif
