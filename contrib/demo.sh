#!/usr/bin/env bash
# seamfs demo: a local nginx serves a generated movie and a large random file,
# seamfs mounts them as a media tree.
#
#   sudo contrib/demo.sh [MOUNTPOINT]   set up, build, mount (default /tmp/seamfs-demo/mnt)
#   sudo contrib/demo.sh stop           unmount and stop nginx
#
# SEAMFS_SKIP_SETUP=1 skips contrib/setup-debian.sh (package installation).
# Everything else lives under /tmp/seamfs-demo (SEAMFS_DEMO_DIR). Running it
# again reuses what is there: data is generated once, a running nginx and a
# live mount are kept. Every wait is bounded.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEMO=${SEAMFS_DEMO_DIR:-/tmp/seamfs-demo}
MEDIA=$DEMO/media
NGX=$DEMO/nginx
STATE=$DEMO/state
BIN=$REPO/build/seamfs
MOVIE_PATH="Movies/Big Buck Test (2026)/Big Buck Test (2026).mkv"

say() { printf '==> %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

# pid_is PIDFILE COMM: prints the pid if the file names a live process called COMM.
pid_is() {
	local pid
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
	echo "$pid"
}

# wait_gone PID SECONDS: waits until the process is gone; fails after the bound.
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# stop_pid PIDFILE COMM: SIGTERM, wait 10 s, SIGKILL.
stop_pid() {
	local pid
	pid=$(pid_is "$1" "$2") || { rm -f "$1"; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_gone "$pid" 10; then
		echo "$2 (pid $pid) did not stop in 10 s; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 5 || true
	fi
	rm -f "$1"
}

is_mounted() { findmnt -n -t fuse.seamfs -M "$1" >/dev/null 2>&1; }

do_stop() {
	local mnt pid i
	mnt=$(cat "$DEMO/mountpoint" 2>/dev/null || echo "$DEMO/mnt")
	if is_mounted "$mnt"; then
		say "unmounting $mnt"
		for ((i = 0; i < 10; i++)); do
			fusermount3 -u "$mnt" 2>/dev/null && break
			sleep 0.5
		done
		is_mounted "$mnt" && { echo "mount busy; detaching it lazily" >&2; fusermount3 -uz "$mnt"; }
	fi
	if pid=$(pid_is "$DEMO/seamfs.pid" seamfs); then
		wait_gone "$pid" 10 || stop_pid "$DEMO/seamfs.pid" seamfs
	fi
	rm -f "$DEMO/seamfs.pid"
	if pid_is "$NGX/nginx.pid" nginx >/dev/null; then
		say "stopping nginx"
		stop_pid "$NGX/nginx.pid" nginx
	fi
	say "stopped (data kept in $MEDIA; rm -rf $DEMO to remove it)"
}

# as_user CMD...: runs CMD as the user who called sudo, so build/ stays theirs.
as_user() {
	if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
		sudo -u "$SUDO_USER" -- "$@"
	else
		"$@"
	fi
}

build() {
	say "building seamfs in $REPO/build"
	cd "$REPO"
	# The demo needs only the daemon; a fresh build dir skips the test programs.
	if [ ! -f build/build.ninja ]; then
		if [ -d build/meson-private ]; then
			as_user meson setup --reconfigure build
		else
			as_user meson setup build -Dtests=false
		fi
	fi
	as_user meson compile -C build seamfs
	[ -x "$BIN" ] || die "build did not produce $BIN"
}

make_data() {
	mkdir -p "$MEDIA"
	chmod 755 "$DEMO" "$MEDIA"
	if [ ! -s "$MEDIA/movie.mkv" ]; then
		say "generating a 60 s 1280x720 H.264+AAC movie (takes a little while)"
		ffmpeg -nostdin -hide_banner -loglevel error -y \
			-f lavfi -i testsrc2=size=1280x720:rate=30:duration=60 \
			-f lavfi -i sine=frequency=440:sample_rate=48000:duration=60 \
			-c:v libx264 -preset veryfast -pix_fmt yuv420p -g 60 \
			-c:a aac -b:a 128k -shortest "$MEDIA/movie.tmp.mkv"
		mv "$MEDIA/movie.tmp.mkv" "$MEDIA/movie.mkv"
	fi
	if [ ! -s "$MEDIA/random-512M.bin" ]; then
		say "generating a 512 MiB random file"
		head -c 512M /dev/urandom >"$MEDIA/random-512M.tmp"
		mv "$MEDIA/random-512M.tmp" "$MEDIA/random-512M.bin"
		rm -f "$MEDIA/random-512M.bin.sha256"
	fi
	if [ ! -s "$MEDIA/random-512M.bin.sha256" ]; then
		sha256sum "$MEDIA/random-512M.bin" | cut -d' ' -f1 >"$MEDIA/random-512M.bin.sha256"
	fi
	chmod 644 "$MEDIA"/*
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_nginx() {
	local port user i
	mkdir -p "$NGX/tmp"
	if pid_is "$NGX/nginx.pid" nginx >/dev/null && [ -s "$NGX/port" ]; then
		PORT=$(cat "$NGX/port")
		say "nginx already running on 127.0.0.1:$PORT"
		return
	fi
	user=
	if [ "$(id -u)" -eq 0 ]; then
		if id www-data >/dev/null 2>&1; then user='user www-data;'; else user='user nobody nogroup;'; fi
	fi
	for port in $(seq 8089 8189); do
		port_free "$port" || continue
		cat >"$NGX/nginx.conf" <<-EOF
		daemon off;
		worker_processes 2;
		$user
		pid $NGX/nginx.pid;
		error_log $NGX/error.log warn;
		events { worker_connections 1024; }
		http {
		    access_log $NGX/access.log;
		    client_body_temp_path $NGX/tmp/body;
		    proxy_temp_path $NGX/tmp/proxy;
		    fastcgi_temp_path $NGX/tmp/fastcgi;
		    uwsgi_temp_path $NGX/tmp/uwsgi;
		    scgi_temp_path $NGX/tmp/scgi;
		    types { }
		    default_type application/octet-stream;
		    sendfile on;
		    server {
		        listen 127.0.0.1:$port;
		        root $MEDIA;
		    }
		}
		EOF
		rm -f "$NGX/nginx.pid"
		setsid nginx -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" \
			</dev/null >>"$NGX/stdout.log" 2>&1 &
		for ((i = 0; i < 100; i++)); do
			if [ -s "$NGX/nginx.pid" ] && ! port_free "$port"; then
				echo "$port" >"$NGX/port"
				PORT=$port
				say "nginx serving $MEDIA on http://127.0.0.1:$PORT"
				return
			fi
			kill -0 $! 2>/dev/null || break
			sleep 0.1
		done
		kill -TERM $! 2>/dev/null || true
		grep -q 'Address already in use' "$NGX/error.log" 2>/dev/null || {
			cat "$NGX/error.log" >&2
			die "nginx did not start"
		}
	done
	die "no free port in 8089-8189"
}

write_catalog() {
	local sha url
	sha=$(cat "$MEDIA/random-512M.bin.sha256")
	url="http://127.0.0.1:$PORT"
	cat >"$DEMO/catalog.json" <<-EOF
	{
	  "providers": [ { "name": "demo-nginx", "max_connections": 8 } ],
	  "assets": [
	    { "id": "big-buck-test-2026",
	      "path": "$MOVIE_PATH",
	      "sources": [ { "url": "$url/movie.mkv", "provider": "demo-nginx" } ] },
	    { "id": "random-512m",
	      "path": "Data/random-512M.bin",
	      "size": $(stat -c %s "$MEDIA/random-512M.bin"),
	      "sha256": "$sha",
	      "sources": [ { "url": "$url/random-512M.bin", "provider": "demo-nginx" } ] },
	    { "id": "random-512m-local",
	      "path": "Local/random-512M.bin",
	      "sources": [ { "path": "$MEDIA/random-512M.bin" } ] }
	  ]
	}
	EOF
}

mount_it() {
	local mnt=$1 old pid i
	old=$(cat "$DEMO/mountpoint" 2>/dev/null || true)
	if pid_is "$DEMO/seamfs.pid" seamfs >/dev/null; then
		if [ "$old" = "$mnt" ] && is_mounted "$mnt"; then
			say "seamfs already mounted on $mnt"
			return
		fi
		die "the demo is already mounted on $old; run '$0 stop' first"
	fi
	mkdir -p "$mnt" "$STATE"
	echo "$mnt" >"$DEMO/mountpoint"
	say "mounting $mnt (log: $DEMO/seamfs.log)"
	# -f keeps the log on stderr, which goes to a file; setsid detaches it.
	setsid "$BIN" -f -o "state_dir=$STATE,log_level=info" "$DEMO/catalog.json" "$mnt" \
		</dev/null >>"$DEMO/seamfs.log" 2>&1 &
	pid=$!
	echo "$pid" >"$DEMO/seamfs.pid"
	for ((i = 0; i < 300; i++)); do
		is_mounted "$mnt" && return
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$DEMO/seamfs.log" >&2
			die "seamfs exited before mounting"
		fi
		sleep 0.1
	done
	tail -n 20 "$DEMO/seamfs.log" >&2
	die "seamfs did not mount $mnt within 30 s"
}

show() {
	local mnt=$1
	cat <<-EOF

	seamfs is mounted on $mnt  (catalog: $DEMO/catalog.json)

	EOF
	ls -lR "$mnt"
	cat <<-EOF

	Probe the movie (size was discovered from nginx at mount time):
	  ffprobe -v error -show_entries format=duration,size:stream=codec_name -of compact "$mnt/$MOVIE_PATH"
	EOF
	ffprobe -v error -show_entries format=duration,size:stream=codec_name -of compact \
		"$mnt/$MOVIE_PATH" | sed 's/^/    /' || true
	cat <<-EOF

	Check the bytes (all three sums are equal):
	  sha256sum "$mnt/Data/random-512M.bin" "$mnt/Local/random-512M.bin" "$MEDIA/random-512M.bin"

	Stop:
	  sudo $REPO/contrib/demo.sh stop
	EOF
}

main() {
	if [ "${1:-}" = stop ]; then
		do_stop
		return
	fi
	case "${1:-}" in -h|--help) sed -n '2,11p' "$0"; return ;; esac
	local mnt=${1:-$DEMO/mnt}
	mkdir -p "$DEMO"
	mnt=$(realpath -m "$mnt")
	if [ "${SEAMFS_SKIP_SETUP:-0}" != 1 ]; then
		say "installing packages (contrib/setup-debian.sh; SEAMFS_SKIP_SETUP=1 skips this)"
		"$REPO/contrib/setup-debian.sh"
	fi
	for tool in meson ffmpeg ffprobe nginx fusermount3 findmnt; do
		command -v "$tool" >/dev/null || die "$tool is missing (run contrib/setup-debian.sh)"
	done
	build
	make_data
	start_nginx
	write_catalog
	mount_it "$mnt"
	show "$mnt"
}

main "$@"
