#!/usr/bin/python3
"""torch_autocast.py -- PyTorch's bf16 autocast as the oracle of ppdl --precision bf16.

Trains the model of MODEL.h5 (gpt, mlp or cnn) for K steps as torch_step.py does (same
data, same order, torch.optim.AdamW with fp32 master weights), with the forward pass
under torch.autocast("cpu", dtype=torch.bfloat16) and the loss on the logits cast to
fp32, and compares every step's loss with ppdl's (--report). Prints TAP (one line a step, one
for the site table); exits 1 on a mismatch.

usage: torch_autocast.py MODEL.h5 DATA.h5 REPORT.json --batch-size B --steps K --lr X

The tolerance (docs/precision.md has the same derivation). Both runs compute the same
function as the fp32 model, with bf16 roundings in different places. A rounding of a
tensor t to bf16 (round to nearest, 8 significant bits) is t + d with |d_i| <= u |t_i|,
u = 2^-8. To first order in u:

  forward.  A rounding of t moves the loss by at most u * S(t), S(t) = sum_i |t_i dL/dt_i|
    (dL/dt of the exact fp32 forward). Each run's loss differs from the fp32 loss by at
    most the sum over its rounding sites, so the two losses differ by at most
        F = u * sum_sites n(t) S(t),
    n(t) the number of times the two runs together round t. S is measured every step
    with one fp32 forward+backward at PyTorch's weights of the step (forward()'s tap
    hooks keep the gradient of every site). The sites and their n (SITES below), the
    union of both runs':
      ppdl (docs/precision.md): every GEMM operand (the data; each layer's weights;
        in a block the layer-norm outputs, q, k, v, the attention probabilities, the
        attention output and GELU's output; the head's ln_f output and lm_head), a
        block's MLP pre-activation and attention probabilities where made, and every
        layer's output. Inputs that are already some layer's rounded output round
        exactly (no site); other GEMM outputs, biases, layer norm, softmax and GELU
        are fp32 arithmetic.
      autocast (torch 1.13 on the CPU, observed with a dispatch mode): linear, conv2d
        and matmul cast their operands, weights AND biases to bf16 and write bf16; the
        ops after them then run in bf16 and round their output: the attention scale
        (a multiply by 1/sqrt(hs)), softmax, GELU. ReLU, max pooling and masked_fill
        only select or zero, exactly. Layer norm, the embedding and the residual adds
        see an fp32 operand and run in fp32; the loss is fp32. Checked every step: a
        dispatch mode counts the ops of the autocast forward that write bf16 (all but
        EXACT_OPS) and the last TAP line fails unless the autocast counts of the sites
        add up to as many (gpt-tiny 60, mlp-tiny 16, cnn-tiny 13).
    Counting a weight's rounding in both runs is conservative (at step 0 both round the
    same values identically); the fp32 ops' own roundings (2^-24) are neglected.
  backward (the weights drift apart).  Every gradient is a sum of products along
    backward paths; each rounding on a path multiplies its terms by (1 + e), |e| <= u,
    so a weight's gradient carries at most n_b * u relative error, n_b the roundings a
    path from the loss to that weight meets in either run, as long as the terms of the
    sum do not cancel (where they do, the relative error of a small gradient is
    larger), and no rounding switches a ReLU or a max-pool's choice (a switch reroutes
    a gradient: not first order). These are the derivation's assumptions; each step
    prints how they fare on autocast's side in aggregate: its gradient's l1 error
    against fp32's, as a fraction of sum_P n_b(P) u |g_P|_1 (8-51% in bf16_oracle.sh's
    runs; 184% once, the cnn's step 1 at lr 1e-3, a max-pool or ReLU switching). Per layer kind
    (BACKWARD below): the gradient roundings (ppdl: the gradient at the GEMM output as
    an operand, the input gradient handed back, and in attention the PV and QK^T
    operands; autocast: every bf16 op's gradient output) and the rounded operands the
    gradient is multiplied by (the weight, and in attention V and K), plus, at the
    weight itself, its other operand (the layer input, rounded in both runs) and
    autocast's bf16 weight gradient. n_b sums them over every layer (the longest path).
    AdamW's step lr * mhat/sqrt(vhat) then moves by at most 2 n_b u R_j lr per weight
    (first order: mhat and sqrt(vhat) each move by at most n_b u relative to
    sum_j a_j |g_j| and sqrt(vhat)), where R_j = sqrt(sum_i a_i^2 / c_i) >= |mhat|/
    sqrt(vhat) by Cauchy-Schwarz (a_i, c_i the bias-corrected EMA weights of the
    betas; R_j is 1.0 to 1.016 over 6 steps), so after k steps every weight differs
    by at most 2 n_b u lr sum_{j<k} R_j and the loss by at most |grad_w L_k|_1 times
    that:
        D_k = 2 n_b u lr |grad_w L_k|_1 sum_{j<k} R_j.
    Neglected, second order in lr: weight decay's lr*wd*(weight difference), and the
    weight difference's own effect on later gradients.
  tol_k = F_k + D_k
The measured difference and its fraction of the bound are printed per step.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import attr_str, batch, forward, load_model, unique  # noqa: E402

U = 2.0 ** -8
BETA1, BETA2 = 0.9, 0.999

# forward rounding sites: tap name -> (ppdl's roundings, autocast's roundings) of it
SITES = {
    "data": (1, 1),  # GEMM operand in both (later layers' inputs are bf16 already)
    "linear.weight": (1, 1), "linear.bias": (0, 1), "linear": (0, 1),  # addmm writes bf16
    "linear.out.gelu": (1, 1),  # ppdl: the layer output; autocast: GELU in bf16
    "linear.out.relu": (1, 0),  # ReLU of a bf16 value is exact
    "linear.out.none": (1, 0),
    "conv.weight": (1, 1), "conv.bias": (0, 1), "conv": (0, 1),
    "conv.out.relu": (1, 0), "conv.out.gelu": (1, 1), "conv.out.none": (1, 0),
    "embedding.out": (1, 0),  # autocast: the gather and wte + wpe run in fp32
    "ln1": (1, 1), "ln2": (1, 1), "ln_f": (1, 1),  # fp32 layer norm, then an operand
    "attn.qkv.weight": (1, 1), "attn.qkv.bias": (0, 1),
    "attn.qkv": (1, 1),  # ppdl: q, k, v as QK^T / PV operands; autocast: addmm out
    "scores": (0, 2),  # autocast: bmm's bf16 output, then the bf16 scale multiply
    "probs": (1, 1),  # ppdl: rounded where made (then exact as PV's operand); autocast: softmax in bf16
    "attn": (1, 1),  # ppdl: attn.proj's operand; autocast: bmm's bf16 output
    "attn.proj.weight": (1, 1), "attn.proj.bias": (0, 1), "attn.proj": (0, 1),
    "mlp.fc.weight": (1, 1), "mlp.fc.bias": (0, 1),
    "mlp.fc": (1, 1),  # both round the MLP pre-activation where made (ppdl: as autocast does)
    "gelu": (1, 1),  # ppdl: mlp.proj's operand; autocast: GELU in bf16
    "mlp.proj.weight": (1, 1), "mlp.proj.bias": (0, 1), "mlp.proj": (0, 1),
    "block.out": (1, 0),  # autocast: the residual add is fp32 + bf16 -> fp32
    "lm_head.weight": (1, 1),
    "logits": (1, 1),  # ppdl: the head's output; autocast: matmul's bf16 output
}

# backward roundings a path crossing a layer meets: kind -> (ppdl's, autocast's)
BACKWARD = {
    # ppdl: the pre-activation gradient as an operand, the input gradient handed back,
    # the weight operand; autocast: GELU's backward (or the logits' cast), addmm's
    # input gradient, the weight operand
    "linear": (3, 3),
    "conv": (3, 3),
    # ppdl: attn.proj's output gradient and the PV, QK^T and qkv gradient operands, the
    # block's input gradient (5) and the operands attn.proj.weight, V, K, attn.qkv.weight
    # (4); autocast: the bf16 cast at the residual add, attn.proj's addmm, PV's bmm,
    # softmax, the scale, QK^T's bmm, qkv's addmm (7), and the same 4 operands
    "block": (9, 11),
    # ppdl: the logits' gradient operand, the input gradient, lm_head; autocast: the
    # logits' cast, matmul's input gradient, lm_head
    "head": (3, 3),
    "embedding": (0, 0), "maxpool": (0, 0), "flatten": (0, 0),  # route values exactly
}
# at the weight itself: its other operand (rounded in both) and autocast's bf16 gradient
AT_WEIGHT = 1 + 2


# ops that write bf16 without rounding: views, copies, selections, zeroing
EXACT_OPS = {"view", "_unsafe_view", "_reshape_alias", "transpose", "t", "expand", "clone", "split", "slice",
             "select", "detach", "permute", "unsqueeze", "squeeze", "alias", "masked_fill", "relu", "threshold",
             "max_pool2d_with_indices"}


class RoundingCounter(TorchDispatchMode):
    """counts the ops that write a bf16 tensor and are not in EXACT_OPS: the roundings
    autocast's forward does (below autocast in the dispatcher: the casts it inserts
    show up as _to_copy)"""
    def __init__(self):
        super().__init__()
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        name = func.overloadpacket.__name__
        if name not in EXACT_OPS and any(isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 for t in outs):
            self.ops[name] = self.ops.get(name, 0) + 1
        return out


def adam_ratio_bound(k):
    """R_k >= |mhat| / sqrt(vhat) at step k (0-based), by Cauchy-Schwarz"""
    a = [(1 - BETA1) * BETA1 ** (k - j) / (1 - BETA1 ** (k + 1)) for j in range(k + 1)]
    c = [(1 - BETA2) * BETA2 ** (k - j) / (1 - BETA2 ** (k + 1)) for j in range(k + 1)]
    return math.sqrt(sum(x * x / y for x, y in zip(a, c)))


def mean_ce(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


def path_roundings(layers, params):
    """n_b of each parameter: the backward roundings on a path from the loss to it,
    counting its own layer whole and every layer after it (a tied weight: its first
    layer's, the longest)"""
    n_b = {}
    for i, (_, _, ps) in enumerate(layers):
        after = AT_WEIGHT + sum(sum(BACKWARD[kind]) for kind, _, _ in layers[i:])
        for p in ps.values():
            n_b.setdefault(id(p), after)
    return [n_b[id(p)] for p in params]


def forward_sensitivity(root, layers, x, y, params, n_b):
    """the fp32 loss, sum_P n_b(P) |grad_P L|_1, sum over sites of n(t) * sum_i |t_i dL/dt_i|
    and the autocast roundings the sites count"""
    taps = []

    def tap(name, t):
        if name not in SITES:
            raise SystemExit(f"torch_autocast.py: no rounding count for site {name}")
        # a node of its own (a tied weight's uses are separate sites); the data is a leaf
        t = t.clone() if t.requires_grad else t.detach().requires_grad_()
        t.retain_grad()
        taps.append((name, t))
        return t

    logits, _ = forward(root, layers, x, tap)
    loss = mean_ce(logits, y)
    for p in params:
        p.grad = None  # not the last step's
    loss.backward()
    grad_l1 = float(sum(n * p.grad.abs().sum() for p, n in zip(params, n_b)))
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    s = sum(sum(SITES[name]) * float((t.detach() * t.grad).abs().sum()) for name, t in taps if t.grad is not None)
    return loss.item(), grad_l1, s, sum(SITES[name][1] for name, _ in taps), grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("report")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    root, layers = load_model(args.model)
    family = attr_str(root["family"])
    params = unique([p for _, _, ps in layers for p in ps.values()])
    n_b = path_roundings(layers, params)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-2}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(BETA1, BETA2), eps=1e-8)
    with open(args.report) as f:
        report = json.load(f)
    failed = 0
    print(f"# {family}: n_b = {min(n_b)} to {max(n_b)} backward roundings on a parameter's path "
          f"({len(layers)} layers), u = 2^-8")
    r_sum = 0.0  # sum_{j<k} R_j
    sites_differ = []
    for step in range(args.steps):
        x, y = batch(args.data, step, args.batch_size)
        loss32, grad_nb, s, n_counted, grads32 = forward_sensitivity(root, layers, x, y, params, n_b)
        counter = RoundingCounter()
        with counter, torch.autocast("cpu", dtype=torch.bfloat16):
            logits, _ = forward(root, layers, x)
        n_seen = sum(counter.ops.values())
        if n_seen != n_counted or step == 0:  # at a mismatch the table no longer describes this torch
            sites_differ.append(n_seen != n_counted)
            print(f"# step {step}: autocast's forward rounds {n_seen} times "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(counter.ops.items()))}), the site table counts {n_counted}")
        loss = mean_ce(logits, y)
        opt.zero_grad()
        loss.backward()
        # the drift's assumption, seen on one of the two runs: autocast's gradient error
        # against fp32, in l1, next to the n_b u |grad|_1 the derivation allows
        g_err = float(sum((p.grad - g).abs().sum() for p, g in zip(params, grads32)))
        opt.step()
        tol_f = U * s
        tol_d = 2 * U * args.lr * grad_nb * r_sum
        tol = tol_f + tol_d
        r_sum += adam_ratio_bound(step)
        ours = report["steps"][step]["loss"]
        d = abs(ours - loss.item())
        good = d <= tol
        failed += not good
        print(f"{'ok' if good else 'not ok'} {step + 1} - {family} step {step}: loss ppdl {ours:.6f} autocast "
              f"{loss.item():.6f} (fp32 {loss32:.6f}): |diff| {d:.2e} <= tol {tol:.2e} = forward {tol_f:.2e} "
              f"+ drift {tol_d:.2e} ({d / tol:.1%} of it); autocast's gradient error |dg|_1 {g_err:.2e} "
              f"= {g_err / (U * grad_nb):.1%} of sum_P n_b u |g_P|_1", flush=True)
    good = not any(sites_differ)
    failed += not good
    print(f"{'ok' if good else 'not ok'} {args.steps + 1} - {family}: the site table counts every rounding of "
          f"autocast's forward at every step (ops writing bf16, seen below autocast by a dispatch mode)")
    print(f"1..{args.steps + 1}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
