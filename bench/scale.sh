#!/usr/bin/env bash
# seamfs scale benchmark: what a large catalog costs. For generated catalogs
# of N assets (with mtime, without mtime, 3 sources per asset) it times the
# mount and a remount with the same state dir until each shows in
# /proc/mounts, reads the daemon's VmRSS and VmHWM, and counts the requests
# the origins (counting servers on 127.0.0.1) receive meanwhile; a 1-asset
# catalog gives the daemon's base RSS. Prints one table; writes OUT/scale.json.
#
#   sudo bench/scale.sh [--quick] [--assets N] [--seamfs PATH] [--work DIR]
#                       [--out DIR] [--variants LIST] [--settle S]
#
#   --quick          10 000 assets (a fast check)
#   --assets N       assets per catalog (default 100000)
#   --seamfs PATH    the daemon (default: build/seamfs of this repo)
#   --work DIR       catalogs, mount point, state dirs (default /tmp/seamfs-scale-bench);
#                    the catalogs are generated on every run and removed after use
#   --out DIR        scale.json and logs/ (default WORK/out)
#   --variants LIST  comma-separated, of mtime-1src, nomtime-1src, mtime-3src,
#                    nomtime-3src (default the first three)
#   --settle S       seconds between the mount showing and the memory and
#                    request counts being read (default 1)
#
# Targets: <= 1 KB of daemon memory per asset beyond the catalog's JSON text;
# a remount of 100 000 assets in < 2 s and < 200 MiB peak RSS; no request to
# an origin at mount (every catalog gives sizes). Needs root (mounting).
# Exits 0 whether targets are met or not; 1 when the harness broke (a mount
# that never came up, a daemon that died, assets not listed). See bench/README.md.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

SEAMFS=$REPO/build/seamfs
WORK=/tmp/seamfs-scale-bench
OUT=
ASSETS=100000
VARIANTS=mtime-1src,nomtime-1src,mtime-3src
SETTLE=1

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"

while [ $# -gt 0 ]; do
	case $1 in
	--quick) ASSETS=10000 ;;
	--assets) ASSETS=${2:?--assets needs a number}; shift ;;
	--assets=*) ASSETS=${1#*=} ;;
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--seamfs=*) SEAMFS=${1#*=} ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--variants) VARIANTS=${2:?--variants needs a list}; shift ;;
	--variants=*) VARIANTS=${1#*=} ;;
	--settle) SETTLE=${2:?--settle needs seconds}; shift ;;
	--settle=*) SETTLE=${1#*=} ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
[[ $ASSETS =~ ^[1-9][0-9]*$ ]] || die "--assets: not a positive number: $ASSETS"
[[ $SETTLE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--settle: not a number of seconds: $SETTLE"

work_paths

# The helper stops what it started itself (seamfs; its origins are threads
# of its own); should it die first, the seamfs PID it left in PIDFILE is
# stopped here.
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	stop_pid "$HELPER_PID" scale.py
	unmount_dir "$MNT"
	stop_pidfile "$PIDFILE"
	rm -f "$WORK"/catalogs/*.json "$WORK"/catalogs/*.json.tmp
	[ $rc -ne 0 ] && printf 'scale.sh: stopped (exit %d); mount and daemon cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM

main() {
	[ "$(id -u)" -eq 0 ] || die "needs root (mounting): sudo $0"
	[ -x "$PY" ] || die "$PY is missing (apt-get install python3)"
	command -v fusermount3 >/dev/null || die "fusermount3 is missing (apt-get install fuse3)"
	[ -x "$SEAMFS" ] || die "no seamfs daemon at $SEAMFS (build it: meson setup build && meson compile -C build, or pass --seamfs PATH)"
	SEAMFS=$(realpath "$SEAMFS")
	mkdir -p "$WORK" "$OUT"
	unmount_dir "$MNT"
	say "seamfs: $SEAMFS ($("$SEAMFS" --version 2>&1 | head -n 1)), $ASSETS assets, variants $VARIANTS"
	# In the background and waited for, so that the INT/TERM trap runs at once.
	"$PY" "$BENCH/scale.py" run --seamfs "$SEAMFS" --work "$WORK" --pidfile "$PIDFILE" \
		--out "$OUT/scale.json" --assets "$ASSETS" --variants "$VARIANTS" \
		--settle "$SETTLE" &
	HELPER_PID=$!
	local rc=0
	wait "$HELPER_PID" || rc=$?
	HELPER_PID=
	[ $rc -eq 0 ] || die "the harness broke (see ERRORS above; logs in $OUT/logs)"
}

main "$@"
