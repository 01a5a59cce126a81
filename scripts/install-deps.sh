#!/bin/sh
# Installs the Debian packages trainctl needs to build, test and run its demo.
# Idempotent: does nothing when everything is present.
set -eu
PKGS="build-essential cmake pkg-config libyaml-dev libjansson-dev libsqlite3-dev \
python3-torch python3-sklearn python3-pytest"
missing=""
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
