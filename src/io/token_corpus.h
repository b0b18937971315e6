/* token_corpus.h — token files people already have, read strictly and a piece at a time.
 *
 * Formats (docs/data.md; each checked against its own rules before a token is read):
 *   llmc   llm.c shards: a 1024-byte header of 256 little-endian int32 — [0] magic, [1] version,
 *          [2] token count, [3..255] zero — then the tokens, little-endian:
 *            magic 20240520, version 1: uint16 (GPT-2's tokenizer, vocab 50257)
 *            magic 20240801, version 7: uint32 (Llama 3's tokenizer, vocab 128256)
 *   raw    headerless little-endian uint16 or uint32 (nanoGPT's train.bin / val.bin)
 *   npy    NumPy .npy (format versions 1-3): a 1-D array of integers of 1, 2, 4 or 8 bytes,
 *          signed or not, either byte order; the header dictionary is parsed, not guessed
 *   bytes  any file, every byte a token (ppdl-data text)
 * In every format the file's size must be exactly the header plus count x width bytes.
 *
 * A stream reads the files one after another as one sequence of int32 tokens, checking
 * every token against [0, vocab) as it goes; a bad token is reported with its file and
 * its offset (token index and byte position). Memory: one read block (1 MiB).
 */
#ifndef PPDL_TOKEN_CORPUS_H
#define PPDL_TOKEN_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PPDL_TOK_AUTO = 0,             /* by content: .npy magic, llm.c magic, else raw */
    PPDL_TOK_LLMC,
    PPDL_TOK_RAW,
    PPDL_TOK_NPY,
    PPDL_TOK_BYTES
} ppdl_tok_format;

/* "llmc", "raw", "npy", "bytes" (and "auto" for PPDL_TOK_AUTO) */
const char *ppdl_tok_format_name(int format);
/* -1 when unknown */
int ppdl_tok_format_parse(const char *name);

/* What probing a file found out. */
typedef struct ppdl_tok_file {
    const char *path;              /* the caller's string, not copied */
    int format;                    /* PPDL_TOK_LLMC ... (never AUTO once probed) */
    long long header_bytes;        /* where the tokens start */
    int width;                     /* bytes per token: 1, 2, 4, 8 */
    int is_signed, big_endian;
    long long count;               /* tokens in the file */
    int vocab_hint;                /* the vocabulary the format implies (llm.c), else 0 */
    char dtype[32];                /* "uint16", "int64 (big-endian)", ... for messages */
} ppdl_tok_file;

/* Check the file against its format (format PPDL_TOK_AUTO: detect it) and fill f.
 * raw_width (2 or 4) is the token width of raw files (--dtype). */
int ppdl_tok_probe(const char *path, int format, int raw_width, ppdl_tok_file *f, char *err,
                   size_t errlen);

typedef struct ppdl_tok_stream ppdl_tok_stream;

/* files[0..n-1] (probed), in order, as one stream of tokens, each checked against
 * [0, vocab); vocab_what names where vocab came from in messages ("--vocab-size").
 * The array and the string must outlive the stream. */
ppdl_tok_stream *ppdl_tok_stream_open(const ppdl_tok_file *files, int n, long vocab, const char *vocab_what);
/* The next `count` tokens into dst[count] (dst NULL: read and check them, keep nothing).
 * -1 with a message naming the file on a read error, an early end or a token outside
 * [0, vocab). */
int ppdl_tok_stream_read(ppdl_tok_stream *s, int32_t *dst, long long count, char *err, size_t errlen);
/* tokens read so far */
long long ppdl_tok_stream_pos(const ppdl_tok_stream *s);
void ppdl_tok_stream_close(ppdl_tok_stream *s);

#endif
