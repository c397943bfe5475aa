#!/usr/bin/env python3
"""PyTorch DistributedDataParallel reference for train_throughput.

Trains the same GPT as Sailor's models/ (pre-norm blocks, separate q/k/v projections, GELU
MLP, learned positions, untied head; AdamW, global-norm clipping at 1.0) on 2 CPU processes
with the gloo backend, one torch thread each, and prints

    ddp_tokens_per_s <tokens/s> <seconds per iteration> <CPU seconds per iteration>
    ddp_phases <forward s> <backward s, with DDP's overlapped all-reduce> <clip and step s>

(per iteration, rank 0; the phase times are read from the clock the iteration is timed with).

Run with Debian's /usr/bin/python3 (python3-torch) and GLOO_SOCKET_IFNAME=lo.
"""
import argparse
import math
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        b, s, h = x.shape
        hd = h // self.heads
        a = self.ln1(x)
        q, k, v = (p(a).view(b, s, self.heads, hd).transpose(1, 2) for p in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.out(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, sequence, vocabulary):
        super().__init__()
        self.word = nn.Embedding(vocabulary, hidden)
        self.position = nn.Parameter(torch.randn(sequence, hidden) * 0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads, 4 * hidden) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocabulary, bias=False)

    def forward(self, tokens, targets):
        x = self.word(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def worker(rank, args, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    torch.manual_seed(1)
    model = GPT(args.layers, args.hidden, args.heads, args.sequence, args.vocabulary)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, weight_decay=0.0)
    per_rank = args.batch // 2
    gen = torch.Generator().manual_seed(100 + rank)
    elapsed = 0.0
    phases = [0.0, 0.0, 0.0]
    cpu_start = 0.0
    for it in range(args.warmup + args.iterations):
        if it == args.warmup:
            cpu_start = time.process_time()
        tokens = torch.randint(0, args.vocabulary, (per_rank, args.sequence + 1), generator=gen)
        start = time.perf_counter()
        loss = ddp(tokens[:, :-1], tokens[:, 1:])
        t_forward = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t_backward = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        t_step = time.perf_counter()
        # Same as Sailor's executor, which reports the global mean loss every iteration.
        reported = loss.detach().clone()
        dist.all_reduce(reported)
        if it >= args.warmup:
            elapsed += time.perf_counter() - start
            phases[0] += t_forward - start
            phases[1] += t_backward - t_forward
            phases[2] += t_step - t_backward
    if rank == 0:
        tokens_total = args.batch * args.sequence * args.iterations
        cpu = (time.process_time() - cpu_start) / args.iterations
        print(f"ddp_tokens_per_s {tokens_total / elapsed:.1f} {elapsed / args.iterations:.6f} {cpu:.6f}",
              flush=True)
        print("ddp_phases " + " ".join(f"{p / args.iterations:.6f}" for p in phases), flush=True)
    dist.destroy_process_group()


def add_shape_arguments(p, batch):
    """The options of the model's shape (GPT's arguments) and of the batch, which
    bench/train_throughput and bench/train_step_profile pass as they run Sailor's model."""
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--sequence", type=int, default=64)
    p.add_argument("--vocabulary", type=int, default=4096)
    p.add_argument("--batch", type=int, default=batch)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    add_shape_arguments(p, batch=16)
    args = p.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=2, join=True)


if __name__ == "__main__":
    main()
