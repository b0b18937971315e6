#!/usr/bin/python3
"""torch_step.py -- PyTorch as an outside oracle for whole ppdl training steps.

Rebuilds the model of a ppdl model.h5 in PyTorch (functional code, parameters named as
in the file), trains it for K steps on the same data in the same order with
torch.optim.AdamW, and compares with what ppdl did: the loss of every step (from
ppdl's --report) and every weight after the last step (from ppdl's --save).
Prints TAP lines; exits non-zero on any mismatch.

usage: torch_step.py MODEL.h5 DATA.h5 REPORT.json TRAINED.h5 --batch-size B --steps K
                     [--lr X] [--weight-decay X] [--eps X] [--beta1 X] [--beta2 X]

Scale: with AdamW's eps small against |grad| (the default 1e-8), an update is about
lr * sign(grad) whatever the gradient's size, so a run whose every gradient is off by a
constant factor (replicas averaged instead of summed, a wrong 1/B) moves the weights
by ~eps / |grad| relatively: invisible. With --eps 1 (and ppdl run with the same) an
update is lr * m / (sqrt(v) + 1), which for |grad| << 1 is lr * m, linear in the
gradient: then a factor 2 on any gradient moves its weights by ~lr * |grad| and the
weight check sees it (tests/oracle/torch_oracle.sh runs both, and a planted doubled
gradient, PPDL_TEST_GRAD_SCALE, must fail the scale-sensitive one).
"""
import argparse
import json
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F


def attr_str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load_model(path):
    """root attributes and, per layer, (kind, attributes, {name: Parameter}). A dataset
    that is the same HDF5 object as one read before (a hard link: a tied gpt's
    /layers/<head>/lm_head.weight is /layers/00000/wte) becomes the same Parameter, so
    the model is tied in PyTorch exactly as the file stores it."""
    seen = []  # (h5py dataset, Parameter)
    with h5py.File(path, "r") as f:
        root = {k: f.attrs[k] for k in f.attrs}
        layers = []
        for key in sorted(f["layers"].keys()):
            g = f["layers"][key]
            attrs = {k: g.attrs[k] for k in g.attrs}
            params = {}
            for n in g.keys():
                same = [p for d, p in seen if d == g[n]]
                if same:
                    params[n] = same[0]
                else:
                    params[n] = torch.nn.Parameter(torch.from_numpy(np.array(g[n], dtype=np.float32)))
                    seen.append((g[n], params[n]))
            layers.append((attr_str(attrs["kind"]), attrs, params))
    return root, layers


def unique(params):
    """each Parameter once, in first-seen order (a tied weight is one parameter: one
    AdamW state, counted once by clip_grad_norm_)"""
    out, ids = [], set()
    for p in params:
        if id(p) not in ids:
            ids.add(id(p))
            out.append(p)
    return out


def act(x, name):
    name = attr_str(name)
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x, approximate="tanh")
    return x


def no_tap(name, t):
    return t


def tapped_linear(tap, prefix, x, w, b):
    """F.linear whose weight, bias and output pass through tap as PREFIX.weight,
    PREFIX.bias and PREFIX"""
    return tap(prefix, F.linear(x, tap(prefix + ".weight", w), None if b is None else tap(prefix + ".bias", b)))


def gpt_block(x, p, n_heads, eps, tap=no_tap):
    B, T, C = x.shape
    hs = C // n_heads
    h = tap("ln1", F.layer_norm(x, (C,), p["ln1.weight"], p["ln1.bias"], eps))
    qkv = tapped_linear(tap, "attn.qkv", h, p["attn.qkv.weight"], p["attn.qkv.bias"])
    q, k, v = qkv.split(C, dim=2)
    q = q.view(B, T, n_heads, hs).transpose(1, 2)
    k = k.view(B, T, n_heads, hs).transpose(1, 2)
    v = v.view(B, T, n_heads, hs).transpose(1, 2)
    att = tap("scores", (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs)))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = tap("probs", att.masked_fill(~mask, float("-inf")).softmax(dim=-1))
    y = tap("attn", (att @ v).transpose(1, 2).contiguous().view(B, T, C))
    x = x + tapped_linear(tap, "attn.proj", y, p["attn.proj.weight"], p["attn.proj.bias"])
    h = tap("ln2", F.layer_norm(x, (C,), p["ln2.weight"], p["ln2.bias"], eps))
    h = tap("gelu", F.gelu(tapped_linear(tap, "mlp.fc", h, p["mlp.fc.weight"], p["mlp.fc.bias"]), approximate="tanh"))
    return x + tapped_linear(tap, "mlp.proj", h, p["mlp.proj.weight"], p["mlp.proj.bias"])


def forward(root, layers, x, tap=no_tap):
    """logits of the model for input x. tap(name, t) sees (and returns) the named
    intermediate tensors and weight uses on the way (torch_autocast.py measures the
    loss's sensitivity to them); the default passes them through untouched."""
    family = attr_str(root["family"])
    if x.is_floating_point():
        x = tap("data", x)
    for kind, a, p in layers:
        if kind == "embedding":
            T = x.shape[1]
            x = tap("embedding.out", p["wte"][x.long()] + p["wpe"][:T])
        elif kind == "block":
            x = tap("block.out", gpt_block(x, p, int(root["n_heads"]), float(root["ln_eps"]), tap))
        elif kind == "head":
            C = x.shape[-1]
            x = tap("ln_f", F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], float(root["ln_eps"])))
            x = tap("logits", F.linear(x, tap("lm_head.weight", p["lm_head.weight"])))
        elif kind == "linear":
            z = tapped_linear(tap, "linear", x.reshape(x.shape[0], -1), p["weight"], p["bias"])
            x = tap("linear.out." + attr_str(a["activation"]), act(z, a["activation"]))
        elif kind == "conv":
            w, b = tap("conv.weight", p["weight"]), tap("conv.bias", p["bias"])
            z = tap("conv", F.conv2d(x, w, b, stride=int(a["stride"]), padding=int(a["padding"])))
            x = tap("conv.out." + attr_str(a["activation"]), act(z, a["activation"]))
        elif kind == "maxpool":
            x = F.max_pool2d(x, int(a["kernel"]), int(a["stride"]))
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        else:
            raise SystemExit(f"torch_step.py: unknown layer kind {kind}")
    return x, family


def batch(data, step, B):
    with h5py.File(data, "r") as f:
        key = "tokens" if "tokens" in f else "features" if "features" in f else "images"
        n = f[key].shape[0]
        idx = [(step * B + i) % n for i in range(B)]
        x = np.stack([np.array(f[key][i]) for i in idx])
        if key == "tokens":
            return torch.from_numpy(x[:, :-1].astype(np.int64)), torch.from_numpy(x[:, 1:].astype(np.int64))
        y = np.array([f["labels"][i] for i in idx], dtype=np.int64)
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("report")
    ap.add_argument("trained")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-2)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--lr-schedule", default="constant", choices=["constant", "cosine", "linear", "wsd"])
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--min-lr-ratio", type=float, default=0.0)
    ap.add_argument("--decay-steps", type=int, default=0)
    ap.add_argument("--decay-fraction", type=float, default=0.2)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0)
    ap.add_argument("--decay-all", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)

    root, layers = load_model(args.model)
    params = unique([p for _, _, ps in layers for p in ps.values()])
    # weight decay on the tensors of 2 or more dimensions only (nanoGPT's groups), or
    # on all with --decay-all
    decay = [p for p in params if args.decay_all or p.dim() >= 2]
    no_decay = [p for p in params if not (args.decay_all or p.dim() >= 2)]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps, weight_decay=args.weight_decay)
    # the schedule as PyTorch's LambdaLR (a factor of the peak lr per step), with the
    # formulas of ppdl's docs/training.md written out again here
    D = args.decay_steps or args.steps
    W = args.warmup

    def factor(k):
        if W and k < W:
            return (k + 1) / W
        m = args.min_lr_ratio
        if args.lr_schedule == "constant":
            return 1.0
        if args.lr_schedule == "wsd":
            P = W + (1 - args.decay_fraction) * (D - W)
            if k < P:
                return 1.0
            r = min(max((k - P) / (D - P), 0.0), 1.0) if D > P else 1.0
            return m + (1 - m) * (1 - math.sqrt(r))
        r = min(max((k - W) / (D - W), 0.0), 1.0) if D > W else 1.0
        if args.lr_schedule == "cosine":
            return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * r))
        return 1 - (1 - m) * r

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    with open(args.report) as f:
        report = json.load(f)
    family = attr_str(root["family"])
    n_test = 0
    failed = 0

    def check(cond, msg):
        nonlocal n_test, failed
        n_test += 1
        failed += 0 if cond else 1
        print(f"{'ok' if cond else 'not ok'} {n_test} - {family}: {msg}", flush=True)

    if family == "gpt":
        # the tie as the file declares it and as PyTorch now holds it
        tied = int(root.get("tie_embeddings", 0)) == 1
        one = layers[-1][2]["lm_head.weight"] is layers[0][2]["wte"]
        check(tied == one, f"tie_embeddings = {int(tied)}: lm_head.weight {'is' if one else 'is not'} wte in PyTorch "
              f"({len(params)} parameter tensors)")

    # How far rounding alone may move each weight. With the default eps an update is
    # lr * m / (sqrt(v) + eps), about lr * sign(grad) where |grad| >> eps, and there a
    # gradient off by its rounding moves nothing; but where |grad| is near eps (a
    # gradient that cancels to ~1e-8) the update follows the gradient's rounding, which
    # differs between BLAS kernels and CPUs (one such weight of the gpt case read 5e-6
    # off on a machine where OpenBLAS runs its AVX-512 kernels; the same commit had
    # passed on the machine before). Per element and step:
    # lr * min(2, dg / (|grad| + eps)), dg = 1e-6 x the tensor's largest |grad| (the
    # fp32 rounding of the tensor's sums, with a wide margin). Where |grad| >> dg this
    # is far below 2e-6; a wrong sign still moves a weight by 2 lr.
    slack = {id(p): torch.zeros_like(p) for p in params}
    for step in range(args.steps):
        x, y = batch(args.data, step, args.batch_size)
        logits, _ = forward(root, layers, x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if args.clip_grad_norm > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, args.clip_grad_norm))
            theirs = report["steps"][step].get("grad_norm", float("nan"))
            # the norm sums float32 gradients in double on ppdl's side, in float32 here
            check(abs(theirs - norm) <= 1e-5 * norm, f"step {step} gradient norm ppdl {theirs:.7g} torch {norm:.7g}")
        lr_used = opt.param_groups[0]["lr"]
        with torch.no_grad():
            for p in params:
                if p.grad is not None and p.grad.numel():
                    dg = 1e-6 * float(p.grad.abs().max())
                    slack[id(p)] += lr_used * torch.clamp(dg / (p.grad.abs() + args.eps), max=2.0)
        if "lr" in report["steps"][step]:
            check(abs(report["steps"][step]["lr"] - lr_used) <= 1e-12 * lr_used,
                  f"step {step} learning rate ppdl {report['steps'][step]['lr']:.9g} torch {lr_used:.9g}")
        opt.step()
        sched.step()
        ours = report["steps"][step]["loss"]
        # fp32 forward in a different summation order: ~1e-6 relative is the noise
        # level; 2e-5 leaves room without hiding a real mistake (which moves the loss
        # by far more, e.g. a wrong scale or a missing bias)
        check(abs(ours - loss.item()) <= 2e-5 * abs(loss.item()) + 1e-6,
              f"step {step} loss ppdl {ours:.7f} torch {loss.item():.7f}")

    # every weight after the last update. With the default eps, AdamW's first steps
    # move each weight by about lr * sign(grad): the comparison sees every gradient's
    # sign, not its scale (see the top: --eps 1 makes it scale-sensitive). 2e-6
    # absolute is ~100 float32 ulps at |w| ~ 0.02-1 and far below lr (1e-3)
    worst = (0.0, "")
    loose = 0  # elements whose rounding slack is above the 2e-6 itself
    with h5py.File(args.trained, "r") as f:
        for (kind, _, ps), key in zip(layers, sorted(f["layers"].keys())):
            for name, p in ps.items():
                ours = np.array(f["layers"][key][name], dtype=np.float32)
                sl = slack[id(p)].numpy()
                loose += int(np.sum(sl > 2e-6))
                d = float(np.max(np.abs(ours - p.detach().numpy()) - sl)) if ours.size else 0.0
                if d > worst[0]:
                    worst = (d, f"layers/{key}/{name}")
    check(worst[0] <= 2e-6, f"all weights after {args.steps} AdamW steps within 2e-6 plus their rounding slack "
          f"(above 2e-6 for {loose} elements, those whose gradient is near 0) (max excess {worst[0]:.3g} at {worst[1] or '-'})")
    print(f"1..{n_test}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
