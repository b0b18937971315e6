"""tokenizer_oracle.py — Hugging Face `tokenizers` as the oracle of io/tokenizer.c
(tests/unit/tokenizer.sh, perf/bench-tokenizer).

  make DIR      train a byte-level BPE (vocab 1000, special token <|endoftext|>) on the
                licenses in /usr/share/common-licenses plus generated Unicode text; write
                DIR/tokenizer.json, DIR/heldout.txt (> 1 MB: accents, CJK, Devanagari,
                emoji, whitespace runs, digits, contractions, the special token, a
                different seed from the training text), DIR/heldout.ids, two documents
                DIR/doc1.txt, DIR/doc2.txt and DIR/docs.ids (doc1, <|endoftext|>, doc2),
                and the negative controls DIR/bad_order.json (merges 0-39 reversed) and
                DIR/ascii_regex.json (GPT-2's pattern with ASCII letters and digits)
  encode TOK IN OUT   ids of IN's text (add_special_tokens=False) as uint32
  time TOK IN         seconds to encode IN once on one thread, and the token count
ids files: little-endian uint32, as tok_tool writes them."""
import glob
import json
import os
import random
import sys

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

WORDS_UNI = ["café", "naïve", "Ångström", "Zürich", "façade", "résumé", "crème brûlée", "São Paulo",
             "日本語の文章です", "中文字符测试", "한국어 텍스트", "Ελληνικά", "Русский язык", "العربية",
             "हिन्दी भाषा", "עברית", "ไทย", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "🎉🎉", "∑∫√", "—", "…", "«guillemets»",
             "\u00a0nbsp", "ideo\u3000space", "x²", "½", "Ⅻ", "٣٤٥", "１２３",
             # edges of \s, \p{L}, \p{N} where regex engines could differ: the Mongolian vowel
             # separator, NEL, line/paragraph separators, BOM, zero-width space, a lone
             # combining mark, a variation selector, circled digits, Kawi and CJK extension
             # H letters (Unicode 15)
             "a\u180eb", "\u0085", "x\u2028y\u2029", "\ufeffbom", "zw\u200bsp", "\u0301", "\u2764\ufe0f", "①②",
             "\U00011f04\U00011f05", "\U00031350"]
CONTRACTIONS = ["don't", "it's", "we'll", "I'm", "they've", "she'd", "you're", "IT'S", "'s", "o'clock"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\n  ", "\r\n", "    \n\n   "]


def license_words():
    words = []
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                words += f.read().split()
    return words or ["the", "license", "software", "copyright"]


def gen_text(rng, words, n_bytes, special_every=0):
    out, size = [], 0
    while size < n_bytes:
        r = rng.random()
        if r < 0.62:
            w = rng.choice(words)
        elif r < 0.77:
            w = rng.choice(WORDS_UNI)
        elif r < 0.84:
            w = str(rng.randrange(0, 10 ** rng.randrange(1, 8)))
            if rng.random() < 0.2:
                w += "." + str(rng.randrange(1000))
        elif r < 0.90:
            w = rng.choice(CONTRACTIONS)
        else:
            w = rng.choice(["(", ")", ",", ".", "!?", "--", "\"", "#", "$5", "@user", "a+b=c", "[1]"])
        sep = rng.choice(SPACES)
        if special_every and rng.random() < 1.0 / special_every:
            sep += "<|endoftext|>" + rng.choice(["", " ", "\n"])
        out.append(w + sep)
        size += len(w.encode()) + len(sep.encode())
    return "".join(out)


def write_ids(path, ids):
    np.asarray(ids, dtype="<u4").tofile(path)


def encode(tok, text):
    tok.no_truncation()   # a tokenizer.json may carry one (GPT-2's hub file: 50); ppdl ignores it
    tok.no_padding()
    return tok.encode(text, add_special_tokens=False).ids


def make(d):
    words = license_words()
    train = gen_text(random.Random(1), words, 400_000, special_every=300)
    lic = []
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                lic.append(f.read())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lic + [train], trainer=trainer)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    eot = tok.token_to_id("<|endoftext|>")
    held = gen_text(random.Random(2), words, 1_100_000, special_every=200)
    with open(os.path.join(d, "heldout.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(held)
    write_ids(os.path.join(d, "heldout.ids"), encode(tok, held))
    doc1 = gen_text(random.Random(3), words, 3000)
    doc2 = "Zweites Dokument: größer, 😀 emoji, 日本語.\n" + gen_text(random.Random(4), words, 2000)
    for name, text in (("doc1.txt", doc1), ("doc2.txt", doc2)):
        with open(os.path.join(d, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    write_ids(os.path.join(d, "docs.ids"), encode(tok, doc1) + [eot] + encode(tok, doc2))
    # negative controls
    js = json.load(open(path, encoding="utf-8"))
    bad = json.loads(json.dumps(js))
    bad["model"]["merges"][:40] = bad["model"]["merges"][:40][::-1]
    json.dump(bad, open(os.path.join(d, "bad_order.json"), "w", encoding="utf-8"), ensure_ascii=False)
    asc = json.loads(json.dumps(js))
    pat = r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
    asc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    json.dump(asc, open(os.path.join(d, "ascii_regex.json"), "w", encoding="utf-8"), ensure_ascii=False)
    # the real pattern as a Split then ByteLevel without its own: the same ids as tokenizer.json
    seq = json.loads(json.dumps(asc))
    seq["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = (
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
    json.dump(seq, open(os.path.join(d, "split_seq.json"), "w", encoding="utf-8"), ensure_ascii=False)
    # merges as [a, b] pairs (tokenizers >= 0.20 writes them so)
    pairs = json.loads(json.dumps(js))
    pairs["model"]["merges"] = [m.split(" ") for m in pairs["model"]["merges"]]
    json.dump(pairs, open(os.path.join(d, "pairs.json"), "w", encoding="utf-8"), ensure_ascii=False)
    # the single-byte tokens of 日 (e6 97 a5): one character split across three tokens
    alpha = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    cp = {b: b for b in alpha}
    cp.update({b: 256 + i for i, b in enumerate(b for b in range(256) if b not in cp)})
    with open(os.path.join(d, "split_char.ids"), "w") as f:
        f.write(",".join(str(tok.token_to_id(chr(cp[b]))) for b in "日".encode()))
    # other pre-tokenizers, each with its ids of the first 50 kB of the held-out text
    # (variants.txt lists them): ByteLevel's add_prefix_space; Llama 3's pattern in a
    # Split (with ignore_merges); add_prefix_space after a Split (a space per word); a
    # String pattern with behavior Removed; merges of whitespace runs
    l3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
    def split_bl(pattern, behavior, prefix, use_regex):
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": False},
            {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": use_regex}]}
    def add_ws_merges(v):
        # merges of whitespace runs (GPT-2 has ĊĊ): a piece cut just after "\n\n" or " \n"
        # would end in a run that \s+(?!\S) takes whole, where the whole text splits it
        m = v["model"]
        for a, b in (("\u010a", "\u010a"), ("\u0120", "\u010a"), ("\u010d", "\u010a")):
            if a + b not in m["vocab"]:
                m["vocab"][a + b] = max(m["vocab"].values()) + 1
                m["merges"].append(a + " " + b)
    variants = {
        "prefix": lambda v: v["pre_tokenizer"].update(add_prefix_space=True),
        "llama3": lambda v: (v.update(pre_tokenizer=split_bl({"Regex": l3}, "Isolated", False, False)),
                             v["model"].update(ignore_merges=True)),
        "seq_prefix": lambda v: v.update(pre_tokenizer=split_bl({"Regex": l3}, "Isolated", True, False)),
        "removed": lambda v: v.update(pre_tokenizer=split_bl({"String": " "}, "Removed", False, True)),
        "ws_merges": add_ws_merges,
    }
    piece = held[:50_000]
    with open(os.path.join(d, "slice.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(piece)
    for name, change in variants.items():
        v = json.loads(json.dumps(js))
        change(v)
        json.dump(v, open(os.path.join(d, name + ".json"), "w", encoding="utf-8"), ensure_ascii=False)
        write_ids(os.path.join(d, name + ".ids"), encode(Tokenizer.from_str(json.dumps(v)), piece))
    with open(os.path.join(d, "variants.txt"), "w") as f:
        f.write(" ".join(variants) + "\n")
    # the same vocabulary as llm.c's tokenizer file (llm.c's tokenizer.h: 256 uint32, magic
    # 20240328, version 2, vocab_size, eot; then per token a length byte and its bytes),
    # and one of version 3
    import struct
    inv = {v: k for k, v in cp.items()}
    vocab = tok.get_vocab()
    by_id = {i: s for s, i in vocab.items()}
    for name, version in (("llmc_tokenizer.bin", 2), ("llmc_v3.bin", 3)):
        with open(os.path.join(d, name), "wb") as f:
            head = [20240328, version, len(by_id), eot] + [0] * 252
            f.write(struct.pack("<256I", *head))
            for i in range(len(by_id)):
                s = by_id[i]
                b = s.encode() if s == "<|endoftext|>" else bytes(inv[ord(c)] for c in s)
                f.write(struct.pack("<B", len(b)) + b)
    # refusals (tests/unit/tokenizer.sh checks each message)
    def variant(name, change):
        v = json.loads(json.dumps(js))
        change(v)
        json.dump(v, open(os.path.join(d, name), "w", encoding="utf-8"), ensure_ascii=False)
    variant("wordpiece.json", lambda v: v["model"].update(type="WordPiece"))
    variant("unigram.json", lambda v: v["model"].update(type="Unigram"))
    variant("unknown_merge.json", lambda v: v["model"]["merges"].insert(5, "zqĠ xyzzy"))
    variant("metaspace.json", lambda v: v.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}))
    variant("nfc.json", lambda v: v.update(normalizer={"type": "NFC"}))
    with open(os.path.join(d, "notjson.json"), "w") as f:
        f.write("vocab: [1, 2\n")
    print("made %s: vocab %d, heldout %d bytes" % (d, tok.get_vocab_size(), len(held.encode())))


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "encode":
        tok = Tokenizer.from_file(sys.argv[2])
        with open(sys.argv[3], encoding="utf-8", newline="") as f:
            write_ids(sys.argv[4], encode(tok, f.read()))
    elif cmd == "time":
        import time
        tok = Tokenizer.from_file(sys.argv[2])
        with open(sys.argv[3], encoding="utf-8", newline="") as f:
            text = f.read()
        t0 = time.perf_counter()
        ids = encode(tok, text)
        print("%.6f %d" % (time.perf_counter() - t0, len(ids)))
    else:
        sys.exit("usage: tokenizer_oracle.py make DIR | encode TOK IN OUT | time TOK IN")


if __name__ == "__main__":
    main()
