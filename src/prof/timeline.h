/* timeline.h — seeing a pipeline: a Chrome/Perfetto trace and an SVG timeline from
 * timed events (timed by the runtime, or predicted by the simulator). */
#ifndef PPDL_TIMELINE_H
#define PPDL_TIMELINE_H

#include <stddef.h>

#include "sched/event.h"

/* Chrome trace-event JSON ("traceEvents", one pid per rank, "X" events with args
 * {mb, stage}), loadable in chrome://tracing and ui.perfetto.dev. */
int ppdl_trace_write_json(const char *path, const ppdl_event_rec *ev, int n, int n_ranks,
                          char *err, size_t errlen);

/* The classic pipeline picture: ranks as rows, time as x; forward and backward of
 * each micro-batch as coloured boxes labelled with the mb id (forward one hue,
 * backward another, shade by mb), send/recv as thin marks, idle time left blank,
 * a time axis in ms, a legend, and the bubble fraction in the title. */
int ppdl_timeline_write_svg(const char *path, const ppdl_event_rec *ev, int n, int n_ranks,
                            const char *title, char *err, size_t errlen);

#endif
