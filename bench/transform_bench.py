#!/usr/bin/python3
"""trainctl ckpt transform against plain numpy and the machine's memcpy.

Builds a 4-rank safetensors checkpoint set (default 2 GiB in total: layers
of F32 matrices split along dim 0 or dim 1, plus whole tensors), then
merges it into one rank three ways, data in the page cache each time:

  trainctl   trainctl ckpt transform (mmap, one copy per byte)
  numpy      what a user would write: read each shard (np.fromfile), concatenate
             per tensor, write the merged file
  memcpy     one large np.copyto of the same number of bytes, the physical limit

    bench/transform_bench.py [--gib 2] [--trainctl build/trainctl] [--threads 2]

Prints GB/s (bytes of the merged checkpoint / wall time) of each and the
ratios trainctl/numpy and trainctl/memcpy.
"""
import argparse
import json
import os
import shutil
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
    ap.add_argument("--threads", type=int, default=2)
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
        cmd = [a.trainctl, "ckpt", "transform", "--src", str(tmp / "src"), "--src-strategy", str(tmp / "s.json"),
               "--dst", str(tmp / "dst"), "--dst-strategy", str(tmp / "d.json"), "--threads", str(a.threads)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # warm the page cache
        best_tc = min(_time(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL),
                            lambda: shutil.rmtree(tmp / "dst")) for _ in range(3))
        out_bytes = (tmp / "dst" / "rank_0" / "model.safetensors").stat().st_size
        rules = [(".attn.weight", 0), (".mlp.weight", 1)]
        best_np = min(_time(lambda: numpy_merge(tmp / "src", world, rules, tmp / "np" / "model.safetensors"),
                            lambda: shutil.rmtree(tmp / "np", ignore_errors=True)) for _ in range(2))
        # the result must be the same bytes of tensors
        h1, b1 = read_header(tmp / "dst" / "rank_0" / "model.safetensors")
        h2, b2 = read_header(tmp / "np" / "model.safetensors")
        m1 = np.memmap(tmp / "dst" / "rank_0" / "model.safetensors", dtype=np.uint8, mode="r")
        m2 = np.memmap(tmp / "np" / "model.safetensors", dtype=np.uint8, mode="r")
        for k in ("layers.0.attn.weight", f"layers.{layers - 1}.mlp.weight", "embed.weight"):
            s1, e1 = h1[k]["data_offsets"]
            s2, e2 = h2[k]["data_offsets"]
            assert np.array_equal(m1[b1 + s1:b1 + e1], m2[b2 + s2:b2 + e2]), k
        del m1, m2
        src_buf = np.ones(out_bytes // 8, dtype=np.float64)
        dst_buf = np.empty_like(src_buf)
        np.copyto(dst_buf, src_buf)
        best_mc = min(_time(lambda: np.copyto(dst_buf, src_buf)) for _ in range(5))
        # writing a new file from memory that is already mapped: what any tool
        # that produces the merged file pays at least (page-cache allocation)
        chunk = np.ones(16 << 20, dtype=np.uint8)

        def write_new():
            with open(tmp / "w.bin", "wb", buffering=0) as f:
                left = out_bytes
                while left:
                    n = min(left, len(chunk))
                    f.write(memoryview(chunk)[:n])
                    left -= n
        best_wr = min(_time(write_new, lambda: (tmp / "w.bin").unlink(missing_ok=True)) for _ in range(3))
        gb = out_bytes / 1e9
        print(f"checkpoint: {world} ranks, {total / 1e9:.2f} GB in, {gb:.2f} GB merged out, {layers} layers")
        print(f"trainctl transform ({a.threads} threads): {gb / best_tc:6.2f} GB/s  ({best_tc:.2f} s)")
        print(f"numpy (plain user code):       {gb / best_np:6.2f} GB/s  ({best_np:.2f} s)")
        print(f"memcpy (np.copyto, 1 thread):  {gb / best_mc:6.2f} GB/s  ({best_mc:.2f} s)")
        print(f"write a new file (1 thread):   {gb / best_wr:6.2f} GB/s  ({best_wr:.2f} s)")
        print(f"trainctl / numpy = {best_np / best_tc:.2f}x;  trainctl / memcpy = {best_mc / best_tc:.0%};"
              f"  trainctl / new-file write = {best_wr / best_tc:.0%}")
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
