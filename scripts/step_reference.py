#!/usr/bin/env python3
"""Single-process phases of one training step of the PyTorch model in ddp_reference.py.

Counterpart of bench/train_step_profile (Sailor's stage module): thread CPU time per phase
(zero_grad, forward, backward, clip_grad_norm_, AdamW step), one torch thread, no
communication. Run with Debian's /usr/bin/python3.
"""
import argparse
import time

import torch

from ddp_reference import GPT, add_shape_arguments


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=20)
    add_shape_arguments(p, batch=8)
    p.add_argument("--trace", help="write the measured iterations' operators as a Chrome trace")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = GPT(args.layers, args.hidden, args.heads, args.sequence, args.vocabulary)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(100)
    names = ["zero_grad", "forward", "backward", "grad_norm", "optimizer", "total"]
    sums = [0.0] * 6
    warmup = 2
    clock = time.thread_time
    prof = None
    for it in range(warmup + args.iterations):
        if it == warmup and args.trace:
            prof = torch.autograd.profiler.profile()
            prof.__enter__()
        tokens = torch.randint(0, args.vocabulary, (args.batch, args.sequence + 1), generator=gen)
        t = [clock()]
        opt.zero_grad(set_to_none=True)
        t.append(clock())
        loss = model(tokens[:, :-1], tokens[:, 1:])
        t.append(clock())
        loss.backward()
        t.append(clock())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        t.append(clock())
        opt.step()
        t.append(clock())
        if it < warmup:
            continue
        for k in range(5):
            sums[k] += t[k + 1] - t[k]
        sums[5] += t[5] - t[0]
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.trace)
    n = sum(p.numel() for p in model.parameters())
    print(f"pytorch GPT, {args.layers} layers, hidden {args.hidden}, batch {args.batch} x {args.sequence}, {n} parameters")
    for name, s in zip(names, sums):
        print(f"  {name:10s} {s / args.iterations * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
