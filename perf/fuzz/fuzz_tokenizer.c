/* fuzz_tokenizer.c — libFuzzer target: io/tokenizer.c, the reader and the encoder.
 *
 * The first byte of an input chooses what the rest is:
 *   even  a tokenizer.json (or llm.c tokenizer file), written to a temporary file and
 *         loaded. A refused one gets a message that starts with the file's name; an
 *         accepted one encodes a fixed text of letters, digits, spaces, accents, CJK,
 *         emoji and <|endoftext|> to ids in [0, vocab_size).
 *   odd   a text for a fixed tokenizer (every byte a token, a few merges, GPT-2's
 *         pattern, <|endoftext|>). Not UTF-8: refused with the byte's offset. Else the
 *         ids lie in [0, vocab_size), decode(encode(text)) == text, and the text
 *         encoded in pieces cut at ppdl_tokenizer_cut (the second onwards with
 *         PPDL_TOKENIZE_CONTINUES) gives the same ids as the whole.
 * Build and run: perf/fuzz/build, perf/fuzz/run tokenizer SECONDS (perf/fuzz/README.md).
 */
#include "core/error.h"
#include "io/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[256], fixed_path[256];
static ppdl_tokenizer *fixed;
static const char TEXT[] = "Hello, world! It's 2026: caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                           "\xf0\x9f\x98\x80  \n\n\tthe end<|endoftext|> 123 4567 ";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what, const char *err)
{
    if (cond) return;
    fprintf(stderr, "fuzz_tokenizer: %s (message: '%s')\n", what, err ? err : "");
    __builtin_trap();
}

static void write_file(const char *p, const void *data, size_t size)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
        perror(p);
        abort();
    }
}

/* byte b as GPT-2's byte-level code point, UTF-8 into out; returns its length */
static int byte_char(int b, char *out)
{
    static int cp[256];
    if (!cp['!']) {
        int extra = 0;
        for (int i = 0; i < 256; i++) {
            int keep = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
            cp[i] = keep ? i : 256 + extra++;
        }
    }
    int c = cp[b];
    if (c == '"' || c == '\\') return sprintf(out, "\\%c", c);
    if (c < 0x80) return sprintf(out, "%c", c);
    out[0] = (char)(0xC0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3F));
    out[2] = 0;
    return 2;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/ppdl-fuzz-tok-%d.json", dir, (int)getpid());
    snprintf(fixed_path, sizeof fixed_path, "%s/ppdl-fuzz-tok-fixed-%d.json", dir, (int)getpid());
    /* the fixed tokenizer: 256 byte tokens, then merges Ġ t, h e, Ġt he, i n, Ġ a, 1 2, and
     * of whitespace runs Ċ Ċ, Ġ Ċ (where a wrong cut changes the ids) */
    static char js[16384];
    size_t n = (size_t)sprintf(js, "{\"added_tokens\": [{\"id\": 262, \"content\": \"<|endoftext|>\", "
                               "\"special\": true}], \"normalizer\": null, \"pre_tokenizer\": {\"type\": "
                               "\"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}, \"decoder\": "
                               "{\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
    char c[8];
    for (int b = 0; b < 256; b++) {
        byte_char(b, c);
        n += (size_t)sprintf(js + n, "\"%s\": %d, ", c, b);
    }
    char nl[8];
    byte_char(' ', c);
    byte_char('\n', nl);
    n += (size_t)sprintf(js + n, "\"%st\": 256, \"he\": 257, \"%sthe\": 258, \"in\": 259, \"%sa\": 260, \"12\": 261, "
                         "\"<|endoftext|>\": 262, \"%s%s\": 263, \"%s%s\": 264}, \"merges\": [\"%s t\", \"h e\", "
                         "\"%st he\", \"i n\", \"%s a\", \"1 2\", \"%s %s\", \"%s %s\"]}}",
                         c, c, c, nl, nl, c, nl, c, c, c, nl, nl, c, nl);
    write_file(fixed_path, js, n);
    char err[PPDL_ERR_LEN];
    fixed = ppdl_tokenizer_load(fixed_path, err, sizeof err);
    check(fixed != NULL, "the fixed tokenizer is refused", err);
    unlink(fixed_path);
    return 0;
}

static int ids_ok(const ppdl_tokenizer *t, const ppdl_ids *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        if (ids->v[i] < 0 || ids->v[i] >= ppdl_tokenizer_vocab_size(t)) return 0;
    return 1;
}

/* the text of ids (malloc'd, *len) */
static char *decode(const ppdl_tokenizer *t, const ppdl_ids *ids, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ppdl_detok d;
    ppdl_detok_init(&d, t);
    for (size_t i = 0; i < ids->n; i++) ppdl_detok_put(&d, ids->v[i], f);
    ppdl_detok_end(&d, f);
    fclose(f);
    return buf;
}

static void roundtrip(ppdl_tokenizer *t, const char *text, size_t n, int pieces)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_ids ids = {0};
    int rc = ppdl_tokenizer_encode(t, text, n, 0, &ids, err, sizeof err);
    if (rc) {
        check(strstr(err, "is not UTF-8") != NULL, "encode refused a text for another reason", err);
        free(ids.v);
        return;
    }
    check(ids_ok(t, &ids), "an id outside [0, vocab_size)", "");
    size_t len;
    char *back = decode(t, &ids, &len);
    check(len == n && !memcmp(back, text, n), "decode(encode(text)) != text", "");
    free(back);
    if (pieces) {
        ppdl_ids p = {0};
        size_t pos = 0;
        int flags = 0;
        while (pos < n) {
            size_t cut = ppdl_tokenizer_cut(t, text + pos, n - pos);
            if (!cut) cut = n - pos;
            check(!ppdl_tokenizer_encode(t, text + pos, cut, flags, &p, err, sizeof err), "a piece is refused", err);
            pos += cut;
            flags = PPDL_TOKENIZE_CONTINUES;
        }
        check(p.n == ids.n && !memcmp(p.v, ids.v, ids.n * sizeof *ids.v), "the pieces' ids differ from the whole's",
              "");
        free(p.v);
    }
    free(ids.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    if (data[0] & 1) {
        roundtrip(fixed, (const char *)data + 1, size - 1, 1);
        return 0;
    }
    write_file(path, data + 1, size - 1);
    char err[PPDL_ERR_LEN] = "";
    ppdl_tokenizer *t = ppdl_tokenizer_load(path, err, sizeof err);
    if (!t) {
        check(strncmp(err, path, strlen(path)) == 0, "the message does not name the file", err);
        return 0;
    }
    if (ppdl_tokenizer_can_encode(t)) {
        /* only ids in range and no crash: a Removed split drops text, a missing byte
         * token drops bytes, so the text need not come back */
        ppdl_ids ids = {0};
        int rc = ppdl_tokenizer_encode(t, TEXT, sizeof TEXT - 1, 0, &ids, err, sizeof err);
        check(rc == 0, "an accepted tokenizer cannot encode the fixed text", err);
        check(ids_ok(t, &ids), "an id outside [0, vocab_size)", "");
        free(ids.v);
    }
    ppdl_tokenizer_free(t);
    return 0;
}
