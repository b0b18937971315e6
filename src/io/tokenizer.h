/* tokenizer.h — byte-level BPE tokenizers: Hugging Face's tokenizer.json (GPT-2's and any
 * trained with the `tokenizers` library in that form) to encode and decode, llm.c's
 * gpt2_tokenizer.bin to decode.
 *
 * tokenizer.json (read with jansson; docs/data.md, "Tokenizers"):
 *   model          type BPE (or no type and merges), vocab {token: id}, merges as
 *                  "a b" strings or [a, b] pairs (rank = position), ignore_merges;
 *                  continuing_subword_prefix / end_of_word_suffix / dropout must be unset
 *   added_tokens   [{id, content, ...}]: found in the text first (leftmost, longest),
 *                  each becomes its id; lstrip / rstrip / single_word must be false
 *   normalizer     null (one that changes the text is refused by name)
 *   pre_tokenizer  ByteLevel {add_prefix_space, use_regex} (GPT-2's pattern), or a
 *                  Sequence of Split {pattern {Regex|String}, behavior Isolated|Removed}
 *                  ending with ByteLevel; the regular expressions run in PCRE2 (UTF, UCP)
 *   decoder        ByteLevel or null; post_processor is not applied (ids are those of
 *                  `encode(text, add_special_tokens=False)`)
 * Other kinds (WordPiece, Unigram, WordLevel, a Metaspace pre-tokenizer, ...) are
 * refused by name, as is a merge of a token not in the vocabulary.
 *
 * llm.c's tokenizer file: 256 little-endian uint32 — [0] magic 20240328, [1] version 1
 * or 2, [2] vocab_size, [3] (version 2) the end-of-text id — then per token a length
 * byte and that many bytes. It holds no merges: decoding only.
 *
 * Encoding: the added tokens split the text; each piece between goes through the
 * pre-tokenizer's regular expressions into words, each word's bytes start as single-byte
 * tokens and merge by rank (lowest first, leftmost among equals: a heap, as `tokenizers`
 * does); the result per word is cached. Not thread-safe: one tokenizer per thread.
 */
#ifndef PPDL_TOKENIZER_H
#define PPDL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ppdl_tokenizer ppdl_tokenizer;

/* tokenizer.json, or llm.c's tokenizer file (by its magic). NULL with a message naming
 * the file and the field on any error. */
ppdl_tokenizer *ppdl_tokenizer_load(const char *path, char *err, size_t errlen);
void ppdl_tokenizer_free(ppdl_tokenizer *t);

/* 1 for tokenizer.json, 0 for llm.c's file (decoding only) */
int ppdl_tokenizer_can_encode(const ppdl_tokenizer *t);
/* the largest id + 1 (vocabulary and added tokens) */
long ppdl_tokenizer_vocab_size(const ppdl_tokenizer *t);
/* the id of the token spelled `content` (an added token's content, or a vocabulary
 * token's text), -1 if none */
int32_t ppdl_tokenizer_find(const ppdl_tokenizer *t, const char *content);
/* the end-of-text token: <|endoftext|> (llm.c's file: its header's), -1 if none */
int32_t ppdl_tokenizer_eot(const ppdl_tokenizer *t);
/* the bytes token id stands for (NULL, *len 0 for an id with no token) */
const unsigned char *ppdl_tokenizer_bytes(const ppdl_tokenizer *t, int32_t id, size_t *len);

typedef struct ppdl_ids {
    int32_t *v;
    size_t n, cap;
} ppdl_ids;

/* text[len] (UTF-8) appended to out as ids. flags PPDL_TOKENIZE_CONTINUES: the text
 * continues a piece cut at ppdl_tokenizer_cut (no prefix space added before it).
 * -1: the text is not UTF-8 (the message gives the byte offset) or a regex failed. */
#define PPDL_TOKENIZE_CONTINUES 1
int ppdl_tokenizer_encode(ppdl_tokenizer *t, const char *text, size_t len, int flags, ppdl_ids *out, char *err,
                          size_t errlen);
/* Where a long text can be cut so that encoding the two parts (the second with
 * PPDL_TOKENIZE_CONTINUES) gives the ids of the whole: just after the last newline in
 * buf[0, n) with a printable ASCII character (not a space) on each side, not inside an
 * added token. Every match of GPT-2's and Llama 3's patterns ends there, and no run of
 * whitespace does (\s+(?!\S) would take a run ending at the cut whole). 0: none. */
size_t ppdl_tokenizer_cut(const ppdl_tokenizer *t, const char *buf, size_t n);

/* Decoding to text a token at a time: bytes of a UTF-8 character split across tokens
 * are held until it is whole; a byte that cannot start or continue one is written as
 * U+FFFD (as `tokenizers`' decode does). */
typedef struct ppdl_detok {
    const ppdl_tokenizer *t;
    unsigned char pend[4];
    int npend, need;
} ppdl_detok;
void ppdl_detok_init(ppdl_detok *d, const ppdl_tokenizer *t);
/* the token's text so far to out (complete characters only) */
void ppdl_detok_put(ppdl_detok *d, int32_t id, FILE *out);
/* the held bytes of an unfinished character, as U+FFFD */
void ppdl_detok_end(ppdl_detok *d, FILE *out);

#endif
