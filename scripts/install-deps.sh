#!/bin/sh
# Installs the Debian packages trainctl needs to build, test and run its demo.
# Idempotent: does nothing when everything is present.
#   scripts/install-deps.sh         what make check and make demo need
#   scripts/install-deps.sh soak    stress-ng only, for make soak
#   scripts/install-deps.sh --list [soak]
#                                   print the packages a fresh machine gets,
#                                   one a line, and install nothing (the
#                                   fresh-machine check builds its root from it)
set -eu
list=""
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
if [ "${1:-}" = soak ]; then
	PKGS="stress-ng"
else
# lintian checks the Debian package (make deb, tests/e2e/test_deb_package.py)
PKGS="build-essential cmake pkg-config libyaml-dev libjansson-dev libsqlite3-dev \
python3-torch python3-sklearn python3-pytest python3-numpy \
libcurl4-openssl-dev libssl-dev rclone curl jq \
libmicrohttpd-dev chromium chromium-driver \
slurm-wlm munge libslurm-dev iproute2 zsh \
slurmdbd mariadb-server \
podman runc uidmap mmdebstrap catatonit lintian \
clang libclang-rt-dev \
openssh-server openssh-client \
jupyter-notebook python3-ipykernel python3-websocket \
ceph-mon ceph-osd radosgw ceph-common python3-boto3 \
python3-setuptools python3-wheel python3-venv \
prometheus git"
# git: test_formats_doc.py lists the tracked files (git ls-files)
# slurmdbd and mariadb-server: Slurm's accounting (sshare, sacct) for the tests
# of teams mapped to Slurm accounts (tests/e2e/slurmdbd_fixture.py), started by
# the tests on a private datadir and loopback ports, never as services
# python3-setuptools and python3-wheel build the Python package offline
# (python/_build/backend.py); python3-venv: its install test's bare venv
# catatonit is podman's --init (the container tests' workers run under it);
# --no-install-recommends leaves it out with podman
# ceph-mon, ceph-osd and radosgw: a real S3 server for the storage tests
# (tests/e2e/rgw_fixture.py), started by the tests, never as services;
# prometheus (and its promtool) checks /metrics and deploy/'s rules and
# dashboards' queries (tests/e2e/test_prometheus.py), started by the tests
# on ports of their own, never as a service (disabled below)
# boto3 and rclone are the other clients they check trainctl against
# s3rver (tests/s3) needs node and npm; a node from elsewhere that brings its
# own npm is fine, and Debian's npm would conflict with it
# (--list: a fresh machine has neither)
[ -z "$list" ] && command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
[ -z "$list" ] && command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi
if [ -n "$list" ]; then
	printf '%s\n' $PKGS
	exit 0
fi
missing=""
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "installing:$missing"
$SUDO apt-get update -qq
# openssh-server is for the ssh endpoint's own sshd (docs/exec.md): the
# system's ssh service must not start (no port 22 nobody asked for), so
# services are held off during the install and ssh's is disabled after it
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod 755 /usr/sbin/policy-rc.d
	policy=1
	trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
if [ -n "$policy" ]; then
	$SUDO rm -f /usr/sbin/policy-rc.d
	trap - EXIT
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$SUDO systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
	$SUDO systemctl disable --now prometheus.service prometheus-node-exporter.service >/dev/null 2>&1 || true
	# mariadb-server is for the tests' own slurmdbd (tests/e2e/slurmdbd_fixture.py), never a service
	$SUDO systemctl disable --now mariadb.service slurmdbd.service >/dev/null 2>&1 || true
fi
