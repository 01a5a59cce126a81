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
    """Write the tests' containers.conf into directory; its path."""
    p = Path(directory) / "containers.conf"
    p.write_text(CONTAINERS_CONF_TEXT)
    return p


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
