/* tokenizer.c — byte-level BPE (tokenizer.h has the formats and the rules).
 *
 * Every token is kept as the bytes it stands for (the byte-level alphabet undone at
 * load), so a word's bytes index the single-byte tokens directly and a merge is a pair
 * of ids: (a, b) -> (rank, a+b). Three open-addressing tables: bytes -> id (the
 * vocabulary), id pair -> merge, word -> ids (the cache, cleared when full).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tokenizer.h"
#include "core/error.h"
#include "core/util.h"

#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#define LLMC_TOKENIZER_MAGIC 20240328
#define CACHE_MAX_WORD 256         /* longer words are not cached */
#define CACHE_MAX_ENTRIES (1 << 17)
#define MAX_STAGES 8
/* GPT-2's pattern, as the ByteLevel pre-tokenizer of `tokenizers` has it */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---------------------------------------------------------------------------------- */
/* byte-level alphabet: byte b is one code point (GPT-2's bytes_to_unicode) */

static int byte_cp[256];           /* byte -> code point */
static int cp_byte[324];           /* code point -> byte, -1 */

static void alphabet_init(void)
{
    if (byte_cp['!']) return;
    for (int i = 0; i < 324; i++) cp_byte[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        byte_cp[b] = keep ? b : 256 + extra++;
        cp_byte[byte_cp[b]] = b;
    }
}

/* the next code point of valid UTF-8 s[*i..n) (advances *i) */
static int utf8_next(const unsigned char *s, size_t n, size_t *i)
{
    unsigned c = s[*i];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (*i + (size_t)len > n) len = (int)(n - *i);
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; k++) cp = (cp << 6) | (s[*i + (size_t)k] & 0x3F);
    *i += (size_t)len;
    return (int)cp;
}

/* the length of the valid UTF-8 prefix of s[0..n) */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* 8 ASCII bytes at a time */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (v & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return i;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return n;
}

/* a byte-level token string to the bytes it stands for; a string with a code point
 * outside the alphabet stands for its own UTF-8 (as the ByteLevel decoder does) */
static size_t unbyte(const char *str, size_t n, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, k = 0;
    while (i < n) {
        int cp = utf8_next(s, n, &i);
        if (cp >= 324 || cp_byte[cp] < 0) {
            memcpy(out, s, n);
            return n;
        }
        out[k++] = (unsigned char)cp_byte[cp];
    }
    return k;
}

static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
}

/* ---------------------------------------------------------------------------------- */

enum { ST_SPLIT, ST_BYTELEVEL };
enum { B_ISOLATED, B_REMOVED };

typedef struct stage {
    int kind;
    pcre2_code *re;                /* NULL: the piece whole (ByteLevel use_regex false) */
    int behavior;                  /* Split */
    int prefix_space;              /* ByteLevel add_prefix_space */
} stage;

typedef struct added {
    int32_t id;
    char *content;
    size_t len;
} added;

typedef struct merge_slot {
    uint64_t key;                  /* (a << 32 | b) + 1; 0: empty */
    int32_t rank, id;
} merge_slot;

typedef struct cache_slot {
    uint32_t word_off, ids_off;    /* into cache_bytes, cache_ids */
    uint16_t word_len, n_ids;
    uint32_t used;                 /* 0: empty */
} cache_slot;

typedef struct heap_item {
    int32_t rank, pos, id;
} heap_item;

struct ppdl_tokenizer {
    char *path;
    int json;
    long V;                        /* largest id + 1 */
    /* every id: its bytes */
    size_t *off;
    uint32_t *len;
    unsigned char *bytes;
    size_t bytes_n;
    /* bytes -> id */
    int32_t *vmap;
    size_t vmask;
    int32_t byte_id[256];          /* single-byte tokens, -1 */
    int32_t unk;
    int ignore_merges;
    merge_slot *merges;
    size_t mmask;
    added *added;
    int n_added;
    unsigned char added_first[256];
    int added_one_first;           /* the one first byte of all added tokens, -1 */
    stage st[MAX_STAGES];
    int n_st;
    pcre2_match_data *md;
    int32_t eot;
    /* cache */
    cache_slot *cache;
    size_t cmask, c_count;
    unsigned char *cache_bytes;
    size_t cb_n, cb_cap;
    int32_t *cache_ids;
    size_t ci_n, ci_cap;
    /* bpe scratch */
    int32_t *s_id, *s_prev, *s_next;
    uint32_t *s_len;
    heap_item *heap;
    size_t s_cap, h_cap;
};

static void ids_push(ppdl_ids *o, int32_t id)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1024;
        o->v = realloc(o->v, o->cap * sizeof *o->v);
        PPDL_CHECK(o->v, "out of memory for token ids");
    }
    o->v[o->n++] = id;
}

static int32_t vocab_get(const ppdl_tokenizer *t, const unsigned char *b, size_t n)
{
    if (!t->vmap) return -1;
    for (size_t h = hash_bytes(b, n) & t->vmask;; h = (h + 1) & t->vmask) {
        int32_t id = t->vmap[h];
        if (id < 0) return -1;
        if (t->len[id] == n && !memcmp(t->bytes + t->off[id], b, n)) return id;
    }
}

static void vocab_put(ppdl_tokenizer *t, int32_t id)
{
    const unsigned char *b = t->bytes + t->off[id];
    size_t n = t->len[id];
    for (size_t h = hash_bytes(b, n) & t->vmask;; h = (h + 1) & t->vmask) {
        int32_t o = t->vmap[h];
        if (o < 0) {
            t->vmap[h] = id;
            return;
        }
        if (t->len[o] == n && !memcmp(t->bytes + t->off[o], b, n)) return; /* the first keeps it */
    }
}

static const merge_slot *merge_get(const ppdl_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (size_t h = hash_u64(key) & t->mmask;; h = (h + 1) & t->mmask) {
        const merge_slot *s = &t->merges[h];
        if (s->key == key) return s;
        if (!s->key) return NULL;
    }
}

/* ---------------------------------------------------------------------------------- */
/* loading */

void ppdl_tokenizer_free(ppdl_tokenizer *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_st; i++) pcre2_code_free(t->st[i].re);
    pcre2_match_data_free(t->md);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    free(t->path);
    free(t->off);
    free(t->len);
    free(t->bytes);
    free(t->vmap);
    free(t->merges);
    free(t->cache);
    free(t->cache_bytes);
    free(t->cache_ids);
    free(t->s_id);
    free(t->s_prev);
    free(t->s_next);
    free(t->s_len);
    free(t->heap);
    free(t);
}

/* the vocabulary's tables once off/len/bytes are set */
static void build_vmap(ppdl_tokenizer *t)
{
    size_t size = pow2_at_least((size_t)t->V * 2);
    t->vmap = ppdl_xmalloc(size * sizeof *t->vmap);
    memset(t->vmap, 0xff, size * sizeof *t->vmap);
    t->vmask = size - 1;
    for (long id = 0; id < t->V; id++)
        if (t->len[id] || t->off[id] != (size_t)-1) vocab_put(t, (int32_t)id);
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        t->byte_id[b] = vocab_get(t, &c, 1);
    }
}

static ppdl_tokenizer *load_llmc(const char *path, FILE *f, char *err, size_t errlen)
{
    uint32_t h[256];
    if (fread(h, 4, 256, f) != 256) {
        ppdl_errf(err, errlen, "%s: llm.c tokenizer file shorter than its 1024-byte header", path);
        return NULL;
    }
    if (h[1] != 1 && h[1] != 2) {
        ppdl_errf(err, errlen, "%s: llm.c tokenizer file version %u: ppdl reads versions 1 and 2", path, h[1]);
        return NULL;
    }
    if (h[2] < 1 || h[2] > (1u << 24)) {
        ppdl_errf(err, errlen, "%s: llm.c tokenizer file: vocab_size %u out of range", path, h[2]);
        return NULL;
    }
    ppdl_tokenizer *t = ppdl_xcalloc(1, sizeof *t);
    t->path = strdup(path);
    t->V = h[2];
    t->eot = h[1] == 2 ? (int32_t)h[3] : (t->V > 50256 ? 50256 : -1); /* version 1: GPT-2's */
    if (t->eot >= t->V) t->eot = -1;
    t->unk = -1;
    t->off = ppdl_xmalloc((size_t)t->V * sizeof *t->off);
    t->len = ppdl_xcalloc((size_t)t->V, sizeof *t->len);
    t->bytes = ppdl_xmalloc((size_t)t->V * 255 + 1);
    for (long i = 0; i < t->V; i++) {
        int n = fgetc(f);
        if (n == EOF || (n && fread(t->bytes + t->bytes_n, 1, (size_t)n, f) != (size_t)n)) {
            ppdl_errf(err, errlen, "%s: llm.c tokenizer file ends at token %ld of %ld", path, i, t->V);
            ppdl_tokenizer_free(t);
            return NULL;
        }
        t->off[i] = t->bytes_n;
        t->len[i] = (uint32_t)n;
        t->bytes_n += (size_t)n;
    }
    if (fgetc(f) != EOF) {
        ppdl_errf(err, errlen, "%s: llm.c tokenizer file: bytes after its %ld tokens", path, t->V);
        ppdl_tokenizer_free(t);
        return NULL;
    }
    build_vmap(t);
    return t;
}

static const char *type_of(json_t *o)
{
    json_t *ty = json_object_get(o, "type");
    return json_is_string(ty) ? json_string_value(ty) : NULL;
}

/* a field that must be absent, null, false or "" */
static int unset(json_t *v)
{
    return !v || json_is_null(v) || json_is_false(v) || (json_is_string(v) && !*json_string_value(v));
}

static int compile(ppdl_tokenizer *t, stage *s, const char *pattern, int literal, const char *field, char *err,
                   size_t errlen)
{
    int ec;
    PCRE2_SIZE eo;
    s->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                          literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!s->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return ppdl_errf(err, errlen, "%s: %s: the regular expression does not compile (PCRE2, at offset %zu: %s)",
                         t->path, field, (size_t)eo, (char *)msg);
    }
    pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE); /* without JIT: the interpreter */
    return 0;
}

static int add_stage(ppdl_tokenizer *t, json_t *p, const char *field, char *err, size_t errlen)
{
    const char *ty = type_of(p);
    if (!json_is_object(p) || !ty)
        return ppdl_errf(err, errlen, "%s: %s: expected an object with a type", t->path, field);
    char f[128];
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return ppdl_errf(err, errlen, "%s: %s.pretokenizers: expected an array", t->path, field);
        for (size_t i = 0; i < json_array_size(list); i++) {
            snprintf(f, sizeof f, "%s.pretokenizers[%zu]", field, i);
            if (add_stage(t, json_array_get(list, i), f, err, errlen)) return -1;
        }
        return 0;
    }
    if (t->n_st && t->st[t->n_st - 1].kind == ST_BYTELEVEL)
        return ppdl_errf(err, errlen, "%s: %s: a %s after ByteLevel: ppdl reads byte-level BPE with ByteLevel last",
                         t->path, field, ty);
    if (t->n_st == MAX_STAGES) return ppdl_errf(err, errlen, "%s: %s: more than %d pre-tokenizers", t->path, field, MAX_STAGES);
    stage *s = &t->st[t->n_st];
    memset(s, 0, sizeof *s);
    if (!strcmp(ty, "ByteLevel")) {
        s->kind = ST_BYTELEVEL;
        s->prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        json_t *ur = json_object_get(p, "use_regex");
        snprintf(f, sizeof f, "%s (ByteLevel's regex)", field);
        if ((!ur || json_is_true(ur)) && compile(t, s, GPT2_PATTERN, 0, f, err, errlen)) return -1;
    } else if (!strcmp(ty, "Split")) {
        s->kind = ST_SPLIT;
        json_t *pat = json_object_get(p, "pattern"), *re = json_object_get(pat, "Regex"),
               *str = json_object_get(pat, "String");
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!json_is_string(re) && !json_is_string(str))
            return ppdl_errf(err, errlen, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", t->path,
                             field);
        if (!beh || (strcmp(beh, "Isolated") && strcmp(beh, "Removed")))
            return ppdl_errf(err, errlen, "%s: %s.behavior is %s: ppdl reads Isolated and Removed", t->path, field,
                             beh ? beh : "missing");
        s->behavior = strcmp(beh, "Isolated") ? B_REMOVED : B_ISOLATED;
        if (json_is_true(json_object_get(p, "invert")))
            return ppdl_errf(err, errlen, "%s: %s.invert is true: ppdl reads Split without invert", t->path, field);
        snprintf(f, sizeof f, "%s.pattern", field);
        if (compile(t, s, json_string_value(re ? re : str), !re, f, err, errlen)) return -1;
    } else {
        return ppdl_errf(err, errlen, "%s: %s.type is %s: ppdl reads byte-level BPE (a ByteLevel pre-tokenizer, "
                         "alone or after Split)", t->path, field, ty);
    }
    t->n_st++;
    return 0;
}

/* a token string of tokenizer.json as bytes (tmp: its length * 4 + 1) */
static size_t token_bytes(const char *s, size_t n, unsigned char *tmp) { return unbyte(s, n, tmp); }

static int load_json(ppdl_tokenizer *t, json_t *root, char *err, size_t errlen)
{
    const char *path = t->path;
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return ppdl_errf(err, errlen, "%s: model: missing or not an object", path);
    const char *ty = type_of(model);
    if (ty && strcmp(ty, "BPE"))
        return ppdl_errf(err, errlen, "%s: model.type is %s; ppdl reads byte-level BPE", path, ty);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab)) return ppdl_errf(err, errlen, "%s: model.vocab: missing or not an object", path);
    if (!json_is_array(merges)) return ppdl_errf(err, errlen, "%s: model.merges: missing or not an array", path);
    static const char *const must_unset[] = {"continuing_subword_prefix", "end_of_word_suffix", "dropout"};
    for (int i = 0; i < 3; i++)
        if (!unset(json_object_get(model, must_unset[i])))
            return ppdl_errf(err, errlen, "%s: model.%s is set: ppdl reads byte-level BPE without it", path,
                             must_unset[i]);
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm)) {
        const char *nt = type_of(norm);
        json_t *list = json_object_get(norm, "normalizers");
        if (!nt || strcmp(nt, "Sequence") || json_array_size(list))
            return ppdl_errf(err, errlen, "%s: normalizer.type is %s, which changes the text: ppdl reads tokenizers "
                             "without a normalizer", path, nt ? nt : "missing");
    }
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (!pre || json_is_null(pre))
        return ppdl_errf(err, errlen, "%s: pre_tokenizer is null: ppdl reads byte-level BPE (a ByteLevel "
                         "pre-tokenizer)", path);
    if (add_stage(t, pre, "pre_tokenizer", err, errlen)) return -1;
    if (!t->n_st || t->st[t->n_st - 1].kind != ST_BYTELEVEL)
        return ppdl_errf(err, errlen, "%s: pre_tokenizer has no ByteLevel: ppdl reads byte-level BPE", path);
    json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec) && (!type_of(dec) || strcmp(type_of(dec), "ByteLevel")))
        return ppdl_errf(err, errlen, "%s: decoder.type is %s: ppdl decodes byte-level BPE (ByteLevel)", path,
                         type_of(dec) ? type_of(dec) : "missing");
    json_t *addl = json_object_get(root, "added_tokens");
    if (addl && !json_is_null(addl) && !json_is_array(addl))
        return ppdl_errf(err, errlen, "%s: added_tokens: expected an array", path);

    /* ids: the vocabulary's and the added tokens' */
    long V = 0;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || id >= (1 << 26))
            return ppdl_errf(err, errlen, "%s: model.vocab[\"%s\"]: expected an id in [0, 2^26)", path, key);
        if (id + 1 > V) V = (long)id + 1;
    }
    size_t na = json_array_size(addl);
    t->added = ppdl_xcalloc(na ? na : 1, sizeof *t->added);
    for (size_t i = 0; i < na; i++) {
        json_t *a = json_array_get(addl, i), *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 26) ||
            !json_is_string(c) || !json_string_length(c))
            return ppdl_errf(err, errlen, "%s: added_tokens[%zu]: expected an id in [0, 2^26) and a content", path, i);
        static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
        for (int k = 0; k < 3; k++)
            if (json_is_true(json_object_get(a, flags[k])))
                return ppdl_errf(err, errlen, "%s: added_tokens[%zu].%s is true (%s): ppdl reads added tokens "
                                 "matched exactly", path, i, flags[k], json_string_value(c));
        added *ad = &t->added[t->n_added++];
        ad->id = (int32_t)json_integer_value(id);
        ad->len = json_string_length(c);
        ad->content = ppdl_xmalloc(ad->len + 1);
        memcpy(ad->content, json_string_value(c), ad->len + 1);
        if (ad->id + 1 > V) V = ad->id + 1;
    }
    t->V = V;
    t->off = ppdl_xmalloc((size_t)V * sizeof *t->off);
    memset(t->off, 0xff, (size_t)V * sizeof *t->off);
    t->len = ppdl_xcalloc((size_t)V, sizeof *t->len);
    size_t cap = 1 << 16;
    t->bytes = ppdl_xmalloc(cap);
    /* added tokens first: an id in both spells its content */
    for (int pass = 0; pass < 2; pass++) {
        size_t n = pass ? json_object_size(vocab) : (size_t)t->n_added;
        void *it = pass ? json_object_iter(vocab) : NULL;
        for (size_t i = 0; i < n; i++) {
            const char *s;
            size_t len;
            int32_t id;
            if (pass) {
                s = json_object_iter_key(it);
                len = strlen(s);
                id = (int32_t)json_integer_value(json_object_iter_value(it));
                it = json_object_iter_next(vocab, it);
            } else {
                s = t->added[i].content;
                len = t->added[i].len;
                id = t->added[i].id;
            }
            if (t->off[id] != (size_t)-1) continue;
            while (t->bytes_n + len + 1 > cap) t->bytes = realloc(t->bytes, cap *= 2);
            PPDL_CHECK(t->bytes, "out of memory for a tokenizer");
            t->off[id] = t->bytes_n;
            if (pass) t->len[id] = (uint32_t)token_bytes(s, len, t->bytes + t->bytes_n);
            else {
                memcpy(t->bytes + t->bytes_n, s, len);
                t->len[id] = (uint32_t)len;
            }
            t->bytes_n += t->len[id];
        }
    }
    build_vmap(t);
    json_t *unk = json_object_get(model, "unk_token");
    t->unk = json_is_string(unk) ? ppdl_tokenizer_find(t, json_string_value(unk)) : -1;

    /* merges: (a, b) -> (rank, a+b) */
    size_t nm = json_array_size(merges), size = pow2_at_least(nm * 2 + 2);
    t->merges = ppdl_xcalloc(size, sizeof *t->merges);
    t->mmask = size - 1;
    unsigned char *tmp = ppdl_xmalloc(4096);
    size_t tmp_cap = 4096;
    for (size_t r = 0; r < nm; r++) {
        json_t *m = json_array_get(merges, r);
        const char *part[2];
        size_t plen[2];
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                free(tmp);
                return ppdl_errf(err, errlen, "%s: model.merges[%zu] (\"%s\"): expected two tokens separated by one "
                                 "space", path, r, s);
            }
            part[0] = s;
            plen[0] = (size_t)(sp - s);
            part[1] = sp + 1;
            plen[1] = strlen(sp + 1);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            for (int k = 0; k < 2; k++) {
                part[k] = json_string_value(json_array_get(m, k));
                plen[k] = json_string_length(json_array_get(m, k));
            }
        } else {
            free(tmp);
            return ppdl_errf(err, errlen, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", path, r);
        }
        if (plen[0] + plen[1] + 1 > tmp_cap) {
            tmp_cap = plen[0] + plen[1] + 1;
            tmp = realloc(tmp, tmp_cap);
            PPDL_CHECK(tmp, "out of memory for a tokenizer");
        }
        int32_t ids[2];
        size_t nb[2];
        for (int k = 0; k < 2; k++) {
            char piece[1024];
            nb[k] = unbyte(part[k], plen[k], tmp + (k ? nb[0] : 0));
            ids[k] = vocab_get(t, tmp + (k ? nb[0] : 0), nb[k]);
            if (ids[k] < 0) {
                snprintf(piece, sizeof piece, "%.*s", (int)plen[k], part[k]);
                free(tmp);
                return ppdl_errf(err, errlen, "%s: model.merges[%zu]: token \"%s\" is not in model.vocab", path, r,
                                 piece);
            }
        }
        int32_t id = vocab_get(t, tmp, nb[0] + nb[1]);
        if (id < 0) {
            free(tmp);
            return ppdl_errf(err, errlen, "%s: model.merges[%zu]: the merged token \"%.*s%.*s\" is not in model.vocab",
                             path, r, (int)plen[0], part[0], (int)plen[1], part[1]);
        }
        uint64_t mkey = ((uint64_t)(uint32_t)ids[0] << 32 | (uint32_t)ids[1]) + 1;
        for (size_t h = hash_u64(mkey) & t->mmask;; h = (h + 1) & t->mmask) {
            merge_slot *s = &t->merges[h];
            if (!s->key || s->key == mkey) {
                /* a pair listed twice: the later rank, as tokenizers' map keeps */
                s->key = mkey;
                s->rank = (int32_t)r;
                s->id = id;
                break;
            }
        }
    }
    free(tmp);
    t->eot = ppdl_tokenizer_find(t, "<|endoftext|>");
    t->added_one_first = -1;
    for (int i = 0; i < t->n_added; i++) {
        unsigned char c = (unsigned char)t->added[i].content[0];
        if (!t->added_first[c]) t->added_one_first = t->added_one_first == -1 ? c : -2;
        t->added_first[c] = 1;
    }
    size_t cs = pow2_at_least(CACHE_MAX_ENTRIES * 2);
    t->cache = ppdl_xcalloc(cs, sizeof *t->cache);
    t->cmask = cs - 1;
    t->md = pcre2_match_data_create(4, NULL);
    return 0;
}

ppdl_tokenizer *ppdl_tokenizer_load(const char *path, char *err, size_t errlen)
{
    alphabet_init();
    FILE *f = fopen(path, "rb");
    if (!f) {
        ppdl_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    uint32_t magic = 0;
    if (fread(&magic, 4, 1, f) == 1 && magic == LLMC_TOKENIZER_MAGIC) {
        rewind(f);
        ppdl_tokenizer *t = load_llmc(path, f, err, errlen);
        fclose(f);
        return t;
    }
    rewind(f);
    json_error_t je;
    json_t *root = json_loadf(f, JSON_ALLOW_NUL, &je);
    fclose(f);
    if (!root) {
        ppdl_errf(err, errlen, "%s: not JSON (line %d, column %d: %s): expected a tokenizer.json or llm.c's "
                  "tokenizer file", path, je.line, je.column, je.text);
        return NULL;
    }
    ppdl_tokenizer *t = ppdl_xcalloc(1, sizeof *t);
    t->path = strdup(path);
    t->json = 1;
    int rc = json_is_object(root) ? load_json(t, root, err, errlen)
                                  : ppdl_errf(err, errlen, "%s: not a tokenizer.json (not a JSON object)", path);
    json_decref(root);
    if (rc) {
        ppdl_tokenizer_free(t);
        return NULL;
    }
    return t;
}

int ppdl_tokenizer_can_encode(const ppdl_tokenizer *t) { return t->json; }
long ppdl_tokenizer_vocab_size(const ppdl_tokenizer *t) { return t->V; }
int32_t ppdl_tokenizer_eot(const ppdl_tokenizer *t) { return t->eot; }

int32_t ppdl_tokenizer_find(const ppdl_tokenizer *t, const char *content)
{
    size_t n = strlen(content);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].content, content, n)) return t->added[i].id;
    if (!t->json) return vocab_get(t, (const unsigned char *)content, n);
    unsigned char *b = ppdl_xmalloc(n + 1);
    int32_t id = vocab_get(t, b, unbyte(content, n, b));
    free(b);
    return id;
}

const unsigned char *ppdl_tokenizer_bytes(const ppdl_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->V || t->off[id] == (size_t)-1) {
        *len = 0;
        return NULL;
    }
    *len = t->len[id];
    return t->bytes + t->off[id];
}

/* ---------------------------------------------------------------------------------- */
/* encoding */

static void scratch(ppdl_tokenizer *t, size_t n)
{
    if (n <= t->s_cap) return;
    t->s_cap = n * 2;
    t->s_id = realloc(t->s_id, t->s_cap * sizeof *t->s_id);
    t->s_prev = realloc(t->s_prev, t->s_cap * sizeof *t->s_prev);
    t->s_next = realloc(t->s_next, t->s_cap * sizeof *t->s_next);
    t->s_len = realloc(t->s_len, t->s_cap * sizeof *t->s_len);
    PPDL_CHECK(t->s_id && t->s_prev && t->s_next && t->s_len, "out of memory for a word");
}

static int heap_less(const heap_item *a, const heap_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(ppdl_tokenizer *t, size_t *n, int32_t rank, int32_t pos, int32_t id)
{
    if (*n == t->h_cap) {
        t->h_cap = t->h_cap ? 2 * t->h_cap : 256;
        t->heap = realloc(t->heap, t->h_cap * sizeof *t->heap);
        PPDL_CHECK(t->heap, "out of memory for a word");
    }
    heap_item x = {rank, pos, id}, *h = t->heap;
    size_t i = (*n)++;
    while (i > 0 && heap_less(&x, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static heap_item heap_pop(ppdl_tokenizer *t, size_t *n)
{
    heap_item *h = t->heap, top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static void cache_clear(ppdl_tokenizer *t)
{
    memset(t->cache, 0, (t->cmask + 1) * sizeof *t->cache);
    t->c_count = t->cb_n = t->ci_n = 0;
}

/* one word's ids appended to out */
static void bpe_word(ppdl_tokenizer *t, const unsigned char *w, size_t n, ppdl_ids *out)
{
    uint64_t hv = 0;
    size_t slot = 0;
    int cacheable = n <= CACHE_MAX_WORD;
    if (cacheable) {
        hv = hash_bytes(w, n);
        for (slot = hv & t->cmask;; slot = (slot + 1) & t->cmask) {
            cache_slot *c = &t->cache[slot];
            if (!c->used) break;
            if (c->word_len == n && !memcmp(t->cache_bytes + c->word_off, w, n)) {
                for (int k = 0; k < c->n_ids; k++) ids_push(out, t->cache_ids[c->ids_off + (size_t)k]);
                return;
            }
        }
    }
    size_t start = out->n;
    int32_t whole = t->ignore_merges ? vocab_get(t, w, n) : -1;
    if (whole >= 0) {
        ids_push(out, whole);
    } else {
        scratch(t, n);
        int32_t *id = t->s_id, *prev = t->s_prev, *next = t->s_next;
        uint32_t *len = t->s_len;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t b = t->byte_id[w[i]];
            if (b < 0) b = t->unk; /* a byte the vocabulary lacks: unk, else dropped */
            if (b < 0) continue;
            id[m] = b;
            len[m] = 1;
            prev[m] = (int32_t)m - 1;
            next[m] = (int32_t)m + 1;
            m++;
        }
        if (m) next[m - 1] = -1;
        size_t hn = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            const merge_slot *s = merge_get(t, id[i], id[i + 1]);
            if (s) heap_push(t, &hn, s->rank, (int32_t)i, s->id);
        }
        while (hn) {
            heap_item top = heap_pop(t, &hn);
            int32_t p = top.pos, q = next[p];
            if (!len[p] || q < 0) continue;
            const merge_slot *s = merge_get(t, id[p], id[q]);
            if (!s || s->id != top.id) continue;
            id[p] = top.id;
            len[p] += len[q];
            len[q] = 0;
            next[p] = next[q];
            if (next[q] >= 0) prev[next[q]] = p;
            if (prev[p] >= 0 && (s = merge_get(t, id[prev[p]], id[p]))) heap_push(t, &hn, s->rank, prev[p], s->id);
            if (next[p] >= 0 && (s = merge_get(t, id[p], id[next[p]]))) heap_push(t, &hn, s->rank, p, s->id);
        }
        for (int32_t i = m ? 0 : -1; i >= 0; i = next[i]) ids_push(out, id[i]);
    }
    if (!cacheable) return;
    if (t->c_count >= CACHE_MAX_ENTRIES) {
        cache_clear(t);
        for (slot = hv & t->cmask; t->cache[slot].used; slot = (slot + 1) & t->cmask) {}
    }
    size_t k = out->n - start;
    if (t->cb_n + n > t->cb_cap) {
        t->cb_cap = (t->cb_n + n) * 2;
        t->cache_bytes = realloc(t->cache_bytes, t->cb_cap);
    }
    if (t->ci_n + k > t->ci_cap) {
        t->ci_cap = (t->ci_n + k) * 2;
        t->cache_ids = realloc(t->cache_ids, t->ci_cap * sizeof *t->cache_ids);
    }
    PPDL_CHECK(t->cache_bytes && t->cache_ids, "out of memory for the tokenizer's cache");
    cache_slot *c = &t->cache[slot];
    c->word_off = (uint32_t)t->cb_n;
    c->word_len = (uint16_t)n;
    c->ids_off = (uint32_t)t->ci_n;
    c->n_ids = (uint16_t)k;
    c->used = 1;
    memcpy(t->cache_bytes + t->cb_n, w, n);
    memcpy(t->cache_ids + t->ci_n, out->v + start, k * sizeof *out->v);
    t->cb_n += n;
    t->ci_n += k;
    t->c_count++;
}

static int run_stage(ppdl_tokenizer *t, int k, const unsigned char *s, size_t n, int prefix_ok, ppdl_ids *out,
                     char *err, size_t errlen);

/* the pieces of s[0..n) by stage k's regex, each through stage k+1 */
static int split_regex(ppdl_tokenizer *t, int k, const unsigned char *s, size_t n, ppdl_ids *out, char *err,
                       size_t errlen)
{
    const stage *st = &t->st[k];
    size_t off = 0, last = 0;
    while (off <= n) {
        int rc = pcre2_match(st->re, s, n, off, PCRE2_NO_UTF_CHECK, t->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ppdl_errf(err, errlen, "%s: the pre-tokenizer's regular expression failed: %s", t->path,
                             (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match: on by one character */
            if (ms >= n) break;
            off = ms + 1;
            while (off < n && (s[off] & 0xC0) == 0x80) off++;
            continue;
        }
        if (ms > last && run_stage(t, k + 1, s + last, ms - last, 1, out, err, errlen)) return -1;
        if (st->behavior == B_ISOLATED && run_stage(t, k + 1, s + ms, me - ms, 1, out, err, errlen)) return -1;
        last = off = me;
    }
    if (n > last && run_stage(t, k + 1, s + last, n - last, 1, out, err, errlen)) return -1;
    return 0;
}

static int run_stage(ppdl_tokenizer *t, int k, const unsigned char *s, size_t n, int prefix_ok, ppdl_ids *out,
                     char *err, size_t errlen)
{
    if (k == t->n_st) {
        bpe_word(t, s, n, out);
        return 0;
    }
    const stage *st = &t->st[k];
    if (st->kind == ST_BYTELEVEL && st->prefix_space && prefix_ok && s[0] != ' ') {
        unsigned char *copy = ppdl_xmalloc(n + 1);
        copy[0] = ' ';
        memcpy(copy + 1, s, n);
        int rc = st->re ? split_regex(t, k, copy, n + 1, out, err, errlen)
                        : run_stage(t, k + 1, copy, n + 1, 1, out, err, errlen);
        free(copy);
        return rc;
    }
    if (!st->re) return run_stage(t, k + 1, s, n, 1, out, err, errlen);
    return split_regex(t, k, s, n, out, err, errlen);
}

/* the first added token at or after pos: its start (n if none) and index */
static size_t find_added(const ppdl_tokenizer *t, const unsigned char *s, size_t n, size_t pos, int *which)
{
    if (!t->n_added) return n;
    while (pos < n) {
        if (t->added_one_first >= 0) {
            const unsigned char *p = memchr(s + pos, t->added_one_first, n - pos);
            if (!p) return n;
            pos = (size_t)(p - s);
        } else {
            while (pos < n && !t->added_first[s[pos]]) pos++;
            if (pos >= n) return n;
        }
        size_t best = 0;
        for (int i = 0; i < t->n_added; i++) {
            const added *a = &t->added[i];
            if (a->len > best && a->len <= n - pos && !memcmp(s + pos, a->content, a->len)) {
                best = a->len;
                *which = i;
            }
        }
        if (best) return pos;
        pos++;
    }
    return n;
}

int ppdl_tokenizer_encode(ppdl_tokenizer *t, const char *text, size_t len, int flags, ppdl_ids *out, char *err,
                          size_t errlen)
{
    if (!t->json)
        return ppdl_errf(err, errlen, "%s: llm.c's tokenizer file has no merges: it decodes only (encode with the "
                         "model's tokenizer.json)", t->path);
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = utf8_valid(s, len);
    if (bad < len) return ppdl_errf(err, errlen, "byte %zu (0x%02x) is not UTF-8", bad, s[bad]);
    size_t pos = 0;
    int first = 1;
    while (pos < len) {
        int which = -1;
        size_t a = find_added(t, s, len, pos, &which);
        if (a > pos &&
            run_stage(t, 0, s + pos, a - pos, !(first && (flags & PPDL_TOKENIZE_CONTINUES)), out, err, errlen))
            return -1;
        if (a < len) {
            ids_push(out, t->added[which].id);
            pos = a + t->added[which].len;
        } else {
            pos = len;
        }
        first = 0;
    }
    return 0;
}

size_t ppdl_tokenizer_cut(const ppdl_tokenizer *t, const char *buf, size_t n)
{
    for (size_t i = n; i >= 2; i--) {
        const char *p = memrchr(buf, '\n', i - 1);
        if (!p) return 0;
        size_t cut = (size_t)(p - buf) + 1;
        unsigned char c = (unsigned char)buf[cut], b = cut >= 2 ? (unsigned char)buf[cut - 2] : 0;
        i = cut; /* the loop's i-- then searches before this newline */
        /* a lone newline between two printable characters: a run of whitespace before the
         * cut would end there, where \s+(?!\S) takes it whole, but not in the whole text */
        if (c < 0x21 || c > 0x7E || b < 0x21 || b > 0x7E) continue;
        int inside = 0;
        for (int k = 0; k < t->n_added && !inside; k++) {
            size_t L = t->added[k].len, from = cut >= L ? cut - L + 1 : 0;
            for (size_t q = from; q < cut && q + L <= n && !inside; q++)
                inside = !memcmp(buf + q, t->added[k].content, L);
        }
        if (!inside) return cut;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* decoding */

void ppdl_detok_init(ppdl_detok *d, const ppdl_tokenizer *t)
{
    memset(d, 0, sizeof *d);
    d->t = t;
}

static void put_fffd(FILE *out) { fputs("\xEF\xBF\xBD", out); }

static void detok_byte(ppdl_detok *d, unsigned c, FILE *out)
{
    if (d->npend) {
        unsigned lo = 0x80, hi = 0xBF, lead = d->pend[0];
        if (d->npend == 1) {
            if (lead == 0xE0) lo = 0xA0;
            if (lead == 0xED) hi = 0x9F;
            if (lead == 0xF0) lo = 0x90;
            if (lead == 0xF4) hi = 0x8F;
        }
        if (c >= lo && c <= hi) {
            d->pend[d->npend++] = (unsigned char)c;
            if (d->npend == d->need) {
                fwrite(d->pend, 1, (size_t)d->npend, out);
                d->npend = 0;
            }
            return;
        }
        put_fffd(out); /* an unfinished character, then c afresh */
        d->npend = 0;
    }
    if (c < 0x80) putc((int)c, out);
    else if (c >= 0xC2 && c <= 0xF4) {
        d->pend[0] = (unsigned char)c;
        d->npend = 1;
        d->need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    } else put_fffd(out);
}

void ppdl_detok_put(ppdl_detok *d, int32_t id, FILE *out)
{
    size_t n;
    const unsigned char *b = ppdl_tokenizer_bytes(d->t, id, &n);
    for (size_t i = 0; i < n; i++) detok_byte(d, b[i], out);
}

void ppdl_detok_end(ppdl_detok *d, FILE *out)
{
    if (d->npend) put_fffd(out);
    d->npend = 0;
}
