#!/usr/bin/python3
"""The pause a reader sees when seamfs's serving process is killed under a
keeper (-o keeper, docs/restart.md): kill -9 of the worker, N times, under
one sequential reader and under 32 paced readers; every byte is checked.
For each kill, the pause is the longest time a read that was in flight
between the kill and the next worker serving took beyond that reader's
median read. Prints the median and the max
over the kills against the targets (median < 300 ms, max < 2 s), and what a
reader gets from the same kill without a keeper. With --how restart each
event is `seamfs ctl restart --wait` instead (an upgrade: the keeper ends the
worker and starts the binary on disk), and the reads counted are those in
flight between the request and its return. Standard library only.

  sudo bench/restart.py [--seamfs build/seamfs] [--origin PATH] [--kills 20]
                        [--how kill|restart] [--size-mib 256]
                        [--work /tmp/seamfs-bench-restart]

There is no curl or rclone column: neither has a serving process to
restart (a dead rclone mount is ENOTCONN, as a dead seamfs without keeper).
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mountlib import daemon_env, fs_mounted, say, stop, unmount  # noqa: E402

MIB = 1 << 20


class Reader(threading.Thread):
    """Reads the file with O_DIRECT, each read compared with the bytes; keeps
    (start, end) of every read. pace: seconds between reads (0: none)."""

    def __init__(self, path, ref, size, chunk, pace, seed):
        super().__init__(daemon=True)
        self.path, self.ref, self.chunk, self.pace = path, ref, chunk, pace
        self.size = size
        self.rng = random.Random(seed)
        self.reads, self.errors, self.wrong = [], [], 0
        self.halt = threading.Event()

    def run(self):
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
        off = self.rng.randrange(0, self.size // self.chunk) * self.chunk
        try:
            while not self.halt.is_set():
                t0 = time.monotonic()
                try:
                    b = os.pread(fd, self.chunk, off)
                except OSError as e:
                    self.errors.append(f'{e.strerror} at {off}')
                    return
                t1 = time.monotonic()
                self.reads.append((t0, t1))
                if b != self.ref[off:off + len(b)]:
                    self.wrong += 1
                off = (off + self.chunk) % self.size
                if self.pace:
                    time.sleep(self.pace)
        finally:
            os.close(fd)


def worker_of(keeper):
    try:
        with open(f'/proc/{keeper}/task/{keeper}/children') as f:
            kids = f.read().split()
        return int(kids[0]) if len(kids) == 1 else None
    except OSError:
        return None


def serving_pid(mnt):
    """status.json's worker_pid, read in a thread so that a mount that does
    not answer cannot hold the benchmark."""
    box = {}

    def read():
        try:
            with open(os.path.join(mnt, '.seamfs/status.json')) as f:
                box['pid'] = json.load(f)['worker_pid']
        except (OSError, ValueError, KeyError):
            pass
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    return box.get('pid')


def wait_new_worker(mnt, keeper, old, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        w = worker_of(keeper)
        if w and w != old and serving_pid(mnt) == w:
            return w
        time.sleep(0.01)
    raise RuntimeError(f'no new worker within {timeout} s')


def pauses(readers, kills):
    """For each kill (a time, or the span (from, to) of a restart): the
    longest extra time of a read in flight at it."""
    out = []
    for k in kills:
        k0, k1 = k if isinstance(k, tuple) else (k, k)
        worst = 0.0
        for r in readers:
            durs = [e - s for s, e in r.reads]
            if not durs:
                continue
            med = statistics.median(durs)
            for s, e in r.reads:
                if s <= k1 and e >= k0:
                    worst = max(worst, (e - s) - med)
        out.append(worst * 1000)
    return out


def restart(args, sock):
    """seamfs ctl restart --wait; its span (from, to). Fails unless the next
    worker is the binary on disk."""
    t0 = time.monotonic()
    r = subprocess.run([args.seamfs, 'ctl', '--socket', sock, 'restart', '--wait'],
                       capture_output=True, text=True, timeout=120)
    t1 = time.monotonic()
    if r.returncode != 0:
        raise RuntimeError(f'ctl restart: {r.returncode} {r.stderr.strip()}')
    return (t0, t1)


def mount(args, catalog, mnt, opts, log):
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([args.seamfs, '-f', '-o', ','.join(opts), catalog, mnt],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         env=daemon_env(), start_new_session=True)
    end = time.monotonic() + 30
    while not fs_mounted(mnt):
        if p.poll() is not None or time.monotonic() > end:
            raise RuntimeError('seamfs did not mount; see ' + log.name)
        time.sleep(0.05)
    return p


def run_mode(args, name, catalog, ref, nreaders, chunk, pace, log):
    mnt = os.path.join(args.work, 'mnt')
    sock = os.path.join(args.work, 'ctl.sock')
    opts = [f'state_dir={args.work}/state', 'read_timeout=60', 'keeper',
            f'control_socket={sock}']
    p = mount(args, catalog, mnt, opts, log)
    readers = []
    try:
        w = wait_new_worker(mnt, p.pid, None)
        path = os.path.join(mnt, 'data.bin')
        readers = [Reader(path, ref, len(ref), chunk, pace, i) for i in range(nreaders)]
        for r in readers:
            r.start()
        time.sleep(1.0)
        kills = []
        for _ in range(args.kills):
            # apart by more than the keeper's crash-loop window (3 s)
            time.sleep(random.uniform(3.2, 3.6))
            if args.how == 'restart':
                span = restart(args, sock)
            else:
                t0 = time.monotonic()
                os.kill(w, signal.SIGKILL)
            w = wait_new_worker(mnt, p.pid, w)
            # a read asked for while no worker served waited too
            kills.append(span if args.how == 'restart' else (t0, time.monotonic()))
        time.sleep(1.0)
    finally:
        for r in readers:
            r.halt.set()
        for r in readers:
            r.join(60)
        unmount(mnt)
        stop(p)
    ps = pauses(readers, kills)
    errors = sum(len(r.errors) for r in readers)
    wrong = sum(r.wrong for r in readers)
    nreads = sum(len(r.reads) for r in readers)
    return {'mode': name, 'kills': len(kills), 'readers': nreaders, 'reads': nreads,
            'pause_median_ms': round(statistics.median(ps), 1),
            'pause_max_ms': round(max(ps), 1), 'errors': errors, 'wrong_reads': wrong}


def without_keeper(args, catalog, log):
    """One kill -9 of a seamfs without keeper under a reader: what it gets."""
    mnt = os.path.join(args.work, 'mnt')
    p = mount(args, catalog, mnt, [f'state_dir={args.work}/state', 'read_timeout=60'], log)
    got = 'no error'
    try:
        fd = os.open(os.path.join(mnt, 'data.bin'), os.O_RDONLY | os.O_DIRECT)
        os.pread(fd, MIB, 0)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        try:
            os.pread(fd, MIB, MIB)
        except OSError as e:
            got = e.strerror
        try:
            os.close(fd)
        except OSError:
            pass  # ENOTCONN again: the file is closed all the same
    finally:
        subprocess.run(['fusermount3', '-uz', mnt], capture_output=True)
        stop(p)
    return got


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seamfs', default=os.path.join(root, 'build/seamfs'))
    ap.add_argument('--origin', default=os.path.join(root, 'build/tests/server/seam-origin'))
    ap.add_argument('--kills', type=int, default=20)
    ap.add_argument('--how', choices=('kill', 'restart'), default='kill',
                    help='kill -9 of the worker, or seamfs ctl restart --wait')
    ap.add_argument('--size-mib', type=int, default=256)
    ap.add_argument('--work', default='/tmp/seamfs-bench-restart')
    args = ap.parse_args()
    for exe in (args.seamfs, args.origin):
        if not os.access(exe, os.X_OK):
            sys.exit(f'restart.py: {exe} is not an executable (build first, or pass it)')
    os.makedirs(os.path.join(args.work, 'data'), exist_ok=True)
    data = os.path.join(args.work, 'data', 'data.bin')
    ref = os.urandom(args.size_mib * MIB)
    with open(data, 'wb') as f:
        f.write(ref)
    log = open(os.path.join(args.work, 'seamfs.log'), 'w')
    origin = subprocess.Popen([args.origin, '--root', os.path.dirname(data), '--port-file',
                               os.path.join(args.work, 'port')], stdout=log, stderr=log)
    try:
        end = time.monotonic() + 10
        while not os.path.exists(os.path.join(args.work, 'port')):
            if time.monotonic() > end:
                sys.exit('restart.py: the origin did not start')
            time.sleep(0.05)
        port = open(os.path.join(args.work, 'port')).read().strip()
        catalog = os.path.join(args.work, 'catalog.json')
        with open(catalog, 'w') as f:
            json.dump({'assets': [{'id': 'data', 'path': 'data.bin', 'size': len(ref),
                                   'sources': [{'url': f'http://127.0.0.1:{port}/data.bin'}]}]},
                      f)
        what = 'kills' if args.how == 'kill' else 'restarts (ctl restart --wait)'
        say(f'{args.kills} {what} under 1 sequential reader (1 MiB reads)')
        rows = [run_mode(args, 'sequential', catalog, ref, 1, MIB, 0, log)]
        say(f'{args.kills} {what} under 32 paced readers (256 KiB every 50 ms)')
        rows.append(run_mode(args, '32 paced', catalog, ref, 32, 256 * 1024, 0.05, log))
        bare = without_keeper(args, catalog, log)
    finally:
        os.remove(os.path.join(args.work, 'port')) if os.path.exists(
            os.path.join(args.work, 'port')) else None
        stop(origin)
        log.close()
    print(f'{"readers":<12} {"kills":>5} {"reads":>7} {"pause median":>13} {"pause max":>10} '
          f'{"errors":>6} {"wrong":>5}')
    for r in rows:
        print(f'{r["mode"]:<12} {r["kills"]:>5} {r["reads"]:>7} '
              f'{r["pause_median_ms"]:>10.1f} ms {r["pause_max_ms"]:>7.1f} ms '
              f'{r["errors"]:>6} {r["wrong_reads"]:>5}')
    print('targets: median < 300 ms, max < 2000 ms, no error, no wrong byte; '
          f'without keeper the same kill gives the reader: {bare}')
    with open(os.path.join(args.work, 'results.json'), 'w') as f:
        json.dump({'how': args.how, 'rows': rows, 'without_keeper': bare}, f, indent=1)
    return 0 if all(r['errors'] == 0 and r['wrong_reads'] == 0 for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
