#!/usr/bin/env python3
"""A player's seek into a transcode: how long mpv takes to show its first
frame, cold and warm, against ffmpeg's own time to encode those 2 s.

    python3 bench/tc_seek.py --seamfs build/seamfs [--runs 5]
        [--heights 360,720] [--starts 50%,10%,0]

Makes a clip (ffmpeg lavfi testsrc2 + sine; 120 s at 1280x720 unless
--seconds/--size say otherwise), serves it with a private nginx on
127.0.0.1, and for each height, start and run mounts the daemon afresh on
an empty work directory (cold: nothing of the transcode exists yet), then
runs

    mpv --no-config --vo=null --ao=null --start=START --frames=1 --msg-time -v FILE

on the transcode (HEIGHT p, segments of --segment-seconds, the video
bitrate of BITRATES below unless --video-bitrate), then the same mpv again
on the same mount (warm: the segments the first one read are written). The
first frame's time is mpv's own clock (--msg-time, from mpv's start) at
the log line "first video frame after restart shown". The anchor is
ffmpeg's own time (wall, process start to exit, median of --runs) to
encode 2 s at the same offset from the source file on local disk with the
writer's profile (libx264 veryfast, no B-frames, GOP of one segment, the
same bitrate and VBV, AAC 64 kbit/s, to MPEG-TS). Per cold run it prints
the main writer's starts, its kills for a seek, the probe runs and the
transcode row of status.json. Standard library only; every wait is bounded
and everything started is stopped by its own PID.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mountlib import daemon_env, fs_mounted, say, stop, unmount  # noqa: E402

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    types {{ }}
    default_type application/octet-stream;
    server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
"""

PROFILE = {'audio_bitrate': 64000, 'segment_seconds': 2}
BITRATES = {180: 300000, 360: 800000, 720: 3000000}


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_clip(path, seconds, size):
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-f', 'lavfi', '-i', f'testsrc2=size={size}:rate=25:duration={seconds}',
           '-f', 'lavfi', '-i', f'sine=frequency=440:sample_rate=48000:duration={seconds}',
           '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '50',
           '-c:a', 'aac', '-b:a', '96k', '-shortest', str(path)]
    subprocess.run(cmd, check=True, timeout=300)


def start_nginx(root, d):
    (d / 'tmp').mkdir(parents=True, exist_ok=True)
    port = free_port()
    user = 'user root root;' if os.geteuid() == 0 else ''
    (d / 'nginx.conf').write_text(NGINX_CONF.format(dir=d, root=root, port=port, user=user))
    p = subprocess.Popen(['nginx', '-p', str(d), '-c', str(d / 'nginx.conf'),
                          '-e', str(d / 'error.log')], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close()
            return p, port
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    stop(p)
    raise SystemExit('nginx did not start: ' + (d / 'error.log').read_text(errors='replace'))


def mount(seamfs, cat, mnt, work, state, log, extra):
    opts = [f'state_dir={state}', f'work_dir={work}', 'read_timeout=30'] + extra
    err = open(log, 'wb')
    p = subprocess.Popen([seamfs, '-f', '-o', ','.join(opts), str(cat), str(mnt)],
                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=daemon_env())
    err.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if fs_mounted(str(mnt)):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    stop(p)
    raise SystemExit(f'seamfs did not mount: {Path(log).read_text(errors="replace")[-2000:]}')


def run_mpv(path, start, timeout):
    argv = ['mpv', '--no-config', '--vo=null', '--ao=null', f'--start={start}', '--frames=1',
            '--msg-time', '--msg-level=all=v', str(path)]
    t0 = time.monotonic()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    wall = time.monotonic() - t0
    out = (r.stdout + r.stderr).decode(errors='replace')
    m = re.search(r'\[\s*([0-9.]+)\] \[cplayer\] first video frame after restart shown', out)
    pos = re.search(r'playback restart complete @ ([0-9.]+)', out)
    return {'first_frame_s': float(m.group(1)) if m else None, 'exit_s': round(wall, 3),
            'rc': r.returncode, 'at_s': float(pos.group(1)) if pos else None}


def counts(log_text, status):
    row = (status.get('transcodes') or [{}])[0]
    return {
        'main_starts': len(re.findall(r'writer pid \d+ started: asset', log_text)),
        'probe_runs': len(re.findall(r'probe pid \d+ for asset \S+ started', log_text)),
        'probes_cancelled': len(re.findall(r'probe pid \d+ of asset \S+ cancelled', log_text)),
        'main_killed_for_seek': log_text.count('restarting it there'),
        'recoveries': row.get('recoveries'),
        'seeks': row.get('seeks'),
    }


def offset_s(start, seconds):
    if start.endswith('%'):
        return seconds * float(start[:-1]) / 100.0
    return float(start)


def anchor(clip, off, height, vbps, runs):
    """ffmpeg's wall time to encode 2 s at off with the writer's profile."""
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-ss', f'{off:.3f}', '-i', str(clip), '-t', '2', '-vf', f'scale=-2:{height}',
           '-c:v', 'libx264', '-preset', 'veryfast', '-b:v', str(vbps), '-maxrate', str(vbps),
           '-bufsize', str(vbps // 2), '-bf', '0', '-g', str(PROFILE['segment_seconds'] * 25),
           '-forced-idr', '1', '-x264-params', 'scenecut=0:open-gop=0',
           '-c:a', 'aac', '-b:a', str(PROFILE['audio_bitrate']), '-ar', '48000',
           '-f', 'mpegts', os.devnull]
    t = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, timeout=120)
        t.append(time.monotonic() - t0)
    return round(statistics.median(t), 3)


def write_catalog(cat, port, height, vbps):
    cat.write_text(json.dumps({'assets': [
        {'id': 'clip', 'path': 'clip.mkv',
         'sources': [{'url': f'http://127.0.0.1:{port}/clip.mkv'}]},
        {'id': 'clip-t', 'path': 'clip.ts',
         'transcode': dict(PROFILE, of='clip', height=height, video_bitrate=vbps)}]}))


def one_run(a, seamfs, cat, run, start):
    mnt = run / 'mnt'
    mnt.mkdir(parents=True)
    log = run / 'seamfs.log'
    p = mount(seamfs, cat, mnt, run / 'work', run / 'state', log, a.options)
    try:
        r = run_mpv(mnt / 'clip.ts', start, 120)
        time.sleep(a.linger)
        w = run_mpv(mnt / 'clip.ts', start, 120)
        with open(mnt / '.seamfs' / 'status.json') as f:
            status = json.load(f)
    finally:
        unmount(str(mnt))
        stop(p, 15)
    r['warm_first_frame_s'] = w['first_frame_s']
    r.update(counts(log.read_text(errors='replace'), status))
    if not a.keep:
        shutil.rmtree(run, ignore_errors=True)
    return r


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def case(a, seamfs, tmp, port, clip, height, start):
    vbps = a.video_bitrate or BITRATES.get(height, height * 4000)
    cat = tmp / f'catalog-{height}.json'
    write_catalog(cat, port, height, vbps)
    off = offset_s(start, a.seconds)
    anc = anchor(clip, off, height, vbps, a.runs)
    rs = []
    for i in range(a.runs):
        r = one_run(a, seamfs, cat, tmp / f'run-{height}-{start}-{i}', start)
        rs.append(r)
        say(f'{height}p --start={start} run {i + 1}: ' + json.dumps(r))
    cold = median(r['first_frame_s'] for r in rs)
    warm = median(r['warm_first_frame_s'] for r in rs)
    return {'height': height, 'start': start, 'offset_s': off, 'anchor_s': anc,
            'cold_s': cold, 'cold_range_s': [min((r['first_frame_s'] or 0) for r in rs),
                                             max((r['first_frame_s'] or 0) for r in rs)],
            'warm_s': warm,
            'cold_x_anchor': round(cold / anc, 2) if cold else None,
            'probe_runs_median': statistics.median(r['probe_runs'] for r in rs),
            'main_starts_median': statistics.median(r['main_starts'] for r in rs),
            'failed': sum(1 for r in rs if r['first_frame_s'] is None
                          or r['warm_first_frame_s'] is None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seamfs', required=True, help='the seamfs binary (seamfs-writer beside it)')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--starts', default='50%,10%,0',
                    help='mpv --start values, comma-separated (N%% or seconds)')
    ap.add_argument('--heights', default='360,720', help='profile heights, comma-separated')
    ap.add_argument('--seconds', type=int, default=120, help='length of the clip')
    ap.add_argument('--segment-seconds', type=int, default=1,
                    help='the profile\'s segment_seconds (the catalog\'s default: 1)')
    ap.add_argument('--linger', type=float, default=1, help='seconds between cold and warm')
    ap.add_argument('--clip', help='reuse this clip (made there if missing)')
    ap.add_argument('--size', default='1280x720', help='the clip\'s picture size')
    ap.add_argument('--video-bitrate', type=int, default=0,
                    help='profile video bitrate (default: BITRATES by height)')
    ap.add_argument('-o', dest='options', action='append', default=[],
                    help='extra mount option (name=value), repeatable')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    a = ap.parse_args()
    PROFILE['segment_seconds'] = a.segment_seconds
    seamfs = os.path.abspath(a.seamfs)
    heights = [int(h) for h in a.heights.split(',')]
    starts = a.starts.split(',')
    for st in starts:
        try:
            offset_s(st, a.seconds)
        except ValueError:
            raise SystemExit(f'--starts: bad value {st!r} (want N% or seconds)')
    tmp = Path(tempfile.mkdtemp(prefix='tc-seek-'))
    media = tmp / 'media'
    media.mkdir()
    clip = media / 'clip.mkv'
    if a.clip:
        if not os.path.exists(a.clip):
            say(f'making a {a.seconds} s clip at {a.clip}')
            make_clip(a.clip, a.seconds, a.size)
        shutil.copyfile(a.clip, clip)
    else:
        say(f'making a {a.seconds} s {a.size} clip')
        make_clip(clip, a.seconds, a.size)
    ng, port = start_nginx(media, tmp / 'nginx')
    rows = []
    try:
        for h in heights:
            for st in starts:
                rows.append(case(a, seamfs, tmp, port, clip, h, st))
    finally:
        stop(ng)
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f'kept {tmp}')
    print(f'load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, runs {a.runs}')
    print(f'{"height":>6} {"start":>6} {"anchor":>7} {"cold":>7} {"range":>13} '
          f'{"x anchor":>8} {"warm":>6} {"probes":>6} {"mains":>5}')
    for r in rows:
        rg = '%.2f-%.2f' % tuple(r['cold_range_s'])
        print(f'{r["height"]:>6} {r["start"]:>6} {r["anchor_s"]:>7.2f} '
              f'{(r["cold_s"] or -1):>7.2f} {rg:>13} {(r["cold_x_anchor"] or -1):>8.2f} '
              f'{(r["warm_s"] or -1):>6.2f} {r["probe_runs_median"]:>6} '
              f'{r["main_starts_median"]:>5}')
    print(json.dumps(rows))
    return 0 if not any(r['failed'] for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
