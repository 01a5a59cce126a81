#!/bin/sh
# `make demo`: train the digits example on 2 CPU workers with the embedded
# defaults, then show the job.  Uses a demo home so it never mixes with
# the user's own jobs unless TRAINCTL_HOME is set.
set -eu
cd "$(dirname "$0")/.."
: "${TRAINCTL_HOME:=$PWD/build/demo-home}"
export TRAINCTL_HOME
echo "== trainctl run examples/digits/job.yaml (TRAINCTL_HOME=$TRAINCTL_HOME)"
build/trainctl run examples/digits/job.yaml
echo
echo "== trainctl ps"
build/trainctl ps
echo
echo "== trainctl show digits-ddp"
build/trainctl show digits-ddp
echo
echo "== validation accuracy per epoch, rank 0 (trainctl metrics)"
build/trainctl metrics digits-ddp --name val.accuracy --rank 0
