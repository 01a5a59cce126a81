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
echo "== validation accuracy per epoch (rank 0, from its DLLogger lines)"
grep -h '"val.accuracy"' "$(build/trainctl show digits-ddp --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["run_dir"])')/logs/rank-0.log" |
	/usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    rec = json.loads(line.split("DLLL ", 1)[1])
    print("epoch %s: val.accuracy %.4f" % (rec["step"][0], rec["data"]["val.accuracy"]))
'
