#!/usr/bin/python3
"""Measurement helpers for bench.sh (stdlib only).

Every subcommand prints its result as one JSON object on stdout (or writes it to
a file where said), so that bench.sh can record it without parsing prose.

  timed OUT -- CMD...           run CMD; write {"wall", "cpu", "rc"} to OUT (cpu =
                                user+system seconds of CMD and all its children)
  proc PID                      {"cpu", "hwm_kib", "rss_kib"} of a live process
                                and its descendants (seamfs's keeper and worker)
  fio FILE.json                 totals of a fio JSON report
  logsum LOG START END          origin bytes of the nginx access-log slice
  curlcfg URL SIZE BS N SEED OUT  curl config of N range requests of BS bytes at
                                random BS-aligned offsets of a SIZE-byte file
  kodi FILE                     Kodi-like open/head/tail/middle/sequential pattern
  open64k FILE...               cold open + first 64 KiB latency of each file
  sha FILE                      sequential read and SHA-256 of FILE
  readers64 JOBFILE N SEC FILE...  fio job file for N sequential readers
"""
import hashlib
import json
import mmap
import os
import random
import re
import resource
import subprocess
import sys
import time

MiB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def out(obj):
    print(json.dumps(obj, sort_keys=True))


def cmd_timed(argv):
    dest = argv[0]
    if argv[1] != "--":
        raise SystemExit("timed: expected --")
    cmd = argv[2:]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(dest, "w") as f:
        json.dump({"wall": wall, "cpu": cpu, "rc": rc}, f)
    return rc


def tree_pids(pid):
    """pid and its live descendants. seamfs runs as a keeper that holds the
    mount and a worker (its child) that serves it: a figure of the daemon is
    the sum over both, never the keeper's alone."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return pids


def tree_cpu(pid):
    """utime + stime in seconds, summed over tree_pids(pid)."""
    ticks = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # comm may hold spaces or parentheses: fields start after the last ')'.
        # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        fields = stat[stat.rindex(")") + 2:].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / TICK


def tree_status(pid, keys=("VmRSS", "VmHWM")):
    """The /proc status fields in keys (KiB, or counts), summed over
    tree_pids(pid). A sum of peaks (VmHWM) is an upper bound of the peak."""
    total = dict.fromkeys(keys, 0)
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in total:
                        total[k] += int(v.split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def cmd_proc(argv):
    pid = int(argv[0])
    st = tree_status(pid)
    out({"cpu": tree_cpu(pid), "hwm_kib": st["VmHWM"], "rss_kib": st["VmRSS"]})


def cmd_fio(argv):
    try:
        with open(argv[0]) as f:
            text = f.read()
        # fio may put warnings before the JSON document.
        doc = json.loads(text[text.index("{"):])
    except (OSError, ValueError) as e:
        out({"ok": False, "error": f"no fio report: {e}"})
        return
    jobs = doc.get("jobs", [])
    io_bytes = sum(j["read"]["io_bytes"] for j in jobs)
    ios = sum(j["read"].get("total_ios", 0) for j in jobs)
    runtime_ms = max((j["read"]["runtime"] for j in jobs), default=0)
    errs = [(j.get("jobname"), j.get("error", 0)) for j in jobs if j.get("error", 0)]
    lat_max = max((j["read"].get("lat_ns", {}).get("max", 0) for j in jobs), default=0)
    p99 = max((j["read"].get("clat_ns", {}).get("percentile", {}).get("99.000000", 0)
               for j in jobs), default=0)
    res = {
        "ok": not errs and io_bytes > 0,
        "jobs": len(jobs),
        "io_bytes": io_bytes,
        "ios": ios,
        "runtime_s": runtime_ms / 1000.0,
        "mbps": io_bytes / (runtime_ms / 1000.0) / 1e6 if runtime_ms else 0.0,
        "iops": ios / (runtime_ms / 1000.0) if runtime_ms else 0.0,
        "lat_max_ms": lat_max / 1e6,
        "lat_p99_ms": p99 / 1e6,
    }
    if errs:
        res["error"] = "; ".join(
            f"job {n}: errno {e} ({os.strerror(e)})" for n, e in errs[:5])
        res["error_jobs"] = len(errs)
    if io_bytes == 0 and not errs:
        res["error"] = "fio read no bytes"
    out(res)


LOG_RE = re.compile(
    r'^(?P<msec>\S+) (?P<conn>\d+) (?P<status>\d+) (?P<sent>\d+) (?P<body>\d+) '
    r'"(?P<uri>[^"]*)" "(?P<range>[^"]*)" "(?P<ua>[^"]*)"')


def cmd_logsum(argv):
    path, start, end = argv[0], int(argv[1]), int(argv[2])
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(max(0, end - start))
    total = body = reqs = other = 0
    conns = set()
    status = {}
    for raw in data.decode("utf-8", "replace").splitlines():
        m = LOG_RE.match(raw)
        if not m:
            continue
        # Directory listings (rclone) are not bytes of a file.
        if m["uri"].endswith("/"):
            other += int(m["sent"])
            continue
        total += int(m["sent"])
        body += int(m["body"])
        reqs += 1
        conns.add(m["conn"])
        status[m["status"]] = status.get(m["status"], 0) + 1
    out({"origin_bytes": total, "origin_body_bytes": body, "requests": reqs,
         "connections": len(conns), "status": status, "listing_bytes": other})


def cmd_curlcfg(argv):
    url, size, bs, n, seed, dest = (argv[0], int(argv[1]), int(argv[2]),
                                    int(argv[3]), int(argv[4]), argv[5])
    rng = random.Random(seed)
    blocks = size // bs
    with open(dest, "w") as f:
        f.write("silent\n")
        for i in range(n):
            a = rng.randrange(blocks) * bs
            if i:
                f.write("next\n")
            f.write(f'url = "{url}"\nrange = "{a}-{a + bs - 1}"\n'
                    'output = "/dev/null"\n'
                    'write-out = "%{http_code} %{size_download} %{time_total}\\n"\n')


# Reads go into one page-aligned buffer, as a player's or dd's would: the kernel
# copies into a misaligned buffer (Python's bytes, fio's default malloc) several
# times slower on some CPUs, which would cap what a page-cache read can show.
_BUF = mmap.mmap(-1, 4 * MiB)
_VIEW = memoryview(_BUF)


def exact_pread(fd, n, off):
    got = 0
    while got < n:
        k = os.preadv(fd, [_VIEW[got:n]], off + got)
        if k == 0:
            raise OSError(0, f"short read: {got} of {n} bytes at offset {off} (EOF)")
        got += k
    return _VIEW[:n]


def cmd_kodi(argv):
    path = argv[0]
    chunk = 64 * 1024
    res = {"ok": False}
    t0 = time.monotonic()
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            steps = [("head", 0, min(64 * 1024, size)),
                     ("tail", max(0, size - MiB), min(MiB, size)),
                     ("middle", (size // 2) & ~4095, min(MiB, size - ((size // 2) & ~4095)))]
            slowest = 0.0
            for name, off, n in steps:
                t1 = time.monotonic()
                exact_pread(fd, n, off)
                slowest = max(slowest, time.monotonic() - t1)
                res[name + "_ms"] = (time.monotonic() - t0) * 1000.0
            off = 0
            while off < size:
                n = min(chunk, size - off)
                t1 = time.monotonic()
                exact_pread(fd, n, off)
                slowest = max(slowest, time.monotonic() - t1)
                off += n
            res["lat_max_ms"] = slowest * 1000.0
        finally:
            os.close(fd)
        res["ok"] = True
        res["bytes"] = size + sum(s[2] for s in steps)
    except OSError as e:
        res["error"] = f"{path}: {e.strerror or e} (errno {e.errno})"
    res["secs"] = time.monotonic() - t0
    out(res)


def cmd_open64k(argv):
    samples, errors = [], []
    for path in argv:
        try:
            t0 = time.monotonic()
            fd = os.open(path, os.O_RDONLY)
            try:
                exact_pread(fd, 65536, 0)
            finally:
                os.close(fd)
            samples.append((time.monotonic() - t0) * 1000.0)
        except OSError as e:
            errors.append(f"{path}: {e.strerror or e} (errno {e.errno})")
    res = {"ok": not errors, "ms": samples}
    if errors:
        res["error"] = "; ".join(errors)
    out(res)


def cmd_sha(argv):
    path = argv[0]
    h = hashlib.sha256()
    n = 0
    t0 = time.monotonic()
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                k = f.readinto(_VIEW[:MiB])
                if not k:
                    break
                h.update(_VIEW[:k])
                n += k
        out({"ok": True, "sha256": h.hexdigest(), "bytes": n,
             "secs": time.monotonic() - t0})
    except OSError as e:
        out({"ok": False, "bytes": n,
             "error": f"{path}: {e.strerror or e} (errno {e.errno}) after {n} bytes"})


def cmd_readers64(argv):
    """N sequential readers over FILES, each on its own slice (read once, so no
    reader is served from pages another one brought in), bounded by SEC."""
    dest, n, secs, files = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    sizes = [os.stat(f).st_size for f in files]
    counts = [n // len(files) + (1 if k < n % len(files) else 0) for k in range(len(files))]
    nxt = [0] * len(files)
    with open(dest, "w") as f:
        f.write("[global]\nrw=read\nbs=1M\nioengine=psync\ndirect=0\niomem_align=4k\n"
                f"runtime={secs}\n")
        for i in range(n):
            k = i % len(files)
            span = (sizes[k] // counts[k]) & ~(MiB - 1)
            f.write(f"[r{i}]\nfilename={files[k]}\noffset={span * nxt[k]}\nsize={span}\n")
            nxt[k] += 1


def main():
    cmds = {"timed": cmd_timed, "proc": cmd_proc, "fio": cmd_fio,
            "logsum": cmd_logsum, "curlcfg": cmd_curlcfg,
            "kodi": cmd_kodi, "open64k": cmd_open64k, "sha": cmd_sha,
            "readers64": cmd_readers64}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        raise SystemExit(__doc__)
    rc = cmds[sys.argv[1]](sys.argv[2:])
    sys.exit(rc or 0)


if __name__ == "__main__":
    main()
