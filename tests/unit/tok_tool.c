/* tok_tool.c — io/tokenizer.h from the command line, for tests/unit/tokenizer.sh and
 * perf/bench-tokenizer (not installed):
 *   tok_tool encode TOKENIZER IN OUT.u32 [CHUNK]  ids as little-endian uint32; CHUNK > 0:
 *                                                 in pieces of about CHUNK bytes cut at
 *                                                 ppdl_tokenizer_cut (as ppdl-data does)
 *   tok_tool decode TOKENIZER IN.u32 OUT          the text of the ids
 *   tok_tool time TOKENIZER IN                    encode IN once; print "SECONDS TOKENS"
 *   tok_tool load TOKENIZER                       load it; print its vocab_size and eot
 * Exit 1 with the message on stderr on any error. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "io/tokenizer.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, len = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

int main(int argc, char **argv)
{
    char err[PPDL_ERR_LEN];
    if (argc < 3) {
        fprintf(stderr, "usage: tok_tool encode|decode|time|load TOKENIZER ...\n");
        return 2;
    }
    ppdl_tokenizer *t = ppdl_tokenizer_load(argv[2], err, sizeof err);
    if (!t) {
        fprintf(stderr, "tok_tool: %s\n", err);
        return 1;
    }
    const char *cmd = argv[1];
    int rc = 0;
    if (!strcmp(cmd, "load")) {
        printf("vocab_size %ld eot %d encode %d\n", ppdl_tokenizer_vocab_size(t), ppdl_tokenizer_eot(t),
               ppdl_tokenizer_can_encode(t));
    } else if ((!strcmp(cmd, "encode") && argc >= 5) || (!strcmp(cmd, "time") && argc >= 4)) {
        size_t n;
        char *text = slurp(argv[3], &n);
        if (!text) {
            fprintf(stderr, "tok_tool: %s: cannot read\n", argv[3]);
            return 1;
        }
        ppdl_ids ids = {0};
        long chunk = argc >= 6 ? atol(argv[5]) : 0;
        double t0 = ppdl_now_s();
        if (chunk > 0) {
            size_t pos = 0;
            int flags = 0;
            while (!rc && pos < n) {
                size_t end = pos + (size_t)chunk, cut = 0;
                if (end < n) cut = ppdl_tokenizer_cut(t, text + pos, (size_t)chunk);
                cut = end >= n ? n - pos : cut ? cut : n - pos;
                rc = ppdl_tokenizer_encode(t, text + pos, cut, flags, &ids, err, sizeof err);
                pos += cut;
                flags = PPDL_TOKENIZE_CONTINUES;
            }
        } else {
            rc = ppdl_tokenizer_encode(t, text, n, 0, &ids, err, sizeof err);
        }
        double dt = ppdl_now_s() - t0;
        if (rc) fprintf(stderr, "tok_tool: %s: %s\n", argv[3], err);
        else if (!strcmp(cmd, "time")) printf("%.6f %zu\n", dt, ids.n);
        else {
            FILE *f = fopen(argv[4], "wb");
            uint32_t *u = malloc((ids.n + 1) * sizeof *u);
            for (size_t i = 0; i < ids.n; i++) u[i] = (uint32_t)ids.v[i];
            if (!f || fwrite(u, 4, ids.n, f) != ids.n || fclose(f)) rc = 1, fprintf(stderr, "tok_tool: cannot write\n");
            free(u);
        }
        free(ids.v);
        free(text);
    } else if (!strcmp(cmd, "decode") && argc >= 5) {
        size_t n;
        char *raw = slurp(argv[3], &n);
        FILE *f = fopen(argv[4], "wb");
        if (!raw || !f) {
            fprintf(stderr, "tok_tool: cannot read %s or write %s\n", argv[3], argv[4]);
            return 1;
        }
        ppdl_detok d;
        ppdl_detok_init(&d, t);
        for (size_t i = 0; i + 4 <= n; i += 4) {
            uint32_t id;
            memcpy(&id, raw + i, 4);
            ppdl_detok_put(&d, (int32_t)id, f);
        }
        ppdl_detok_end(&d, f);
        fclose(f);
        free(raw);
    } else {
        fprintf(stderr, "tok_tool: bad arguments\n");
        rc = 2;
    }
    ppdl_tokenizer_free(t);
    return rc ? 1 : 0;
}
