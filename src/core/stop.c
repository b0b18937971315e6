#include "core/stop.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* written by the handler, read by the training loop: the only state shared with it */
static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
    if (!caught_signal) caught_signal = sig;
}

void ppdl_stop_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* restart interrupted system calls: a write() of the checkpoint that a second
     * signal interrupts goes on instead of failing with EINTR */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ppdl_stop_signal(void) { return (int)caught_signal; }

int ppdl_exit_stopped(int stop, int checkpointed)
{
    return checkpointed || stop <= 0 ? PPDL_EXIT_CHECKPOINTED : 128 + stop;
}

/* a non-negative decimal number at *s; advances *s. -1 when there is none. */
static int number(const char **s, double *v)
{
    if (!isdigit((unsigned char)**s) && **s != '.') return -1;
    errno = 0;
    char *end;
    *v = strtod(*s, &end);
    if (errno || end == *s || !isfinite(*v) || *v < 0) return -1;
    *s = end;
    return 0;
}

/* "[D-]A[:B[:C]]": integer fields, Slurm's meaning */
static int parse_clock(const char *s, double *seconds)
{
    long f[4];
    int n = 0, days = 0;
    const char *p = s;
    while (n < 4) {
        if (!isdigit((unsigned char)*p)) return -1;
        char *end;
        f[n++] = strtol(p, &end, 10);
        p = end;
        if (*p == '-' && n == 1 && !days) { days = 1; p++; continue; }
        if (*p == ':') { p++; continue; }
        break;
    }
    if (*p) return -1;
    double t;
    if (days) {
        /* D-HH, D-HH:MM, D-HH:MM:SS */
        if (n < 2 || n > 4) return -1;
        t = 86400.0 * f[0] + 3600.0 * f[1] + (n > 2 ? 60.0 * f[2] : 0) + (n > 3 ? f[3] : 0);
        for (int i = 2; i < n; i++) if (f[i] > 59) return -1;
    } else if (n == 2) {           /* MM:SS */
        if (f[1] > 59) return -1;
        t = 60.0 * f[0] + f[1];
    } else if (n == 3) {           /* HH:MM:SS */
        if (f[1] > 59 || f[2] > 59) return -1;
        t = 3600.0 * f[0] + 60.0 * f[1] + f[2];
    } else {
        return -1;                 /* a bare number: seconds or minutes? */
    }
    *seconds = t;
    return 0;
}

int ppdl_parse_duration(const char *s, double *seconds)
{
    if (!s || !*s) return -1;
    double t;
    if (strchr(s, ':') || strchr(s, '-')) {
        if (parse_clock(s, &t)) return -1;
    } else {
        const char *p = s;
        if (number(&p, &t)) return -1;
        switch (*p) {
        case 's': break;
        case 'm': t *= 60; break;
        case 'h': t *= 3600; break;
        case 'd': t *= 86400; break;
        default: return -1;        /* no unit, or an unknown one */
        }
        if (p[1]) return -1;
    }
    if (!(t > 0)) return -1;
    *seconds = t;
    return 0;
}

int ppdl_stop_for_time(double elapsed_s, double limit_s, double step_s, double checkpoint_s)
{
    double margin = 0.01 * limit_s + 1.0;
    return elapsed_s + step_s + checkpoint_s + margin > limit_s;
}
