"""The example of docs/your-script.md, run for real on CPU workers.

A fenced block whose first line is `# example: NAME` is either a file (a
python or yaml block: written as NAME into one folder) or, for an sh block,
commands: the sh blocks run in the page's order in that folder with bash
-euo pipefail, `trainctl` (the binary under test) first on PATH,
TRAINCTL_HOME set to the test's own and the Python package on PYTHONPATH
(as `pip install ./python` would give).  Each must exit 0, and each
`# expect: TEXT` line names text its output (stdout and stderr, as a
terminal shows them) must contain."""
import os
import re
import subprocess

from conftest import REPO

DOC = REPO / "docs" / "your-script.md"
BLOCK = re.compile(r"```(\w+)\n# example: (\S+)\n(.*?)```", re.S)


def examples():
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(DOC.read_text())]


def test_the_page_has_its_example():
    got = examples()
    files = [n for lang, n, _ in got if lang != "sh"]
    assert files == ["train.py", "job.yaml"], files
    steps = [n for lang, n, _ in got if lang == "sh"]
    assert len(steps) >= 4 and len(set(steps)) == len(steps), steps


def test_the_example_runs(trainctl, home, tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{trainctl.parent}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINCTL_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO / "python")
    for k in ("TRAINCTL_SERVER", "TRAINCTL_TOKEN"):
        env.pop(k, None)
    for lang, name, body in examples():
        if lang != "sh":
            (tmp_path / name).write_text(body)
            continue
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"{name}: exit {p.returncode}\n{out}"
        for want in re.findall(r"^# expect: (.+)$", body, re.M):
            assert want in out, f"{name}: '{want}' not in the output:\n{out}"
