"""scripts/check-arch.py (docs/ARCHITECTURE.md, `make check-arch`): the tree
as it is passes; a copy of it with one planted violation of a rule fails,
naming the file, the line and the rule.  Needs no binary."""
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = REPO / "scripts" / "check-arch.py"


@pytest.fixture
def tree(tmp_path):
    """a copy of what the check reads: src/, the e2e tests and the map"""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "src", root / "src")
    shutil.copytree(REPO / "tests" / "e2e", root / "tests" / "e2e",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "docs").mkdir()
    shutil.copy(REPO / "docs" / "ARCHITECTURE.md", root / "docs")
    return root


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True,
                          timeout=120)


def plant(root, rel, text):
    """append text to src file rel; the line number of its first line"""
    f = root / rel
    old = f.read_text()
    if not old.endswith("\n"):
        old += "\n"
    f.write_text(old + text)
    return old.count("\n") + 1


def test_the_tree_passes():
    p = check(REPO)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check-arch: ok" in p.stdout


def test_the_copy_passes_and_reports(tree):
    p = check(tree)
    assert p.returncode == 0, p.stdout + p.stderr
    # the report: the largest call cycle of a folder (it fails only over 4 files)
    assert "src/spec/: largest call cycle" in p.stdout, p.stdout


@pytest.mark.parametrize("rel, text, rule, says", [
    ("src/jobs/actions.c", "int planted(void)\n{\n\treturn fork();\n}\n", "proc",
     "fork() outside src/core/proc.c"),
    ("src/metrics/summary.c", "int planted(void)\n{\n\treturn system(\"true\");\n}\n", "proc",
     "system() outside src/core/proc.c"),
    ("src/hub/sink.c", "void planted(void)\n{\n\tprintf(\"hello\\n\");\n}\n", "print",
     "printf() in library code"),
    ("src/store/store_ckpt.c", "void planted(void)\n{\n\tfprintf(stderr, \"x\");\n}\n", "print",
     "fprintf(stderr, ...) in library code"),
    ("src/logs/logs.c", "void planted(const char *b)\n{\n\t(void)write_all(STDOUT_FILENO, b, 1);\n}\n",
     "print", "write_all(STDOUT_FILENO, ...) in library code"),
    ("src/metrics/query.c", "const char *planted = \"running\";\n", "state-literal",
     'the job state "running" as a literal outside src/jobs/'),
    ("src/cmd/cmd_run.c", "const char *planted = \"lost\";\n", "state-literal",
     'the job state "lost" as a literal outside src/jobs/'),
    ("src/launch/env.c", "void planted(struct store *st)\n{\n\tstore_close(st);\n}\n", "store-call",
     "store_close() from launch/"),
    ("src/logs/logs.c", '#include "cmd/cmd.h"\n', "cmd-include",
     '#include "cmd/cmd.h" in library code'),
    ("src/server/admit.c", 'const char *planted = "%s/runs/%s/job.yaml";\n', "run-layout",
     'the run folder\'s "runs/" spelled outside src/jobs/runpath.c'),
    ("src/launch/workers.c", 'const char *planted = "%s/rank-%d.log";\n', "run-layout",
     'the run folder\'s "rank-%d" spelled outside src/jobs/runpath.c'),
])
def test_a_planted_violation_fails(tree, rel, text, rule, says):
    line = plant(tree, rel, text)
    p = check(tree)
    assert p.returncode == 1, p.stdout + p.stderr
    hit = [l for l in p.stderr.splitlines() if l.startswith(f"{rel}:") and f": {rule}: " in l]
    assert len(hit) == 1 and says in hit[0], p.stderr
    at = int(hit[0].split(":")[1])
    assert line <= at <= line + text.count("\n"), (line, hit[0])


def test_a_long_file_fails(tree):
    plant(tree, "src/launch/userdir.c", "/* planted */\n" * 1000)
    p = check(tree)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "src/launch/userdir.c:1001: long-file: " in p.stderr, p.stderr


def test_a_call_cycle_of_five_files_fails(tree):
    """launch/ has none; five of its files calling each other in a ring is one of 5"""
    ring = ["say.c", "stop.c", "userdir.c", "env.c", "ranktable.c"]
    for i, name in enumerate(ring):
        plant(tree, f"src/launch/{name}",
              f"void planted_{i}(void)\n{{\n\tplanted_{(i + 1) % 5}();\n}}\n")
    p = check(tree)
    assert p.returncode == 1, p.stdout + p.stderr
    hit = [l for l in p.stderr.splitlines() if ": cycle: " in l]
    assert len(hit) == 1 and "5 files of src/launch/ call each other" in hit[0], p.stderr
    last = tree / "src" / "launch" / "ranktable.c"
    last.write_text(last.read_text().replace("planted_0();", ""))  # the ring broken: a chain
    p = check(tree)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_test_file_importing_another_fails(tree):
    f = tree / "tests" / "e2e" / "test_run.py"
    f.write_text("from " + "test_watchdog import gloo_job  # noqa\n" + f.read_text())  # (split: no grep hit)
    p = check(tree)
    assert p.returncode == 1
    assert "tests/e2e/test_run.py:1: test-import: imports from the test file test_watchdog.py" \
        in p.stderr, p.stderr


def test_comments_strings_and_jobs_pass(tree):
    """a word in a comment or a string is no call; jobs/ owns the state words; cmd/ prints"""
    plant(tree, "src/hub/sink.c", "/* fork() and printf() here are words */\n"
                                  "const char *planted_text = \"popen(x) printf(y)\";\n")
    plant(tree, "src/jobs/actions.c", "const char *planted_state = \"running\";\n")
    plant(tree, "src/cmd/cmd_ps.c", "void planted(void)\n{\n\tputs(\"x\");\n}\n")
    p = check(tree)
    assert p.returncode == 0, p.stdout + p.stderr


def test_an_allowed_exception_says_why(tree):
    """each exception is written in the script with its reason; one that matches nothing now
    is reported (it does not fail)"""
    text = SCRIPT.read_text()
    assert '("src/core/proc.c", "child_fail", "write",' in text
    f = tree / "src" / "core" / "xalloc.c"
    f.write_text(f.read_text().replace("fprintf(stderr", "(void)(stderr", 1))
    p = check(tree)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ALLOW print src/core/xalloc.c:xdie_oom 'fprintf' matches nothing now" in p.stdout


def test_the_map_names_every_source_file(tree):
    (tree / "src" / "logs" / "planted.c").write_text("int planted;\n")
    p = check(tree)
    assert p.returncode == 1
    assert "src/logs/planted.c:1: map: not named in docs/ARCHITECTURE.md" in p.stderr, p.stderr


def test_every_file_the_map_names_exists(tree):
    (tree / "src" / "jobs" / "transition.c").unlink()
    p = check(tree)
    assert p.returncode == 1
    assert "map: names src/jobs/transition.c, which does not exist" in p.stderr, p.stderr
    assert p.stderr.startswith("docs/ARCHITECTURE.md:"), p.stderr
