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
    # a short view: one line per epoch, no raw DLLogger lines, the logs one command away
    lines = p.stdout.splitlines()
    assert len(lines) < 50 and "DLLL" not in p.stdout, p.stdout
    epochs = [l.split() for l in lines if l.startswith("  epoch ")]
    assert [e[1] for e in epochs] == [f"{i}/10" for i in range(1, 11)], epochs
    assert float(epochs[-1][epochs[-1].index("val.accuracy") + 1]) >= 0.9, epochs
    summary = [l.split() for l in lines if l.startswith("  val.accuracy ")]
    assert summary and float(summary[0][4]) >= 0.9, summary
    assert "build/trainctl logs digits-ddp" in p.stdout
