#!/usr/bin/env python3
"""A player's seek into a transcode that is not written yet: how long mpv
takes to show its first frame, and what the writers did meanwhile.

    python3 bench/tc_seek.py --seamfs build/seamfs [--runs 5] [--start 120]

Makes a 3-minute clip (ffmpeg lavfi testsrc2 + sine, 320x240 unless --size,
as the tests' make_clip), serves it with a private nginx on 127.0.0.1, and for
each run
mounts the daemon afresh on an empty work directory (so nothing of the
transcode exists yet), then runs

    mpv --no-config --vo=null --ao=null --start=120 --frames=1 --msg-time -v FILE

on the transcode (180p, 300 kbit/s, 2 s segments: the tests' profile, unless
--height and --video-bitrate say otherwise). The
first frame's time is mpv's own clock at "first video frame after restart
shown"; the exit time is when mpv's process was gone. After mpv exits the
mount stays up for --linger seconds, so that reads a player left behind
show in the counts. Per run it prints the main writer's starts, its kills
for a seek ("restarting it there"), the probe runs, and the transcode row
of status.json (recoveries, seeks: absent before seeks were counted). Standard library only;
every wait is bounded and everything started is stopped by its own PID.
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

PROFILE = {'height': 180, 'video_bitrate': 300000, 'audio_bitrate': 64000,
           'segment_seconds': 2}


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
        'main_killed_for_seek': log_text.count('restarting it there'),
        'recoveries': row.get('recoveries'),
        'seeks': row.get('seeks'),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seamfs', required=True, help='the seamfs binary (seamfs-writer beside it)')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--start', type=float, default=120)
    ap.add_argument('--seconds', type=int, default=180, help='length of the clip')
    ap.add_argument('--linger', type=float, default=6, help='seconds to watch after mpv exits')
    ap.add_argument('--clip', help='reuse this clip (made there if missing)')
    ap.add_argument('--size', default='320x240', help='the clip\'s picture size')
    ap.add_argument('--height', type=int, default=PROFILE['height'], help='profile height')
    ap.add_argument('--video-bitrate', type=int, default=PROFILE['video_bitrate'])
    ap.add_argument('-o', dest='options', action='append', default=[],
                    help='extra mount option (name=value), repeatable')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    a = ap.parse_args()
    seamfs = os.path.abspath(a.seamfs)
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
        say(f'making a {a.seconds} s clip')
        make_clip(clip, a.seconds, a.size)
    ng, port = start_nginx(media, tmp / 'nginx')
    cat = tmp / 'catalog.json'
    cat.write_text(json.dumps({'assets': [
        {'id': 'clip', 'path': 'clip.mkv',
         'sources': [{'url': f'http://127.0.0.1:{port}/clip.mkv'}]},
        {'id': 'clip-t', 'path': 'clip.ts',
         'transcode': dict(PROFILE, of='clip', height=a.height,
                           video_bitrate=a.video_bitrate)}]}))
    results = []
    try:
        for i in range(a.runs):
            run = tmp / f'run{i}'
            mnt = run / 'mnt'
            mnt.mkdir(parents=True)
            log = run / 'seamfs.log'
            p = mount(seamfs, cat, mnt, run / 'work', run / 'state', log, a.options)
            try:
                r = run_mpv(mnt / 'clip.ts', a.start, 120)
                time.sleep(a.linger)
                with open(mnt / '.seamfs' / 'status.json') as f:
                    status = json.load(f)
            finally:
                unmount(str(mnt))
                stop(p, 15)
            r.update(counts(log.read_text(errors='replace'), status))
            results.append(r)
            say(f'run {i + 1}: ' + json.dumps(r))
    finally:
        stop(ng)
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f'kept {tmp}')
    ff = [r['first_frame_s'] for r in results if r['first_frame_s'] is not None]
    summary = {
        'runs': len(results),
        'first_frame_median_s': round(statistics.median(ff), 3) if ff else None,
        'first_frame_s': ff,
        'exit_median_s': round(statistics.median(r['exit_s'] for r in results), 3),
        'main_starts_median': statistics.median(r['main_starts'] for r in results),
        'main_killed_for_seek_median': statistics.median(
            r['main_killed_for_seek'] for r in results),
        'probe_runs_median': statistics.median(r['probe_runs'] for r in results),
        'recoveries': [r['recoveries'] for r in results],
        'seeks': [r['seeks'] for r in results],
    }
    print(json.dumps(summary, indent=1))
    return 0 if len(ff) == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
