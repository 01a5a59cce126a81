#!/bin/sh
# The rendezvous at scale, trainctl's hub beside TorchElastic's c10d
# (docs/PERFORMANCE.md, "Rendezvous"): bench/rdzv_bench.py does the work.
#   bench/rdzv_bench.sh [--nodes 8,64,256,1024] [--c10d-nodes 8,16,32] [--threads 128]
# Needs build/trainctl (make build) and, for c10d, Debian's python3-torch.
# The node supervisors run as threads of a few processes (--threads per
# process, the victim alone in its own): 1,024 processes would not fit the
# default ulimit -u of a test account, and each thread holds one connection.
set -e
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec nice /usr/bin/python3 bench/rdzv_bench.py --trainctl build/trainctl "$@"
