#!/usr/bin/python3
"""torch_bench.py -- PyTorch's time for one training step (forward + backward + AdamW)
of a ppdl model file, on the same data, for perf/bench-step.

usage: torch_bench.py MODEL.h5 DATA.h5 --batch-size B --steps K --threads T [--autocast]
--autocast: the forward under torch.autocast("cpu", dtype=torch.bfloat16), the loss on
fp32 logits (perf/bench-bf16).
Prints "torch_ms_per_step <median of steps after the first>"."""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_step import batch, forward, load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--autocast", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    root, layers = load_model(a.model)
    params = [p for _, _, ps in layers for p in ps.values()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    times = []
    for step in range(a.steps):
        x, y = batch(a.data, step, a.batch_size)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
            logits, _ = forward(root, layers, x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(1e3 * (time.perf_counter() - t0))
    print(f"torch_ms_per_step {statistics.median(times[1:] or times):.1f}")
    print(f"torch_config {torch.__version__} threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()
