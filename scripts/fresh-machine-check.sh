#!/bin/sh
# The fresh-machine check (issue 28): does scripts/install-deps.sh name every
# package trainctl and its tests use?  It builds a minimal Debian root with
# mmdebstrap --variant=apt from exactly the packages the script installs
# (install-deps.sh --list and --list soak; no Recommends, as the script's
# apt-get --no-install-recommends), then checks inside it that every entry of
# scripts/fresh-machine.list exists.  What is missing is printed with the
# package that brings it on this host (dpkg -S), and the exit status is 1.
#
#   scripts/fresh-machine-check.sh [--cached] [--list FILE]
#     --cached     use the cached root only: exit 77, saying so, when there
#                  is none for the current package list (make check's test)
#     --list FILE  check FILE's entries instead of scripts/fresh-machine.list
#
# The root is cached as a folder, by the hash of the package list and this
# recipe, where the other tests' mmdebstrap roots are:
#     ${TRAINCTL_FRESH_CACHE:-/var/cache/trainctl-tests/fresh-machine}/<hash>
# A new list builds a new root (minutes: several GB of packages) and removes
# the roots of older lists.  Building and checking need root (chroot, mounts).
# Exit: 0 all present, 1 something missing, 2 bad use or a failed build,
# 77 --cached without a cached root.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${TRAINCTL_FRESH_CACHE:-/var/cache/trainctl-tests/fresh-machine}
SUITE=bookworm
list=$here/fresh-machine.list
cached=""
while [ $# -gt 0 ]; do
	case "$1" in
	--cached) cached=1 ;;
	--list)
		[ $# -ge 2 ] || { echo "fresh-machine: --list needs a file" >&2; exit 2; }
		list=$2
		shift ;;
	*) echo "fresh-machine: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
	esac
	shift
done
[ -r "$list" ] || { echo "fresh-machine: cannot read the list $list" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "fresh-machine: needs root (mmdebstrap, chroot and mounts)" >&2; exit 2; }

# the entries: the first word of each line that is not a comment; each goes
# into a shell script run in the root, so only a safe alphabet is taken
entries=$(sed -e 's/#.*//' "$list" | awk 'NF { print $1 }')
bad=$(printf '%s\n' "$entries" | grep -v -E '^[A-Za-z0-9_./:+-]+$' || true)
if [ -n "$bad" ]; then
	echo "fresh-machine: $list: entries with characters other than A-Z a-z 0-9 _ . / : + -:" >&2
	printf '  %s\n' "$bad" >&2
	exit 2
fi
[ -n "$entries" ] || { echo "fresh-machine: $list has no entries" >&2; exit 2; }

pkgs=$( (sh "$here/install-deps.sh" --list && sh "$here/install-deps.sh" --list soak) | sort -u)
recipe="mmdebstrap --variant=apt --include=$(printf '%s\n' "$pkgs" | paste -sd, -) $SUITE"
key=$(printf '%s\n' "$recipe" | sha256sum | cut -c1-16)
root=$CACHE/$key

build_root() {
	tmp=$CACHE/$key.tmp.$$
	# --one-file-system: never into a mount a killed build left behind
	trap 'rm -rf --one-file-system "$tmp"' EXIT
	trap 'exit 130' INT TERM
	# roots of older lists and temporary roots of builds that died
	for old in "$CACHE"/*; do
		[ -d "$old" ] && [ "$old" != "$root" ] && rm -rf --one-file-system "$old"
	done
	echo "fresh-machine: building the root $root ($(printf '%s\n' "$pkgs" | wc -l) packages; minutes)"
	# the debs this host already downloaded are linked in so that apt need
	# not fetch them again; apt still installs only what the list resolves to
	seed=""
	if ls /var/cache/apt/archives/*.deb >/dev/null 2>&1; then
		seed='mkdir -p "$1/var/cache/apt/archives" && cp -l /var/cache/apt/archives/*.deb "$1/var/cache/apt/archives/" 2>/dev/null || cp /var/cache/apt/archives/*.deb "$1/var/cache/apt/archives/"'
	fi
	if ! mmdebstrap --quiet --variant=apt \
		--include="$(printf '%s\n' "$pkgs" | paste -sd, -)" \
		${seed:+--setup-hook="$seed"} "$SUITE" "$tmp" >"$CACHE/build.log" 2>&1; then
		echo "fresh-machine: mmdebstrap failed to build the root; its output is in $CACHE/build.log:" >&2
		tail -n 20 "$CACHE/build.log" >&2
		exit 2
	fi
	mv "$tmp" "$root"
	trap - EXIT INT TERM
}

mkdir -p "$CACHE"
if [ ! -d "$root" ]; then
	if [ -n "$cached" ]; then
		echo "fresh-machine: no cached root for the current package list ($root);" \
			"make soak or scripts/fresh-machine-check.sh builds it"
		exit 77
	fi
	exec 9>"$CACHE/.lock"
	flock 9  # two runs build it once
	[ -d "$root" ] || build_root
	exec 9>&-
fi

# The check, run in the root: one line "missing KIND ENTRY" for each absent one.
probe=$(
	echo 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; export PATH'
	echo 'libs=$(ldconfig -p 2>/dev/null || true)'
	printf '%s\n' "$entries" | while read -r e; do
		case "$e" in
		py:*) echo "PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import ${e#py:}' >/dev/null 2>&1 || echo 'missing module $e'" ;;
		/*) echo "test -e '$e' || echo 'missing file $e'" ;;
		lib*.so*) echo "printf '%s\\n' \"\$libs\" | awk '\$1 == \"$e\" { f = 1 } END { exit !f }' || echo 'missing library $e'" ;;
		*) echo "command -v '$e' >/dev/null 2>&1 || echo 'missing program $e'" ;;
		esac
	done
)
# In a mount namespace of its own: the root read-only (the cached root stays
# as built), /proc, /dev and a scratch /tmp for the imports.
missing=$(printf '%s\n' "$probe" | unshare --mount --propagation private sh -c '
	set -e
	r=$1
	mount --bind "$r" "$r"
	mount -o remount,bind,ro "$r"
	mount -t proc proc "$r/proc"
	mount --rbind /dev "$r/dev"
	mount -t tmpfs tmpfs "$r/tmp"
	mount -t tmpfs tmpfs "$r/root"
	HOME=/root exec chroot "$r" /bin/sh -s' sh "$root")

n=$(printf '%s\n' "$entries" | wc -l)
np=$(printf '%s\n' "$pkgs" | wc -l)
if [ -z "$missing" ]; then
	echo "fresh-machine: all $n entries of $list exist in a root of install-deps.sh's $np packages ($root)"
	exit 0
fi

# Which package would bring each: the one holding it on this host.
host_file() { # kind entry -> the file on this host, or nothing
	case "$1" in
	module) /usr/bin/python3 -c "import ${2#py:} as m; print(getattr(m, '__file__', '') or '')" 2>/dev/null || true ;;
	file) if [ -e "$2" ]; then echo "$2"; fi ;;
	library) ldconfig -p | awk -v s="$2" '$1 == s { print $NF; exit }' ;;
	program) PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$2" 2>/dev/null || true ;;
	esac
}
owner() { # file -> its package, trying the merged-/usr twins of its path
	for c in "$1" "$(readlink -f "$1")" "/usr${1#/usr}" "${1#/usr}"; do
		p=$(dpkg -S "$c" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$p" ] && { echo "$p"; return; }
	done
}
echo "fresh-machine: missing in a root of install-deps.sh's $np packages ($root):"
printf '%s\n' "$missing" | while read -r _ kind e; do
	f=$(host_file "$kind" "$e") || f=""
	p=""
	[ -n "$f" ] && p=$(owner "$f")
	if [ -n "$p" ]; then
		echo "  $kind $e: package $p brings it (add it to scripts/install-deps.sh)"
	elif [ -n "$f" ]; then
		echo "  $kind $e: this host has $f, from no Debian package"
	else
		echo "  $kind $e: no package on this host has it either"
	fi
done
exit 1
