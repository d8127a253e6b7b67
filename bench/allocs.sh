#!/usr/bin/env bash
# allocs.sh - heap allocations of the seamfs daemon per FUSE read, for one or more
# seamfs binaries, on one random file served by nginx on 127.0.0.1.
#
#   sudo bench/allocs.sh [--seamfs [LABEL=]PATH]... [--size-mib N] [--warm-mib N]
#                        [--rand-reads N] [--method auto|perf|shim] [--callers]
#                        [--work DIR] [--out DIR]
#
#   --seamfs [LABEL=]PATH  a daemon to measure; repeat to compare (default:
#                  build/seamfs of this repo); LABEL names it in the table
#   --size-mib N   size of the random file (default 512)
#   --warm-mib N   MiB seq_steady reads before it counts (default 64)
#   --rand-reads N 64 KiB reads at random offsets in the random phase (default 2000)
#   --method M     perf: uprobes on libc's allocators, counted with perf stat -p;
#                  shim: LD_PRELOAD of bench/malloc_count.c (built here with cc);
#                  auto (default): perf when perf probe works, else shim
#   --callers      perf only: perf record with DWARF call stacks instead of
#                  perf stat (counts are the samples); OUT/callers.txt lists the
#                  top call sites per phase (the first frame in seamfs, else in the
#                  first library that is not libc)
#   --work DIR     data, nginx, mount, state (default /tmp/seamfs-allocs)
#   --out DIR      allocs.json, allocs.txt, logs/ (default WORK/out)
#
# Per binary, three phases, each on a fresh mount after dropping the page cache
# (the origin's copy is read back into it: nginx serves from memory):
#   seq         the whole file read sequentially through the mount, 1 MiB
#               read(2)s, counted from after open() (the stream's start included)
#   seq_steady  the same, but the first --warm-mib MiB are read before the count
#               starts: the per-read cost of a running stream alone
#   rand        N preads of 64 KiB at random 64 KiB-aligned offsets, with
#               POSIX_FADV_RANDOM (no kernel read-ahead: direct range requests)
# Counted: calls of malloc, calloc, realloc, posix_memalign and aligned_alloc
# (shim: also memalign, valloc) by every thread of the daemon over the reader's
# window; FUSE reads the daemon answered: the change of
# seamfs_read_latency_seconds_count in MNT/.seamfs/metrics over the same window
# (read just outside it). Output: OUT/allocs.txt (the table), OUT/allocs.json.
#
# Needs root (mount, drop_caches, uprobes), nginx, curl, fusermount3, Debian's
# /usr/bin/python3; perf or cc. Every wait is bounded; on exit, failure or Ctrl-C
# it removes its probes, unmounts, and stops the seamfs and nginx it started, by
# PID. Exit 0 whatever the counts; non-zero when the harness broke.
set -Eeuo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

# shellcheck source=bench/lib.sh
. "$BENCH/lib.sh"

SEAMFS_LIST=()
SIZE_MIB=512
RAND_READS=2000
WARM_MIB=64
METHOD=auto
CALLERS=0
WORK=/tmp/seamfs-allocs
OUT=
CAP=180                # bound of one phase's reader (s)
GROUP=seamfs_allocs    # perf probe group (removed on exit)

while [ $# -gt 0 ]; do
	case $1 in
	--seamfs) SEAMFS_LIST+=("${2:?--seamfs needs a path}"); shift ;;
	--seamfs=*) SEAMFS_LIST+=("${1#*=}") ;;
	--size-mib) SIZE_MIB=${2:?--size-mib needs a number}; shift ;;
	--size-mib=*) SIZE_MIB=${1#*=} ;;
	--warm-mib) WARM_MIB=${2:?--warm-mib needs a number}; shift ;;
	--warm-mib=*) WARM_MIB=${1#*=} ;;
	--rand-reads) RAND_READS=${2:?--rand-reads needs a number}; shift ;;
	--rand-reads=*) RAND_READS=${1#*=} ;;
	--method) METHOD=${2:?--method needs auto, perf or shim}; shift ;;
	--method=*) METHOD=${1#*=} ;;
	--callers) CALLERS=1 ;;
	--work) WORK=${2:?--work needs a directory}; shift ;;
	--work=*) WORK=${1#*=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#*=} ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
[[ $SIZE_MIB =~ ^[1-9][0-9]*$ ]] || die "--size-mib: not a positive number: $SIZE_MIB"
if ! [[ $WARM_MIB =~ ^[0-9]+$ ]] || [ "$WARM_MIB" -ge "$SIZE_MIB" ]; then
	die "--warm-mib: a number below --size-mib: $WARM_MIB"
fi
[[ $RAND_READS =~ ^[1-9][0-9]*$ ]] || die "--rand-reads: not a positive number: $RAND_READS"
case $METHOD in auto|perf|shim) ;; *) die "--method: auto, perf or shim, not $METHOD" ;; esac
[ ${#SEAMFS_LIST[@]} -gt 0 ] || SEAMFS_LIST=("$REPO/build/seamfs")

WORK=$(realpath -m "$WORK")
: "${OUT:=$WORK/out}"
OUT=$(realpath -m "$OUT")
DATA=$WORK/data
NGX=$WORK/nginx
ACCESS=$NGX/access.log
NGINX_PORTS=19000-19999
MNT=$WORK/mnt
LOGS=$OUT/logs
FILE=alloc-${SIZE_MIB}M.bin
CATALOG=$WORK/catalog.json
RAW=$OUT/raw.jsonl
COUNTS=$WORK/malloc-counts        # the shim's shared counters
SHIM=$WORK/malloc_count.so

NGINX_PID= SEAMFS_PID= PORT= URL= PROBES=0 SEAMFS_LOG= EVENTS=
MOUNT_SEQ=0

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	unmount_dir "$MNT"
	wait_gone "$SEAMFS_PID" 10 || stop_pid "$SEAMFS_PID" seamfs
	stop_pid "$NGINX_PID" nginx
	[ "$PROBES" = 1 ] && perf probe -q -d "$GROUP:*" 2>/dev/null
	[ $rc -ne 0 ] && printf 'allocs.sh: stopped (exit %d); probes, mount and servers cleaned up\n' "$rc" >&2
	exit $rc
}
trap cleanup EXIT
trap 'warn interrupted; exit 130' INT TERM
trap 'printf "allocs.sh: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

is_mounted() { awk -v m="$1" -v t="$2" '$2 == m && $3 == t { f = 1 } END { exit !f }' /proc/mounts; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ---------------------------------------------------------------- setup

make_data() {
	local f=$DATA/$FILE want=$((SIZE_MIB * 1048576))
	mkdir -p "$DATA"
	chmod 755 "$WORK" "$DATA"
	if ! [ -f "$f" ] || [ "$(stat -c %s "$f")" != "$want" ] || ! [ -s "$f.sha256" ]; then
		say "generating $FILE ($SIZE_MIB MiB of random bytes)"
		rm -f "$f" "$f.sha256"
		head -c "$want" /dev/urandom >"$f.tmp"
		mv "$f.tmp" "$f"
		sha256sum "$f" | cut -d' ' -f1 >"$f.sha256"
	fi
	chmod 644 "$DATA"/*
}

# nginx as bench.sh starts it: private prefix, daemon off, sendfile, keep-alive.
write_catalog() {
	cat >"$CATALOG" <<-EOF
	{
	  "assets": [
	    { "id": "allocs-$SIZE_MIB", "path": "$FILE", "size": $(stat -c %s "$DATA/$FILE"),
	      "mtime": $(stat -c %Y "$DATA/$FILE"), "sha256": "$(cat "$DATA/$FILE.sha256")",
	      "sources": [ { "url": "$URL/$FILE" } ] }
	  ]
	}
	EOF
}

# choose_method: perf when uprobes on libc can be placed, else the shim.
choose_method() {
	local libc
	if [ "$METHOD" != shim ] && command -v perf >/dev/null 2>&1; then
		libc=$(ldd "${SEAMFS_PATHS[0]}" | awk '$1 ~ /^libc\.so/ { print $3 }')
		[ -n "$libc" ] || die "cannot find the libc ${SEAMFS_PATHS[0]} uses"
		libc=$(realpath "$libc")
		perf probe -q -d "$GROUP:*" 2>/dev/null || true
		PROBES=1
		if timeout 60 perf probe -q -x "$libc" -a "$GROUP:malloc=malloc" -a "$GROUP:calloc=calloc" \
			-a "$GROUP:realloc=realloc" -a "$GROUP:posix_memalign=posix_memalign" \
			-a "$GROUP:aligned_alloc=aligned_alloc" >>"$LOGS/perf-probe.log" 2>&1; then
			METHOD=perf
			EVENTS="$GROUP:malloc,$GROUP:calloc,$GROUP:realloc,$GROUP:posix_memalign,$GROUP:aligned_alloc"
			# The probes count: a process started now must show its mallocs.
			local n
			n=$(perf stat -x, -e "$GROUP:malloc" -- "$PY" -c 'x = [bytearray(100000) for _ in range(100)]' 2>&1 |
				awk -F, '$3 ~ /:malloc$/ { print $1 }')
			if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 100 ]; then
				die "the uprobes do not count ($n mallocs seen for 100 allocations); try --method shim"
			fi
			say "counting with uprobes on $libc (perf stat -e '$GROUP:*' -p PID)"
			return
		fi
		perf probe -q -d "$GROUP:*" 2>/dev/null || true
		PROBES=0
		[ "$METHOD" = perf ] && die "perf probe on $libc failed (log: $LOGS/perf-probe.log)"
		warn "perf probe failed (log: $LOGS/perf-probe.log); using the LD_PRELOAD shim"
	fi
	command -v cc >/dev/null 2>&1 || die "neither perf probes nor cc (for the shim) work"
	cc -O2 -Wall -shared -fPIC -o "$SHIM" "$BENCH/malloc_count.c" || die "could not build the shim"
	METHOD=shim
	say "counting with the LD_PRELOAD shim $SHIM (counters in $COUNTS)"
}

# ---------------------------------------------------------------- a mount

# mount_seamfs BINARY LABEL: a fresh mount with a fresh state dir.
mount_seamfs() {
	local bin=$1 label=$2 i
	unmount_seamfs
	mkdir -p "$MNT"
	rm -rf "$WORK/state"
	mkdir -p "$WORK/state"
	MOUNT_SEQ=$((MOUNT_SEQ + 1))
	SEAMFS_LOG=$LOGS/seamfs-$label-$MOUNT_SEQ.log
	if [ "$METHOD" = shim ]; then
		rm -f "$COUNTS"
		SEAMFS_MALLOC_COUNT=$COUNTS SEAMFS_MALLOC_COUNT_EXE=$(realpath "$bin") LD_PRELOAD=$SHIM \
			setsid "$bin" -f -o "state_dir=$WORK/state" \
			"$CATALOG" "$MNT" </dev/null >"$SEAMFS_LOG" 2>&1 &
	else
		setsid "$bin" -f -o "state_dir=$WORK/state" "$CATALOG" "$MNT" \
			</dev/null >"$SEAMFS_LOG" 2>&1 &
	fi
	SEAMFS_PID=$!
	for ((i = 0; i < 300; i++)); do
		if is_mounted "$MNT" fuse.seamfs; then
			[ "$(readlink "/proc/$SEAMFS_PID/exe")" = "$(realpath "$bin")" ] ||
				die "pid $SEAMFS_PID is not $bin: run allocs.sh without job control"
			[ "$METHOD" != shim ] || [ -s "$COUNTS" ] || die "the shim did not map $COUNTS"
			return 0
		fi
		if ! alive "$SEAMFS_PID"; then
			tail -n 20 "$SEAMFS_LOG" >&2
			die "seamfs exited before mounting (log: $SEAMFS_LOG)"
		fi
		sleep 0.1
	done
	tail -n 20 "$SEAMFS_LOG" >&2
	die "seamfs did not mount $MNT within 30 s"
}

unmount_seamfs() {
	unmount_dir "$MNT"
	wait_gone "$SEAMFS_PID" 10 || stop_pid "$SEAMFS_PID" seamfs
	SEAMFS_PID=
}

# The reader, run as perf's workload (perf method) or alone (shim): opens the
# file, then for its phase
#   seq         reads 0..end in 1 MiB read(2)s, all counted (the stream's start too)
#   seq_steady  reads the first WARM MiB uncounted, then the rest counted (a
#               stream that is already running: the per-read cost alone)
#   rand        N preads of 64 KiB at random 64 KiB-aligned offsets, with
#               POSIX_FADV_RANDOM, all counted (direct range requests)
# Around the counted reads it reads MNT/.seamfs/metrics (outside the window) and
# switches the count on and off: perf's control FIFO (--control, started with
# -D -1), or the shim's counter file read before and after. Prints JSON.
READER='
import json, os, random, struct, sys, time
phase, path, n, warm, metrics, method, a, b = sys.argv[1:9]
n, warm = int(n), int(warm) << 20
NAMES = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc"]
def shim():
    with open(a, "rb") as f:
        return dict(zip(NAMES, struct.unpack("8Q", f.read(64))))
def fuse_metrics():
    m = {}
    with open(metrics) as f:
        for line in f:
            p = line.split()
            if len(p) == 2 and not line.startswith("#"):
                m[p[0]] = float(p[1])
    return m
if method == "perf":
    ctl, ack = open(a, "w"), open(b)
def window(on):
    if method == "perf":
        ctl.write("enable\n" if on else "disable\n")
        ctl.flush()
        ack.readline()
        return None
    return shim()
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
out = {"bytes": 0, "calls": 0, "ok": True}
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM if phase == "rand" else os.POSIX_FADV_SEQUENTIAL)
pos = 0
if phase == "seq_steady":
    while pos < warm:
        got = os.read(fd, min(1 << 20, warm - pos))
        if not got:
            break
        pos += len(got)
    out["warm_bytes"] = pos
m0 = fuse_metrics()
c0 = window(True)
t0 = time.monotonic()
if phase == "rand":
    rng = random.Random(20261201)
    bs = 65536
    for _ in range(n):
        got = len(os.pread(fd, bs, rng.randrange(size // bs) * bs))
        out["bytes"] += got
        out["calls"] += 1
        out["ok"] = out["ok"] and got == bs
else:
    while True:
        got = len(os.read(fd, 1 << 20))
        if not got:
            break
        out["bytes"] += got
        out["calls"] += 1
    out["ok"] = pos + out["bytes"] == size
out["secs"] = time.monotonic() - t0
c1 = window(False)
m1 = fuse_metrics()
os.close(fd)
if c0 is not None:
    out["allocs"] = {k: c1[k] - c0[k] for k in c1}
out["metrics"] = {k: m1[k] - m0.get(k, 0) for k in m1 if k.endswith(("_count", "_total"))}
print(json.dumps(out))
'

# phase LABEL BINARY PHASE: a fresh mount, an empty page cache (the origin's
# file read back into it), then the reader.
phase() {
	local label=$1 bin=$2 ph=$3 res perf_out counts='{"allocs": {}}' perf_cmd
	say "$label: $ph"
	mount_seamfs "$bin" "$label"
	drop_caches
	cat "$DATA/$FILE" >/dev/null
	if [ "$METHOD" = perf ]; then
		perf_out=$LOGS/perf-$label-$ph.csv
		rm -f "$WORK/perf-ctl" "$WORK/perf-ack"
		mkfifo "$WORK/perf-ctl" "$WORK/perf-ack"
		# perf counts on every thread of the daemon (and the threads they
		# start), from the reader's "enable" to its "disable".
		if [ "$CALLERS" = 1 ]; then
			perf_cmd=(perf record -q -o "$LOGS/perf-$label-$ph.data" --call-graph "dwarf,8192")
		else
			perf_cmd=(perf stat "-x," -o "$perf_out")
		fi
		res=$(timeout -k 10 $((CAP + 30)) "${perf_cmd[@]}" -e "$EVENTS" -p "$SEAMFS_PID" \
			-D -1 --control "fifo:$WORK/perf-ctl,$WORK/perf-ack" -- \
			timeout -k 5 $CAP "$PY" -c "$READER" "$ph" "$MNT/$FILE" "$RAND_READS" "$WARM_MIB" \
			"$MNT/.seamfs/metrics" perf "$WORK/perf-ctl" "$WORK/perf-ack" 2>>"$LOGS/perf.log") ||
			res='{"ok": false, "error": "reader failed or timed out"}'
		if [ "$CALLERS" = 1 ]; then
			timeout 300 perf script -i "$LOGS/perf-$label-$ph.data" -F event,ip,sym,dso \
				>"$LOGS/perf-$label-$ph.script" 2>>"$LOGS/perf.log" || true
			counts=$("$PY" - "$label $ph" "$bin" "$OUT/callers.txt" "$LOGS/perf-$label-$ph.script" <<-'EOF'
			import collections, json, os, re, sys
			title, binary, out, script = sys.argv[1], os.path.basename(sys.argv[2]), sys.argv[3], sys.argv[4]
			counts, sites, callers = collections.Counter(), collections.Counter(), collections.Counter()
			stack, event = [], None
			def flush():
			    if event is None:
			        return
			    counts[event] += 1
			    for i, f in enumerate(stack):
			        if f[2] is None:
			            f[2] = next((g[2] for g in stack[i:] if g[2] and g[0] == f[0]), "?")
			    st = [(f[1], f[2]) for f in stack]
			    # the allocator's caller outside libc, and the innermost seamfs frame
			    # (the first frame is the probed allocator itself)
			    imm = next((f for f in st[1:] if not f[1].startswith(("libc.", "?"))), None) or \
			        (st[0] if st else ("?", "?"))
			    own = next((f for f in st if f[1] == binary), None)
			    dso = imm[1].split(".so")[0]
			    callers[dso] += 1
			    site = f"{imm[0]} ({dso})" + (f" <- {own[0]}" if own and own != imm else "")
			    sites[(event, site)] += 1
			for line in open(script, errors="replace"):
			    head = re.match(r"\s*[\w.-]+:(\w+):\s*$", line)
			    if head:
			        flush()
			        event, stack = head.group(1), []
			    elif line.strip():
			        p = line.split()
			        if len(p) >= 3:
			            # (ip, symbol, library); an inlined frame is followed by the
			            # frame of the same ip that names the library
			            dso = None if p[-1] == "(inlined)" else os.path.basename(p[-1].strip("()"))
			            stack.append([p[0], p[1].split("+")[0], dso])
			flush()
			with open(out, "a") as f:
			    f.write(f"{title}: {sum(counts.values())} allocations; by the allocator's caller: "
			            + ", ".join(f"{k} {v}" for k, v in callers.most_common()) + "\n")
			    for (ev, site), n in sites.most_common(12):
			        f.write(f"  {n:8d}  {ev:14s}  {site}\n")
			names = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
			print(json.dumps({"allocs": {k: counts.get(k, 0) for k in names},
			                  "by_caller": dict(callers.most_common())}))
			EOF
			)
		else
			counts=$("$PY" - "$perf_out" <<-'EOF'
			import json, sys
			d = {}
			for line in open(sys.argv[1]):
			    p = line.strip().split(",")
			    if len(p) > 2 and ":" in p[2]:
			        d[p[2].split(":", 1)[1]] = int(p[0]) if p[0].isdigit() else None
			print(json.dumps({"allocs": d}))
			EOF
			)
		fi
	else
		res=$(timeout -k 5 $CAP "$PY" -c "$READER" "$ph" "$MNT/$FILE" "$RAND_READS" "$WARM_MIB" \
			"$MNT/.seamfs/metrics" shim "$COUNTS" -) ||
			res='{"ok": false, "error": "reader failed or timed out"}'
	fi
	alive "$SEAMFS_PID" || res='{"ok": false, "error": "daemon died"}'
	unmount_seamfs
	"$PY" - "$label" "$bin" "$ph" "$METHOD" "$res" "$counts" >>"$RAW" <<-'EOF'
	import json, sys
	label, bin, ph, method, res, counts = sys.argv[1:7]
	r = json.loads(res)
	m = r.pop("metrics", {})
	c = json.loads(counts)
	d = {"label": label, "binary": bin, "phase": ph, "method": method,
	     "allocs": r.pop("allocs", None) or c["allocs"], "by_caller": c.get("by_caller"), "reader": r}
	for key, name in (("fuse_reads", "seamfs_read_latency_seconds_count"),
	                  ("streams", "seamfs_streams_total"),
	                  ("direct_reads", "seamfs_direct_reads_total"),
	                  ("cache_hits", "seamfs_cache_hits_total")):
	    d[key] = int(m[name]) if name in m else None
	d["metrics_delta"] = {k: v for k, v in m.items() if v}
	print(json.dumps(d))
	EOF
}

report() {
	"$PY" - "$RAW" "$OUT/allocs.json" <<-'EOF' | tee "$OUT/allocs.txt"
	import json, sys
	rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
	json.dump(rows, open(sys.argv[2], "w"), indent=1)
	hdr = ("binary", "phase", "GiB read", "reads", "streams", "direct", "allocs",
	       "allocs/read", "allocs/GiB", "malloc/calloc/realloc/memalign", "by caller (--callers)")
	out = []
	bad = []
	for r in rows:
	    a = r["allocs"]
	    total = sum(v for v in a.values() if v)
	    gib = r["reader"].get("bytes", 0) / 2**30
	    n = r["fuse_reads"]
	    mem = sum(a.get(k) or 0 for k in ("posix_memalign", "aligned_alloc", "memalign", "valloc"))
	    out.append((r["label"], r["phase"], f"{gib:.3f}", str(n), str(r["streams"]), str(r["direct_reads"]),
	                str(total), f"{total / n:.3f}" if n else "-", f"{total / gib:.0f}" if gib else "-",
	                f"{a.get('malloc')}/{a.get('calloc')}/{a.get('realloc')}/{mem}",
	                ", ".join(f"{k} {v}" for k, v in (r.get("by_caller") or {}).items()) or "-"))
	    if not r["reader"].get("ok"):
	        bad.append(f"{r['label']} {r['phase']}: {r['reader']}")
	    if not a or any(v is None for v in a.values()):
	        bad.append(f"{r['label']} {r['phase']}: allocations not counted: {a}")
	    if n is None:
	        bad.append(f"{r['label']} {r['phase']}: no seamfs_read_latency_seconds_count in the metrics")
	w = [max(len(x[i]) for x in out + [hdr]) for i in range(len(hdr))]
	fmt = lambda x: "  ".join(s.ljust(w[i]) if i < 2 else s.rjust(w[i]) for i, s in enumerate(x))
	print(f"method: {rows[0]['method'] if rows else '-'}; reads = FUSE reads the daemon answered "
	      "(seamfs_read_latency_seconds_count); allocs = calls during the reader")
	print(fmt(hdr))
	for x in out:
	    print(fmt(x))
	for b in bad:
	    print("ERROR:", b)
	sys.exit(1 if bad else 0)
	EOF
}

# ---------------------------------------------------------------- main

main() {
	local s label bin
	[ "$(id -u)" -eq 0 ] || die "needs root (mounts, drop_caches, uprobes): sudo $0"
	for t in nginx curl fusermount3; do command -v "$t" >/dev/null 2>&1 || die "$t is missing"; done
	[ -x "$PY" ] || die "$PY is missing"
	LABELS=() SEAMFS_PATHS=()
	for s in "${SEAMFS_LIST[@]}"; do
		if [[ $s == *=* ]]; then label=${s%%=*} bin=${s#*=}; else label=$s bin=$s; fi
		[ -x "$bin" ] || die "no seamfs daemon at $bin"
		LABELS+=("$label")
		SEAMFS_PATHS+=("$(realpath "$bin")")
	done
	mkdir -p "$WORK" "$OUT" "$LOGS"
	rm -f "$RAW" "$LOGS"/* "$OUT/callers.txt"
	if [ "$CALLERS" = 1 ] && [ "$METHOD" = shim ]; then die "--callers needs perf"; fi
	unmount_dir "$MNT"
	choose_method
	make_data
	start_nginx
	write_catalog
	[ "$(curl -s -o /dev/null -w '%{http_code}' -r 0-0 "$URL/$FILE")" = 206 ] ||
		die "nginx does not answer a range request for $URL/$FILE"
	local i ph
	for ((i = 0; i < ${#LABELS[@]}; i++)); do
		for ph in seq seq_steady rand; do
			phase "${LABELS[$i]}" "${SEAMFS_PATHS[$i]}" "$ph"
		done
	done
	report
}

main "$@"
