#!/usr/bin/env python3
"""check-arch.py -- the invariants docs/ARCHITECTURE.md states, checked on
the source, so that the map stays true.  Each rule prints FILE:LINE: RULE:
what it found, and a finding not in ALLOW below fails the check (exit 1):

  proc          fork, vfork, exec*, posix_spawn*, system, popen only in
                src/core/proc.c (every child process goes through core/proc)
  print         library code (src/ but main.c and cmd/) prints nothing:
                printf, vprintf, puts, putchar, perror, and fprintf,
                vfprintf, fputs, fputc, putc, fwrite, dprintf, write to
                stdout/stderr (1, 2) only on the by-design console paths
                named in ALLOW
  state-literal the words of enum job_state ("queued", "running", ...) as
                a C string only in src/jobs/ (jobs/state.c's table)
  store-call    no store_* call from src/launch/: the supervisor writes a
                job's records through the sink (hub/sink.h)
  cmd-include   the library never includes "cmd/..."
  run-layout    the run folder's names ("runs/", "job.yaml", "supervisor.log",
                "rank-%d") as a C string only in src/jobs/runpath.c (the one
                owner of the layout: ask it with run_path, run_leaf, run_rel)
  test-import   an e2e test file imports helpers from conftest.py or a helper
                module (tests/e2e/*_helpers.py, *_fixture.py, ...), never from
                another test file (tests/e2e/test_*.py)
  map           docs/ARCHITECTURE.md names every .c and .h under src/ (a
                module by its .c or its header: X.c, X.h and X_int.h go
                together), and every source file it names exists

  long-file     no .c file over 1,000 lines
  cycle         no call cycle of more than 4 files inside a folder: file A
                calls file B when A names a non-static function B defines (a
                call or its address), from a scan of the source with comments
                and strings taken out (no ctags needed; a function pointer
                called through a struct is not followed)

It also prints, without failing, each folder's largest call cycle.

An exception is written in ALLOW with its reason: (FILE, FUNCTION, WHAT,
reason), FUNCTION "*" for the whole file, WHAT the name called or the
literal (None: anything of the rule there).  An entry that matches nothing
any more is reported so that it can go; it does not fail the check.

    scripts/check-arch.py [ROOT]     (exit 0 clean, 1 a new violation)
Run by `make check-arch` (part of `make check`); tests/e2e/test_arch_check.py
plants a violation of each rule and sees it fail.  Needs only python3.
"""
import os
import re
import sys

LONG_FILE = 1000  # lines of a .c file (rule long-file)
MAX_CYCLE = 4     # files in one folder's call cycle (rule cycle)

STATE_WORDS = ("queued", "starting", "running", "restarting", "paused", "preempted",
               "succeeded", "failed", "killed", "lost")

# ---- the exceptions: rule -> [(file, function, what, reason)] ----
ALLOW = {
    "proc": [],
    "print": [
        # by-design console paths: the terminal (or the output file) is the product here
        ("src/server/srvlog.c", "*", "write_all",
         "the server's log: one line per event on stderr, journald's form under systemd"),
        ("src/launch/say.c", "say_text", "write_all",
         "the supervisor's own messages on the terminal of `trainctl run` (and its log file)"),
        ("src/launch/workers.c", "emit_masked", "write_all",
         "the workers' lines, [RANK]-prefixed, on the terminal of `trainctl run` without a console"),
        ("src/launch/node.c", "node_tell", "write_all",
         "a node's outcome line on its stdout: srun carries it to the batch driver (a channel)"),
        ("src/launch/node.c", "node_tell_parts", "write_all",
         "a node's hang report in lines on its stdout: srun carries them to the batch driver"),
        ("src/backend/slurm_batch.c", "node_results", "write_all",
         "the batch driver passes srun's other lines on to its stdout, Slurm's output file"),
        ("src/backend/slurm_run.c", "follow_logs", "write_all",
         "the foreground `trainctl run --backend slurm` shows the ranks' lines, as a local run"),
        ("src/core/proc.c", "child_fail", "write",
         "the child between fork and exec: why exec failed, async-signal-safe, its only way out"),
        ("src/core/xalloc.c", "xdie_oom", "fprintf",
         "the last words before abort() on out of memory: no caller to return an error to"),
        ("src/core/lazylib.c", "die_missing", "fprintf",
         "the last words before exit when a library loaded at run time lacks a symbol"),
    ],
    "state-literal": [
        ("src/cmd/cmd_sweep.c", "*", None, "sweep and trial states: no enum yet"),
        # webhook events are named as the states they follow
        ("src/notify/notify.c", "*", None,
         "the webhook event names (queued, succeeded, ...): the event table, not a state"),
        ("src/launch/multinode.c", "*", None,
         "the multi-node driver's notifications name their state: to go with the shared "
         "attempt decision (issue 24, part 1)"),
        ("src/cmd/cmd_server.c", "cmd_supervise", "failed",
         "a word of a warning (\"report: failed\"), no state"),
        ("src/endpoint/activity.c", "endpoint_jupyter_parse", "starting",
         "a Jupyter kernel's execution_state, Jupyter's word, not a job's"),
    ],
    "store-call": [
        # the supervisor's second road to the database (issue 24, part 3: the sink only)
        ("src/launch/supervisor.c", "launch_run", "store_new_job_id",
         "a new job's id, made by the store's naming rule; no database is touched"),
        ("src/launch/jobio.c", "*", None,
         "checkpoint rows for rotation and resume read from the store; the store opened for them"),
        ("src/launch/multinode.c", "mn_open", "store_job_get",
         "the driver of a local Slurm job reads its job's row (the restarts spent) from the "
         "database its direct sink writes"),
        ("src/launch/notify_hook.c", "launch_record_delivery", None,
         "a webhook delivery written to the store, not through the sink"),
        ("src/launch/lease.c", "*", None,
         "device leases: the machine's, shared by a local run and the server through the "
         "database; no sink record carries them"),
    ],
    "cmd-include": [],
    "run-layout": [
        ("src/cmd/cmd_server.c", "*", None,
         "a word of the help text (\"trainctl.db and runs/\"), not a path built"),
        ("src/hub/ingest_journals.c", "hub_ingest_journals", None,
         "the refusal messages name the journal/ folder (the hub's, not runpath's) "
         "relative to the state folder; no path is built from them"),
        ("src/metrics/ingest.c", "rank_dir", None,
         "TensorBoard's per-rank folder under output/tensorboard (the job's own output, "
         "not a name of the run folder)"),
    ],
    "test-import": [],
}

PROC_CALLS = ("fork", "vfork", "execv", "execve", "execvp", "execvpe", "execl", "execle",
              "execlp", "fexecve", "execveat", "posix_spawn", "posix_spawnp", "system",
              "popen")
PRINT_ANY = ("printf", "vprintf", "puts", "putchar", "perror")
# calls that print when their stream (first or last argument) is stdout or stderr
PRINT_FIRST = ("fprintf", "vfprintf", "dprintf", "write", "write_all")
PRINT_LAST = ("fputs", "fputc", "putc", "fwrite")
STD_STREAM = re.compile(r"^\s*(stdout|stderr|STDOUT_FILENO|STDERR_FILENO|1|2)\s*$")


# ---- a C file without its comments and strings ----

class CFile:
    """code: the text with comments blanked and string/char contents blanked
    (newlines kept, so offsets keep their lines); strings: [(line, value)];
    funcs: [(name, static, def_line, body_start, body_end)] by offset."""

    def __init__(self, path, rel):
        self.rel = rel
        with open(path, encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.lines = self.text.count("\n") + 1
        self.code, self.strings = strip(self.text)
        self.nl = [i for i, c in enumerate(self.code) if c == "\n"]
        self.funcs = functions(self.code)

    def line(self, off):
        lo, hi = 0, len(self.nl)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.nl[mid] < off:
                lo = mid + 1
            else:
                hi = mid
        return lo + 1

    def func_at(self, off):
        for name, _, _, start, end in self.funcs:
            if start <= off <= end:
                return name
        return None


def strip(text):
    out = []
    strings = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            chunk = text[i:j]
            out.append("".join(ch if ch == "\n" else " " for ch in chunk))
            line += chunk.count("\n")
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n - 1)
            if c == '"':
                strings.append((line, text[i + 1:j]))
            out.append(c + " " * (j - i - 1) + text[j])
            if text[j] == "\n":  # an unterminated literal ends at its line
                line += 1
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), strings


IDENT = re.compile(r"[A-Za-z_]\w*")
CALL = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*\(")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case",
            "defined", "__attribute__", "_Static_assert", "static_assert", "alignof",
            "_Alignof", "offsetof", "typeof", "__typeof__"}


def match_paren(code, i):
    """code[i] is '(' or '{': the index of its closing match (or len)"""
    open_c = code[i]
    close_c = ")" if open_c == "(" else "}"
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_c:
            depth += 1
        elif code[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def functions(code):
    """definitions at file level: NAME ( ... ) { ... }"""
    funcs = []
    i, n = 0, len(code)
    stmt_start = 0
    while i < n:
        c = code[i]
        if c == "#" and (i == 0 or code[i - 1] == "\n"):
            # a preprocessor line (with its continuations) is no definition
            while i < n and code[i] != "\n":
                i += 2 if code[i] == "\\" else 1
            stmt_start = i
            continue
        if c in ";":
            stmt_start = i + 1
        elif c == "{":
            # a brace at file level that is no function body: struct, enum,
            # initializer; skip it whole
            i = match_paren(code, i) + 1
            continue
        elif c == "(":
            m = re.search(r"([A-Za-z_]\w*)\s*$", code[stmt_start:i])
            close = match_paren(code, i)
            k = close + 1
            while k < n and code[k] in " \t\n":
                k += 1
            if m and m.group(1) not in KEYWORDS and k < n and code[k] == "{":
                end = match_paren(code, k)
                head = code[stmt_start:i]
                static = re.search(r"\bstatic\b", head) is not None
                funcs.append((m.group(1), static, i, k, end))
                i = end + 1
                stmt_start = i
                continue
            i = close + 1
            continue
        i += 1
    return funcs


def args_of(code, open_paren):
    """the top-level arguments of the call whose '(' is at open_paren"""
    close = match_paren(code, open_paren)
    inner = code[open_paren + 1:close]
    args, depth, cur = [], 0, []
    for ch in inner:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    args.append("".join(cur))
    return args


# ---- the rules ----

def library(rel):
    return rel.startswith("src/") and rel != "src/main.c" and not rel.startswith("src/cmd/")


def rule_proc(f):
    if f.rel == "src/core/proc.c":
        return
    for m in CALL.finditer(f.code):
        if m.group(1) in PROC_CALLS:
            yield m.start(), m.group(1), f"{m.group(1)}() outside src/core/proc.c"


def rule_print(f):
    if not library(f.rel):
        return
    for m in CALL.finditer(f.code):
        name = m.group(1)
        if name in PRINT_ANY:
            yield m.start(), name, f"{name}() in library code"
        elif name in PRINT_FIRST or name in PRINT_LAST:
            args = args_of(f.code, m.end() - 1)
            stream = args[0] if name in PRINT_FIRST else args[-1]
            if STD_STREAM.match(stream):
                yield m.start(), name, f"{name}({stream.strip()}, ...) in library code"


def rule_state_literal(f):
    if f.rel.startswith("src/jobs/"):
        return
    for line, value in f.strings:
        if value in STATE_WORDS:
            yield ("line", line), value, f'the job state "{value}" as a literal outside src/jobs/'


def rule_store_call(f):
    if not f.rel.startswith("src/launch/"):
        return
    for m in CALL.finditer(f.code):
        if m.group(1).startswith("store_"):
            yield m.start(), m.group(1), f"{m.group(1)}() from launch/ (write through the sink)"


INCLUDE_CMD = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(cmd/[^"]*)"', re.M)


def rule_cmd_include(f):
    if not library(f.rel):
        return
    for m in INCLUDE_CMD.finditer(f.text):
        yield ("line", f.text.count("\n", 0, m.start()) + 1), m.group(1), \
            f'#include "{m.group(1)}" in library code'


RUN_LAYOUT = ("runs/", "job.yaml", "supervisor.log", "rank-%d")


def rule_run_layout(f):
    if f.rel == "src/jobs/runpath.c":
        return
    for line, value in f.strings:
        word = next((w for w in RUN_LAYOUT if w in value), None)
        if word:
            yield ("line", line), value, \
                f'the run folder\'s "{word}" spelled outside src/jobs/runpath.c (use run_path)'


RULES = [("proc", rule_proc), ("print", rule_print), ("state-literal", rule_state_literal),
         ("store-call", rule_store_call), ("cmd-include", rule_cmd_include),
         ("run-layout", rule_run_layout)]


# ---- the e2e tests' imports ----

TEST_IMPORT = re.compile(r"^\s*(?:from\s+(test_\w+)\s+import|import\s+(test_\w+))", re.M)


def rule_test_import(root):
    d = os.path.join(root, "tests", "e2e")
    if not os.path.isdir(d):
        return
    for nm in sorted(os.listdir(d)):
        if not nm.endswith(".py"):
            continue
        with open(os.path.join(d, nm), encoding="utf-8") as fh:
            text = fh.read()
        for m in TEST_IMPORT.finditer(text):
            mod = m.group(1) or m.group(2)
            yield f"tests/e2e/{nm}", text.count("\n", 0, m.start()) + 1, mod, \
                f"imports from the test file {mod}.py: move the helper to conftest.py or a helper module"


# ---- the map ----

TICK = re.compile(r"`([^`\s]+)`")
PATHLIKE = re.compile(r"(?<![\w/.-])((?:src/)?[a-z_]+/[A-Za-z0-9_]+\.[ch])\b")


def map_names(root, sources):
    """(named: set of src/... paths, findings: [(line, text)]) from the map"""
    path = os.path.join(root, "docs", "ARCHITECTURE.md")
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    named, findings = set(), []

    def resolve(tok, folder):
        """the repo path tok names, or None when it is no path of ours"""
        if tok.startswith("src/"):
            return tok
        first = tok.split("/", 1)[0]
        if "/" in tok and os.path.isdir(os.path.join(root, "src", first)):
            return "src/" + tok
        if "/" in tok:
            return None  # tests/, python/, ...: not the source this map must name
        if not folder:
            return None
        if not os.path.exists(os.path.join(root, folder, tok)) and \
                os.path.exists(os.path.join(root, "src", tok)):
            return "src/" + tok  # main.c in the row of `src/main.c`, `src/cmd/`
        return f"{folder}/{tok}"

    for no, text in enumerate(lines, 1):
        folder = None
        if text.startswith("| `src/"):
            # the row's folder: the last folder its first cell names (`src/main.c`, `src/cmd/`)
            first_cell = text.split("|")[1]
            dirs = [t.rstrip("/") for t in TICK.findall(first_cell) if t.endswith("/")]
            folder = dirs[-1] if dirs else None
        seen = set()
        for tok in TICK.findall(text):
            tok = tok.rstrip(",.;:")
            if tok.endswith((".c", ".h")):
                p = resolve(tok, folder)
                if p:
                    seen.add(p)
            elif folder and re.fullmatch(r"[a-z_0-9]+", tok):
                # a module named by its stem in its folder's row (core/: `sbuf`)
                for ext in (".c", ".h"):
                    if f"{folder}/{tok}{ext}" in sources:
                        named.add(f"{folder}/{tok}{ext}")
        for m in PATHLIKE.finditer(text):
            p = resolve(m.group(1), None)
            if p:
                seen.add(p)
        for p in sorted(seen):
            if not os.path.exists(os.path.join(root, p)):
                findings.append((no, f"names {p}, which does not exist"))
            else:
                named.add(p)
    return named, findings


def rule_map(root, sources):
    named, findings = map_names(root, sources)
    for line, what in findings:
        yield "docs/ARCHITECTURE.md", line, what
    for s in sorted(sources):
        if s in named:
            continue
        # a module is named by its .c or its header: X.c, X.h and the folder's private
        # X_int.h go together (one module, one header)
        stem = s[:-2]
        if stem.endswith("_int"):
            stem = stem[:-4]
        if stem + ".c" in named or stem + ".h" in named:
            continue
        yield s, 1, "not named in docs/ARCHITECTURE.md (add it to its folder's row)"


# ---- the report: long files, call cycles ----

def cycles(files):
    """{folder: the largest strongly connected set of files (size > 1)}"""
    files = [f for f in files if f.rel.endswith(".c")]
    defs = {}
    for f in files:
        for name, static, *_ in f.funcs:
            if not static:
                defs.setdefault(name, set()).add(f.rel)
    edges = {}
    for f in files:
        folder = os.path.dirname(f.rel)
        out = set()
        for m in re.finditer(r"(?<![\w.>])([A-Za-z_]\w*)", f.code):
            for g in defs.get(m.group(1), ()):
                if g != f.rel and os.path.dirname(g) == folder:
                    out.add(g)
        edges[f.rel] = out
    # Tarjan, iterative
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for v0 in sorted(edges):
        if v0 in index:
            continue
        work = [(v0, iter(sorted(edges[v0])))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    best = {}
    for comp in comps:
        if len(comp) < 2:
            continue
        folder = os.path.dirname(comp[0])
        if len(comp) > len(best.get(folder, [])):
            best[folder] = comp
    return best


# ---- main ----

def allowed(rule, rel, func, what, used):
    for k, (afile, afunc, awhat, _reason) in enumerate(ALLOW.get(rule, [])):
        if afile == rel and afunc in ("*", func) and (awhat is None or awhat == what):
            used.add((rule, k))
            return True
    return False


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    src = os.path.join(root, "src")
    sources = []
    for d, subdirs, names in os.walk(src):
        subdirs.sort()
        for nm in sorted(names):
            if nm.endswith((".c", ".h")):
                sources.append(os.path.relpath(os.path.join(d, nm), root))
    files = [CFile(os.path.join(root, s), s) for s in sources]

    bad, used = [], set()
    for f in files:
        for rule, fn in RULES:
            for where, what, msg in fn(f):
                if isinstance(where, tuple):
                    line = where[1]
                    func = next((nm for nm, _, _, s, e in f.funcs
                                 if f.line(s) <= line <= f.line(e)), None)
                else:
                    line, func = f.line(where), f.func_at(where)
                if not allowed(rule, f.rel, func, what, used):
                    bad.append(f"{f.rel}:{line}: {rule}: {msg}"
                               + (f" (in {func})" if func else ""))
    for rel, line, mod, msg in rule_test_import(root):
        if not allowed("test-import", rel, "*", mod, used):
            bad.append(f"{rel}:{line}: test-import: {msg}")
    for rel, line, msg in rule_map(root, set(sources)):
        bad.append(f"{rel}:{line}: map: {msg}")

    for rule, entries in ALLOW.items():
        for k, (afile, afunc, awhat, _reason) in enumerate(entries):
            if (rule, k) not in used:
                what = f" {awhat!r}" if awhat else ""
                print(f"check-arch: note: ALLOW {rule} {afile}:{afunc}{what} matches nothing now:"
                      " remove it")

    for f in files:
        if f.rel.endswith(".c") and f.lines > LONG_FILE:
            bad.append(f"{f.rel}:{LONG_FILE + 1}: long-file: {f.lines} lines, over {LONG_FILE}:"
                       " split it by concern")
    for folder, comp in sorted(cycles(files).items()):
        names = ", ".join(os.path.basename(c) for c in comp)
        print(f"check-arch: info: {folder}/: largest call cycle, {len(comp)} files: {names}")
        if len(comp) > MAX_CYCLE:
            bad.append(f"{comp[0]}:1: cycle: {len(comp)} files of {folder}/ call each other in"
                       f" a cycle ({names}), over {MAX_CYCLE}: make the arrows go one way")

    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"check-arch: {len(bad)} violation(s) of docs/ARCHITECTURE.md: fix them, or add an"
              " exception with its reason to ALLOW in scripts/check-arch.py",
              file=sys.stderr)
        return 1
    print("check-arch: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
