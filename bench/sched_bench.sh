#!/bin/sh
# sched_bench.sh -- build bench/sched_bench.c with cc -O2 against the
# scheduler's sources and replay its synthetic trace, FIFO, backfill and
# fair share + backfill side by side, on one core (docs/PERFORMANCE.md).
#   bench/sched_bench.sh               # 10,000 jobs, offered load 1.2
#   bench/sched_bench.sh 2000 1.0      # smaller, lighter
set -eu
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}/sched_bench.$$
trap 'rm -f "$out"' EXIT
cc -O2 -std=c17 -D_GNU_SOURCE -Isrc -o "$out" bench/sched_bench.c src/sched/sched.c src/sched/fairshare.c \
	src/core/xalloc.c -lm
taskset -c 0 "$out" "$@"
