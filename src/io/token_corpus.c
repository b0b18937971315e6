/* token_corpus.c — probe token files strictly, then stream their tokens (token_corpus.h).
 *
 * Probing reads the first bytes and the size of a file and checks them against the
 * format's rules; nothing is guessed (a .npy header is parsed as the dictionary it is).
 * Streaming reads 1 MiB at a time with read(2) and converts each block to int32 while
 * checking it: the common widths (uint8, uint16, uint32 little-endian) have loops the
 * compiler vectorises (convert, and keep the block's largest token; only a block whose
 * largest is out of range is searched again for the first bad one).
 */
#include "io/token_corpus.h"
#include "core/error.h"
#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LLMC_HEADER_BYTES 1024
#define LLMC_GPT2_MAGIC 20240520
#define LLMC_LLAMA3_MAGIC 20240801
#define NPY_MAX_HEADER (1 << 16)
#define BLOCK_BYTES (1 << 20)

static const char *const format_names[] = {"auto", "llmc", "raw", "npy", "bytes"};

const char *ppdl_tok_format_name(int format)
{
    return format >= 0 && format <= PPDL_TOK_BYTES ? format_names[format] : "?";
}

int ppdl_tok_format_parse(const char *name)
{
    for (int i = 0; i <= PPDL_TOK_BYTES; i++)
        if (!strcmp(name, format_names[i])) return i;
    return -1;
}

/* ------------------------------------------------------------------------------------ */
/* probing */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* read up to n bytes at offset 0; returns the count or -1 */
static long read_head(int fd, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (long)got;
}

static void set_dtype(ppdl_tok_file *f)
{
    snprintf(f->dtype, sizeof f->dtype, "%sint%d%s", f->is_signed ? "" : "u", 8 * f->width,
             f->big_endian && f->width > 1 ? " (big-endian)" : "");
}

/* the size must be the header plus whole tokens */
static int check_size(const ppdl_tok_file *f, long long size, char *err, size_t errlen)
{
    long long body = size - f->header_bytes, left = body % f->width;
    if (left)
        return ppdl_errf(err, errlen, "%s: %lld bytes are not a whole number of %s tokens (%lld byte%s left over; "
                         "--dtype says the width)", f->path, body, f->dtype, left, left == 1 ? "" : "s");
    return 0;
}

static int probe_llmc(ppdl_tok_file *f, const unsigned char *head, long got, long long size, char *err,
                      size_t errlen)
{
    if (got < LLMC_HEADER_BYTES)
        return ppdl_errf(err, errlen, "%s: %lld bytes, too short for the %d-byte llm.c header", f->path, size,
                         LLMC_HEADER_BYTES);
    int32_t h[256];
    for (int i = 0; i < 256; i++) h[i] = (int32_t)le32(head + 4 * i);
    int version;
    if (h[0] == LLMC_GPT2_MAGIC) {
        version = 1;
        f->width = 2;
        f->vocab_hint = 50257;
    } else if (h[0] == LLMC_LLAMA3_MAGIC) {
        version = 7;
        f->width = 4;
        f->vocab_hint = 128256;
    } else {
        return ppdl_errf(err, errlen, "%s: llm.c header: magic (int32 0) is %d, expected %d (GPT-2, uint16 tokens) "
                         "or %d (Llama 3, uint32 tokens)", f->path, h[0], LLMC_GPT2_MAGIC, LLMC_LLAMA3_MAGIC);
    }
    if (h[1] != version)
        return ppdl_errf(err, errlen, "%s: llm.c header: version (int32 1) is %d, but magic %d goes with version %d",
                         f->path, h[1], h[0], version);
    if (h[2] < 0)
        return ppdl_errf(err, errlen, "%s: llm.c header: token count (int32 2) is %d, expected >= 0", f->path, h[2]);
    for (int i = 3; i < 256; i++)
        if (h[i])
            return ppdl_errf(err, errlen, "%s: llm.c header: int32 %d is %d, expected 0 (only 0..2 are used)",
                             f->path, i, h[i]);
    f->header_bytes = LLMC_HEADER_BYTES;
    f->count = h[2];
    set_dtype(f);
    long long want = LLMC_HEADER_BYTES + f->count * f->width;
    if (size != want)
        return ppdl_errf(err, errlen, "%s: llm.c header says %lld %s tokens (%lld bytes in all), but the file has "
                         "%lld bytes%s", f->path, f->count, f->dtype, want, size,
                         size < want ? " (truncated?)" : "");
    return 0;
}

/* ---- .npy: "\x93NUMPY", major, minor, header length (uint16 LE for 1.x, uint32 LE for
 * 2.x and 3.x), then a Python dict literal such as
 *   {'descr': '<u2', 'fortran_order': False, 'shape': (1000,), }
 * padded with spaces and ended by '\n' */

typedef struct npy_parser {
    const char *p, *end;
} npy_parser;

static void npy_space(npy_parser *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n')) s->p++;
}

static int npy_char(npy_parser *s, char c)
{
    npy_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* a quoted string (no escapes: none of the keys or descr values has one) into out */
static int npy_string(npy_parser *s, char *out, size_t len)
{
    npy_space(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"')) return -1;
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= len) return -1;
        out[n++] = *s->p++;
    }
    if (s->p >= s->end) return -1;
    s->p++;
    out[n] = 0;
    return 0;
}

static int npy_word(npy_parser *s, const char *w)
{
    npy_space(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, w, n)) {
        s->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; dims[8], *ndim */
static int npy_shape(npy_parser *s, long long *dims, int *ndim)
{
    *ndim = 0;
    if (!npy_char(s, '(')) return -1;
    for (;;) {
        if (npy_char(s, ')')) return 0;
        npy_space(s);
        if (s->p >= s->end || !isdigit((unsigned char)*s->p) || *ndim == 8) return -1;
        long long v = 0;
        while (s->p < s->end && isdigit((unsigned char)*s->p)) {
            if (v > (1LL << 50)) return -1;
            v = v * 10 + (*s->p++ - '0');
        }
        dims[(*ndim)++] = v;
        if (npy_char(s, ',')) continue;
        return npy_char(s, ')') ? 0 : -1;
    }
}

static int probe_npy(ppdl_tok_file *f, int fd, const unsigned char *head, long got, long long size, char *err,
                     size_t errlen)
{
    if (got < 10) return ppdl_errf(err, errlen, "%s: %lld bytes, too short for a .npy header", f->path, size);
    int major = head[6], minor = head[7];
    if (major < 1 || major > 3)
        return ppdl_errf(err, errlen, "%s: .npy format version %d.%d, expected 1.0, 2.0 or 3.0", f->path, major,
                         minor);
    long long pre = major == 1 ? 10 : 12;
    long long hlen = major == 1 ? (long long)(head[8] | head[9] << 8) : (long long)le32(head + 8);
    if (got < pre || hlen > NPY_MAX_HEADER || pre + hlen > size)
        return ppdl_errf(err, errlen, "%s: .npy header length %lld does not fit the file (%lld bytes)", f->path, hlen,
                         size);
    char *text = ppdl_xmalloc((size_t)hlen + 1);
    long r = (long)pread(fd, text, (size_t)hlen, (off_t)pre);
    int rc = -1;
    if (r != hlen) {
        ppdl_errf(err, errlen, "%s: cannot read the .npy header", f->path);
        goto out;
    }
    text[hlen] = 0;
    /* the header: the dictionary, then spaces and one '\n' */
    npy_parser s = {text, text + hlen};
    char descr[32] = "", key[32];
    int have_descr = 0, have_shape = 0, have_order = 0, fortran = 0, ndim = 0;
    long long dims[8];
    const char *bad = NULL;
    if (!npy_char(&s, '{')) bad = "it does not start with '{'";
    while (!bad && !npy_char(&s, '}')) {
        if (npy_string(&s, key, sizeof key) || !npy_char(&s, ':')) {
            bad = "a key is not a quoted string followed by ':'";
        } else if (!strcmp(key, "descr")) {
            if (npy_string(&s, descr, sizeof descr)) bad = "'descr' is not a quoted type string";
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (npy_word(&s, "True")) fortran = 1;
            else if (!npy_word(&s, "False")) bad = "'fortran_order' is neither True nor False";
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (npy_shape(&s, dims, &ndim)) bad = "'shape' is not a tuple of non-negative integers";
            have_shape = 1;
        } else {
            bad = "it has a key other than 'descr', 'fortran_order' and 'shape'";
        }
        if (!bad && !npy_char(&s, ',')) {
            if (!npy_char(&s, '}')) bad = "entries are not separated by ','";
            break;
        }
    }
    npy_space(&s);
    if (!bad && (s.p != s.end || text[hlen - 1] != '\n')) bad = "something follows the dictionary";
    if (!bad && !(have_descr && have_order && have_shape)) bad = "'descr', 'fortran_order' or 'shape' is missing";
    if (bad) {
        ppdl_errf(err, errlen, "%s: .npy header: %s", f->path, bad);
        goto out;
    }
    (void)fortran; /* a 1-D array is laid out the same either way */
    /* descr: byte order ('<' little, '>' big, '|' not applicable, '=' this machine's,
     * little-endian on every platform ppdl builds on), kind, width */
    char order = descr[0], kind = descr[1];
    int width = descr[2] - '0';
    if (strlen(descr) != 3 || !strchr("<>|=", order) || (kind != 'i' && kind != 'u') ||
        (width != 1 && width != 2 && width != 4 && width != 8)) {
        ppdl_errf(err, errlen, "%s: .npy descr '%s': expected integer token ids (e.g. '<u2', '<i4', '<i8')",
                  f->path, descr);
        goto out;
    }
    if (ndim != 1) {
        char shape[128] = "(";
        for (int i = 0; i < ndim; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%lld%s", dims[i], i + 1 < ndim ? ", " : "");
        strcat(shape, ")");
        ppdl_errf(err, errlen, "%s: .npy shape %s: expected a 1-D array of token ids", f->path, shape);
        goto out;
    }
    f->width = width;
    f->is_signed = kind == 'i';
    f->big_endian = order == '>';
    f->header_bytes = pre + hlen;
    f->count = dims[0];
    set_dtype(f);
    long long want = f->header_bytes + f->count * f->width;
    if (size != want) {
        ppdl_errf(err, errlen, "%s: .npy header says %lld %s tokens (%lld bytes in all), but the file has %lld bytes%s",
                  f->path, f->count, f->dtype, want, size, size < want ? " (truncated?)" : "");
        goto out;
    }
    rc = 0;
out:
    free(text);
    return rc;
}

int ppdl_tok_probe(const char *path, int format, int raw_width, ppdl_tok_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ppdl_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    struct stat st;
    int rc = -1;
    unsigned char head[LLMC_HEADER_BYTES];
    long got = 0;
    if (fstat(fd, &st) != 0) {
        ppdl_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        ppdl_errf(err, errlen, "%s: not a regular file (a folder?): expected a token file", path);
        goto out;
    }
    if ((got = read_head(fd, head, sizeof head)) < 0) {
        ppdl_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        goto out;
    }
    long long size = (long long)st.st_size;
    int is_npy = got >= 6 && !memcmp(head, "\x93NUMPY", 6);
    int is_llmc = got >= 4 && (le32(head) == LLMC_GPT2_MAGIC || le32(head) == LLMC_LLAMA3_MAGIC);
    if (format == PPDL_TOK_AUTO) format = is_npy ? PPDL_TOK_NPY : is_llmc ? PPDL_TOK_LLMC : PPDL_TOK_RAW;
    f->format = format;
    switch (format) {
    case PPDL_TOK_LLMC:
        rc = probe_llmc(f, head, got, size, err, errlen);
        break;
    case PPDL_TOK_NPY:
        if (!is_npy) {
            ppdl_errf(err, errlen, "%s: not a .npy file (it does not start with \\x93NUMPY)", path);
            break;
        }
        rc = probe_npy(f, fd, head, got, size, err, errlen);
        break;
    case PPDL_TOK_RAW:
    case PPDL_TOK_BYTES:
        f->width = format == PPDL_TOK_BYTES ? 1 : raw_width;
        set_dtype(f);
        if (!(rc = check_size(f, size, err, errlen))) f->count = size / f->width;
        break;
    default:
        ppdl_errf(err, errlen, "%s: unknown token format %d", path, format);
    }
out:
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* streaming */

struct ppdl_tok_stream {
    const ppdl_tok_file *files;
    int n_files, cur;              /* files[cur] is being read */
    int fd;                        /* of files[cur], -1 before it is opened */
    long long loaded;              /* tokens of files[cur] read into buf so far */
    long long used;                /* tokens of files[cur] handed out */
    long vocab;
    const char *vocab_what;        /* for messages */
    unsigned char *buf;            /* [BLOCK_BYTES] */
    size_t buf_len, buf_at;        /* bytes in buf, bytes handed out */
    long long pos;                 /* tokens handed out, all files */
};

ppdl_tok_stream *ppdl_tok_stream_open(const ppdl_tok_file *files, int n, long vocab, const char *vocab_what)
{
    ppdl_tok_stream *s = ppdl_xcalloc(1, sizeof *s);
    s->files = files;
    s->n_files = n;
    s->fd = -1;
    s->vocab = vocab;
    s->vocab_what = vocab_what;
    s->buf = ppdl_xmalloc(BLOCK_BYTES);
    return s;
}

long long ppdl_tok_stream_pos(const ppdl_tok_stream *s) { return s->pos; }

void ppdl_tok_stream_close(ppdl_tok_stream *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    free(s->buf);
    free(s);
}

/* load the next block of the current file, moving on to the next file when it is
 * done; 0 with buf_len > 0, or -1 */
static int refill(ppdl_tok_stream *s, char *err, size_t errlen)
{
    for (;;) {
        if (s->cur >= s->n_files) return ppdl_errf(err, errlen, "token stream: read past the last file");
        const ppdl_tok_file *f = &s->files[s->cur];
        if (s->fd < 0) {
            s->fd = open(f->path, O_RDONLY);
            if (s->fd < 0) return ppdl_errf(err, errlen, "%s: cannot read: %s", f->path, strerror(errno));
#ifdef POSIX_FADV_SEQUENTIAL
            posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
            if (lseek(s->fd, (off_t)f->header_bytes, SEEK_SET) < 0)
                return ppdl_errf(err, errlen, "%s: cannot read: %s", f->path, strerror(errno));
            s->loaded = s->used = 0;
        }
        long long left = f->count - s->loaded;
        if (left == 0) {
            close(s->fd);
            s->fd = -1;
            s->cur++;
            continue;
        }
        size_t want = (size_t)(left < BLOCK_BYTES / f->width ? left : BLOCK_BYTES / f->width) * (size_t)f->width;
        size_t got = 0;
        while (got < want) {
            ssize_t r = read(s->fd, s->buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return ppdl_errf(err, errlen, "%s: cannot read: %s", f->path, strerror(errno));
            if (r == 0)
                return ppdl_errf(err, errlen, "%s: ends after %lld of its %lld tokens (did it change while "
                                 "being read?)", f->path, s->loaded + (long long)(got / (size_t)f->width), f->count);
            got += (size_t)r;
        }
        s->buf_len = want;
        s->buf_at = 0;
        s->loaded += (long long)(want / (size_t)f->width);
        return 0;
    }
}

/* token i of a block, any width and byte order, as a 64-bit value (uint64 above
 * 2^63 comes out negative: out of range either way) */
static int64_t token_at(const ppdl_tok_file *f, const unsigned char *p, size_t i)
{
    const unsigned char *q = p + i * (size_t)f->width;
    uint64_t u = 0;
    for (int b = 0; b < f->width; b++) u |= (uint64_t)q[b] << (8 * (f->big_endian ? f->width - 1 - b : b));
    if (f->is_signed && f->width < 8 && (u >> (8 * f->width - 1)) & 1) u |= ~0ULL << (8 * f->width);
    return (int64_t)u;
}

/* convert n tokens of p into dst and return the largest as unsigned (any negative,
 * or anything above INT32_MAX, comes out at least 2^31: out of every vocabulary) */
static uint64_t convert(const ppdl_tok_file *f, const unsigned char *p, size_t n, int32_t *dst)
{
    uint64_t mx = 0;
    if (f->width == 1 && !f->is_signed) {
        uint32_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = p[i];
            dst[i] = (int32_t)v;
            m = v > m ? v : m;
        }
        return m;
    }
    if (f->width == 2 && !f->is_signed && !f->big_endian) {
        uint32_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
            dst[i] = (int32_t)v;
            m = v > m ? v : m;
        }
        return m;
    }
    if (f->width == 4 && !f->big_endian) {
        uint32_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            dst[i] = (int32_t)v; /* int32 negatives become >= 2^31 in v */
            m = v > m ? v : m;
        }
        return m;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v = token_at(f, p, i);
        uint64_t u = v < 0 ? ~0ULL : (uint64_t)v;
        dst[i] = (int32_t)(u > INT32_MAX ? -1 : v);
        mx = u > mx ? u : mx;
    }
    return mx;
}

int ppdl_tok_stream_read(ppdl_tok_stream *s, int32_t *dst, long long count, char *err, size_t errlen)
{
    int32_t scratch[4096];
    while (count > 0) {
        if (s->buf_at == s->buf_len && refill(s, err, errlen)) return -1;
        const ppdl_tok_file *f = &s->files[s->cur];
        size_t avail = (s->buf_len - s->buf_at) / (size_t)f->width;
        size_t n = (size_t)count < avail ? (size_t)count : avail;
        if (!dst && n > sizeof scratch / sizeof scratch[0]) n = sizeof scratch / sizeof scratch[0];
        int32_t *out = dst ? dst : scratch;
        const unsigned char *p = s->buf + s->buf_at;
        if (convert(f, p, n, out) >= (uint64_t)s->vocab) {
            for (size_t i = 0; i < n; i++) {
                int64_t v = token_at(f, p, i);
                if (v < 0 || v >= s->vocab) {
                    long long at = s->used + (long long)i;
                    char val[32];
                    if (f->is_signed) snprintf(val, sizeof val, "%lld", (long long)v);
                    else snprintf(val, sizeof val, "%llu", (unsigned long long)(uint64_t)v);
                    return ppdl_errf(err, errlen, "%s: token %lld (byte %lld) is %s, outside [0, %ld) (%s)",
                                     f->path, at, f->header_bytes + at * f->width, val, s->vocab, s->vocab_what);
                }
            }
        }
        s->buf_at += n * (size_t)f->width;
        s->used += (long long)n;
        s->pos += (long long)n;
        count -= (long long)n;
        if (dst) dst += n;
    }
    return 0;
}
