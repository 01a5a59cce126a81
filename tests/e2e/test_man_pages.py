"""The man pages (scripts/man.py, `make man`): made from the built binary's
--help, which the shell completion reads too, so that a command's options in
--help, in its page and in the completion are the same set; and
trainctl-spec(5) from docs/spec.md, with every key of its table."""
import os
import re
import subprocess

import pytest

from conftest import REPO

OPTION = re.compile(r"--[a-z][a-z0-9-]*")


@pytest.fixture(scope="module")
def pages(trainctl, tmp_path_factory):
    out = tmp_path_factory.mktemp("man")
    subprocess.run(["/usr/bin/python3", str(REPO / "scripts" / "man.py"), str(trainctl), str(out),
                    str(REPO / "docs" / "spec.md")], check=True, timeout=300)
    return out


def commands(trainctl):
    text = subprocess.run([str(trainctl), "--help"], capture_output=True, text=True).stdout
    return re.findall(r"^  ([a-z][a-z0-9-]*) ", text, re.M)


def rendered(page):
    """The page as man shows it (wide, so that no option is broken), and groff's warnings."""
    env = dict(os.environ, MANWIDTH="250", MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", str(page)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return re.sub(r".\x08", "", r.stdout).replace("\u2010", "-").replace("\u2212", "-"), r.stderr


def completion(trainctl, cmd):
    """The options bash completion offers after `trainctl CMD --`."""
    script = (f'source <("{trainctl}" completion bash)\n'
              f'COMP_WORDS=("{trainctl}" {cmd} --); COMP_CWORD=2\n'
              '_trainctl; printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_a_page_per_command(trainctl, pages):
    cmds = commands(trainctl)
    assert "run" in cmds and "server" in cmds
    made = sorted(p.name for p in pages.iterdir())
    assert made == sorted(["trainctl.1", "trainctl-spec.5"] + [f"trainctl-{c}.1" for c in cmds])
    text, warnings = rendered(pages / "trainctl.1")
    assert not warnings.strip(), warnings
    for c in cmds:
        assert f"trainctl-{c}(1)" in text, c


def test_help_page_and_completion_agree(trainctl, pages):
    for cmd in commands(trainctl):
        help_text = subprocess.run([str(trainctl), cmd, "--help"], capture_output=True,
                                   text=True).stdout
        in_help = set(OPTION.findall(help_text))
        text, warnings = rendered(pages / f"trainctl-{cmd}.1")
        assert not warnings.strip(), (cmd, warnings)
        in_page = set(OPTION.findall(text.split("\nSEE ALSO")[0]))
        assert in_page == in_help, (cmd, in_page ^ in_help)
        assert completion(trainctl, cmd) == in_help | {"--help"}, cmd


def test_the_spec_page_has_every_key(pages):
    text, warnings = rendered(pages / "trainctl-spec.5")
    assert not warnings.strip(), warnings
    doc = (REPO / "docs" / "spec.md").read_text()
    keys = re.findall(r"^\| `([a-z_.]+)`", doc, re.M)
    assert len(keys) > 20
    flat = " ".join(text.split())
    for k in keys:
        assert k in flat, k
