"""`make demo`'s script, run for real (the README promises it works): it
trains the digits example with the embedded defaults and shows the result."""
import os
import subprocess

from conftest import REPO


def test_demo_script(tmp_path, torch_available):
    build = REPO / "build" / "trainctl"
    assert build.exists(), "make build first (make check does)"
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "home"))
    p = subprocess.run([str(REPO / "scripts" / "demo.sh")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "succeeded" in p.stdout
    last = [l for l in p.stdout.splitlines() if l.startswith("val.accuracy") and "summary" in l]
    assert last and float(last[-1].split()[-1]) >= 0.9, last
