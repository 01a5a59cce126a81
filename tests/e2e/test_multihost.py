"""backend: slurm across hosts that share no filesystem: a real multi-host
cluster on one machine (mhost_cluster.py: login + c1 + c2, each a network,
mount and UTS namespace with its own private /tmp holding $TRAINCTL_HOME),
started once for the module and deleted at its end, also when a test fails.

Needs root (namespaces); a machine where it cannot run fails the module
with the reason (scripts/install-deps.sh installs what it needs)."""
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import REPO, poll
from mhost_cluster import (COMPUTE, HOSTS, MultiHostCluster, TRAINCTL_HOME, _netns_list,
                           cleanup_leftovers, have_multihost)


@pytest.fixture(scope="module")
def mhost(trainctl):
    why = have_multihost()
    if why:
        pytest.fail(f"the multi-host cluster cannot run here: {why}", pytrace=False)
    c = MultiHostCluster(trainctl).start()
    try:
        yield c
    finally:
        c.stop()
    assert not c.leftovers(), c.leftovers()


def test_srun_runs_on_both_compute_hosts(mhost):
    p = mhost.run("login", ["srun", "-N2", "--ntasks-per-node=1", "-l", "sh", "-c",
                            'echo "$(hostname) $SLURMD_NODENAME $(ip -4 -o addr show eth0)"'],
                  timeout=120)
    assert p.returncode == 0, p.stderr + mhost.logs()
    lines = sorted(l.split(": ", 1)[1] for l in p.stdout.splitlines())
    assert len(lines) == 2, p.stdout
    for host, line in zip(COMPUTE, lines):
        name, node, addr = line.split(" ", 2)
        assert (name, node) == (host, host) and f"inet {mhost.addr(host)}/24" in addr, line


def test_each_host_has_its_own_state(mhost, trainctl):
    mark = f"mark-{uuid.uuid4().hex}"
    p = mhost.run("login", ["srun", "-N2", "--ntasks-per-node=1", "sh", "-c",
                            f'mkdir -p "$TRAINCTL_HOME" && hostname > "$TRAINCTL_HOME/{mark}"'],
                  timeout=120)
    assert p.returncode == 0, p.stderr + mhost.logs()
    for h in COMPUTE:
        assert mhost.path(h, f"{TRAINCTL_HOME}/{mark}").read_text() == f"{h}\n"
    assert not mhost.path("login", f"{TRAINCTL_HOME}/{mark}").exists()
    assert not Path(TRAINCTL_HOME, mark).exists()  # the machine's own /tmp neither
    # a job on the login host: its database is there and only there
    p = mhost.tc("login", "run", "--quiet", "--name", "local", "--", "/bin/sh", "-c", "echo hi",
                 timeout=120)
    assert p.returncode == 0, p.stderr
    assert mhost.path("login", f"{TRAINCTL_HOME}/trainctl.db").exists()
    for h in COMPUTE:
        assert not mhost.path(h, f"{TRAINCTL_HOME}/trainctl.db").exists()
    # only the repository (binary, workdir), the binary and Slurm's config are shared, read-only
    for path in (REPO / "tests" / "e2e", mhost.shared):
        p = mhost.run("c1", ["touch", path / mark])
        assert p.returncode != 0 and "Read-only file system" in p.stderr, (path, p.stderr)
    assert mhost.run("c1", [trainctl, "--version"]).returncode == 0


def test_network_exists_only_between_the_hosts(mhost):
    for h in HOSTS:
        routes = mhost.run(h, ["ip", "-4", "route"], check=True).stdout.splitlines()
        assert len(routes) == 1 and routes[0].startswith("10.87.0.0/24 dev eth0"), (h, routes)
        names = mhost.run(h, ["getent", "hosts", "login"], check=True).stdout.split()
        assert names[0] == mhost.addr("login"), names
        assert sorted(os.listdir(mhost.path(h, "/sys/class/net"))) == ["eth0", "lo"]
    mine = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert "10.87.0." not in mine


def test_teardown_leaves_nothing(trainctl):
    # a crashed run's leftovers (a pid that is gone) are deleted by the next start
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = f"tcmh{dead.pid}-1-login"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    left = Path(f"/var/tmp/tcmh{dead.pid}-1")
    left.mkdir(exist_ok=True)
    c = MultiHostCluster(trainctl)
    c.start()
    try:
        assert ns not in _netns_list() and not left.exists()
        assert c.leftovers() and c.nodes_idle()
    finally:
        c.stop()
    assert not c.leftovers(), c.leftovers()
    cleanup_leftovers()
