/* error.h — how ppdl fails: loudly, with a place and a hint, and on every rank.
 *
 * Library code below src/cmd never calls exit(). Validation code (file readers,
 * option parsers) returns -1 and writes a message into a caller-provided buffer,
 * so tests can check the message. Conditions that cannot be handled (a failed MPI
 * call, out of memory, a kernel bug) go through ppdl_die(), which prints
 *   ppdl: rank R: file.c:123: message
 * and calls MPI_Abort on MPI_COMM_WORLD when MPI is initialised, so no other rank is
 * left waiting in a receive forever.
 */
#ifndef PPDL_ERROR_H
#define PPDL_ERROR_H

#include <stddef.h>

#define PPDL_ERR_LEN 512

#if defined(__GNUC__)
#define PPDL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PPDL_NORETURN __attribute__((noreturn))
#else
#define PPDL_PRINTF(a, b)
#define PPDL_NORETURN
#endif

PPDL_NORETURN void ppdl_die_at(const char *file, int line, const char *fmt, ...) PPDL_PRINTF(3, 4);
#define ppdl_die(...) ppdl_die_at(__FILE__, __LINE__, __VA_ARGS__)

/* Abort the job with a message that needs no file:line (a user error already
 * explained by the message). exit_code is used when MPI is not running. */
PPDL_NORETURN void ppdl_fail(int exit_code, const char *fmt, ...) PPDL_PRINTF(2, 3);

/* Write a formatted message into err (if not NULL) and return -1. */
int ppdl_errf(char *err, size_t errlen, const char *fmt, ...) PPDL_PRINTF(3, 4);

/* PPDL_CHECK(cond, "what went wrong %d", x): die when cond is false. */
#define PPDL_CHECK(cond, ...)                                                    \
    do {                                                                         \
        if (!(cond)) ppdl_die(__VA_ARGS__);                                      \
    } while (0)

/* Die when an MPI call does not return MPI_SUCCESS, with MPI's error string. */
#define PPDL_CHECK_MPI(call)                                                     \
    do {                                                                         \
        int ppdl_mpi_rc_ = (call);                                               \
        if (ppdl_mpi_rc_ != 0) ppdl_die_mpi(__FILE__, __LINE__, #call, ppdl_mpi_rc_); \
    } while (0)
PPDL_NORETURN void ppdl_die_mpi(const char *file, int line, const char *what, int rc);

/* The rank used in messages: set once after MPI_Init. */
void ppdl_set_log_rank(int rank);
int ppdl_log_rank(void);

#endif
