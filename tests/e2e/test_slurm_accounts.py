"""Teams mapped to Slurm accounts (docs/slurm.md, "Teams and Slurm accounts"):
a server whose team names a Slurm account sends that team's jobs to Slurm
with --account; Slurm's accounting (a real slurmdbd on a private MariaDB,
tests/e2e/slurmdbd_fixture.py) shows the job under that account; `trainctl
team show` reports sshare's numbers for it, and `trainctl usage --by team`
counts the job's time from sacct, once. Bad slurm: keys stop the server
with the file, line and key."""
import getpass
import json
import os
import subprocess

import pytest

from conftest import wait_until
from server_fixture import start_server
from slurm_cluster import cluster  # noqa: F401  (the fixture: a cluster without accounting)
from slurmdbd_fixture import MISSING, accounting_cluster, have_accounting

ME = getpass.getuser()
TAG = os.urandom(3).hex()
ACCT = f"tc{TAG}cv"          # the team's account: unique to this run
GONE = f"tc{TAG}none"        # an account Slurm's accounting does not have
SINCE = "2020-01-01"


@pytest.fixture(scope="module")
def acct_cluster(tmp_path_factory):
    if not have_accounting():
        pytest.fail(MISSING, pytrace=False)
    with accounting_cluster(tmp_path_factory.mktemp("slurmacct"), {ACCT: [ME]}) as (c, a):
        yield c


def slurm(c, *argv):
    p = subprocess.run(list(argv), env=c.env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (argv, p.stdout, p.stderr)
    return p.stdout


def parsable(text):
    lines = [l for l in text.splitlines() if l.strip()]
    head = lines[0].split("|")
    return [dict(zip(head, (f.strip() for f in l.split("|")))) for l in lines[1:]]


def test_team_account_reaches_sbatch_sshare_and_sacct(trainctl, tmp_path, acct_cluster):
    conf = tmp_path / "server.yaml"
    conf.write_text(f"""\
teams:
  vision:
    members: [{ME}]
    slurm: {{account: {ACCT}}}
  ghost:
    members: [nobody-slurmacct-test]
    slurm: {{account: {GONE}, qos: normal}}
""")
    srv = start_server(trainctl, tmp_path / "state", args=["--config", str(conf)],
                       env={"SLURM_CONF": str(acct_cluster.conf)})
    try:
        # the job runs until the test has seen Slurm charge it to the account
        go = tmp_path / "go"
        spec = tmp_path / "job.yaml"
        spec.write_text("name: acct-job\ncommand: [/bin/sh, -c, 'i=0; while [ ! -e \"$0\" ] &&"
                        " [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done', " + json.dumps(str(go))
                        + "]\ndevices: {type: cpu, per_node: 1}\nbackend: slurm\n")
        p = srv.cli("submit", spec)
        assert p.returncode == 0, p.stderr
        job_id = p.stdout.strip()
        job = srv.wait_state(job_id, "running", timeout=180)
        sid = job["slurm"]["job"]
        sbatch = open(os.path.join(job["run_dir"], "job.sbatch")).read()
        assert f"#SBATCH --account={ACCT}\n" in sbatch, sbatch

        # team show: sshare's numbers for the account, as sshare itself prints them
        st, body = srv.call("GET", "/api/v1/teams/vision")
        assert st == 200, body
        sl = body["slurm"]
        assert sl["account"] == ACCT and sl["qos"] is None and sl["source"] == "sshare", sl
        mine = parsable(slurm(acct_cluster, "sshare", "-P", "-A", ACCT))
        acct_row = next(r for r in mine if r["Account"] == ACCT and not r["User"])
        assert sl["raw_shares"] == float(acct_row["RawShares"]), (sl, acct_row)
        assert sl["norm_shares"] == float(acct_row["NormShares"]), (sl, acct_row)
        assert isinstance(sl["raw_usage"], (int, float)), sl
        assert isinstance(sl["effective_usage"], (int, float)), sl
        assert [u["user"] for u in sl["users"]] == [ME], sl

        # RawUsage grows once the priority plugin's period (PriorityCalcPeriod=1,
        # a minute) has passed over the running job
        def used():
            st, b = srv.call("GET", "/api/v1/teams/vision")
            return st == 200 and (b["slurm"].get("raw_usage") or 0) > 0 and b["slurm"]
        sl = wait_until(used, timeout=200, step=2, what="sshare's RawUsage of the account > 0")
        direct = next(r for r in parsable(slurm(acct_cluster, "sshare", "-P", "-A", ACCT))
                      if r["Account"] == ACCT and not r["User"])
        assert float(direct["RawUsage"]) >= sl["raw_usage"] > 0, (sl, direct)
        assert isinstance(sl["users"][0]["fair_share"], (int, float)), sl
        text = srv.cli("team", "show", "vision")
        assert text.returncode == 0, text.stderr
        assert f"account {ACCT}" in text.stdout and "RawUsage" in text.stdout, text.stdout
        go.touch()
        srv.wait_state(job_id, "succeeded", timeout=180)

        # Slurm's accounting has the job under the team's account (without the
        # mapping it would be the user's default account, root)
        def row():
            rows = parsable(slurm(acct_cluster, "sacct", "-P", "-X", "-a", "-j", sid,
                                  "--format=JobID,Account,ElapsedRaw,State"))
            return rows[0] if rows and rows[0]["State"] == "COMPLETED" else None
        wait_until(row, timeout=60, what="sacct to show the job COMPLETED")
        acc = row()
        assert acc["Account"] == ACCT, acc
        elapsed = int(acc["ElapsedRaw"])
        assert elapsed >= 1, acc

        # an account Slurm does not know: the reason, no numbers
        st, body = srv.call("GET", "/api/v1/teams/ghost")
        assert st == 200, body
        assert body["slurm"]["account"] == GONE and body["slurm"]["qos"] == "normal", body
        assert f"no row for account '{GONE}'" in body["slurm"]["error"], body
        assert "raw_usage" not in body["slurm"], body
        text = srv.cli("team", "show", "ghost").stdout
        assert f"account {GONE}, qos normal" in text and "no row for account" in text, text

        # usage: the job's time from sacct (one cpu for ElapsedRaw), counted once
        r = srv.cli("usage", "--since", SINCE, "--by", "team", "--format", "json")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["slurm"] == {"source": "sacct", "jobs": 1, "unknown_to_sacct": 0}, rep
        (vision,) = [x for x in rep["rows"] if x["group"] == "vision"]
        assert vision["device_type"] == "cpu" and vision["jobs"] == 1, vision
        assert abs(vision["device_seconds"] - elapsed) <= 1, (vision, elapsed)
        r = srv.cli("usage", "--since", SINCE, "--by", "team")
        assert r.returncode == 0, r.stderr
        assert "slurm jobs: 1, counted from sacct" in r.stdout, r.stdout
    finally:
        srv.stop()


def test_usage_without_slurm_accounting_says_so(trainctl, tmp_path, cluster):
    """A cluster with no slurmdbd (AccountingStorageType=none): sacct cannot
    say, so the Slurm job counts from the store's record, and the report says
    why; nothing is invented and nothing is left out."""
    srv = start_server(trainctl, tmp_path / "state", env={"SLURM_CONF": str(cluster.conf)})
    try:
        spec = tmp_path / "job.yaml"
        spec.write_text("name: no-acct\ncommand: [/bin/sh, -c, 'sleep 1']\n"
                        "devices: {type: cpu, per_node: 1}\nbackend: slurm\n")
        p = srv.cli("submit", spec)
        assert p.returncode == 0, p.stderr
        srv.wait_state(p.stdout.strip(), "succeeded", timeout=180)
        r = srv.cli("usage", "--since", SINCE, "--format", "json")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["slurm"]["source"] == "trainctl" and "sacct" in rep["slurm"]["error"], rep
        (mine,) = [x for x in rep["rows"] if x["group"] == ME]
        assert mine["jobs"] == 1 and mine["device_seconds"] > 0, rep
        r = srv.cli("usage", "--since", SINCE)
        assert "counted from trainctl's record of their states; sacct could not say" in r.stdout, \
            r.stdout
    finally:
        srv.stop()


def test_bad_slurm_keys_exit_2_naming_file_line_and_key(trainctl, tmp_path):
    cases = [
        ("teams:\n  vision:\n    members: [a]\n    slurm: {acount: cv}\n", ":4:",
         "teams.vision.slurm: unknown key 'acount' (slurm: has account, qos)"),
        ("teams:\n  vision:\n    members: [a]\n    slurm:\n      qos: 'no good'\n", ":5:",
         "teams.vision.slurm: qos: 'no good' is not a Slurm qos name"),
    ]
    for text, line, msg in cases:
        conf = tmp_path / "server.yaml"
        conf.write_text(text)
        env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"))
        r = subprocess.run([str(trainctl), "server", "--config", str(conf), "--listen",
                            "127.0.0.1:0"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert f"{conf}{line}" in r.stderr and msg in r.stderr, r.stderr
