#!/usr/bin/python3
"""`make demo`'s progress view: runs a command (trainctl run ...) and shows,
instead of every worker's DLLogger lines, one line per epoch of rank 0
(epoch, train.loss, val.accuracy) and trainctl's own messages, less the
per-checkpoint and metrics counts (they stay in the job's supervisor log).
Every other line passes through: a traceback is never hidden.

    scripts/demo_progress.py build/trainctl run examples/digits/job.yaml

Exits with the command's exit status.
"""
import json
import re
import subprocess
import sys

QUIET = re.compile(r"^trainctl: (checkpoint \S+ complete|metrics: \d+ lines)")
DLLL = re.compile(r"^\[(\d+)\] DLLL (\{.*\})$")


def main(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    epochs = "?"
    for line in p.stdout:
        line = line.rstrip("\n")
        m = DLLL.match(line)
        if m:
            if m.group(1) != "0":
                continue
            try:
                rec = json.loads(m.group(2))
            except ValueError:
                continue
            data, step = rec.get("data") or {}, rec.get("step")
            if step == "PARAMETER" and "epochs" in data:
                epochs = data["epochs"]
            elif isinstance(step, list) and len(step) == 1 and "val.accuracy" in data:
                print(f"  epoch {step[0]:>2}/{epochs}  train.loss {data.get('train.loss', float('nan')):.4f}"
                      f"  val.accuracy {data['val.accuracy']:.4f}", flush=True)
            continue
        if QUIET.match(line):
            continue
        print(line, flush=True)
    return p.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
