#!/usr/bin/env bash
# The example run of docs/loadtest.md, made again: six files of 150 MiB on
# two nginx mirrors on 127.0.0.1 (mirror-a and mirror-b, max_connections 8
# each), a mount with standby_delay=0, contrib/seamfs-loadtest's `mixed`
# profile with 4 viewers for 20 s, and mirror-a stopped (SIGKILL to its
# process group) 8 s into the run. Prints the loadtest's report, then
# checks that every file read through the mount has its original's SHA-256.
#
#   bench/loadtest_example.sh [--seamfs PATH] [--work DIR] [--stop-at S]
#
#   --seamfs PATH  the binary (default: build/seamfs)
#   --work DIR     data, nginx prefixes, mount (default /tmp/seamfs-lt-example);
#                  the random files are reused when they have the right size
#   --stop-at S    seconds into the run when mirror-a stops (default 8)
#
# SEAMFS_OPTS: more mount options (for example log_level=debug).
# Needs fio and nginx (contrib/setup-debian.sh). Exits with the loadtest's
# status, or 1 when a file read through the mount differs.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
SEAMFS=$REPO/build/seamfs
WORK=/tmp/seamfs-lt-example
STOP_AT=8

# shellcheck source=bench/lib.sh
. "$BENCH/lib.sh"

while [ $# -gt 0 ]; do
	case $1 in
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--stop-at) STOP_AT=${2:?--stop-at needs seconds}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
	shift
done
[[ $STOP_AT =~ ^[0-9]+$ ]] || die "--stop-at: not a number of seconds: $STOP_AT"
[ -x "$SEAMFS" ] || die "no seamfs binary at $SEAMFS (build first, or --seamfs)"
command -v fio >/dev/null || die "fio is not installed (contrib/setup-debian.sh)"
command -v nginx >/dev/null || die "nginx is not installed (contrib/setup-debian.sh)"

work_paths
DATA=$WORK/data
MIRROR_A= MIRROR_B= SEAMFS_PID=
cleanup() {
	unmount_dir "$MNT"
	alive "$SEAMFS_PID" && stop_pid "$SEAMFS_PID" seamfs
	local p
	for p in "$MIRROR_A" "$MIRROR_B"; do
		alive "$p" && kill -KILL -- "-$p" 2>/dev/null
		alive "$p" && stop_pid "$p" nginx
	done
	return 0
}
trap cleanup EXIT

mkdir -p "$DATA" "$MNT" "$WORK/state" "$WORK/nginx-a" "$WORK/nginx-b"
FILES=(f1 f2 f3 f4 f5 f6)
PATHS=("Movies/Alien (1979)/Alien (1979).mkv" "Movies/Heat (1995)/Heat (1995).mkv"
       "Movies/Ronin (1998)/Ronin (1998).mkv" "Movies/Thief (1981)/Thief (1981).mkv"
       "Shows/Show/Season 1/Show S01E01.mkv" "Shows/Show/Season 1/Show S01E02.mkv")
SIZE=$((150 << 20))
for f in "${FILES[@]}"; do
	if [ "$(stat -c %s "$DATA/$f.mkv" 2>/dev/null || echo 0)" != "$SIZE" ]; then
		say "making $DATA/$f.mkv (150 MiB of random bytes)"
		head -c "$SIZE" /dev/urandom >"$DATA/$f.mkv"
	fi
done

NGX=$WORK/nginx-a ACCESS=$WORK/nginx-a/access.log start_nginx
MIRROR_A=$NGINX_PID URL_A=$URL
NGX=$WORK/nginx-b ACCESS=$WORK/nginx-b/access.log start_nginx
MIRROR_B=$NGINX_PID URL_B=$URL

{
	printf '{"providers": [{"name": "mirror-a", "max_connections": 8},\n'
	printf '               {"name": "mirror-b", "max_connections": 8}],\n "assets": [\n'
	for i in "${!FILES[@]}"; do
		f=${FILES[$i]}
		[ "$i" -gt 0 ] && printf ',\n'
		printf '  {"id": "a%d", "path": "%s", "size": %d, "mtime": 1700000000, "sources": [\n' \
			"$((i + 1))" "${PATHS[$i]}" "$SIZE"
		printf '    {"url": "%s/%s.mkv", "provider": "mirror-a"},\n' "$URL_A" "$f"
		printf '    {"url": "%s/%s.mkv", "provider": "mirror-b"}]}' "$URL_B" "$f"
	done
	printf '\n]}\n'
} >"$WORK/catalog.json"

"$SEAMFS" -f -o "state_dir=$WORK/state,standby_delay=0,log_file=$WORK/seamfs.log${SEAMFS_OPTS:+,$SEAMFS_OPTS}" \
	"$WORK/catalog.json" "$MNT" </dev/null >>"$WORK/seamfs.out" 2>&1 &
SEAMFS_PID=$!
for ((i = 0; i < 100; i++)); do
	[ -d "$MNT/Movies" ] && break
	alive "$SEAMFS_PID" || die "seamfs exited; see $WORK/seamfs.log"
	sleep 0.1
done
[ -d "$MNT/Movies" ] || die "the mount did not come up in 10 s; see $WORK/seamfs.log"

( sleep "$STOP_AT"; kill -KILL -- "-$MIRROR_A" 2>/dev/null; say "mirror-a stopped" ) &
STOPPER=$!
rc=0
python3 "$REPO/contrib/seamfs-loadtest" "$MNT" mixed --viewers 4 --duration 20 || rc=$?
wait "$STOPPER" 2>/dev/null || true

bad=0
for i in "${!FILES[@]}"; do
	want=$(sha256sum <"$DATA/${FILES[$i]}.mkv" | cut -d' ' -f1)
	got=$(timeout 300 sha256sum <"$MNT/${PATHS[$i]}" | cut -d' ' -f1) || got=unreadable
	if [ "$want" != "$got" ]; then
		warn "${PATHS[$i]}: SHA-256 through the mount differs ($got, want $want)"
		bad=1
	fi
done
[ "$bad" = 0 ] && say "every file through the mount has its original's SHA-256"
[ "$bad" = 0 ] || exit 1
exit "$rc"
