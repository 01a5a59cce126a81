"""The examples of docs/spec.md, docs/environment.md, docs/diagnostics.md and
docs/endpoints.md, run for real.

A fenced block whose first line is `# example: NAME` must run to success
under `trainctl run`; `# bad example: NAME` must fail with exit status 2 and
the message of the `text` block that follows it.  A `text` block right
after a sentence naming `hccn.conf` is written beside the examples."""
import re

import pytest

from conftest import REPO

DOCS = ["spec.md", "environment.md", "diagnostics.md", "endpoints.md"]
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(doc):
    text = (REPO / "docs" / doc).read_text()
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def examples():
    out = []
    for doc in DOCS:
        bl = blocks(doc)
        for i, (lang, body) in enumerate(bl):
            first, _, rest = body.partition("\n")
            m = re.match(r"# (bad )?example: (\S+)$", first)
            if not m:
                continue
            expect = None
            if m.group(1):
                assert i + 1 < len(bl) and bl[i + 1][0] == "text", f"{doc}: {m.group(2)} lacks its message"
                expect = bl[i + 1][1].strip()
            content = rest if lang == "json" else body
            out.append(pytest.param(doc, m.group(2), content, expect, id=f"{doc}:{m.group(2)}"))
    return out


def test_docs_have_examples():
    assert len(examples()) >= 6


@pytest.mark.parametrize("doc,name,content,expect", examples())
def test_doc_example(run_tc, home, tmp_path, doc, name, content, expect):
    (tmp_path / "hccn.conf").write_text("address_4=192.168.100.105\naddress_5=192.168.100.106\n")
    (tmp_path / name).write_text(content)
    # the secret the secrets example names (docs/spec.md)
    assert run_tc("secret", "set", "hf_token", input="hf_docs_example_0815\n").returncode == 0
    p = run_tc("run", name, cwd=str(tmp_path), env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    if expect is None:
        assert p.returncode == 0, p.stderr
    else:
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == expect


def rule_keys():
    """Every key of the spec parser's rule tables, as docs/spec.md names it."""
    import re as _re
    src = "\n".join(f.read_text() for f in sorted((REPO / "src" / "spec").glob("*.c")))
    prefix = {"spec_top_rules": "", "device_rules": "devices.", "restart_rules": "restart.",
              "ckpt_rules": "checkpoint.", "input_rules": "inputs[].", "output_rules": "outputs.",
              "metrics_rules": "metrics.", "pattern_rules": "metrics.patterns[].", "parallel_rules": "parallel.", "slurm_rules": "slurm.",
              "hook_rules": "notify[].", "file_rules": "", "watchdog_rules": "watchdog.",
              "endpoint_rules": "endpoints[].", "container_rules": "container.", "logs_rules": "logs.",
              "limits_rules": "limits.", "nodes_rules": "nodes."}
    keys = []
    for m in _re.finditer(r"(?:static )?const struct rule (\w+)\[\] = \{(.*?)\n\};", src, _re.S):
        assert m.group(1) in prefix, f"new rule table {m.group(1)}: teach this test its prefix"
        for k in _re.findall(r'\{ "(\w+)",', m.group(2)):
            keys.append(prefix[m.group(1)] + k)
    return keys


def test_every_spec_key_is_documented():
    doc = (REPO / "docs" / "spec.md").read_text()
    keys = rule_keys()
    assert len(keys) > 40
    # a mapping key is documented through its own keys (`devices.type`, ...)
    missing = [k for k in keys if f"`{k}`" not in doc and f"`{k}." not in doc]
    assert not missing, f"keys without a row in docs/spec.md: {missing}"
