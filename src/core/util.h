/* util.h — small helpers: time, sizes, checked allocation, a seeded RNG. */
#ifndef PPDL_UTIL_H
#define PPDL_UTIL_H

#include <stddef.h>
#include <stdint.h>

double ppdl_now_s(void);                      /* monotonic seconds */

/* Parse "512M", "2G", "1024", "1.5GiB" into bytes; -1 on a malformed string. */
int ppdl_parse_size(const char *s, size_t *bytes);
/* Format bytes as "12.3 MiB" into buf. */
const char *ppdl_fmt_bytes(size_t bytes, char *buf, size_t buflen);
/* Parse an integer/float option strictly (whole string, range); -1 when bad. */
int ppdl_parse_int(const char *s, long lo, long hi, long *out);
int ppdl_parse_float(const char *s, double lo, double hi, double *out);

/* Write text and a newline to PATH.tmp, then rename it onto path: the file is whole or
 * not there. -1 with "PATH: cannot write the WHAT file" (text NULL: the same). */
int ppdl_write_text_file(const char *path, const char *text, const char *what, char *err, size_t errlen);

/* Read (write) exactly n bytes of fd at offset off, retrying short transfers and
 * EINTR; -1 at the end of the file or on an error (errno says which). */
int ppdl_pread_all(int fd, void *buf, size_t n, uint64_t off);
int ppdl_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);

void *ppdl_xmalloc(size_t n);                 /* dies on failure */
void *ppdl_xcalloc(size_t n, size_t size);

/* Deterministic RNG (splitmix64 seeding a xoshiro256**), the same on every platform. */
typedef struct { uint64_t s[4]; } ppdl_rng;
void ppdl_rng_seed(ppdl_rng *r, uint64_t seed);
uint64_t ppdl_rng_u64(ppdl_rng *r);
double ppdl_rng_uniform(ppdl_rng *r);         /* [0,1) */
double ppdl_rng_normal(ppdl_rng *r);          /* N(0,1), Box-Muller */

/* The last-level cache this rank's core sees, in bytes (sysfs, else sysconf; 1..256 MiB,
 * else 32 MiB): what the profile sweeps to time a pass as it runs in a step, cold. */
size_t ppdl_llc_bytes(void);

#endif
