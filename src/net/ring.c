/* ring.c — the ring all-reduce of ring.h: a small state machine per buffer. */
#include "net/ring.h"
#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

void ppdl_ring_init(ppdl_ring *r, ppdl_comm *c, const int *members, int k, int me, int tag)
{
    PPDL_CHECK(k >= 1 && me >= 0 && me < k, "ring all-reduce: member %d of %d", me, k);
    r->c = c;
    r->k = k;
    r->me = me;
    r->left = members[(me + k - 1) % k];
    r->right = members[(me + 1) % k];
    PPDL_CHECK(members[me] == c->rank, "ring all-reduce: member %d is rank %d, but this is rank %d", me,
               members[me], c->rank);
    r->tag = tag;
    r->buf = NULL;
    r->n = 0;
    r->tmp = NULL;
    r->tmp_cap = 0;
    r->step = -1;
    r->sreq = r->rreq = MPI_REQUEST_NULL;
    r->recv_done = 0;
}

static size_t chunk_lo(const ppdl_ring *r, int c) { return r->n * (size_t)c / (size_t)r->k; }
static size_t chunk_len(const ppdl_ring *r, int c) { return chunk_lo(r, c + 1) - chunk_lo(r, c); }
static int mod(int a, int k) { return ((a % k) + k) % k; }

/* the chunks step t sends and receives (see ring.h) */
static int send_chunk(const ppdl_ring *r, int t)
{
    return t < r->k - 1 ? mod(r->me - t, r->k) : mod(r->me + 1 - (t - (r->k - 1)), r->k);
}
static int recv_chunk(const ppdl_ring *r, int t)
{
    return t < r->k - 1 ? mod(r->me - t - 1, r->k) : mod(r->me - (t - (r->k - 1)), r->k);
}

/* Post step r->step: its send, and its receive (into tmp while reducing, in place
 * while gathering). */
static void post_step(ppdl_ring *r)
{
    int t = r->step, cs = send_chunk(r, t), cr = recv_chunk(r, t);
    float *dst = t < r->k - 1 ? r->tmp : r->buf + chunk_lo(r, cr);
    r->recv_done = 0;
    ppdl_comm_irecv(r->c, dst, chunk_len(r, cr) * sizeof(float), r->left, r->tag, &r->rreq);
    ppdl_comm_isend(r->c, r->buf + chunk_lo(r, cs), chunk_len(r, cs) * sizeof(float), r->right, r->tag, &r->sreq);
}

/* The step's receive is complete: a reduce-scatter step adds the chunk in. */
static void recv_complete(ppdl_ring *r)
{
    int t = r->step;
    if (t < r->k - 1) {
        int cr = recv_chunk(r, t);
        float *mine = r->buf + chunk_lo(r, cr);
        size_t len = chunk_len(r, cr);
        /* mine + incoming: float addition commutes bitwise, so the chunk's sum is
         * ((g_c + g_{c+1}) + ...) whichever member adds */
        for (size_t i = 0; i < len; i++) mine[i] += r->tmp[i];
    }
    r->recv_done = 1;
}

/* Both halves of the step are complete: post the next, or finish. */
static void next_step(ppdl_ring *r)
{
    r->step++;
    if (r->step < 2 * (r->k - 1)) post_step(r);
}

void ppdl_ring_start(ppdl_ring *r, float *buf, size_t n)
{
    PPDL_CHECK(!ppdl_ring_active(r), "ring all-reduce (tag %d) started again before it completed", r->tag);
    r->buf = buf;
    r->n = n;
    r->step = 0;
    if (r->k < 2) return; /* one member: its values are the sum; step 0 = 2 (k-1) = done */
    size_t most = 0;
    for (int c = 0; c < r->k; c++)
        if (chunk_len(r, c) > most) most = chunk_len(r, c);
    if (most > r->tmp_cap) {
        free(r->tmp);
        r->tmp = ppdl_xmalloc(most * sizeof(float));
        r->tmp_cap = most;
    }
    post_step(r);
}

int ppdl_ring_active(const ppdl_ring *r) { return r->step >= 0 && r->step < 2 * (r->k - 1); }

int ppdl_ring_poll(ppdl_ring *r)
{
    while (ppdl_ring_active(r)) {
        if (!r->recv_done) {
            if (!ppdl_comm_test(r->c, &r->rreq)) return 0;
            recv_complete(r);
        }
        if (!ppdl_comm_test(r->c, &r->sreq)) return 0;
        next_step(r);
    }
    return 1;
}

void ppdl_ring_finish(ppdl_ring *r)
{
    while (ppdl_ring_active(r)) {
        if (!r->recv_done) {
            ppdl_comm_wait(r->c, &r->rreq);
            recv_complete(r);
        }
        ppdl_comm_wait(r->c, &r->sreq);
        next_step(r);
    }
}

void ppdl_ring_free(ppdl_ring *r)
{
    PPDL_CHECK(!ppdl_ring_active(r), "ring all-reduce (tag %d) freed while in progress", r->tag);
    free(r->tmp);
    r->tmp = NULL;
    r->tmp_cap = 0;
}
