#!/usr/bin/python3
"""trainctl ckpt transform against plain numpy and the machine's memcpy.

Builds a 4-rank safetensors checkpoint set (default 2 GiB in total: layers
of F32 matrices split along dim 0 or dim 1, plus whole tensors), then
merges it into one rank, data in the page cache each time:

  trainctl   trainctl ckpt transform (mmap, one copy per byte)
  baseline   the same with another binary (--baseline), before a change
  numpy      what a user would write: read each shard (np.fromfile), concatenate
             per tensor, write the merged file
  memcpy     one large np.copyto of the same number of bytes
  new file   writing a new file of the same size from memory already in
             place (16 MiB writes): what any tool that produces the merged
             file pays at least on this machine, the limit of a transform

    bench/transform_bench.py [--gib 2] [--trainctl build/trainctl] [--threads 1]
                             [--baseline OLD/trainctl] [--reps 5]

trainctl, baseline and the new-file write run --reps times each in
rotating order, each after a `sync` (not timed) so that none inherits the
others' dirty pages; medians are printed, with the ratios trainctl/numpy,
trainctl/memcpy and trainctl/new-file write (the last one side by side in
the same run).
"""
import argparse
import json
import resource
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_st(path, tensors):
    header, off = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a).tobytes())


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def numpy_merge(src, world, rules, out):
    """The plain version: load every shard whole, concatenate, write."""
    shards = []
    for r in range(world):
        p = src / f"rank_{r}" / "model.safetensors"
        h, base = read_header(p)
        raw = np.fromfile(p, dtype=np.uint8)
        shards.append({k: raw[base + v["data_offsets"][0]: base + v["data_offsets"][1]].view(np.float32)
                       .reshape(v["shape"]) for k, v in h.items() if k != "__metadata__"})
    merged = []
    for name in sorted(shards[0]):
        dim = next((d for pat, d in rules if name.endswith(pat)), None)
        merged.append((name, np.concatenate([s[name] for s in shards], axis=dim) if dim is not None
                       else shards[0][name]))
    write_st(out, merged)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--trainctl", default=str(ROOT / "build" / "trainctl"))
    ap.add_argument("--baseline", help="another trainctl binary, measured side by side")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tc-xfbench-", dir=a.dir))
    world, rows, cols = 4, 1024, 1024  # per-rank shard of a split matrix: 4 MiB F32
    per_layer = 2 * rows * cols * 4 * world  # two split matrices per layer, all ranks
    layers = max(1, int(a.gib * (1 << 30) / per_layer))
    rng = np.random.default_rng(0)
    block = rng.standard_normal((rows, cols)).astype(np.float32)
    try:
        for r in range(world):
            t = []
            for l in range(layers):
                t.append((f"layers.{l}.attn.weight", block + r))         # split along dim 0
                t.append((f"layers.{l}.mlp.weight", block[:, ::-1] + r))  # split along dim 1
            t.append(("embed.weight", block[:256]))
            write_st(tmp / "src" / f"rank_{r}" / "model.safetensors", t)
        (tmp / "s.json").write_text(json.dumps({"world": world, "tensors": {
            "*.attn.weight": {"dim": 0}, "*.mlp.weight": {"dim": 1}, "*": "none"}}))
        (tmp / "d.json").write_text(json.dumps({"world": 1, "tensors": {}}))
        total = sum(p.stat().st_size for p in (tmp / "src").rglob("*.safetensors"))

        def cmd(binary, out):
            return [binary, "ckpt", "transform", "--src", str(tmp / "src"), "--src-strategy", str(tmp / "s.json"),
                    "--dst", str(tmp / out), "--dst-strategy", str(tmp / "d.json"), "--threads", str(a.threads)]
        tools = {"trainctl": a.trainctl}
        if a.baseline:
            tools["baseline"] = a.baseline
        for k, b in tools.items():  # warm the page cache; the result is checked below
            subprocess.run(cmd(b, "dst-" + k), check=True, stdout=subprocess.DEVNULL)
        out_bytes = (tmp / "dst-trainctl" / "rank_0" / "model.safetensors").stat().st_size
        chunk = np.ones(16 << 20, dtype=np.uint8)

        def write_new():
            with open(tmp / "w.bin", "wb", buffering=0) as f:
                left = out_bytes
                while left:
                    n = min(left, len(chunk))
                    f.write(memoryview(chunk)[:n])
                    left -= n

        def child(argv):
            # CPU seconds of the child alone, from its own rusage
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
            _, status, ru = os.wait4(p.pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, argv
            return ru.ru_utime + ru.ru_stime

        def self_cpu(fn):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            fn()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

        runs = {k: (lambda b=b, k=k: child(cmd(b, "dst-" + k)),
                    lambda k=k: shutil.rmtree(tmp / ("dst-" + k), ignore_errors=True)) for k, b in tools.items()}
        runs["new file"] = (lambda: self_cpu(write_new), lambda: (tmp / "w.bin").unlink(missing_ok=True))
        times = {k: [] for k in runs}
        cpus = {k: [] for k in runs}
        loads = [os.getloadavg()[0]]
        names = list(runs)
        for i in range(a.reps):
            for k in names[i % len(names):] + names[:i % len(names)]:
                fn, before = runs[k]
                before()
                os.sync()
                t = time.perf_counter()
                cpus[k].append(fn())
                times[k].append(time.perf_counter() - t)
        loads.append(os.getloadavg()[0])
        rules = [(".attn.weight", 0), (".mlp.weight", 1)]
        best_np = min(_time(lambda: numpy_merge(tmp / "src", world, rules, tmp / "np" / "model.safetensors"),
                            lambda: (shutil.rmtree(tmp / "np", ignore_errors=True), os.sync())) for _ in range(2))
        # the result must be the same bytes of tensors
        h2, b2 = read_header(tmp / "np" / "model.safetensors")
        m2 = np.memmap(tmp / "np" / "model.safetensors", dtype=np.uint8, mode="r")
        for k in tools:
            f1 = tmp / ("dst-" + k) / "rank_0" / "model.safetensors"
            subprocess.run(cmd(tools[k], "dst-" + k), check=True, stdout=subprocess.DEVNULL)
            h1, b1 = read_header(f1)
            m1 = np.memmap(f1, dtype=np.uint8, mode="r")
            for name in ("layers.0.attn.weight", f"layers.{layers - 1}.mlp.weight", "embed.weight"):
                s1, e1 = h1[name]["data_offsets"]
                s2, e2 = h2[name]["data_offsets"]
                assert np.array_equal(m1[b1 + s1:b1 + e1], m2[b2 + s2:b2 + e2]), (k, name)
            del m1
        del m2
        src_buf = np.ones(out_bytes // 8, dtype=np.float64)
        dst_buf = np.empty_like(src_buf)
        np.copyto(dst_buf, src_buf)
        best_mc = min(_time(lambda: np.copyto(dst_buf, src_buf)) for _ in range(5))
        gb = out_bytes / 1e9
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"checkpoint: {world} ranks, {total / 1e9:.2f} GB in, {gb:.2f} GB merged out, {layers} layers;"
              f" {a.reps} runs each in rotation, load average {loads[0]:.1f} before, {loads[1]:.1f} after")
        cmed = {k: statistics.median(v) for k, v in cpus.items()}
        for k in tools:
            print(f"{k + ' transform (' + str(a.threads) + ' threads):':34s} {gb / med[k]:6.2f} GB/s median"
                  f"  (best {gb / min(times[k]):.2f});  {gb / cmed[k]:5.2f} GB per CPU second")
        print(f"{'write a new file (1 thread):':34s} {gb / med['new file']:6.2f} GB/s median"
              f"  (best {gb / min(times['new file']):.2f});  {gb / cmed['new file']:5.2f} GB per CPU second")
        print(f"{'numpy (plain user code):':34s} {gb / best_np:6.2f} GB/s best of 2")
        print(f"{'memcpy (np.copyto, 1 thread):':34s} {gb / best_mc:6.2f} GB/s best of 5")
        for k in tools:
            print(f"{k}: / numpy = {best_np / med[k]:.2f}x;  / memcpy = {best_mc / med[k]:.0%};"
                  f"  / new-file write = {med['new file'] / med[k]:.0%} wall (median of the ratios per run:"
                  f" {statistics.median(n / t for n, t in zip(times['new file'], times[k])):.0%}),"
                  f" {cmed['new file'] / cmed[k]:.0%} CPU")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _time(fn, before=None):
    if before:
        before()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
