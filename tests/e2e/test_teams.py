"""Teams on trainctl server (docs/server.md, "Teams"): a team borrows idle
devices beyond its guarantee, and when another team wants its guarantee
back, the newest borrowed job is preempted (with its checkpoint), queued
again, and later finishes with its progress kept.  Bad settings files and a
bad reload are refused with the file, line and key.  Devices are fake
(TRAINCTL_FAKE_DEVICES); the workers are shell scripts."""
import json
import getpass
import os
import signal
import subprocess

import pytest

from conftest import holds_for, wait_until
from server_fixture import counter, held, start_server  # noqa: F401  (counter: the fixture)

ME = getpass.getuser()


def config(tmp_path, text, name="server.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


TEAMS = f"""\
teams:
  vision:
    members: [{ME}]
    guarantee: {{gpu: 2}}
    borrow: {{gpu: 2}}
    default: true
  nlp:
    members: [{ME}]
    guarantee: {{gpu: 2}}
"""


def submit(srv, spec, team=None):
    body = {"spec": spec}
    if team:
        body["team"] = team
    st, out = srv.call("POST", "/api/v1/jobs", body)
    assert st == 201, out
    return out["id"]


def team(srv, name):
    st, body = srv.call("GET", f"/api/v1/teams/{name}")
    assert st == 200, body
    return body


def test_borrow_then_reclaim_with_checkpoint(trainctl, tmp_path, counter):
    conf = config(tmp_path, TEAMS)
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:4", args=["--config", str(conf)])
    try:
        release_old = tmp_path / "release-old"
        release_new = tmp_path / "release-new"
        old = submit(srv, held(release_old, name="old", devices={"type": "gpu", "per_node": 2}))
        srv.wait_state(old, "running")
        # vision's guarantee is 2: this one borrows nlp's idle devices
        new = submit(srv, {"name": "new", "command": [counter, "20"],
                           "devices": {"type": "gpu", "per_node": 2},
                           "restart": {"grace_seconds": 5},
                           "env": {"HOLD_AT": "3", "RELEASE": str(release_new)}})
        srv.wait_state(new, "running")
        wait_until(lambda: len(srv.job(new)["checkpoints"]) >= 3, what="3 checkpoints of 'new'")
        t = team(srv, "vision")
        assert t["in_use"] == {"gpu": 4} and t["borrowed"] == {"gpu": 2}, t
        assert t["guarantee"] == {"gpu": 2} and t["borrow"] == {"gpu": 2}, t
        # the CLI shows the same
        ls = srv.cli("team", "ls")
        assert ls.returncode == 0, ls.stderr
        assert "vision" in ls.stdout and "nlp" in ls.stdout, ls.stdout
        show = srv.cli("team", "show", "vision")
        assert show.returncode == 0, show.stderr
        assert "borrowed     gpu:2" in show.stdout, show.stdout
        # the same in the Prometheus series
        st, text = srv.call("GET", "/metrics")
        assert st == 200, text
        for line in ('trainctl_team_devices_in_use{team="vision",type="gpu"} 4',
                     'trainctl_team_devices_borrowed{team="vision",type="gpu"} 2',
                     'trainctl_team_devices_guaranteed{team="nlp",type="gpu"} 2',
                     'trainctl_team_queue_length{team="nlp"} 0'):
            assert line in text.splitlines(), [l for l in text.splitlines() if "team" in l]
        # vision may borrow no more: a fifth device is past guarantee + borrow
        # nlp wants its guarantee back: the newest borrower ('new') is preempted, 'old' is not
        b = srv.cli("submit", str(write_spec(tmp_path, "b.yaml", "b", 2, 1)), "--team", "nlp")
        assert b.returncode == 0, b.stderr
        bid = b.stdout.strip()
        jb = srv.wait_state(bid, "succeeded", timeout=180)
        jn = srv.job(new)
        states = [e["state"] for e in jn["events"]]
        assert "preempted" in states, states
        pre = [e["time"] for e in jn["events"] if e["state"] == "preempted"][0]
        start_b = [e["time"] for e in jb["events"] if e["state"] == "starting"][0]
        assert start_b >= pre
        assert srv.job(old)["state"] == "running"
        assert "reclaim" in srv.log(), srv.log()[-3000:]
        release_new.touch()
        jn = srv.wait_state(new, "succeeded", timeout=180)
        st, log = srv.call("GET", f"/api/v1/jobs/{new}/logs?rank=0")
        resumed = [l for l in log.splitlines() if l.startswith("resumed at ")]
        assert resumed and int(resumed[0].split()[-1]) >= 3, log
        assert log.rstrip().endswith("finished at 20")
        release_old.touch()
        srv.wait_state(old, "succeeded")
        assert "preempted" not in [e["state"] for e in srv.job(old)["events"]]
        # usage by team: each interval names the team its job was submitted for
        st, use = srv.call("GET", "/api/v1/usage?since=2026-01-01&by=team")
        assert st == 200, use
        groups = {r["group"]: r for r in use["rows"]}
        assert set(groups) == {"vision", "nlp"}, use
        assert groups["vision"]["jobs"] == 2 and groups["nlp"]["jobs"] == 1, use
    finally:
        srv.stop()


def write_spec(tmp_path, name, job, gpus, seconds):
    p = tmp_path / name
    p.write_text(f"name: {job}\ncommand: sleep {seconds}\ndevices: {{type: gpu, per_node: {gpus}}}\n")
    return p


def test_team_limit_and_the_admission_door(trainctl, tmp_path):
    conf = config(tmp_path, TEAMS + "  other:\n    members: [nobody-teams-test]\n")
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:4", args=["--config", str(conf)])
    try:
        spec = write_spec(tmp_path, "one.yaml", "one", 1, 1)
        r = srv.cli("submit", str(spec), "--team", "other")
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert f"user '{ME}' is not a member of team 'other'" in r.stderr, r.stderr
        r = srv.cli("submit", str(spec), "--team", "nosuch")
        assert r.returncode == 2 and "team 'nosuch' does not exist" in r.stderr, r.stderr
        # nlp: guarantee 2, borrow 0: a third device waits for the team, not for devices
        release = tmp_path / "release"
        a = submit(srv, held(release, name="a", devices={"type": "gpu", "per_node": 2}), team="nlp")
        srv.wait_state(a, "running")
        c = submit(srv, held(release, name="c"), team="nlp")
        holds_for(lambda: srv.job(c)["state"] == "queued", 1.0, "nlp's third device waits")
        t = team(srv, "nlp")
        assert t["waiting_jobs"] == 1 and t["waiting"][0]["id"] == c, t
        assert t["waiting"][0]["why"] == "team limit", t
        show = srv.cli("team", "show", "nlp")
        assert f"waiting: {c} ({ME}, gpu:1) for team limit" in show.stdout, show.stdout
        # `trainctl queue` says the same, in start order
        q = srv.cli("queue", "--json")
        assert q.returncode == 0, q.stderr
        (row,) = json.loads(q.stdout)["jobs"]
        assert (row["position"], row["id"], row["team"], row["name"]) == (1, c, "nlp", "c"), row
        assert row["why"] == "its team nlp would hold more than its guarantee plus what it " \
                             "may borrow (2 + 0 gpu)", row
        q = srv.cli("queue")
        assert q.returncode == 0, q.stderr
        assert c in q.stdout and "its team nlp would hold more" in q.stdout, q.stdout
        release.touch()
        srv.wait_state(c, "succeeded")
        st, body = srv.call("GET", "/api/v1/teams/nosuch")
        assert st == 404, body
    finally:
        srv.stop()


BAD = [
    ("teams:\n  vision:\n    members: [a]\n    guarantee: {gpu: 1}\n    colour: red\n",
     ":5:", "teams.vision: unknown key 'colour'"),
    (f"teams:\n  a:\n    members: [{ME}]\n  b:\n    members: [{ME}]\n",
     ":2:", f"user '{ME}' is in team 'a' and team 'b'"),
    ("teams:\n  a:\n    members: [x]\n    guarantee: {gpu: 3}\n  b:\n    members: [y]\n"
     "    guarantee: {gpu: 2}\n", ":4:", "teams.a.guarantee.gpu: the teams are guaranteed 5 gpu"),
    ("teams:\n  a:\n    members: [x]\n    guarantee: {gpx: 1}\n", ":4:", "'gpx' is not a device type"),
]


@pytest.mark.parametrize("text,line,msg", BAD)
def test_bad_config_exits_2_naming_file_line_and_key(trainctl, tmp_path, text, line, msg):
    conf = config(tmp_path, text)
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"), TRAINCTL_FAKE_DEVICES="gpu:4")
    r = subprocess.run([str(trainctl), "server", "--config", str(conf), "--listen", "127.0.0.1:0"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{conf}{line}" in r.stderr and msg in r.stderr, r.stderr


def test_reload_applies_and_a_bad_reload_keeps_the_old(trainctl, tmp_path):
    conf = config(tmp_path, TEAMS)
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:4", args=["--config", str(conf)])
    try:
        release = tmp_path / "release"
        a = submit(srv, held(release, name="a"), team="nlp")
        srv.wait_state(a, "running")
        conf.write_text(TEAMS + "  speech:\n    members: [nobody-teams-test]\n")
        r = srv.cli("server", "reload")
        assert r.returncode == 0, r.stderr
        st, body = srv.call("GET", "/api/v1/teams")
        assert [t["name"] for t in body["teams"]] == ["vision", "nlp", "speech"], body
        # a bad file: the reload is refused with the reason, the old teams stay
        conf.write_text(TEAMS + "  speech:\n    members: [x]\n    borow: {gpu: 1}\n")
        r = srv.cli("server", "reload")
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert f"{conf}:12: teams.speech: unknown key 'borow'" in r.stderr, r.stderr
        st, body = srv.call("GET", "/api/v1/teams")
        assert len(body["teams"]) == 3, body
        # SIGHUP reads it too; a bad file is logged and changes nothing
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "reload: kept the old settings" in srv.log(), what="the log of a bad reload")
        conf.write_text(TEAMS)
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: len(srv.call("GET", "/api/v1/teams")[1]["teams"]) == 2,
                   what="the reload after SIGHUP")
        assert srv.job(a)["state"] == "running"  # jobs go on through reloads
        release.touch()
        srv.wait_state(a, "succeeded")
    finally:
        srv.stop()


def test_the_docs_example_loads(trainctl, tmp_path):
    """docs/server.md's teams example is a file a server starts with."""
    from conftest import REPO
    import re
    m = re.search(r"```yaml\n(# teams example.*?)```", (REPO / "docs" / "server.md").read_text(), re.S)
    assert m, "docs/server.md has no ```yaml block starting '# teams example'"
    conf = config(tmp_path, m.group(1))
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:8", args=["--config", str(conf), "--cpu-slots", "8"])
    try:
        r = srv.cli("team", "ls")
        assert r.returncode == 0, r.stderr
        assert "vision" in r.stdout and "nlp" in r.stdout, r.stdout
        t = team(srv, "vision")
        assert t["members"] == ["alice", "bob", "@cv"] and t["default"] is True, t
        assert t["guarantee"] == {"gpu": 4, "cpu": 8} and t["borrow"] == {"gpu": 2, "cpu": 0}, t
    finally:
        srv.stop()
