/* token_convert.c — token files into data.h5 rows, one pass, bounded memory
 * (token_convert.h has the rules for rows and the validation split).
 *
 * The stream (token_corpus.c) hands out checked int32 tokens; rows are assembled in a
 * buffer of whole HDF5 chunks and written with one hyperslab per buffer. A row after the
 * first reuses the last T+1-S tokens of the row before it (S <= T+1) or skips S-(T+1)
 * tokens (S > T+1), so every token is read from the files exactly once.
 */
#include "io/token_convert.h"
#include "io/data_io.h"
#include "io/token_corpus.h"
#include "core/error.h"
#include "core/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_BUFFER_BYTES (4L << 20)

typedef struct convert {
    ppdl_tok_stream *s;
    long T1, S;                    /* row length T+1, stride */
    long long total;               /* tokens in all files */
    int progress;
    double t0, next_report;
} convert;

static void report(convert *c, int last)
{
    if (!c->progress) return;
    double now = ppdl_now_s();
    if (now - c->t0 < 2.0 || (!last && now < c->next_report)) return;
    c->next_report = now + 2.0;
    long long pos = ppdl_tok_stream_pos(c->s);
    fprintf(stderr, "ppdl-data: %3.0f%%: %.1f of %.1f M tokens, %.1f M tokens/s\n",
            100.0 * (double)pos / (double)(c->total ? c->total : 1), pos / 1e6, c->total / 1e6,
            pos / 1e6 / (now - c->t0));
}

/* Rows [0, rows) of the region [p0, p1) of the stream (which stands at p0) into w, then
 * the rest of the region read and checked. */
static int write_part(convert *c, ppdl_tokens_out *w, long long p0, long long p1, long rows, char *err,
                      size_t errlen)
{
    long T1 = c->T1, S = c->S;
    long cr = ppdl_tokens_out_chunk_rows(w), per = ROW_BUFFER_BYTES / (T1 * 4) / cr;
    long R = (per < 1 ? 1 : per) * cr;
    if (R > rows) R = rows;
    /* buf: the previous row, then R rows [R, T+1] */
    int32_t *buf = ppdl_xmalloc((size_t)(R + 1) * (size_t)T1 * sizeof *buf), *prev = buf, *slots = buf + T1;
    long filled = 0, row0 = 0;
    int rc = 0;
    for (long r = 0; r < rows && !rc; r++) {
        int32_t *row = slots + (size_t)filled * T1;
        const int32_t *before = filled ? row - T1 : prev;
        long keep = T1 - S; /* tokens shared with the row before (> 0), or skipped (< 0) */
        if (r > 0 && keep > 0) {
            memcpy(row, before + S, (size_t)keep * sizeof *row);
            rc = ppdl_tok_stream_read(c->s, row + keep, S, err, errlen);
        } else {
            if (r > 0 && keep < 0) rc = ppdl_tok_stream_read(c->s, NULL, -keep, err, errlen);
            if (!rc) rc = ppdl_tok_stream_read(c->s, row, T1, err, errlen);
        }
        if (rc) break;
        if (++filled == R || r == rows - 1) {
            rc = ppdl_tokens_out_rows(w, row0, filled, slots, err, errlen);
            memcpy(prev, slots + (size_t)(filled - 1) * T1, (size_t)T1 * sizeof *prev);
            row0 += filled;
            filled = 0;
            report(c, 0);
        }
    }
    free(buf);
    long long used = rows ? p0 + (long long)(rows - 1) * S + T1 : p0;
    return rc ? rc : ppdl_tok_stream_read(c->s, NULL, p1 - used, err, errlen);
}

/* rows the region of `len` tokens gives */
static long rows_of(long long len, long T1, long S) { return len < T1 ? 0 : (long)((len - T1) / S) + 1; }

/* "FILE" or "the N files (FIRST, ...)", for messages about the whole corpus */
static void corpus_name(const ppdl_tok_convert_opts *o, char *buf, size_t len)
{
    if (o->name) snprintf(buf, len, "%s", o->name);
    else if (o->n_inputs == 1) snprintf(buf, len, "%s", o->inputs[0]);
    else snprintf(buf, len, "the %d files %s ... %s", o->n_inputs, o->inputs[0], o->inputs[o->n_inputs - 1]);
}

/* the vocabulary: --vocab-size, else the one the files' format implies */
static int pick_vocab(const ppdl_tok_convert_opts *o, const ppdl_tok_file *files, long *vocab, char *err,
                      size_t errlen)
{
    *vocab = o->vocab_size;
    if (*vocab) return 0;
    const ppdl_tok_file *by = NULL;
    for (int i = 0; i < o->n_inputs; i++) {
        const ppdl_tok_file *f = &files[i];
        if (!f->vocab_hint)
            return ppdl_errf(err, errlen, "--vocab-size V is required: %s (%s format, %s) does not say how many "
                             "distinct tokens there are", f->path, ppdl_tok_format_name(f->format), f->dtype);
        if (by && by->vocab_hint != f->vocab_hint)
            return ppdl_errf(err, errlen, "%s implies vocab_size %d but %s implies %d: give --vocab-size V",
                             by->path, by->vocab_hint, f->path, f->vocab_hint);
        by = f;
    }
    *vocab = by->vocab_hint;
    return 0;
}

int ppdl_tok_convert(const ppdl_tok_convert_opts *o, ppdl_tok_convert_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    double t0 = ppdl_now_s();
    ppdl_tok_file *files = ppdl_xcalloc((size_t)o->n_inputs, sizeof *files);
    ppdl_tokens_out *wt = NULL, *wv = NULL;
    convert c = {.T1 = o->T + 1, .S = o->S, .progress = o->progress, .t0 = t0};
    int rc = -1;
    char name[512];
    corpus_name(o, name, sizeof name);
    for (int i = 0; i < o->n_inputs; i++) {
        if (ppdl_tok_probe(o->inputs[i], o->format, o->raw_width, &files[i], err, errlen)) goto out;
        c.total += files[i].count;
        res->read_bytes += files[i].header_bytes + files[i].count * files[i].width;
    }
    long vocab;
    if (pick_vocab(o, files, &vocab, err, errlen)) goto out;
    if (c.total < c.T1) {
        ppdl_errf(err, errlen, "%s: %lld %s in all, but one row of --seq-len %ld needs %ld", name, c.total,
                  o->unit ? o->unit : "tokens", o->T, c.T1);
        goto out;
    }
    long n_all = rows_of(c.total, c.T1, c.S), n_val = 0, n_train = n_all;
    long long split = c.total; /* where the validation region starts */
    if (o->val_fraction > 0) {
        /* ceil(F*n), where an F*n within rounding of an integer (0.1 * 230 =
         * 23.000000000000004) counts as that integer */
        double x = o->val_fraction * (double)n_all, r = nearbyint(x);
        n_val = (long)(fabs(x - r) <= 1e-9 * x ? r : ceil(x));
        if (n_val < 1) n_val = 1;
        split = c.total - ((long long)(n_val - 1) * c.S + c.T1);
        n_train = split < 0 ? 0 : rows_of(split, c.T1, c.S);
        if (n_train < 1) {
            ppdl_errf(err, errlen, "--val-fraction %g: %s gives %ld rows; the last %ld of them (for validation) "
                      "leave no tokens for a training row: use a smaller fraction or more data",
                      o->val_fraction, name, n_all, n_val);
            goto out;
        }
    }
    if (!(wt = ppdl_tokens_out_begin(o->output, n_train, (int)o->T, (int)vocab, o->compress, err, errlen)))
        goto out;
    if (n_val && !(wv = ppdl_tokens_out_begin(o->val_output, n_val, (int)o->T, (int)vocab, o->compress, err, errlen)))
        goto out;
    char what[96];
    if (o->vocab_what) snprintf(what, sizeof what, "%s", o->vocab_what);
    else if (o->vocab_size) snprintf(what, sizeof what, "--vocab-size %ld", vocab);
    else snprintf(what, sizeof what, "the vocab_size of the llm.c shards' tokenizer; --vocab-size sets another");
    c.s = ppdl_tok_stream_open(files, o->n_inputs, vocab, what);
    if (write_part(&c, wt, 0, split, n_train, err, errlen)) goto out;
    if (wv && write_part(&c, wv, split, c.total, n_val, err, errlen)) goto out;
    report(&c, 1);
    if (ppdl_tokens_out_close(wt, err, errlen) || (wv && ppdl_tokens_out_close(wv, err, errlen))) goto out;
    /* both complete: now replace what was there (the validation file first, so that a
     * failure leaves the training file as it was) */
    rc = wv ? ppdl_tokens_out_commit(wv, err, errlen) : 0;
    wv = NULL;
    if (rc) goto out;
    rc = ppdl_tokens_out_commit(wt, err, errlen);
    wt = NULL;
    if (rc) goto out;
    res->tokens = c.total;
    res->rows = n_train;
    res->val_rows = n_val;
    res->vocab_size = vocab;
    res->seconds = ppdl_now_s() - t0;
out:
    ppdl_tokens_out_discard(wt);
    ppdl_tokens_out_discard(wv);
    ppdl_tok_stream_close(c.s);
    free(files);
    return rc;
}
