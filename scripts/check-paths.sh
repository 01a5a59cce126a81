#!/bin/sh
# check-paths.sh -- one door to paths a user can write (docs/security.md,
# "Paths a user can write"): code under the folders below opens, lists,
# reads and deletes files only through src/core/upath.h, or as the account
# through core/proc.  A call of open(, fopen(, opendir(, nftw(, remove(,
# read_file( (and the util.h helpers that open by path) anywhere else fails
# this check, unless ALLOW below names its file and function (or a text of
# its line) with the reason it touches no path a user can write.
#
# Usage: scripts/check-paths.sh [SRC_ROOT]   (exit 0 clean, 1 a stray call)
# Needs only sh, grep, sed and awk.
set -eu

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
dirs="server hub jobs logs notify spec"
calls='open|fopen|opendir|nftw|remove|read_file|read_file_nofollow|open_regular_nofollow'

# One line each: FILE:FUNCTION or FILE:/TEXT/ (a fixed text on the line),
# then the reason.  Add a line here, with its reason, for a new exception.
ALLOW='
src/server/auth.c:/open("\/dev\/urandom"/        randomness from the kernel, no user path
src/server/eporigin.c:/open("\/dev\/urandom"/    randomness from the kernel, no user path
src/hub/remote.c:/open("\/dev\/urandom"/         randomness from the kernel, no user path
src/server/telemetry.c:/opendir("\/proc")/       /proc of this host, the kernel'"'"'s
src/jobs/exec.c:/opendir("\/proc")/              /proc of this host, the kernel'"'"'s
'

hits=$(cd "$root" && for d in $dirs; do
	[ -d "src/$d" ] || continue
	for f in src/$d/*.c; do
		[ -f "$f" ] || continue
		# FILE:LINE:FUNCTION:TEXT for each call outside comments
		awk -v f="$f" -v re="(^|[^A-Za-z0-9_.>])($calls)\\\\(" '
			/^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^#/ {
				fn = $0; sub(/\(.*/, "", fn); n = split(fn, w, /[ \t*]+/); fn = w[n]
			}
			{ line = $0; sub(/\/\/.*/, "", line); gsub(/\/\*.*\*\//, "", line) }
			line ~ /^[ \t]*\*/ || line ~ /^[ \t]*\/\*/ { next }
			line ~ re { printf "%s:%d:%s:%s\n", f, NR, fn, $0 }
		' "$f"
	done
done)

bad=$(printf '%s\n' "$hits" | while IFS= read -r hit; do
	[ -n "$hit" ] || continue
	file=${hit%%:*}
	rest=${hit#*:}
	lineno=${rest%%:*}
	rest=${rest#*:}
	fn=${rest%%:*}
	text=${rest#*:}
	ok=
	while IFS= read -r allow; do
		set -- $allow
		[ $# -ge 2 ] || continue
		key=$1
		afile=${key%%:*}
		what=${key#*:}
		[ "$afile" = "$file" ] || continue
		case $what in
		/*/)
			pat=$(printf '%s' "$what" | sed 's|^/||; s|/$||; s|\\/|/|g')
			case $text in *"$pat"*) ok=1 ;; esac ;;
		*)
			[ "$what" = "$fn" ] && ok=1 ;;
		esac
		[ -z "$ok" ] || break
	done <<ALLOWED
$ALLOW
ALLOWED
	if [ -z "$ok" ]; then
		echo "check-paths: $file:$lineno: $fn() opens a path outside core/upath.h:" >&2
		echo "    $(printf '%s' "$text" | sed 's/^[ \t]*//')" >&2
		echo x
	fi
done)

if [ -n "$bad" ]; then
	echo "check-paths: use core/upath.h for paths a user can write, or add the call to ALLOW in $0 with a reason" >&2
	exit 1
fi
echo "check-paths: ok"
