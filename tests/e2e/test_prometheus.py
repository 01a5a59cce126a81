"""/metrics against the real thing (docs/monitoring.md): Debian's promtool
checks the exposition and runs the unit tests of deploy/prometheus/'s alert
rules; Debian's prometheus, on a port and storage folder of its own,
scrapes a real `trainctl server` (fake NVML GPUs, running jobs) and a tiny
DCGM-like exporter, and every query of every panel of deploy/grafana/'s
dashboards must return data through its HTTP API."""
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import wait_until
from server_fixture import free_port, start_server, token_for

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "grafana"
RULES = REPO / "deploy" / "prometheus"
NGPUS = 4
# the fake NVML's UUIDs (tests/fake/fake_nvml.c)
UUIDS = [f"GPU-fake0000-0000-0000-0000-{i:012d}" for i in range(NGPUS)]
# a metric name from a job's output, with what the exposition format escapes
HOSTILE = 'train.loss"q\\z\nx'

WORKER = r"""
import json, os, sys, time
hostile = sys.argv[1] == "hostile"
i = 0
while not os.path.exists(sys.argv[2]):
    data = {"train.loss": 1.0 / (i + 1), "train.ips": 100.0 + i}
    if hostile:
        data = {%r: 2.0 / (i + 1)}
    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], "data": data}), flush=True)
    i += 1
    time.sleep(0.2)
""" % HOSTILE


def need(tool):
    path = shutil.which(tool)
    if not path:
        pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs Debian's prometheus",
                    pytrace=False)
    return path


def test_alert_rules_unit_tests():
    """Every alert rule has unit tests, and they pass (promtool test rules)."""
    promtool = need("promtool")
    rules = sorted(RULES.glob("*.yml"))
    tests = [r for r in rules if r.name.endswith(".test.yml")]
    assert tests, "no rule tests in deploy/prometheus"
    p = subprocess.run([promtool, "check", "rules"] + [str(r) for r in rules if r not in tests],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([promtool, "test", "rules"] + [t.name for t in tests], cwd=RULES,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    alerts = set(re.findall(r"^\s+- alert: (\S+)", "".join(r.read_text() for r in rules if r not in tests),
                            re.M))
    tested = set(re.findall(r"alertname: (\S+)", "".join(t.read_text() for t in tests)))
    assert alerts and alerts <= tested, f"alerts without a unit test: {alerts - tested}"


def panels_of(dash):
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])  # rows


def test_dashboards_fit_grafanas_json_model():
    """The classic dashboard JSON model of Grafana's documentation: the
    required fields, panels with a unique id, a gridPos and targets each with
    an expr, and every query through the ${datasource} variable."""
    files = sorted(GRAFANA.glob("*.json"))
    assert len(files) >= 4
    uids = set()
    for f in files:
        d = json.loads(f.read_text())
        for key, kind in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list),
                          ("templating", dict), ("time", dict), ("version", int)):
            assert isinstance(d.get(key), kind), f"{f.name}: {key} must be a {kind.__name__}"
        assert d["schemaVersion"] >= 36, f"{f.name}: schemaVersion {d['schemaVersion']}"
        assert d["uid"] not in uids and len(d["uid"]) <= 40, f"{f.name}: uid"
        uids.add(d["uid"])
        variables = {v["name"]: v for v in d["templating"]["list"]}
        ds = variables.get("datasource")
        assert ds and ds["type"] == "datasource" and ds["query"] == "prometheus", \
            f"{f.name}: no datasource variable of type prometheus"
        ids = [p["id"] for p in panels_of(d)]
        assert len(ids) == len(set(ids)), f"{f.name}: panel ids repeat: {ids}"
        for p in panels_of(d):
            where = f"{f.name}: panel {p.get('id')} {p.get('title')!r}"
            assert isinstance(p.get("type"), str) and isinstance(p.get("title"), str), where
            g = p.get("gridPos", {})
            assert all(isinstance(g.get(k), int) for k in "xywh") and g["x"] + g["w"] <= 24, where
            assert p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, where
            assert p.get("targets"), f"{where}: no targets"
            refs = [t.get("refId") for t in p["targets"]]
            assert len(refs) == len(set(refs)) and all(refs), f"{where}: refIds {refs}"
            for t in p["targets"]:
                assert isinstance(t.get("expr"), str) and t["expr"].strip(), f"{where}: a target without expr"
                assert t.get("datasource", p["datasource"])["uid"] == "${datasource}", where
                for var in re.findall(r"\$(\w+)", t["expr"]):
                    assert var in variables or var.startswith("__") or var.isdigit(), \
                        f"{where}: ${var} is no variable of the dashboard"


class DCGMHandler(http.server.BaseHTTPRequestHandler):
    """A tiny stand-in for NVIDIA's dcgm-exporter: its series names and labels."""

    def do_GET(self):
        lines = []
        for name, kind, value in (("DCGM_FI_DEV_GPU_UTIL", "gauge", 55), ("DCGM_FI_DEV_FB_USED", "gauge", 1024),
                                  ("DCGM_FI_DEV_POWER_USAGE", "gauge", 61.5),
                                  ("DCGM_FI_DEV_GPU_TEMP", "gauge", 41)):
            lines.append(f"# HELP {name} {name}.\n# TYPE {name} {kind}")
            for i, u in enumerate(UUIDS):
                lines.append(f'{name}{{gpu="{i}",UUID="{u}",device="nvidia{i}",modelName="Fake GPU",'
                             f'Hostname="fakehost"}} {value}')
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.fixture
def stack(trainctl, tmp_path):
    """A server with 4 fake NVML GPUs (gpu 3 unhealthy), two running jobs
    printing metrics and one failed job; an admin token; a DCGM-like
    exporter; a prometheus scraping both every second."""
    prometheus = need("prometheus")
    lib = Path(trainctl).parent / "fake-nvml"
    assert (lib / "libnvidia-ml.so.1").exists(), f"no fake NVML in {lib}: build the tree"
    conf = tmp_path / "nvml.conf"
    conf.write_text(f"count {NGPUS}\n3 remap_pending\n")
    state = tmp_path / "state"
    tok = token_for(trainctl, state, "promadmin", admin=True)
    srv = start_server(trainctl, state, args=("--sample-seconds", "0.5"),
                       env={"LD_LIBRARY_PATH": str(lib), "TRAINCTL_FAKE_NVML": str(conf)})
    dcgm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DCGMHandler)
    threading.Thread(target=dcgm.serve_forever, daemon=True).start()
    prom = None
    release = tmp_path / "release"
    try:
        worker = tmp_path / "worker.py"
        worker.write_text(WORKER)
        jobs = {}
        for kind in ("plain", "hostile"):
            jobs[kind] = srv.submit({"name": f"prom-{kind}", "command": ["python3", str(worker), kind, str(release)],
                                     "devices": {"type": "gpu", "per_node": 1}})
        failed = srv.submit({"name": "prom-fails", "command": "exit 3", "devices": {"type": "cpu", "per_node": 1}})
        for j in jobs.values():
            srv.wait_state(j, "running")
        srv.wait_state(failed, "failed")
        (tmp_path / "token").write_text(tok)
        pport = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: trainctl
    honor_labels: true
    authorization: {{type: Bearer, credentials_file: {tmp_path / 'token'}}}
    static_configs: [{{targets: ["127.0.0.1:{srv.port}"]}}]
  - job_name: dcgm
    static_configs: [{{targets: ["127.0.0.1:{dcgm.server_address[1]}"]}}]
""")
        log = open(tmp_path / "prometheus.log", "w")
        prom = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{pport}"],
                                stdout=log, stderr=log, start_new_session=True)
        log.close()
        yield srv, pport, jobs, tok, tmp_path
    finally:
        release.touch()
        if prom:
            prom.terminate()
            prom.wait(timeout=60)
        dcgm.shutdown()
        srv.stop()


def scrape(srv, tok=None):
    st, text = srv.call("GET", "/metrics", token=tok, unix=False if tok is None else None)
    assert st == 200, text
    return text


def test_metrics_pass_promtool_and_name_devices_and_jobs(stack):
    srv, _, jobs, tok, tmp_path = stack
    promtool = need("promtool")
    # the jobs' metrics reach the server through their hub: wait for both
    wait_until(lambda: all(f'trainctl_job_metric{{job="{j}"' in scrape(srv, tok) for j in jobs.values()),
               what=lambda: f"both jobs' loss in /metrics:\n{scrape(srv, tok)[-3000:]}")
    text = scrape(srv, tok)
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr + text
    # per device, with the fake NVML's figures and UUIDs; gpu 3 failed its check
    for i, u in enumerate(UUIDS):
        labels = f'{{type="gpu",index="{i}",uuid="{u}",node="'
        assert f"trainctl_device_memory_total_bytes{labels}" in text
        assert f"trainctl_device_power_watts{labels}" in text
        healthy = re.search(re.escape("trainctl_device_healthy" + labels) + r'[^"]*"\} (\d)\n', text)
        assert healthy and healthy.group(1) == ("0" if i == 3 else "1"), text
    # the join series: one per held GPU, running jobs only
    held = re.findall(r'^trainctl_device_allocation_info\{uuid="([^"]+)".*job="([^"]+)".*\} 1$', text, re.M)
    assert sorted(j for _, j in held) == sorted(jobs.values()), held
    # the hostile metric name, escaped as the exposition format says
    esc = HOSTILE.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    assert f'metric="{esc}"' in text, text
    assert re.search(rf'trainctl_job_samples_per_second\{{job="{jobs["plain"]}"\}} \d', text), text
    assert 'trainctl_job_ends_total{outcome="failed"} 1' in text
    # without credentials: no series names a job or a user
    anon = scrape(srv)
    assert "trainctl_device_healthy" in anon and "trainctl_job_ends_total" in anon
    for word in ("allocation_info", "trainctl_job_info", "trainctl_job_metric", jobs["plain"]):
        assert word not in anon, f"{word} shown without credentials"
    # credentials that are not good are refused, not answered shorter
    st, _ = srv.call("GET", "/metrics", token="tc_" + "0" * 48)
    assert st == 401


def test_every_dashboard_query_has_data_in_prometheus(stack):
    srv, pport, jobs, tok, _ = stack
    job = jobs["plain"]
    ready = ("trainctl_job_samples_per_second", "trainctl_job_metric", "trainctl_hub_node_lag_seconds",
             "DCGM_FI_DEV_GPU_UTIL", "trainctl_device_utilization_ratio")

    def scraped():
        try:
            return all(query(pport, f'count_over_time({m}[1m]) > 2') for m in ready)
        except OSError:
            return False
    wait_until(scraped, timeout=120, step=0.5,
               what=lambda: "prometheus to have scraped trainctl and dcgm three times:\n"
                            + (Path(stack[4]) / "prometheus.log").read_text()[-3000:])
    empty = []
    for f in sorted(GRAFANA.glob("*.json")):
        d = json.loads(f.read_text())
        for p in panels_of(d):
            for t in p["targets"]:
                expr = t["expr"].replace("$__rate_interval", "1m").replace("$job", job)
                if not query(pport, expr):
                    empty.append(f"{f.name}: {p['title']!r}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_per_job_series_are_capped(trainctl, tmp_path):
    """--metrics-job-series N: at most N per-job series, whole jobs (5 each)."""
    from server_fixture import held
    bad = subprocess.run([str(trainctl), "server", "--state", str(tmp_path / "bad"), "--metrics-job-series", "x"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--metrics-job-series must be 0..1000000" in bad.stderr, bad.stderr
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2", args=("--metrics-job-series", "9"))
    release = tmp_path / "release"
    try:
        jobs = [srv.submit(held(str(release), name=f"cap{i}")) for i in range(2)]
        for j in jobs:
            srv.wait_state(j, "running")
        st, text = srv.call("GET", "/metrics")  # the operator, on the Unix socket
        assert st == 200, text
        assert text.count("\ntrainctl_job_info{") == 1, text
        assert text.count("\ntrainctl_device_allocation_info{") == 2, text
    finally:
        release.touch()
        srv.stop()
