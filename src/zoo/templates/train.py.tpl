#!/usr/bin/env python3
"""train.py -- @NAME@'s training, one worker (started by run_scripts/run_@name@.py).

A placeholder written by `trainctl zoo new`: it fits y = 3x + 1 with SGD in
plain Python so that the folder passes `trainctl zoo check` and `zoo test`
from the start.  Replace the model and data; keep the logging: one
tcap_dllogger line per step with rank, train.loss and train.ips.
"""
import argparse
import json
import os
import random
import sys
import time


def tcap_log(step, data):
    """A tcap_dllogger JSON line: data is the str() of a dict of str() values."""
    now = time.time()
    rec = {"timestamp": str(now), "datetime": time.strftime("%Y-%m-%d %H:%M:%S"),
           "elapsedtime": str(now - START), "type": "LOG", "step": step,
           "data": str({k: str(v) for k, v in data.items()})}
    # one write per line: workers share stdout, and a line written whole
    # (under PIPE_BUF) never interleaves with another worker's
    sys.stdout.write("TCAPPDLL " + json.dumps(rec) + "\n")
    sys.stdout.flush()


START = time.time()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--epoch", type=int, default=1)
    p.add_argument("--step", type=int, default=-1)
    p.add_argument("--lr", type=float, default=0.05)
    args, _ = p.parse_known_args()
    rank = int(os.environ.get("RANK", "0"))
    rng = random.Random(1234 + rank)
    w, b = 0.0, 0.0
    steps = args.step if args.step > 0 else 20
    for epoch in range(1, args.epoch + 1):
        for it in range(1, steps + 1):
            t0 = time.time()
            xs = [rng.uniform(-1, 1) for _ in range(args.batch_size)]
            err = [(w * x + b) - (3 * x + 1) for x in xs]
            loss = sum(e * e for e in err) / len(err)
            w -= args.lr * 2 * sum(e * x for e, x in zip(err, xs)) / len(xs)
            b -= args.lr * 2 * sum(err) / len(err)
            ips = args.batch_size / max(time.time() - t0, 1e-9)
            tcap_log([epoch, it], {"rank": rank, "train.loss": loss, "train.ips": ips})


if __name__ == "__main__":
    main()
