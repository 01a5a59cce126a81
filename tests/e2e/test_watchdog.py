"""The progress watchdog, stragglers, restart.policy, on_log: and the resume
check (docs/diagnostics.md), on real gloo jobs.

Every wait is on a condition or a process's end; the timings asserted are
the supervisor's own (the silence it measured), with room for a loaded
machine: the timeouts (5-6 s) are well above what a step of these jobs
takes even on a 2-core machine with a load of 13."""
import json
import os
import sys

import pytest

from conftest import DIGITS, PYTHON, REPO, notes, rank_log, show

WORKER = REPO / "tests" / "e2e" / "hang_worker.py"


def spec(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def gloo_job(tmp_path, env, watchdog, restart="{max_restarts: 1}", name="gloo", extra=""):
    envs = ", ".join(f"{k}: \"{v}\"" for k, v in {"OMP_NUM_THREADS": "1", **env}.items())
    return spec(tmp_path, f"""
name: {name}
command: ["{PYTHON}", "{WORKER}"]
devices: {{type: cpu, per_node: 2}}
env: {{{envs}}}
restart: {restart}
watchdog: {watchdog}
{extra}""")


def test_hang_detected_stacks_culprit_restart_and_resume(run_tc, home, tmp_path, torch_available):
    s = gloo_job(tmp_path, {"HANG_AT": "8", "STEPS": "14"},
                 "{warmup_steps: 3, min_seconds: 6, factor: 5}")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    assert "hang detected: no progress for" in p.stderr
    assert "likely culprit rank 1" in p.stderr
    job = show(run_tc, "gloo")
    assert job["state"] == "succeeded" and job["restarts"] == 1
    hang = notes(job, "hang")
    assert len(hang) == 1, job["events"]
    assert hang[0]["state"] == "running"
    assert "likely culprit rank 1 (rank 1 is not in a collective while 1 other rank waits in " \
           "all_reduce)" in hang[0]["reason"]
    # the restart says why: a hang
    restarting = [e for e in job["events"] if e["state"] == "restarting"]
    assert restarting and restarting[0]["reason"].startswith("hang detected: no progress for")
    assert "kind" not in restarting[0]
    # detected within the configured time: the silence measured is the timeout, give or take
    # the poll loop's wake-up on a loaded machine
    d = job["diagnostics"]
    h = d["hangs"][0]
    assert h["culprit"] == 1 and h["timeout"] == 6
    assert 6 <= h["silent_seconds"] < 6 + 10, h
    assert "device_utilization" in h
    # both stacks, every thread: in the ranks' logs and in show
    log0, log1 = rank_log(job, 0), rank_log(job, 1)
    assert "trainctl: hang: the stack of rank 0" in log0
    assert "in all_reduce" in log0
    assert "trainctl: hang: the stack of rank 1" in log1
    assert "in stuck_in_step" in log1
    stacks = {x["rank"]: x["stack"] for x in h["stacks"]}
    assert "all_reduce" in stacks[0] and "stuck_in_step" in stacks[1]
    text = run_tc("show", "gloo").stdout
    assert "likely culprit rank 1" in text and "in stuck_in_step" in text
    # the restart resumed from the step-5 checkpoint and went on from step 6: no warning
    assert "resumed from" in log1 and "step-5.pt at step 6" in log1
    assert not notes(job, "resume_mismatch")
    assert '"step": 14' in log0


def test_hang_without_restarts_fails_with_hang_root_cause(run_tc, home, tmp_path,
                                                          torch_available):
    s = gloo_job(tmp_path, {"HANG_AT": "4", "HANG_RANK": "0"},
                 "{warmup_steps: 2, min_seconds: 5, factor: 3}", restart="{max_restarts: 0}")
    p = run_tc("run", "-q", s)
    assert p.returncode == 1
    job = show(run_tc, "gloo")
    assert job["state"] == "failed"
    assert job["root_cause"].startswith("hang detected: no progress for"), job["root_cause"]
    assert "likely culprit rank 0" in job["root_cause"]
    # the culprit's log tail, with its stack, is in the failure
    assert "stuck_in_step" in p.stderr
    assert "root cause: hang detected:" in run_tc("show", "gloo").stdout


def test_slow_healthy_job_is_never_flagged(run_tc, home, tmp_path, torch_available):
    # 1 s steps against min_seconds 1: the timeout follows the median (factor 5)
    s = gloo_job(tmp_path, {"STEPS": "8", "STEP_SECONDS": "1.0"},
                 "{warmup_steps: 2, min_seconds: 1, factor: 5}", restart="{max_restarts: 0}")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "gloo")
    assert not notes(job, "hang") and not notes(job, "straggler")
    d = job["diagnostics"]
    assert d["hangs"] == [] and d["stragglers"] == []
    assert d["hang_timeout"] >= 5 * 0.9
    assert [r["steps"] for r in d["ranks"]] == [8, 8]


def test_defaults_do_not_fire_on_digits(run_tc, home, tmp_path, torch_available):
    text = (DIGITS / "job.yaml").read_text().replace("epochs: 10", "epochs: 2")
    s = spec(tmp_path,
             text.replace('command: ["/usr/bin/python3", "train.py"]',
                          f'command: ["{PYTHON}", "{DIGITS / "train.py"}"]') + "watchdog: {}\n")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "digits-ddp")
    assert not notes(job, "hang")
    d = job["diagnostics"]
    assert d["hangs"] == [] and all(r["steps"] >= 5 for r in d["ranks"])
    # the stack hook was loaded (and Debian's own sitecustomize after it)
    dumps = os.listdir(os.path.join(job["run_dir"], "logs", "stacks", "attempt-0"))
    assert len(dumps) >= 2, dumps


def test_stack_hook_keeps_pythonpath_and_shadowed_sitecustomize(run_tc, home, tmp_path):
    mine = tmp_path / "mylib"
    mine.mkdir()
    (mine / "mymod.py").write_text("X = 42\n")
    script = tmp_path / "probe.py"
    script.write_text("import sys, os, mymod, sitecustomize\n"
                      "print('X', mymod.X)\n"
                      "print('site', sitecustomize.__file__)\n"
                      "print('dump', os.path.exists(os.path.join(os.environ['TRAINCTL_STACK_DIR'],"
                      " '%d.stack' % os.getpid())))\n")
    s = spec(tmp_path, f"""
name: probe
command: ["{PYTHON}", "{script}"]
env: {{PYTHONPATH: "{mine}"}}
watchdog: {{}}
""")
    p = run_tc("run", s)
    assert p.returncode == 0, p.stderr
    assert "X 42" in p.stdout
    assert "dump True" in p.stdout
    # Debian ships /usr/lib/python3.X/sitecustomize.py: it still runs
    if os.path.exists(f"/usr/lib/python3.{sys.version_info.minor}/sitecustomize.py"):
        assert f"site /usr/lib/python3.{sys.version_info.minor}/sitecustomize.py" in p.stdout


def test_restart_policy_first_step(run_tc, home, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_module_here\n")
    for policy, restarts in (("first_step", 0), ("always", 2)):
        s = spec(tmp_path, f"""
name: early-{policy}
command: ["{PYTHON}", "{bad}"]
restart: {{max_restarts: 2, policy: {policy}}}
""")
        p = run_tc("run", "-q", s)
        assert p.returncode == 1
        job = show(run_tc, f"early-{policy}")
        assert job["state"] == "failed" and job["restarts"] == restarts, job
        if policy == "first_step":
            # the cause names the exception the log's traceback ends with
            assert job["root_cause"].startswith(
                "failed before its first step: rank 0: ModuleNotFoundError"), job["root_cause"]
            assert "(exited with code 1)" in job["root_cause"], job["root_cause"]
            assert "ModuleNotFoundError" in job["root_cause"]
            assert "restart.policy first_step" in p.stderr
        else:
            assert job["root_cause"].startswith("rank 0: ModuleNotFoundError"), job["root_cause"]


def test_restart_policy_spends_budget_after_first_step(run_tc, home, tmp_path, torch_available):
    # a failure after steps were made restarts as before, with the watchdog's default policy
    s = gloo_job(tmp_path, {"FAIL_AT": "7", "STEPS": "9"}, "{}")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "gloo")
    assert job["restarts"] == 1 and job["state"] == "succeeded"
    assert not notes(job, "resume_mismatch")


def test_resume_check_warns(run_tc, home, tmp_path, torch_available):
    # the restart resumes from step-5.pt but its first step is 8: data skipped
    s = gloo_job(tmp_path, {"FAIL_AT": "7", "STEPS": "9", "RESUME_SKIP": "2"}, "{}")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    assert "warning: the first step after resuming from checkpoint step 5 is step iteration 8" \
           in p.stderr
    job = show(run_tc, "gloo")
    w = notes(job, "resume_mismatch")
    assert len(w) == 1 and "training did not resume where the checkpoint was" in w[0]["reason"]
    assert job["diagnostics"]["resume_mismatch"]["checkpoint_step"] == 5


def test_on_log_fail_and_restart(run_tc, home, tmp_path):
    oom = tmp_path / "oom.py"
    oom.write_text("import os, time\n"
                   "n = os.environ['TORCHELASTIC_RESTART_COUNT']\n"
                   "print('attempt', n, flush=True)\n"
                   "if n == '0':\n"
                   "    print('RuntimeError: CUDA out of memory. Tried to allocate 2 GiB',"
                   " flush=True)\n"
                   "    time.sleep(300)\n")
    rules = """on_log:
  - {pattern: 'CUDA out of memory', action: ACTION}
"""
    for action in ("fail", "restart"):
        s = spec(tmp_path, f"""
name: oom-{action}
command: ["{PYTHON}", "{oom}"]
restart: {{max_restarts: 2, grace_seconds: 5}}
""" + rules.replace("ACTION", action))
        p = run_tc("run", "-q", s)
        job = show(run_tc, f"oom-{action}")
        m = notes(job, "log_match")
        assert len(m) == 1, job["events"]
        assert m[0]["reason"] == ("log_match: rank 0: action %s: pattern 'CUDA out of memory' "
                                  "matched: RuntimeError: CUDA out of memory. Tried to allocate "
                                  "2 GiB" % action)
        assert job["diagnostics"]["log_matches"][0]["action"] == action
        if action == "fail":
            assert p.returncode == 1
            assert job["state"] == "failed" and job["restarts"] == 0
            assert job["root_cause"].startswith("on_log match: rank 0 printed a line matching "
                                                "pattern 'CUDA out of memory' (action fail)")
        else:
            assert p.returncode == 0, p.stderr
            assert job["state"] == "succeeded" and job["restarts"] == 1


def test_straggler_named(run_tc, home, tmp_path):
    w = tmp_path / "steps.py"
    w.write_text("import json, os, time\n"
                 "r = int(os.environ['RANK'])\n"
                 "for s in range(1, 41):\n"
                 "    time.sleep(0.2 if r == 1 else 0.1)\n"
                 "    print('DLLL ' + json.dumps({'type': 'LOG', 'step': s, 'data': {'loss': 1}}),"
                 " flush=True)\n")
    s = spec(tmp_path, f"""
name: skew
command: ["{PYTHON}", "{w}"]
devices: {{type: cpu, per_node: 3}}
watchdog: {{straggler_percent: 30, straggler_steps: 5}}
""")
    p = run_tc("run", "-q", s)
    assert p.returncode == 0, p.stderr
    assert "warning: straggler: rank 1 is" in p.stderr
    job = show(run_tc, "skew")
    sg = notes(job, "straggler")
    assert len(sg) == 1 and sg[0]["reason"].startswith("straggler: rank 1 is ")
    d = job["diagnostics"]
    assert [x["rank"] for x in d["stragglers"]] == [1]
    assert d["stragglers"][0]["slower_percent"] > 30
    times = {r["rank"]: r["step_time"] for r in d["ranks"]}
    assert times[1] > 1.5 * times[0]
    assert "straggler: rank 1 is" in run_tc("show", "skew").stdout
    report = json.loads(open(os.path.join(job["run_dir"], "report.json")).read())
    assert [x["rank"] for x in report["stragglers"]] == [1] and report["hangs"] == 0
