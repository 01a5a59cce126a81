#!/bin/sh
# `make soak`: the end-to-end suite SOAK_ROUNDS times (default 2) while
# stress-ng keeps SOAK_CPUS CPUs busy (default 2: all of a 2-core CI
# machine), as a loaded CI machine runs it.  A test that passes alone and
# fails here waits on timing instead of on a condition.
#
#   TRAINCTL=build-asan/trainctl scripts/soak.sh [pytest args...]
#
# Before the rounds, the fault sweep and the crash loop run once in full
# (TC_CRASH_ROUNDS, default 200).  Every round runs even when one fails; the
# exit status is 1 if any did.
# stress-ng comes from Debian (scripts/install-deps.sh soak installs it).
set -eu
: "${TRAINCTL:?set TRAINCTL to the binary under test}"
ROUNDS=${SOAK_ROUNDS:-2}
CPUS=${SOAK_CPUS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
TC_CRASH_ROUNDS=${TC_CRASH_ROUNDS:-200}
SOAK_FAULT_REPORT=${SOAK_FAULT_REPORT:-$(pwd)/soak-faults.md}
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null 2>&1 || scripts/install-deps.sh soak
# --timeout: a soak killed with SIGKILL must not leave the load behind for long
stress-ng --cpu "$CPUS" --timeout 4h --quiet &
load=$!
trap 'kill "$load" 2>/dev/null || true; wait "$load" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
start=$(date +%s)
failed=""
# Once, in full: the I/O fault sweep over every N of every op and errno, and
# 200 crash-loop rounds (issue 28; docs/reliability.md); its table goes to
# SOAK_FAULT_REPORT.  The rounds below run their sampled form.
t0=$(date +%s)
echo "soak: fault sweep (every N) and crash loop ($TC_CRASH_ROUNDS rounds)"
if TRAINCTL="$TRAINCTL" TC_CRASH_ROUNDS="$TC_CRASH_ROUNDS" TC_FAULT_SWEEP=all TC_FAULT_REPORT="$SOAK_FAULT_REPORT" \
	"$PYTHON" -m pytest -q -s -p no:cacheprovider tests/e2e/test_fault_sweep.py tests/e2e/test_crash_loop.py; then
	echo "soak: fault sweep and crash loop passed in $(($(date +%s) - t0)) s; table in $SOAK_FAULT_REPORT"
else
	echo "soak: fault sweep or crash loop FAILED after $(($(date +%s) - t0)) s"
	failed=" faults"
fi
for r in $(seq 1 "$ROUNDS"); do
	t0=$(date +%s)
	echo "soak: round $r of $ROUNDS under stress-ng --cpu $CPUS"
	if TRAINCTL="$TRAINCTL" "$PYTHON" -m pytest -q -p no:cacheprovider tests/e2e "$@"; then
		echo "soak: round $r passed in $(($(date +%s) - t0)) s"
	else
		echo "soak: round $r FAILED after $(($(date +%s) - t0)) s"
		failed="$failed $r"
	fi
done
total=$(($(date +%s) - start))
if [ -n "$failed" ]; then
	echo "soak: rounds$failed of $ROUNDS failed; $total s in all"
	exit 1
fi
echo "soak: $ROUNDS rounds passed under stress-ng --cpu $CPUS in $total s ($((total / 60)) min $((total % 60)) s)"
