#!/usr/bin/python3
"""Slurm launch-benchmark worker: bench/allreduce_worker.py's all_reduce, then
this rank's finish time in $BENCH_DONE/rank-$RANK (bench/slurm_launch.py)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allreduce_worker  # noqa: E402

if __name__ == "__main__":
    allreduce_worker.main()
    with open(os.path.join(os.environ["BENCH_DONE"], "rank-" + os.environ["RANK"]), "w") as f:
        f.write(repr(time.time()))
