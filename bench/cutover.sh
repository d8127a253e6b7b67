#!/usr/bin/env bash
# seamfs cutover benchmark: the longest gap a reader sees between consecutive
# reads when the active source fails mid-read and seamfs cuts over in place to
# a verified standby; median and p99 over N cutovers, per trigger (a TCP reset,
# a stall), against the targets. Prints one table; writes OUT/cutover.json.
#
#   sudo bench/cutover.sh [--seamfs PATH] [--origin PATH] [--work DIR]
#                         [--out DIR] [--rounds N] [--size-mib N]
#                         [--triggers reset,stall]
#
#   --seamfs PATH   the daemon (default: build/seamfs of this repo)
#   --origin PATH   the fault origin (default: build/tests/server/seam-origin)
#   --work DIR      data, mount point, state, origins (default /tmp/seamfs-cutover-bench);
#                   the generated file is reused while it has the right size
#   --out DIR       cutover.json and logs/ (default WORK/out)
#   --rounds N      cutovers per trigger (default 20)
#   --size-mib N    size of the random file (default 256, at least 128)
#   --triggers T    comma-separated, of reset, stall and none (default reset,stall;
#                   none: the same reads without a fault, the reader's own noise)
#
# Targets: reset-triggered gap <= 100 ms; stall-triggered <= stall_timeout +
# 100 ms (run with stall_timeout=1: <= 1100 ms). Needs root (mounting).
# Exits 0 whether targets are met or not; non-zero means the harness broke
# (or a round failed: a read error, wrong bytes, no cutover). See bench/README.md.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

SEAMFS=$REPO/build/seamfs
ORIGIN=$REPO/build/tests/server/seam-origin
WORK=/tmp/seamfs-cutover-bench
OUT=
ROUNDS=20
SIZE_MIB=256
TRIGGERS=reset,stall

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"

while [ $# -gt 0 ]; do
	case $1 in
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--seamfs=*) SEAMFS=${1#*=} ;;
	--origin) ORIGIN=${2:?--origin needs a path}; shift ;;
	--origin=*) ORIGIN=${1#*=} ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--rounds) ROUNDS=${2:?--rounds needs a number}; shift ;;
	--rounds=*) ROUNDS=${1#*=} ;;
	--size-mib) SIZE_MIB=${2:?--size-mib needs a number}; shift ;;
	--size-mib=*) SIZE_MIB=${1#*=} ;;
	--triggers) TRIGGERS=${2:?--triggers needs a list}; shift ;;
	--triggers=*) TRIGGERS=${1#*=} ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds: not a positive number: $ROUNDS"
if ! [[ $SIZE_MIB =~ ^[0-9]+$ ]] || [ "$SIZE_MIB" -lt 128 ]; then
	die "--size-mib: a number, at least 128"
fi

work_paths

# The helper stops what it started itself; should it die first, the PIDs it
# left in PIDFILE (seamfs, the two origins) are stopped here, one by one.
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	stop_pid "$HELPER_PID" cutover.py
	unmount_dir "$MNT"
	stop_pidfile "$PIDFILE"
	[ $rc -ne 0 ] && printf 'cutover.sh: stopped (exit %d); mount and servers cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM

main() {
	[ "$(id -u)" -eq 0 ] || die "needs root (mounting): sudo $0"
	[ -x "$PY" ] || die "$PY is missing (apt-get install python3)"
	command -v fusermount3 >/dev/null || die "fusermount3 is missing (apt-get install fuse3)"
	[ -x "$SEAMFS" ] || die "no seamfs daemon at $SEAMFS (build it: meson setup build && meson compile -C build, or pass --seamfs PATH)"
	[ -x "$ORIGIN" ] || die "no seam-origin at $ORIGIN (built with seamfs by meson, or pass --origin PATH)"
	SEAMFS=$(realpath "$SEAMFS")
	ORIGIN=$(realpath "$ORIGIN")
	mkdir -p "$WORK" "$OUT"
	unmount_dir "$MNT"
	rm -rf "$WORK/state" "$OUT/logs"
	say "seamfs: $SEAMFS ($("$SEAMFS" --version 2>&1 | head -n 1)), $ROUNDS cutovers per trigger ($TRIGGERS)"
	# In the background and waited for, so that the INT/TERM trap runs at once.
	"$PY" "$BENCH/cutover.py" run --seamfs "$SEAMFS" --origin "$ORIGIN" --work "$WORK" \
		--pidfile "$PIDFILE" --out "$OUT/cutover.json" --rounds "$ROUNDS" \
		--size-mib "$SIZE_MIB" --triggers "$TRIGGERS" --stall-timeout 1 &
	HELPER_PID=$!
	local rc=0
	wait "$HELPER_PID" || rc=$?
	HELPER_PID=
	[ $rc -eq 0 ] || die "some rounds failed (see ERRORS above; logs in $OUT/logs)"
}

main "$@"
