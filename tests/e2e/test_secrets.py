"""Secrets (issue 13, docs/security.md): `trainctl secret set|list|rm`, env:
values {secret: NAME} and {file: PATH}, without a server and through a root
server with two real accounts (useradd, removed afterwards).

What is proved: a job gets its secret in its environment; the value never
appears in show, the API's job JSON (what the UI shows), job.yaml, job.env
or --set's record, and the job's own printing of it is *** in its logs; one
user can neither list, read nor use another's; a file value is read as the
job's user, so a file that user cannot read fails the job naming it."""
import json
import os
import stat
import subprocess

import pytest

from server_fixture import root_server

VALUE = "hf_s3cr3t-VALUE-4711"


def spec_text(env, cmd='printf %s "$TOK" > "$TRAINCTL_OUTPUT_DIR/tok"; echo "token is $TOK"'):
    return ("name: sec\n"
            f"command: {json.dumps(cmd)}\n"
            f"env: {json.dumps(env)}\n"
            "devices: {type: cpu, per_node: 1}\n")


def everything_of(run_dir):
    """Every file of a run folder but the job's own output/ (where the tests'
    jobs write what they got) as one text, to look for the value in."""
    out = ""
    for root, dirs, files in os.walk(run_dir):
        if root == str(run_dir):
            dirs[:] = [d for d in dirs if d != "output"]
        for f in files:
            p = os.path.join(root, f)
            if os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                out += f"--- {p}\n" + fh.read().decode(errors="replace")
    return out


# ---- without a server ----

def test_local_set_list_rm(run_tc, home):
    p = run_tc("secret", "set", "tok", input=VALUE + "\n")
    assert p.returncode == 0, p.stderr
    assert VALUE not in p.stdout + p.stderr
    d = home / "secrets"
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d / "tok").st_mode) == 0o600
    assert (d / "tok").read_text() == VALUE  # the trailing newline dropped
    p = run_tc("secret", "list")
    assert p.returncode == 0 and p.stdout.split() == ["tok"]
    assert json.loads(run_tc("secret", "list", "--json").stdout) == {"secrets": ["tok"]}
    # never a value on the command line; never a name that walks out of the store
    p = run_tc("secret", "set", "tok", VALUE, input="")
    assert p.returncode == 2 and "never from the command line" in p.stderr
    for bad in ("../x", ".hidden", "a/b"):
        p = run_tc("secret", "set", bad, input="v\n")
        assert p.returncode == 2 and "is not a secret name" in p.stderr, p.stderr
    assert not (home / "x").exists()
    p = run_tc("secret", "set", "empty", input="")
    assert p.returncode == 2 and "empty" in p.stderr
    assert run_tc("secret", "rm", "tok").returncode == 0
    p = run_tc("secret", "rm", "tok")
    assert p.returncode == 2 and "no secret 'tok'" in p.stderr
    assert run_tc("secret", "list").stdout == ""


def test_local_job_gets_secret_never_shown(run_tc, home, tmp_path):
    assert run_tc("secret", "set", "tok", input=VALUE).returncode == 0
    (tmp_path / "file.txt").write_text("from-a-file-0815\n")
    (tmp_path / "job.yaml").write_text(spec_text(
        {"TOK": {"secret": "tok"}, "F": {"file": "file.txt"}, "PLAIN": "hello"},
        cmd='printf %s "$TOK" > "$TRAINCTL_OUTPUT_DIR/tok"; printf %s "$F" > "$TRAINCTL_OUTPUT_DIR/f";'
            ' echo "token is $TOK, file is $F, plain is $PLAIN"'))
    p = run_tc("run", str(tmp_path / "job.yaml"), "--set", "env.EXTRA={secret: tok}")
    assert p.returncode == 0, p.stderr
    # the console's copy of the output is masked too
    assert VALUE not in p.stdout + p.stderr and "token is ***, file is ***, plain is hello" in p.stdout
    job = json.loads(run_tc("ps", "-a", "--json").stdout)
    job = job[0] if isinstance(job, list) else job["jobs"][0]
    run_dir = home / "runs" / job["id"]
    # the workers had the values
    assert (run_dir / "output" / "tok").read_text() == VALUE
    assert (run_dir / "output" / "f").read_text() == "from-a-file-0815"
    # and nothing on disk or shown holds them
    everything = everything_of(run_dir)
    assert VALUE not in everything and "from-a-file-0815" not in everything
    assert "token is ***, file is ***, plain is hello" in (run_dir / "logs" / "rank-0.log").read_text()
    assert "export TOK='***'" in (run_dir / "job.env").read_text()
    shown = run_tc("show", "--json", job["id"]).stdout + run_tc("show", job["id"]).stdout
    assert VALUE not in shown
    spec = json.loads(run_tc("show", "--json", job["id"]).stdout)["spec"]
    assert spec["env"]["TOK"] == {"secret": "tok"} and spec["env"]["EXTRA"] == {"secret": "tok"}
    assert spec["env"]["F"] == {"file": str(tmp_path / "file.txt")}
    # job.yaml loads again, as a spec, with its sources
    p = run_tc("run", "-q", str(run_dir / "job.yaml"))
    assert p.returncode == 0, p.stderr


def test_local_missing_secret_is_refused_before_the_job(run_tc, tmp_path):
    # issue 29: found at submit (exit 2, nothing recorded), not by the supervisor (exit 3)
    (tmp_path / "job.yaml").write_text(spec_text({"TOK": {"secret": "nope"}}))
    p = run_tc("run", "-q", str(tmp_path / "job.yaml"))
    assert p.returncode == 2, p.stderr
    assert "env: you have no secret nope (trainctl secret set NAME)" in p.stderr, p.stderr
    jobs = json.loads(run_tc("ps", "-a", "--json").stdout)
    assert (jobs if isinstance(jobs, list) else jobs["jobs"]) == []


def test_bad_env_forms_exit_2(run_tc, tmp_path):
    cases = [({"TOK": {"secret": "../etc"}}, "job.yaml:3: env: 'TOK': '../etc' is not a secret name"),
             ({"TOK": {"vault": "x"}}, "job.yaml:3: env: 'TOK' must be a single value, {secret: NAME} or {file: PATH}")]
    for env, msg in cases:
        (tmp_path / "job.yaml").write_text(spec_text(env))
        p = run_tc("run", "-q", str(tmp_path / "job.yaml"))
        assert p.returncode == 2 and msg in p.stderr, p.stderr


# ---- a root server, two accounts ----

@pytest.fixture(scope="module")
def ssec(trainctl):
    with root_server(trainctl, "tc-secrets-", "alice", "bob") as t:
        yield t


def cli(srv, token, *args, input=None):
    env = dict(srv.env, TRAINCTL_SERVER=srv.url, TRAINCTL_TOKEN=token)
    env.pop("TRAINCTL_HOME", None)
    return subprocess.run([str(srv.trainctl)] + list(args), env=env, input=input, capture_output=True,
                          text=True, timeout=60)


def job_spec(env, cmd='printf %s "$TOK" > "$TRAINCTL_OUTPUT_DIR/tok"; echo "token is $TOK"'):
    return {"command": cmd, "workdir": "/tmp", "env": env, "devices": {"type": "gpu", "per_node": 1}}


def ended(srv, job):
    return srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=120)


def test_server_secret_per_user(ssec):
    srv, u, base = ssec
    p = cli(srv, srv.token, "secret", "set", "hf", input=VALUE + "\n")
    assert p.returncode == 0, p.stderr
    assert cli(srv, srv.token, "secret", "list").stdout.split() == ["hf"]
    # kept by the server, for alice alone: root's 0700 folder, a 0600 file
    d = os.path.join(srv.state, "user-secrets", u["alice"])
    st = os.stat(d)
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(d, "hf")).st_mode) == 0o600
    r = subprocess.run(["su", u["bob"], "-c", f"cat {d}/hf"], capture_output=True, text=True)
    assert r.returncode != 0 and VALUE not in r.stdout
    # bob sees none of alice's, and cannot use or remove hers
    assert cli(srv, srv.bob, "secret", "list").stdout == ""
    st_, body = srv.call("GET", "/api/v1/secrets", token=srv.bob)
    assert st_ == 200 and body == {"secrets": []}
    st_, body = srv.call("POST", "/api/v1/jobs", {"spec": job_spec({"TOK": {"secret": "hf"}})}, token=srv.bob)
    assert st_ == 400 and "has no secret hf" in body["error"], body
    p = cli(srv, srv.bob, "secret", "rm", "hf")
    assert p.returncode == 2 and "no secret 'hf'" in p.stderr
    # the API answers names, never values
    st_, body = srv.call("GET", "/api/v1/secrets")
    assert st_ == 200 and body == {"secrets": ["hf"]}
    st_, body = srv.call("POST", "/api/v1/secrets/..", {"value": "x"})
    assert st_ in (400, 404), body

    # alice's job gets it; nothing that shows the job holds it
    job = srv.submit(job_spec({"TOK": {"secret": "hf"}}))
    j = ended(srv, job)
    assert j["state"] == "succeeded", (j, srv.run_logs(job))
    run_dir = os.path.join(srv.state, "runs", job)
    with open(os.path.join(run_dir, "output", "tok")) as f:
        assert f.read() == VALUE
    assert os.stat(os.path.join(run_dir, "output", "tok")).st_uid == int(
        subprocess.run(["id", "-u", u["alice"]], capture_output=True, text=True).stdout)
    assert VALUE not in everything_of(run_dir)
    st_, detail = srv.call("GET", f"/api/v1/jobs/{job}")
    assert st_ == 200 and VALUE not in json.dumps(detail)
    assert detail["spec"]["env"]["TOK"] == {"secret": "hf"}  # what the UI shows
    st_, logs = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    text = json.dumps(logs) if not isinstance(logs, str) else logs
    assert "token is ***" in text and VALUE not in text
    p = cli(srv, srv.token, "show", job)
    assert p.returncode == 0 and VALUE not in p.stdout
    # the server's log never names it either
    assert VALUE not in srv.log()

    # removed: a new job is refused at submit, naming it
    assert cli(srv, srv.token, "secret", "rm", "hf").returncode == 0
    st_, body = srv.call("POST", "/api/v1/jobs", {"spec": job_spec({"TOK": {"secret": "hf"}})})
    assert st_ == 400 and "has no secret hf" in body["error"]


def test_server_file_read_as_the_user(ssec):
    srv, u, base = ssec
    # root may read it; alice may not: the job fails, naming it
    d = os.path.join(base, "rootonly")
    os.makedirs(d, mode=0o700, exist_ok=True)
    secret = os.path.join(d, "key.txt")
    with open(secret, "w") as f:
        f.write("root-only-4711\n")
    os.chmod(secret, 0o600)
    job = srv.submit(job_spec({"TOK": {"file": secret}}))
    j = ended(srv, job)
    assert j["state"] == "failed" and j["exit_code"] == 3, j
    why = json.dumps(j)
    assert secret in why and "env TOK" in why, why
    assert "root-only-4711" not in everything_of(os.path.join(srv.state, "runs", job))
    # one of alice's own: read as alice, given to the job
    mine = os.path.join(base, "alice-key.txt")
    with open(mine, "w") as f:
        f.write("alice-own-0815\n")
    uid = int(subprocess.run(["id", "-u", u["alice"]], capture_output=True, text=True).stdout)
    os.chown(mine, uid, -1)
    os.chmod(mine, 0o600)
    job = srv.submit(job_spec({"TOK": {"file": mine}}))
    j = ended(srv, job)
    assert j["state"] == "succeeded", (j, srv.run_logs(job))
    with open(os.path.join(srv.state, "runs", job, "output", "tok")) as f:
        assert f.read() == "alice-own-0815"


def test_root_cause_is_masked(run_tc, home, tmp_path):
    """A failing job's root cause quotes its error file and log tail: masked too."""
    assert run_tc("secret", "set", "tok", input=VALUE).returncode == 0
    cmd = ('printf \'{"message": {"message": "bad token %s"}}\' "$TOK" > "$TORCHELASTIC_ERROR_FILE";'
           ' echo "failing with $TOK" >&2; exit 1')
    (tmp_path / "job.yaml").write_text(spec_text({"TOK": {"secret": "tok"}}, cmd=cmd))
    p = run_tc("run", "-q", str(tmp_path / "job.yaml"))
    assert p.returncode == 1 and VALUE not in p.stdout + p.stderr, p.stderr
    job = json.loads(run_tc("ps", "-a", "--json").stdout)
    job = job[0] if isinstance(job, list) else job["jobs"][0]
    shown = run_tc("show", "--json", job["id"]).stdout
    assert "bad token ***" in shown and "failing with ***" in shown and VALUE not in shown, shown
