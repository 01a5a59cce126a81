"""limits.max_runtime and backfill (sched.h rule 8): a job past its limit is
stopped the graceful way with the reason, by `trainctl run` and by the
server (its own limit or the server's --default-max-runtime); a short job
with a limit starts past a blocked big one without delaying it; a job
without a limit never does.  Devices are TRAINCTL_FAKE_DEVICES."""
import json

from conftest import wait_until
from server_fixture import held, start_server, sleeper

# waits for the stop (the stop file first, then SIGTERM), says so, and exits 0
GRACEFUL = ("trap 'echo got the stop: $(cat \"$TRAINCTL_STOP_FILE\"); exit 0' TERM; "
            "echo up; while :; do sleep 0.05; done")


def starts(job):
    return [e["time"] for e in job["events"] if e["state"] == "starting" and e["reason"].startswith("scheduled")]


def ends(job):
    return [e["time"] for e in job["events"] if e["state"] in ("succeeded", "failed", "killed")]


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
    # the settings file's key, named with its line
    conf = tmp_path / "server.yaml"
    conf.write_text("quiet: true\ndefault-max-runtime: 24\n")
    p = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"{conf}:2" in p.stderr and "default-max-runtime" in p.stderr, p.stderr
    conf.write_text("default-max-runtime: 24h\n")
    p = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "good" in p.stdout, p.stderr


def test_short_job_backfills_past_a_waiting_big_one_without_delaying_it(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        rel_long, rel_short = tmp_path / "release-long", tmp_path / "release-short"
        # long holds gpu 0 for at most an hour: big (2 gpus) is reserved from then
        long_ = srv.submit(held(rel_long, name="long", limits={"max_runtime": "1h"}))
        srv.wait_state(long_, "running")
        big = srv.submit(sleeper(0.2, name="big", devices={"type": "gpu", "per_node": 2},
                                 limits={"max_runtime": "10m"}))
        nolimit = srv.submit(held(rel_short, name="nolimit"))            # never backfills
        toolong = srv.submit(held(rel_short, name="toolong", limits={"max_runtime": "2h"}))
        short = srv.submit(held(rel_short, name="short", limits={"max_runtime": "30m"}))
        srv.wait_state(short, "running")
        # in the same rounds the others were passed over: they still wait, and so does big
        for j in (big, nolimit, toolong):
            assert srv.job(j)["state"] == "queued", srv.job(j)
        assert srv.job(short)["devices"] == "1"
        # why each waits (show and the API)
        wb, wn, wt = (srv.job(j)["waiting"] for j in (big, nolimit, toolong))
        assert wb["behind"] is None and wb["why"].startswith("first in line for gpu: its devices are expected free from"), wb
        assert abs(wb["reserved_from"] - (starts(srv.job(long_))[0] + 3600)) < 5, wb
        assert wn["behind"] == big and "without limits.max_runtime this job cannot backfill" in wn["why"], wn
        assert wt["behind"] == big and "limits.max_runtime would end after that" in wt["why"], wt
        p = srv.cli("show", toolong)
        assert p.returncode == 0, p.stderr
        assert f"waiting    held behind the reservation of job {big} from " in p.stdout, p.stdout
        wait_until(lambda: "backfills past" in srv.log(), what="the backfill in the server's log")
        assert f"job {short} (max_runtime 30m) backfills past {big}" in srv.log()
        rel_short.touch()
        srv.wait_state(short, "succeeded")
        rel_long.touch()
        srv.wait_state(big, "succeeded")
        jl, jb, js = srv.job(long_), srv.job(big), srv.job(short)
        # big started once long was gone, and well before long's limit (its reservation)
        assert ends(jl)[0] <= starts(jb)[0] < starts(jl)[0] + 3600
        assert starts(js)[0] < starts(jb)[0]
        for j in (nolimit, toolong):
            srv.wait_state(j, "succeeded")
            assert starts(srv.job(j))[0] >= starts(jb)[0]  # behind big, in order
    finally:
        srv.stop()
