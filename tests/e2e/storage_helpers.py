"""`trainctl sync` as the storage tests run it (test_storage*.py): the binary
(a missing one skips), one run with the multipart threshold and part size the
tests assume, a folder's files as a dict, the counts of sync's summary line."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MULTIPART = 6 * 1024 * 1024  # threshold used in tests; parts are 5 MiB


@pytest.fixture(scope="session")
def tc():
    exe = os.environ.get("TRAINCTL") or str(ROOT / "build" / "trainctl")
    if not os.path.exists(exe):
        pytest.skip(f"no trainctl binary at {exe} (set TRAINCTL)")
    return exe


def run(tc, *args, env=None, check=True, timeout=120):
    e = dict(env or os.environ)
    e.setdefault("TRAINCTL_MULTIPART_THRESHOLD", str(MULTIPART))
    e.setdefault("TRAINCTL_PART_SIZE", str(5 * 1024 * 1024))
    p = subprocess.run([tc, *args], env=e, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"trainctl {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def tree(root: Path):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def counts(out):
    # "N copied, N skipped, N deleted, ..."
    last = [l for l in out.splitlines() if "copied," in l][-1]
    parts = dict((w, int(n)) for n, w in (x.strip().split(" ")[:2] for x in last.split(",")[:3]))
    return parts
