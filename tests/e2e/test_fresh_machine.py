"""The fresh-machine check (issue 28; docs/testing.md): scripts/install-deps.sh
names every package trainctl and its tests use.

scripts/fresh-machine-check.sh builds a Debian root from exactly the script's
packages (mmdebstrap, minutes, several GB) and checks every entry of
scripts/fresh-machine.list in it.  Here (make check) it runs only when that
root is already cached, and skips saying how to build it when not; make soak
always runs it, building the root.  The tests that prove it can fail run
against the cached root with lists of entries no package brings.
"""
import os
import shutil
import subprocess

import pytest

from conftest import REPO

CHECK = REPO / "scripts" / "fresh-machine-check.sh"
COMPLETE = REPO / "scripts" / "fresh-machine-list-complete.py"
LIST = REPO / "scripts" / "fresh-machine.list"
PYTHON = "/usr/bin/python3"


def check(*args, env=None, timeout=600):
    return subprocess.run([str(CHECK), "--cached", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def cached_root_or_skip(tmp_path):
    """The cached root's path; skip, saying why, when the root for the
    current package list is not built yet (or this is no root account, which
    chroot needs)."""
    if os.geteuid() != 0:
        pytest.skip("the fresh-machine check needs root (chroot and mounts)")
    one = tmp_path / "sh.list"
    one.write_text("sh  # in every root\n")
    r = check("--list", str(one))
    if r.returncode == 77:
        pytest.skip(r.stdout.strip().removeprefix("fresh-machine: "))
    assert r.returncode == 0, r.stdout + r.stderr
    root = r.stdout.rsplit("(", 1)[-1].rstrip(")\n")
    assert os.path.isdir(root), r.stdout
    return root


def test_the_list_names_every_program_the_sources_and_tests_call():
    r = subprocess.run([PYTHON, str(COMPLETE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_list_checker_sees_a_program_and_a_module_left_out(tmp_path):
    kept = [ln for ln in LIST.read_text().splitlines()
            if not ln.startswith(("podman ", "promtool ", "py:torch "))]
    short = tmp_path / "short.list"
    short.write_text("\n".join(kept) + "\n")
    r = subprocess.run([PYTHON, str(COMPLETE), "--list", str(short)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    named = {ln.split()[0] for ln in r.stdout.splitlines()[1:]}
    assert named == {"podman", "promtool", "py:torch"}, r.stdout


def test_a_fresh_machine_has_everything_the_list_names(tmp_path):
    cached_root_or_skip(tmp_path)
    r = check()
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("fresh-machine: all "), r.stdout


def test_the_check_names_what_no_package_brings(tmp_path):
    cached_root_or_skip(tmp_path)
    bogus = tmp_path / "bogus.list"
    bogus.write_text("sh                        # in every root\n"
                     "tc-fresh-no-such-program  # no package brings these\n"
                     "/usr/lib/tc-fresh-no-such-file\n"
                     "libtc-fresh-no-such.so.1\n"
                     "py:tc_fresh_no_such\n")
    r = check("--list", str(bogus))
    assert r.returncode == 1, r.stdout + r.stderr
    missing = [ln.strip() for ln in r.stdout.splitlines()[1:]]
    assert missing == [
        "program tc-fresh-no-such-program: no package on this host has it either",
        "file /usr/lib/tc-fresh-no-such-file: no package on this host has it either",
        "library libtc-fresh-no-such.so.1: no package on this host has it either",
        "module py:tc_fresh_no_such: no package on this host has it either",
    ], r.stdout


def test_the_check_names_the_package_of_a_program_the_list_lacks(tmp_path):
    """A program this host has from a package install-deps.sh does not name
    (sqlite3's shell, or another) is named with that package."""
    root = cached_root_or_skip(tmp_path)
    for prog in ("sqlite3", "strace", "gdb", "xxd", "file", "less"):
        path = shutil.which(prog, path="/usr/bin:/bin")
        if path and not os.path.exists(root + path) and not os.path.exists(f"{root}/bin/{prog}"):
            break
    else:
        pytest.fail("this host has none of the programs this test names that the root lacks")
    owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True,
                           text=True).stdout.split(":")[0]
    assert owner, path
    one = tmp_path / "one.list"
    one.write_text(f"{prog}  # not in install-deps.sh\n")
    r = check("--list", str(one))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"program {prog}: package {owner} brings it (add it to scripts/install-deps.sh)" \
        in r.stdout, r.stdout


def test_a_bad_entry_or_a_cold_cache_is_said(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the fresh-machine check needs root (chroot and mounts)")
    bad = tmp_path / "bad.list"
    bad.write_text("podman\n$(id)  # not a name\n")
    r = check("--list", str(bad))
    assert r.returncode == 2 and "entries with characters other than" in r.stderr \
        and "  $(id)" in r.stderr, r.stderr
    r = check(env={"TRAINCTL_FRESH_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 77, r
    assert r.stdout.startswith("fresh-machine: no cached root for the current package list ("
                               + str(tmp_path / "cache") + "/"), r.stdout
