"""Fair share on trainctl server (docs/server.md, "Fair share"): among jobs
of equal priority, the team that used its devices less recently starts
first, though its job was submitted later; the factors and their parts are
in `trainctl queue` and GET /api/v1/queue, and converge as the usage decays
(a half-life of seconds here).  Bad fair_share: settings exit 2 with the
file, line and key; a reload applies them.  Devices are fake
(TRAINCTL_FAKE_DEVICES); the jobs are shell loops held by files."""
import getpass
import json
import os
import subprocess

import pytest

from conftest import wait_until
from server_fixture import held, start_server

ME = getpass.getuser()
HALF_LIFE = 5  # seconds

# a and b: equal guarantees; c holds the third gpu in the middle of the test.
# guarantee 1 + borrow 1: a 3-gpu job waits for its team's limit, using nothing.
TEAMS = f"""\
teams:
  a:
    members: [{ME}]
    guarantee: {{gpu: 1}}
    borrow: {{gpu: 1}}
    default: true
  b:
    members: [{ME}]
    guarantee: {{gpu: 1}}
    borrow: {{gpu: 1}}
  c:
    members: [{ME}]
    guarantee: {{gpu: 1}}
fair_share:
  half_life: {HALF_LIFE}s
"""


def submit(srv, spec, team):
    st, out = srv.call("POST", "/api/v1/jobs", {"spec": spec, "team": team})
    assert st == 201, out
    return out["id"]


def queue(srv):
    st, body = srv.call("GET", "/api/v1/queue")
    assert st == 200, body
    return body


def row(q, job):
    (r,) = [r for r in q["jobs"] if r["id"] == job]
    return r


def team_usage(srv, team):
    st, use = srv.call("GET", "/api/v1/usage?since=2026-01-01&by=team")
    assert st == 200, use
    return sum(r["device_seconds"] for r in use["rows"] if r["group"] == team)


def started(srv, job):
    return [e["time"] for e in srv.job(job)["events"] if e["state"] == "starting"]


def test_the_team_that_used_less_starts_first_and_factors_converge(trainctl, tmp_path):
    conf = tmp_path / "server.yaml"
    conf.write_text(TEAMS)
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:3", args=["--config", str(conf)])
    try:
        # team a runs first and accrues usage: 2 gpus for 5 s or more
        warm_release = tmp_path / "warm"
        warm = submit(srv, held(warm_release, name="warm", devices={"type": "gpu", "per_node": 2}), "a")
        srv.wait_state(warm, "running")
        wait_until(lambda: team_usage(srv, "a") >= 10, what="10 device-seconds of team a")
        warm_release.touch()
        srv.wait_state(warm, "succeeded")
        # every gpu busy: one job of each team, each inside its guarantee
        rel_ab, rel_c = tmp_path / "release-ab", tmp_path / "release-c"
        blockers = [submit(srv, held(rel_ab, name="block-a"), "a"),
                    submit(srv, held(rel_ab, name="block-b"), "b"),
                    submit(srv, held(rel_c, name="block-c"), "c")]
        for j in blockers:
            srv.wait_state(j, "running")
        # equal priority; a's job first
        a2 = submit(srv, held(rel_ab, name="a2"), "a")
        b2 = submit(srv, held(rel_ab, name="b2"), "b")
        q = wait_until(lambda: (lambda q: q if [r["id"] for r in q["jobs"]] == [b2, a2] else None)(queue(srv)),
                       what=lambda: f"b2 ahead of a2 in the queue: {queue(srv)}")
        assert q["fair_share"] == {"enabled": True, "half_life": HALF_LIFE}, q
        fa, fb = row(q, a2)["fair_share"], row(q, b2)["fair_share"]
        assert 0 < fa["factor"] < fb["factor"] <= 1, (fa, fb)
        assert fa["team_usage"] > fb["team_usage"] >= 0, (fa, fb)
        assert fa["team_share"] == fb["team_share"] == pytest.approx(1 / 3), (fa, fb)
        assert fa["user_usage"] == pytest.approx(fa["team_usage"]), fa  # one user in the team
        # the CLI shows the factor and its parts
        r = srv.cli("queue")
        assert r.returncode == 0, r.stderr
        assert "FAIR (TEAM/SHARE USER)" in r.stdout, r.stdout
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("2 ") and a2 in ln]
        assert line and "/33% " in line[0], r.stdout
        js = json.loads(srv.cli("queue", "--json").stdout)
        assert "factor" in row(js, a2)["fair_share"], js
        # one gpu frees: b's job starts, though a's was submitted first
        rel_c.touch()
        srv.wait_state(b2, "running")
        assert srv.job(a2)["state"] == "queued"
        rel_ab.touch()
        for j in [b2, a2] + blockers:
            srv.wait_state(j, "succeeded")
        assert started(srv, b2)[0] < started(srv, a2)[0]
        # the machine idle; two jobs that wait for their team's limit use nothing:
        # a's lead decays, and the factors converge to 1
        never = tmp_path / "never"
        a3 = submit(srv, held(never, name="a3", devices={"type": "gpu", "per_node": 3}), "a")
        b3 = submit(srv, held(never, name="b3", devices={"type": "gpu", "per_node": 3}), "b")

        def converged():
            q = queue(srv)
            fa, fb = row(q, a3)["fair_share"], row(q, b3)["fair_share"]
            return fa["factor"] > 0.99 and fb["factor"] > 0.99 and abs(fa["factor"] - fb["factor"]) < 0.005

        wait_until(converged, timeout=180, step=0.5, what=lambda: f"the factors to converge: {queue(srv)}")
        # a reload applies the file's fair_share: off, back to priority then submission
        conf.write_text(TEAMS.replace(f"  half_life: {HALF_LIFE}s\n", "  enabled: false\n"))
        r = srv.cli("server", "reload")
        assert r.returncode == 0, r.stderr
        q = queue(srv)
        assert q["fair_share"]["enabled"] is False, q
        assert [r["id"] for r in q["jobs"]] == [a3, b3], q
        assert all(r["fair_share"] is None for r in q["jobs"]), q
    finally:
        srv.stop()


BAD = [
    ("fair_share:\n  half_life: soon\n", ":2:", "fair_share.half_life: must be a duration"),
    ("fair_share:\n  enabled: maybe\n", ":2:", "fair_share.enabled: must be true or false"),
    ("fair_share:\n  half_lif: 7d\n", ":2:", "fair_share: unknown key 'half_lif'"),
]


@pytest.mark.parametrize("text,line,msg", BAD)
def test_bad_fair_share_exits_2_naming_file_line_and_key(trainctl, tmp_path, text, line, msg):
    conf = tmp_path / "server.yaml"
    conf.write_text(text)
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"), TRAINCTL_FAKE_DEVICES="gpu:2")
    r = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{conf}{line}" in r.stderr and msg in r.stderr, r.stderr
    r = subprocess.run([str(trainctl), "server", "--fair-share-half-life", "soon"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--fair-share-half-life takes a duration" in r.stderr, r.stderr


def test_the_docs_settings_pass_check_config(trainctl, tmp_path):
    """docs/server.md's fair_share: block is a file --check-config takes."""
    import re
    from conftest import REPO
    m = re.search(r"```yaml\n(fair_share:\n.*?)```", (REPO / "docs" / "server.md").read_text(), re.S)
    assert m, "docs/server.md has no ```yaml block starting 'fair_share:'"
    conf = tmp_path / "server.yaml"
    conf.write_text(m.group(1))
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"), TRAINCTL_FAKE_DEVICES="gpu:2")
    r = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "good" in r.stdout, (r.returncode, r.stdout, r.stderr)
