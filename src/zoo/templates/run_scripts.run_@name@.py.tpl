#!/usr/bin/env python3
"""run_@name@.py -- the unified run interface of @NAME@.

    cd <model dir> && python run_scripts/run_@name@.py --model_name @name@ \
        --nproc_per_node 2 --batch_size 32 --epoch 1 --step 10 --lr 0.05 \
        --device cpu --autocast false --dataset_path none

Parses the arguments (argument.py), prints the command (formate_cmd.py),
then starts --nproc_per_node workers of ../train.py on this node with the
torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) and waits for them.  When a worker fails the
others are stopped and its exit code is this script's.  SIGTERM and SIGINT
reach every worker.
"""
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from argument import parse_args, train_argv  # noqa: E402
from formate_cmd import print_cmd  # noqa: E402

TRAIN = os.path.join(os.path.dirname(HERE), "train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args, rest = parse_args()
    n, nodes = args.nproc_per_node, args.nnode
    if n < 1 or nodes < 1 or not 0 <= args.node_rank < nodes:
        sys.exit(f"run_@name@.py: bad layout: nproc_per_node {n}, nnode {nodes}, node_rank {args.node_rank}")
    port = args.master_port or (free_port() if nodes == 1 else 29500)
    cmd = [sys.executable, TRAIN] + train_argv(args) + rest
    print_cmd(cmd, n, nodes)
    procs = []

    def stop(sig, _frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for local in range(n):
        env = dict(os.environ, RANK=str(args.node_rank * n + local), LOCAL_RANK=str(local),
                   WORLD_SIZE=str(nodes * n), LOCAL_WORLD_SIZE=str(n),
                   GROUP_RANK=str(args.node_rank), MASTER_ADDR=args.master_addr,
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=env))
    code, live = 0, list(procs)
    while live:
        for p in list(live):
            r = p.poll()
            if r is None:
                continue
            live.remove(p)
            if r != 0 and code == 0:
                code = r if r > 0 else 128 - r
                print(f"run_@name@.py: worker {procs.index(p)} exited with {r}; stopping the others",
                      file=sys.stderr, flush=True)
                for q in live:
                    q.terminate()
        time.sleep(0.05)
    sys.exit(code)


if __name__ == "__main__":
    main()
