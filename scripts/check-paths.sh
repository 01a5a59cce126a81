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
dirs="server api gateway hub jobs logs notify spec"
calls='open|fopen|opendir|nftw|remove|read_file|read_file_nofollow|open_regular_nofollow'

# One line each: FILE:FUNCTION or FILE:/TEXT/ (a fixed text of the line, between
# the outer slashes),
# then the reason.  Add a line here, with its reason, for a new exception.
ALLOW=$(cat <<'EOF'
src/api/auth.c:/open("/dev/urandom"/       randomness from the kernel, no user path
src/gateway/eporigin.c:/open("/dev/urandom"/   randomness from the kernel, no user path
src/hub/remote.c:/open("/dev/urandom"/        randomness from the kernel, no user path
src/server/telemetry.c:/opendir("/proc")/      /proc of this host: the kernel's
src/jobs/exec.c:/opendir("/proc")/             /proc of this host: the kernel's
src/jobs/exec.c:read_account                   /proc/PID/status: the kernel's
src/jobs/exec.c:exec_target_read               /proc/PID/environ: the kernel's
src/jobs/exec.c:exec_find_child                /proc/PID/environ: the kernel's
src/jobs/exec.c:read_cmdline                   /proc/PID/cmdline: the kernel's
src/jobs/exec.c:exec_container_client          /proc/PID/environ: the kernel's
src/server/daemon.c:lock_state                 STATE/server.lock: the server's own folder
src/server/daemon.c:holder_alive               STATE/server.lock: the server's own folder (the pid of the holder, to say who)
src/server/privsep.c:hub_key                   STATE/hub.key: the server's own 0600 file (O_NOFOLLOW)
src/server/privsep.c:hand_run_folder           opens STATE/runs, the server's own, as the base of an openat
src/server/privsep.c:srv_ingest_journals       opens STATE/runs, the server's own, as the base of hub_ingest's openat walk
src/server/external.c:hand_run_dir             RUN/NAME one level below runs/ (the server's), O_NOFOLLOW, checked root's before fchown
src/hub/event.c:open_in_run_dir                a Slurm job's files from other nodes: walks RUN with openat and O_NOFOLLOW itself, as the run folder's owner (setfsuid), making what is missing, which upath does not
src/hub/event.c:open_run_dir                   a Slurm job's run folder on the hub's host, O_NOFOLLOW, made when missing (its files come from another host), then written as its owner
src/hub/remote.c:adopt                         the supervisor's side: its own journal folder, as the job's account
src/hub/remote.c:sink_remote_open              the supervisor's side: its own journal, as the job's account
src/hub/remote.c:secret_from_env               the supervisor's side: TRAINCTL_HUB_SECRET_FILE of its own environment
src/hub/remote.c:journals_left                 the supervisor's side: its own journal folder, as the job's account
src/hub/ship.c:ship_one                        a node's supervisor sends its own run folder's files, as the job's account
src/spec/command.c:guess_in                    names in a PATH folder for a hint, with the caller's file ids; nothing read
src/spec/notify_rules.c:spec_notify_load       --notify-file: the operator's own file
src/server/config.c:srvconf_parse              --config: the operator's own file (its path fixed at start), read at start and on a reload
src/spec/spec.c:load_file                      the CLI's spec file (the user's own process) and RUN/job.yaml the server wrote
EOF
)

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

set -f # no globbing of the words of ALLOW below
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
			pat=${what#/}; pat=${pat%/}
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
