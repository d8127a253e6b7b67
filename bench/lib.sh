# lib.sh - shell helpers the benchmark scripts share (sourced, not run):
# messages, stopping processes by PID, unmounting.

say() { printf '==> %s\n' "$*" >&2; }
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }
die() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }
# usage: the script's header comment, from its second line to the first
# line that is not a comment
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# wait_gone PID SECONDS
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		alive "$1" || return 0
		sleep 0.1
	done
	return 1
}

# stop_pid PID NAME: SIGTERM, wait 10 s, SIGKILL, wait 5 s.
stop_pid() {
	alive "$1" || return 0
	kill -TERM "$1" 2>/dev/null || true
	if ! wait_gone "$1" 10; then
		warn "$2 (pid $1) did not stop in 10 s; killing it"
		kill -KILL "$1" 2>/dev/null || true
		wait_gone "$1" 5 || warn "$2 (pid $1) survived SIGKILL"
	fi
}

any_mount() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# unmount_dir DIR: fusermount3 -u, retried for 10 s while busy, then lazily.
unmount_dir() {
	local i
	any_mount "$1" || return 0
	for ((i = 0; i < 20; i++)); do
		fusermount3 -u "$1" 2>/dev/null && return 0
		any_mount "$1" || return 0
		sleep 0.5
	done
	warn "$1 stays busy; detaching it lazily"
	fusermount3 -uz "$1" 2>/dev/null || true
}

# WORK and OUT (default WORK/out) made absolute; MNT and PIDFILE below WORK;
# no helper yet.
work_paths() {
	WORK=$(realpath -m "$WORK")
	: "${OUT:=$WORK/out}"
	OUT=$(realpath -m "$OUT")
	MNT=$WORK/mnt
	PIDFILE=$WORK/pids
	HELPER_PID=
}

# Stops, by PID, what a helper left listed in the file $1 (one PID a line)
# should it have died before cleaning up; then removes the file.
stop_pidfile() {
	local pid
	if [ -s "$1" ]; then
		while read -r pid; do
			[[ $pid =~ ^[0-9]+$ ]] && stop_pid "$pid" "helper child"
		done <"$1"
	fi
	rm -f "$1" "$1.tmp"
}
