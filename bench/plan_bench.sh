#!/bin/sh
# plan_bench.sh -- build bench/plan_partition.c with cc -O2 against the
# planner sources and time ours vs the plain O(G^3 S) baseline, one core,
# both objectives, at the sizes of docs/PERFORMANCE.md.
#   bench/plan_bench.sh            # full run
#   N=200 NB=5 bench/plan_bench.sh # quicker
set -eu
cd "$(dirname "$0")/.."
N=${N:-2000}
NB=${NB:-20}
B=${B:-8}
out=${TMPDIR:-/tmp}/plan_partition_bench.$$
trap 'rm -f "$out"' EXIT
cc -O2 -std=c17 -D_GNU_SOURCE -Isrc -o "$out" bench/plan_partition.c \
	src/plan/solve.c src/plan/partition.c src/plan/instance.c \
	src/core/err.c src/core/sbuf.c src/core/util.c src/core/xalloc.c \
	$(pkg-config --cflags --libs jansson) -lm
for gs in "30 15" "54 31" "102 31" "102 63"; do
	set -- $gs
	taskset -c 0 "$out" "$1" "$2" "$N" "$NB" train
	taskset -c 0 "$out" "$1" "$2" "$N" "$NB" pipeline "$B"
done
