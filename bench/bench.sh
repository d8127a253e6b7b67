#!/usr/bin/env bash
# seamfs benchmark: raw curl against nginx, seamfs and rclone's mount, side by side,
# on the same nginx origin on 127.0.0.1. Prints one table and writes OUT/results.json.
#
#   sudo bench/bench.sh [--quick] [--seamfs PATH] [--out DIR] [--work DIR]
#                       [--runs N] [--seamfs-opt OPTS] [--budget-mib N] [--no-rclone]
#
#   --quick        256 MiB + 4 x 64 MiB files, 1 run each, short timed phases
#                  (a smoke test, under 3 minutes)
#   --seamfs PATH  the daemon to measure (default: build/seamfs of this repo)
#   --out DIR      where results.json, raw.jsonl and logs go (default WORK/out)
#   --work DIR     data, mounts, nginx and state (default /tmp/seamfs-bench);
#                  generated data is reused when present with the right size
#   --runs N       runs per measurement (default 3; every figure is their median)
#   --seamfs-opt OPTS  extra seamfs -o options (e.g. readahead_budget=128M)
#   --budget-mib N seamfs's read-ahead budget the RSS target is checked against
#                  (default: readahead_budget of --seamfs-opt, else 256)
#   --no-rclone    skip the rclone column
#   --net          run bench/net.sh instead (the read engine on real networks:
#                  the FUSE ceiling, a 25 ms origin, a 4 MiB/s cap, paced
#                  viewers), with the other options; see bench/README.md
#
# Needs root (mounts, drop_caches). Installs fio rclone nginx-light curl ffmpeg
# with apt-get when one is missing. Exits 0 whether targets are met or not; a
# non-zero exit means the harness itself broke. See bench/README.md.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3
TOOLS=$BENCH/tools.py

QUICK=0
SEAMFS=$REPO/build/seamfs
WORK=/tmp/seamfs-bench
OUT=
RUNS=
BUDGET_MIB=
SEAMFS_OPT=
USE_RCLONE=1

# shellcheck source=bench/lib.sh
. "$(dirname "$(realpath "$0")")/lib.sh"

# --net: bench/net.sh measures instead; every other option goes to it
for a in "$@"; do
	if [ "$a" = --net ]; then
		net_args=()
		for b in "$@"; do [ "$b" = --net ] || net_args+=("$b"); done
		exec "$BENCH/net.sh" "${net_args[@]}"
	fi
done

while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--seamfs) SEAMFS=${2:?--seamfs needs a path}; shift ;;
	--seamfs=*) SEAMFS=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--runs) RUNS=${2:?--runs needs a number}; shift ;;
	--runs=*) RUNS=${1#*=} ;;
	--budget-mib) BUDGET_MIB=${2:?--budget-mib needs a number}; shift ;;
	--budget-mib=*) BUDGET_MIB=${1#*=} ;;
	--seamfs-opt) SEAMFS_OPT=${2:?--seamfs-opt needs options}; shift ;;
	--seamfs-opt=*) SEAMFS_OPT=${1#*=} ;;
	--no-rclone) USE_RCLONE=0 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

if [ "$QUICK" = 1 ]; then
	BIG_MIB=256 PART_MIB=64 RAND_SECS=3 R64_SECS=5
	: "${RUNS:=1}"
else
	BIG_MIB=1024 PART_MIB=256 RAND_SECS=10 R64_SECS=20
	: "${RUNS:=3}"
fi
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive number: $RUNS"
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
[[ $BUDGET_MIB =~ ^[1-9][0-9]*$ ]] || die "--budget-mib: not a positive number: $BUDGET_MIB"
CAP=180            # bound of one sequential read through a mount (s)
N64=64             # readers of the RSS phase

WORK=$(realpath -m "$WORK")
: "${OUT:=$WORK/out}"
OUT=$(realpath -m "$OUT")
DATA=$WORK/data
NGX=$WORK/nginx
LOGS=$OUT/logs
TMP=$OUT/tmp
MNT_S=$WORK/mnt-seamfs
MNT_R=$WORK/mnt-rclone
CATALOG=$WORK/catalog.json
RAW=$OUT/raw.jsonl
ACCESS=$NGX/access.log

BIG=big-${BIG_MIB}M.bin
PARTS=()
for i in 1 2 3 4; do PARTS+=("part-${PART_MIB}M-$i.bin"); done
MOVIE=movie.mkv
ALL_FILES=("$BIG" "${PARTS[@]}" "$MOVIE")

NGINX_PID= SEAMFS_PID= RCLONE_PID= SEAMFS_LOG= RCLONE_LOG= PORT= URL=
MOUNT_SEQ=0

# ---------------------------------------------------------------- processes

# is_mounted DIR FSTYPE
is_mounted() { awk -v m="$1" -v t="$2" '$2 == m && $3 == t { f = 1 } END { exit !f }' /proc/mounts; }


cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	unmount_dir "$MNT_S"
	unmount_dir "$MNT_R"
	wait_gone "$SEAMFS_PID" 10 || stop_pid "$SEAMFS_PID" seamfs
	wait_gone "$RCLONE_PID" 10 || stop_pid "$RCLONE_PID" rclone
	stop_pid "$NGINX_PID" nginx
	[ $rc -ne 0 ] && printf 'bench.sh: stopped (exit %d); mounts and servers cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM
trap 'printf "bench.sh: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# ---------------------------------------------------------------- setup

install_tools() {
	local missing=() t pkg
	for t in fio:fio rclone:rclone nginx:nginx-light curl:curl ffmpeg:ffmpeg fusermount3:fuse3; do
		if ! command -v "${t%%:*}" >/dev/null 2>&1; then
			[ "${t%%:*}" = rclone ] && [ "$USE_RCLONE" = 0 ] && continue
			missing+=("${t#*:}")
		fi
	done
	[ -x "$PY" ] || missing+=(python3)
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]}"
	timeout 300 apt-get update -qq || warn "apt-get update failed"
	for pkg in "${missing[@]}"; do
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "$pkg" >/dev/null ||
			warn "could not install $pkg"
	done
	for t in fio nginx curl ffmpeg fusermount3; do
		command -v "$t" >/dev/null 2>&1 || die "$t is missing and could not be installed"
	done
	[ -x "$PY" ] || die "$PY is missing"
	if [ "$USE_RCLONE" = 1 ] && ! command -v rclone >/dev/null 2>&1; then
		warn "rclone is not installed; its column stays empty"
		USE_RCLONE=0
	fi
}

# make_random NAME MIB
make_random() {
	local f=$DATA/$1 want=$(($2 * 1048576))
	if [ -f "$f" ] && [ "$(stat -c %s "$f")" = "$want" ] && [ -s "$f.sha256" ]; then
		return
	fi
	say "generating $1 ($2 MiB of random bytes)"
	rm -f "$f" "$f.sha256"
	head -c "$want" /dev/urandom >"$f.tmp"
	mv "$f.tmp" "$f"
}

make_data() {
	mkdir -p "$DATA"
	chmod 755 "$WORK" "$DATA"
	make_random "$BIG" "$BIG_MIB"
	for p in "${PARTS[@]}"; do make_random "$p" "$PART_MIB"; done
	if [ ! -s "$DATA/$MOVIE" ] || [ ! -s "$DATA/$MOVIE.sha256" ]; then
		say "generating a 60 s 1280x720 H.264+AAC movie"
		rm -f "$DATA/$MOVIE.sha256"
		timeout 600 ffmpeg -nostdin -hide_banner -loglevel error -y \
			-f lavfi -i testsrc2=size=1280x720:rate=30:duration=60 \
			-f lavfi -i sine=frequency=440:sample_rate=48000:duration=60 \
			-c:v libx264 -preset veryfast -pix_fmt yuv420p -g 60 \
			-c:a aac -b:a 128k -shortest "$DATA/movie.tmp.mkv"
		mv "$DATA/movie.tmp.mkv" "$DATA/$MOVIE"
	fi
	local f
	for f in "${ALL_FILES[@]}"; do
		[ -s "$DATA/$f.sha256" ] && continue
		sha256sum "$DATA/$f" | cut -d' ' -f1 >"$DATA/$f.sha256"
	done
	chmod 644 "$DATA"/*
	sync
}

write_catalog() {
	local f first=1
	{
		printf '{\n  "assets": [\n'
		for f in "${ALL_FILES[@]}"; do
			[ $first = 1 ] || printf ',\n'
			first=0
			printf '    { "id": "bench-%s", "path": "%s", "size": %s, "mtime": %s, "sha256": "%s",\n' \
				"${f%.*}" "$f" "$(stat -c %s "$DATA/$f")" "$(stat -c %Y "$DATA/$f")" \
				"$(cat "$DATA/$f.sha256")"
			printf '      "sources": [ { "url": "%s/%s" } ] }' "$URL" "$f"
		done
		printf '\n  ]\n}\n'
	} >"$CATALOG"
}

# ---------------------------------------------------------------- mounts

mount_seamfs() {
	local i
	# every mount starts cold: no head or tail kept on disk by the last
	# one (the disk tier would serve a "cold" open from cache_dir)
	rm -rf "$WORK/state/cache"
	mkdir -p "$MNT_S" "$WORK/state"
	MOUNT_SEQ=$((MOUNT_SEQ + 1))
	SEAMFS_LOG=$LOGS/seamfs-$MOUNT_SEQ.log
	setsid "$SEAMFS" -f -o "state_dir=$WORK/state${SEAMFS_OPT:+,$SEAMFS_OPT}" "$CATALOG" "$MNT_S" \
		</dev/null >"$SEAMFS_LOG" 2>&1 &
	SEAMFS_PID=$!
	for ((i = 0; i < 300; i++)); do
		is_mounted "$MNT_S" fuse.seamfs && { check_exe "$SEAMFS_PID" "$SEAMFS" seamfs; return 0; }
		if ! alive "$SEAMFS_PID"; then
			tail -n 20 "$SEAMFS_LOG" >&2
			die "seamfs exited before mounting (log: $SEAMFS_LOG)"
		fi
		sleep 0.1
	done
	tail -n 20 "$SEAMFS_LOG" >&2
	die "seamfs did not mount $MNT_S within 30 s"
}

mount_rclone() {
	local i
	mkdir -p "$MNT_R"
	MOUNT_SEQ=$((MOUNT_SEQ + 1))
	RCLONE_LOG=$LOGS/rclone-$MOUNT_SEQ.log
	: >"$WORK/rclone.conf"
	setsid rclone mount :http: "$MNT_R" --http-url "$URL" --vfs-cache-mode off \
		--read-only --config "$WORK/rclone.conf" \
		</dev/null >"$RCLONE_LOG" 2>&1 &
	RCLONE_PID=$!
	for ((i = 0; i < 300; i++)); do
		is_mounted "$MNT_R" fuse.rclone && { check_exe "$RCLONE_PID" "$(command -v rclone)" rclone; return 0; }
		if ! alive "$RCLONE_PID"; then
			tail -n 20 "$RCLONE_LOG" >&2
			die "rclone exited before mounting (log: $RCLONE_LOG)"
		fi
		sleep 0.1
	done
	tail -n 20 "$RCLONE_LOG" >&2
	die "rclone did not mount $MNT_R within 30 s"
}

# check_exe PID PATH NAME: the background job really is the daemon (not a forked
# setsid), so that its CPU and memory are the ones measured.
check_exe() {
	local exe
	exe=$(readlink "/proc/$1/exe" 2>/dev/null || true)
	[ "$exe" = "$(realpath "$2")" ] || die "pid $1 is not $3 ($exe): run bench.sh without job control"
}

# mount_tool TOOL: a fresh mount (cold: new daemon, new superblock).
mount_tool() {
	case $1 in
	seamfs) unmount_tool seamfs; mount_seamfs ;;
	rclone) unmount_tool rclone; mount_rclone ;;
	esac
}

unmount_tool() {
	case $1 in
	seamfs)
		unmount_dir "$MNT_S"
		wait_gone "$SEAMFS_PID" 10 || stop_pid "$SEAMFS_PID" seamfs
		SEAMFS_PID= ;;
	rclone)
		unmount_dir "$MNT_R"
		wait_gone "$RCLONE_PID" 10 || stop_pid "$RCLONE_PID" rclone
		RCLONE_PID= ;;
	esac
}

tool_pid() { case $1 in seamfs) echo "$SEAMFS_PID" ;; rclone) echo "$RCLONE_PID" ;; *) echo ;; esac; }
tool_dir() { case $1 in seamfs) echo "$MNT_S" ;; rclone) echo "$MNT_R" ;; esac; }

# ---------------------------------------------------------------- recording

# rec PHASE TOOL RUN JSON: one raw record; the JSON objects of one
# (phase, tool, run) are merged by report.py.
rec() {
	local json=${4:-}
	[ -n "$json" ] || json='{"error": "no result (helper printed nothing)"}'
	printf '{"phase": "%s", "tool": "%s", "run": %s, "data": %s}\n' "$1" "$2" "$3" "$json" >>"$RAW"
}

jnum() { printf '{"%s": %s}' "$1" "$2"; }

drop_caches() { echo 3 >/proc/sys/vm/drop_caches; }

# cold TOOL FILE...: a fresh mount for a mount tool, an empty page cache, then the
# origin's own files read back into it (the origin is a warm server: what is
# measured is the path from nginx to the reader, not this machine's disk).
cold() {
	local tool=$1 f
	shift
	mount_tool "$tool"
	drop_caches
	for f in "$@"; do cat "$DATA/$f" >/dev/null; done
}

log_size() { stat -c %s "$ACCESS"; }

# settle_log: waits (bounded, 5 s) until nginx has logged every finished request.
settle_log() {
	local i a b
	a=$(log_size)
	for ((i = 0; i < 25; i++)); do
		sleep 0.2
		b=$(log_size)
		[ "$a" = "$b" ] && return 0
		a=$b
	done
}

# begin TOOL: remembers the origin log position and the daemon's CPU so far.
begin() {
	B_TOOL=$1
	B_LOG=$(log_size)
	B_PROC=
	local pid
	pid=$(tool_pid "$1")
	[ -n "$pid" ] && B_PROC=$("$PY" "$TOOLS" proc "$pid")
	B_SLOG_LINES=0
	[ "$1" = seamfs ] && B_SLOG_LINES=$(wc -l <"$SEAMFS_LOG")
	[ "$1" = rclone ] && B_SLOG_LINES=$(wc -l <"$RCLONE_LOG")
	return 0
}

# finish PHASE RUN [keep]: records daemon CPU and peak RSS, unmounts (unless
# "keep") so that every request of the phase has ended and is in nginx's log,
# then records the origin bytes of the phase.
finish() {
	local phase=$1 run=$2 keep=${3:-} pid p log
	pid=$(tool_pid "$B_TOOL")
	if [ -n "$pid" ]; then
		if alive "$pid"; then
			p=$("$PY" "$TOOLS" proc "$pid")
			rec "$phase" "$B_TOOL" "$run" "$("$PY" - "$B_PROC" "$p" <<-'EOF'
			import json, sys
			a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
			print(json.dumps({"cpu": b["cpu"] - a["cpu"], "hwm_kib": b["hwm_kib"], "rss_kib": b["rss_kib"]}))
			EOF
			)"
		else
			rec "$phase" "$B_TOOL" "$run" '{"error": "daemon died during the phase"}'
		fi
		# New warnings and errors in the daemon's log during the phase.
		log=$SEAMFS_LOG
		[ "$B_TOOL" = rclone ] && log=$RCLONE_LOG
		local n
		n=$(tail -n +"$((B_SLOG_LINES + 1))" "$log" | grep -cE ' (warn|error) |ERROR|WARN|panic' || true)
		if [ "$n" -gt 0 ]; then
			rec "$phase" "$B_TOOL" "$run" "$("$PY" -c 'import json,sys; print(json.dumps({"log_problems": int(sys.argv[1]), "log_file": sys.argv[2], "log_first": sys.argv[3][:400]}))' \
				"$n" "$log" "$(tail -n +"$((B_SLOG_LINES + 1))" "$log" | grep -E ' (warn|error) |ERROR|WARN|panic' | head -n 3)")"
		fi
		[ "$keep" = keep ] || unmount_tool "$B_TOOL"
	fi
	settle_log
	rec "$phase" "$B_TOOL" "$run" "$("$PY" "$TOOLS" logsum "$ACCESS" "$B_LOG" "$(log_size)")"
}

# fio_run PHASE TOOL RUN FIO-ARGS...: runs fio bounded; records its totals.
fio_run() {
	local phase=$1 tool=$2 run=$3 js
	shift 3
	js=$TMP/fio-$phase-$tool-$run.json
	rm -f "$js"
	timeout -k 10 $((CAP + 60)) fio --output-format=json --output="$js" --readonly --iomem_align=4k "$@" \
		>>"$LOGS/fio.log" 2>&1 || true
	rec "$phase" "$tool" "$run" "$("$PY" "$TOOLS" fio "$js")"
}

# timed OUTJSON CMD...: runs CMD, wall time and CPU (incl. children) into OUTJSON.
timed() {
	local o=$1
	shift
	"$PY" "$TOOLS" timed "$o" -- "$@" || true
}

# tools_in_order RUN: the order of the columns for this run, rotated so that no
# tool always goes first.
tools_in_order() {
	local t=(curl seamfs) n i
	[ "$USE_RCLONE" = 1 ] && t+=(rclone)
	n=${#t[@]}
	for ((i = 0; i < n; i++)); do printf '%s ' "${t[$(((i + $1 - 1) % n))]}"; done
}

# ---------------------------------------------------------------- phases

# verify + re-read (6): cold sha256 of every file through the mount (checks the
# bytes), then re-reads of the big file from the warm page cache.
phase_verify_reread() {
	local tool f res dir run
	for tool in seamfs rclone; do
		[ "$tool" = rclone ] && [ "$USE_RCLONE" = 0 ] && continue
		say "verify: sha256 of every file through $tool"
		cold "$tool" "${ALL_FILES[@]}"
		dir=$(tool_dir "$tool")
		begin "$tool"
		for f in "${ALL_FILES[@]}"; do
			res=$(timeout -k 5 $CAP "$PY" "$TOOLS" sha "$dir/$f" || echo '{"ok": false, "error": "'"$f"': sha256 read timed out or failed"}')
			rec verify "$tool" 1 "$("$PY" - "$res" "$(cat "$DATA/$f.sha256")" "$f" <<-'EOF'
			import json, sys
			r, want, name = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
			d = {"file_" + name: r}
			if r.get("ok") and r["sha256"] != want:
			    d["error"] = f"{name}: WRONG BYTES: sha256 {r['sha256']} != {want}"
			elif not r.get("ok"):
			    d["error"] = r.get("error", "read failed")
			print(json.dumps(d))
			EOF
			)"
		done
		finish verify 1 keep
		say "re-read (warm page cache): $BIG through $tool"
		for ((run = 1; run <= RUNS; run++)); do
			begin "$tool"
			fio_run reread "$tool" "$run" --name=reread --filename="$dir/$BIG" --rw=read \
				--bs=1M --ioengine=psync --direct=0 --invalidate=0 --runtime=$CAP \
				--loops=$(((2048 + BIG_MIB - 1) / BIG_MIB))
			finish reread "$run" keep
		done
		unmount_tool "$tool"
	done
}

# 1: one sequential reader of the big file.
phase_seq() {
	local run tool o
	for ((run = 1; run <= RUNS; run++)); do
		for tool in $(tools_in_order "$run"); do
			say "seq: run $run/$RUNS, $tool"
			cold "$tool" "$BIG"
			begin "$tool"
			if [ "$tool" = curl ]; then
				o=$TMP/curl-seq-$run
				timed "$o.t" curl -s -o /dev/null --max-time $CAP \
					-w '%{speed_download} %{size_download} %{http_code}' "$URL/$BIG" >"$o.w" || true
				rec seq curl "$run" "$("$PY" - "$o" "$(stat -c %s "$DATA/$BIG")" <<-'EOF'
				import json, sys
				o, size = sys.argv[1], int(sys.argv[2])
				t = json.load(open(o + ".t"))
				w = (open(o + ".w").read().split() + ["0", "0", "0"])[:3]
				d = {"mbps": float(w[0]) / 1e6, "io_bytes": int(w[1]), "wall": t["wall"], "cpu": t["cpu"]}
				if w[2] != "200" or int(w[1]) != size or t["rc"]:
				    d["error"] = f"curl: http {w[2]}, {w[1]} of {size} bytes, rc {t['rc']}"
				print(json.dumps(d))
				EOF
				)"
			else
				fio_run seq "$tool" "$run" --name=seq --filename="$(tool_dir "$tool")/$BIG" \
					--rw=read --bs=1M --ioengine=psync --direct=0 --runtime=$CAP
			fi
			finish seq "$run"
		done
	done
}

# 2: four readers, one per part file.
phase_par4() {
	local run tool o p args i
	for ((run = 1; run <= RUNS; run++)); do
		for tool in $(tools_in_order "$run"); do
			say "4 readers: run $run/$RUNS, $tool"
			cold "$tool" "${PARTS[@]}"
			begin "$tool"
			if [ "$tool" = curl ]; then
				o=$TMP/curl-par4-$run
				rm -f "$o".w*
				timed "$o.t" bash -c '
					o=$1; url=$2; cap=$3; shift 3; i=0
					for p in "$@"; do
						i=$((i + 1))
						curl -s -o /dev/null --max-time "$cap" -w "%{size_download}" "$url/$p" >"$o.w$i" &
					done
					wait' bash "$o" "$URL" "$CAP" "${PARTS[@]}"
				rec par4 curl "$run" "$("$PY" - "$o" <<-'EOF'
				import json, sys
				o = sys.argv[1]
				t = json.load(open(o + ".t"))
				n = sum(float(open(f"{o}.w{i}").read() or 0) for i in range(1, 5))
				print(json.dumps({"io_bytes": n, "wall": t["wall"], "cpu": t["cpu"],
				                  "mbps": n / t["wall"] / 1e6}))
				EOF
				)"
			else
				args=(--name=global --rw=read --bs=1M --ioengine=psync --direct=0 --runtime=$CAP)
				i=0
				for p in "${PARTS[@]}"; do
					i=$((i + 1))
					args+=(--name="r$i" --filename="$(tool_dir "$tool")/$p")
				done
				fio_run par4 "$tool" "$run" "${args[@]}"
			fi
			finish par4 "$run"
		done
	done
}

# 3: random reads of BS bytes for RAND_SECS seconds, one at a time.
# curl: single range requests at random BS-aligned offsets, all in one curl
# invocation (a config file of N requests separated by "next"), so they share
# one keep-alive connection. N is calibrated to last about RAND_SECS.
phase_rand() {
	local bs=$1 phase=rand$(($1 / 1024))k run tool o n=0 size rate
	size=$(stat -c %s "$DATA/$BIG")
	for ((run = 1; run <= RUNS; run++)); do
		for tool in $(tools_in_order "$run"); do
			say "random $((bs / 1024)) KiB: run $run/$RUNS, $tool"
			cold "$tool" "$BIG"
			if [ "$tool" = curl ]; then
				o=$TMP/curl-$phase-$run
				if [ "$n" = 0 ]; then
					"$PY" "$TOOLS" curlcfg "$URL/$BIG" "$size" "$bs" 200 1 "$o.cfg"
					timed "$o.t" curl -K "$o.cfg" >/dev/null 2>&1
					rate=$("$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); print(max(100, min(200000, int(200 / t["wall"] * float(sys.argv[2])))))' "$o.t" "$RAND_SECS")
					n=$rate
				fi
				"$PY" "$TOOLS" curlcfg "$URL/$BIG" "$size" "$bs" "$n" "$((run * 7919 + bs))" "$o.cfg"
				begin curl
				timed "$o.t" timeout -k 5 $((RAND_SECS * 4 + 20)) curl -K "$o.cfg" >"$o.w" 2>"$o.e"
				rec "$phase" curl "$run" "$("$PY" - "$o" "$bs" "$n" <<-'EOF'
				import json, subprocess, sys
				o, bs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
				t = json.load(open(o + ".t"))
				good = bad = 0
				slowest = 0.0
				for line in open(o + ".w"):
				    p = line.split()
				    if len(p) == 3 and p[0] == "206" and int(p[1]) == bs:
				        good += 1
				        slowest = max(slowest, float(p[2]))
				    elif p:
				        bad += 1
				d = {"wall": t["wall"], "cpu": t["cpu"], "requests_sent": n, "ios": good,
				     "io_bytes": good * bs, "iops": good / t["wall"],
				     "mbps": good * bs / t["wall"] / 1e6, "lat_max_ms": slowest * 1000}
				if bad or good != n or t["rc"]:
				    d["error"] = f"curl: {good} of {n} range requests good, {bad} bad, rc {t['rc']}"
				print(json.dumps(d))
				EOF
				)"
			else
				begin "$tool"
				fio_run "$phase" "$tool" "$run" --name="$phase" --filename="$(tool_dir "$tool")/$BIG" \
					--rw=randread --bs="$bs" --ioengine=psync --direct=0 --invalidate=1 \
					--randrepeat=0 --time_based --runtime="$RAND_SECS"
			fi
			finish "$phase" "$run"
		done
	done
}

# 4: Kodi-like: open, head 64 KiB, tail 1 MiB, middle 1 MiB, then 0..end.
phase_kodi() {
	local file=$1 phase=$2 run tool o size mid
	size=$(stat -c %s "$DATA/$file")
	mid=$(((size / 2) / 4096 * 4096))
	for ((run = 1; run <= RUNS; run++)); do
		for tool in $(tools_in_order "$run"); do
			say "kodi pattern on $file: run $run/$RUNS, $tool"
			cold "$tool" "$file"
			begin "$tool"
			if [ "$tool" = curl ]; then
				o=$TMP/curl-$phase-$run
				{
					printf 'silent\n'
					printf 'url = "%s/%s"\nrange = "0-65535"\noutput = "/dev/null"\nnext\n' "$URL" "$file"
					printf 'url = "%s/%s"\nrange = "%s-%s"\noutput = "/dev/null"\nnext\n' "$URL" "$file" \
						"$((size > 1048576 ? size - 1048576 : 0))" "$((size - 1))"
					printf 'url = "%s/%s"\nrange = "%s-%s"\noutput = "/dev/null"\nnext\n' "$URL" "$file" \
						"$mid" "$((mid + 1048575 < size - 1 ? mid + 1048575 : size - 1))"
					printf 'url = "%s/%s"\noutput = "/dev/null"\n' "$URL" "$file"
				} >"$o.cfg"
				timed "$o.t" timeout -k 5 $CAP curl -K "$o.cfg"
				rec "$phase" curl "$run" "$("$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); d={"secs": t["wall"], "cpu": t["cpu"]}; d.update({"error": "curl rc %d" % t["rc"]} if t["rc"] else {}); print(json.dumps(d))' "$o.t")"
			else
				rec "$phase" "$tool" "$run" "$(timeout -k 5 $CAP "$PY" "$TOOLS" kodi "$(tool_dir "$tool")/$file" || echo '{"error": "kodi pattern timed out"}')"
			fi
			finish "$phase" "$run"
		done
	done
}

# 5: cold open + first 64 KiB of every file (fresh mount, empty page cache).
phase_open64k() {
	local run tool f o dir
	for ((run = 1; run <= RUNS; run++)); do
		for tool in $(tools_in_order "$run"); do
			say "open + 64 KiB: run $run/$RUNS, $tool"
			cold "$tool" "${ALL_FILES[@]}"
			begin "$tool"
			if [ "$tool" = curl ]; then
				o=$TMP/curl-open64k-$run
				: >"$o.w"
				for f in "${ALL_FILES[@]}"; do
					curl -s -o /dev/null --max-time 30 -r 0-65535 -w '%{time_total} %{http_code}\n' \
						"$URL/$f" >>"$o.w" || true
				done
				rec open64k curl "$run" "$("$PY" -c '
import json, sys
ms, err = [], []
for line in open(sys.argv[1]):
    t, code = line.split()
    (ms.append(float(t) * 1000) if code == "206" else err.append("http " + code))
d = {"ms": ms}
if err: d["error"] = "curl: " + ", ".join(err)
print(json.dumps(d))' "$o.w")"
			else
				dir=$(tool_dir "$tool")
				rec open64k "$tool" "$run" "$(timeout -k 5 120 "$PY" "$TOOLS" open64k "${ALL_FILES[@]/#/$dir/}" || echo '{"error": "open64k timed out"}')"
			fi
			finish open64k "$run"
		done
	done
}

# 7: 64 concurrent sequential readers over the 5 random files, each reading its
# own slice once (at most R64_SECS); peak RSS.
phase_readers64() {
	local run tool jf files=() f
	for ((run = 1; run <= RUNS; run++)); do
		for tool in seamfs rclone; do
			[ "$tool" = rclone ] && [ "$USE_RCLONE" = 0 ] && continue
			say "$N64 readers: run $run/$RUNS, $tool"
			cold "$tool" "$BIG" "${PARTS[@]}"
			files=()
			for f in "$BIG" "${PARTS[@]}"; do files+=("$(tool_dir "$tool")/$f"); done
			jf=$TMP/readers64-$tool.fio
			"$PY" "$TOOLS" readers64 "$jf" "$N64" "$R64_SECS" "${files[@]}"
			begin "$tool"
			fio_run readers64 "$tool" "$run" "$jf"
			finish readers64 "$run"
		done
	done
}

# ---------------------------------------------------------------- main

main() {
	[ "$(id -u)" -eq 0 ] || die "needs root (mounts, drop_caches): sudo $0 $*"
	install_tools
	[ -x "$SEAMFS" ] || die "no seamfs daemon at $SEAMFS (build it: meson setup build && meson compile -C build, or pass --seamfs PATH)"
	SEAMFS=$(realpath "$SEAMFS")
	mkdir -p "$WORK" "$OUT" "$LOGS" "$TMP"
	rm -f "$RAW" "$LOGS"/*.log "$TMP"/*
	unmount_dir "$MNT_S"
	unmount_dir "$MNT_R"
	local t0=$SECONDS
	say "mode: $([ "$QUICK" = 1 ] && echo quick || echo full), $RUNS run(s) each, seamfs: $SEAMFS"
	make_data
	start_nginx
	write_catalog

	# Sanity: the origin serves ranges, seamfs mounts and lists every file.
	[ "$(curl -s -o /dev/null -w '%{http_code}' -r 0-0 "$URL/$BIG")" = 206 ] ||
		die "nginx does not answer a range request for $URL/$BIG"
	mount_tool seamfs
	for f in "${ALL_FILES[@]}"; do
		[ "$(stat -c %s "$MNT_S/$f" 2>/dev/null)" = "$(stat -c %s "$DATA/$f")" ] ||
			die "seamfs does not show $f with its size (log: $SEAMFS_LOG)"
	done
	unmount_tool seamfs

	phase_verify_reread
	phase_seq
	phase_par4
	phase_rand 65536
	phase_rand 4096
	phase_kodi "$MOVIE" kodi_movie
	phase_kodi "$BIG" kodi_big
	phase_open64k
	phase_readers64

	"$PY" "$BENCH/report.py" "$RAW" "$OUT/results.json" \
		mode="$([ "$QUICK" = 1 ] && echo quick || echo full)" runs="$RUNS" \
		seamfs="$SEAMFS" seamfs_opt="$SEAMFS_OPT" seamfs_version="$("$SEAMFS" --version 2>&1 | head -n 1)" \
		rclone="$([ "$USE_RCLONE" = 1 ] && rclone version 2>/dev/null | head -n 1)" \
		fio="$(fio --version)" curl="$(curl --version | head -n 1 | cut -d' ' -f1-2)" \
		nginx="$(nginx -v 2>&1 | cut -d/ -f2)" kernel="$(uname -r)" cpus="$(nproc)" \
		big_file="$BIG" big_bytes="$(stat -c %s "$DATA/$BIG")" \
		part_files="${PARTS[*]}" part_bytes="$(stat -c %s "$DATA/${PARTS[0]}")" \
		movie_bytes="$(stat -c %s "$DATA/$MOVIE")" rand_secs="$RAND_SECS" \
		readers64_secs="$R64_SECS" readers="$N64" budget_mib="$BUDGET_MIB" \
		origin="nginx on $URL" elapsed_s="$((SECONDS - t0))"
	say "raw records: $RAW; logs: $LOGS; took $((SECONDS - t0)) s"
}

main "$@"
