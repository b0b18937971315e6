/* range.h — named time ranges for GPU profilers (NVTX: Nsight Systems shows them as
 * bars above the kernels they contain, so a timeline reads per micro-batch).
 *
 *   ppdl_range_push("forward", mb);  ...  ppdl_range_pop();
 *
 * Ranges nest and must be popped on the thread that pushed them. In a build without
 * CUDA both are no-ops; with CUDA they cost a few hundred nanoseconds when no profiler
 * is attached (NVTX calls are empty until a tool injects itself). Colours follow the
 * SVG timeline: forward, backward, recompute, send, recv, optimizer, wait. */
#ifndef PPDL_RANGE_H
#define PPDL_RANGE_H

/* what: "forward", "backward", "recompute", "send", "recv", "optimizer", "wait" or any
 * other name (grey); mb >= 0 is appended as " mb N" */
void ppdl_range_push(const char *what, int mb);
void ppdl_range_pop(void);

#endif
