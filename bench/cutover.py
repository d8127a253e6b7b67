#!/usr/bin/python3
"""Cutover benchmark helper (bench/cutover.sh runs it; see bench/README.md).

The longest gap a reader sees between two consecutive reads when the active
source fails mid-read and seamfs cuts over in place to a verified standby.
Two seam-origins (tests/server/seam-origin) on 127.0.0.1 serve the same
random file; a catalog lists it with one source on each (providers p1, p2).
Every round is a fresh mount (new daemon, new state dir, empty page cache for
the mount), so the session always starts on p1 and every round is alike:

  1. open the file, read its first MiB (served from the cached head), wait
     until status.json shows the reference taken and p2 verified;
  2. install the fault on p1 at an offset ahead of the reader
     (reset_at=OFF, or stall_at=OFF&stall_ms=60000);
  3. read the rest with 1 MiB read(2) calls, a monotonic timestamp after
     each; SHA-256 of every byte read;
  4. read status.json (cutovers.total, recent[0].duration_ms), unmount.

The figure of a round is the largest gap between consecutive read
completions over the whole timed read; where it happened (relative to the
fault offset) and the largest gap away from the fault are kept beside it.

    cutover.py run --seamfs BIN --origin BIN --work DIR --pidfile FILE
                   [--rounds N] [--size-mib N] [--triggers reset,stall]
                   [--stall-timeout S] [--out FILE]

Prints the table on stdout, progress on stderr, writes every round to
--out (JSON). Exit 0 whether targets are met or not; 1 when the harness
broke (a mount failed, a read failed, wrong bytes, no cutover).
Standard library only.
"""

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, 'tests', 'integration'))
from origin import Origin  # noqa: E402
from mountlib import Pids, daemon_env, fs_mounted, random_file, say, stop, unmount  # noqa: E402

MIB = 1024 * 1024
NAME = 'media.bin'
READ = MIB                      # one read(2) of the timed reader
MOUNT_WAIT = 15.0
READY_WAIT = 30.0
READ_CAP = 120.0                # bound on the timed read of one round (s)
SLOW_AWAY = 0.25
NEAR_BEFORE = 4 * MIB           # "across the fault": reads from 4 MiB before it
NEAR_AFTER = 32 * MIB           # to 32 MiB after it                # a gap this long away from the fault is reported as noise


def make_data(data_dir, size_mib):
    path = os.path.join(data_dir, NAME)
    return path, size_mib * MIB, random_file(path, size_mib, MIB)


def status(mnt):
    with open(os.path.join(mnt, '.seamfs', 'status.json')) as f:
        return json.load(f)


def src_state(st, provider):
    (a,) = st['assets']
    return next(s for s in a['sources'] if s['provider'] == provider)


def wait_ready(mnt, deadline):
    """Reference fingerprint taken, p2 verified (standby_delay=0)."""
    last = None
    while time.monotonic() < deadline:
        st = status(mnt)
        last = st
        if st['assets'] and st['assets'][0]['reference'] and \
                src_state(st, 'p2')['verification'] == 'verified':
            return st
        time.sleep(0.02)
    raise RuntimeError('reference not taken or p2 not verified in time; last status: '
                       + json.dumps(last)[:1500])


def timed_read(fd, h, start_off):
    """Reads to EOF in READ-byte read(2) calls; returns [(offset, t_done)]."""
    marks = []
    off = start_off
    t_end = time.monotonic() + READ_CAP
    while True:
        b = os.read(fd, READ)
        t = time.monotonic()
        if not b:
            return marks
        h.update(b)
        marks.append((off, t, len(b)))
        off += len(b)
        if t > t_end:
            raise RuntimeError(f'timed read still going after {READ_CAP:.0f} s at offset {off}')


def one_round(args, trig, rnd, origins, catalog, size, want_sha, fault_off, pids, logdir):
    o1, o2 = origins
    mnt = os.path.join(args.work, 'mnt')
    state = os.path.join(args.work, 'state', f'{trig}-{rnd}')
    os.makedirs(state, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    for o in origins:
        o.clear()
    log_path = os.path.join(logdir, f'seamfs-{trig}-{rnd:02d}.log')
    opts = [f'state_dir={state}', 'read_timeout=20', 'standby_delay=0',
            f'stall_timeout={args.stall_timeout}', 'liveness_interval=0']
    argv = [args.seamfs, '-f', '-o', ','.join(opts), catalog, mnt]
    rec = {'trigger': trig, 'round': rnd, 'fault_offset': fault_off, 'log': log_path}
    with open(log_path, 'wb') as logf:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True, env=daemon_env())
    pids.add(proc.pid)
    fd = -1
    try:
        deadline = time.monotonic() + MOUNT_WAIT
        while not fs_mounted(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'seamfs did not mount (rc {proc.poll()}); log: {log_path}')
            time.sleep(0.02)
        fd = os.open(os.path.join(mnt, NAME), os.O_RDONLY)
        h = hashlib.sha256()
        first = os.read(fd, READ)
        h.update(first)
        wait_ready(mnt, time.monotonic() + READY_WAIT)
        if trig == 'reset':
            o1.rule('/' + NAME, reset_at=fault_off)
        elif trig == 'stall':
            o1.rule('/' + NAME, stall_at=fault_off, stall_ms=60000)
        # 'none': no fault, the same read (the reader's own noise)
        marks = timed_read(fd, h, len(first))
        os.close(fd)
        fd = -1
        got = len(first) + sum(m[2] for m in marks)
        rec['bytes'] = got
        rec['sha_ok'] = h.hexdigest() == want_sha and got == size
        # gaps between consecutive read completions
        gaps = [(marks[i][1] - marks[i - 1][1], marks[i][0]) for i in range(1, len(marks))]
        g, at = max(gaps)
        rec['gap_ms'] = g * 1000
        rec['gap_read_offset'] = at
        rec['gap_at_mib_from_fault'] = (at - fault_off) / MIB
        # the largest gap across the fault: reads from NEAR_BEFORE before it to
        # NEAR_AFTER after it, and every gap there (ms, MiB from the fault)
        near = [(x, o) for x, o in gaps
                if fault_off - NEAR_BEFORE <= o <= fault_off + NEAR_AFTER]
        gn, atn = max(near)
        rec['fault_gap_ms'] = gn * 1000
        rec['fault_gap_at_mib_from_fault'] = (atn - fault_off) / MIB
        rec['near_gaps'] = [[round(x * 1000, 2), round((o - fault_off) / MIB, 2)] for x, o in near]
        # every gap of 50 ms or more, anywhere (ms, MiB from the fault)
        rec['slow_gaps'] = [[round(x * 1000, 1), round((o - fault_off) / MIB, 2)]
                            for x, o in gaps if x >= 0.05]
        # the same, away from the fault (more than 64 MiB before or after it): noise
        away = [x for x, o in gaps if o < fault_off - 64 * MIB or o > fault_off + 64 * MIB]
        rec['max_gap_away_ms'] = max(away) * 1000 if away else None
        rec['read_s'] = marks[-1][1] - marks[0][1]
        st = status(mnt)
        cut = st['cutovers']
        rec['cutovers_total'] = cut['total']
        rec['by_reason'] = cut['by_reason']
        rec['fallback_exhausted'] = cut['fallback_exhausted']
        if cut['recent']:
            r0 = cut['recent'][0]
            # a fresh mount: every entry is this round's; the longest counts
            rec['durations_ms'] = [c['duration_ms'] for c in cut['recent']]
            rec['duration_ms'] = max(rec['durations_ms'])
            rec['cut_offset'] = r0['offset']
            rec['cut_offsets'] = [c['offset'] for c in cut['recent']]
            rec['reason'] = r0['reason']
            rec['to'] = r0['to']
        rec['p2_bytes'] = sum(r['bytes_sent'] for r in o2.requests('/' + NAME))
        errs = []
        if not rec['sha_ok']:
            errs.append(f'WRONG BYTES: {got} of {size} bytes, sha256 {h.hexdigest()}')
        if trig == 'none':
            if cut['total']:
                errs.append(f"{cut['total']} cutover(s) without a fault")
        elif cut['total'] < 1:
            errs.append('no cutover in status.json')
        elif rec.get('to') != o2.url(NAME):
            errs.append(f"cut over to {rec.get('to')}, not p2")
        if errs:
            rec['error'] = '; '.join(errs)
    except Exception as e:  # noqa: BLE001 - recorded, the round counts as broken
        rec['error'] = f'{type(e).__name__}: {e}'
    finally:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        unmount(mnt)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            stop(proc)
        pids.remove(proc.pid)
    with open(log_path, errors='replace') as f:
        rec['log_cutover_lines'] = [ln.rstrip() for ln in f if 'cutover' in ln][:6]
    return rec


def p99(xs):
    """Nearest-rank p99: with fewer than 100 samples, the largest."""
    s = sorted(xs)
    return s[max(0, -(-99 * len(s) // 100) - 1)]


def report(recs, args, out):
    target = {'reset': 100.0, 'stall': args.stall_timeout * 1000.0 + 100.0, 'none': None}
    rows = []
    for trig in args.triggers:
        rs = [r for r in recs if r['trigger'] == trig]
        good = [r for r in rs if 'error' not in r]
        gaps = [r['fault_gap_ms'] for r in good]
        durs = [r['duration_ms'] for r in good if 'duration_ms' in r]
        row = {'trigger': trig, 'rounds': len(rs), 'good': len(good), 'target_ms': target[trig]}
        if gaps:
            row.update(gap_median_ms=statistics.median(gaps), gap_p99_ms=p99(gaps),
                       gap_min_ms=min(gaps),
                       whole_read_gap_max_ms=max(r['gap_ms'] for r in good))
        if durs:
            row.update(seamfs_ms_median=statistics.median(durs), seamfs_ms_p99=p99(durs))
        away = [r['max_gap_away_ms'] for r in good if r.get('max_gap_away_ms') is not None]
        if away:
            row['noise_gap_max_ms'] = max(away)
        if len(good) < len(rs) or not gaps:
            row['result'] = 'MISS (errors)'
        elif target[trig] is None:
            row['result'] = '(baseline)'
        else:
            row['result'] = 'PASS' if row['gap_p99_ms'] <= target[trig] else 'MISS'
        rows.append(row)
    with open(out, 'w') as f:
        json.dump({'rows': rows, 'rounds': recs, 'stall_timeout_s': args.stall_timeout,
                   'size_mib': args.size_mib, 'read_bytes': READ, 'cpus': os.cpu_count(),
                   'kernel': os.uname().release}, f, indent=1)

    def ms(v):
        return '-' if v is None else f'{v:.0f}'
    print()
    print(f'cutover gap: {args.rounds} cutovers per trigger, {args.size_mib} MiB file, '
          f'1 MiB reads, stall_timeout={args.stall_timeout} s, {os.cpu_count()} CPUs')
    hdr = ('trigger', 'n', 'gap median', 'gap p99', 'gap min', 'seamfs median', 'seamfs p99',
           'any gap max', 'noise max', 'target', 'result')
    fmt = '{:<8} {:>5} {:>11} {:>8} {:>8} {:>14} {:>11} {:>12} {:>10} {:>9}  {}'
    print(fmt.format(*hdr))
    for r in rows:
        print(fmt.format(
            r['trigger'], f"{r['good']}/{r['rounds']}", ms(r.get('gap_median_ms')),
            ms(r.get('gap_p99_ms')), ms(r.get('gap_min_ms')), ms(r.get('seamfs_ms_median')),
            ms(r.get('seamfs_ms_p99')), ms(r.get('whole_read_gap_max_ms')),
            ms(r.get('noise_gap_max_ms')),
            '<= ' + ms(r['target_ms']) if r['target_ms'] else '-', r['result']))
    print('ms. gap: the longest time between two consecutive 1 MiB read completions across the\n'
          'fault (reads from 4 MiB before it to 32 MiB after it), one per cutover; p99 is\n'
          'nearest-rank (= the max below 100 cutovers). seamfs: cutovers.recent[].duration_ms.\n'
          'any gap max: the longest gap anywhere in any round; noise max: the longest gap more\n'
          'than 64 MiB away from the fault, in any round.')
    bad = [r for r in recs if 'error' in r]
    if bad:
        print('\nERRORS')
        for r in bad:
            print(f"  {r['trigger']} round {r['round']}: {r['error']} (log: {r['log']})")
    multi = [r for r in recs if 'error' not in r and r.get('cutovers_total', 0) > 1]
    if multi:
        print(f'\nMORE THAN ONE CUTOVER RECORDED FOR ONE FAULT: {len(multi)} of {len(recs)} rounds')
        for r in multi:
            print(f"  {r['trigger']} round {r['round']}: cutovers.total {r['cutovers_total']}, "
                  f"duration_ms {r.get('durations_ms')}, offsets "
                  f"{sorted(set(c - r['fault_offset'] for c in r.get('cut_offsets', [])))} from the fault")
    noisy = [r for r in recs if (r.get('max_gap_away_ms') or 0) >= SLOW_AWAY * 1000]
    if noisy:
        print('\nSLOW READS AWAY FROM THE FAULT (>= %d ms)' % (SLOW_AWAY * 1000))
        for r in noisy:
            print(f"  {r['trigger']} round {r['round']}: {r['max_gap_away_ms']:.0f} ms")
    print(f'\nevery round: {out}')
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('cmd', choices=['run'])
    ap.add_argument('--seamfs', required=True)
    ap.add_argument('--origin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--pidfile', required=True)
    ap.add_argument('--out', default=None)
    ap.add_argument('--rounds', type=int, default=20)
    ap.add_argument('--size-mib', type=int, default=256)
    ap.add_argument('--triggers', default='reset,stall')
    ap.add_argument('--stall-timeout', type=int, default=1)
    args = ap.parse_args()
    # SIGTERM (cutover.sh's trap) ends the run through the finally blocks
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.triggers = [t for t in args.triggers.split(',') if t]
    for t in args.triggers:
        if t not in ('reset', 'stall', 'none'):
            ap.error(f'unknown trigger {t!r} (reset, stall, none)')
    if args.size_mib < 128:
        ap.error('--size-mib: at least 128 (the fault lies 32-96 MiB in)')
    out = args.out or os.path.join(args.work, 'out', 'cutover.json')
    logdir = os.path.join(os.path.dirname(out), 'logs')
    os.makedirs(logdir, exist_ok=True)
    data_dir = os.path.join(args.work, 'data')
    os.makedirs(data_dir, exist_ok=True)
    path, size, want_sha = make_data(data_dir, args.size_mib)
    pids = Pids(args.pidfile)
    origins = []
    recs = []
    t0 = time.monotonic()
    try:
        for i in (1, 2):
            o = Origin(args.origin, data_dir, os.path.join(args.work, f'origin{i}'))
            o.start()
            origins.append(o)
            pids.add(o.proc.pid)
        say(f'origins: {origins[0].base_url} (p1), {origins[1].base_url} (p2), '
            f'serving {path}')
        catalog = os.path.join(args.work, 'catalog.json')
        with open(catalog, 'w') as f:
            json.dump({'providers': [{'name': 'p1'}, {'name': 'p2'}],
                       'assets': [{'id': 'media', 'path': NAME, 'size': size,
                                   'mtime': 1700000000,
                                   'sources': [{'url': origins[0].url(NAME), 'provider': 'p1'},
                                               {'url': origins[1].url(NAME), 'provider': 'p2'}]}]},
                      f, indent=1)
        # the origins' copy in the page cache: a warm server
        with open(path, 'rb') as f:
            while f.read(16 * MIB):
                pass
        for trig in args.triggers:
            for rnd in range(1, args.rounds + 1):
                # fault 32-96 MiB in, never MiB-aligned; spread over the rounds
                fault = 32 * MIB + ((rnd * 2654435761) % (64 * MIB)) // 4096 * 4096 + 1234
                r = one_round(args, trig, rnd, origins, catalog, size, want_sha, fault,
                              pids, logdir)
                recs.append(r)
                if 'error' in r:
                    say(f"{trig} {rnd}/{args.rounds}: ERROR {r['error']}")
                else:
                    say(f"{trig} {rnd}/{args.rounds}: gap {r['fault_gap_ms']:.0f} ms across the "
                        f"fault (longest anywhere: {r['gap_ms']:.0f} ms at "
                        f"{r['gap_at_mib_from_fault']:+.1f} MiB), cutovers "
                        f"{r['cutovers_total']}, seamfs {r.get('durations_ms', '-')} ms, read "
                        f"{r['read_s']:.2f} s")
    finally:
        for o in origins:
            pid = o.proc.pid if o.proc else None
            o.stop()
            if pid:
                pids.remove(pid)
    say(f'{len(recs)} rounds in {time.monotonic() - t0:.0f} s')
    return report(recs, args, out)


if __name__ == '__main__':
    sys.exit(main())
