#!/usr/bin/env bash
# seamfs verify benchmark: how long the sampled SHA-256 sweep of one
# candidate takes against nginx on 127.0.0.1, for a file of at least 1 GiB
# (100 samples of 4 KiB). Target: well under 0.5 s per sweep.
#
#   bench/verify.sh [--seamfs PATH] [--work DIR] [--size-mib N] [--runs N]
#
#   --seamfs PATH  the binary (default: build/seamfs, else build-test/seamfs)
#   --work DIR     data, nginx prefix, state (default /tmp/seamfs-verify-bench);
#                  the random data file is reused when it has the right size
#   --size-mib N   size of the generated file in MiB (default 1127, 1.1 GiB;
#                  at least 1024 for the 100-sample plan)
#   --runs N       runs (default 5); the figures are their median
#
# Each run is `seamfs verify` of one asset with two sources, the same file
# under two URLs: the first is the reference, the second the candidate whose
# sweep is timed (the "N ms" seamfs prints for it: probe excluded, the 100
# range requests and their hashing included). The wall time of the whole
# command is printed beside it. No root needed. Prints PASS or MISS against
# 0.5 s; exits 0 either way, non-zero only when the harness broke.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
SEAMFS=
WORK=/tmp/seamfs-verify-bench
SIZE_MIB=1127
RUNS=5
TARGET_MS=500

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"

while [ $# -gt 0 ]; do
	case $1 in
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--size-mib) SIZE_MIB=${2:?--size-mib needs a number}; shift ;;
	--runs) RUNS=${2:?--runs needs a number}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
	shift
done
case $SIZE_MIB in ''|*[!0-9]*) die "--size-mib: not a number: $SIZE_MIB" ;; esac
case $RUNS in ''|*[!0-9]*|0) die "--runs: not a positive number: $RUNS" ;; esac
[ "$SIZE_MIB" -ge 1024 ] || die "--size-mib must be at least 1024 for the 100-sample plan"
if [ -z "$SEAMFS" ]; then
	for c in "$REPO/build/seamfs" "$REPO/build-test/seamfs"; do
		[ -x "$c" ] && { SEAMFS=$c; break; }
	done
fi
[ -n "$SEAMFS" ] && [ -x "$SEAMFS" ] || die "no seamfs binary (build it, or pass --seamfs PATH)"
command -v nginx >/dev/null || die "nginx is not installed (apt-get install nginx-light)"

mkdir -p "$WORK/www" "$WORK/nginx/tmp"
DATA=$WORK/www/media.bin
BYTES=$((SIZE_MIB * 1024 * 1024))
if [ "$(stat -c %s "$DATA" 2>/dev/null || echo 0)" != "$BYTES" ]; then
	printf '==> generating %d MiB of random data in %s\n' "$SIZE_MIB" "$DATA" >&2
	head -c "$BYTES" /dev/urandom > "$DATA.tmp"
	mv "$DATA.tmp" "$DATA"
fi
ln -sf media.bin "$WORK/www/copy.bin"

NGINX_PID=
cleanup() {
	if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
		kill -TERM "$NGINX_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$NGINX_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
USER_LINE=
[ "$(id -u)" = 0 ] && USER_LINE='user root root;'
cat > "$WORK/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
$USER_LINE
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp;
    proxy_temp_path $WORK/nginx/tmp;
    fastcgi_temp_path $WORK/nginx/tmp;
    uwsgi_temp_path $WORK/nginx/tmp;
    scgi_temp_path $WORK/nginx/tmp;
    types { }
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    server { listen 127.0.0.1:$PORT; root $WORK/www; }
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" </dev/null &
NGINX_PID=$!
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
	kill -0 "$NGINX_PID" 2>/dev/null || die "nginx exited: $(cat "$WORK/nginx/error.log")"
	sleep 0.1
done

cat > "$WORK/catalog.json" <<CAT
{"assets": [{"id": "bench", "path": "bench.bin", "size": $BYTES,
  "sources": [{"url": "http://127.0.0.1:$PORT/media.bin"},
              {"url": "http://127.0.0.1:$PORT/copy.bin"}]}]}
CAT

printf '==> %s verify: %d MiB file, 100 samples, %d runs, nginx on 127.0.0.1:%d\n' \
	"$SEAMFS" "$SIZE_MIB" "$RUNS" "$PORT" >&2
sweeps=() walls=()
for i in $(seq "$RUNS"); do
	rm -rf "$WORK/state"
	t0=$(date +%s%N)
	out=$(env -u http_proxy -u https_proxy -u all_proxy -u HTTP_PROXY -u HTTPS_PROXY \
		timeout 120 "$SEAMFS" verify --state-dir "$WORK/state" --timeout 10 \
		"$WORK/catalog.json" 2>"$WORK/verify.stderr") || {
		cat "$WORK/verify.stderr" >&2; die "seamfs verify failed (run $i): $out"; }
	t1=$(date +%s%N)
	line=$(printf '%s\n' "$out" | grep "/copy.bin: ") || die "no result line: $out"
	case $line in *"match (100 samples, "*) ;; *) die "unexpected result: $line" ;; esac
	ms=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) ms).*/\1/p')
	sweeps+=("$ms")
	walls+=($(( (t1 - t0) / 1000000 )))
	printf '    run %d: sweep %s ms, whole command %s ms\n' "$i" "$ms" "${walls[-1]}" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
sweep=$(median "${sweeps[@]}")
wall=$(median "${walls[@]}")
verdict=MISS
[ "$sweep" -lt "$TARGET_MS" ] && verdict=PASS
printf 'verify sweep (100 x 4 KiB, one candidate): median %s ms over %d runs (whole command %s ms): %s (target < %d ms)\n' \
	"$sweep" "$RUNS" "$wall" "$verdict" "$TARGET_MS"
