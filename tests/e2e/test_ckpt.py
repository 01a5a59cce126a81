"""Checkpoints, resume, job inputs/outputs through object storage, safetensors.

Real processes throughout: the digits DDP example (torch, gloo) under
`trainctl run`, s3rver and radosgw on loopback, numpy as the reference for
transforms."""
import json
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import DIGITS, PYTHON, poll
from s3_fixture import both_servers, s3  # noqa: F401  (the fixture)


def write_spec(path, **extra):
    spec = {"name": "digits", "command": [PYTHON, "train.py"], "workdir": str(DIGITS),
            "env": {"OMP_NUM_THREADS": "1"}, "devices": {"type": "cpu", "per_node": 2}}
    spec.update(extra)
    path.write_text(json.dumps(spec))
    return path


def final_loss(log_text):
    """train.loss of the last whole-run DLLogger record (step [])."""
    loss = None
    for line in log_text.splitlines():
        if line.startswith("DLLL "):
            rec = json.loads(line[5:])
            if rec.get("type") == "LOG" and rec.get("step") == []:
                loss = rec["data"]["train.loss"]
    assert loss is not None, "no final record in the log"
    return loss


def job_dir(home):
    runs = sorted((home / "runs").iterdir())
    return runs[-1]


def worker_pid(home, rank):
    """pid of the worker of `rank` started under this TRAINCTL_HOME."""
    want = f"TRAINCTL_HOME={home}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if want in env and f"RANK={rank}".encode() in env and b"train.py" in cmd:
            return int(d.name)
    return None


def test_deterministic_resume_after_sigkill(run_tc, trainctl, home, tmp_path, torch_available):
    args = {"epochs": 3, "seed": 7}
    ref = run_tc("run", "-q", write_spec(tmp_path / "ref.json", args=args), timeout=300)
    assert ref.returncode == 0, ref.stderr
    ref_dir = job_dir(home)
    ref_loss = final_loss((ref_dir / "logs" / "rank-0.log").read_text())

    # the sleep per step makes the last epoch last long enough (seconds, on any
    # machine) for the kill to land in it; it does not change the numbers
    spec = write_spec(tmp_path / "killed.json", name="digits-killed",
                      args=dict(args, **{"sleep-per-step": 0.05}),
                      restart={"max_restarts": 1, "grace_seconds": 5})
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    p = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def kill_after_second_checkpoint():
        if p.poll() is not None:
            return "ended"
        mine = [r for r in (home / "runs").iterdir() if r != ref_dir]
        if mine and (mine[0] / "output" / "checkpoints" / "epoch-2.pt").exists():
            pid = worker_pid(home, 1)
            if pid:
                os.kill(pid, signal.SIGKILL)
                return "killed"
        return None

    killed = poll(kill_after_second_checkpoint, timeout=300, step=0.02) == "killed"
    out, err = p.communicate(timeout=300)
    assert killed, "never saw the second checkpoint"
    assert p.returncode == 0, err
    assert "was killed by signal 9" in err
    assert re.search(r"resuming from epoch-[23]\.pt", err), err
    log = (job_dir(home) / "logs" / "rank-0.log").read_text()
    assert "resumed from" in log
    assert abs(final_loss(log) - ref_loss) < 1e-6, (final_loss(log), ref_loss)


def test_truncated_newest_checkpoint_falls_back(run_tc, home, tmp_path, torch_available):
    spec = write_spec(tmp_path / "job.json", args={"epochs": 3}, devices={"type": "cpu", "per_node": 1})
    r = run_tc("run", "-q", spec, timeout=300)
    assert r.returncode == 0, r.stderr
    first = job_dir(home)
    job = first.name
    lst = run_tc("ckpt", "list", job)
    assert lst.returncode == 0, lst.stderr
    assert len(re.findall(r" complete ", lst.stdout)) == 3, lst.stdout
    newest = first / "output" / "checkpoints" / "epoch-3.pt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    r = run_tc("run", "-q", "--resume", job, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "epoch-3.pt (step 3) is damaged" in r.stderr and "falling back" in r.stderr, r.stderr
    assert "resuming from epoch-2.pt" in r.stderr, r.stderr
    second = job_dir(home)
    assert second != first
    assert re.search(r"resumed from .*epoch-2\.pt at epoch 2", (second / "logs" / "rank-0.log").read_text())
    lst = run_tc("ckpt", "list", job)
    assert "damaged" in lst.stdout


def test_checkpoint_keep_and_layouts(run_tc, home, tmp_path):
    # MindFormers layout: 2 ranks, step 20 complete for both, step 30 only for rank 0
    ck = tmp_path / "ck"
    for r in range(2):
        d = ck / f"rank_{r}"
        d.mkdir(parents=True)
        (d / f"llama_rank_{r}-1_20.ckpt").write_bytes(b"x" * 10)
        (d / "meta.json").write_text(json.dumps({"last_epoch": 1, "last_step": 20,
                                                 "last_ckpt_file": f"llama_rank_{r}-1_20.ckpt"}))
    (ck / "rank_0" / "llama_rank_0-1_30.ckpt").write_bytes(b"y" * 10)
    (ck / "step_100_rank1.pt.tmp").write_bytes(b"in progress")
    old = time.time() - 10
    for f in ck.rglob("*"):
        os.utime(f, (old, old))
    r = run_tc("ckpt", "list", ck)
    assert r.returncode == 0, r.stderr
    rows = [l.split() for l in r.stdout.splitlines()[1:] if l and l[0].isdigit()]
    assert [(x[0], x[2], x[3]) for x in rows] == [("20", "mindformers", "complete"),
                                                  ("30", "mindformers", "partial")], r.stdout
    assert "epoch 1, step 20" in r.stdout

    # keep: 2 rotates the oldest complete checkpoints away during the run
    script = ("import os,time\nd=os.environ['TRAINCTL_CKPT_DIR']\n"
              "for s in range(1,5):\n"
              "    open(os.path.join(d,f'.tmp{s}'),'w').write(str(s)*100)\n"
              "    os.replace(os.path.join(d,f'.tmp{s}'), os.path.join(d,f'step-{s}.bin'))\n"
              "    time.sleep(0.3)\n")
    (tmp_path / "save.py").write_text(script)
    spec = tmp_path / "keep.json"
    spec.write_text(json.dumps({"name": "keep", "command": [PYTHON, "save.py"], "workdir": str(tmp_path),
                                "checkpoint": {"keep": 2}}))
    r = run_tc("run", "-q", spec, env={"TRAINCTL_CKPT_STABLE_SECONDS": "0.1"})
    assert r.returncode == 0, r.stderr
    left = sorted(p.name for p in (job_dir(home) / "output" / "checkpoints").iterdir())
    assert left == ["step-3.bin", "step-4.bin"], left
    lst = run_tc("ckpt", "list", "keep").stdout
    assert lst.count("removed") == 2 and lst.count("complete") == 2, lst


@both_servers
def test_inputs_from_s3_outputs_to_s3_periodic(run_tc, trainctl, home, tmp_path, s3):
    b = s3.bucket()
    s3.put(b, "data/x.txt", b"input bytes\n")
    s3.put(b, "data/sub/y.txt", b"more\n")
    spec = tmp_path / "io.yaml"
    spec.write_text(
        "name: io\n"
        f"command: 'cp $TRAINCTL_DATA_DIR/in/x.txt $TRAINCTL_OUTPUT_DIR/copy.txt; "
        f"while [ ! -e {tmp_path}/release ]; do sleep 0.1; done; "
        "echo done > $TRAINCTL_OUTPUT_DIR/final.txt; exit 1'\n"
        f"inputs: [{{from: 's3://{b}/data/', to: in}}]\n"
        f"outputs: {{upload_to: 's3://{b}/runs/{{job_id}}/', every_seconds: 1}}\n")
    env = s3.env()
    env["TRAINCTL_HOME"] = str(home)
    p = subprocess.Popen([str(trainctl), "run", str(spec)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # the job runs until released: the periodic upload must show its file first
    try:
        seen = poll(lambda: p.poll() is not None or any(k.endswith("/copy.txt") for k in s3.keys(b, "runs/")),
                    timeout=120, step=0.2)
        seen_while_running = bool(seen) and p.poll() is None
    finally:
        (tmp_path / "release").touch()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, err  # the job failed ...
    assert seen_while_running, err
    job = job_dir(home).name
    assert (job_dir(home) / "data" / "in" / "sub" / "y.txt").read_bytes() == b"more\n"
    assert s3.get(b, f"runs/{job}/copy.txt") == b"input bytes\n"
    assert s3.get(b, f"runs/{job}/final.txt") == b"done\n"  # ... and still uploaded at the end
    assert "staging input" in err


@both_servers
def test_failed_staging_exits_3_without_workers(run_tc, home, tmp_path, s3):
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"name: bad\ncommand: 'echo should-not-run'\n"
                    f"inputs: [{{from: 's3://{s3.bucket()}/nothing/here/'}}]\n")
    env = {k: v for k, v in s3.env().items() if k.startswith("AWS_")}
    r = run_tc("run", spec, env=env)
    assert r.returncode == 3, r.stderr
    assert "staging inputs failed (no worker started)" in r.stderr
    assert "should-not-run" not in r.stdout
    assert not (job_dir(home) / "logs" / "rank-0.log").exists()
    show = run_tc("show", "bad")
    assert "failed" in show.stdout and "staging inputs" in show.stdout


# ---- safetensors ----

DT = {np.float32: "F32", np.float16: "F16", np.int64: "I64", np.int32: "I32"}


def write_st(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": DT[a.dtype.type], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    inv = {v: k for k, v in DT.items()}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=inv[t["dtype"]]).reshape(t["shape"])
    return out, header.get("__metadata__")


def strategy(path, world, tensors):
    path.write_text(json.dumps({"world": world, "tensors": tensors}))
    return path


def test_transform_merge_and_split(run_tc, tmp_path):
    rng = np.random.default_rng(0)
    full = {"layers.0.attn.weight": rng.standard_normal((8, 6)).astype(np.float32),
            "layers.1.attn.weight": rng.standard_normal((8, 6)).astype(np.float32),
            "layers.0.mlp.weight": rng.standard_normal((4, 12, 2)).astype(np.float16),
            "embed.weight": rng.standard_normal((10, 4)).astype(np.float32),
            "step": np.array([123], dtype=np.int64)}
    src = tmp_path / "src"
    s4 = strategy(tmp_path / "s4.json", 4, {"layers.*.attn.weight": {"dim": 0, "parts": 4},
                                            "layers.*.mlp.weight": {"dim": 1, "parts": 4},
                                            "*": "none"})
    for r in range(4):
        shard = {"layers.0.attn.weight": np.split(full["layers.0.attn.weight"], 4, 0)[r],
                 "layers.1.attn.weight": np.split(full["layers.1.attn.weight"], 4, 0)[r],
                 "layers.0.mlp.weight": np.split(full["layers.0.mlp.weight"], 4, 1)[r],
                 "embed.weight": full["embed.weight"], "step": full["step"]}
        write_st(src / f"rank_{r}" / "model.safetensors", shard, {"format": "pt"})
    one = strategy(tmp_path / "one.json", 1, {})
    r = run_tc("ckpt", "transform", "--src", src, "--src-strategy", s4, "--dst", tmp_path / "merged",
               "--dst-strategy", one)
    assert r.returncode == 0, r.stderr
    merged, meta = read_st(tmp_path / "merged" / "rank_0" / "model.safetensors")
    assert meta == {"format": "pt"}
    assert set(merged) == set(full)
    for k, v in full.items():
        assert np.array_equal(merged[k], v), k
    # split the merged checkpoint in 2 along another dimension
    s2 = strategy(tmp_path / "s2.json", 2, {"layers.*.attn.weight": {"dim": 1},
                                            "layers.*.mlp.weight": {"dim": 2, "parts": 2}})
    r = run_tc("ckpt", "transform", "--src", tmp_path / "merged", "--src-strategy", one,
               "--dst", tmp_path / "split", "--dst-strategy", s2, "--threads", "2")
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        got, _ = read_st(tmp_path / "split" / f"rank_{rank}" / "model.safetensors")
        for k in ("layers.0.attn.weight", "layers.1.attn.weight"):
            assert np.array_equal(got[k], np.split(full[k], 2, 1)[rank]), k
        assert np.array_equal(got["layers.0.mlp.weight"], full["layers.0.mlp.weight"][:, :, rank:rank + 1])
        assert np.array_equal(got["embed.weight"], full["embed.weight"])
    insp = run_tc("ckpt", "inspect", tmp_path / "split" / "rank_1" / "model.safetensors")
    assert insp.returncode == 0, insp.stderr
    assert re.search(r"layers\.0\.attn\.weight\s+F32\s+\[8, 3\]\s+96", insp.stdout), insp.stdout
    assert 'metadata: {"format":"pt"}' in insp.stdout
    j = json.loads(run_tc("ckpt", "inspect", "--json", tmp_path / "merged" / "rank_0" / "model.safetensors").stdout)
    assert {t["name"]: t["shape"] for t in j["tensors"]}["layers.0.mlp.weight"] == [4, 12, 2]
    # a split that does not divide is refused
    s5 = strategy(tmp_path / "s5.json", 5, {"embed.weight": {"dim": 1, "parts": 5}})
    r = run_tc("ckpt", "transform", "--src", tmp_path / "merged", "--src-strategy", one,
               "--dst", tmp_path / "bad", "--dst-strategy", s5)
    assert r.returncode == 2 and "cannot be split in 5 parts" in r.stderr


def malformed_cases():
    good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}

    def enc(h, data_len=16, pad=True):
        b = json.dumps(h).encode()
        if pad:
            b += b" " * (-len(b) % 8)
        return struct.pack("<Q", len(b)) + b + b"\0" * data_len

    overlap = json.loads(json.dumps(good))
    overlap["b"]["data_offsets"] = [4, 12]
    rng = json.loads(json.dumps(good))
    rng["b"]["data_offsets"] = [8, 24]
    rng["b"]["shape"] = [4]
    dtype = json.loads(json.dumps(good))
    dtype["a"]["dtype"] = "F31"
    shape = json.loads(json.dumps(good))
    shape["a"]["shape"] = [3]
    return [
        ("overlap", enc(overlap), "overlaps"),
        ("out_of_range", enc(rng), "past the 16 bytes of data"),
        ("bad_dtype", enc(dtype), "unknown dtype 'F31'"),
        ("shape_mismatch", enc(shape), "8 bytes of data for a F32 tensor of 12 bytes"),
        ("huge_header", struct.pack("<Q", 200_000_000) + b"{}", "over the limit of 100000000 bytes"),
        ("truncated_header", enc(good)[:20], "truncated"),
        ("truncated_data", enc(good)[:-3], "past the 13 bytes of data"),
        ("tiny", b"\x01\x02", "truncated: 2 bytes"),
        ("not_json", struct.pack("<Q", 8) + b"{nope!}}", "not valid JSON"),
        ("gap", enc({"a": good["a"], "b": dict(good["b"], data_offsets=[12, 20])}, 20), "gap of 4 bytes"),
    ]


@pytest.mark.parametrize("name,data,msg", malformed_cases(), ids=[c[0] for c in malformed_cases()])
def test_malformed_safetensors_rejected(run_tc, tmp_path, name, data, msg):
    f = tmp_path / f"{name}.safetensors"
    f.write_bytes(data)
    r = run_tc("ckpt", "inspect", f)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr, r.stderr
    assert str(f) in r.stderr
    # the same checks guard transform
    (tmp_path / "src" / "rank_0").mkdir(parents=True)
    (tmp_path / "src" / "rank_0" / "m.safetensors").write_bytes(data)
    one = strategy(tmp_path / "one.json", 1, {})
    r = run_tc("ckpt", "transform", "--src", tmp_path / "src", "--src-strategy", one, "--dst",
               tmp_path / "dst", "--dst-strategy", one)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_docs_strategy_example(run_tc, tmp_path):
    """The strategy file of docs/checkpoints.md drives a real merge."""
    from conftest import REPO
    text = (REPO / "docs" / "checkpoints.md").read_text()
    doc = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    rng = np.random.default_rng(1)
    full = {"layers.0.attn.weight": rng.standard_normal((8, 2)).astype(np.float32),
            "layers.0.mlp.weight": rng.standard_normal((2, 8)).astype(np.float32),
            "embed.weight": rng.standard_normal((3, 3)).astype(np.float32)}
    for r in range(doc["world"]):
        write_st(tmp_path / "src" / f"rank_{r}" / "m.safetensors",
                 {"layers.0.attn.weight": np.split(full["layers.0.attn.weight"], 4, 0)[r],
                  "layers.0.mlp.weight": np.split(full["layers.0.mlp.weight"], 4, 1)[r],
                  "embed.weight": full["embed.weight"]})
    one = strategy(tmp_path / "one.json", 1, {})
    r = run_tc("ckpt", "transform", "--src", tmp_path / "src", "--src-strategy", tmp_path / "doc.json",
               "--dst", tmp_path / "dst", "--dst-strategy", one)
    assert r.returncode == 0, r.stderr
    got, _ = read_st(tmp_path / "dst" / "rank_0" / "model.safetensors")
    for k, v in full.items():
        assert np.array_equal(got[k], v), k
