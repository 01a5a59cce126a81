"""limits.max_runtime: a job past its limit is stopped the graceful way with
the reason, by `trainctl run` and by the server (its own limit or the
server's --default-max-runtime).  Devices are TRAINCTL_FAKE_DEVICES."""
import json

from server_fixture import held, start_server

# waits for the stop (the stop file first, then SIGTERM), says so, and exits 0
GRACEFUL = ("trap 'echo got the stop: $(cat \"$TRAINCTL_STOP_FILE\"); exit 0' TERM; "
            "echo up; while :; do sleep 0.05; done")


def test_local_run_past_max_runtime_is_stopped_with_the_reason(run_tc, tmp_path):
    s = tmp_path / "job.yaml"
    s.write_text(f"""name: limited
command: {json.dumps(GRACEFUL)}
limits: {{max_runtime: 2s}}
restart: {{max_restarts: 2, grace_seconds: 30}}
""")
    p = run_tc("run", s, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "stopped: it ran past limits.max_runtime (2s)" in p.stderr
    job = json.loads(run_tc("show", "limited", "--json").stdout)
    assert job["state"] == "failed", job
    assert job["root_cause"].startswith("stopped: it ran past limits.max_runtime (2s)"), job["root_cause"]
    assert job["restarts"] == 0  # a time limit is no reason to try again
    log = (tmp_path / "trainctl-home").glob(f"runs/{job['id']}/logs/rank-0.log")
    text = "".join(open(f).read() for f in log)
    # the usual stop: the stop file said why before the SIGTERM came
    assert "got the stop: stopped: it ran past limits.max_runtime (2s)" in text, text


def test_bad_max_runtime_names_file_line_and_key(run_tc, tmp_path):
    s = tmp_path / "job.yaml"
    s.write_text("name: bad\ncommand: [true]\nlimits:\n  max_runtime: 90\n")
    p = run_tc("run", s)
    assert p.returncode == 2, p.stderr
    assert f"{s}:4: limits.max_runtime: must be a duration with a unit" in p.stderr, p.stderr


def test_server_stops_a_job_past_its_limit_or_the_default(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2", args=["--default-max-runtime", "3s"])
    try:
        own = srv.submit(held(tmp_path / "never", name="own", command=GRACEFUL,
                              limits={"max_runtime": "2s"}))
        dflt = srv.submit(held(tmp_path / "never", name="dflt", command=GRACEFUL))
        for j, lim in ((own, "2s"), (dflt, "3s")):
            row = srv.wait_state(j, "failed")
            assert row["root_cause"].startswith(f"stopped: it ran past limits.max_runtime ({lim})"), row
        assert srv.job(dflt)["spec"]["limits"]["max_runtime"] == "3s"
    finally:
        srv.stop()


def test_bad_default_max_runtime_is_refused(trainctl, tmp_path):
    import subprocess
    p = subprocess.run([str(trainctl), "server", "--state", str(tmp_path / "s"),
                        "--default-max-runtime", "24"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "--default-max-runtime must be a duration" in p.stderr
