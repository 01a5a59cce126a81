"""Container images for the e2e tests, built here from Debian packages.

No registry is reachable from the test machines, so the tests' image is a
Debian bookworm root made by mmdebstrap (python3, torch, sklearn, numpy)
and imported into podman.  It is cached by content hash of the package
list and this recipe, outside the checkout:

    /var/cache/trainctl-tests/images/<hash>.tar   the root file system
    localhost/trainctl-test-py:<hash>             the image in podman's storage

so a re-run costs nothing, and a changed recipe builds a new one.  The
first build takes about 7 minutes (network and 2 cores), the import about
1.5 minutes (docs/containers.md).

    python3 tests/e2e/image_fixture.py        # build (or find) the image, print its name

podman's defaults fail on hosts that refuse raising NPROC/NOFILE ("error
setting rlimit type 6/7: operation not permitted"), and Debian's crun refuses
a hybrid cgroup v1/v2 host; the tests' containers.conf lowers the rlimits
and picks runc (CONTAINERS_CONF, docs/containers.md).
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(os.environ.get("TRAINCTL_TEST_IMAGE_CACHE", "/var/cache/trainctl-tests/images"))
SUITE = "bookworm"
PACKAGES = ["python3", "python3-torch", "python3-sklearn", "python3-numpy"]
RECIPE = f"mmdebstrap --variant=apt --include={','.join(PACKAGES)} {SUITE} OUT.tar | podman import"
REPO_NAME = "localhost/trainctl-test-py"

CONTAINERS_CONF_TEXT = """\
# trainctl's tests: hosts that refuse raising NPROC/NOFILE, and crun on a hybrid cgroup host
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]

[engine]
runtime = "runc"
"""


def recipe_hash():
    return hashlib.sha256(RECIPE.encode()).hexdigest()[:16]


def image_name():
    return f"{REPO_NAME}:{recipe_hash()}"


def containers_conf(directory):
    """Write the tests' containers.conf into directory; its path (readable by
    every account: a root server's supervisors run as the job's)."""
    p = Path(directory) / "containers.conf"
    p.write_text(CONTAINERS_CONF_TEXT)
    os.chmod(directory, 0o755)
    os.chmod(p, 0o644)
    return p


def tiny_rootfs_tar(out, progs=("sh", "id", "tr", "touch", "cat", "ls", "sleep", "true")):
    """A few MB root file system of this host's own programs and their
    libraries, for a job account's rootless podman (whose image storage is
    its own, and vfs: the 2 GB test image would be copied per container)."""
    import tarfile
    files = set()
    for p in progs:
        path = shutil.which(p)
        files.add(path)
        out_ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        files.update(tok for line in out_ldd.splitlines() for tok in line.split() if tok.startswith("/"))
    with tarfile.open(out, "w", dereference=True) as t:
        for d in ("tmp", "etc", "proc", "sys", "dev", "run", "bin", "usr/bin"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(ti)
        names = set()
        for f in sorted(files):
            for name in {f.lstrip("/"), os.path.realpath(f).lstrip("/")}:
                if name not in names:
                    names.add(name)
                    t.add(f, arcname=name)
        for p in progs:
            for name in ("bin/" + p, "usr/bin/" + p):
                if name not in names:
                    names.add(name)
                    t.add(shutil.which(p), arcname=name)
    os.chmod(out, 0o644)
    return out


def import_as(user, tar, name, conf):
    """podman import tar as name into user's own (rootless) storage."""
    r = subprocess.run(["su", user, "-c", f"cd ~ && CONTAINERS_CONF={conf} podman import -q {tar} {name}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def podman_env(conf):
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(conf)
    return env


def podman_usable():
    """None when podman, mmdebstrap and runc are here (installing them with
    apt when they are not), else why not."""
    need = {"podman": "podman", "mmdebstrap": "mmdebstrap", "runc": "runc", "newuidmap": "uidmap"}
    missing = [pkg for prog, pkg in need.items() if not shutil.which(prog)]
    if missing:
        r = subprocess.run(["flock", "/tmp/apt.lock", "apt-get", "install", "-y", "-qq"] + missing,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                           capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot install {' '.join(missing)}: {r.stderr.strip()[-300:]}"
    return None


def ensure_image(conf, log=print):
    """The test image's name, built and imported when it is not there yet."""
    name = image_name()
    env = podman_env(conf)
    if subprocess.run(["podman", "image", "exists", name], env=env).returncode == 0:
        return name
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / f"{recipe_hash()}.tar"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs build it once
        if subprocess.run(["podman", "image", "exists", name], env=env).returncode == 0:
            return name
        if not tar.exists():
            log(f"building the test image ({RECIPE}); the first build takes minutes")
            tmp = tar.with_suffix(".tmp.tar")
            subprocess.run(["mmdebstrap", "--quiet", "--variant=apt",
                            "--include=" + ",".join(PACKAGES), SUITE, str(tmp)],
                           check=True, capture_output=True)
            os.replace(tmp, tar)
        subprocess.run(["podman", "import", "--quiet", str(tar), name], env=env, check=True,
                       capture_output=True)
    return name


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        why = podman_usable()
        if why:
            sys.exit(why)
        print(ensure_image(containers_conf(d)))
