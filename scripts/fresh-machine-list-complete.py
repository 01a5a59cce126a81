#!/usr/bin/python3
"""Does scripts/fresh-machine.list name every program and python module that
trainctl's sources and its tests call?  Prints each one it is missing (with
where it is called) and exits 1; exits 0 when the list is complete.

    scripts/fresh-machine-list-complete.py [--list FILE]

What counts as a call, so that a word that merely looks like a program is no
false alarm:
  C (src/, tests/fake/): the first string of a `const char *argv[] = {...,
    NULL}`,
    which("x"), run_tool("x", ...), .program = "x", #define ..._PROGRAM "x",
    and strvec_push(&v, "x") as a vector's first push in its function;
  Python (tests/, scripts/, python/): the first string of a list or tuple
    given to run/Popen/check_output/check_call/call (subprocess's or a
    fixture's of the same name), shutil.which("x"), the string given to a
    function of the file that looks its argument up or runs it (a fixture's
    sh("x", ...), _cli("x", ...), need("x")), the strings a loop looks up
    (for p in ("a", "b"): which(p)), an absolute path to a program in a string
    (executablePath "/usr/bin/chromium" in tests/ui too), and every
    `import x` of a module that is neither python's own nor the repo's,
    unless the import sits in a try that catches ImportError or is
    pytest.importorskip()ed (optional);
and then only what this host resolves to a program (a word that is no
program here is an argument, or a program the tests skip without).
Programs of Debian's Essential packages (sh, env, id, ...) are in every
root and need no line.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUNNERS = {"run", "Popen", "check_output", "check_call", "call", "_run"}
# its programs are ones a root of install-deps.sh's packages must lack
NOT_SCANNED = {"tests/e2e/test_fresh_machine.py"}
ABS = re.compile(r"^/(usr/)?(s?bin|libexec)/[A-Za-z0-9_.+/-]+$")


def list_entries(path):
    out = set()
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(line.split()[0])
    return out


def essential_files():
    """The files of this host's Essential:yes packages, both merged-/usr forms."""
    q = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential}\n"],
                       capture_output=True, text=True, check=True).stdout
    files = set()
    for line in q.splitlines():
        name, _, ess = line.partition(" ")
        if ess.strip() != "yes":
            continue
        for lst in (f"/var/lib/dpkg/info/{name}.list", f"/var/lib/dpkg/info/{name}:amd64.list"):
            if os.path.exists(lst):
                for f in Path(lst).read_text().splitlines():
                    files.add(f)
                    files.add(f[4:] if f.startswith("/usr/") else "/usr" + f)
    return files


def c_calls(path):
    text = path.read_text(errors="replace")
    found = []
    # an argv: a NULL-terminated array of strings (not a table of names)
    for m in re.finditer(r'const\s+char\s*\*\s*(?:const\s+)?\w+\s*\[\w*\]\s*=\s*\{\s*"([^"]+)"([^}]*)\}', text):
        if re.search(r"\bNULL\s*,?\s*$", m.group(2)):
            found.append((m.group(1), text.count("\n", 0, m.start()) + 1))
    for pat in (r'\bwhich\("([^"]+)"\)', r'\brun_tool\("([^"]+)"',
                r'\.program\s*=\s*"([^"]+)"', r'#define\s+\w+_PROGRAM\s+"([^"]+)"'):
        for m in re.finditer(pat, text):
            found.append((m.group(1), text.count("\n", 0, m.start()) + 1))
    # strvec_push: the first push onto each vector within a function body
    for body in re.finditer(r"^\{.*?^\}", text, re.S | re.M):
        first = {}
        for m in re.finditer(r'strvec_push\w*\(\s*&?([\w.>-]+)\s*,\s*([^;]*?)\)\s*;', body.group(0)):
            vec, arg = m.group(1), m.group(2).strip()
            if vec not in first:
                first[vec] = arg
                lit = re.fullmatch(r'"([^"]+)"', arg)
                if lit:
                    line = text.count("\n", 0, body.start() + m.start()) + 1
                    found.append((lit.group(1), line))
    return found


def _name(func):
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _first_str(node):
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        e = node.elts[0]
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return e.value
    return None


def _optional_imports(tree):
    """Line numbers of imports inside a try that catches ImportError."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            catches = set()
            for h in node.handlers:
                t = h.type
                for n in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    catches.add(_name(n) if n is not None else "")
            if catches & {"ImportError", "ModuleNotFoundError", "Exception", ""}:
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            lines.add(sub.lineno)
    return lines


def _literal_strings(node, assigned):
    """The strings of a literal list/tuple/set (a dict: its keys), through a
    name bound to one in the file, or a dict's .items()/.keys()."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("items", "keys"):
        node = node.func.value
    if isinstance(node, ast.Name):
        node = assigned.get(node.id)
    if isinstance(node, ast.Dict):
        node = ast.Tuple(elts=node.keys)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _uses_as_program(body, var):
    """Does body look var up (which(var)) or run it (run([var, ...]))?"""
    for sub in ast.walk(body):
        if not isinstance(sub, ast.Call):
            continue
        name = _name(sub.func)
        if name == "which" and sub.args and isinstance(sub.args[0], ast.Name) and sub.args[0].id == var:
            return True
        if name in RUNNERS:
            for a in sub.args:
                if isinstance(a, (ast.List, ast.Tuple)) and a.elts:
                    e = a.elts[0]
                    e = e.value if isinstance(e, ast.Starred) else e
                    if isinstance(e, ast.Name) and e.id == var:
                        return True
    return False


def _program_takers(tree):
    """name -> argument position, for the file's functions that run or look up
    a program given as that argument (fixtures' _cli, need, sh, ...)."""
    takers = {"which": 0, "sh": 0}
    for f in ast.walk(tree):
        if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [a.arg for a in f.args.posonlyargs + f.args.args]
        if params and params[0] in ("self", "cls"):
            params = params[1:]
        cands = [(i, p) for i, p in enumerate(params)]
        if f.args.vararg:
            cands.append((len(params), f.args.vararg.arg))
        for i, p in cands:
            if _uses_as_program(f, p):
                takers[f.name] = i
                break
    return takers


def py_calls(path):
    """(programs, modules): each a list of (name, line)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError:
        return [], []
    progs, mods = [], []
    optional = _optional_imports(tree)
    takers = _program_takers(tree)
    assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name in RUNNERS:
                for a in node.args:
                    s = _first_str(a)
                    if s:
                        progs.append((s, node.lineno))
            elif name in takers and len(node.args) > takers[name]:
                a = node.args[takers[name]]
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    progs.append((a.value, node.lineno))
        # for p in ("a", "b"): which(p) -- and comprehensions alike
        loops = []
        if isinstance(node, ast.For):
            loops.append((node.target, node.iter, node))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            loops.extend((g.target, g.iter, node) for g in node.generators)
        for target, it, body in loops:
            var = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
            if isinstance(var, ast.Name) and _uses_as_program(body, var.id):
                progs.extend((w, node.lineno) for w in _literal_strings(it, assigned))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and ABS.match(node.value):
            progs.append((node.value, node.lineno))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in optional:
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    continue
                names = [node.module]
            else:
                names = [a.name for a in node.names]
            mods.extend((n.split(".")[0], node.lineno) for n in names)
    return progs, mods


def local_modules():
    """Module names the repo itself provides (tests' helpers, the package)."""
    out = set()
    for p in REPO.rglob("*.py"):
        if "node_modules" in p.parts or p.parts[len(REPO.parts)] in ("build", ".git"):
            continue
        out.add(p.stem)
        out.add(p.parent.name)
    return out


def main(argv):
    listing = REPO / "scripts" / "fresh-machine.list"
    if len(argv) == 2 and argv[0] == "--list":
        listing = Path(argv[1])
    elif argv:
        print("usage: fresh-machine-list-complete.py [--list FILE]", file=sys.stderr)
        return 2
    entries = list_entries(listing)
    names = entries | {os.path.basename(e) for e in entries if e.startswith("/")}
    essential = essential_files()
    locals_ = local_modules()
    stdlib = set(sys.stdlib_module_names)
    missing = {}  # entry -> first place

    def want_program(word, where):
        if word.startswith("/"):
            if not (os.path.isfile(word) and os.access(word, os.X_OK)):
                return
            path = word
        else:
            if "/" in word or not re.fullmatch(r"[A-Za-z0-9_.+-]+", word):
                return
            path = shutil.which(word, path=PATH)
            if not path:
                return
        if path in essential or os.path.realpath(path) in essential:
            return
        if word in names or os.path.basename(word) in names:
            return
        missing.setdefault(word, where)

    c_files = [p for d in ("src", "tests/fake") for p in (REPO / d).rglob("*.c")]
    for p in sorted(c_files):
        for word, line in c_calls(p):
            want_program(word, f"{p.relative_to(REPO)}:{line}")
    py_files = [p for d in ("tests", "scripts", "python") for p in (REPO / d).rglob("*.py")
                if "node_modules" not in p.parts]
    for p in sorted(py_files):
        if str(p.relative_to(REPO)) in NOT_SCANNED:
            continue
        progs, mods = py_calls(p)
        for word, line in progs:
            want_program(word, f"{p.relative_to(REPO)}:{line}")
        for mod, line in mods:
            if mod in stdlib or mod in locals_ or f"py:{mod}" in entries:
                continue
            missing.setdefault(f"py:{mod}", f"{p.relative_to(REPO)}:{line}")
    for p in sorted((REPO / "tests" / "ui").glob("*.js")):
        text = p.read_text()
        for m in re.finditer(r'"(/[^"]+)"', text):
            if ABS.match(m.group(1)):
                want_program(m.group(1), f"{p.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}")
    if missing:
        print(f"{listing.relative_to(REPO) if listing.is_relative_to(REPO) else listing}: "
              f"{len(missing)} called but not listed:")
        for word, where in sorted(missing.items()):
            print(f"  {word}  ({where})")
        return 1
    print(f"{listing.name}: every program and module the sources and tests call is listed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
