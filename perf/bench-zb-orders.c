/* bench-zb-orders.c — how far ZB-H1's timed orders are from the best orders of two
 * stages, and what bubble any ZB-H1 order can reach against 1F1B's (issue 22's goal:
 * ZB-H1's bubble at most 0.4x 1F1B's at 1F1B's activation memory). No MPI, no device.
 *
 *   bench-zb-orders M F0 B0 W0 F1 B1 W1 [MSG [OPT]]
 *
 * Times of stage 0's and stage 1's passes per micro-batch, the message between them
 * and each rank's optimizer step, all in microseconds; M <= 8 micro-batches. Every
 * order of a stage's 3M passes under ZB-H1's cap (F's, B's and W's each in micro-batch
 * order, B after its F, W after its B, at most 2 micro-batches held: 1F1B's first
 * stage) is enumerated for both stages, every pair replayed under the times (a pass
 * starts when its device is free and its input has arrived; a pair that deadlocks is
 * skipped), and the least step is printed beside the step of ppdl's orders
 * (ppdl_zb_order_layout) and of 1F1B (its backward fused: the gradient leaves after B
 * and W). The bubble of each is the ranks' idle time over 2 x (step + OPT). 28657
 * orders a stage at M = 8: about a minute. */
#include "sched/zero_bubble.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_M = 8, MAX_ORDERS = 30000 };
static int M, P; /* micro-batches, passes a stage (3M) */
static ppdl_zb_pass orders[MAX_ORDERS][3 * MAX_M];
static int n_orders;

static void enumerate(ppdl_zb_pass *cur, int n, int f, int b, int w)
{
    if (n == P) {
        if (n_orders < MAX_ORDERS) memcpy(orders[n_orders], cur, sizeof orders[0]);
        n_orders++;
        return;
    }
    if (b < f) {
        cur[n] = (ppdl_zb_pass){'B', b, 0};
        enumerate(cur, n + 1, f, b + 1, w);
    }
    if (f < M && f - w < 2) {
        cur[n] = (ppdl_zb_pass){'F', f, 0};
        enumerate(cur, n + 1, f + 1, b, w);
    }
    if (w < b) {
        cur[n] = (ppdl_zb_pass){'W', w, 0};
        enumerate(cur, n + 1, f, b, w + 1);
    }
}

/* the step of stage 0's order a and stage 1's order b under the times (f, b, w per
 * stage; msg each way), -1 where they deadlock; *idle the two ranks' idle time */
static long replay(const ppdl_zb_pass *a, const ppdl_zb_pass *b, const long *tf, const long *tb, const long *tw,
                   long msg, long *idle)
{
    const ppdl_zb_pass *o[2] = {a, b};
    int next[2] = {0, 0}, left = 2 * P;
    long t[2] = {0, 0}, busy[2] = {0, 0}, end_f[2][MAX_M], end_b[2][MAX_M];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < M; i++) end_f[s][i] = end_b[s][i] = -1;
    while (left > 0) {
        int moved = 0;
        for (int s = 0; s < 2; s++)
            for (; next[s] < P; next[s]++, moved++, left--) {
                ppdl_zb_pass p = o[s][next[s]];
                long need, d;
                if (p.kind == 'F') {
                    need = s == 0 ? 0 : end_f[0][p.mb] < 0 ? -1 : end_f[0][p.mb] + msg;
                    d = tf[s];
                } else if (p.kind == 'B') {
                    need = s == 1 ? end_f[1][p.mb] : end_b[1][p.mb] < 0 ? -1 : end_b[1][p.mb] + msg;
                    d = tb[s];
                } else {
                    need = end_b[s][p.mb];
                    d = tw[s];
                }
                if (need < 0) break;
                t[s] = (t[s] > need ? t[s] : need) + d;
                busy[s] += d;
                if (p.kind == 'F') end_f[s][p.mb] = t[s];
                if (p.kind == 'B') end_b[s][p.mb] = t[s];
            }
        if (!moved) return -1;
    }
    long step = t[0] > t[1] ? t[0] : t[1];
    if (idle) *idle = 2 * step - busy[0] - busy[1];
    return step;
}

static void print_order(const char *what, const ppdl_zb_pass *o)
{
    printf("  %-22s", what);
    for (int i = 0; i < P; i++) printf(" %c%d", o[i].kind, o[i].mb);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: bench-zb-orders M F0 B0 W0 F1 B1 W1 [MSG [OPT]] (times in us, M <= %d)\n", MAX_M);
        return 2;
    }
    M = atoi(argv[1]);
    P = 3 * M;
    long tf[2] = {atol(argv[2]), atol(argv[5])}, tb[2] = {atol(argv[3]), atol(argv[6])},
         tw[2] = {atol(argv[4]), atol(argv[7])};
    long msg = argc > 8 ? atol(argv[8]) : 0, opt = argc > 9 ? atol(argv[9]) : 0;
    if (M < 1 || M > MAX_M || tf[0] < 1 || tf[1] < 1 || tb[0] < 1 || tb[1] < 1 || tw[0] < 1 || tw[1] < 1 || msg < 0) {
        fprintf(stderr, "bench-zb-orders: M in 1..%d, every time >= 1 us, MSG >= 0\n", MAX_M);
        return 2;
    }
    ppdl_zb_pass cur[3 * MAX_M];
    enumerate(cur, 0, 0, 0, 0);
    if (n_orders > MAX_ORDERS) {
        fprintf(stderr, "bench-zb-orders: %d orders a stage, more than %d\n", n_orders, MAX_ORDERS);
        return 1;
    }
    /* the best pair */
    long best = -1, best_idle = 0;
    int bi = 0, bj = 0;
    for (int i = 0; i < n_orders; i++)
        for (int j = 0; j < n_orders; j++) {
            long idle, t = replay(orders[i], orders[j], tf, tb, tw, msg, &idle);
            if (t >= 0 && (best < 0 || t < best)) best = t, best_idle = idle, bi = i, bj = j;
        }
    /* ppdl's timed ZB-H1 orders */
    long msgs[2] = {msg, 0};
    ppdl_zb_times tm = {tf, tb, tw, msgs};
    int cap[2] = {2, 2};
    ppdl_zb_pass mine[2 * 3 * MAX_M];
    ppdl_zb_order_layout(2, M, NULL, cap, &tm, -1, mine);
    long mine_idle, mine_t = replay(mine, mine + P, tf, tb, tw, msg, &mine_idle);
    /* 1F1B: stage 0 runs F0 F1, then B+W of i and F of i+2; stage 1 F, B+W of each
     * micro-batch; its backward is fused (W's time in B's, the gradient sent after both) */
    ppdl_zb_pass o0[3 * MAX_M], o1[3 * MAX_M];
    int n = 0;
    for (int i = 0; i < 2 && i < M; i++) o0[n++] = (ppdl_zb_pass){'F', i, 0};
    for (int i = 0; i < M; i++) {
        o0[n++] = (ppdl_zb_pass){'B', i, 0};
        o0[n++] = (ppdl_zb_pass){'W', i, 0};
        if (i + 2 < M) o0[n++] = (ppdl_zb_pass){'F', i + 2, 0};
    }
    n = 0;
    for (int i = 0; i < M; i++) {
        o1[n++] = (ppdl_zb_pass){'F', i, 0};
        o1[n++] = (ppdl_zb_pass){'B', i, 0};
        o1[n++] = (ppdl_zb_pass){'W', i, 0};
    }
    long fb[2] = {tb[0] + tw[0], tb[1] + tw[1]}, nw[2] = {0, 0}; /* W's time is in B */
    long f1_idle, f1_t = replay(o0, o1, tf, fb, nw, msg, &f1_idle);
    double bub_1f1b = (double)f1_idle / (2.0 * (f1_t + opt));
    double bub_mine = (double)mine_idle / (2.0 * (mine_t + opt)), bub_best = (double)best_idle / (2.0 * (best + opt));
    printf("ZB-H1 orders of 2 stages, M = %d (%d orders a stage, %d pairs), times in us: F %ld/%ld B %ld/%ld W %ld/%ld, "
           "message %ld, optimizer %ld\n",
           M, n_orders, n_orders * n_orders, tf[0], tf[1], tb[0], tb[1], tw[0], tw[1], msg, opt);
    printf("  1f1b (fused backward)   step %9ld  idle %8ld  bubble %5.2f%%\n", f1_t, f1_idle, 100 * bub_1f1b);
    printf("  ppdl's zb-h1 orders     step %9ld  idle %8ld  bubble %5.2f%%  vs 1f1b %.3f\n", mine_t, mine_idle,
           100 * bub_mine, bub_mine / bub_1f1b);
    printf("  the best of all pairs   step %9ld  idle %8ld  bubble %5.2f%%  vs 1f1b %.3f\n", best, best_idle,
           100 * bub_best, bub_best / bub_1f1b);
    print_order("ppdl's, stage 0:", mine);
    print_order("ppdl's, stage 1:", mine + P);
    print_order("the best, stage 0:", orders[bi]);
    print_order("the best, stage 1:", orders[bj]);
    printf("result zb_h1_orders_over_best %.6f\nresult zb_h1_best_bubble_vs_1f1b %.4f\n", (double)mine_t / best,
           bub_best / bub_1f1b);
    return 0;
}
