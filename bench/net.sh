#!/usr/bin/env bash
# seamfs on real networks: seamfs next to raw curl, the FUSE ceiling of this
# machine (bench-nullfs, a null FUSE daemon) and rclone where it applies, with
# a fast origin (nginx), a distant one (seam-origin --delay-ms) and a
# throttled one (nginx limit_rate 4m), and 32 paced viewers. Prints one table
# with every figure, its ratio and its target; writes OUT/net.json.
#
#   sudo bench/net.sh [--quick] [--seamfs PATH] [--nullfs PATH] [--origin PATH]
#                     [--work DIR] [--out DIR] [--runs N] [--delay-ms N]
#                     [--seamfs-opt OPTS] [--budget-mib N] [--cases LIST]
#                     [--viewers N] [--view-secs S] [--seek-secs S] [--no-rclone]
#
#   --quick          256 MiB + 4 x 64 MiB files, 1 run, 16 MiB capped reads,
#                    viewers for 15 s (a smoke test, about 3 minutes)
#   --seamfs PATH    the daemon to measure (default: build/seamfs of this repo)
#   --nullfs PATH    the null FUSE daemon (default: bench-nullfs next to --seamfs)
#   --origin PATH    seam-origin (default: tests/server/seam-origin next to --seamfs)
#   --work DIR       data, mounts, origins, state (default /tmp/seamfs-net-bench);
#                    the generated files are reused while their sizes match
#   --out DIR        net.json, logs/, tmp/ (default WORK/out)
#   --runs N         runs per measurement (default 3, quick 1); figures are medians
#   --delay-ms N     first-byte delay of the distant origin (default 25)
#   --seamfs-opt OPTS  extra seamfs -o options (e.g. readahead_budget=128M)
#   --budget-mib N   read-ahead budget the viewers' RSS target is checked against
#                    (default: readahead_budget of --seamfs-opt, else 256)
#   --cases LIST     of seq, far, cap, viewers (default all, in that order)
#   --viewers N      paced viewers (default 32)
#   --view-secs S    how long the viewers play, per rate (default 60, quick 15)
#   --seek-secs S    a viewer seeks every S seconds of playback (default 10, quick 5)
#   --no-rclone      leave the rclone column empty
#
# Needs root (mounts, drop_caches). Installs fio nginx-light curl rclone with
# apt-get when one is missing. Exits 0 whether targets are met or not; 1 when
# a read failed or the harness broke. See bench/README.md.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

QUICK=
SEAMFS=$REPO/build/seamfs
NULLFS=
ORIGIN=
WORK=/tmp/seamfs-net-bench
OUT=
RUNS=
DELAY_MS=25
SEAMFS_OPT=
BUDGET_MIB=
CASES=seq,far,cap,viewers
VIEWERS=32
VIEW_SECS=
SEEK_SECS=
RCLONE=1

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"

while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--seamfs=*) SEAMFS=${1#*=} ;;
	--nullfs) NULLFS=${2:?--nullfs needs a path}; shift ;;
	--nullfs=*) NULLFS=${1#*=} ;;
	--origin) ORIGIN=${2:?--origin needs a path}; shift ;;
	--origin=*) ORIGIN=${1#*=} ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--runs) RUNS=${2:?--runs needs a number}; shift ;;
	--runs=*) RUNS=${1#*=} ;;
	--delay-ms) DELAY_MS=${2:?--delay-ms needs a number}; shift ;;
	--delay-ms=*) DELAY_MS=${1#*=} ;;
	--seamfs-opt) SEAMFS_OPT=${2:?--seamfs-opt needs options}; shift ;;
	--seamfs-opt=*) SEAMFS_OPT=${1#*=} ;;
	--budget-mib) BUDGET_MIB=${2:?--budget-mib needs a number}; shift ;;
	--budget-mib=*) BUDGET_MIB=${1#*=} ;;
	--cases) CASES=${2:?--cases needs a list}; shift ;;
	--cases=*) CASES=${1#*=} ;;
	--viewers) VIEWERS=${2:?--viewers needs a number}; shift ;;
	--viewers=*) VIEWERS=${1#*=} ;;
	--view-secs) VIEW_SECS=${2:?--view-secs needs a number}; shift ;;
	--view-secs=*) VIEW_SECS=${1#*=} ;;
	--seek-secs) SEEK_SECS=${2:?--seek-secs needs a number}; shift ;;
	--seek-secs=*) SEEK_SECS=${1#*=} ;;
	--no-rclone) RCLONE=0 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
for v in RUNS VIEWERS VIEW_SECS SEEK_SECS BUDGET_MIB; do
	opt=${v,,}
	[ -z "${!v}" ] || [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${opt//_/-}: not a positive number: ${!v}"
done
[[ $DELAY_MS =~ ^[0-9]+$ ]] || die "--delay-ms: not a number: $DELAY_MS"
if [ -z "$BUDGET_MIB" ]; then
	BUDGET_MIB=256
	if [[ ,$SEAMFS_OPT, =~ ,readahead_budget=([0-9]+)([kKmMgG]?), ]]; then
		case ${BASH_REMATCH[2]} in
		k|K) BUDGET_MIB=$((BASH_REMATCH[1] / 1024)) ;;
		m|M) BUDGET_MIB=${BASH_REMATCH[1]} ;;
		g|G) BUDGET_MIB=$((BASH_REMATCH[1] * 1024)) ;;
		*) BUDGET_MIB=$((BASH_REMATCH[1] / 1048576)) ;;
		esac
	fi
fi

work_paths

# The helper stops what it started itself; should it die first, the PIDs it
# left in PIDFILE (daemons, nginx, seam-origin) are stopped here, one by one.
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	stop_pid "$HELPER_PID" net.py
	for m in "$WORK/mnt-seamfs" "$WORK/mnt-null" "$WORK/mnt-rclone"; do unmount_dir "$m"; done
	stop_pidfile "$PIDFILE"
	[ $rc -ne 0 ] && printf 'net.sh: stopped (exit %d); mounts and servers cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM

install_tools() {
	local missing=() t
	for t in fio:fio nginx:nginx-light curl:curl fusermount3:fuse3 rclone:rclone; do
		[ "${t%%:*}" = rclone ] && [ "$RCLONE" = 0 ] && continue
		command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]}"
	timeout 300 apt-get update -qq || warn "apt-get update failed"
	for t in "${missing[@]}"; do
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "$t" >/dev/null ||
			warn "could not install $t"
	done
	for t in fio nginx curl fusermount3; do
		command -v "$t" >/dev/null 2>&1 || die "$t is missing and could not be installed"
	done
	if [ "$RCLONE" = 1 ] && ! command -v rclone >/dev/null 2>&1; then
		warn "rclone is not installed; its column stays empty"
		RCLONE=0
	fi
}

main() {
	[ "$(id -u)" -eq 0 ] || die "needs root (mounts, drop_caches): sudo $0"
	[ -x "$PY" ] || die "$PY is missing (apt-get install python3)"
	install_tools
	[ -x "$SEAMFS" ] || die "no seamfs daemon at $SEAMFS (build it: meson setup build && meson compile -C build, or pass --seamfs PATH)"
	SEAMFS=$(realpath "$SEAMFS")
	: "${NULLFS:=$(dirname "$SEAMFS")/bench-nullfs}"
	: "${ORIGIN:=$(dirname "$SEAMFS")/tests/server/seam-origin}"
	[ -x "$NULLFS" ] || die "no bench-nullfs at $NULLFS (built with -Dtests=true, or pass --nullfs PATH)"
	[ -x "$ORIGIN" ] || die "no seam-origin at $ORIGIN (built with -Dtests=true, or pass --origin PATH)"
	"$ORIGIN" --help | grep -q -- --delay-ms || die "$ORIGIN has no --delay-ms (rebuild it)"
	NULLFS=$(realpath "$NULLFS")
	ORIGIN=$(realpath "$ORIGIN")
	mkdir -p "$WORK" "$OUT"
	for m in "$WORK/mnt-seamfs" "$WORK/mnt-null" "$WORK/mnt-rclone"; do unmount_dir "$m"; done
	rm -rf "$OUT/logs" "$OUT/tmp"
	say "seamfs: $SEAMFS ($("$SEAMFS" --version 2>&1 | head -n 1)); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
	local args=(run --seamfs "$SEAMFS" --nullfs "$NULLFS" --origin "$ORIGIN" --work "$WORK"
		--out "$OUT" --pidfile "$PIDFILE" --delay-ms "$DELAY_MS" --budget-mib "$BUDGET_MIB"
		--cases "$CASES" --viewers "$VIEWERS")
	[ -n "$QUICK" ] && args+=(--quick)
	[ -n "$RUNS" ] && args+=(--runs "$RUNS")
	[ -n "$VIEW_SECS" ] && args+=(--view-secs "$VIEW_SECS")
	[ -n "$SEEK_SECS" ] && args+=(--seek-secs "$SEEK_SECS")
	[ -n "$SEAMFS_OPT" ] && args+=(--seamfs-opt "$SEAMFS_OPT")
	[ "$RCLONE" = 0 ] && args+=(--no-rclone)
	# In the background and waited for, so that the INT/TERM trap runs at once.
	"$PY" "$BENCH/net.py" "${args[@]}" &
	HELPER_PID=$!
	local rc=0
	wait "$HELPER_PID" || rc=$?
	HELPER_PID=
	[ $rc -eq 0 ] || die "a read failed or the harness broke (see ERRORS above; logs in $OUT/logs)"
}

main "$@"
