"""--set KEY=VALUE overrides on run, submit and clone (and the API's "set"),
options after the spec file, did-you-mean for commands and options, shell
completion, and the override examples of docs/spec.md run for real.

Every bad override exits 2 with a message naming it, and records nothing."""
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import REPO, bash_complete, trainctl_path
from server_fixture import start_server

SPEC = """name: ov
command: ["/bin/sh", "-c", "echo args=$* per_node=$LOCAL_WORLD_SIZE dbg=$NCCL_DEBUG", "sh"]
args: {lr: 0.1}
devices: {type: cpu, per_node: 1}
"""


def write(tmp_path, text=SPEC, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def nothing_recorded(run_tc, home):
    p = run_tc("ps", "-a", "--format", "csv", "-o", "id")
    assert p.returncode == 0 and p.stdout.strip() in ("", "id"), p.stdout
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_every_family_reaches_the_workers(run_tc, tmp_path):
    spec = write(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("x")
    p = run_tc("run", spec, "--set", "args.lr=0.01", "--set", "args.model.depth=3",
               "--set", "devices.per_node=2", "--set", "env.NCCL_DEBUG=INFO",
               "--set", "restart.max_restarts=2", "--set", "restart.grace_seconds=7",
               "--set", "checkpoint.keep=3", "--set", "metrics.format=none", "--set", "priority=7",
               "--set", "preemptible=true", "--set", "framework=paddle", "--set", "name=ov2",
               "--set", f"workdir={tmp_path}", "--set", "nodes=1", "--set", "backend=local",
               "--set", "outputs.upload_to=" + str(tmp_path / "up"),
               "--set", "inputs=[{from: " + str(tmp_path / "data") + ", to: d}]")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("args=--lr 0.01 --model.depth 3 per_node=2 dbg=INFO") == 2, p.stdout
    j = json.loads(run_tc("show", "ov2", "--json").stdout)
    s = j["spec"]
    assert s["devices"]["per_node"] == 2 and s["args"] == {"lr": "0.01", "model.depth": "3"}
    assert s["restart"] == {"max_restarts": 2, "grace_seconds": 7} and s["checkpoint"]["keep"] == 3
    assert s["priority"] == 7 and s["preemptible"] is True and s["framework"] == "paddle"
    assert s["metrics"]["format"] == "none" and s["inputs"][0]["to"] == "d"
    # show marks which keys came from overrides, in order, values as given
    assert list(s["overrides"])[:4] == ["args.lr", "args.model.depth", "devices.per_node", "env.NCCL_DEBUG"]
    assert s["overrides"]["devices.per_node"] == "2"
    assert "overrides" not in json.loads(run_tc("show", "--json", j["id"]).stdout)["spec"]["env"]
    text = run_tc("show", "ov2").stdout
    assert re.search(r"^overrides  args\.lr=0\.01 args\.model\.depth=3 devices\.per_node=2 ", text, re.M), text
    # the run folder's job.yaml keeps the record and loads again as a spec
    run_dir = j["run_dir"]
    p = run_tc("run", "--quiet", os.path.join(run_dir, "job.yaml"), "--set", "args.lr=0.5")
    assert p.returncode == 0, p.stderr
    s2 = json.loads(run_tc("show", "ov2", "--json").stdout)["spec"]
    assert s2["overrides"]["args.lr"] == "0.5" and s2["overrides"]["devices.per_node"] == "2"


def test_whole_values_and_string_commands(run_tc, tmp_path):
    spec = write(tmp_path)
    p = run_tc("run", spec, "--set", 'command=["/bin/sh", "-c", "echo list $0", "x"]', "--set", "args={}")
    assert p.returncode == 0 and "list x" in p.stdout, p.stderr
    p = run_tc("run", spec, "--set", "command=echo shell $NCCL_DEBUG", "--set", "env={NCCL_DEBUG: WARN}",
               "--set", "args.verbose=")
    assert p.returncode == 0 and "shell WARN" in p.stdout, p.stderr
    s = json.loads(run_tc("show", "ov", "--json").stdout)["spec"]
    assert s["command"] == "echo shell $NCCL_DEBUG" and s["args"] == {"lr": "0.1", "verbose": None}
    p = run_tc("run", spec, "--set", "command.3=--flag", "--quiet")
    assert p.returncode == 0, p.stderr
    assert json.loads(run_tc("show", "ov", "--json").stdout)["spec"]["command"][3] == "--flag"


BAD = [
    ("devices.per_nod=4", "--set devices.per_nod=4: unknown key 'per_nod' (did you mean 'per_node'?)"),
    ("devics.per_node=4", "--set devics.per_node=4: unknown key 'devics' (did you mean 'devices'?)"),
    ("devices.per_node=two", "--set devices.per_node=two: devices.per_node: must be an integer, not 'two'"),
    ("devices.per_node=0", "--set devices.per_node=0: devices.per_node: must be at least 1 (a job needs a device)"),
    ("devices.type=gpu", "--set devices.type=gpu: devices.type: 1 gpu device requested"),
    ("env.RANK=1", "--set env.RANK=1: env: 'RANK' is set by trainctl for each worker"),
    ("args.lr=[1, 2]", "--set args.lr=[1, 2]: args: 'lr' must be a single value"),
    ("restart.max_restarts=-1", "--set restart.max_restarts=-1: restart.max_restarts: must be between 0 and 1000, not -1"),
    ("nodes=2", "--set nodes=2: nodes: 2 nodes need backend: slurm"),
    ("command=[pyhton3]", "--set command=[pyhton3]: command: 'pyhton3' is not found on PATH (did you mean 'python3'?)"),
    ("command.7=x", "--set command.7=x: 'command' is a list of 4: give an index 0..3, not '7'"),
    ("name.first=x", "--set name.first=x: 'name' is a single value, not a mapping or list"),
    ("args.lr", "--set args.lr: give KEY=VALUE (KEY a dotted path such as args.lr)"),
    ("args..lr=1", "--set args..lr=1: 'args..lr' has an empty part (keys are joined by single dots)"),
    ("overrides.x=1", "--set overrides.x=1: overrides: is trainctl's record of --set, not a key to set"),
    ("args.lr=[1, 2", "--set args.lr=[1, 2: the value is not YAML:"),
    ("args.lr=a: b", "--set args.lr=a: b: the value must be one YAML scalar or a flow collection"),
]


@pytest.mark.parametrize("set_,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_override_exits_2_and_records_nothing(run_tc, home, tmp_path, set_, msg):
    spec = write(tmp_path)
    p = run_tc("run", spec, "--set", "args.lr=1", "--set", set_, env={"TRAINCTL_FAKE_DEVICES": None})
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("trainctl: " + msg), p.stderr
    nothing_recorded(run_tc, home)


def test_set_needs_a_spec_file(run_tc, home):
    p = run_tc("run", "--set", "args.lr=1", "--", "true")
    assert p.returncode == 2 and "--set needs a spec file" in p.stderr
    nothing_recorded(run_tc, home)


def test_options_after_the_spec_file(run_tc, tmp_path):
    spec = write(tmp_path)
    p = run_tc("run", spec, "--quiet", "--name", "late")
    assert p.returncode == 0, p.stderr
    assert "args=" not in p.stdout and "late" in run_tc("ps", "-a").stdout
    # after --, everything is the command, options included
    p = run_tc("run", "--", "/bin/sh", "-c", "echo got $0", "--quiet")
    assert p.returncode == 0 and "got --quiet" in p.stdout, p.stderr
    p = run_tc("run", "-q", "--", "/bin/sh", "-c", "echo got $0", "--quiet")
    assert p.returncode == 0 and "got --quiet" not in p.stdout
    # a spec file and a command is still one too many
    p = run_tc("run", spec, "--", "true")
    assert p.returncode == 2 and "one spec file, or use -- before a command" in p.stderr
    p = run_tc("run", spec, spec)
    assert p.returncode == 2 and "one spec file" in p.stderr


@pytest.mark.parametrize("args,msg", [
    (["rnu"], "trainctl: 'rnu' is not a command (did you mean 'run'?)"),
    (["sohw", "x"], "trainctl: 'sohw' is not a command (did you mean 'show'?)"),
    (["run", "job.yaml", "--quite"], "trainctl: run: unknown option '--quite' (did you mean '--quiet'?)"),
    (["run", "--sett", "a=1", "job.yaml"], "trainctl: run: unknown option '--sett' (did you mean '--set'?)"),
    (["ps", "--formt", "csv"], "trainctl: ps: unknown option '--formt' (did you mean '--format'?)"),
    (["logs", "x", "--tial", "3"], "trainctl: logs: unknown option '--tial' (did you mean '--tail'?)"),
    (["submit", "--nmae", "x", "job.yaml"], "trainctl: submit: unknown option '--nmae' (did you mean '--name'?)"),
    (["run", "--name"], "trainctl: run: option '--name' needs a value"),
    (["ps", "-x"], "trainctl: ps: unknown option '-x' (see trainctl ps --help)"),
    (["compare", "--steps=1", "a", "b"], "trainctl: compare: option '--steps' takes no value"),
    (["ps", "--json=yes"], "trainctl: ps: option '--json' takes no value"),
])
def test_did_you_mean(run_tc, args, msg):
    p = run_tc(*args)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[0] == msg, p.stderr


def test_stop_takes_no_set(run_tc):
    p = run_tc("stop", "x", "--set", "a=1")
    assert p.returncode == 2 and "--set is for run, submit and clone" in p.stderr


# ---- completion ----


def test_bash_completion(trainctl, run_tc, home, tmp_path):
    write(tmp_path, name="job.yaml")
    (tmp_path / "notes.txt").write_text("x")
    assert run_tc("run", "-q", "--name", "alpha", "--", "true").returncode == 0
    ids = json.loads(run_tc("ps", "-a", "--json").stdout)
    job = ids[0]["id"] if isinstance(ids, list) else ids["jobs"][0]["id"]
    assert bash_complete(trainctl, home, ["ru"]) == ["run"]
    assert "completion" in bash_complete(trainctl, home, [""]) and "show" in bash_complete(trainctl, home, [""])
    assert bash_complete(trainctl, home, ["run", "job.yaml", "--qu"]) == ["--quiet"]
    assert bash_complete(trainctl, home, ["run", "--se"]) == ["--set"]
    assert bash_complete(trainctl, home, ["clone", "--s"]) == ["--server", "--set"]
    assert bash_complete(trainctl, home, ["run", "--set", ""]) == []
    assert bash_complete(trainctl, home, ["run", "--backend", "sl"]) == ["slurm"]
    assert bash_complete(trainctl, home, ["show", ""]) == [job, "alpha"]
    assert bash_complete(trainctl, home, ["logs", "al"]) == ["alpha"]
    assert bash_complete(trainctl, home, ["run", "--resume", job[:4]]) == [job]
    assert bash_complete(trainctl, home, ["completion", ""]) == ["bash", "zsh"]
    # run and submit offer spec files (and folders), not other files
    got = bash_complete(trainctl, home, ["run", tmp_path.name + "/"])
    assert sorted(got) == [f"{tmp_path.name}/job.yaml", f"{tmp_path.name}/trainctl-home"], got
    # after --: a program, then anything
    assert "true" in bash_complete(trainctl, home, ["run", "--", "tru"])


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is in scripts/install-deps.sh")
def test_zsh_completion(trainctl, run_tc, home):
    assert run_tc("run", "-q", "--name", "beta", "--", "true").returncode == 0
    stubs = r"""
compdef() { print -r -- "compdef $*" }
compadd() { if [[ $1 == -a ]]; then print -r -- "compadd ${(P)2}"; else print -r -- "compadd $*"; fi }
_describe() { print -r -- "describe ${(P)4}" }
_files() { print -r -- "files $*" }
_command_names() { print -r -- "commands" }
"""
    script = subprocess.run([str(trainctl), "completion", "zsh"], capture_output=True, text=True, check=True).stdout
    assert script.startswith("#compdef trainctl\n")
    calls = [("sh", ""), ("run --q", ""), ("show ''", ""), ("run ''", ""), ("run --backend ''", "")]
    body = stubs + "source /dev/stdin <<'EOF'\n" + script + "EOF\n"
    for words, _ in calls:
        body += f"words=({shlex.quote(str(trainctl))} {words}); CURRENT=${{#words}}; _trainctl\n"
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    p = subprocess.run(["zsh", "-f", "-c", body], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == "compdef _trainctl trainctl"
    assert out[1].startswith("describe run:run a job") and "show:show a job" in out[1]
    assert "logs:print or follow a job's logs" in out[1]  # quoted for zsh, read back whole
    assert out[2] == "compadd --quiet" or out[2].startswith("compadd --backend") and "--quiet" in out[2]
    assert re.match(r"compadd \S+ beta$", out[3]), out[3]
    assert out[4] == "files -g *.(yaml|yml|json)"
    assert out[5] == "compadd local slurm"


def test_completion_usage(run_tc):
    p = run_tc("completion", "fish")
    assert p.returncode == 2 and "completion: give bash or zsh" in p.stderr


# ---- through the server ----

@pytest.fixture
def srv(trainctl, tmp_path):
    s = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    yield s
    s.stop()


def test_submit_and_clone_with_set(srv, tmp_path):
    spec = write(tmp_path)
    p = srv.cli("submit", spec, "--set", "args.lr=0.01", "--set", "env.NCCL_DEBUG=INFO", "--json")
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)["id"]
    j = srv.wait_state(job, "succeeded")
    assert j["spec"]["overrides"] == {"args.lr": "0.01", "env.NCCL_DEBUG": "INFO"}
    st, logs = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    assert "args=--lr 0.01 per_node=1 dbg=INFO" in logs, logs
    # clone with more overrides: the record grows, the clone's values are the new ones
    p = srv.cli("clone", job, "--set", "args.lr=0.001", "--set", "devices.per_node=2")
    assert p.returncode == 0, p.stderr
    clone = p.stdout.strip()
    c = srv.wait_state(clone, "succeeded")
    assert c["spec"]["args"] == {"lr": "0.001"} and c["spec"]["devices"]["per_node"] == 2
    assert c["spec"]["overrides"] == {"env.NCCL_DEBUG": "INFO", "args.lr": "0.001", "devices.per_node": "2"}
    assert "overrides  env.NCCL_DEBUG=INFO args.lr=0.001 devices.per_node=2" in srv.cli("show", clone).stdout
    # the API: "set" in the body of a submission and of a clone
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": SPEC, "file": "job.yaml", "base": str(tmp_path),
                                                 "set": ["args.lr=5"]})
    assert st == 201, body
    assert srv.wait_state(body["id"], "succeeded")["spec"]["args"] == {"lr": "5"}
    st, body = srv.call("POST", f"/api/v1/jobs/{job}/clone", {"set": ["name=api-clone"]})
    assert st == 201 and body["name"] == "api-clone", body


def test_bad_set_through_the_server(srv, tmp_path):
    spec = write(tmp_path)
    p = srv.cli("submit", spec, "--set", "devices.per_nod=2")
    assert p.returncode == 2, p.stderr
    assert "--set devices.per_nod=2: unknown key 'per_nod' (did you mean 'per_node'?)" in p.stderr
    p = srv.cli("submit", spec, "--set", "nope")
    assert p.returncode == 2 and "--set nope: give KEY=VALUE" in p.stderr
    for body, msg in [({"spec": SPEC, "set": "args.lr=1"}, "'set' must be a list"),
                      ({"spec": SPEC, "set": [1]}, "set[0]: must be a \"KEY=VALUE\" string"),
                      ({"spec": SPEC, "set": ["devices.per_node=x"]}, "--set devices.per_node=x: devices.per_node: must be an integer")]:
        st, b = srv.call("POST", "/api/v1/jobs", body)
        assert st == 400 and msg in b["error"], b
    st, b = srv.call("GET", "/api/v1/jobs")
    assert b["total"] == 0, b
    # a clone's bad override: 400, no new job
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": SPEC, "base": str(tmp_path)})
    job = body["id"]
    st, b = srv.call("POST", f"/api/v1/jobs/{job}/clone", {"set": ["restart.max_restarts=x"]})
    assert st == 400 and "--set restart.max_restarts=x: restart.max_restarts: must be an integer" in b["error"], b
    st, b = srv.call("POST", f"/api/v1/jobs/{job}/clone", {"set": "x"})
    assert st == 400, b
    st, b = srv.call("GET", "/api/v1/jobs")
    assert b["total"] == 1, b


# ---- the override examples of docs/spec.md ----

def doc_runs():
    text = (REPO / "docs" / "spec.md").read_text()
    blocks = [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]
    files = {}
    for lang, body in blocks:
        m = re.match(r"# example: (\S+)\n", body)
        if m:
            files[m.group(1)] = body
    out = []
    for i, (lang, body) in enumerate(blocks):
        m = re.match(r"# (bad )?with: (\S+)\n", body)
        if lang != "sh" or not m:
            continue
        expect = blocks[i + 1][1].strip() if m.group(1) else None
        out.append(pytest.param(m.group(2), files[m.group(2)], body, expect, id=f"spec.md:{i}"))
    return out


def test_doc_has_override_examples():
    assert len(doc_runs()) >= 3


@pytest.mark.parametrize("name,spec,body,expect", doc_runs())
def test_doc_override_example(home, tmp_path, name, spec, body, expect):
    (tmp_path / name).write_text(spec)
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env["PATH"] = f"{trainctl_path().parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("TRAINCTL_SERVER", None)
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    if expect is None:
        assert p.returncode == 0, p.stderr
        for want in re.findall(r"^# expect: (.+)$", body, re.M):
            assert want in p.stdout, f"'{want}' not in:\n{p.stdout}"
    else:
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == expect
