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

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts a private nginx (daemon off, under setsid) serving $DATA on a free
# port of 127.0.0.1 (one of 40 random ones in $NGINX_PORTS, default
# 18000-18999), its prefix and logs in $NGX, an access log at $ACCESS (the
# format "bench": time, connection, status, bytes sent, body bytes, URI,
# Range, user agent). Sets NGINX_PID, PORT and URL; dies when it cannot.
start_nginx() {
	local port user i
	mkdir -p "$NGX/tmp"
	user='user root;'
	id www-data >/dev/null 2>&1 && user='user www-data;'
	for port in $(shuf -i "${NGINX_PORTS:-18000-18999}" -n 40); do
		port_free "$port" || continue
		cat >"$NGX/nginx.conf" <<-EOF
		daemon off;
		worker_processes 2;
		$user
		pid $NGX/nginx.pid;
		error_log $NGX/error.log warn;
		events { worker_connections 1024; }
		http {
		    log_format bench '\$msec \$connection \$status \$bytes_sent \$body_bytes_sent '
		                     '"\$request_uri" "\$http_range" "\$http_user_agent"';
		    access_log $ACCESS bench;
		    client_body_temp_path $NGX/tmp/body;
		    proxy_temp_path $NGX/tmp/proxy;
		    fastcgi_temp_path $NGX/tmp/fastcgi;
		    uwsgi_temp_path $NGX/tmp/uwsgi;
		    scgi_temp_path $NGX/tmp/scgi;
		    types { }
		    default_type application/octet-stream;
		    sendfile on;
		    keepalive_requests 1000000;
		    keepalive_timeout 300s;
		    server {
		        listen 127.0.0.1:$port;
		        root $DATA;
		        autoindex on;
		        autoindex_exact_size on;
		    }
		}
		EOF
		rm -f "$NGX/nginx.pid"
		: >"$ACCESS"
		setsid nginx -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" \
			</dev/null >>"$NGX/stdout.log" 2>&1 &
		NGINX_PID=$!
		for ((i = 0; i < 100; i++)); do
			if [ -s "$NGX/nginx.pid" ] && ! port_free "$port"; then
				PORT=$port
				URL=http://127.0.0.1:$PORT
				say "nginx (pid $NGINX_PID) serving $DATA on $URL"
				return
			fi
			alive "$NGINX_PID" || break
			sleep 0.1
		done
		stop_pid "$NGINX_PID" nginx
		NGINX_PID=
		grep -q 'Address already in use' "$NGX/error.log" 2>/dev/null || {
			tail -n 5 "$NGX/error.log" >&2
			die "nginx did not start"
		}
	done
	die "no free port found for nginx"
}
