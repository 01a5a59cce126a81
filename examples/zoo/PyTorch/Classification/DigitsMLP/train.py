#!/usr/bin/env python3
"""train.py -- DigitsMLP's training, one DDP worker (started by run_scripts/run_digitsmlp.py).

A small MLP on scikit-learn's digits (the same model and data as
examples/digits/train.py), gloo on CPU or NCCL on CUDA, reading the torchrun
environment the run file sets.  Every step prints one tcap_dllogger JSON
line (Tecorigin ModelZoo's logger) with rank, train.loss and train.ips (this
worker's samples per second); each epoch adds val.accuracy.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

START = time.time()


def tcap_log(step, data):
    """TCAPPDLL {json}: data is the str() of a dict whose values are str()."""
    now = time.time()
    rec = {"timestamp": str(now), "datetime": time.strftime("%Y-%m-%d %H:%M:%S"),
           "elapsedtime": str(now - START), "type": "LOG", "step": step,
           "data": str({k: str(v) for k, v in data.items()})}
    # one write per line: workers share stdout, and a line written whole
    # (under PIPE_BUF) never interleaves with another worker's
    sys.stdout.write("TCAPPDLL " + json.dumps(rec) + "\n")
    sys.stdout.flush()


def str2bool(v):
    return str(v).lower() in ("true", "t", "yes", "y", "1")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model_name", default="digitsmlp")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--epoch", type=int, default=1)
    p.add_argument("--step", type=int, default=-1)
    p.add_argument("--dataset_path", default="")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--device", default="cpu")
    p.add_argument("--autocast", type=str2bool, default=False)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--hidden", type=int, default=128)
    args, _ = p.parse_known_args()  # model.yaml `others` this model does not use
    return args


class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    args = parse_args()
    if args.model_name.lower() != "digitsmlp":
        raise SystemExit(f"train.py: unknown model_name {args.model_name!r} (this folder trains digitsmlp)")
    if args.device not in ("cpu", "cuda"):
        raise SystemExit(f"train.py: device {args.device!r} is not supported here (cpu, cuda)")
    torch.set_num_threads(1)
    cuda = args.device == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = np.random.RandomState(args.seed).permutation(len(x))
    n_val = len(x) // 5
    val, train = torch.tensor(np.sort(perm[:n_val])), torch.tensor(np.sort(perm[n_val:]))
    train_set = TensorDataset(x[train], y[train])
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = DDP(MLP(args.hidden).to(device), device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epoch + 1):
        sampler.set_epoch(epoch)
        model.train()
        for it, (bx, by) in enumerate(loader, 1):
            if 0 < args.step < it:
                break
            t0 = time.time()
            bx, by = bx.to(device), by.to(device)
            opt.zero_grad()
            with torch.autocast(device_type=device.type, enabled=args.autocast and cuda):
                loss = F.cross_entropy(model(bx), by)
            loss.backward()
            opt.step()
            ips = len(bx) / max(time.time() - t0, 1e-9)
            tcap_log([epoch, it], {"rank": rank, "train.loss": loss.item(), "train.ips": ips})
        model.eval()
        with torch.no_grad():
            shard = slice(rank, None, world)
            pred = model(x[val][shard].to(device)).argmax(1).cpu()
            c = torch.tensor([(pred == y[val][shard]).sum().item(), len(pred)], dtype=torch.float64,
                             device=device)
        dist.all_reduce(c)
        tcap_log([epoch], {"rank": rank, "val.accuracy": c[0].item() / c[1].item()})
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
