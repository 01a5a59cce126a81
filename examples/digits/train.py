#!/usr/bin/python3
"""Data-parallel training of a small MLP on scikit-learn's digits data set.

A real torch.distributed (DDP) job that runs in seconds on CPU: trainctl's
examples, end-to-end tests and docs use it. It reads the torchrun environment
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), prints NVIDIA
DLLogger JSON lines (`DLLL {...}`) on stdout, saves a checkpoint per epoch to
$TRAINCTL_CKPT_DIR and resumes from $TRAINCTL_RESUME_FROM.

Run alone (one process, no launcher needed):  python3 train.py --epochs 2
"""
import argparse
import datetime
import gc
import json
import math
import os
import re
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT_RE = re.compile(r"^epoch-(\d+)\.pt$")


class DLLogger:
    """The JSON stream backend of NVIDIA's dllogger, printed to stdout.

    Every record is one line `DLLL {json}`; timestamp and elapsedtime are
    strings holding seconds, as dllogger writes them.
    """

    def __init__(self, stream=sys.stdout):
        self.stream = stream
        self.start = time.time()

    def _emit(self, record):
        now = time.time()
        head = {
            "timestamp": str(now),
            "datetime": str(datetime.datetime.fromtimestamp(now, datetime.timezone.utc)),
            "elapsedtime": str(now - self.start),
        }
        head.update(record)
        self.stream.write("DLLL " + json.dumps(head) + "\n")
        self.stream.flush()

    def metadata(self, metric, metadata):
        self._emit({"type": "METADATA", "metric": metric, "metadata": metadata})

    def log(self, step, data):
        self._emit({"type": "LOG", "step": step, "data": {k: _jsonable(v) for k, v in data.items()}})


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN/Infinity; dllogger data may be strings
    return v


class MLP(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])

    def opt(name, **kw):
        # --batch-size is also accepted as --batch_size (job spec args keys)
        alias = "--" + name[2:].replace("-", "_")
        p.add_argument(*([name, alias] if alias != name else [name]), **kw)

    opt("--epochs", type=int, default=10)
    opt("--lr", type=float, default=0.05)
    opt("--momentum", type=float, default=0.9)
    opt("--batch-size", type=int, default=32, help="per rank")
    opt("--hidden", type=int, default=128)
    opt("--seed", type=int, default=1234)
    opt("--val-fraction", type=float, default=0.2)
    opt("--log-every", type=int, default=5, help="iterations between train LOG records")
    opt("--device", choices=["auto", "cpu", "cuda"], default="auto")
    opt("--sleep-per-step", type=float, default=0.0, help="seconds (tests: make a run last)")
    opt("--ckpt-every-node", action="store_true",
        help="local rank 0 of every node writes the checkpoint (node-local disks)")
    opt("--fail-rank", type=int, default=None, help="this rank fails at the end of epoch 1")
    opt("--fail-code", type=int, default=1, help="exit code of the failing rank")
    opt("--fail-raise", action="store_true",
        help="fail by raising RuntimeError (exit 1, error file written) instead of exiting")
    opt("--fail-until-restart", type=int, default=None,
        help="fail only while TORCHELASTIC_RESTART_COUNT < N (default: always)")
    return p.parse_args(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_env_for_single_process():
    """Let `python3 train.py` work without a launcher: a world of one."""
    if "WORLD_SIZE" in os.environ:
        return
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ["WORLD_SIZE"] = "1"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))


def load_data(seed, val_fraction):
    """Digits scaled to [0, 1]; a fixed, seeded train/val split (sorted index lists)."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    perm = np.random.RandomState(seed).permutation(len(x))
    n_val = int(round(len(x) * val_fraction))
    val_idx = torch.tensor(np.sort(perm[:n_val]))
    train_idx = torch.tensor(np.sort(perm[n_val:]))
    return TensorDataset(x[train_idx], y[train_idx]), TensorDataset(x[val_idx], y[val_idx])


def find_checkpoint(path):
    """A checkpoint file, or the newest epoch-<N>.pt in a directory (None if none)."""
    if os.path.isdir(path):
        best = None
        for name in os.listdir(path):
            m = CKPT_RE.match(name)
            if m and (best is None or int(m.group(1)) > best[0]):
                best = (int(m.group(1)), os.path.join(path, name))
        return best[1] if best else None
    if os.path.isfile(path):
        return path
    raise FileNotFoundError(f"TRAINCTL_RESUME_FROM={path}: no such file or directory")


def load_resume(resume, rank, world, device):
    """(path, state, copied) of TRAINCTL_RESUME_FROM.  Where nodes have disks of
    their own and only rank 0 saves, the file is not on the other nodes: a rank
    that lacks it gets rank 0's copy (every rank takes part when any lacks it)."""
    try:
        path, missing = find_checkpoint(resume), None
    except FileNotFoundError as e:
        path, missing = resume, e
    state = torch.load(path, map_location=device) if path and not missing else None
    copied = False
    if world > 1:
        lacking = torch.tensor([1 if missing else 0], device=device)
        dist.all_reduce(lacking)
        if lacking.item():
            box = [torch.load(path, map_location="cpu") if rank == 0 and state is not None else None]
            dist.broadcast_object_list(box, src=0)
            if missing and box[0] is not None:
                state, copied, missing = box[0], True, None
    if missing:
        raise missing
    return path, state, copied


def save_checkpoint(ckpt_dir, epoch, model, optimizer):
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, f"epoch-{epoch}.pt")
    tmp = os.path.join(ckpt_dir, f".epoch-{epoch}.pt.tmp.{os.getpid()}")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, tmp)
    os.replace(tmp, path)
    return path


@torch.no_grad()
def evaluate(model, val_set, rank, world, device):
    """Accuracy over the whole validation set; each rank scores a disjoint shard."""
    x, y = val_set.tensors
    shard = slice(rank, None, world)
    logits = model(x[shard].to(device))
    counts = torch.tensor([(logits.argmax(1).cpu() == y[shard]).sum().item(), len(y[shard])],
                          dtype=torch.float64, device=device)
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def maybe_fail(args, rank, epoch):
    if args.fail_rank is None or args.fail_rank != rank or epoch != 1:
        return
    if args.fail_until_restart is not None:
        if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) >= args.fail_until_restart:
            return
    if args.fail_raise:
        raise RuntimeError(f"rank {rank}: failing on purpose after epoch {epoch} (--fail-raise)")
    print(f"rank {rank}: failing on purpose after epoch {epoch} with exit code {args.fail_code}",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(args.fail_code)


@record
def main(argv=None):
    args = parse_args(argv)
    setup_env_for_single_process()
    if os.environ.get("OMP_NUM_THREADS") == "1":
        torch.set_num_threads(1)

    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    log = DLLogger()
    log.metadata("train.loss", {"unit": "", "GOAL": "MINIMIZE", "STAGE": "TRAIN", "format": ":.4f"})
    log.metadata("train.ips", {"unit": "samples/s", "GOAL": "MAXIMIZE", "STAGE": "TRAIN", "format": ":.1f"})
    log.metadata("val.accuracy", {"unit": "", "GOAL": "MAXIMIZE", "STAGE": "VAL", "format": ":.4f"})
    log.log("PARAMETER", {
        "model": f"mlp-64-{args.hidden}-{args.hidden}-10", "dataset": "sklearn-digits",
        "epochs": args.epochs, "lr": args.lr, "momentum": args.momentum,
        "batch_size": args.batch_size, "global_batch_size": args.batch_size * world,
        "seed": args.seed, "world_size": world, "backend": dist.get_backend(),
    })

    torch.manual_seed(args.seed)
    train_set, val_set = load_data(args.seed, args.val_fraction)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = MLP(args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    start_epoch = 1
    resume = os.environ.get("TRAINCTL_RESUME_FROM", "")
    if resume:
        path, state, copied = load_resume(resume, rank, world, device)
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_epoch = int(state["epoch"]) + 1
            print(f"resumed from {path} at epoch {int(state['epoch'])}"
                  + (" (rank 0's copy: not on this node's disk)" if copied else ""), flush=True)
        else:
            print(f"no epoch-*.pt in {resume}: starting from epoch 1", file=sys.stderr, flush=True)
    ddp = DDP(model, device_ids=[local_rank] if use_cuda else None)
    ckpt_dir = os.environ.get("TRAINCTL_CKPT_DIR", "")

    run_start = time.time()
    ips_samples, ips_time, first_step = 0, 0.0, True
    loss_val, epoch_loss, acc = float("nan"), float("nan"), float("nan")
    for epoch in range(start_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)
        ddp.train()
        win_samples, win_t0 = 0, time.time()
        loss_sum, loss_n = 0.0, 0
        for it, (x, y) in enumerate(loader, 1):
            t0 = time.time()
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            loss_val = loss.item()
            loss_sum, loss_n = loss_sum + loss_val, loss_n + 1
            if args.sleep_per_step > 0:
                time.sleep(args.sleep_per_step)
            # this rank's own throughput: trainctl sums the ranks for the job's
            n = len(x)
            if first_step:  # the first step warms up; keep it out of the average
                first_step = False
            else:
                ips_samples += n
                ips_time += time.time() - t0
            win_samples += n
            if it % args.log_every == 0 or it == len(loader):
                now = time.time()
                log.log([epoch, it], {"train.loss": loss_val, "train.ips": win_samples / max(now - win_t0, 1e-9)})
                win_samples, win_t0 = 0, now
        ddp.eval()
        acc = evaluate(model, val_set, rank, world, device)
        if ckpt_dir and (rank == 0 or (args.ckpt_every_node and local_rank == 0)):
            save_checkpoint(ckpt_dir, epoch, model, optimizer)
        epoch_loss = loss_sum / max(loss_n, 1)  # this rank's mean over the epoch
        log.log([epoch], {"val.accuracy": acc, "train.loss": epoch_loss})
        maybe_fail(args, rank, epoch)

    if math.isnan(acc):  # resumed past the last epoch: nothing trained, still report
        acc = evaluate(model, val_set, rank, world, device)
    log.log([], {
        "train.loss": epoch_loss, "train.ips": ips_samples / ips_time if ips_time > 0 else 0.0,
        "val.accuracy": acc, "epochs": args.epochs, "train.time": time.time() - run_start,
    })
    # Torch 1.13 bug: if DDP's Reducer drops the last reference to the gloo
    # process group, ~ProcessGroupGloo joins its worker threads while holding
    # the GIL, and a worker that needs the GIL to free a tensor deadlocks it
    # (seen ~1 run in 4 here). Free DDP first, so the group dies in
    # destroy_process_group(), whose binding releases the GIL.
    del ddp
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
