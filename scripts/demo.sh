#!/bin/sh
# `make demo`: train the digits example on 2 CPU workers with the embedded
# defaults, then show the job.  Uses a demo home so it never mixes with
# the user's own jobs unless TRAINCTL_HOME is set.  While it trains, one
# line per epoch of rank 0 (scripts/demo_progress.py); every worker's lines
# are in `trainctl logs digits-ddp`.
set -eu
cd "$(dirname "$0")/.."
: "${TRAINCTL_HOME:=$PWD/build/demo-home}"
export TRAINCTL_HOME
echo "== trainctl run examples/digits/job.yaml (TRAINCTL_HOME=$TRAINCTL_HOME)"
echo "   rank 0, epoch by epoch:"
/usr/bin/python3 scripts/demo_progress.py build/trainctl run examples/digits/job.yaml
echo
echo "== trainctl ps"
build/trainctl ps
echo
echo "== trainctl show digits-ddp (its metrics summary)"
build/trainctl show digits-ddp | sed -n '/^metrics:/,$p'
echo
echo "More, with TRAINCTL_HOME=$TRAINCTL_HOME:"
echo "  build/trainctl logs digits-ddp       every rank's log (one rank: --rank 0)"
echo "  build/trainctl show digits-ddp       spec, states, workers, summary"
echo "  build/trainctl metrics digits-ddp    every metric point (--name val.accuracy)"
