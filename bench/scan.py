#!/usr/bin/env python3
"""A library scan through seamfs against ffprobe over the HTTP URLs and
rclone's mount: what a Jellyfin or Kodi scan of a folder costs in time,
in requests and in origin bytes, the first time and after a remount.

    python3 bench/scan.py --seamfs build/seamfs [--files 200] [--runs 3]
                          [--delay-ms 25] [--work DIR] [--no-rclone]
                          [--film-minutes N]

Makes three clips with ffmpeg (lavfi testsrc2 + sine, 720p H.264 + AAC, 8 s
at 8 Mbit/s: a Matroska file, an MP4 with its index (moov) at the end, the
mp4 muxer's default, and an MP4 with -movflags +faststart), and --files
names for them in turn (symlinks in the origin's root: every name is an
asset of its own with its own cache). --film-minutes N adds a fourth kind,
an N-minute MP4 with its index at the end (128x72, 24 fps, H.264 with
B-frames + AAC: its moov grows with its length as a film's does, 4.95 MB
for 120 minutes, more than any cached tail); the targets are the three
clips'. seam-origin (next to --seamfs in
tests/server/, or --origin) serves them with --delay-ms, so every request
costs one round trip, and a listing of its root (--index) for rclone.
Each run, with `ffprobe -v error -show_format -show_streams` on each file
in turn:

  - seamfs, first scan: mounted afresh (empty state: nothing cached) on a
    catalog of every name;
  - seamfs, second scan: unmounted and mounted again on the same state
    directory (the heads and tails kept on disk, cache_dir);
  - ffprobe on each HTTP URL (ffprobe's own HTTP client), and on each
    file on local disk (the floor: ffprobe's own start and parsing);
  - rclone mount :http: with --vfs-cache-mode full (the peer that keeps
    data across restarts), first scan on an empty cache directory, second
    after a remount on the same one; the directory is listed before each
    scan, outside the figures.

For each: the time, its ratio to ffprobe over HTTP, and the origin's
requests and bytes per file (its log). Targets (issue 31): first scan at
most 1.1 requests and 1.5 MiB per file and at most 1.0 x HTTP; second scan
0 requests and at most 0.3 x. Prints medians over the runs. Exit 0 whether
the targets are met or not; 1 when a probe failed or the harness broke.
Standard library only; every wait is bounded and everything started is
stopped by its own PID.
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
from mountlib import any_mounted, daemon_env, fs_mounted, say, stop, unmount  # noqa: E402

KIB = 1 << 10
MIB = 1 << 20
PROBE_CAP = 60            # seconds one ffprobe may take
KINDS = (('mkv', []), ('mp4', []), ('fast.mp4', ['-movflags', '+faststart']))


CLIP = {'seconds': 8, 'size': '1280x720', 'rate': 25, 'preset': 'ultrafast', 'video': '8M',
        'audio': '96k'}


def film(minutes):
    """The --film-minutes kind: small frames, a film's sample count."""
    return ('film.mp4', [], {'seconds': 60 * minutes, 'size': '128x72', 'rate': 24,
                             'preset': 'veryfast', 'video': '100k', 'audio': '32k'})


def make_clip(path, extra, c=CLIP):
    src = f"testsrc2=size={c['size']}:rate={c['rate']}:duration={c['seconds']}"
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-f', 'lavfi', '-i', src,
           '-f', 'lavfi', '-i', f"sine=frequency=440:sample_rate=48000:duration={c['seconds']}",
           '-c:v', 'libx264', '-preset', c['preset'], '-b:v', c['video'], '-pix_fmt', 'yuv420p',
           '-c:a', 'aac', '-b:a', c['audio'], '-shortest'] + extra + [str(path)]
    subprocess.run(cmd, check=True, timeout=max(300, c['seconds']), capture_output=True)


def start_origin(binary, root, delay_ms, work):
    port_file = work / 'origin.port'
    port_file.unlink(missing_ok=True)
    err = open(work / 'origin.stderr', 'wb')
    p = subprocess.Popen([binary, '--root', str(root), '--delay-ms', str(delay_ms), '--index',
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


def origin_cost(port, names):
    """The origin's log since the last clear: (requests, bytes by name).
    Not counted: listings, and seamfs's liveness probes (one byte of some
    file every liveness_interval, whatever the scan does)."""
    reqs = [r for r in json.loads(ctl(port, 'log'))['requests'] if r['method'] == 'GET' and
            not r['path'].endswith('/') and r['range'] != 'bytes=0-0']
    per = {n: 0 for n in names}
    for r in reqs:
        per[r['path'].lstrip('/')] = per.get(r['path'].lstrip('/'), 0) + r['bytes_sent']
    return len(reqs), per


def mounted(mnt, tool):
    if tool == 'seamfs':
        return fs_mounted(mnt)
    with open('/proc/mounts') as f:
        return any(ln.split()[1] == mnt and ln.split()[2] == 'fuse.rclone' for ln in f)


def scan_mount(tool, argv, mnt, log_path, port, names):
    """Mounts with argv, lists the mount (outside the figures), probes every
    name, unmounts: a row of the figures."""
    log = open(log_path, 'wb')
    dm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                          env=daemon_env())
    log.close()
    status = None
    try:
        deadline = time.monotonic() + 30
        while not mounted(str(mnt), tool):
            if dm.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'{tool} did not mount (log {log_path})')
            time.sleep(0.05)
        listed = set(os.listdir(mnt))
        if not set(names) <= listed:
            raise RuntimeError(f'{tool}: {len(set(names) - listed)} files missing in {mnt}')
        for n in names:
            os.stat(mnt / n)
        ctl(port, 'clear')
        secs, by_kind, bad = probe_all([str(mnt / n) for n in names])
        nreq, per = origin_cost(port, names)
        if tool == 'seamfs':
            status = json.loads((mnt / '.seamfs' / 'status.json').read_text())['reads']
    finally:
        unmount(str(mnt))
        stop(dm)
    return {'s': secs, 'by_kind': by_kind, 'requests': nreq, 'bytes': per, 'status': status}, bad


def make_names(www, files, kinds):
    for kind, extra, *c in kinds:
        base = www / f'base.{kind}'
        if c and base.exists() and base.with_suffix('.made').read_text() != repr(c[0]):
            base.unlink()  # made for another --film-minutes
        if not base.exists():
            say(f'making {base.name}')
            make_clip(base, extra, *c)
            if c:
                base.with_suffix('.made').write_text(repr(c[0]))
    names = []
    for i in range(files):
        kind = kinds[i % len(kinds)][0]
        name = f'show-{i:03d}.{kind}'
        link = www / name
        if not link.is_symlink():
            link.symlink_to(f'base.{kind}')
        names.append(name)
    return names


def one_run(a, run, work, names, port, base_url, catalog, seamfs):
    """The five scans of a run: {name: row}, failed probes."""
    mnt, state, rcache = work / 'mnt', work / 'state', work / 'rclone-cache'
    rows, fails = {}, []
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir()
    for label in ('seamfs first', 'seamfs second'):
        say(f'run {run}: {label} scan of {a.files} files')
        rows[label], bad = scan_mount(
            'seamfs', [seamfs, '-f', '-o', f'state_dir={state}', str(catalog), str(mnt)], mnt,
            work / f'{label.replace(" ", "-")}-{run}.log', port, names)
        fails += bad
    say(f'run {run}: ffprobe over HTTP')
    ctl(port, 'clear')
    t_http, k_http, bad = probe_all([f'{base_url}/{n}' for n in names])
    fails += bad
    nreq, per = origin_cost(port, names)
    rows['HTTP'] = {'s': t_http, 'by_kind': k_http, 'requests': nreq, 'bytes': per}
    # the floor: ffprobe of the origin's own files on local disk, what no
    # mount can beat (ffprobe's start and its parsing)
    t_local, k_local, bad = probe_all([str(work / 'www' / n) for n in names])
    fails += bad
    rows['local files'] = {'s': t_local, 'by_kind': k_local, 'requests': 0,
                           'bytes': {n: 0 for n in names}}
    if a.rclone:
        shutil.rmtree(rcache, ignore_errors=True)
        conf = work / 'rclone.conf'
        conf.write_text('')
        for label in ('rclone first', 'rclone second'):
            say(f'run {run}: {label} scan of {a.files} files')
            rows[label], bad = scan_mount(
                'rclone', ['rclone', 'mount', ':http:', str(mnt), '--http-url', base_url + '/',
                           '--vfs-cache-mode', 'full', '--cache-dir', str(rcache), '--read-only',
                           '--config', str(conf)], mnt,
                work / f'{label.replace(" ", "-")}-{run}.log', port, names)
            fails += bad
    return rows, fails


def report(a, runs):
    """Prints the medians over the runs."""
    labels = [k for k in runs[0]]

    def med(label, f):
        return statistics.median(f(r[label]) for r in runs)

    http_s = med('HTTP', lambda x: x['s'])
    film_kind = f', a {a.film_minutes}-minute MP4' if a.film_minutes else ''
    print(f'\nffprobe scan of {a.files} files (Matroska, MP4 index at the end, MP4 '
          f'faststart{film_kind}), origin {a.delay_ms} ms away; medians of {len(runs)} run(s)')
    print(f"{'scan':16} {'time s':>8} {'x HTTP':>8} {'req/file':>9} {'MiB/file':>9} "
          f"{'MiB/file max':>13}")
    for label in labels:
        t = med(label, lambda x: x['s'])
        rq = med(label, lambda x: x['requests']) / a.files
        mib = med(label, lambda x: sum(x['bytes'].values())) / a.files / MIB
        mx = med(label, lambda x: max(x['bytes'].values())) / MIB
        print(f'{label:16} {t:8.2f} {t / http_s:8.3f} {rq:9.2f} {mib:9.2f} {mx:13.2f}')
    first, second = runs[0]['seamfs first'], runs[0]['seamfs second']
    targets = [
        ('first scan, requests per file <= 1.1',
         med('seamfs first', lambda x: x['requests']) / a.files <= 1.1),
        ('first scan, MiB per file <= 1.5',
         med('seamfs first', lambda x: sum(x['bytes'].values())) / a.files / MIB <= 1.5),
        ('first scan <= 1.0 x HTTP', med('seamfs first', lambda x: x['s']) <= http_s),
        ('second scan, 0 requests', med('seamfs second', lambda x: x['requests']) == 0),
        ('second scan <= 0.3 x HTTP', med('seamfs second', lambda x: x['s']) <= 0.3 * http_s),
    ]
    if a.film_minutes:
        print('(targets: for the three clips alone; with films the figures are not theirs)')
    for what, ok in targets:
        print(f"{'target: ' + what:48} {'PASS' if ok else 'MISS'}")
    for kind, *_ in a.kinds:
        fs_ms = statistics.median(1000 * statistics.median(r['seamfs first']['by_kind'][kind])
                                  for r in runs)
        http_ms = statistics.median(1000 * statistics.median(r['HTTP']['by_kind'][kind])
                                    for r in runs)
        print(f"{'one ' + kind + ' file, first scan, median ms':48} {fs_ms:6.0f} against "
              f"{http_ms:4.0f} over HTTP ({fs_ms / http_ms:.2f} x)")
    for label, row in (('first', first), ('second', second)):
        st = row['status']
        print(f"seamfs {label} scan's status: scans {st['scans']}, scan_requests "
              f"{st['scan_requests']}, head_tail_multipart {st['head_tail_multipart']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seamfs', required=True)
    ap.add_argument('--origin')
    ap.add_argument('--files', type=int, default=200)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--delay-ms', type=int, default=25)
    ap.add_argument('--work')
    ap.add_argument('--no-rclone', dest='rclone', action='store_false')
    ap.add_argument('--film-minutes', type=int, default=0)
    a = ap.parse_args()
    if not 0 <= a.film_minutes <= 300:
        sys.exit(f'scan.py: --film-minutes {a.film_minutes}: 0 to 300')
    a.kinds = KINDS + ((film(a.film_minutes),) if a.film_minutes else ())
    seamfs = os.path.abspath(a.seamfs)
    origin_bin = a.origin or os.path.join(os.path.dirname(seamfs), 'tests', 'server',
                                          'seam-origin')
    for need in (seamfs, origin_bin):
        if not os.access(need, os.X_OK):
            sys.exit(f'scan.py: {need} is not an executable (build with -Dtests=true?)')
    if a.rclone and not shutil.which('rclone'):
        sys.exit('scan.py: rclone is not installed (or pass --no-rclone)')
    work = Path(a.work or tempfile.mkdtemp(prefix='seamfs-scan-'))
    www = work / 'www'
    for d in (www, work / 'mnt'):
        d.mkdir(parents=True, exist_ok=True)
    names = make_names(www, a.files, a.kinds)
    size = {n: os.path.getsize(www / n) for n in names}

    proc, port = start_origin(origin_bin, www, a.delay_ms, work)
    base_url = f'http://127.0.0.1:{port}'
    catalog = work / 'catalog.json'
    catalog.write_text(json.dumps({'assets': [
        {'id': n.replace('.', '-'), 'path': n, 'size': size[n], 'mtime': 1700000000,
         'sources': [{'url': f'{base_url}/{n}'}]} for n in names]}))
    fails, runs = [], []
    try:
        for run in range(1, a.runs + 1):
            rows, bad = one_run(a, run, work, names, port, base_url, catalog, seamfs)
            runs.append(rows)
            fails += bad
    finally:
        if any_mounted(str(work / 'mnt')):
            unmount(str(work / 'mnt'))
        stop(proc)
    (work / 'scan.json').write_text(json.dumps(runs, indent=1))
    report(a, runs)
    if fails:
        print('\nfailed probes:\n  ' + '\n  '.join(fails[:10]))
        return 1
    print(f'\nresults: {work}/scan.json')
    return 0


if __name__ == '__main__':
    sys.exit(main())
