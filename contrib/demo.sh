#!/usr/bin/env bash
# seamfs demo: two local nginx instances serve the same generated movie (and
# a random file); seamfs mounts them as a media tree with both as sources,
# so that stopping the origin a reader is on shows a cutover.
#
#   contrib/demo.sh [MOUNTPOINT]   set up, build, mount (default $SEAMFS_DEMO_DIR/mnt)
#   contrib/demo.sh cutover        unattended: read the movie at a player's pace,
#                                  stop the origin it reads from, check the bytes
#                                  (SHA-256) and print the largest gap the reader saw
#   contrib/demo.sh read           read the movie at a player's pace (progress, SHA-256)
#   contrib/demo.sh stop-origin    stop the nginx the movie is being read from (its
#                                  master and workers) and wait until its port
#                                  refuses connections
#   contrib/demo.sh start-origins  start the stopped nginx again
#   contrib/demo.sh stop           unmount and stop seamfs and both nginx; no
#                                  process of the demo is left
#
# Run it as root (or through sudo): it installs packages and mounts.
# SEAMFS_DEMO_DIR: where everything lives (default /tmp/seamfs-demo); the
#   other commands act on the demo in that directory.
# SEAMFS_SKIP_SETUP=1: skip contrib/setup-debian.sh (package installation).
# SEAMFS_BIN=PATH: use this seamfs binary instead of building build/seamfs.
# SEAMFS_DEMO_SECONDS: the movie's length (default 60).
# SEAMFS_DEMO_RATE: the paced reader's bytes per second (default 1000000).
# Running it again reuses what is there: data is generated once, running
# nginx and a live mount are kept. Ports are picked free each time nginx
# starts. Every wait is bounded.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$REPO/contrib/demo.sh"
DEMO=$(realpath -m "${SEAMFS_DEMO_DIR:-/tmp/seamfs-demo}")
MEDIA=$DEMO/media
STATE=$DEMO/state
BIN=${SEAMFS_BIN:-$REPO/build/seamfs}
SECONDS_LONG=${SEAMFS_DEMO_SECONDS:-60}
RATE=${SEAMFS_DEMO_RATE:-1000000}   # the movie's 8 Mbit/s
MOVIE_PATH="Movies/Big Buck Test (2026)/Big Buck Test (2026).mkv"
ORIGINS=(origin-a origin-b)

say() { printf '==> %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

# pid_is PIDFILE COMM: prints the pid if the file names a live process
# called COMM (a zombie is not live: it may wait long for its reaper).
pid_is() {
	local pid st comm
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	read -r st comm < <(ps -o stat=,comm= -p "$pid" 2>/dev/null) || return 1
	[ "$comm" = "$2" ] && [[ $st != Z* ]] || return 1
	echo "$pid"
}

# save_group PID PGIDFILE: writes PID's process group to the file; it must
# be a group of PID's own (setsid made it), never the caller's.
save_group() {
	local g
	g=$(ps -o pgid= -p "$1" 2>/dev/null | tr -d ' ')
	[ "$g" = "$1" ] || die "pid $1 is not in a process group of its own (group ${g:-none})"
	echo "$g" >"$2"
}

# group_pids PGID COMMS: the live (not zombie) processes in process group
# PGID whose name matches the regex COMMS. Each server starts under setsid,
# so its group holds it and every process it forked (nginx's workers,
# seamfs's ffmpeg), also after the first one died.
group_pids() {
	[[ $1 =~ ^[0-9]+$ ]] || return 0
	ps -e -o pid=,pgid=,stat=,comm= |
		awk -v g="$1" -v c="^($2)\$" '$2 == g && $3 !~ /^Z/ && $4 ~ c { print $1 }'
}

# group_of PGIDFILE COMMS: prints the group the file names if a process of it lives.
group_of() {
	local g
	[ -s "$1" ] || return 1
	g=$(cat "$1")
	[ -n "$(group_pids "$g" "$2")" ] || return 1
	echo "$g"
}

# wait_group_gone PGID COMMS SECONDS: waits until no process of the group
# lives (a zombie waiting for its reaper counts as gone: it holds no port).
wait_group_gone() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ -z "$(group_pids "$1" "$2")" ] && return 0
		sleep 0.1
	done
	return 1
}

# stop_group PGIDFILE COMMS: SIGTERM to the whole process group, wait 10 s,
# SIGKILL to the group. SIGTERM to nginx's master alone is not enough: when
# the master dies first (SIGKILL, a crash), its workers keep serving.
stop_group() {
	local g
	g=$(group_of "$1" "$2") || { rm -f "$1"; return 0; }
	kill -TERM -- "-$g" 2>/dev/null || true
	if ! wait_group_gone "$g" "$2" 10; then
		echo "process group $g ($(group_pids "$g" "$2" | tr '\n' ' ')) did not stop in 10 s; killing it" >&2
		kill -KILL -- "-$g" 2>/dev/null || true
		wait_group_gone "$g" "$2" 5 ||
			die "process group $g: $(group_pids "$g" "$2" | tr '\n' ' ')survived SIGKILL"
	fi
	rm -f "$1"
}

# origin_group NAME: prints the process group of nginx NAME if a process of
# it lives. A demo started before groups were kept has only the master's
# pid file; the master led its group (setsid) too.
origin_group() {
	local dir=$DEMO/$1 pid
	if [ ! -s "$dir/nginx.pgid" ] && pid=$(pid_is "$dir/nginx.pid" nginx); then
		save_group "$pid" "$dir/nginx.pgid"
	fi
	group_of "$dir/nginx.pgid" nginx
}

# stop_origin NAME: stops nginx NAME (its whole group) and waits until its
# port refuses connections.
stop_origin() {
	local dir=$DEMO/$1 port i
	port=$(cat "$dir/port" 2>/dev/null || true)
	origin_group "$1" >/dev/null || true
	stop_group "$dir/nginx.pgid" nginx
	rm -f "$dir/nginx.pid"
	[ -n "$port" ] || return 0
	for ((i = 0; i < 50; i++)); do
		port_free "$port" && return 0
		sleep 0.1
	done
	die "nginx $1 stopped, but 127.0.0.1:$port still accepts connections (another program listens there?)"
}

is_mounted() { findmnt -n -t fuse.seamfs -M "$1" >/dev/null 2>&1; }

mountpoint_of() { cat "$DEMO/mountpoint" 2>/dev/null || echo "$DEMO/mnt"; }

do_stop() {
	local mnt g i o found=0
	mnt=$(mountpoint_of)
	if is_mounted "$mnt"; then
		found=1
		say "unmounting $mnt"
		for ((i = 0; i < 10; i++)); do
			fusermount3 -u "$mnt" 2>/dev/null && break
			sleep 0.5
		done
		is_mounted "$mnt" && { echo "mount busy; detaching it lazily" >&2; fusermount3 -uz "$mnt"; }
	fi
	# the daemon exits on the unmount; its group (it and any ffmpeg it
	# started) gets 10 s for that, then SIGTERM and SIGKILL
	if g=$(group_of "$DEMO/seamfs.pgid" 'seamfs|ffmpeg'); then
		found=1
		wait_group_gone "$g" 'seamfs|ffmpeg' 10 || stop_group "$DEMO/seamfs.pgid" 'seamfs|ffmpeg'
	fi
	rm -f "$DEMO/seamfs.pid" "$DEMO/seamfs.pgid"
	for o in "${ORIGINS[@]}"; do
		# also the workers of a master that died before
		if origin_group "$o" >/dev/null; then
			found=1
			say "stopping nginx $o"
			stop_origin "$o"
		fi
	done
	if [ "$found" = 0 ]; then
		echo "demo.sh: no demo is running in $DEMO (no seamfs mount on $mnt, no nginx);" \
			"SEAMFS_DEMO_DIR names the demo's directory" >&2
		exit 1
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
	if [ -n "${SEAMFS_BIN:-}" ]; then
		[ -x "$BIN" ] || die "SEAMFS_BIN=$BIN is not an executable"
		return
	fi
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
		say "generating a $SECONDS_LONG s 1280x720 H.264+AAC movie at 8 Mbit/s (takes a little while)"
		ffmpeg -nostdin -hide_banner -loglevel error -y \
			-f lavfi -i "testsrc2=size=1280x720:rate=30:duration=$SECONDS_LONG" \
			-f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$SECONDS_LONG" \
			-c:v libx264 -preset veryfast -pix_fmt yuv420p -g 60 \
			-b:v 8M -minrate 8M -maxrate 8M -bufsize 8M -x264-params nal-hrd=cbr \
			-c:a aac -b:a 128k -shortest "$MEDIA/movie.tmp.mkv"
		mv "$MEDIA/movie.tmp.mkv" "$MEDIA/movie.mkv"
		rm -f "$MEDIA/movie.mkv.sha256"
	fi
	if [ ! -s "$MEDIA/random-512M.bin" ]; then
		say "generating a 512 MiB random file"
		head -c 512M /dev/urandom >"$MEDIA/random-512M.tmp"
		mv "$MEDIA/random-512M.tmp" "$MEDIA/random-512M.bin"
		rm -f "$MEDIA/random-512M.bin.sha256"
	fi
	local f
	for f in movie.mkv random-512M.bin; do
		if [ ! -s "$MEDIA/$f.sha256" ]; then
			sha256sum "$MEDIA/$f" | cut -d' ' -f1 >"$MEDIA/$f.sha256"
		fi
	done
	chmod 644 "$MEDIA"/*
}

# A port nothing listens on now, picked by the kernel.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_nginx NAME: an nginx serving $MEDIA on a free port; $DEMO/NAME/port.
start_nginx() {
	local name=$1 dir=$DEMO/$1 port user i try
	mkdir -p "$dir/tmp"
	if pid_is "$dir/nginx.pid" nginx >/dev/null && origin_group "$name" >/dev/null &&
		[ -s "$dir/port" ]; then
		say "nginx $name already running on 127.0.0.1:$(cat "$dir/port")"
		return
	fi
	# workers whose master died would keep serving the port: stop them
	origin_group "$name" >/dev/null && stop_group "$dir/nginx.pgid" nginx
	user=
	if [ "$(id -u)" -eq 0 ]; then
		local who=nobody
		if id www-data >/dev/null 2>&1; then user='user www-data;'; who=www-data; else user='user nobody nogroup;'; fi
		# nginx's workers run as $who: every folder above the media must let them in
		runuser -u "$who" -- test -r "$MEDIA/movie.mkv" 2>/dev/null ||
			die "$who (nginx's workers) cannot read $MEDIA/movie.mkv: a folder above $MEDIA is closed to others; choose another SEAMFS_DEMO_DIR"
	fi
	# the port the catalog names, if it is free, so that a restarted
	# origin is the same source; else a new one (and a new catalog)
	for ((try = 0; try < 20; try++)); do
		if [ "$try" = 0 ] && [ -s "$dir/port" ] && port_free "$(cat "$dir/port")"; then
			port=$(cat "$dir/port")
		else
			port=$(free_port)
		fi
		cat >"$dir/nginx.conf" <<-EOF
		daemon off;
		worker_processes 2;
		$user
		pid $dir/nginx.pid;
		error_log $dir/error.log warn;
		events { worker_connections 1024; }
		http {
		    access_log $dir/access.log;
		    client_body_temp_path $dir/tmp/body;
		    proxy_temp_path $dir/tmp/proxy;
		    fastcgi_temp_path $dir/tmp/fastcgi;
		    uwsgi_temp_path $dir/tmp/uwsgi;
		    scgi_temp_path $dir/tmp/scgi;
		    types { }
		    default_type application/octet-stream;
		    sendfile on;
		    server {
		        listen 127.0.0.1:$port;
		        root $MEDIA;
		    }
		}
		EOF
		rm -f "$dir/nginx.pid"
		: >"$dir/error.log"
		setsid nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
			</dev/null >>"$dir/stdout.log" 2>&1 &
		for ((i = 0; i < 100; i++)); do
			if [ -s "$dir/nginx.pid" ] && ! port_free "$port"; then
				save_group "$(cat "$dir/nginx.pid")" "$dir/nginx.pgid"
				echo "$port" >"$dir/port"
				say "nginx $name serving $MEDIA on http://127.0.0.1:$port"
				return
			fi
			kill -0 $! 2>/dev/null || break
			sleep 0.1
		done
		# setsid made nginx the leader of a group of its own
		kill -TERM -- "-$!" 2>/dev/null || true
		wait_group_gone "$!" nginx 10 || kill -KILL -- "-$!" 2>/dev/null || true
		grep -q 'Address already in use' "$dir/error.log" 2>/dev/null || {
			cat "$dir/error.log" >&2
			die "nginx $name did not start"
		}
	done
	die "nginx $name: no free port after 20 tries"
}

write_catalog() {
	local a b
	a="http://127.0.0.1:$(cat "$DEMO/origin-a/port")"
	b="http://127.0.0.1:$(cat "$DEMO/origin-b/port")"
	cat >"$DEMO/catalog.json.tmp" <<-EOF
	{
	  "providers": [ { "name": "origin-a", "max_connections": 8 },
	                 { "name": "origin-b", "max_connections": 8 } ],
	  "assets": [
	    { "id": "big-buck-test-2026",
	      "path": "$MOVIE_PATH",
	      "sha256": "$(cat "$MEDIA/movie.mkv.sha256")",
	      "sources": [ { "url": "$a/movie.mkv", "provider": "origin-a" },
	                   { "url": "$b/movie.mkv", "provider": "origin-b" } ] },
	    { "id": "random-512m",
	      "path": "Data/random-512M.bin",
	      "size": $(stat -c %s "$MEDIA/random-512M.bin"),
	      "sha256": "$(cat "$MEDIA/random-512M.bin.sha256")",
	      "sources": [ { "url": "$a/random-512M.bin", "provider": "origin-a" },
	                   { "url": "$b/random-512M.bin", "provider": "origin-b" } ] },
	    { "id": "random-512m-local",
	      "path": "Local/random-512M.bin",
	      "sources": [ { "path": "$MEDIA/random-512M.bin" } ] }
	  ],
	  "settings": { "standby_delay": 0, "stall_timeout": 2 }
	}
	EOF
	mv "$DEMO/catalog.json.tmp" "$DEMO/catalog.json"
}

mount_it() {
	local mnt=$1 old pid i
	old=$(cat "$DEMO/mountpoint" 2>/dev/null || true)
	if pid_is "$DEMO/seamfs.pid" seamfs >/dev/null; then
		if [ "$old" = "$mnt" ] && is_mounted "$mnt"; then
			say "seamfs already mounted on $mnt; reloading the catalog"
			kill -HUP "$(cat "$DEMO/seamfs.pid")"
			return
		fi
		die "the demo is already mounted on $old; run '$SELF stop' first"
	fi
	mkdir -p "$mnt" "$STATE"
	echo "$mnt" >"$DEMO/mountpoint"
	say "mounting $mnt (log: $DEMO/seamfs.log)"
	# -f keeps the daemon a child of setsid, whose pid we keep; the log
	# goes to a file (log_file=), which SIGHUP reopens
	setsid "$BIN" -f -o "state_dir=$STATE,log_level=info,log_file=$DEMO/seamfs.log" \
		"$DEMO/catalog.json" "$mnt" </dev/null >/dev/null 2>&1 &
	pid=$!
	echo "$pid" >"$DEMO/seamfs.pid"
	echo "$pid" >"$DEMO/seamfs.pgid"
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

need_mount() {
	MNT=$(mountpoint_of)
	is_mounted "$MNT" || die "no demo is mounted in $DEMO (run '$SELF' first; SEAMFS_DEMO_DIR names the demo's directory)"
}

# The provider the movie's session reads from, from .seamfs/status.json.
active_origin() {
	python3 - "$MNT/.seamfs/status.json" "$MOVIE_PATH" <<-'EOF'
	import json, sys
	st = json.load(open(sys.argv[1]))
	for s in st.get('sessions', []):
	    if s.get('path') == sys.argv[2] and s.get('state') == 'open':
	        print(s.get('provider', ''))
	        break
	EOF
}

# read_paced OUT: reads the movie through the mount at $RATE bytes/s, like a
# player; writes "sha256 largest_gap_ms bytes" to OUT, progress to stderr.
read_paced() {
	python3 - "$MNT/$MOVIE_PATH" "$RATE" "$1" <<-'EOF'
	import hashlib, os, sys, time
	path, rate, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
	chunk = 128 * 1024
	tty = sys.stderr.isatty()
	cr, nl = ('\r', '') if tty else ('', '\n')
	h, done, gap = hashlib.sha256(), 0, 0.0
	start = time.monotonic()
	with open(path, 'rb', buffering=0) as f:
	    # the movie's pages must come from seamfs, not from an earlier read
	    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
	    while True:
	        t = time.monotonic()
	        b = f.read(chunk)
	        gap = max(gap, time.monotonic() - t)
	        if not b:
	            break
	        h.update(b)
	        done += len(b)
	        if tty or done % (8 << 20) == 0:
	            sys.stderr.write(f'{cr}    read {done / 1e6:6.1f} MB, largest gap {gap * 1000:6.0f} ms{nl}')
	        ahead = start + done / rate - time.monotonic()
	        if ahead > 0:
	            time.sleep(ahead)
	if tty:
	    sys.stderr.write('\n')
	open(out, 'w').write(f'{h.hexdigest()} {gap * 1000:.0f} {done}\n')
	EOF
}

do_read() {
	need_mount
	local res=$DEMO/read.result want got gap bytes
	say "reading $MNT/$MOVIE_PATH at $RATE bytes/s"
	read_paced "$res"
	read -r got gap bytes <"$res"
	want=$(cat "$MEDIA/movie.mkv.sha256")
	echo "    $bytes bytes, largest gap between two reads: $gap ms"
	if [ "$got" = "$want" ]; then
		echo "    SHA-256 $got: the same as the original's"
	else
		die "SHA-256 $got differs from the original's $want"
	fi
}

do_stop_origin() {
	need_mount
	local o i
	for ((i = 0; i < 50; i++)); do
		o=$(active_origin)
		[ -n "$o" ] && break
		sleep 0.1
	done
	[ -n "$o" ] || die "nobody is reading the movie (run '$SELF read' in another terminal first)"
	say "stopping $o (nginx on 127.0.0.1:$(cat "$DEMO/$o/port")), which the reader is on"
	stop_origin "$o"
	say "$o stopped: 127.0.0.1:$(cat "$DEMO/$o/port") refuses connections"
}

do_start_origins() {
	local o mnt
	for o in "${ORIGINS[@]}"; do start_nginx "$o"; done
	# an origin back on another port: the catalog says so, the mount reloads
	mnt=$(mountpoint_of)
	if [ -s "$DEMO/catalog.json" ] && is_mounted "$mnt" && pid_is "$DEMO/seamfs.pid" seamfs >/dev/null; then
		local before
		before=$(cat "$DEMO/catalog.json")
		write_catalog
		[ "$before" = "$(cat "$DEMO/catalog.json")" ] || kill -HUP "$(cat "$DEMO/seamfs.pid")"
	fi
}

# The cutovers .seamfs/status.json lists, one line each.
show_cutovers() {
	python3 - "$MNT/.seamfs/status.json" <<-'EOF'
	import json, sys
	c = json.load(open(sys.argv[1]))['cutovers']
	for r in c['recent']:
	    print(f"    cutover: {r['asset']} at byte {r['offset']}: {r['from']} -> {r['to']}"
	          f" ({r['reason']}, {r['duration_ms']} ms)")
	print(f"    cutovers in all: {c['total']} {json.dumps(c['by_reason'])}")
	EOF
}

do_cutover() {
	setup_and_mount "$(mountpoint_of)"
	need_mount
	local res=$DEMO/cutover.result reader o i want got gap bytes total
	rm -f "$res"
	total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cutovers"]["total"])' \
		"$MNT/.seamfs/status.json")
	say "1. reading the movie at $RATE bytes/s, as a player would"
	read_paced "$res" &
	reader=$!
	o=
	for ((i = 0; i < 100; i++)); do
		o=$(active_origin)
		[ -n "$o" ] && break
		kill -0 "$reader" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$o" ] || { wait "$reader" || true; die "the reader's session did not show in status.json"; }
	sleep 1
	say "2. stopping $o, the origin the reader is on"
	stop_origin "$o"
	say "3. the reader goes on; .seamfs/status.json names the cutover:"
	if ! wait "$reader"; then
		do_start_origins >/dev/null
		die "the reader failed"
	fi
	[ -s "$res" ] || die "the reader wrote no result"
	read -r got gap bytes <"$res"
	show_cutovers
	do_start_origins
	want=$(cat "$MEDIA/movie.mkv.sha256")
	local now
	now=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cutovers"]["total"])' \
		"$MNT/.seamfs/status.json")
	echo
	echo "  bytes read:        $bytes"
	echo "  SHA-256 check:     $([ "$got" = "$want" ] && echo "OK ($got)" || echo "FAILED ($got, want $want)")"
	echo "  largest gap:       $gap ms (the longest single read the reader waited for)"
	echo "  cutovers:          $((now - total)) during the read"
	[ "$got" = "$want" ] || exit 1
	[ "$((now - total))" -ge 1 ] || die "no cutover was recorded (the reader finished before $o stopped?)"
	echo "PASS"
}

show() {
	local mnt=$1
	cat <<-EOF

	seamfs is mounted on $mnt  (catalog: $DEMO/catalog.json, log: $DEMO/seamfs.log)

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

	See a cutover: the movie has two sources, two nginx on 127.0.0.1:$(cat "$DEMO/origin-a/port") and :$(cat "$DEMO/origin-b/port").
	  1. read it as a player would (or play it: mpv "$mnt/$MOVIE_PATH"):
	       $SELF read
	  2. in a second terminal, stop the origin the reader is on:
	       $SELF stop-origin
	  3. watch the status name the cutover while the reader goes on:
	       watch -n 0.5 "grep -A 12 '\"recent\"' '$mnt/.seamfs/status.json'"
	  then '$SELF start-origins'. Or all of it unattended:
	       $SELF cutover

	Stop (as root):
	  $SELF stop
	EOF
	[ "$DEMO" = /tmp/seamfs-demo ] || echo "  (with SEAMFS_DEMO_DIR=$DEMO for each of these)"
}

setup_and_mount() {
	local mnt
	mkdir -p "$DEMO"
	mnt=$(realpath -m "$1")
	if [ "${SEAMFS_SKIP_SETUP:-0}" != 1 ]; then
		say "installing packages (contrib/setup-debian.sh; SEAMFS_SKIP_SETUP=1 skips this)"
		"$REPO/contrib/setup-debian.sh"
	fi
	for tool in ffmpeg ffprobe nginx fusermount3 findmnt python3; do
		command -v "$tool" >/dev/null || die "$tool is missing (run contrib/setup-debian.sh)"
	done
	[ -n "${SEAMFS_BIN:-}" ] || command -v meson >/dev/null || die "meson is missing (run contrib/setup-debian.sh)"
	build
	make_data
	do_start_origins
	write_catalog
	mount_it "$mnt"
	MNT=$mnt
}

main() {
	case "${1:-}" in
	-h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; return ;;
	stop) do_stop ;;
	cutover) do_cutover ;;
	read) do_read ;;
	stop-origin) do_stop_origin ;;
	start-origins) do_start_origins ;;
	*)
		setup_and_mount "${1:-$DEMO/mnt}"
		show "$MNT"
		;;
	esac
}

main "$@"
