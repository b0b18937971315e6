#!/usr/bin/env python3
"""hf_convert.py — transformers' side of tests/oracle/hf_convert.sh (ppdl-convert).

  make DIR [--dtype f32|f16|bf16] [--untied] [--seed S] [--layers L]
        a random GPT2LMHeadModel (vocab 97, n_positions 16, n_embd 32, 2 heads), its
        weights spread (N(0, 0.2) noise) so that attention is far from uniform,
        written with save_pretrained (config.json + model.safetensors)
  tokens OUT.i32 B T V [--seed S]       B x T random tokens (int32)
  data OUT.h5 TOKENS.i32 T V              a ppdl data.h5 whose rows are those tokens, each
                                         followed by (the next row's first) token
  logits DIR TOKENS.i32 PPDL.f32 [--tol X]
        GPT2LMHeadModel's logits on the tokens against ppdl's (gpt_logits): the largest
        absolute difference, at most --tol (default 1e-5)
  loss DIR DATA.h5 B REPORT.json [--rtol X] [--step K]
        the mean cross-entropy of GPT2LMHeadModel (labels = the data's rows shifted)
        on the first B rows against the evaluation (val_loss) after step K (default 0:
        before the first step) of ppdl's report
  load DIR  from_pretrained with transformers' logging captured: fails on any message
        about missing, unexpected or newly initialised weights
  same A B [--as-f32]  every tensor of A/model.safetensors equals B's, byte for byte
        (--as-f32: A's tensors converted to float32 first), and the same names
  llmc DIR OUT.bin [--bf16]   the llm.c checkpoint of the model (llm.c's own layout,
        written here independently of ppdl: Conv1D weights transposed to [out, in], wte
        padded with zero rows to a multiple of 128)
  bad DIR KIND OUT   a copy of DIR whose model.safetensors (or config.json) is broken
  shard DIR OUT SIZE   DIR's model saved again by save_pretrained(max_shard_size=SIZE):
        model-0000K-of-0000N.safetensors and model.safetensors.index.json
  badshard DIR KIND OUT   a copy of the sharded DIR, broken: missing-file (a shard the
        weight_map names is gone), twice (a tensor in two shards), slash (a file name
        with a directory: ../), wrong-file (the map puts a tensor in another shard),
        unlisted (a tensor of a shard left out of the map)
  tokenizer OUT.json OUT.bin [--vocab N]   a byte-level BPE trained by `tokenizers`
        (vocabulary N, default 290), <|endoftext|> added after training (id N: neither 0
        nor GPT-2's 50256), and llm.c's tokenizer file of the same vocabulary (version 2)
  eot DIR ID|none    config.json's bos_token_id and eos_token_id are ID (none: absent)
  autotok DIR TOKENIZER.json   AutoTokenizer.from_pretrained(DIR) gives TOKENIZER.json's
        ids of a text (tokenizers' own), and from_pretrained's generation config ends
        texts at its end-of-text id
  serve      the commands above, one a line on stdin, in one process (see serve())
"""
import io
import json
import logging
import os
import shutil
import struct
import sys

import numpy as np
import torch


def arg(argv, name, default=None, conv=str):
    if name in argv:
        i = argv.index(name)
        v = argv[i + 1]
        del argv[i:i + 2]
        return conv(v)
    return default


def flag(argv, name):
    if name in argv:
        argv.remove(name)
        return True
    return False


def make(argv):
    from transformers import GPT2Config, GPT2LMHeadModel
    dtype = arg(argv, "--dtype", "f32")
    seed = arg(argv, "--seed", 1, int)
    layers = arg(argv, "--layers", 2, int)
    untied = flag(argv, "--untied")
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=97, n_positions=16, n_embd=32, n_layer=layers, n_head=2,
                     tie_word_embeddings=not untied, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    m = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.2 * torch.randn_like(p))
    m = m.to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype])
    m.save_pretrained(argv[0], safe_serialization=True)
    return 0


def tokens(argv):
    seed = arg(argv, "--seed", 2, int)
    out, B, T, V = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    rng = np.random.default_rng(seed)
    rng.integers(0, V, size=(B, T), dtype=np.int32).tofile(out)
    return 0


def data(argv):
    import h5py
    out, tok, T, V = argv[0], argv[1], int(argv[2]), int(argv[3])
    x = np.fromfile(tok, dtype=np.int32).reshape(-1, T)
    # row i: its T tokens and one more (the first of the next row) as the last target
    nxt = np.roll(x[:, 0], -1)[:, None]
    with h5py.File(out, "w") as f:
        f.create_dataset("tokens", data=np.concatenate([x, nxt], axis=1).astype(np.int32))
        f.attrs["vocab_size"] = np.int32(V)
    return 0


def load_model(d):
    from transformers import GPT2LMHeadModel
    m = GPT2LMHeadModel.from_pretrained(d, torch_dtype=torch.float32)
    m.eval()
    return m


def logits(argv):
    tol = arg(argv, "--tol", 1e-5, float)
    d, tok, ppdl = argv
    m = load_model(d)
    T = m.config.n_positions
    V = m.config.vocab_size
    x = torch.from_numpy(np.fromfile(tok, dtype=np.int32).reshape(-1, T).astype(np.int64))
    with torch.no_grad():
        ref = m(x).logits.double().numpy()
    got = np.fromfile(ppdl, dtype=np.float32).reshape(x.shape[0], T, V).astype(np.float64)
    diff = np.abs(ref - got).max()
    print("max |logit difference| %.3g over %d logits (largest |logit| %.3g), tolerance %g"
          % (diff, ref.size, np.abs(ref).max(), tol))
    return 0 if diff <= tol else 1


def loss(argv):
    import h5py
    rtol = arg(argv, "--rtol", 1e-6, float)
    step = arg(argv, "--step", 0, int)
    d, data_path, B, report = argv[0], argv[1], int(argv[2]), argv[3]
    m = load_model(d)
    with h5py.File(data_path, "r") as f:
        rows = torch.from_numpy(f["tokens"][:B].astype(np.int64))
    with torch.no_grad():
        lg = m(rows[:, :-1]).logits.double()
        ref = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), rows[:, 1:].reshape(-1)).item()
    ev = [e for e in json.load(open(report))["evals"] if e["step"] == step][0]["val_loss"]
    rel = abs(ev - ref) / abs(ref)
    print("loss: transformers %.9g, ppdl %.9g, relative difference %.3g, tolerance %g" % (ref, ev, rel, rtol))
    return 0 if rel <= rtol else 1


def load(argv):
    import transformers
    buf = io.StringIO()
    h = logging.StreamHandler(buf)
    log = transformers.utils.logging.get_logger("transformers")
    transformers.utils.logging.set_verbosity_info()
    log.addHandler(h)
    import warnings
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        load_model(argv[0])
    log.removeHandler(h)
    text = buf.getvalue() + "".join(str(w.message) for w in ws)
    bad = [l for l in text.splitlines()
           if any(k in l for k in ("missing", "Missing", "unexpected", "Unexpected", "newly initialized",
                                   "not used", "not initialized"))]
    for l in bad:
        print("transformers said:", l)
    # the positive control: the capture sees a message where there is one
    if "--expect-warning" in argv:
        return 0 if bad else 1
    return 1 if bad else 0


def read_st(path):
    from safetensors.numpy import load_file
    return load_file(path)


def same(argv):
    as_f32 = flag(argv, "--as-f32")
    a, b = argv
    if as_f32:
        from safetensors.torch import load_file
        ta = {k: v.float().numpy() for k, v in load_file(os.path.join(a, "model.safetensors")).items()}
    else:
        ta = read_st(os.path.join(a, "model.safetensors"))
    tb = read_st(os.path.join(b, "model.safetensors"))
    ignore = lambda k: k.endswith(".attn.bias") or k.endswith(".attn.masked_bias")
    ka = {k for k in ta if not ignore(k)}
    if ka != set(tb):
        print("names differ: only in A %s, only in B %s" % (sorted(ka - set(tb)), sorted(set(tb) - ka)))
        return 1
    bad = [k for k in sorted(ka) if ta[k].dtype != tb[k].dtype or ta[k].shape != tb[k].shape
           or ta[k].tobytes() != tb[k].tobytes()]
    print("%d tensors, %d differ%s" % (len(ka), len(bad), (": " + ", ".join(bad[:3])) if bad else ""))
    return 1 if bad else 0


def llmc(argv):
    bf16 = flag(argv, "--bf16")
    d, out = argv
    from safetensors.torch import load_file
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v.float()
          for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    cfg = json.load(open(os.path.join(d, "config.json")))
    V, T, C, L, H = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
    Vp = (V + 127) // 128 * 128
    hdr = np.zeros(256, dtype=np.int32)
    hdr[:8] = [20240326, 5 if bf16 else 3, T, V, L, H, C, Vp]
    wte = torch.zeros(Vp, C)
    wte[:V] = sd["wte.weight"]
    parts = [wte, sd["wpe.weight"]]
    per = [("ln_1.weight", 0), ("ln_1.bias", 0), ("attn.c_attn.weight", 1), ("attn.c_attn.bias", 0),
           ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0), ("ln_2.weight", 0), ("ln_2.bias", 0),
           ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0), ("mlp.c_proj.weight", 1), ("mlp.c_proj.bias", 0)]
    for name, tr in per:
        for i in range(L):
            t = sd["h.%d.%s" % (i, name)]
            parts.append(t.t().contiguous() if tr else t)
    parts += [sd["ln_f.weight"], sd["ln_f.bias"]]
    flat = torch.cat([p.reshape(-1) for p in parts])
    with open(out, "wb") as f:
        f.write(hdr.tobytes())
        if bf16:
            f.write(flat.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
        else:
            f.write(flat.numpy().astype("<f4").tobytes())
    return 0


def st_parts(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def st_write(path, header, body, pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def bad(argv):
    d, kind, out = argv
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(d, out)
    st = os.path.join(out, "model.safetensors")
    h, body = st_parts(st)
    names = [k for k in h if k != "__metadata__"]
    first = min(names, key=lambda k: h[k]["data_offsets"][0])
    last = max(names, key=lambda k: h[k]["data_offsets"][1])
    if kind == "header-long":
        raw = open(st, "rb").read()
        open(st, "wb").write(struct.pack("<Q", len(raw) * 2) + raw[8:])
        return 0
    if kind == "offsets-range":
        # ln_f.bias claims bytes up to 4 past the data's end
        h["transformer.ln_f.bias"]["data_offsets"][1] = len(body) + 4
    elif kind == "overlap":
        # ln_1.bias claims ln_1.weight's bytes (the same size): two tensors on one range
        h["transformer.h.0.ln_1.bias"]["data_offsets"] = list(h["transformer.h.0.ln_1.weight"]["data_offsets"])
    elif kind == "shape":
        h["transformer.h.0.attn.c_attn.weight"]["shape"][1] -= 1
    elif kind == "dtype":
        h["transformer.ln_f.bias"]["dtype"] = "F64"
    elif kind == "missing":
        del h["transformer.h.1.mlp.c_proj.bias"]
        # keep the data covered: the missing tensor's bytes now belong to nobody; move the
        # ones after it back
        return st_drop(st, "transformer.h.1.mlp.c_proj.bias")
    elif kind == "extra":
        e = h[last]["data_offsets"][1]
        h["transformer.h.0.attn.extra"] = {"dtype": "F32", "shape": [1], "data_offsets": [e, e + 4]}
        body = body + b"\0\0\0\0"
    elif kind == "noprefix":
        # the names without "transformer." (GPT2Model's own state_dict keys)
        h = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in h.items()}
    elif kind == "buffers":
        # the attention buffers older transformers saved: the causal mask and a scalar
        T = json.load(open(os.path.join(out, "config.json")))["n_positions"]
        mask = np.tril(np.ones((T, T), dtype="<f4")).reshape(1, 1, T, T)
        h, body = st_add(h, body, "transformer.h.0.attn.bias", mask)
        h, body = st_add(h, body, "transformer.h.1.attn.masked_bias", np.array(-1e4, dtype="<f4"))
    elif kind in ("lm-same", "lm-differs"):
        # a tied model's file with lm_head.weight too: the same as wte, or not
        b0, e0 = h["transformer.wte.weight"]["data_offsets"]
        wte = np.frombuffer(body[b0:e0], dtype="<f4").reshape(h["transformer.wte.weight"]["shape"])
        h, body = st_add(h, body, "lm_head.weight", wte + (1 if kind == "lm-differs" else 0))
    elif kind == "drop-lm":
        return st_drop(st, "lm_head.weight")
    elif kind == "relu":
        c = json.load(open(os.path.join(out, "config.json")))
        c["activation_function"] = "relu"
        json.dump(c, open(os.path.join(out, "config.json"), "w"))
        return 0
    elif kind == "transposed":
        # the negative control of the Conv1D mapping: every Conv1D weight square-ish can't be
        # transposed in place, so store c_proj (C x C) transposed
        raw_name = "transformer.h.0.attn.c_proj.weight"
        b0, e0 = h[raw_name]["data_offsets"]
        n = h[raw_name]["shape"]
        a = np.frombuffer(body[b0:e0], dtype="<f4").reshape(n).T.copy()
        body = body[:b0] + a.tobytes() + body[e0:]
    else:
        raise SystemExit("unknown kind " + kind)
    st_write(st, h, body)
    return 0


def st_add(h, body, name, a):
    e = len(body)
    h[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [e, e + a.nbytes]}
    return h, body + a.astype("<f4").tobytes()


def st_drop(st, name):
    h, body = st_parts(st)
    b0, e0 = h[name]["data_offsets"]
    del h[name]
    for k, v in h.items():
        if k != "__metadata__" and v["data_offsets"][0] >= e0:
            v["data_offsets"] = [v["data_offsets"][0] - (e0 - b0), v["data_offsets"][1] - (e0 - b0)]
    st_write(st, h, body[:b0] + body[e0:])
    return 0


def shard(argv):
    d, out, size = argv
    shutil.rmtree(out, ignore_errors=True)
    load_model(d).save_pretrained(out, safe_serialization=True, max_shard_size=size)
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    print("%s: %s" % (out, " ".join(files)))
    return 0 if len(files) >= 3 and "model.safetensors.index.json" in os.listdir(out) else 1


def badshard(argv):
    d, kind, out = argv
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(d, out)
    index = os.path.join(out, "model.safetensors.index.json")
    js = json.load(open(index))
    wm = js["weight_map"]
    files = sorted(set(wm.values()))
    first = sorted(k for k in wm if wm[k] == files[0])[0]
    if kind in ("slash", "wrong-file", "unlisted"):
        if kind == "slash":
            wm[first] = "../" + os.path.basename(out) + "/" + files[0]
        elif kind == "wrong-file":
            wm[first] = files[-1]
        else:
            del wm[first]
        json.dump(js, open(index, "w"), indent=2)
        print("%s: %s" % (kind, first))
    elif kind == "missing-file":
        os.remove(os.path.join(out, files[-1]))
    elif kind == "twice":
        # the first shard's first tensor copied into the last shard too
        h0, b0 = st_parts(os.path.join(out, files[0]))
        name = min((k for k in h0 if k != "__metadata__"), key=lambda k: h0[k]["data_offsets"][0])
        s, e = h0[name]["data_offsets"]
        last = os.path.join(out, files[-1])
        h, body = st_parts(last)
        a = np.frombuffer(b0[s:e], dtype="<f4").reshape(h0[name]["shape"])
        h, body = st_add(h, body, name, a)
        st_write(last, h, body)
        print("%s is in %s and %s" % (name, files[0], files[-1]))
    else:
        raise SystemExit("unknown kind " + kind)
    return 0


TEXT = "ppdl trains GPT-2: 124M parameters,\n\n  pipelines and <|endoftext|> text -- caf\u00e9 \u65e5\u672c 42!"


def tokenizer(argv):
    n = arg(argv, "--vocab", 290, int)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = ["pipeline", "stage", "rank", "gradient", "train", "token", "model", "batch"]
    rng = np.random.default_rng(7)
    text = [" ".join(rng.choice(words, 12)) + "\n" for _ in range(400)]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=n, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens(["<|endoftext|>"])
    eot = tok.token_to_id("<|endoftext|>")
    if eot != n:
        print("<|endoftext|> is %d, not %d" % (eot, n))
        return 1
    tok.save(argv[0])
    # llm.c's tokenizer file: 256 uint32 (magic 20240328, version 2, vocab_size, eot), then
    # per token a length byte and its bytes (byte-level tokens mapped back to bytes)
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode
    inv = {c: b for b, c in bytes_to_unicode().items()}
    by_id = {i: t for t, i in tok.get_vocab().items()}
    with open(argv[1], "wb") as f:
        f.write(struct.pack("<256I", *([20240328, 2, len(by_id), eot] + [0] * 252)))
        for i in range(len(by_id)):
            b = by_id[i].encode() if i == eot else bytes(inv[c] for c in by_id[i])
            f.write(struct.pack("<B", len(b)) + b)
    return 0


def eot(argv):
    d, want = argv
    cfg = json.load(open(os.path.join(d, "config.json")))
    got = [cfg.get("bos_token_id"), cfg.get("eos_token_id")]
    print("%s/config.json: bos_token_id %s, eos_token_id %s (expected %s)" % (d, got[0], got[1], want))
    return 0 if got == [None if want == "none" else int(want)] * 2 else 1


def autotok(argv):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    d, ref = argv
    want = Tokenizer.from_file(ref).encode(TEXT, add_special_tokens=False).ids
    at = AutoTokenizer.from_pretrained(d)
    got = at(TEXT, add_special_tokens=False).input_ids
    gen = load_model(d).generation_config
    eot = Tokenizer.from_file(ref).token_to_id("<|endoftext|>")
    print("%s: %s, %d ids of the text (tokenizers: %d), equal: %s; generate ends at %s (<|endoftext|> is %s)"
          % (d, type(at).__name__, len(got), len(want), got == want, gen.eos_token_id, eot))
    return 0 if got == want and at.decode(got) == TEXT and gen.eos_token_id == eot else 1


CMDS = {"make": make, "tokens": tokens, "data": data, "logits": logits, "loss": loss, "load": load,
        "same": same, "llmc": llmc, "bad": bad, "shard": shard, "badshard": badshard, "tokenizer": tokenizer, "eot": eot, "autotok": autotok}


def serve(argv):
    """serve: one command a line on stdin ("DESCRIPTION | COMMAND ARGS"), run as it
    arrives, all in this one process (transformers takes seconds to import, and the shell
    test needs it twice: before its conversions and after); prints per line
    "STATUS<TAB>DESCRIPTION" and then the command's output as "# " lines, flushed, for the
    shell test to wait for and turn into TAP"""
    import contextlib
    import shlex
    import transformers  # noqa: F401 (imported now, while the shell waits anyway)
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        desc, cmd = line.rsplit("|", 1)
        args = shlex.split(cmd)
        expect_fail = flag(args, "--expect-fail")   # a negative control: status 1 is the pass
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = CMDS[args[0]](args[1:])
        except Exception as e:  # a crash is a failure of that line, not of the batch
            rc = 2
            out.write("%s: %s\n" % (type(e).__name__, e))
        if expect_fail:
            rc = 0 if rc == 1 else 1
        print("%d\t%s" % (rc, desc.strip()))
        for l in out.getvalue().splitlines():
            print("# " + l)
        sys.stdout.flush()
    return 0


def main(argv):
    if argv[0] == "serve":
        return serve(argv[1:])
    return CMDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
