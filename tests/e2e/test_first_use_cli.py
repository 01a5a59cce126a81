"""What a new user trips over, second round (issue 29, items 6, 10, 17, 18):
submit on the server's own machine, torchrun's flags, job references and
the wording of counts and stop signals."""
import os
import re
import signal
import subprocess

from conftest import wait_until
from server_fixture import sleeper, start_server


# ---- 6: submit finds the server of its own state folder --------------------------

def test_submit_finds_the_local_server(trainctl, tmp_path):
    state = tmp_path / "state"
    srv = start_server(trainctl, state)
    try:
        spec = tmp_path / "job.yaml"
        spec.write_text('name: local-submit\ncommand: ["true"]\n')
        env = dict(srv.env)  # TRAINCTL_HOME is the server's state; no URL, no token
        p = subprocess.run([str(trainctl), "submit", str(spec)], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        job = p.stdout.split()[0] if p.stdout.split() else ""
        assert srv.job("local-submit")["name"] == "local-submit", p.stdout
        assert job, p.stdout
    finally:
        srv.stop()
    # no server on this state folder: the message says which folder was looked at
    p = subprocess.run([str(trainctl), "submit", str(spec)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"no server: none runs on the state folder {state}" in p.stderr, p.stderr


# ---- 10: torchrun's flags ---------------------------------------------------------

def test_torchrun_spellings_of_nproc_are_accepted(run_tc):
    for flag in (["--nproc-per-node", "2"], ["--nproc_per_node=2"], ["--standalone", "--nproc", "2"]):
        p = run_tc("run", *flag, "--name", "tr", "--", "/bin/sh", "-c", 'echo "ws=$WORLD_SIZE"')
        assert p.returncode == 0, (flag, p.stderr)
        logs = run_tc("logs", "tr", "--rank", "1")
        assert "ws=2" in logs.stdout, (flag, logs.stdout, logs.stderr)


def test_torchrun_flags_without_meaning_say_what_to_write(run_tc, home):
    cases = {
        "--rdzv-backend=c10d": "'--rdzv-backend' is torchrun's: trainctl is its own rendezvous",
        "--rdzv_endpoint=h:29400": "'--rdzv_endpoint' is torchrun's: trainctl sets MASTER_ADDR",
        "--master-port=29500": "'--master-port' is torchrun's: trainctl picks a free MASTER_PORT",
        "--node_rank=0": "'--node_rank' is torchrun's: trainctl gives each node its rank",
    }
    for flag, said in cases.items():
        p = run_tc("run", flag, "--", "true")
        assert p.returncode == 2 and said in p.stderr, (flag, p.stderr)
    p = run_tc("run", "--nnodes", "1:2", "--", "true")
    assert p.returncode == 2 and "elastic range" in p.stderr, p.stderr
    p = run_tc("run", "--nnodes", "2", "--", "true")
    assert p.returncode == 2 and "ad hoc runs are one node" in p.stderr, p.stderr
    # nothing was recorded for any of them
    assert not os.path.exists(home / "runs") or not os.listdir(home / "runs")


def test_torchrun_nnodes_is_the_spec_key(run_tc, tmp_path):
    spec = tmp_path / "two.yaml"
    spec.write_text('name: two\ncommand: ["true"]\n')
    p = run_tc("run", "--nnodes", "2", spec)
    # the spec's own rule answers: more than one node needs Slurm
    assert p.returncode == 2 and "nodes" in p.stderr and "slurm" in p.stderr, p.stderr
    p = run_tc("run", "--nnodes", "1", spec)
    assert p.returncode == 0, p.stderr


# ---- 17: job references --------------------------------------------------------

def test_the_id_suffix_alone_and_did_you_mean(run_tc):
    assert run_tc("run", "--name", "resnet-baseline", "--", "true").returncode == 0
    assert run_tc("run", "--name", "other", "--", "true").returncode == 0
    ps = run_tc("ps", "-a", "--format", "csv", "-o", "id,name").stdout.splitlines()[1:]
    ids = {name: jid for jid, name in (row.split(",") for row in ps)}
    suffix = ids["resnet-baseline"].rsplit("-", 1)[1]
    p = run_tc("show", suffix)
    assert p.returncode == 0 and ids["resnet-baseline"] in p.stdout, p.stderr
    p = run_tc("show", "resnet-baselin")
    assert p.returncode != 0
    assert "no job 'resnet-baselin' (did you mean 'resnet-baseline'?)" in p.stderr, p.stderr


def test_set_of_a_script_argument_suggests_args(run_tc, tmp_path):
    spec = tmp_path / "a.yaml"
    spec.write_text('name: a\ncommand: ["true"]\nargs: {lr: 0.5}\n')
    p = run_tc("run", "--set", "lr=0.1", spec)
    assert p.returncode == 2, p.stderr
    assert "unknown key 'lr' (did you mean 'args.lr'?" in p.stderr, p.stderr
    q = tmp_path / "q.yaml"
    q.write_text('name: q\ncommand: ["true"]\ndevices: {type: cpu, per_node: "2"}\n')
    p = run_tc("run", q)
    assert p.returncode == 2, p.stderr
    assert "q.yaml:3: devices.per_node: must be an integer, not the quoted string '2'" in p.stderr, \
        p.stderr


# ---- 18: wording ----------------------------------------------------------------

def test_one_worker_and_the_stop_signal_in_words(trainctl, home, tmp_path):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    p = subprocess.Popen([str(trainctl), "run", "--name", "sigint", "--", "sleep", "60"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = home / "runs"
    wait_until(lambda: runs.exists() and any((d / "logs").exists() for d in runs.iterdir()),
               what="the run folder")
    wait_until(lambda: subprocess.run([str(trainctl), "ps"], env=env, capture_output=True,
                                      text=True).stdout.count("running") == 1,
               what="the job running")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    text = out + err
    assert "stopped by SIGINT, Ctrl-C" in text, text
    assert "Interrupt" not in text, text
    assert "1 worker started" in text or "1 workers" not in text, text


def test_ps_age_is_never_shorter_than_duration(run_tc):
    assert run_tc("run", "--name", "agecheck", "--", "sleep", "1").returncode == 0
    p = run_tc("ps", "-a")
    row = [line for line in p.stdout.splitlines() if "agecheck" in line][0]
    age, dur = re.findall(r"(\d+(?:\.\d)?)s", row)[:2]
    assert float(age) >= float(dur), row


# ---- a spec sent as a JSON object keeps its numbers as written ------------------

def test_a_json_object_spec_keeps_its_floats(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state")
    try:
        job = srv.submit({"name": "floats", "command": ["true"], "args": {"lr": 0.1, "wd": 1e-05}})
        argv = srv.job(job)["argv"]
        assert argv[-4:] == ["--lr", "0.1", "--wd", "1e-05"], argv
    finally:
        srv.stop()


def test_the_helpers_variables_are_trainctls(run_tc, tmp_path):
    """The in-job helper's channel and stop file, and CANN's device id, are set
    by trainctl: a spec cannot quietly override them."""
    for var in ("TRAINCTL_METRICS_CHANNEL", "TRAINCTL_STOP_FILE", "ASCEND_DEVICE_ID"):
        spec = tmp_path / "env.yaml"
        spec.write_text(f'name: env\ncommand: ["true"]\nenv: {{{var}: x}}\n')
        p = run_tc("run", spec)
        assert p.returncode == 2 and var in p.stderr, (var, p.stderr)
