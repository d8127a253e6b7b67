#!/usr/bin/env python3
"""A library scan through seamfs against ffprobe over the HTTP URLs: what a
Jellyfin or Kodi scan of a folder costs in time and in origin bytes.

    python3 bench/scan.py --seamfs build/seamfs [--files 200] [--runs 3]
                          [--delay-ms 25] [--work DIR]

Makes three clips with ffmpeg (lavfi testsrc2 + sine, 720p H.264 + AAC, 8 s
at 8 Mbit/s: a Matroska file, an MP4 with its index (moov) at the end, the
mp4 muxer's default, and an MP4 with -movflags +faststart), and --files
names for them in turn (symlinks in the origin's root: every name is an
asset of its own with its own cache). seam-origin (next to --seamfs in
tests/server/, or --origin) serves them with --delay-ms, so every request
costs one round trip. Each run:

  - mounts seamfs afresh (empty state: nothing cached) on a catalog of every
    name, runs `ffprobe -v error -show_format -show_streams` on each file in
    turn, and takes the origin's log: bytes sent per file;
  - runs the same ffprobe on each HTTP URL in turn (ffprobe's own HTTP
    client, which issues its range requests itself).

Prints the medians, the ratio (seamfs / HTTP; target <= 1.0) and the origin
bytes per file through seamfs against head_size + tail_size + 512 KiB
(target: every file within). Exit 0 whether the targets are met or not; 1
when a probe failed or the harness broke. Standard library only; every wait
is bounded and everything started is stopped by its own PID.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mountlib import daemon_env, fs_mounted, say, stop, unmount  # noqa: E402

KIB = 1 << 10
MIB = 1 << 20
HEAD = 2 * MIB            # head_size's default
TAIL = 1 * MIB            # tail_size's default
SLACK = 512 * KIB         # the bound: head + tail + 512 KiB a file
PROBE_CAP = 60            # seconds one ffprobe may take
KINDS = (('mkv', []), ('mp4', []), ('fast.mp4', ['-movflags', '+faststart']))


def make_clip(path, extra):
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-f', 'lavfi', '-i', 'testsrc2=size=1280x720:rate=25:duration=8',
           '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=8',
           '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '8M', '-pix_fmt', 'yuv420p',
           '-c:a', 'aac', '-b:a', '96k', '-shortest'] + extra + [str(path)]
    subprocess.run(cmd, check=True, timeout=300, capture_output=True)


def start_origin(binary, root, delay_ms, work):
    port_file = work / 'origin.port'
    port_file.unlink(missing_ok=True)
    err = open(work / 'origin.stderr', 'wb')
    p = subprocess.Popen([binary, '--root', str(root), '--delay-ms', str(delay_ms),
                          '--log-max', '1000000', '--port-file', str(port_file)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    err.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().endswith('\n'):
            return p, int(port_file.read_text())
        if p.poll() is not None:
            break
        time.sleep(0.05)
    stop(p)
    raise RuntimeError('seam-origin did not start: ' + (work / 'origin.stderr').read_text())


def ctl(port, what):
    out = subprocess.run(['curl', '-s', '--noproxy', '*', '--max-time', '10',
                          f'http://127.0.0.1:{port}/_ctl/{what}'],
                         capture_output=True, timeout=20, env=daemon_env())
    if out.returncode:
        raise RuntimeError(f'seam-origin /_ctl/{what}: curl exit {out.returncode}')
    return out.stdout


def kind_of(target):
    return os.path.basename(target).split('.', 1)[1]


def probe_all(targets):
    """ffprobe each target in turn: (seconds in all, seconds by kind of
    file, failures)."""
    bad, by_kind = [], {}
    t0 = time.monotonic()
    for t in targets:
        t1 = time.monotonic()
        r = subprocess.run(['ffprobe', '-v', 'error', '-show_format', '-show_streams', t],
                           capture_output=True, timeout=PROBE_CAP, env=daemon_env())
        by_kind.setdefault(kind_of(t), []).append(time.monotonic() - t1)
        if r.returncode or b'codec_name=h264' not in r.stdout:
            bad.append(f'{t}: exit {r.returncode}: {r.stderr.decode(errors="replace")[-200:]}')
    return time.monotonic() - t0, by_kind, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seamfs', required=True)
    ap.add_argument('--origin')
    ap.add_argument('--files', type=int, default=200)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--delay-ms', type=int, default=25)
    ap.add_argument('--work')
    a = ap.parse_args()
    seamfs = os.path.abspath(a.seamfs)
    origin_bin = a.origin or os.path.join(os.path.dirname(seamfs), 'tests', 'server',
                                          'seam-origin')
    for need in (seamfs, origin_bin):
        if not os.access(need, os.X_OK):
            sys.exit(f'scan.py: {need} is not an executable (build with -Dtests=true?)')
    work = Path(a.work or tempfile.mkdtemp(prefix='seamfs-scan-'))
    www, mnt, state = work / 'www', work / 'mnt', work / 'state'
    for d in (www, mnt):
        d.mkdir(parents=True, exist_ok=True)
    for kind, extra in KINDS:
        base = www / f'base.{kind}'
        if not base.exists():
            say(f'making {base.name}')
            make_clip(base, extra)
    names = []
    for i in range(a.files):
        kind = KINDS[i % len(KINDS)][0]
        name = f'show-{i:03d}.{kind}'
        link = www / name
        if not link.is_symlink():
            link.symlink_to(f'base.{kind}')
        names.append(name)
    size = {n: os.path.getsize(www / n) for n in names}

    proc, port = start_origin(origin_bin, www, a.delay_ms, work)
    base_url = f'http://127.0.0.1:{port}'
    catalog = work / 'catalog.json'
    catalog.write_text(json.dumps({'assets': [
        {'id': n.replace('.', '-'), 'path': n, 'size': size[n], 'mtime': 1700000000,
         'sources': [{'url': f'{base_url}/{n}'}]} for n in names]}))
    fails, rows = [], []
    try:
        for run in range(1, a.runs + 1):
            shutil.rmtree(state, ignore_errors=True)
            state.mkdir()
            say(f'run {run}: ffprobe of {a.files} files through seamfs')
            log = open(work / f'seamfs-{run}.log', 'wb')
            dm = subprocess.Popen([seamfs, '-f', '-o', f'state_dir={state}', str(catalog),
                                   str(mnt)], stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, env=daemon_env())
            log.close()
            try:
                deadline = time.monotonic() + 30
                while not fs_mounted(str(mnt)):
                    if dm.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f'seamfs did not mount (log {work}/seamfs-{run}.log)')
                    time.sleep(0.05)
                ctl(port, 'clear')
                t_fs, k_fs, bad = probe_all([str(mnt / n) for n in names])
                fails += bad
                reqs = json.loads(ctl(port, 'log'))['requests']
                st = json.loads((mnt / '.seamfs' / 'status.json').read_text())
                scans = st['reads']['scans_from_cache']
            finally:
                unmount(str(mnt))
                stop(dm)
            per = {}
            for r in reqs:
                per[r['path'].lstrip('/')] = per.get(r['path'].lstrip('/'), 0) + r['bytes_sent']
            over = sorted(n for n in names if per.get(n, 0) > HEAD + TAIL + SLACK)
            say(f'run {run}: ffprobe over HTTP')
            ctl(port, 'clear')
            t_http, k_http, bad = probe_all([f'{base_url}/{n}' for n in names])
            fails += bad
            http_reqs = len(json.loads(ctl(port, 'log'))['requests'])
            rows.append({'run': run, 'seamfs_s': t_fs, 'http_s': t_http,
                         'by_kind_ms': {k: [1000 * statistics.median(k_fs[k]),
                                            1000 * statistics.median(k_http[k])]
                                        for k in k_fs},
                         'seamfs_requests': len(reqs), 'http_requests': http_reqs,
                         'bytes_max': max(per.values()) if per else 0,
                         'bytes_median': statistics.median(per.values()) if per else 0,
                         'over_bound': over, 'scans_from_cache': scans})
    finally:
        stop(proc)
    (work / 'scan.json').write_text(json.dumps(rows, indent=1))
    med = {k: statistics.median(r[k] for r in rows)
           for k in ('seamfs_s', 'http_s', 'seamfs_requests', 'http_requests',
                     'bytes_max', 'bytes_median', 'scans_from_cache')}
    ratio = med['seamfs_s'] / med['http_s'] if med['http_s'] else float('inf')
    bound = HEAD + TAIL + SLACK
    over = sorted({n for r in rows for n in r['over_bound']})
    print(f'\nffprobe scan of {a.files} files (Matroska, MP4 index at the end, MP4 '
          f'faststart), origin {a.delay_ms} ms away; medians of {len(rows)} run(s)')
    print(f"{'measure':38} {'seamfs':>10} {'HTTP':>10} {'ratio':>8} {'target':>9} result")
    print(f"{'scan time, s':38} {med['seamfs_s']:10.2f} {med['http_s']:10.2f} {ratio:8.3f} "
          f"{'<= 1.0':>9} {'PASS' if ratio <= 1.0 else 'MISS'}")
    for kind, _ in KINDS:
        fs_ms = statistics.median(r['by_kind_ms'][kind][0] for r in rows)
        http_ms = statistics.median(r['by_kind_ms'][kind][1] for r in rows)
        print(f"{'  one ' + kind + ' file, median ms':38} {fs_ms:10.0f} {http_ms:10.0f} "
              f"{fs_ms / http_ms:8.2f}")
    print(f"{'origin requests':38} {med['seamfs_requests']:10.0f} {med['http_requests']:10.0f}")
    print(f"{'origin bytes per file, max (KiB)':38} {med['bytes_max'] / KIB:10.0f} {'':10} "
          f"{'':8} {'<= ' + str(bound // KIB):>9} {'PASS' if not over else 'MISS'}")
    print(f"{'origin bytes per file, median (KiB)':38} {med['bytes_median'] / KIB:10.0f}")
    print(f"{'scans served from the cache (status)':38} {med['scans_from_cache']:10.0f}")
    if over:
        print('over the bound: ' + ', '.join(over[:10]))
    if fails:
        print('\nfailed probes:\n  ' + '\n  '.join(fails[:10]))
        return 1
    print(f'\nresults: {work}/scan.json')
    return 0


if __name__ == '__main__':
    sys.exit(main())
