"""Output a new user tripped over (issue 16, section 3): a partial partitions
file, float noise in plan JSON, epoch -1 in `ckpt list`, tables whose
columns overflow, and `ckpt transform` without progress."""
import json
import os
import pty
import re
import select
import struct
import subprocess
import time

from conftest import REPO  # noqa: F401


def exe():
    return os.environ.get("TRAINCTL") or str(REPO / "build" / "trainctl")


def on_a_terminal(args, env=None, cwd=None):
    """Run with stderr on a pseudo-terminal: (exit status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([exe(), *map(str, args)], env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            seen += data
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(timeout=30), out, seen.decode(errors="replace")


# ---- plan ----

def instances(tmp_path, bad_at=None, n=6):
    p = subprocess.run([exe(), "plan", "synth", "--graph-size", "8", "--num-split", "3", "--count", str(n)],
                       capture_output=True, text=True, check=True)
    lines = p.stdout.splitlines()
    if bad_at is not None:
        row = json.loads(lines[bad_at])
        row["x"][2] = -1.0
        lines[bad_at] = json.dumps(row)
    f = tmp_path / "val.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


def test_partition_output_file_is_whole_or_untouched(run_tc, tmp_path):
    val = instances(tmp_path, bad_at=3)
    out = tmp_path / "parts.jsonl"
    out.write_text("the previous result\n")
    p = run_tc("plan", "partition", val, "-o", out)
    assert p.returncode == 2 and "instance 3" in p.stderr, p.stderr
    assert out.read_text() == "the previous result\n"
    assert sorted(os.listdir(tmp_path)) == ["parts.jsonl", "trainctl-home", "val.jsonl"]
    # on stdout the lines before the bad instance are printed, as the docs say
    p = run_tc("plan", "partition", val)
    assert p.returncode == 2
    assert [json.loads(l)["instance"] for l in p.stdout.splitlines()] == [0, 1, 2]
    doc = (REPO / "docs" / "plan.md").read_text()
    assert "a bad instance stops the output there" in doc
    # a good file is written whole, and replaces the old one
    good = instances(tmp_path)
    p = run_tc("plan", "partition", good, "-o", out)
    assert p.returncode == 0, p.stderr
    assert [json.loads(l)["instance"] for l in out.read_text().splitlines()] == list(range(6))
    # synth -o goes the same way
    p = run_tc("plan", "synth", "--graph-size", "4", "--num-split", "1", "--count", "2", "-o", tmp_path / "s.jsonl")
    assert p.returncode == 0 and len((tmp_path / "s.jsonl").read_text().splitlines()) == 2
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_plan_json_numbers_are_shortest_round_trip(run_tc, tmp_path):
    val = instances(tmp_path, n=20)
    p = run_tc("plan", "partition", val)
    assert p.returncode == 0, p.stderr
    def digits(text):
        return len(re.sub(r"e.*|[-.]", "", text).strip("0"))

    nums = [n for line in p.stdout.splitlines()
            for n in re.findall(r'"(?:objective|bottleneck|comm)":(-?[\d.e+-]+)', line)]
    assert len(nums) == 60
    for num in nums:
        # as short as Python's repr (the shortest text that reads back as the same double)
        assert digits(num) == digits(repr(float(num))), num
    assert any(digits(n) <= 7 for n in nums), nums  # %.17g wrote 0.62721499999999997 for 0.627215
    e = run_tc("plan", "eval", val, "--format", "json")
    assert e.returncode == 0
    json.loads(e.stdout)


def test_strategy_table_columns_line_up(run_tc):
    p = run_tc("plan", "strategy", "--model", "gpt2-medium", "--devices", "16", "--nodes", "2",
               "--global-batch", "32", "--top", "0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("rank "))
    col = lines[head].index("layers/stage")
    rows = lines[head + 1:]
    assert any(r.count("/") >= 7 for r in rows), "no 8-stage candidate to overflow the column"
    for r in rows:
        assert r[col - 1] == " " and r[col] != " ", (lines[head], r)


# ---- ckpt ----

def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def test_transform_progress_on_a_terminal_only(run_tc, tmp_path):
    rows = 1024
    data = b"\0" * (rows * 256 * 4)
    for r in range(2):
        write_st(tmp_path / "src" / f"rank_{r}" / "m.safetensors",
                 {f"w{i}": ([rows, 256], data) for i in range(4)})
    (tmp_path / "two.json").write_text('{"world": 2, "tensors": {"*": {"dim": 0}}}')
    (tmp_path / "one.json").write_text('{"world": 1}')
    args = ["ckpt", "transform", "--src", tmp_path / "src", "--src-strategy", tmp_path / "two.json",
            "--dst-strategy", tmp_path / "one.json"]
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "home"))
    rc, out, term = on_a_terminal(args + ["--dst", tmp_path / "a"], env=env)
    assert rc == 0, term
    assert re.search(r"8\.0 MiB of 8\.0 MiB written \(100%\), [\d.]+ \S+/s", term), term
    assert re.match(r"4 tensors, 8\.0 MiB written in [\d.]+ s \([\d.]+ \S+/s\)$", out.strip()), out
    rc, out, term = on_a_terminal(args + ["--dst", tmp_path / "b", "--quiet"], env=env)
    assert rc == 0 and "written (" not in term, term
    p = run_tc(*args, "--dst", tmp_path / "c")
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_ckpt_list_shows_no_epoch_as_dash(run_tc, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "step_000120.safetensors").write_bytes(b"x")  # a step, no epoch
    (ck / "checkpoint-500").mkdir()
    (ck / "checkpoint-500" / "model.bin").write_bytes(b"y")
    old = time.time() - 10
    for f in ck.rglob("*"):
        os.utime(f, (old, old))
    p = run_tc("ckpt", "list", ck)
    assert p.returncode == 0, p.stderr
    rows = [l.split() for l in p.stdout.splitlines()[1:] if l[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("120", "-"), ("500", "-")], p.stdout
    assert "-1" not in p.stdout


# ---- devices, metrics ----

def test_devices_memory_shows_used_and_total(run_tc):
    p = run_tc("devices", env={"TRAINCTL_FAKE_DEVICES": "gpu:2"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    cpu = next(l for l in lines if l.startswith("cpu"))
    assert re.search(r"\b\d+\.\d/\d+\.\d GiB\b", cpu), p.stdout
    col = lines[0].index("UTIL")
    assert all(len(l) >= col for l in lines)
    d = json.loads(run_tc("devices", "--json").stdout)
    c = next(x for x in d if x["type"] == "cpu")
    assert 0 < c["memory_used"] < c["memory_total"], c


def test_metrics_table_fits_long_names(run_tc, home, tmp_path):
    name = "train.throughput_per_device_tokens"
    line = ('DLLL {"timestamp": "1716200004.5", "type": "LOG", "step": [0, %d], '
            '"data": {"%s": 1.5, "loss": 2.0}}')
    (tmp_path / "lines.txt").write_text("\n".join(line % (i, name) for i in range(3)) + "\n")
    (tmp_path / "job.yaml").write_text('name: longname\ncommand: ["/bin/cat", "lines.txt"]\n')
    assert run_tc("run", "-q", "job.yaml", cwd=tmp_path).returncode == 0
    p = run_tc("metrics", "longname")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    col = lines[0].index("RANK")
    assert col > len(name)
    for l in lines[1:]:
        assert l[col:col + 4].strip() == "0", (lines[0], l)
    show = run_tc("show", "longname").stdout
    rows = [l for l in show.splitlines() if name in l or l.strip().startswith("METRIC")]
    assert len(rows) == 2 and rows[0].index("RANKS") == rows[1].index(name) + len(name) + 1, rows
