/* tie.h — a tied weight's gradient at the update (nn/model.h: a gpt with
 * tie_embeddings, whose head's lm_head.weight is the embedding's wte).
 *
 * Both layers add their gradients into buffers of their own during the step, each
 * summed in micro-batch order, and the two are combined once, after the replicas' sums
 * and before the non-finite check, the clip norm and the update:
 *   g = g_emb + g_head        (elementwise; float addition is commutative)
 * the same expression for every plan, so the same bits on any number of ranks (one
 * buffer for both, in the order the backwards run, would differ between plans).
 *  - within: one stage holds both layers (the weight once, its own gradient buffer for
 *    the head): wte.grad += lm_head.grad.
 *  - exchange: the embedding (stage 0) and the head (stage S-1) hold a copy each, value,
 *    m and v: each sends its gradient to the other and adds the one it receives, so
 *    their AdamW updates stay bitwise equal. Replica q of one stage receives from
 *    replica q mod k' of the other (k' replicas there) and sends to the other's replicas
 *    p with p mod k = q (after the replicas' sum any source gives the same g). Messages
 *    go through comm.h, so --netem delays them. A rank holding both stages (zb-v's rank
 *    0) sends to itself the same way: the two directions have tags of their own (tag,
 *    tag + 1), and a rank starts every stage's exchange (ppdl_tie_start) before it
 *    finishes any (ppdl_tie_finish).
 * PPDL_TEST_TIE, a planted bug for the tests' negative controls (docs/testing.md):
 *   no-exchange  each stage keeps its own part (within: the head's part is dropped)
 *   one-buffer   within: the head adds straight into wte's gradient buffer, in the
 *                order of the backwards (the order dependence above)
 */
#ifndef PPDL_PIPE_TIE_H
#define PPDL_PIPE_TIE_H

#include <mpi.h>
#include <stddef.h>

#include "backend/xfer.h"
#include "net/comm.h"
#include "nn/stage.h"

enum { PPDL_TIE_NONE = 0, PPDL_TIE_WITHIN, PPDL_TIE_EXCHANGE };

typedef struct ppdl_tie {
    int mode;                  /* PPDL_TIE_* */
    size_t n;                  /* floats of the weight */
    float *grad;               /* this stage's gradient of it: wte's, or (exchange, head) lm_head's */
    float *head_grad;          /* within: the head's gradient buffer */
    float *recv;               /* exchange: the other stage's gradient (device) */
    int src, n_dst, *dst;      /* exchange: the rank it receives from, the ranks it sends to */
    int rtag, stag;            /* exchange: the tags it receives and sends with */
    int test;                  /* the planted bug: 0 none, 1 no-exchange, 2 one-buffer */
    MPI_Request rreq, *sreq;
    ppdl_xfer rx, sx;
    size_t bytes;              /* device bytes it allocated (the receive buffer) */
} ppdl_tie;

/* Set up the tie of stage st (none unless its model ties weights and the stage holds
 * one of the two layers). peers: the ranks of the replicas of the other stage of the
 * tie (stage S-1 for stage 0 and the reverse), n_peers of them, when the two layers are
 * on different stages; replica, k: this rank's replica of its stage and their number;
 * tag: the first of the two message tags (tag, tag + 1), the same on both sides. */
void ppdl_tie_init(ppdl_tie *t, ppdl_stage *st, const int *peers, int n_peers, int replica, int k, int tag);
/* g = g_emb + g_head into this stage's gradient(s) of the weight (see the top); the
 * seconds spent waiting for the other stage are added to *wait_s. In two halves where
 * a rank holds several stages: start posts the exchange's messages (nothing for the
 * other modes), finish waits for them and adds; combine is both. */
void ppdl_tie_start(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm);
void ppdl_tie_finish(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm, double *wait_s);
void ppdl_tie_combine(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm, double *wait_s);
void ppdl_tie_free(ppdl_tie *t, ppdl_backend *be);

#endif
