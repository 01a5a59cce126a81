"""`make deb` (packaging/deb/build.sh, docs/install.md): the package is
lintian-clean (no errors), installs with `dpkg -i` into a fresh Debian root,
runs there (`trainctl --version`, `--check-config` of its conffile), its
unit passes `systemd-analyze verify`, and it removes and purges cleanly.

The root is made by mmdebstrap (variant essential, plus the package's
Depends) and cached as a tarball by the hash of that package list, outside
the checkout, as the container tests' image is (image_fixture.py):

    /var/cache/trainctl-tests/debroot/<hash>.tar

so a run with a warm cache only unpacks it (seconds).
"""
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import REPO, trainctl_path

CACHE = Path(os.environ.get("TRAINCTL_TEST_DEBROOT_CACHE", "/var/cache/trainctl-tests/debroot"))
SUITE = "bookworm"


def sh(*args, **kw):
    kw.setdefault("timeout", 600)
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def plain_build():
    """The build folder of a binary without sanitizers (make e2e tests the ASan
    binary; a package holds the plain one, which make check builds too)."""
    b = trainctl_path()
    if "libasan" in subprocess.run(["ldd", str(b)], capture_output=True, text=True).stdout:
        b = REPO / "build" / "trainctl"
    if not os.access(b, os.X_OK):
        pytest.fail(f"no plain trainctl build at {b}: run make build", pytrace=False)
    return b.parent


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    path = Path(sh(REPO / "packaging" / "deb" / "build.sh", plain_build(), out).strip())
    assert re.fullmatch(r"trainctl_\d+\.\d+\.\d+-\d+_[a-z0-9]+\.deb", path.name), path.name
    return path


def field(deb, name):
    return sh("dpkg-deb", "-f", deb, name).strip()


def depends(deb):
    """The package names of Depends (versions and alternatives' rest dropped)."""
    return sorted({re.split(r"[\s(|]", d.strip())[0] for d in field(deb, "Depends").split(",")})


def fresh_root(deb, into):
    """A minimal Debian root holding the package's Depends, from the cache."""
    # systemd: the units the service's own refers to (sysinit.target, ...), for verify
    pkgs = sorted(set(depends(deb)) | {"adduser", "init-system-helpers", "systemd"})
    key = hashlib.sha256(f"mmdebstrap --variant=essential {SUITE} {' '.join(pkgs)}".encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / f"{key}.tar"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs build it once
        if not tar.exists():
            tmp = tar.with_suffix(".tmp.tar")
            sh("mmdebstrap", "--quiet", "--variant=essential", "--include=" + ",".join(pkgs),
               SUITE, tmp, timeout=1200)
            os.replace(tmp, tar)
    into.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(into, numeric_owner=True)
    return into


def tree(root):
    """Every path under root but /proc, /dev, /sys, /tmp and /run (a tmpfs on a
    real system: adduser leaves its lock there): for the purge check."""
    out = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.split(os.sep)[0] in ("proc", "dev", "sys", "tmp", "run"):
            dirs[:] = []
            continue
        for n in files + dirs:
            out.add(os.path.normpath(os.path.join(rel, n)))
    return out


# what dpkg and adduser may leave after a purge (Debian policy: their own records)
ALLOWED_AFTER_PURGE = re.compile(
    r"^(var/lib/dpkg/.*|var/log/.*|var/cache/debconf/.*|etc/(group|gshadow|passwd|shadow)-?"
    r"|var/lib/systemd(/deb-systemd-helper-enabled|/deb-systemd-user-helper-enabled)?"
    r"|var/lib/systemd/deb-systemd-helper-masked)$")


def test_lintian_has_no_errors(deb):
    r = subprocess.run(["lintian", "--fail-on", "error", "--display-level", ">=warning",
                        "--show-overrides", str(deb)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"lintian:\n{r.stdout}\n{r.stderr}"
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("E:")]
    assert not errors, r.stdout


def test_the_package_holds(deb):
    files = sh("dpkg-deb", "-c", deb)
    for path in ["./usr/bin/trainctl", "./usr/share/man/man1/trainctl.1.gz",
                 "./usr/share/man/man1/trainctl-run.1.gz", "./usr/share/man/man1/trainctl-server.1.gz",
                 "./usr/share/man/man5/trainctl-spec.5.gz",
                 "./usr/share/bash-completion/completions/trainctl",
                 "./usr/share/zsh/vendor-completions/_trainctl",
                 "./etc/trainctl/server.yaml", "./lib/systemd/system/trainctl-server.service",
                 "./usr/share/doc/trainctl/copyright", "./usr/share/doc/trainctl/changelog.Debian.gz"]:
        assert re.search(rf" {re.escape(path)}$", files, re.M), path
    if (REPO / "python" / "trainctl").is_dir():
        assert "./usr/lib/python3/dist-packages/trainctl/__init__.py" in files
    ctl = sh("dpkg-deb", "--ctrl-tarfile", deb)  # readable
    assert ctl is not None
    assert field(deb, "Version").startswith(sh(trainctl_path(), "--version").split()[1] + "-")
    deps = depends(deb)
    # linked (dpkg-shlibdeps) and dlopen()ed (lazylib.c) libraries, and addgroup
    for p in ["libc6", "libyaml-0-2", "libjansson4", "libsqlite3-0", "libcurl4", "libmicrohttpd12",
              "libssl3", "adduser"]:
        assert p in deps, (p, deps)


def test_install_run_verify_remove_purge(deb, tmp_path):
    root = fresh_root(deb, tmp_path / "root")
    before = tree(root)
    shutil.copy(deb, root / "tmp" / deb.name)
    sh("chroot", root, "dpkg", "-i", f"/tmp/{deb.name}")
    assert sh("chroot", root, "trainctl", "--version").startswith("trainctl ")
    # the conffile, as the unit's ExecStartPre checks it
    out = sh("chroot", root, "trainctl", "server", "--check-config", "/etc/trainctl/server.yaml")
    assert out.strip() == "/etc/trainctl/server.yaml: good"
    assert "trainctl:" in sh("chroot", root, "getent", "group", "trainctl")
    assert sh("chroot", root, "dpkg-query", "-W", "-f", "${Conffiles}", "trainctl").strip() \
        .startswith("/etc/trainctl/server.yaml ")
    # the unit, against the installed root (its ExecStart= binary is there)
    # (--man=no: man would look on this host; the pages' presence is checked below)
    r = subprocess.run(["systemd-analyze", "verify", f"--root={root}", "--man=no",
                        "/lib/systemd/system/trainctl-server.service"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "trainctl-server.service" not in r.stderr, r.stderr
    unit = (root / "lib/systemd/system/trainctl-server.service").read_text()
    for page in re.findall(r"man:([a-z-]+)\((\d)\)", unit):
        assert (root / f"usr/share/man/man{page[1]}/{page[0]}.{page[1]}.gz").exists(), page
    # remove keeps the conffile and the group; purge takes them
    sh("chroot", root, "dpkg", "-r", "trainctl")
    assert (root / "etc/trainctl/server.yaml").exists()
    assert not (root / "usr/bin/trainctl").exists()
    sh("chroot", root, "dpkg", "-P", "trainctl")
    assert subprocess.run(["chroot", str(root), "getent", "group", "trainctl"]).returncode == 2
    (root / "tmp" / deb.name).unlink()
    left = sorted(p for p in tree(root) - before if not ALLOWED_AFTER_PURGE.match(p))
    assert not left, left
    gone = sorted(p for p in before - tree(root) if not ALLOWED_AFTER_PURGE.match(p))
    assert not gone, gone
