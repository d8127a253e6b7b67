#!/usr/bin/env bash
# seamfs soak: concurrent readers through one real mount while the origins
# misbehave (one at a time, always two healthy); every byte read is checked
# against the file on disk and every whole file against its SHA-256; the
# daemon's RSS and open fds are sampled every second; the slowest read is
# reported with the chaos action active then. Prints one table; writes
# OUT/soak.json (all of it), OUT/chaos.log, OUT/seamfs.log.
#
#   sudo bench/soak.sh [--short] [--duration S] [--readers N] [--seamfs PATH]
#                      [--origin PATH] [--work DIR] [--out DIR] [--files N]
#                      [--size-mib N] [-o OPTS] [--seed N]
#
#   --short         the CI mode: 45 s, 8 readers, 4 files of 16 MiB
#                   (default: 600 s, 32 readers, 8 files of 256 MiB)
#   --duration S    seconds of reading (at least 10)
#   --readers N     concurrent reader processes; every fourth reads random
#                   4 MiB runs, the others whole files sequentially
#   --seamfs PATH   the daemon (default: build/seamfs of this repo)
#   --origin PATH   the fault origin (default: build/tests/server/seam-origin)
#   --work DIR      data, mount point, state, origins (default /tmp/seamfs-soak);
#                   the generated files are reused while they have the right size
#   --out DIR       soak.json, chaos.log, seamfs.log, status.json, metrics
#                   (default WORK/out)
#   --files N, --size-mib N   the generated files (at least 8 MiB each)
#   -o OPTS         more seamfs mount options, appended to
#                   state_dir=...,read_timeout=20,standby_delay=0,stall_timeout=2
#   --seed N        the chaos schedule's and the random readers' seed
#
# Needs root (mounting). Exit 0: no read failed and no byte was wrong (timings
# never fail it); 1: a read failed, a byte was wrong, a reader hung, or the
# daemon died or exited non-zero (ASan); 2: the harness broke. See bench/README.md.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

SEAMFS=$REPO/build/seamfs
ORIGIN=$REPO/build/tests/server/seam-origin
WORK=/tmp/seamfs-soak
OUT=
SHORT=0
DURATION=
READERS=
FILES=
SIZE_MIB=
OPTS=
SEED=

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"
# the harness itself broke: exit 2 (lib.sh's die exits 1, which means a seamfs failure here)
broke() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 2; }

while [ $# -gt 0 ]; do
	case $1 in
	--short) SHORT=1 ;;
	--duration) DURATION=${2:?--duration needs seconds}; shift ;;
	--duration=*) DURATION=${1#*=} ;;
	--readers) READERS=${2:?--readers needs a number}; shift ;;
	--readers=*) READERS=${1#*=} ;;
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--seamfs=*) SEAMFS=${1#*=} ;;
	--origin) ORIGIN=${2:?--origin needs a path}; shift ;;
	--origin=*) ORIGIN=${1#*=} ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--files) FILES=${2:?--files needs a number}; shift ;;
	--files=*) FILES=${1#*=} ;;
	--size-mib) SIZE_MIB=${2:?--size-mib needs a number}; shift ;;
	--size-mib=*) SIZE_MIB=${1#*=} ;;
	-o) OPTS=${2:?-o needs options}; shift ;;
	--seed) SEED=${2:?--seed needs a number}; shift ;;
	--seed=*) SEED=${1#*=} ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$SHORT" = 1 ]; then
	: "${DURATION:=45}" "${READERS:=8}" "${FILES:=4}" "${SIZE_MIB:=16}"
else
	: "${DURATION:=600}" "${READERS:=32}" "${FILES:=8}" "${SIZE_MIB:=256}"
fi
if ! [[ $DURATION =~ ^[0-9]+$ ]] || [ "$DURATION" -lt 10 ]; then
	broke "--duration: a number of seconds, at least 10"
fi
[[ $READERS =~ ^[1-9][0-9]*$ ]] || broke "--readers: not a positive number: $READERS"
[[ $FILES =~ ^[1-9][0-9]*$ ]] || broke "--files: not a positive number: $FILES"
if ! [[ $SIZE_MIB =~ ^[0-9]+$ ]] || [ "$SIZE_MIB" -lt 8 ]; then
	broke "--size-mib: a number, at least 8"
fi
[ -z "$SEED" ] || [[ $SEED =~ ^[0-9]+$ ]] || broke "--seed: not a number: $SEED"

work_paths

# The helper stops what it started itself; should it die first, the PIDs it
# left in PIDFILE (seamfs, the origins, the readers) are stopped here, one by
# one (SIGCONT first: an origin may be SIGSTOPped by the chaos).
cleanup() {
	local rc=$? pid
	set +e
	trap - EXIT INT TERM
	# the helper cleans up in order (readers, unmount, daemon, origins): give it 30 s
	if alive "$HELPER_PID"; then
		kill -TERM "$HELPER_PID" 2>/dev/null
		wait_gone "$HELPER_PID" 30 || stop_pid "$HELPER_PID" soak.py
	fi
	if [ -s "$PIDFILE" ]; then
		while read -r pid; do
			[[ $pid =~ ^[0-9]+$ ]] && kill -CONT "$pid" 2>/dev/null
		done <"$PIDFILE"
	fi
	unmount_dir "$MNT"
	if [ -s "$PIDFILE" ]; then
		while read -r pid; do
			[[ $pid =~ ^[0-9]+$ ]] && stop_pid "$pid" "helper child"
		done <"$PIDFILE"
	fi
	rm -f "$PIDFILE" "$PIDFILE.tmp"
	[ $rc -gt 2 ] && printf 'soak.sh: stopped (exit %d); mount and servers cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM

main() {
	[ "$(id -u)" -eq 0 ] || broke "needs root (mounting): sudo $0"
	[ -x "$PY" ] || broke "$PY is missing (apt-get install python3)"
	command -v fusermount3 >/dev/null || broke "fusermount3 is missing (apt-get install fuse3)"
	[ -e /dev/fuse ] || broke "/dev/fuse is missing"
	[ -x "$SEAMFS" ] || broke "no seamfs daemon at $SEAMFS (build it: meson setup build && meson compile -C build, or pass --seamfs PATH)"
	[ -x "$ORIGIN" ] || broke "no seam-origin at $ORIGIN (built with seamfs by meson, or pass --origin PATH)"
	SEAMFS=$(realpath "$SEAMFS")
	ORIGIN=$(realpath "$ORIGIN")
	mkdir -p "$WORK" "$OUT"
	unmount_dir "$MNT"
	say "seamfs: $SEAMFS ($("$SEAMFS" --version 2>&1 | head -n 1)); $DURATION s, $READERS readers, $FILES files x $SIZE_MIB MiB"
	local args=(run --own-group --seamfs "$SEAMFS" --origin "$ORIGIN" --work "$WORK" --pidfile "$PIDFILE"
		--out "$OUT" --duration "$DURATION" --readers "$READERS" --files "$FILES"
		--size-mib "$SIZE_MIB")
	[ -z "$OPTS" ] || args+=(--opts "$OPTS")
	[ -z "$SEED" ] || args+=(--seed "$SEED")
	# In the background and waited for, so that the INT/TERM trap runs at once.
	"$PY" "$BENCH/soak.py" "${args[@]}" &
	HELPER_PID=$!
	local rc=0
	wait "$HELPER_PID" || rc=$?
	HELPER_PID=
	case $rc in
	0) ;;
	1) printf 'soak.sh: FAIL: seamfs returned an error or wrong bytes (see ERRORS above; %s)\n' "$OUT" >&2; exit 1 ;;
	*) printf 'soak.sh: the harness broke (helper exit %d; see above, %s)\n' "$rc" "$OUT" >&2; exit 2 ;;
	esac
}

main "$@"
