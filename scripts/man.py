#!/usr/bin/env python3
"""man.py -- the man pages, made from what the built binary says.

    scripts/man.py BINARY OUTDIR [SPEC_MD]

trainctl(1) from `trainctl --help` (the command table), trainctl-CMD(1) for
each command from `trainctl CMD --help`, the text the shell completion reads
too (src/cmd/cmd_completion.c), so --help, the pages and the completion
cannot disagree (tests/e2e/test_deb_package.py compares them).  With
SPEC_MD, trainctl-spec(5) from that markdown (docs/spec.md).  Uncompressed;
`make deb` gzips them.  SOURCE_DATE_EPOCH fixes the date (reproducible).
"""
import os
import re
import subprocess
import sys
import time

OPTION = re.compile(r"^ {1,8}(-[A-Za-z0-9], )?(--?[A-Za-z0-9][^ ]*( [^ ]+)*?)( {2,}(.*))?$")


def esc(text):
    """Plain text as roff: backslashes, hyphens (so options paste right), quotes."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return text


def line(text):
    """One roff text line: a leading . or ' would be a request."""
    t = esc(text)
    return "\\&" + t if t[:1] in (".", "'") else t


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "TRAINCTL_HOME": "/nonexistent"})
    return p.stdout + p.stderr


def date():
    t = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def header(name, section, version, title):
    return [f'.TH {name.upper()} {section} "{date()}" "trainctl {version}" "{title}"',
            ".nh", ".ad l"]


def help_body(text):
    """A command's --help as roff: usage lines in SYNOPSIS, option lines as .TP, the rest kept."""
    lines = text.rstrip("\n").split("\n")
    syn, body = [], []
    i = 0
    while i < len(lines) and (lines[i].startswith("usage:") or lines[i].startswith("   or:")
                              or (syn and lines[i].startswith(" ") and lines[i].strip())):
        syn.append(re.sub(r"^(usage|   or): ", "", lines[i]).strip())
        i += 1
    out = [".SH SYNOPSIS"]
    for s in syn:
        out += [".nf", line(s), ".fi", ".br"]
    rest = lines[i:]
    out.append(".SH DESCRIPTION")
    in_opt = False
    verbatim = False
    for ln in rest:
        m = OPTION.match(ln)
        if not ln.strip():
            if verbatim:
                out.append(".fi")
                verbatim = False
            in_opt = False
            out.append(".PP")
        elif m and m.group(2).startswith("-"):
            if verbatim:
                out.append(".fi")
                verbatim = False
            tag = (m.group(1) or "") + m.group(2)
            out += [".TP", "\\fB" + esc(tag) + "\\fR"]
            if m.group(5):
                out.append(line(m.group(5)))
            in_opt = True
        elif in_opt and ln.startswith("     "):
            out.append(line(ln.strip()))
        else:
            in_opt = False
            if not verbatim:
                out.append(".nf")
                verbatim = True
            out.append(line(ln))
    if verbatim:
        out.append(".fi")
    return out


def commands(top):
    cmds = []
    for ln in top.split("\n"):
        m = re.match(r"^  ([a-z][a-z0-9-]*) +(.*)$", ln)
        if m:
            cmds.append((m.group(1), m.group(2)))
    return cmds


def page_main(binary, version, cmds):
    out = header("trainctl", 1, version, "trainctl manual")
    out += [".SH NAME", "trainctl \\- run AI training jobs on accelerators and CPUs",
            ".SH SYNOPSIS", "\\fBtrainctl\\fR \\fICOMMAND\\fR [\\fIoptions\\fR]", ".br",
            "\\fBtrainctl\\fR \\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR",
            ".SH DESCRIPTION",
            "trainctl runs training jobs: one worker per device, the distributed environment set,",
            "every rank's log captured, failures restarted as a group, every job recorded in a",
            "local SQLite database; \\fBtrainctl server\\fR adds a queue, a scheduler, an HTTP API",
            "and a web UI.  Each command has a page of its own, \\fBtrainctl\\-COMMAND\\fR(1), and",
            "describes itself with \\fBtrainctl COMMAND \\-\\-help\\fR.",
            ".SH COMMANDS"]
    for name, summary in cmds:
        out += [".TP", f"\\fB{esc(name)}\\fR", line(summary) + f" (\\fBtrainctl\\-{esc(name)}\\fR(1))"]
    out += [".SH EXIT STATUS",
            "0 success, 1 the job failed (or was stopped), 2 bad usage or bad input (nothing",
            "is started or written), 3 an infrastructure failure.",
            ".SH ENVIRONMENT",
            ".TP", "\\fBTRAINCTL_HOME\\fR",
            "the state folder: trainctl.db and runs/ (default ~/.trainctl)",
            ".TP", "\\fBTRAINCTL_SERVER\\fR",
            "the server the job commands talk to (a URL), instead of the local state folder",
            ".SH FILES",
            ".TP", "\\fI/etc/trainctl/server.yaml\\fR",
            "the settings of the packaged \\fBtrainctl\\-server.service\\fR (\\fBtrainctl server \\-\\-config\\fR)",
            ".SH SEE ALSO",
            ", ".join(f"\\fBtrainctl\\-{esc(n)}\\fR(1)" for n, _ in cmds) + ", \\fBtrainctl\\-spec\\fR(5)"]
    return out


def page_cmd(binary, version, name, summary):
    out = header(f"trainctl-{name}", 1, version, "trainctl manual")
    out += [".SH NAME", f"trainctl\\-{esc(name)} \\- {esc(summary)}"]
    out += help_body(run(binary, name, "--help"))
    out += [".SH SEE ALSO", "\\fBtrainctl\\fR(1), \\fBtrainctl\\-spec\\fR(5)"]
    return out


INLINE = [
    (re.compile(r"\[([^\]]+)\]\([^)]+\)"), lambda m: m.group(1)),  # links: their text
]


def inline(text):
    """Markdown inline text as roff: `code` and **bold** bold, *em* italic, links as text."""
    for rx, fn in INLINE:
        text = rx.sub(fn, text)
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) >= 2:
            out.append("\\fB" + esc(p[1:-1]) + "\\fR")
        else:
            p = esc(p)
            p = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", p)
            p = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?!\w)", r"\\fI\1\\fR", p)
            out.append(p)
    s = "".join(out)
    return "\\&" + s if s[:1] in (".", "'") else s


def cells(row):
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|"):
        row = row[:-1]
    # a | inside `code` is not a column bar
    out, cur, code = [], "", False
    for ch in row:
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def page_spec(md_path, version):
    out = header("trainctl-spec", 5, version, "trainctl file formats")
    out += [".SH NAME", "trainctl\\-spec \\- the job spec of trainctl (YAML or JSON)"]
    lines = open(md_path, encoding="utf-8").read().split("\n")
    i = 0
    para = []

    def flush():
        if para:
            out.append(".PP")
            out.extend(inline(p) for p in para)
            para.clear()

    while i < len(lines):
        ln = lines[i]
        if ln.startswith("```"):
            flush()
            i += 1
            out += [".PP", ".RS 4", ".nf"]
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line(lines[i]) if lines[i] else "")
                i += 1
            out += [".fi", ".RE"]
        elif ln.startswith("#"):
            flush()
            level = len(ln) - len(ln.lstrip("#"))
            title = ln.lstrip("#").strip()
            title = esc(re.sub(r"[`*]", "", title)).replace('"', "")
            if level == 1:
                out += [".SH DESCRIPTION", ".PP", title + "."]
            elif level == 2:
                out.append(f'.SH "{title.upper()}"')
            else:
                out.append(f'.SS "{title}"')
        elif ln.startswith("|"):
            flush()
            head = cells(ln)
            i += 1
            if i < len(lines) and re.match(r"^\|?[\s:|-]+\|?$", lines[i]):
                i += 1
            while i < len(lines) and lines[i].startswith("|"):
                row = cells(lines[i])
                out += [".TP", inline(row[0])]
                for h, c in zip(head[1:], row[1:]):
                    out.append(".br")
                    out.append(inline(f"{h}: {c}") if h else inline(c))
                i += 1
            continue
        elif re.match(r"^\s*([*-]|\d+\.) ", ln):
            flush()
            item = [re.sub(r"^\s*([*-]|\d+\.) ", "", ln)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            out += [".IP \\(bu 2"] + [inline(x) for x in item]
            continue
        elif not ln.strip():
            flush()
        else:
            para.append(ln.strip())
        i += 1
    flush()
    out += [".SH SEE ALSO", "\\fBtrainctl\\fR(1), \\fBtrainctl\\-run\\fR(1), \\fBtrainctl\\-submit\\fR(1)"]
    return out


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: scripts/man.py BINARY OUTDIR [SPEC_MD]")
    binary, outdir = sys.argv[1], sys.argv[2]
    version = run(binary, "--version").split()[-1]
    top = run(binary, "--help")
    cmds = commands(top)
    if not cmds:
        sys.exit(f"man.py: {binary} --help lists no commands")
    os.makedirs(outdir, exist_ok=True)
    write(os.path.join(outdir, "trainctl.1"), page_main(binary, version, cmds))
    for name, summary in cmds:
        write(os.path.join(outdir, f"trainctl-{name}.1"), page_cmd(binary, version, name, summary))
    if len(sys.argv) == 4:
        write(os.path.join(outdir, "trainctl-spec.5"), page_spec(sys.argv[3], version))


if __name__ == "__main__":
    main()
