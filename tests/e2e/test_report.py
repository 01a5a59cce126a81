"""test_report.py -- the benchmark report: report.json and the Ais-Bench files
written at the end of a real digits run (2 ranks), their numbers against the
test's own computation from the stored points, `trainctl report` on demand
(--out, --single-server), the tester POST to an HTTP receiver started here
(retries on 5xx), a dead tester (exit 3, report still on disk), and the
staging / upload phases of a job with inputs and outputs.

The digits spec is the one in docs/report.md."""
import http.server
import json
import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import DIGITS, REPO, trainctl_path, job_id_of

DOC = REPO / "docs" / "report.md"


def _tc(home, *args, timeout=300, env=None):
    e = dict(os.environ, TRAINCTL_HOME=str(home), **(env or {}))
    return subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=e,
                          timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


@pytest.fixture(scope="module")
def digits(tmp_path_factory, torch_available):
    d = tmp_path_factory.mktemp("report")
    home = d / "home"
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S).group(1)
    spec = d / "job.yaml"
    spec.write_text(block + f"workdir: {DIGITS}\n")
    r = _tc(home, "run", "-q", spec, env={"TRAINCTL_SAMPLE_MS": "200"})
    assert r.returncode == 0, r.stderr[-3000:]
    job = job_id_of(r)
    show = json.loads(_tc(home, "show", "--json", job).stdout)
    return home, job, show


def _points(home, job, name):
    r = _tc(home, "metrics", job, "--name", name, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _expected(home, job, warm):
    """Per-rank throughput (mean train.ips after warm-up) and accuracy, from the points."""
    ips = [p for p in _points(home, job, "train.ips") if p["kind"] == "point"]
    per_rank = {}
    for rank in (0, 1):
        vals = [p["value"] for p in ips if p["rank"] == rank][warm:]
        per_rank[rank] = sum(vals) / len(vals)
    acc = [p["value"] for p in _points(home, job, "val.accuracy") if p["rank"] == 0][-1]
    return per_rank, acc


def _num(path):
    return float(Path(path).read_text())


def test_report_written_at_job_end(digits):
    home, job, show = digits
    run = Path(show["run_dir"])
    rep = json.loads((run / "report.json").read_text())
    per_rank, acc = _expected(home, job, 2)
    t = rep["throughput"]
    assert t["warmup_steps"] == 2 and t["unit"] == "samples/s"
    got = {x["rank"]: x for x in t["per_rank"]}
    for rank in (0, 1):
        assert got[rank]["throughput"] == pytest.approx(per_rank[rank], rel=1e-12)
        assert got[rank]["method"] == "ips" and got[rank]["source"] == "train.ips"
    assert t["total"] == pytest.approx(per_rank[0] + per_rank[1], rel=1e-12)
    assert rep["accuracy"] == {"metric": "val.accuracy", "value": acc}
    assert rep["state"] == "succeeded" and rep["exit_code"] == 0 and rep["restarts"] == 0
    assert rep["ranksize"] == 2 and rep["mode"] == "cluster"
    # phases from the job's events
    running = next(e["time"] for e in show["events"] if e["state"] == "running")
    tr = rep["phases"]["training"]
    assert tr["start"] == pytest.approx(running) and tr["end"] == pytest.approx(show["ended"])
    assert tr["seconds"] == pytest.approx(show["ended"] - running)
    assert rep["phases"]["staging"] is None and rep["phases"]["upload"] is None
    total = rep["phases"]["total"]
    assert total["start"] == pytest.approx(show["created"]) and total["end"] >= show["ended"]
    # devices: CPU use sampled from /proc/stat; no GPU, so no power
    dev = rep["devices"]
    assert dev["type"] == "cpu" and dev["count"] == 2 and dev["samples"] >= 2
    assert 0 <= dev["utilization_avg"] <= 100 and dev["utilization_source"] == "proc_stat"
    assert dev["power_avg_w"] is None and dev["power_peak_w"] is None and dev["energy_j"] is None
    # Ais-Bench files: plain numbers
    ais = run / "aisbench"
    assert (ais / "ranksize.json").read_text().strip() == "2"
    for rank in (0, 1):
        assert _num(ais / f"throughput_{rank}.json") == got[rank]["throughput"]
    assert _num(ais / "accuracy.json") == acc


def test_report_on_demand_single_server(digits, tmp_path):
    home, job, show = digits
    out = tmp_path / "out"
    r = _tc(home, "report", job, "--out", out, "--single-server")
    assert r.returncode == 0, r.stderr
    assert "throughput" in r.stdout and "samples/s" in r.stdout
    # the numbers as show prints them (issue 16, 3.14): one decimal, no "99.9373 %"
    shown = re.search(r"^throughput (\S+) samples/s", _tc(home, "show", job).stdout, re.M).group(1)
    assert re.search(rf"^throughput +{re.escape(shown)} samples/s$", r.stdout, re.M), (shown, r.stdout)
    util = re.search(r"^utilization +(\S+)", r.stdout, re.M).group(1)
    assert util == "-" or re.fullmatch(r"\d+\.\d", util), r.stdout
    rep = json.loads((out / "report.json").read_text())
    per_rank, acc = _expected(home, job, 2)
    assert rep["mode"] == "single-server"
    assert rep["servers"] == [{"id": 0, "ranks": [0, 1],
                               "throughput": pytest.approx(per_rank[0] + per_rank[1], rel=1e-12),
                               "accuracy": acc}]
    # the mean over servers of their sums: one server here
    assert rep["throughput"]["total"] == pytest.approx(per_rank[0] + per_rank[1], rel=1e-12)
    ais = out / "aisbench"
    assert (ais / "ranksize.json").read_text().strip() == "2"
    for rank in (0, 1):
        assert _num(ais / "0" / f"throughput_{rank}.json") == pytest.approx(per_rank[rank], rel=1e-12)
        assert not (ais / f"throughput_{rank}.json").exists()
    assert _num(ais / "accuracy_0.json") == acc
    assert not (ais / "accuracy.json").exists()
    j = json.loads(_tc(home, "report", job, "--out", tmp_path / "o2", "--json").stdout)
    assert j["job"] == job and j["mode"] == "cluster"


class _Receiver:
    """An HTTP server on loopback that records POSTs and answers codes in turn."""

    def __init__(self, codes):
        self.codes = list(codes)
        self.got = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                outer.got.append((self.path, self.headers.get("Content-Type"), body))
                code = outer.codes.pop(0) if outer.codes else 200
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/results"
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_tester_receives_the_report(digits, tmp_path):
    home, job, _ = digits
    rx = _Receiver([503])  # the first try fails, the retry lands
    try:
        out = tmp_path / "o"
        r = _tc(home, "report", job, "--out", out, "--tester", rx.url)
        assert r.returncode == 0, r.stderr
        assert len(rx.got) == 2 and "HTTP 503 (try 1 of 3)" in r.stderr
        path, ctype, body = rx.got[-1]
        assert path == "/results" and ctype == "application/json"
        assert json.loads(body) == json.loads((out / "report.json").read_text())
        # a 4xx answer is final: no retry, exit 3
        rx.codes = [400]
        rx.got.clear()
        r = _tc(home, "report", job, "--out", out, "--tester", rx.url)
        assert r.returncode == 3 and "HTTP 400" in r.stderr and len(rx.got) == 1
    finally:
        rx.close()


def test_dead_tester_exits_3_and_keeps_the_report(digits, tmp_path):
    home, job, _ = digits
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "o"
    r = _tc(home, "report", job, "--out", out, "--tester", f"http://127.0.0.1:{port}/x",
            "--tries", "2")
    assert r.returncode == 3, r.stderr
    assert "not sent" in r.stderr and str(out / "report.json") in r.stderr
    assert "(try 2 of 2)" in r.stderr
    assert json.loads((out / "report.json").read_text())["job"] == job
    assert _tc(home, "report", job, "--tester", "ftp://x").returncode == 2
    assert _tc(home, "report", "no-such-job").returncode == 2


def test_staging_and_upload_phases(tmp_path):
    home = tmp_path / "home"
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("data\n")
    dst = tmp_path / "up"
    spec = tmp_path / "io.yaml"
    spec.write_text(
        "name: io\ncommand: \"echo hi > $TRAINCTL_OUTPUT_DIR/out.txt\"\n"
        f"inputs: [{{from: {src}/, to: in}}]\n"
        f"outputs: {{upload_to: {dst}/}}\n")
    r = _tc(home, "run", "-q", spec)
    assert r.returncode == 0, r.stderr
    job = job_id_of(r)
    show = json.loads(_tc(home, "show", "--json", job).stdout)
    rep = json.loads((Path(show["run_dir"]) / "report.json").read_text())
    ph = rep["phases"]
    staging = next(e["time"] for e in show["events"] if "staging" in e["reason"])
    running = next(e["time"] for e in show["events"] if e["state"] == "running")
    assert ph["staging"]["start"] == pytest.approx(staging)
    assert ph["staging"]["end"] == pytest.approx(running)
    assert ph["upload"]["start"] == pytest.approx(show["ended"])
    assert ph["upload"]["seconds"] >= 0 and (dst / "out.txt").exists()
    assert ph["total"]["end"] == ph["upload"]["end"]
    # no metrics: no throughput, no accuracy, and no per-rank files
    assert rep["throughput"]["total"] is None and rep["accuracy"]["value"] is None
    ais = Path(show["run_dir"]) / "aisbench"
    assert sorted(p.name for p in ais.iterdir()) == ["ranksize.json"]
