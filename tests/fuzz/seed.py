#!/usr/bin/python3
"""seed.py -- collect the seed corpora of tests/fuzz/ from tests/, docs/ and
examples/ (run by seed.sh; docs/fuzzing.md).

Seeds are the texts the project already holds of each format: the string
literals of the unit tests (C: adjacent literals joined, simple string
macros expanded) and of the e2e tests (Python string constants), the fenced
blocks of the docs, the example files, and a few generated binary files
(safetensors).  Each target keeps the texts its predicate accepts, one file
per text named by its SHA-1 (libFuzzer's naming), at most MAX_FILES files
of at most MAX_BYTES bytes.  Files already in a corpus (crashes kept as
regression inputs, hand-written seeds) are never removed.
"""
import ast
import hashlib
import json
import os
import re
import struct
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
MAX_BYTES = 4096
MAX_FILES = 120

C_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'",
         "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def c_unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 2:])
            out.append(chr(int(m.group(0), 16)))
            i += 2 + len(m.group(0))
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        else:
            out.append(C_ESC.get(n, n))
            i += 2
    return "".join(out)


LIT = r'"(?:[^"\\\n]|\\.)*"'


def c_strings(text):
    """Every run of adjacent C string literals (and string macros) in text."""
    macros = {}
    for m in re.finditer(r"#define\s+(\w+)\s+((?:%s\s*)+)" % LIT, text):
        macros[m.group(1)] = "".join(c_unescape(x[1:-1]) for x in re.findall(LIT, m.group(2)))
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    piece = r"(?:%s|\b(?:%s)\b)" % (LIT, "|".join(map(re.escape, macros)) or "(?!x)x")
    for m in re.finditer(r"%s(?:\s*%s)*" % (piece, piece), text):
        parts = re.findall(piece, m.group(0))
        if all(p in macros for p in parts):
            continue
        yield "".join(macros[p] if p in macros else c_unescape(p[1:-1]) for p in parts)


def py_strings(text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            v = node.value
            yield v.decode("latin-1") if isinstance(v, bytes) else v


def md_blocks(text):
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        yield m.group(2)


def files(*dirs, exts=()):
    for d in dirs:
        for base, _, names in os.walk(os.path.join(ROOT, d)):
            if "node_modules" in base or "__pycache__" in base:
                continue
            for n in sorted(names):
                if not exts or n.endswith(exts):
                    yield os.path.join(base, n)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def all_texts():
    """(source, text) of every literal, block, line and example file."""
    for p in files("tests/unit", exts=(".c",)):
        for s in c_strings(read(p)):
            yield p, s
    for p in files("tests/e2e", exts=(".py",)):
        for s in py_strings(read(p)):
            yield p, s
    for p in files("docs", exts=(".md",)):
        t = read(p)
        for b in md_blocks(t):
            yield p, b
        for line in t.splitlines():
            yield p, line
    for p in files("examples", "tests/unit/golden", "tests/e2e/golden"):
        if p.endswith((".yaml", ".yml", ".json", ".md", ".csv", ".jsonl")):
            t = read(p)
            yield p, t
            for line in t.splitlines():
                yield p, line


METRIC_RE = re.compile(r"(DLLL |TCAPPDLL |DLL |Epoch:\[)")


def metrics_lines(text):
    for line in text.splitlines():
        m = METRIC_RE.search(line)
        if m:
            # from the prefix on (a MindFormers line keeps what precedes it)
            yield line if m.group(1) == "Epoch:[" else line[m.start():]


PREDICATES = {
    "spec": lambda s: re.search(r"^\s*\{?\s*\"?command\"?\s*:", s, re.M) is not None
    and "case_name" not in s,
    "s3_xml": lambda s: re.search(r"<(ListBucketResult|Error|InitiateMultipartUploadResult|"
                                  r"Contents|CompleteMultipartUploadResult|UploadId)", s) is not None,
    "s3_ini": lambda s: re.search(r"^\[(s3|obs)\]", s, re.M) is not None,
    "plan_instance": lambda s: "num_split" in s or re.match(r"^\s*(x|layer|graph_size)\s*,", s) is not None,
    "plan_yaml": lambda s: re.search(r"^(layers|devices_per_node|nodes|intra_node_bandwidth|"
                                     r"device_memory|bytes_per_param)\s*:", s, re.M) is not None
    and "command" not in s,
    "zoo": lambda s: "case_name" in s,
    "ranktable": lambda s: "address_" in s or "server_list" in s,
    "npu_smi": lambda s: "| NPU" in s or "npu-smi" in s and "|" in s,
}


def st_file(tensors, metadata=None):
    """A safetensors file: tensors is [(name, dtype, shape, data bytes)]."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    yield st_file([("w", "F32", [2, 2], f32)])
    yield st_file([("w", "F32", [2, 2], f32), ("b", "BF16", [2], b"\x80\x3f\x00\x40")],
                  {"format": "pt", "step": "120"})
    yield st_file([("layers.0.attn.weight", "F16", [1, 3], b"\x00" * 6),
                   ("layers.0.mlp.bias", "I64", [1], b"\x01" + b"\x00" * 7),
                   ("mask", "BOOL", [3], b"\x01\x00\x01"),
                   ("scalar", "F64", [], b"\x00" * 8),
                   ("empty", "U8", [0], b"")])
    yield st_file([], {})
    for dt, size in (("I8", 1), ("U16", 2), ("I16", 2), ("I32", 4), ("U32", 4), ("U64", 8),
                     ("F8_E5M2", 1), ("F8_E4M3", 1), ("U8", 1)):
        yield st_file([("t", dt, [2], b"\x07" * (2 * size))])


def api_seeds(specs):
    yield "GET /api/v1/jobs?limit=5&offset=0&state=running,queued&user=alice&name=digits\n"
    yield "GET /api/v1/jobs/20240605-abc123/logs?rank=0&tail=100&format=json&follow=1\n"
    yield "GET /api/v1/jobs/digits/metrics/points?name=train.loss&rank=-1&points=500&xmin=0&xmax=1e3\n"
    yield "GET /api/v1/jobs/digits/usage?since=1717550000.5\n"
    yield "GET /api/v1/events?after=42&token=abc%20def+x\n"
    yield "DELETE /api/v1/jobs/x.y_z-1\n"
    yield "POST /api/v1/jobs/digits/stop\n"
    yield "PUT /api/v1/jobs/digits/report\n"
    yield "GET /api/v2/whatever\n"
    yield "GET /metrics\n"
    yield "GET /index.html\n"
    yield 'POST /api/v1/jobs\n{"spec": {"command": ["python3", "train.py"]}, "name": "n"}'
    for s in specs[:20]:
        yield "POST /api/v1/jobs\n" + json.dumps({"spec": s, "file": "job.yaml", "base": "/tmp"})


def set_seeds(texts, specs):
    """--set overrides: the KEY=VALUE strings of the tests and docs alone, and
    specs followed by a few of them, NUL-separated (fuzz_set.c)."""
    sets = []
    for _, s in texts:
        m = re.match(r"[a-z_]+(\.[A-Za-z0-9_]+)*=", s)
        if m and len(s) < 200 and "\0" not in s:
            sets.append(s)
    sets = list(dict.fromkeys(sets))
    yield from sets
    for i, s in enumerate(specs[:20]):
        yield s + "\0" + "\0".join(sets[i:i + 3] or ["args.lr=0.1"])


def write(target, blobs):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    seen, added = set(os.listdir(d)), 0
    for b in blobs:
        if isinstance(b, str):
            b = b.encode("utf-8", errors="surrogateescape")
        if not b or len(b) > MAX_BYTES:
            continue
        name = hashlib.sha1(b).hexdigest()
        if name in seen:
            continue
        if added >= MAX_FILES:
            break
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)
        seen.add(name)
        added += 1
    print("%-14s %3d new seeds, %3d files" % (target, added, len(seen)))


def main():
    texts = list(all_texts())
    got = {t: [] for t in PREDICATES}
    metrics = []
    for _, s in texts:
        for t, pred in PREDICATES.items():
            if pred(s):
                got[t].append(s)
        metrics.extend(metrics_lines(s))
    # whole example files first, then the rest in a stable order
    for t in got:
        got[t] = list(dict.fromkeys(got[t]))
    write("metrics", list(dict.fromkeys(metrics)))
    for t in ("spec", "s3_xml", "s3_ini", "plan_instance", "plan_yaml", "zoo", "ranktable",
              "npu_smi"):
        write(t, got[t])
    write("safetensors", list(safetensors_seeds()))
    write("api", list(api_seeds(got["spec"])))
    write("set", list(set_seeds(texts, got["spec"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
