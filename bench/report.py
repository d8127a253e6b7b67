#!/usr/bin/python3
"""Turns bench.sh's raw records into one table and results.json (stdlib only).

  report.py RAW.jsonl RESULTS.json [key=value ...]

RAW.jsonl has one record a line: {"phase", "tool", "run", "data": {...}}; the data
of one (phase, tool, run) is merged. Every figure is the median over the runs
(open + 64 KiB: over every file of every run). key=value pairs describe the run
and go to results.json's "meta".
"""
import json
import statistics
import sys

TOOLS = ("curl", "seamfs", "rclone")


def load(path):
    runs = {}      # (phase, tool) -> {run: merged data}
    records, errors, log_problems = [], [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                errors.append({"phase": "?", "tool": "?", "run": 0,
                               "error": f"unreadable raw record ({e}): {line[:200]}"})
                continue
            records.append(r)
            d = r.get("data") or {}
            key = (r["phase"], r["tool"])
            merged = runs.setdefault(key, {}).setdefault(r["run"], {})
            for k, v in d.items():
                if k == "error":
                    errors.append({"phase": r["phase"], "tool": r["tool"],
                                   "run": r["run"], "error": v})
                elif k.startswith("log_"):
                    continue
                else:
                    merged[k] = v
            if "log_problems" in d:
                log_problems.append({"phase": r["phase"], "tool": r["tool"],
                                     "run": r["run"], "lines": d["log_problems"],
                                     "log": d.get("log_file"), "first": d.get("log_first")})
    return runs, records, errors, log_problems


def values(runs, phase, tool, fn):
    out = []
    for _, d in sorted(runs.get((phase, tool), {}).items()):
        try:
            v = fn(d)
        except (KeyError, TypeError, ZeroDivisionError, ValueError):
            v = None
        if isinstance(v, list):
            out.extend(x for x in v if x is not None)
        elif v is not None:
            out.append(v)
    return out


def med(vs):
    return statistics.median(vs) if vs else None


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def main():
    raw, dest = sys.argv[1], sys.argv[2]
    meta = {}
    for kv in sys.argv[3:]:
        k, _, v = kv.partition("=")
        try:
            meta[k] = int(v)
        except ValueError:
            try:
                meta[k] = float(v)
            except ValueError:
                meta[k] = v
    runs, records, errors, log_problems = load(raw)
    budget = int(meta.get("budget_mib", 256))

    def amp(d):
        return d["origin_bytes"] / d["io_bytes"]

    def cpu_per_gb(d):
        return d["cpu"] / (d["io_bytes"] / 1e9)

    def mib(d):
        return d["hwm_kib"] / 1024.0

    # (label, unit, phase, value function, target kind, target value, higher is better)
    # target kind: "curl" (seamfs/curl), "rclone" (seamfs/rclone), "abs" (seamfs value)
    spec = [
        ("sequential, 1 reader", "MB/s", "seq", lambda d: d["mbps"], "curl", 0.9),
        ("4 readers, 4 files (aggregate)", "MB/s", "par4", lambda d: d["mbps"], "curl", 0.9),
        ("random 64 KiB", "MB/s", "rand64k", lambda d: d["mbps"], "curl", 0.8),
        ("random 64 KiB", "IOPS", "rand64k", lambda d: d["iops"], None, None),
        ("random 4 KiB", "IOPS", "rand4k", lambda d: d["iops"], "rclone", 10.0),
        ("random 4 KiB", "MB/s", "rand4k", lambda d: d["mbps"], None, None),
        ("Kodi-like, movie", "s", "kodi_movie", lambda d: d["secs"], None, None),
        (f"Kodi-like, {meta.get('big_file', 'big file')}", "s", "kodi_big",
         lambda d: d["secs"], None, None),
        ("open + first 64 KiB, cold (median)", "ms", "open64k", lambda d: d["ms"], "curl_max", 2.0),
        ("re-read, warm page cache", "MB/s", "reread", lambda d: d["mbps"], "abs", 5000.0),
        ("amplification, sequential", "x", "seq", amp, "abs_max", 1.1),
        ("amplification, 4 readers", "x", "par4", amp, None, None),
        ("amplification, random 64 KiB", "x", "rand64k", amp, "abs_max", 2.0),
        ("amplification, random 4 KiB", "x", "rand4k", amp, None, None),
        ("origin bytes during re-read", "MB", "reread", lambda d: d["origin_bytes"] / 1e6, None, None),
        ("peak RSS over all runs above", "MiB", "*rss", None, None, None),
        (f"peak RSS, {meta.get('readers', 64)} readers", "MiB", "readers64", mib,
         "abs_max", budget + 32.0),
        (f"throughput, {meta.get('readers', 64)} readers", "MB/s", "readers64",
         lambda d: d["mbps"], None, None),
        ("slowest single read, any phase", "ms", "*lat", None, None, None),
        ("CPU, sequential", "s", "seq", lambda d: d["cpu"], None, None),
        ("CPU, 4 readers", "s", "par4", lambda d: d["cpu"], None, None),
        ("CPU, random 64 KiB", "s/GB", "rand64k", cpu_per_gb, None, None),
        ("CPU, random 4 KiB", "s/GB", "rand4k", cpu_per_gb, None, None),
        ("CPU, Kodi-like movie", "s", "kodi_movie", lambda d: d["cpu"], None, None),
    ]

    err_phases = {(e["phase"], e["tool"]) for e in errors}
    rows = []
    for label, unit, phase, fn, kind, target in spec:
        row = {"phase": label, "unit": unit, "key": phase}
        for tool in TOOLS:
            if phase == "*lat":
                vs = [d["lat_max_ms"] for (p, t), rs in runs.items() if t == tool
                      for d in rs.values() if "lat_max_ms" in d]
                v = max(vs) if vs else None
            elif phase == "*rss":
                vs = [d["hwm_kib"] / 1024.0
                      for (p, t), rs in runs.items() if t == tool and p != "readers64"
                      for d in rs.values() if "hwm_kib" in d]
                v = max(vs) if vs else None
            else:
                vs = values(runs, phase, tool, fn)
                v = med(vs)
            row[tool] = v
            row[tool + "_runs"] = vs
        row["seamfs/curl"] = ratio(row["seamfs"], row["curl"])
        row["seamfs/rclone"] = ratio(row["seamfs"], row["rclone"])
        verdict, tdesc = "", ""
        if kind == "curl":
            tdesc, ok = f">= {target}x curl", row["seamfs/curl"]
            ok = None if ok is None else ok >= target
        elif kind == "curl_max":
            tdesc, ok = f"<= {target}x curl", row["seamfs/curl"]
            ok = None if ok is None else ok <= target
        elif kind == "rclone":
            tdesc, ok = f">= {target:g}x rclone", row["seamfs/rclone"]
            ok = None if ok is None else ok >= target
        elif kind == "abs":
            tdesc, ok = f">= {target:g} {unit}", row["seamfs"]
            ok = None if ok is None else ok >= target
        elif kind == "abs_max":
            tdesc, ok = f"<= {target:g} {unit}", row["seamfs"]
            ok = None if ok is None else ok <= target
        else:
            ok = None
        if kind:
            verdict = "n/a" if ok is None else ("PASS" if ok else "MISS")
            if (phase, "seamfs") in err_phases:
                verdict = "MISS (errors)"
        row["target"], row["verdict"] = tdesc, verdict
        rows.append(row)

    head = ["phase", "unit", "curl", "seamfs", "rclone", "seamfs/curl", "seamfs/rclone",
            "target", "result"]
    table = [head]
    for r in rows:
        table.append([r["phase"], r["unit"], fmt(r["curl"]), fmt(r["seamfs"]), fmt(r["rclone"]),
                      fmt(r["seamfs/curl"]), fmt(r["seamfs/rclone"]), r["target"], r["verdict"]])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = []
    for n, row in enumerate(table):
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:7], widths[2:7])]
        cells += [row[7].ljust(widths[7]), row[8]]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    text = "\n".join(lines)

    print()
    print(f"seamfs benchmark ({meta.get('mode', '?')}, median of {meta.get('runs', '?')} run(s); "
          f"{meta.get('big_file', '')}, 4 x {meta.get('part_bytes', 0) // 1048576} MiB, "
          f"movie {meta.get('movie_bytes', 0) / 1e6:.1f} MB; MB = 10^6 bytes)")
    print(text)
    print()
    if errors:
        print(f"ERRORS ({len(errors)}):")
        for e in errors:
            print(f"  {e['phase']} / {e['tool']} / run {e['run']}: {e['error']}")
    else:
        print("errors: none (every read through the mounts returned its bytes; "
              "sha256 of every file matched)")
    if log_problems:
        print(f"daemon log warnings/errors in {len(log_problems)} phase run(s):")
        for p in log_problems[:20]:
            first = (p["first"] or "").splitlines()[0:1]
            print(f"  {p['phase']} / {p['tool']} / run {p['run']}: {p['lines']} line(s) in {p['log']}"
                  + (f"\n      {first[0][:200]}" if first else ""))
    stalls = [{"phase": p, "tool": t, "run": r, "lat_max_ms": d["lat_max_ms"]}
              for (p, t), rs in sorted(runs.items()) for r, d in sorted(rs.items())
              if d.get("lat_max_ms", 0) >= 1000]
    if stalls:
        print(f"STALLS: single reads that took 1 s or more ({len(stalls)} phase run(s)):")
        for st in stalls:
            print(f"  {st['phase']} / {st['tool']} / run {st['run']}: slowest read "
                  f"{st['lat_max_ms'] / 1000:.2f} s")
    print(f"\nresults: {dest}")

    with open(dest, "w") as f:
        json.dump({"meta": meta, "table": text, "rows": rows, "errors": errors, "stalls": stalls,
                   "log_problems": log_problems, "raw": records}, f, indent=1)


if __name__ == "__main__":
    main()
