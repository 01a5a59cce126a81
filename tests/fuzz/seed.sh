#!/bin/sh
# Collect the seed corpora (tests/fuzz/corpus/<target>/) from tests/, docs/
# and examples/; seed.py says how.  Adds files, never removes any.
exec /usr/bin/python3 "$(dirname "$0")/seed.py" "$@"
