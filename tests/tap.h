/* tap.h — a small TAP producer for ppdl's C tests (the flux-core libtap shape).
 *
 *   plan(3); ok(x == 1, "x is one"); is_int(n, 4, "four"); close_f(got, want, 1e-6, 1e-5, "g");
 *   return exit_status();
 * Failures print the file:line and the values as TAP diagnostics. In MPI tests only
 * rank 0 prints: call tap_quiet(1) on the other ranks. */
#ifndef PPDL_TAP_H
#define PPDL_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n_, tap_failed_, tap_planned_ = -1, tap_quiet_;

static inline void tap_quiet(int q) { tap_quiet_ = q; }

static inline void plan(int n)
{
    tap_planned_ = n;
    if (!tap_quiet_) printf("1..%d\n", n);
}

static inline void diag(const char *fmt, ...)
{
    if (tap_quiet_) return;
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static inline int ok_at(int cond, const char *file, int line, const char *fmt, ...)
{
    tap_n_++;
    if (!cond) tap_failed_++;
    if (tap_quiet_) return cond;
    printf("%sok %d - ", cond ? "" : "not ", tap_n_);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) printf("#   failed at %s:%d\n", file, line);
    fflush(stdout);
    return cond;
}
#define ok(cond, ...) ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                       \
    do {                                                                             \
        long long g_ = (long long)(got), w_ = (long long)(want);                     \
        if (!ok_at(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                       \
            diag("  got %lld, expected %lld", g_, w_);                               \
    } while (0)

/* |got - want| <= atol + rtol*|want| */
#define close_f(got, want, atol, rtol, ...)                                          \
    do {                                                                             \
        double g_ = (double)(got), w_ = (double)(want);                              \
        int c_ = fabs(g_ - w_) <= (atol) + (rtol) * fabs(w_);                        \
        if (!ok_at(c_, __FILE__, __LINE__, __VA_ARGS__))                             \
            diag("  got %.9g, expected %.9g (atol %g, rtol %g)", g_, w_, (double)(atol), (double)(rtol)); \
    } while (0)

/* Many cases folded into one TAP line: fail() records a failed case (the first one's
 * text is kept), report() prints one ok line for the batch, with the count and the
 * first failure as a diag, and starts the next batch. */
static char tap_first_fail_[1024];
static int tap_n_fail_;

#if defined(__GNUC__)
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void report(const char *what) __attribute__((unused));
#endif
static void fail(const char *fmt, ...)
{
    if (tap_n_fail_++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tap_first_fail_, sizeof tap_first_fail_, fmt, ap);
        va_end(ap);
    }
}

static void report(const char *what)
{
    if (!ok(tap_n_fail_ == 0, "%s", what)) diag("  %d failing case(s); first: %s", tap_n_fail_, tap_first_fail_);
    tap_n_fail_ = 0;
    tap_first_fail_[0] = '\0';
}

static inline void skip_all(const char *why)
{
    if (!tap_quiet_) printf("1..0 # SKIP %s\n", why);
}

static inline void skip(int n, const char *why)
{
    for (int i = 0; i < n; i++) {
        tap_n_++;
        if (!tap_quiet_) printf("ok %d # SKIP %s\n", tap_n_, why);
    }
}

static inline void done_testing(void)
{
    if (tap_planned_ < 0 && !tap_quiet_) printf("1..%d\n", tap_n_);
}

static inline int exit_status(void)
{
    if (tap_planned_ >= 0 && tap_planned_ != tap_n_) {
        diag("planned %d tests but ran %d", tap_planned_, tap_n_);
        return 1;
    }
    return tap_failed_ ? 1 : 0;
}

#endif
