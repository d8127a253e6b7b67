"""bench/cluster.py's high-availability cases (--case failover, --case burst).

failover: a Redis master, a replica and three sentinels (Debian's
redis-server; the sentinels with --sentinel, down-after --down-after ms),
two seamfs hosts on store=redis-sentinel://..., one shared work_dir, one
seam-origin. On each host a paced reader of a plain asset and a reader of
a remux that a paced writer is still making. The master is killed with -9
while they read. Per run and reader: the longest gap between two reads that
ended, in the failover's window (kill to kill + down-after + 10 s) and in
a window as long before it (the reader's own rhythm); the sentinels' switch
time; every reader's SHA-256 (the plain file's, the remux's the same on
both hosts). Targets (issue 29): a remux reader's gap under down-after +
2 s; a plain reader's gap no longer than before the kill (reads never wait
on the store).

burst: 8 transcode assets opened at once on host a of two hosts on one
redis-server; prints the writers each host ran (sampled from both hosts'
status.json every 100 ms until every read ended): placement spreads them.

Standard library only; every process is stopped by its PID.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time

from mountlib import daemon_env, fs_mounted, say, stop, unmount

KIB = 1024
MIB = 1024 * KIB
NAME = 'seam'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def resp(port, *args, timeout=2.0):
    """One RESP command to 127.0.0.1:port: the reply (bytes, int, list or
    None); an error reply raises RuntimeError."""
    out = b'*%d\r\n' % len(args) + b''.join(
        b'$%d\r\n%s\r\n' % (len(a), a) for a in (x.encode() if isinstance(x, str) else x
                                                    for x in args))
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        s.sendall(out)
        # closed with the socket: an open makefile() keeps the connection
        # open after s.close() until it is collected
        with s.makefile('rb') as f:
            return read_reply(f)


def read_reply(f):
    """One RESP reply from the binary file f, as resp() returns it."""
    def read():
        line = f.readline()
        if not line:
            raise OSError('connection closed')
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return rest
        if kind == b'-':
            raise RuntimeError(rest.decode(errors='replace'))
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else f.read(n + 2)[:-2]
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [read() for _ in range(n)]
        raise OSError(f'not RESP: {line!r}')
    return read()


class Node:
    """One redis-server (data node, or a sentinel of `sentinel_of`)."""

    def __init__(self, d, replica_of=None, sentinel_of=None, down_after=1000):
        self.dir, self.replica_of, self.sentinel_of = d, replica_of, sentinel_of
        self.down_after = down_after
        os.makedirs(d, exist_ok=True)
        self.port = free_port()
        self.proc = None

    def start(self):
        log = os.path.join(self.dir, 'redis.log')
        if self.sentinel_of is None:
            argv = ['redis-server', '--port', str(self.port), '--bind', '127.0.0.1',
                    '--save', '', '--appendonly', 'no', '--dir', self.dir, '--logfile', log]
            if self.replica_of:
                argv += ['--replicaof', '127.0.0.1', str(self.replica_of.port)]
        else:
            conf = os.path.join(self.dir, 'sentinel.conf')
            with open(conf, 'w') as f:
                f.write(f'port {self.port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {log}\n'
                        f'sentinel monitor {NAME} 127.0.0.1 {self.sentinel_of.port} 2\n'
                        f'sentinel down-after-milliseconds {NAME} {self.down_after}\n'
                        f'sentinel failover-timeout {NAME} 10000\n')
            argv = ['redis-server', conf, '--sentinel']
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait(lambda: ping(self.port), 10, f'redis-server on {self.port}')
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def ping(port):
    try:
        return resp(port, 'PING', timeout=0.5) == b'PONG'
    except (OSError, RuntimeError):
        return False


def wait(pred, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise SystemExit(f'{what}: not within {timeout} s')


def info(port, section):
    out = {}
    for ln in resp(port, 'INFO', section).decode(errors='replace').splitlines():
        k, sep, v = ln.partition(':')
        if sep:
            out[k] = v.strip()
    return out


class Reader:
    """Reads path whole in chunks at a pace, in a thread; keeps when each
    read ended and the SHA-256."""

    def __init__(self, name, path, chunk, pace):
        self.name, self.path, self.chunk, self.pace = name, path, chunk, pace
        self.ends, self.sha, self.error = [], None, None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        h = hashlib.sha256()
        try:
            with open(self.path, 'rb', buffering=0) as f:
                while True:
                    b = f.read(self.chunk)
                    self.ends.append(time.monotonic())
                    if not b:
                        break
                    h.update(b)
                    if self.pace:
                        time.sleep(self.pace)
            self.sha = h.hexdigest()
        except OSError as e:
            self.error = e

    def longest(self, t0, t1):
        """(gap, its start, its end) as gap() finds it, or None."""
        e = self.ends[1:]
        pairs = [(b - a, a, b) for a, b in zip(e, e[1:]) if b >= t0 and a <= t1]
        return max(pairs) if pairs else None

    def gap(self, t0, t1):
        """The longest time between two reads' ends that overlaps [t0, t1],
        after its first read (the open and a remux's first segment are not
        a pause)."""
        g = self.longest(t0, t1)
        return g[0] if g else 0.0

    def gap_before(self, t0, t1):
        """The longest such time that lies wholly within [t0, t1)."""
        e = self.ends[1:]
        return max((b - a for a, b in zip(e, e[1:]) if a >= t0 and b < t1), default=0.0)


class World:
    """Processes and mounts of one run, stopped in reverse on exit."""

    def __init__(self, work, seamfs):
        self.work, self.seamfs = work, seamfs
        self.procs, self.nodes, self.mounts = [], [], []

    def origin(self, exe, root):
        o = subprocess.Popen([exe, '--root', root], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(o)
        return int(o.stdout.readline().decode().split()[1])

    def mount(self, cat, host, store, opts=()):
        mnt = os.path.join(self.work, f'mnt-{host}')
        os.makedirs(mnt, exist_ok=True)
        o = [f'state_dir={self.work}/state-{host}', f'store={store}', f'host_id={host}',
             f'work_dir={self.work}/tc', 'heartbeat=0.5', 'orphan_after=3', 'read_timeout=30']
        p = subprocess.Popen([self.seamfs, '-f', '-o', ','.join(o + list(opts)), cat, mnt],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.work, f'{host}.log'), 'ab'),
                             env=daemon_env(), start_new_session=True)
        self.procs.append(p)
        self.mounts.append(mnt)
        wait(lambda: fs_mounted(mnt) or p.poll() is not None, 30, f'mount of {host}')
        if p.poll() is not None:
            raise SystemExit(f'host {host} did not mount; see {self.work}/{host}.log')
        return mnt

    def close(self):
        for mnt in self.mounts:
            unmount(mnt)
        for p in reversed(self.procs):
            stop(p)
        for n in reversed(self.nodes):
            n.kill()


def make_clip(path, seconds):
    if not os.path.exists(path):
        say(f'making a {seconds} s 720p clip')
        subprocess.run(['ffmpeg', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i',
                        f'testsrc2=size=1280x720:rate=25:duration={seconds}', '-f', 'lavfi',
                        '-i', f'sine=frequency=440:duration={seconds}', '-c:v', 'libx264',
                        '-preset', 'veryfast', '-g', '50', '-c:a', 'aac', '-shortest', path],
                       check=True, timeout=600)


def failover_run(a, run, data, plain_sha, down_after):
    work = os.path.join(a.work, f'failover-{run}')
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    w = World(work, a.seamfs)
    try:
        master = Node(os.path.join(work, 'master')).start()
        w.nodes.append(master)
        replica = Node(os.path.join(work, 'replica'), replica_of=master).start()
        w.nodes.append(replica)
        wait(lambda: info(replica.port, 'replication').get('master_link_status') == 'up', 20,
             'the replica in sync')
        sents = []
        for i in range(3):
            sents.append(Node(os.path.join(work, f's{i}'), sentinel_of=master,
                              down_after=down_after).start())
            w.nodes.append(sents[-1])
        wait(lambda: all(len(resp(s.port, 'SENTINEL', 'sentinels', NAME)) == 2 and
                         len(resp(s.port, 'SENTINEL', 'replicas', NAME)) == 1 for s in sents),
             30, 'the sentinels knowing each other', interval=0.2)
        port = w.origin(a.origin, data)
        cat = os.path.join(work, 'catalog.json')
        with open(cat, 'w') as f:
            json.dump({'assets': [
                {'id': 'plain', 'path': 'plain.bin',
                 'sources': [{'url': f'http://127.0.0.1:{port}/plain.bin'}]},
                {'id': 'clip', 'path': 'clip.mkv',
                 'sources': [{'url': f'http://127.0.0.1:{port}/clip.mkv'}]},
                {'id': 'clip-ts', 'path': 'clip.ts', 'remux': {'of': 'clip'}}]}, f)
        store = 'redis-sentinel://' + '+'.join(f'127.0.0.1:{s.port}' for s in sents) + '/' + NAME
        # the remux's writer (on either host) runs at 2 x real time, through
        # the kill
        mnts = [w.mount(cat, h, store, ['writer_max_speed=2']) for h in 'ab']
        readers = []
        for h, mnt in zip('ab', mnts):
            readers.append(Reader(f'plain@{h}', os.path.join(mnt, 'plain.bin'), 128 * KIB,
                                  0.04))
            readers.append(Reader(f'remux@{h}', os.path.join(mnt, 'clip.ts'), 64 * KIB, 0))
        time.sleep(a.kill_at)
        t_kill = time.monotonic()
        master.kill()
        switched = None
        while time.monotonic() < t_kill + 30 and switched is None:
            try:
                addr = resp(sents[0].port, 'SENTINEL', 'get-master-addr-by-name', NAME)
                if addr and int(addr[1]) == replica.port:
                    switched = time.monotonic() - t_kill
            except (OSError, RuntimeError):
                pass
            time.sleep(0.05)
        for r in readers:
            r.thread.join(300)
        window = down_after / 1000 + 10
        out = {'switch_s': switched, 'readers': {}}
        remux = set()
        for r in readers:
            ok = r.error is None and not r.thread.is_alive()
            if r.name.startswith('plain'):
                ok = ok and r.sha == plain_sha
            else:
                remux.add(r.sha)
            out['readers'][r.name] = {
                'ok': ok, 'error': repr(r.error) if r.error else None,
                'span_s': (r.ends[-1] - t_kill, r.ends[0] - t_kill) if r.ends else None,
                'gap_failover_s': r.gap(t_kill, t_kill + window),
                'gap_at': [x - t_kill for x in (r.longest(t_kill, t_kill + window) or (0, 0, 0))[1:]],
                'gap_before_s': r.gap_before(t_kill - window, t_kill)}
        out['remux_same_on_both'] = len(remux) == 1
        return out
    finally:
        w.close()


def failover(a):
    data = os.path.join(a.work, 'data')
    os.makedirs(data, exist_ok=True)
    from mountlib import random_file
    plain_sha = random_file(os.path.join(data, 'plain.bin'), a.plain_mib)
    make_clip(os.path.join(data, 'clip.mkv'), 60)
    if a.kill_at < 4:
        raise SystemExit('--kill-at: at least 4 s, so that every reader is reading')
    runs = [failover_run(a, i, data, plain_sha, a.down_after) for i in range(a.runs)]
    print(f'failover: down-after {a.down_after} ms, master killed {a.kill_at} s into the '
          f'reads, {a.runs} runs')
    sw = [r['switch_s'] for r in runs if r['switch_s'] is not None]
    print(f'  sentinels switched in: median {statistics.median(sw):.2f} s' if sw else
          '  sentinels did not switch')
    bad = 0
    for r in runs:
        for n, g in r['readers'].items():
            if g['span_s'] and g['span_s'][0] < 0:
                print(f'  reader {n} ended {-g["span_s"][0]:.1f} s before the kill: '
                      'it tells nothing of the failover')
    for i, r in enumerate(runs):
        print(f'  run {i + 1}: ' + ', '.join(
            f'{n} {g["gap_failover_s"]:.2f} s from {g["gap_at"][0]:+.2f} s'
            for n, g in r['readers'].items()))
    for kind in ('plain', 'remux'):
        fo = [g['gap_failover_s'] for r in runs for n, g in r['readers'].items()
              if n.startswith(kind)]
        be = [g['gap_before_s'] for r in runs for n, g in r['readers'].items()
              if n.startswith(kind)]
        print(f'  {kind:6} readers: longest gap across the failover median {statistics.median(fo):.2f} s, '
              f'max {max(fo):.2f} s; before the kill median {statistics.median(be):.2f} s, '
              f'max {max(be):.2f} s')
    for r in runs:
        for n, g in r['readers'].items():
            if not g['ok']:
                bad += 1
                print(f'  reader {n}: NOT whole or wrong bytes: {g["error"]}')
        if not r['remux_same_on_both']:
            bad += 1
            print('  remux: the two hosts served different bytes')
    target = a.down_after / 1000 + 2
    print(f'  target: remux gap < {target:.1f} s (down-after + 2 s); plain gap as before')
    return 1 if bad else 0


def burst(a):
    work = os.path.join(a.work, 'burst')
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(a.work, 'data')
    os.makedirs(data, exist_ok=True)
    make_clip(os.path.join(data, 'clip.mkv'), 60)
    w = World(work, a.seamfs)
    try:
        r = Node(os.path.join(work, 'redis')).start()
        w.nodes.append(r)
        port = w.origin(a.origin, data)
        assets = [{'id': 'clip', 'path': 'clip.mkv',
                   'sources': [{'url': f'http://127.0.0.1:{port}/clip.mkv'}]}]
        for i in range(8):
            assets.append({'id': f'tc{i}', 'path': f'tc{i}.ts',
                           'transcode': {'of': 'clip', 'height': 180 + 2 * i,
                                         'video_bitrate': 300000, 'audio_bitrate': 64000}})
        cat = os.path.join(work, 'catalog.json')
        with open(cat, 'w') as f:
            json.dump({'assets': assets}, f)
        store = f'redis://127.0.0.1:{r.port}'
        mnts = [w.mount(cat, 'a', store, ['max_writers=4']),
                w.mount(cat, 'b', store, ['max_writers=4'])]
        readers = [Reader(f'tc{i}', os.path.join(mnts[0], f'tc{i}.ts'), 256 * KIB, 0)
                   for i in range(8)]
        peak = {'a': 0, 'b': 0}
        ran = {'a': set(), 'b': set()}
        while any(x.thread.is_alive() for x in readers):
            for h, mnt in zip('ab', mnts):
                try:
                    with open(os.path.join(mnt, '.seamfs', 'status.json')) as f:
                        st = json.load(f)
                except (OSError, ValueError):
                    continue
                running = [t['asset'] for t in st.get('transcodes', [])
                           if t.get('writer_pid')]
                peak[h] = max(peak[h], len(running))
                ran[h].update(running)
            time.sleep(0.1)
        errs = [x.name for x in readers if x.error]
        print('burst: 8 transcodes opened at once on host a of 2 (max_writers=4 each)')
        for h in 'ab':
            print(f'  host {h}: wrote {len(ran[h])} of them, at most {peak[h]} at once')
        print(f'  readers with an error: {len(errs)}')
        return 1 if errs else 0
    finally:
        w.close()
