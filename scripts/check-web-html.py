#!/usr/bin/env python3
"""check-web-html.py -- the web UI puts text into the page only through
textContent or its one escaping helper (html`...` in web/app.js,
docs/security.md "The page").  Fails, naming file and line, on any
innerHTML, outerHTML, insertAdjacentHTML, document.write(ln),
createContextualFragment or srcdoc whose right-hand side (argument) is not a
constant string literal, such as `el.innerHTML = "<b>" + name` or a template
literal with ${...}.

Allowed: a constant literal (`el.innerHTML = ""`), comment lines, and the
helper's own parse, the one line marked `html-sink:` (exactly one in web/).

    scripts/check-web-html.py [FILE...]     (default: web/*.js, web/*.html)
Run by `make check-web` (part of `make check`) and by
tests/e2e/test_ui_hostile.py.
"""
import glob
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SINKS = re.compile(r"\b(innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|srcdoc)\b"
                   r"|\bdocument\s*\.\s*write(?:ln)?\b")
MARK = "html-sink:"


def literal_end(text, i):
    """The index just after the constant string literal at text[i], or -1
    when there is none (or it is a template literal with ${...})."""
    q = text[i:i + 1]
    if q not in ("'", '"', "`"):
        return -1
    k = i + 1
    while k < len(text):
        c = text[k]
        if c == "\\":
            k += 2
            continue
        if q == "`" and text.startswith("${", k):
            return -1
        if c == q:
            return k + 1
        if c == "\n" and q != "`":
            return -1
        k += 1
    return -1


def constant_use(text, m):
    """Is the sink at match m used with a constant literal only?"""
    k = m.end()
    rest = text[k:]
    a = re.match(r"\s*=\s*", rest)  # el.innerHTML = "..."
    if a and not rest.startswith("=="):
        k += a.end()
    else:
        a = re.match(r"\s*\(\s*", rest)  # document.write("..."), createContextualFragment("...")
        if not a:
            return False
        k += a.end()
        if m.group(1) == "insertAdjacentHTML":  # its second argument is the markup
            e = literal_end(text, k)
            b = re.match(r"\s*,\s*", text[e:]) if e > 0 else None
            if not b:
                return False
            k = e + b.end()
    e = literal_end(text, k)
    # the literal must be the whole value: nothing joined to it
    return e > 0 and re.match(r"\s*(?:[;),}\n]|$)", text[e:]) is not None


def check(path):
    text = open(path, encoding="utf-8").read()
    bad, marks = [], 0
    for m in SINKS.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        line = text.splitlines()[line_no - 1]
        s = line.strip()
        if s.startswith(("//", "/*", "*")):
            continue
        if MARK in line:
            marks += 1
            continue
        # the word in a string ("srcdoc"), not a property by its name (el["innerHTML"])
        q = text[m.start() - 1:m.start()]
        if q in ("'", '"', "`") and text[m.end():m.end() + 1] == q and \
                not re.match(r"\s*\]", text[m.end() + 1:]):
            continue
        if not constant_use(text, m):
            bad.append(f"{os.path.relpath(path, REPO)}:{line_no}: {m.group(0)} with a value that "
                       f"is not a constant string: build the DOM with textContent or html`...` "
                       f"(web/app.js)\n    {s}")
    return bad, marks


def main(argv):
    files = argv or sorted(glob.glob(os.path.join(REPO, "web", "*.js")) +
                           glob.glob(os.path.join(REPO, "web", "*.html")))
    bad, marks = [], 0
    for f in files:
        b, n = check(f)
        bad += b
        marks += n
    if marks > 1:
        bad.append(f"{marks} lines are marked '{MARK}': the UI has one escaping helper, not {marks}")
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"check-web-html: {len(bad)} problem(s) (docs/security.md, \"The page\")", file=sys.stderr)
        return 1
    print(f"check-web-html: {len(files)} files, no HTML built from values")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
