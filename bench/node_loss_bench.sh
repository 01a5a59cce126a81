#!/bin/sh
# A lost node's recovery, trainctl (a spare; fewer nodes) beside torchrun's
# c10d elastic restart (docs/PERFORMANCE.md, "A lost node: recovery time"):
# bench/node_loss_bench.py does the work, on a localhost Slurm cluster of
# three slurmd it starts and stops itself (tests/e2e/slurm_cluster.py).
#   bench/node_loss_bench.sh [--reps 3] [--impls spare,fewer,torchrun]
# Needs build/trainctl (make build), slurm-wlm and munge, Debian's python3-torch.
set -e
cd "$(dirname "$0")/.."
exec nice /usr/bin/python3 bench/node_loss_bench.py --trainctl build/trainctl "$@"
