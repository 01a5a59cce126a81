#!/bin/bash
# run.sh -- run the libFuzzer harnesses of a TC_FUZZ=ON build (docs/fuzzing.md).
#
#   tests/fuzz/run.sh BUILD SECONDS fuzz|check [TARGET...]
#
# fuzz:  each target for SECONDS, growing a working corpus kept in
#        BUILD/fuzz/corpus/TARGET (seeded from tests/fuzz/corpus/TARGET);
# check: each target over its committed corpus plus SECONDS of new inputs,
#        in a throw-away working corpus (make check).
# Targets run FUZZ_JOBS at a time (default: 1 for fuzz, 2 for check).
# A crash, leak, timeout or out-of-memory leaves its input under
# BUILD/fuzz/artifacts/TARGET/ and makes the run fail; keep it as
# tests/fuzz/corpus/TARGET/crash-WHAT once fixed, with a unit test.
# The summary (executions, exec/s, cov, ft, corpus) is printed and written
# to BUILD/fuzz/summary-MODE.txt.
set -eu

here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = --one ]; then
	# one target: --one BUILD SECONDS MODE TARGET
	build=$2 secs=$3 mode=$4 t=$5
	bin=$build/tests/fuzz/fuzz_$t
	out=$build/fuzz
	mkdir -p "$out/artifacts/$t" "$out/logs"
	if [ "$mode" = fuzz ]; then
		work=$out/corpus/$t
		mkdir -p "$work"
	else
		work=$(mktemp -d "${TMPDIR:-/tmp}/tc-fuzz-$t.XXXXXX")
		trap 'rm -rf "$work"' EXIT
		# a fixed seed: make check explores the same inputs on every run, so a
		# crash it can meet is met here before a change lands, not at random in CI
		seed="-seed=${FUZZ_SEED:-1}"
	fi
	log=$out/logs/$t-$mode.log
	rc=0
	seed=${seed:-}
	# -timeout: one input may take 10 s at most (the planner behind a spec is the slowest)
	# -rss_limit_mb / -malloc_limit_mb: an input may not make a parser take 2 GB
	"$bin" -max_total_time="$secs" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
		-malloc_limit_mb=2048 -dict="$here/dict/$t.dict" -print_final_stats=1 \
		-artifact_prefix="$out/artifacts/$t/" $seed ${FUZZ_FLAGS:-} \
		"$work" "$here/corpus/$t" >"$log" 2>&1 || rc=$?
	done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
	stat() { sed -n "s/^stat::$1:[[:space:]]*//p" "$log" | tail -n 1; }
	cov=$(printf '%s\n' "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(printf '%s\n' "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(printf '%s\n' "$done_line" | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
	# the CPU time the fuzzer got (user + system of this shell's children): on a
	# shared machine it is what the executions were bought with, not the wall time
	times >"$log.times" # in this shell: in a $(...) subshell it would count none
	cpu=$(sed -n 2p "$log.times" | tr 'ms' '  ' | awk '{ printf "%.0f", $1 * 60 + $2 + $3 * 60 + $4 }')
	status=ok
	[ "$rc" = 0 ] || status="FAILED (exit $rc)"
	printf '%-14s %6ss %6ss %12s %9s %6s %6s %12s  %s\n' "$t" "$secs" "${cpu:-?}" \
		"$(stat number_of_executed_units)" \
		"$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$status"
	if [ "$rc" != 0 ]; then
		{
			echo "---- $t: the end of $log"
			grep -v -E '^#[0-9]+|^INFO:' "$log" | tail -n 40
			echo "---- inputs kept: $(ls "$out/artifacts/$t" | tr '\n' ' ')"
		} >&2
	fi
	exit "$rc"
fi

if [ $# -lt 3 ]; then
	echo "usage: $0 BUILD SECONDS fuzz|check [TARGET...]" >&2
	exit 2
fi
build=$1 secs=$2 mode=$3
shift 3
case $mode in
fuzz) jobs=${FUZZ_JOBS:-1} ;;
check) jobs=${FUZZ_JOBS:-2} ;;
*) echo "run.sh: mode is fuzz or check, not '$mode'" >&2; exit 2 ;;
esac
targets=${*:-$(sed -n '/^set(TC_FUZZ_TARGETS/,/)/p' "$here/CMakeLists.txt" |
	sed 's/set(TC_FUZZ_TARGETS//; s/)//' | tr -s ' \n' '  ')}
mkdir -p "$build/fuzz"
summary=$build/fuzz/summary-$mode.txt
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cpus, $jobs at a time, mode $mode"
	printf '%-14s %7s %7s %12s %9s %6s %6s %12s  %s\n' TARGET TIME CPU EXECS EXEC/S COV FT CORPUS \
		STATUS
} >"$summary"
cat "$summary"
rc=0
set -o pipefail
printf '%s\n' $targets |
	xargs -P "$jobs" -I{} "$0" --one "$build" "$secs" "$mode" {} | tee -a "$summary" || rc=$?
if [ "$rc" != 0 ]; then
	echo "run.sh: a target failed; its input is under $build/fuzz/artifacts/ (see above)" >&2
	exit 1
fi
