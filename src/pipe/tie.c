/* tie.c — a tied weight's gradient at the update (tie.h says what and why). */
#include "pipe/tie.h"
#include "core/error.h"
#include "core/test_hooks.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the test hook TIE=no-exchange|one-buffer (tie.h); unset: 0 */
static int test_tie_of(void)
{
    const char *s = ppdl_test_hook("TIE");
    if (!s || !*s) return 0;
    if (!strcmp(s, "no-exchange")) return 1;
    if (!strcmp(s, "one-buffer")) return 2;
    ppdl_test_hook_bad("TIE", s, "no-exchange or one-buffer");
}

/* the tied lm_head.weight of the head (the model's last layer) */
static ppdl_param *tied_param(ppdl_model *m)
{
    ppdl_layer *head = &m->layers[m->L - 1];
    for (int i = 0; i < head->n_params; i++)
        if (ppdl_model_is_tied(m, m->L - 1, i)) return &head->params[i];
    ppdl_die("the model ties its embeddings but its last layer has no lm_head.weight");
}

void ppdl_tie_init(ppdl_tie *t, ppdl_stage *st, const int *peers, int n_peers, int replica, int k, int tag)
{
    memset(t, 0, sizeof *t);
    t->rreq = MPI_REQUEST_NULL;
    ppdl_model *m = st->model;
    int emb = st->first == 0, head = st->last == m->L - 1;
    if (!m->tie_embeddings || (!emb && !head)) return;
    t->test = test_tie_of();
    t->n = ppdl_model_tied_floats(m);
    t->rtag = emb ? tag : tag + 1; /* to the embedding's stage: tag; to the head's: tag + 1 */
    t->stag = emb ? tag + 1 : tag;
    ppdl_param *wte = &m->layers[0].params[0], *lm = tied_param(m);
    if (emb && head) {
        t->mode = PPDL_TIE_WITHIN;
        t->grad = wte->grad;
        t->head_grad = lm->grad;
        if (t->test == 2) lm->grad = wte->grad; /* the planted bug: one buffer for both */
        return;
    }
    PPDL_CHECK(peers && n_peers >= 1 && k >= 1 && replica >= 0 && replica < k,
               "stage %s holds one layer of a tied weight but knows no ranks of the other", emb ? "0" : "S-1");
    t->mode = PPDL_TIE_EXCHANGE;
    t->grad = emb ? wte->grad : lm->grad;
    t->bytes = t->n * sizeof(float);
    t->recv = ppdl_be_alloc(st->be, t->bytes, "tied weight: the other stage's gradient");
    t->src = peers[replica % n_peers];
    t->dst = ppdl_xmalloc((size_t)n_peers * sizeof(int));
    t->sreq = ppdl_xmalloc((size_t)n_peers * sizeof(MPI_Request));
    for (int p = replica; p < n_peers; p += k) {
        t->dst[t->n_dst] = peers[p];
        t->sreq[t->n_dst++] = MPI_REQUEST_NULL;
    }
}

/* the planted bugs: no-exchange drops the other part; one-buffer (one stage) has
 * nothing left to add */
static int tie_skipped(const ppdl_tie *t)
{
    return t->mode == PPDL_TIE_NONE || t->test == 1 || (t->test == 2 && t->mode == PPDL_TIE_WITHIN);
}

void ppdl_tie_start(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm)
{
    if (tie_skipped(t) || t->mode != PPDL_TIE_EXCHANGE) return;
    /* post the receive, send the own part to every replica that takes it from this one */
    ppdl_comm_irecv(comm, ppdl_xfer_recv_buf(be, &t->rx, t->recv, t->bytes), t->bytes, t->src, t->rtag, &t->rreq);
    const void *buf = ppdl_xfer_send_buf(be, &t->sx, t->grad, t->bytes);
    for (int d = 0; d < t->n_dst; d++) ppdl_comm_isend(comm, buf, t->bytes, t->dst[d], t->stag, &t->sreq[d]);
}

void ppdl_tie_combine(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm, double *wait_s)
{
    ppdl_tie_start(t, be, comm);
    ppdl_tie_finish(t, be, comm, wait_s);
}

void ppdl_tie_finish(ppdl_tie *t, ppdl_backend *be, ppdl_comm *comm, double *wait_s)
{
    if (tie_skipped(t)) return;
    if (t->mode == PPDL_TIE_WITHIN) {
        ppdl_be_axpy(be, t->n, 1.0f, t->head_grad, t->grad); /* g_emb + g_head */
        return;
    }
    /* exchange: only once all sends are done add the received part in place */
    double t0 = ppdl_now_s();
    ppdl_comm_wait(comm, &t->rreq);
    for (int d = 0; d < t->n_dst; d++) ppdl_comm_wait(comm, &t->sreq[d]);
    *wait_s += ppdl_now_s() - t0;
    ppdl_xfer_recv_done(be, &t->rx, t->recv, t->bytes);
    ppdl_be_axpy(be, t->n, 1.0f, t->recv, t->grad); /* g_mine + g_other: the same bits on both */
}

void ppdl_tie_free(ppdl_tie *t, ppdl_backend *be)
{
    if (t->recv) ppdl_be_free(be, t->recv);
    ppdl_xfer_free(be, &t->rx);
    ppdl_xfer_free(be, &t->sx);
    free(t->dst);
    free(t->sreq);
    memset(t, 0, sizeof *t);
}
