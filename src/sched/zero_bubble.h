/* zero_bubble.h — the order of the compute passes of the zero-bubble schedules (inside
 * sched/: schedule.c wraps the passes in their messages).
 *
 * Zero Bubble (Qi et al., ICLR 2024) splits each backward into B (the input gradient,
 * which the previous stage waits for) and W (the weight gradient, which nothing waits
 * for), and fills the pipeline's bubbles with the W's. The orders come from one greedy
 * play of all stages at once, every pass one unit of time (the paper's T_F = T_B = T_W),
 * messages free: whenever a stage is free it runs, of the passes it can start earliest,
 * a B, else an F (fewer than cap[s] micro-batches held: forwarded, W not yet done), else
 * a W. F's, B's and W's each run in micro-batch order, so a stage accumulates its weight
 * gradients in micro-batch order, as 1F1B does. The play's step, in units
 * (tests/unit/test_schedule.c checks each):
 *   ZB-H1, cap = S (1F1B's first stage):   3M + 1 at S = 2, the least possible
 *   ZB-H2, cap = 2S - 1:                   3M + S - 1, the least (the last stage waits
 *                                          for S - 1 forwards)
 *   ZB-1P, cap[s] = S - s (1F1B's memory):  3M + 2(S - 1) when M >= S
 *   1F1B, the backward fused:              3M + 3(S - 1)
 *
 * Replicated stages (stage s on k[s] replicas, micro-batch j on replica j mod k[s]) play
 * the same way with every replica a device of its own, its own micro-batches in order
 * (the same bits as 1F1B's replica); a pass of a stage with k replicas takes k units
 * (such a stage holds about k times the layers), so the play's step is in those units
 * (ppdl_schedule_unit_step_layout). The timed plays are below (ppdl_zb_times).
 */
#ifndef PPDL_ZERO_BUBBLE_H
#define PPDL_ZERO_BUBBLE_H

/* Timed play (zero_bubble.c): the passes of stage s take f[s], b[s] and w[s] ticks
 * (>= 1; a replica's pass of its one micro-batch), and an activation or gradient
 * between stages s and s + 1 arrives msg[s] ticks (>= 0; msg NULL: 0) after the pass
 * that sends it ends. Integer ticks, so that every rank plays the same orders from the
 * same numbers. NULL where a play takes one: the unit play above (F = B = W, a
 * replicated stage's pass k units, messages free).
 * A greedy's choices are local, so three orders are made from the profiled times: the
 * unit play's, the timed play with a W wherever the stage is idle, and with a W only
 * where it fits in the gap before the next B or F; each is replayed under the times
 * (ppdl_zb_replay_layout) and the shortest kept, the unit play's on a tie. With every
 * time 1 and no replicated stage the unit play's orders come back unchanged (a
 * replicated stage's pass takes k units in the unit play, 1 tick here, so a timed
 * order may win there). */
typedef struct ppdl_zb_times {
    const long *f, *b, *w;
    const long *msg;
} ppdl_zb_times;

typedef struct ppdl_zb_pass {
    char kind;             /* 'F', 'B' or 'W' */
    int mb;
    int stage;             /* the stage it belongs to (a device may run several) */
} ppdl_zb_pass;

/* The 3M passes of stage s, in order, into out[0..3M-1], for S stages, M micro-batches
 * and at most cap[r] (>= 1) micro-batches held on stage r (cap[0..S-1]). Returns the
 * play's step length in units (for tests and the comment above). */
long ppdl_zb_order(int S, int M, const int *cap, int s, ppdl_zb_pass *out);
/* The same for every stage at once (one play): stage s's passes into out[s*3M ..
 * s*3M + 3M-1]. */
long ppdl_zb_order_all(int S, int M, const int *cap, ppdl_zb_pass *out);
/* The same play with replicated stages: stage s on k[s] replicas (1 <= k[s] <= M; k
 * NULL: one each), replica q running the micro-batches j mod k[s] == q in micro-batch
 * order, each replica a device of its own with its own cap. Devices d are numbered
 * stage by stage, replica q of stage s at k[0] + .. + k[s-1] + q, and cap[d] >= 1.
 * dev >= 0: device dev's 3 n passes (n = its micro-batches) into out[0..3n-1];
 * dev = -1: every device's, device d's from out[3 (n_0 + .. + n_{d-1})] on. With k
 * NULL it is ppdl_zb_order / ppdl_zb_order_all. */
long ppdl_zb_order_layout(int S, int M, const int *k, const int *cap, const ppdl_zb_times *tm, int dev,
                          ppdl_zb_pass *out);
/* The same play with several stages per device (ZB-V: two stages per rank): stage s
 * runs on device dev_of[s] (0..D-1) under cap[s], all its M micro-batches in
 * micro-batch order; a device runs one pass at a time, and of its passes that can
 * start first a B, then an F, then a W, then the later stage's (the V's second leg,
 * nearer the end of the pipeline: its F's and B's free the most of what the device
 * holds soonest). dev >= 0: device dev's 3 M x (its stages) passes in the order it
 * runs them, each with its stage; dev = -1: every device's, device d's after those of
 * the devices before it. */
long ppdl_zb_order_devices(int S, int M, int D, const int *dev_of, const int *cap, const ppdl_zb_times *tm, int dev,
                           ppdl_zb_pass *out);

/* The step, in tm's ticks, of the every-device orders `all` of the layout k (as
 * ppdl_zb_order_layout's dev = -1 output) when each pass takes its time and waits only
 * for its input: the measure by which a timed play picks among its candidate orders
 * (zero_bubble.c best_play). */
long ppdl_zb_replay_layout(int S, int M, const int *k, const ppdl_zb_pass *all, const ppdl_zb_times *tm);
/* The same for ppdl_zb_order_devices's dev = -1 output (stage s on device dev_of[s]) */
long ppdl_zb_replay_devices(int S, int M, int D, const int *dev_of, const ppdl_zb_pass *all, const ppdl_zb_times *tm);

#endif
