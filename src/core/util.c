#include "core/util.h"
#include "core/error.h"
#include "core/test_hooks.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* PPDL_TEST_CLOCK_SKEW=RANK:SECONDS, for the trace tests: rank RANK's clock runs
 * SECONDS ahead, as another node's would (on one host every rank reads the same clock,
 * so the alignment of net/clock_sync.h would otherwise be tested only at offset 0).
 * Read once the rank is known (ppdl_set_log_rank, before anything is timed). */
static double clock_skew_s(void)
{
    static int known = 0;
    static double skew = 0;
    if (known) return skew;
    int rank = ppdl_log_rank();
    if (rank < 0) return 0;
    const char *s = ppdl_test_hook("CLOCK_SKEW");
    int r;
    double v;
    if (s && sscanf(s, "%d:%lf", &r, &v) == 2 && r == rank) skew = v;
    known = 1;
    return skew;
}

double ppdl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + clock_skew_s();
}

int ppdl_parse_size(const char *s, size_t *bytes)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v)) return -1;
    double mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = 1024.0; break;
        case 'M': mul = 1024.0 * 1024; break;
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
        case 'B': mul = 1; end--; break;
        default: return -1;
        }
        end++;
        if (strcasecmp(end, "") && strcasecmp(end, "B") && strcasecmp(end, "iB")) return -1;
    }
    v *= mul;
    if (v > 1e18) return -1;
    *bytes = (size_t)v;
    return 0;
}

const char *ppdl_fmt_bytes(size_t bytes, char *buf, size_t buflen)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, buflen, "%zu B", bytes);
    else snprintf(buf, buflen, "%.1f %s", v, unit[u]);
    return buf;
}

int ppdl_parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int ppdl_parse_float(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void *ppdl_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    PPDL_CHECK(p, "out of host memory allocating %zu bytes", n);
    return p;
}

void *ppdl_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    PPDL_CHECK(p, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ppdl_rng_seed(ppdl_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ppdl_rng_u64(ppdl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return out;
}

double ppdl_rng_uniform(ppdl_rng *r) { return (double)(ppdl_rng_u64(r) >> 11) * 0x1.0p-53; }

double ppdl_rng_normal(ppdl_rng *r)
{
    double u1 = ppdl_rng_uniform(r), u2 = ppdl_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int ppdl_write_text_file(const char *path, const char *text, const char *what, char *err, size_t errlen)
{
    size_t n = strlen(path) + 8;
    char *tmp = ppdl_xmalloc(n);
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = (!f || !text || fputs(text, f) < 0 || fputc('\n', f) < 0) ? -1 : 0;
    if (f && fclose(f)) rc = -1;
    if (!rc && rename(tmp, path)) rc = -1;
    if (rc) {
        remove(tmp);
        ppdl_errf(err, errlen, "%s: cannot write the %s file", path, what);
    }
    free(tmp);
    return rc;
}

/* The last-level cache this rank's core sees, in bytes: the largest cache of cpu0 in
 * sysfs (one instance: "32768K"), else sysconf's L3, which on some VMs reports the
 * whole host's (256 MiB here, where one instance holds 32 MiB: sweeping that made the
 * profile of the reading take 0.6 s); between 1 and 256 MiB, else 32 MiB. */
size_t ppdl_llc_bytes(void)
{
    long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        long v = 0;
        char unit = 0;
        if (fscanf(f, "%ld%c", &v, &unit) >= 1) {
            v *= unit == 'K' ? 1024L : unit == 'M' ? 1024L * 1024 : 1;
            if (v > best) best = v;
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) best = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return best >= (1L << 20) && best <= (256L << 20) ? (size_t)best : (size_t)32 << 20;
}

int ppdl_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return 0;
}

int ppdl_pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n) {
        ssize_t r = pwrite(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return 0;
}
