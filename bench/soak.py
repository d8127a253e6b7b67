#!/usr/bin/python3
"""Soak helper (bench/soak.sh runs it; see bench/README.md).

Many concurrent readers through one real seamfs mount while the origins
misbehave, one at a time; every byte read is checked, the daemon's RSS and
open fds are sampled every second, and the slowest read is reported with the
chaos action that was active when it happened.

  * N random files (their SHA-256 kept beside them, reused while the size is
    right) and a small HTML page, expired.html, in WORK/data;
  * three seam-origins (tests/server/seam-origin, steered through
    tests/integration/origin.py) on 127.0.0.1 serving WORK/data, providers
    p1, p2, p3; every asset has one source on each;
  * one mount, `seamfs -f -o state_dir=...,read_timeout=20,standby_delay=0,
    stall_timeout=2`, for the whole run;
  * readers, each its own process (so its own client and session): three of
    four read whole files sequentially with 1 MiB read(2) calls, round-robin
    over the files, and check each file's SHA-256; every fourth reads 4 MiB
    runs at random offsets with 1 MiB pread(2) calls. Every read is timed and
    its bytes are compared with the same range of the file on disk, so a wrong
    byte is located exactly. The readers drop the mount's page cache of a file
    (POSIX_FADV_DONTNEED) at open and behind each read, so reads keep reaching
    the daemon instead of the kernel's cache;
  * chaos on one origin at a time, always at least two healthy: SIGSTOP and
    SIGCONT, SIGKILL and a restart on the same port, /_ctl/down?drop=1 and
    /_ctl/up, and hostile answers through /_ctl/rule on every asset's path
    (a stall, a reset, three 503s; an HTML page as a read-to-close 200, gzip,
    capped 206s where the seam-origin knows those keys);
  * at the end: status.json's cutovers and verification verdicts, the metrics
    text, the daemon's exit status and any sanitizer report in its log.

    soak.py run --seamfs BIN --origin BIN --work DIR --pidfile FILE --out DIR
                [--duration S] [--readers N] [--files N] [--size-mib N]
                [--opts OPTS] [--seed N]
    soak.py reader SPEC ID          (one reader; started by `run`)

Prints the table on stdout, progress and the chaos log on stderr, writes
OUT/soak.json, OUT/chaos.log, OUT/seamfs.log, OUT/status.json, OUT/metrics.
Exit 0: no read failed and no byte was wrong (timings never fail it); 1: a read
failed, a byte was wrong, a reader hung, or the daemon died, exited non-zero or
logged a sanitizer report; 2: the harness broke. Standard library only.
"""

import argparse
import array
import hashlib
import heapq
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, 'tests', 'integration'))
from origin import Origin, OriginError  # noqa: E402
from mountlib import Pids, daemon_env, fs_mounted, random_file, say, unmount  # noqa: E402
from tools import tree_pids  # noqa: E402

MIB = 1024 * 1024
READ = MIB                  # one read(2) of a reader
RUN = 4 * MIB               # a random reader's run
RUNS_PER_OPEN = 4
MOUNT_WAIT = 15.0
READ_TIMEOUT = 20           # the daemon's read_timeout; bounds a reader's end
STALL_TIMEOUT = 2
PROVIDERS = ('p1', 'p2', 'p3')
TOP = 10                    # slowest reads kept, per reader and overall
KEEP_FAILURES = 200         # failure records a reader keeps (all are counted)
PRINT_FAILURES = 10         # failures a reader prints as they happen
EXPIRED_HTML = (b'<!DOCTYPE html>\n<html><head><title>Link expired</title></head>\n'
                b'<body><h1>This link has expired</h1>\n'
                b'<p>Please request a new download link.</p></body></html>\n')

# Chaos actions. Those with `keys` need rule keys that older seam-origins lack.
ACTIONS = {
    'sigstop': {},              # SIGSTOP, hold, SIGCONT: a hung server
    'sigkill': {},              # SIGKILL, pause, restart on the same port
    'down_drop': {},            # /_ctl/down?drop=1, hold, /_ctl/up
    'stall': {},                # stall_at=OFF&stall_ms=...&count=1
    'reset': {},                # reset_at=OFF&count=1
    'http_503': {},             # status=503&count=3
    'html_200_close': {'keys': {'serve': '/expired.html', 'framing': 'close',
                                'no_range': '1'}},
    'gzip': {'keys': {'content_encoding': 'gzip'}},
    'cap_206': {'keys': {'cap': '65536'}},
}


def nearest_rank(sorted_xs, q):
    if not sorted_xs:
        return None
    k = -(-round(q * 1000) * len(sorted_xs) // 1000)    # ceil(q * n)
    return sorted_xs[max(0, k - 1)]


def utc(wall):
    """Wall time as the daemon's log writes it (UTC, ms), to find a moment there."""
    return (time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(wall))
            + f'.{int(wall * 1000) % 1000:03d}Z')


def fmt_bytes(n):
    return f'{n / 2**30:.2f} GiB' if n >= 2**30 else f'{n / MIB:.1f} MiB'


def fmt_ms(s):
    return '-' if s is None else f'{s * 1000:.1f} ms'


# --------------------------------------------------------------------------
# reader (a process of its own)
# --------------------------------------------------------------------------

class Reader:
    def __init__(self, spec, rid):
        self.spec = spec
        self.rid = rid
        self.files = spec['files']
        self.deadline = spec['deadline']
        self.t0 = spec['t0']
        self.mode = 'random' if rid % 4 == 3 else 'seq'
        self.rng = random.Random(spec['seed'] * 1000 + rid)
        self.lat = array.array('d')
        self.slow = []              # heap of (dur, t0, file, off, len)
        self.timeline = {}          # second -> [bytes, reads, max dur]
        self.failures = []          # the first KEEP_FAILURES
        self.fail_counts = {}       # all of them, by kind
        self.last_fail = None
        self.bytes = 0
        self.reads = 0
        self.short_reads = 0
        self.passes = 0             # whole sequential passes
        self.passes_sha_ok = 0
        self.partial_passes = 0     # cut by the deadline or a failure
        self.runs = 0
        self.stop = False
        self.disk = {f['name']: os.open(f['disk'], os.O_RDONLY) for f in self.files}
        self.ppid = os.getppid()

    def done(self):
        return self.stop or time.monotonic() >= self.deadline or os.getppid() != self.ppid

    def fail(self, kind, f, off, t0, t1, msg):
        rec = {'kind': kind, 'reader': self.rid, 'mode': self.mode, 'file': f['name'],
               'offset': off, 't0': t0 - self.t0, 't1': t1 - self.t0, 'msg': msg}
        self.fail_counts[kind] = self.fail_counts.get(kind, 0) + 1
        self.last_fail = kind
        n = sum(self.fail_counts.values())
        if n <= KEEP_FAILURES:
            self.failures.append(rec)
        if n <= PRINT_FAILURES:
            print(f'soak reader {self.rid}: {kind.upper()}: {f["name"]} offset {off}: {msg} '
                  f'(at +{t1 - self.t0:.2f} s)', file=sys.stderr, flush=True)
        elif n == PRINT_FAILURES + 1:
            print(f'soak reader {self.rid}: more failures; counted, not printed',
                  file=sys.stderr, flush=True)

    def note(self, f, off, n, t0, t1):
        d = t1 - t0
        self.lat.append(d)
        self.reads += 1
        self.bytes += n
        item = (d, t0 - self.t0, f['name'], off, n)
        if len(self.slow) < TOP:
            heapq.heappush(self.slow, item)
        elif d > self.slow[0][0]:
            heapq.heapreplace(self.slow, item)
        b = self.timeline.setdefault(int(t1 - self.t0), [0, 0, 0.0])
        b[0] += n
        b[1] += 1
        b[2] = max(b[2], d)

    def check(self, f, off, data, t0, t1):
        """Compares data with the file on disk at off; False on a wrong byte."""
        want = os.pread(self.disk[f['name']], len(data), off)
        if data == want:
            return True
        n = min(len(data), len(want))
        i = next((k for k in range(n) if data[k] != want[k]), n)
        if i < n:
            msg = (f'read of {len(data)} bytes at {off}: first wrong byte at {off + i} '
                   f'(got 0x{data[i]:02x}, want 0x{want[i]:02x}), '
                   f'{sum(1 for k in range(n) if data[k] != want[k])} wrong in this read')
        else:
            msg = f'read of {len(data)} bytes at {off}: the file has only {len(want)} there'
        self.fail('wrong_bytes', f, off + i, t0, t1, msg)
        return False

    @staticmethod
    def drop(fd, off, n):
        try:
            os.posix_fadvise(fd, off, n, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass

    def open(self, f):
        t0 = time.monotonic()
        try:
            fd = os.open(f['mount'], os.O_RDONLY)
        except OSError as e:
            t1 = time.monotonic()
            self.fail('open_error', f, 0, t0, t1, f'open: {e}')
            return -1
        self.drop(fd, 0, 0)
        return fd

    def seq_pass(self, f):
        fd = self.open(f)
        if fd < 0:
            return
        h = hashlib.sha256()
        off = 0
        ok = True
        try:
            while not self.done():
                t0 = time.monotonic()
                try:
                    data = os.read(fd, READ)
                except OSError as e:
                    t1 = time.monotonic()
                    self.fail('read_error', f, off, t0, t1,
                              f'read({READ}) at {off}: {e} after {(t1 - t0) * 1000:.0f} ms')
                    ok = False
                    break
                t1 = time.monotonic()
                if not data:
                    if off != f['size']:
                        self.fail('short_file', f, off, t0, t1,
                                  f'end of file at {off}, the file has {f["size"]} bytes')
                        ok = False
                    break
                self.note(f, off, len(data), t0, t1)
                if len(data) < READ and off + len(data) < f['size']:
                    self.short_reads += 1
                if not self.check(f, off, data, t0, t1):
                    ok = False
                    break
                h.update(data)
                self.drop(fd, off, len(data))
                off += len(data)
            else:
                self.partial_passes += 1
                return
            if not ok:
                self.partial_passes += 1
                return
            self.passes += 1
            if h.hexdigest() == f['sha256']:
                self.passes_sha_ok += 1
            else:
                t = time.monotonic()
                self.fail('wrong_sha256', f, 0, t, t,
                          f'SHA-256 of the whole file {h.hexdigest()}, want {f["sha256"]}')
        finally:
            os.close(fd)

    def random_runs(self, f):
        fd = self.open(f)
        if fd < 0:
            return
        try:
            for _ in range(RUNS_PER_OPEN):
                if self.done():
                    return
                start = self.rng.randrange(0, max(1, f['size'] - RUN))
                end = min(f['size'], start + RUN)
                off = start
                while off < end and not self.done():
                    n = min(READ, end - off)
                    t0 = time.monotonic()
                    try:
                        data = os.pread(fd, n, off)
                    except OSError as e:
                        t1 = time.monotonic()
                        self.fail('read_error', f, off, t0, t1,
                                  f'pread({n}) at {off}: {e} after {(t1 - t0) * 1000:.0f} ms')
                        return
                    t1 = time.monotonic()
                    if not data:
                        self.fail('short_file', f, off, t0, t1,
                                  f'pread({n}) at {off} returned 0 bytes, the file has '
                                  f'{f["size"]}')
                        return
                    self.note(f, off, len(data), t0, t1)
                    if len(data) < n:
                        self.short_reads += 1
                    if not self.check(f, off, data, t0, t1):
                        return
                    self.drop(fd, off, len(data))
                    off += len(data)
                self.runs += 1
        finally:
            os.close(fd)

    def run(self):
        n = len(self.files)
        i = self.rid % n
        while not self.done():
            f = self.files[i]
            i = (i + 1) % n
            if self.mode == 'seq':
                self.seq_pass(f)
            else:
                self.random_runs(f)
            if self.last_fail == 'open_error':
                self.last_fail = None
                time.sleep(0.1)     # a failing open: don't spin

    def result(self):
        return {'id': self.rid, 'mode': self.mode, 'reads': self.reads, 'bytes': self.bytes,
                'short_reads': self.short_reads, 'passes': self.passes,
                'passes_sha_ok': self.passes_sha_ok, 'partial_passes': self.partial_passes,
                'runs': self.runs, 'failures': self.failures, 'fail_counts': self.fail_counts,
                'slowest': [list(x) for x in sorted(self.slow, reverse=True)],
                'timeline': self.timeline}


def reader_main(spec_path, rid):
    with open(spec_path) as f:
        spec = json.load(f)
    r = Reader(spec, rid)

    def on_term(*_):
        r.stop = True
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the run's Ctrl-C is the parent's
    try:
        r.run()
    except Exception as e:  # noqa: BLE001 - the reader's own bug: the harness broke
        print(f'soak reader {rid}: harness error: {type(e).__name__}: {e}',
              file=sys.stderr, flush=True)
        return 2
    base = os.path.join(spec['out'], 'readers', f'r{rid:02d}')
    with open(base + '.lat', 'wb') as f:
        r.lat.tofile(f)
    with open(base + '.json.tmp', 'w') as f:
        json.dump(r.result(), f)
    os.replace(base + '.json.tmp', base + '.json')
    return 0


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------

def make_data(data_dir, nfiles, size_mib):
    files = []
    want = size_mib * MIB
    for i in range(1, nfiles + 1):
        name = f'soak-{i:02d}.bin'
        path = os.path.join(data_dir, name)
        files.append({'name': name, 'disk': path, 'size': want,
                      'sha256': random_file(path, size_mib, MIB)})
    with open(os.path.join(data_dir, 'expired.html'), 'wb') as f:
        f.write(EXPIRED_HTML)
    return files


class Origins:
    """The three seam-origins; restarts one on its port after a SIGKILL."""

    def __init__(self, binary, data_dir, work, pids):
        self.binary = binary
        self.data_dir = data_dir
        self.work = work
        self.pids = pids
        self.o = []
        self.stopped = set()        # indexes currently SIGSTOPped

    def start_all(self):
        for i in range(len(PROVIDERS)):
            o = Origin(self.binary, self.data_dir, os.path.join(self.work, f'origin{i + 1}'))
            o.start()
            self.pids.add(o.proc.pid)
            self.o.append(o)

    def restart(self, i, timeout=15.0):
        """Start origin i again on its port (the old one was killed)."""
        old = self.o[i]
        port = old.port
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            o = Origin(self.binary, self.data_dir, os.path.join(self.work, f'origin{i + 1}'),
                       extra_args=['--port', str(port)])
            try:
                o.start()
            except OriginError as e:
                last = e
                time.sleep(0.2)
                continue
            self.pids.add(o.proc.pid)
            self.o[i] = o
            return
        raise OriginError(f'{PROVIDERS[i]}: could not restart on port {port}: {last}')

    def stop_all(self):
        for i, o in enumerate(self.o):
            if o.proc is not None:
                pid = o.proc.pid
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
                self.stopped.discard(i)
                o.stop()
                self.pids.remove(pid)


def probe_hostile(origin, name):
    """Which hostile actions this seam-origin can do: each rule set on one asset's
    path and one ranged GET to see its effect (an older seam-origin refuses the
    key; a half-built one may take it and do nothing). Returns {action: None if
    it works, else why not}."""
    def works(action, resp):
        if action == 'html_200_close':
            return resp.status == 200 and (resp.getheader('Content-Type') or '').startswith(
                'text/html')
        if action == 'gzip':
            return (resp.getheader('Content-Encoding') or '').lower() == 'gzip'
        cr = resp.getheader('Content-Range') or ''
        try:
            a, b = cr.split()[1].split('/')[0].split('-')
            return resp.status == 206 and int(b) - int(a) + 1 == 65536
        except (IndexError, ValueError):
            return False
    out = {}
    for action, d in ACTIONS.items():
        if 'keys' not in d:
            continue
        try:
            origin.rule('/' + name, **d['keys'])
        except OriginError as e:
            out[action] = f'the seam-origin refuses the rule ({e})'
            continue
        conn = http.client.HTTPConnection('127.0.0.1', origin.port, timeout=5)
        try:
            conn.request('GET', '/' + name, headers={'Range': 'bytes=1000-'})
            resp = conn.getresponse()
            ok = works(action, resp)
            out[action] = None if ok else (
                f'the seam-origin takes {"&".join(f"{k}={v}" for k, v in d["keys"].items())} '
                f'but answered {resp.status} {resp.getheader("Content-Type")} '
                f'Content-Encoding {resp.getheader("Content-Encoding")} '
                f'Content-Range {resp.getheader("Content-Range")}')
        finally:
            conn.close()
    origin.clear()
    return out


class Chaos:
    """One action at a time on one origin; each action is put back before the
    next one starts, so the other two origins are always healthy."""

    def __init__(self, origins, files, t0, rng, log_path, available, short, mnt):
        self.mnt = mnt
        self.origins = origins
        self.files = files
        self.t0 = t0
        self.rng = rng
        self.log_f = open(log_path, 'w')
        self.available = available
        self.deck = []
        self.last = None
        self.records = []
        self.current = None         # the record of the action in progress
        self.errors = []            # the harness could not act or put back
        self.short = short
        self.lock = threading.Lock()
        self.origin_bytes = [0] * len(PROVIDERS)
        self.log_dropped = 0

    def log(self, line):
        now = time.monotonic() - self.t0
        text = f'+{now:7.2f}s {utc(time.time())} {line}'
        self.log_f.write(text + '\n')
        self.log_f.flush()
        print('chaos ' + text, file=sys.stderr, flush=True)

    def pick(self):
        # a shuffled deck of every action: each kind comes up once per round
        if not self.deck:
            self.deck = list(self.available)
            self.rng.shuffle(self.deck)
        action = self.deck.pop()
        # of the two origins not hit last, the one with more sessions: sessions
        # stay on their source until a cutover moves them, so the origin hit last
        # has few, and a rule only bites on new requests
        choices = [i for i in range(len(PROVIDERS)) if i != self.last]
        self.rng.shuffle(choices)
        try:
            with open(os.path.join(self.mnt, '.seamfs', 'status.json')) as f:
                st = json.load(f)
            sessions = {p['name']: p.get('sessions', 0) for p in st.get('providers', [])}
            choices.sort(key=lambda i: -sessions.get(PROVIDERS[i], 0))
        except (OSError, ValueError):
            pass
        i = choices[0]
        self.last = i
        return i, action

    def hold(self):
        return self.rng.uniform(2.0, 3.5) if self.short else self.rng.uniform(2.0, 6.0)

    def sleep_until(self, t, stop):
        while not stop.is_set() and time.monotonic() < t:
            stop.wait(min(0.2, max(0.0, t - time.monotonic())))

    def rule_all(self, o, **kw):
        for f in self.files:
            o.rule('/' + f['name'], **kw)

    def rule_offsets(self, o, **kw):
        offs = {}
        for f in self.files:
            off = self.rng.randrange(1, f['size'] - 1)
            offs[f['name']] = off
            o.rule('/' + f['name'], **{k: (off if v == 'OFF' else v) for k, v in kw.items()})
        return offs

    def drain(self, i):
        """Fetches origin i's log, adds its bytes to the count of bytes the
        origins sent, and clears it (rules too); returns the requests, or None
        when the origin did not answer."""
        o = self.origins.o[i]
        try:
            lg = o.log()
            o.clear()
        except (OriginError, OSError, ValueError):
            return None
        reqs = lg.get('requests', [])
        self.origin_bytes[i] += sum(r.get('bytes_sent', 0) for r in reqs)
        self.log_dropped += lg.get('log_dropped', 0)
        return reqs

    def drain_all(self):
        for i in range(len(PROVIDERS)):
            if i not in self.origins.stopped and self.origins.o[i].running:
                self.drain(i)

    def fired(self, reqs, action, offs):
        """How many requests for the assets the rule hit, from the origin's log:
        for an offset rule, the responses cut short exactly at OFF; for 503, the
        503s; for the others, every request during the window."""
        if reqs is None:
            return None
        names = {'/' + f['name'] for f in self.files}
        n = 0
        for r in reqs:
            if r.get('path') not in names:
                continue
            if offs:
                rng = r.get('range') or ''
                start = 0
                if rng.startswith('bytes=') and rng[6:].split('-', 1)[0].isdigit():
                    start = int(rng[6:].split('-', 1)[0])
                if not r.get('complete') and \
                        start + r.get('bytes_sent', 0) == offs.get(r['path'][1:]):
                    n += 1
            elif action == 'http_503':
                n += r.get('status') == 503
            else:
                n += 1
        return n

    def act(self, i, action, stop):
        o = self.origins.o[i]
        name = PROVIDERS[i]
        rec = {'origin': name, 'action': action, 'start': time.monotonic() - self.t0}
        with self.lock:
            self.current = rec
        hold = self.hold()
        detail = ''
        try:
            if action == 'sigstop':
                os.kill(o.proc.pid, signal.SIGSTOP)
                self.origins.stopped.add(i)
                detail = f'SIGSTOP pid {o.proc.pid}, SIGCONT after {hold:.1f} s'
                self.log(f'{name} sigstop: {detail}')
                self.sleep_until(time.monotonic() + hold, stop)
                os.kill(o.proc.pid, signal.SIGCONT)
                self.origins.stopped.discard(i)
            elif action == 'sigkill':
                pid = o.proc.pid
                self.drain(i)
                o.proc.kill()
                o.proc.wait(5)
                self.origins.pids.remove(pid)
                o.stop()
                pause = hold / 2
                self.log(f'{name} sigkill: SIGKILL pid {pid}, restart on port {o.port} '
                         f'after {pause:.1f} s')
                self.sleep_until(time.monotonic() + pause, stop)
                self.origins.restart(i)
                detail = (f'SIGKILL pid {pid}, restarted on port {o.port} as pid '
                          f'{self.origins.o[i].proc.pid} after {pause:.1f} s')
            elif action == 'down_drop':
                o.down(drop=True)
                detail = f'/_ctl/down?drop=1, /_ctl/up after {hold:.1f} s'
                self.log(f'{name} down_drop: {detail}')
                self.sleep_until(time.monotonic() + hold, stop)
                o.up()
            else:
                if self.drain(i) is None:
                    raise OriginError('could not read the log and clear it')
                if action == 'stall':
                    stall_ms = self.rng.randrange(3000, 8001)
                    offs = self.rule_offsets(o, stall_at='OFF', stall_ms=stall_ms, count=1)
                    detail = f'stall_at=OFF&stall_ms={stall_ms}&count=1'
                elif action == 'reset':
                    offs = self.rule_offsets(o, reset_at='OFF', count=1)
                    detail = 'reset_at=OFF&count=1'
                elif action == 'http_503':
                    offs = None
                    self.rule_all(o, status=503, count=3)
                    detail = 'status=503&count=3'
                else:
                    offs = None
                    keys = ACTIONS[action]['keys']
                    self.rule_all(o, **keys)
                    detail = '&'.join(f'{k}={v}' for k, v in keys.items())
                detail += f' on every asset for {hold:.1f} s'
                if offs:
                    rec['offsets'] = offs
                self.log(f'{name} {action}: {detail}'
                         + (' (OFF per file: ' + ', '.join(f'{k} {v}' for k, v in offs.items())
                            + ')' if offs else ''))
                self.sleep_until(time.monotonic() + hold, stop)
                reqs = self.drain(i)
                if reqs is None:
                    raise OriginError('could not read the log and clear the rules')
                n = self.fired(reqs, action, offs)
                rec['fired'] = n
        except Exception as e:  # noqa: BLE001 - recorded; the run breaks (exit 2)
            msg = f'{name} {action}: the harness failed: {type(e).__name__}: {e}'
            self.errors.append(msg)
            self.log('ERROR ' + msg)
            rec['error'] = msg
        rec['end'] = time.monotonic() - self.t0
        rec['detail'] = detail
        with self.lock:
            self.current = None
            self.records.append(rec)
        self.log(f'{name} {action}: over ({rec["end"] - rec["start"]:.1f} s)'
                 + (f'; the rule hit {rec["fired"]} request(s)' if rec.get('fired') is not None
                    else ''))
        return rec

    def loop(self, start_at, end_at, stop):
        self.sleep_until(start_at, stop)
        while not stop.is_set() and time.monotonic() < end_at - 2.0 and not self.errors:
            i, action = self.pick()
            self.act(i, action, stop)
            self.drain_all()        # no rule is set now; the logs stay short
            # a pause with every origin healthy; a stall has ended by then
            gap = self.rng.uniform(1.0, 2.0) if self.short else self.rng.uniform(1.0, 4.0)
            self.sleep_until(time.monotonic() + gap, stop)

    def active(self):
        with self.lock:
            c = self.current
        return f'{c["origin"]} {c["action"]}' if c else ''

    def context(self, t0, t1):
        """The chaos action(s) overlapping [t0, t1] (seconds from the start)."""
        with self.lock:
            recs = list(self.records)
            cur = dict(self.current) if self.current else None
        if cur:
            cur['end'] = None
            recs.append(cur)
        hits = [r for r in recs if r['start'] <= t1 and (r['end'] is None or r['end'] >= t0)]
        if hits:
            return '; '.join(f"{r['origin']} {r['action']} (+{r['start']:.1f} to "
                             + ('…' if r['end'] is None else f"+{r['end']:.1f}") + ' s)'
                             for r in hits)
        before = [r for r in recs if r['end'] is not None and r['end'] < t0]
        if before:
            r = max(before, key=lambda r: r['end'])
            return (f"none (last: {r['origin']} {r['action']}, over {t0 - r['end']:.1f} s "
                    f"before)")
        return 'none'


class Sampler(threading.Thread):
    """Every second: the daemon's VmRSS and open fds, summed over the
    process and its descendants (seamfs's keeper and worker)."""

    def __init__(self, pid, t0, chaos):
        super().__init__(daemon=True)
        self.pid = pid
        self.t0 = t0
        self.chaos = chaos
        self.samples = []
        self.stop_ev = threading.Event()
        self.dead_at = None

    def sample(self):
        t = time.monotonic() - self.t0
        rss = fds = None
        for pid in tree_pids(self.pid):
            try:
                with open(f'/proc/{pid}/status') as f:
                    for ln in f:
                        if ln.startswith('VmRSS:'):
                            rss = (rss or 0) + int(ln.split()[1]) * 1024
                fds = (fds or 0) + len(os.listdir(f'/proc/{pid}/fd'))
            except (OSError, ValueError):
                if pid != self.pid:
                    continue    # a worker that just ended
                break
        if rss is None or fds is None:  # gone, or a zombie (no VmRSS)
            if self.dead_at is None:
                self.dead_at = t
            return
        self.samples.append({'t': round(t, 2), 'rss': rss, 'fds': fds,
                             'chaos': self.chaos.active()})

    def run(self):
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            self.sample()
            nxt += 1.0
            self.stop_ev.wait(max(0.0, nxt - time.monotonic()))


def read_json(path):
    with open(path) as f:
        return json.load(f)


def metrics_subset(text):
    keep = ('seamfs_read_latency_seconds_count', 'seamfs_read_latency_seconds_sum',
            'seamfs_streams_total', 'seamfs_stream_restarts_total',
            'seamfs_direct_reads_total', 'seamfs_fallback_exhausted_total',
            'seamfs_provider_answers_total', 'seamfs_cutovers_total',
            'seamfs_verifications_total', 'seamfs_readahead_used_bytes')
    out = {}
    for ln in text.splitlines():
        if ln.startswith('#') or not ln.strip():
            continue
        name = ln.split('{', 1)[0].split(' ', 1)[0]
        if name in keep:
            key, _, val = ln.rpartition(' ')
            try:
                out[key] = float(val)
            except ValueError:
                pass
    return out


def run(args):
    rng = random.Random(args.seed)
    out = args.out
    os.makedirs(os.path.join(out, 'readers'), exist_ok=True)
    for n in os.listdir(os.path.join(out, 'readers')):
        os.unlink(os.path.join(out, 'readers', n))
    data_dir = os.path.join(args.work, 'data')
    os.makedirs(data_dir, exist_ok=True)
    mnt = os.path.join(args.work, 'mnt')
    os.makedirs(mnt, exist_ok=True)
    state = os.path.join(args.work, 'state')
    subprocess.run(['rm', '-rf', state], check=True)
    os.makedirs(state)
    files = make_data(data_dir, args.files, args.size_mib)
    pids = Pids(args.pidfile)
    origins = Origins(args.origin, data_dir, args.work, pids)
    proc = None
    readers = []
    harness = []        # what broke the harness (exit 2)
    failures = []       # seamfs failures found by the harness itself (exit 1)
    chaos = None
    sampler = None
    stop_chaos = threading.Event()
    daemon_rc = None
    status = metrics = None
    log_path = os.path.join(out, 'seamfs.log')
    t_start = time.monotonic()
    try:
        origins.start_all()
        why_not = probe_hostile(origins.o[0], files[0]['name'])
        available = [a for a in ACTIONS if not why_not.get(a)]
        skipped = [(a, w) for a, w in why_not.items() if w]
        args.skipped_why = dict(skipped)
        say('origins: ' + ', '.join(f'{PROVIDERS[i]} {o.base_url} (pid {o.proc.pid})'
                                    for i, o in enumerate(origins.o)) + f', serving {data_dir}')
        for a, why in skipped:
            say(f'note: chaos action {a} skipped: {why}')
        catalog = os.path.join(args.work, 'catalog.json')
        with open(catalog, 'w') as f:
            json.dump({'providers': [{'name': p} for p in PROVIDERS],
                       'assets': [{'id': fi['name'][:-4], 'path': 'soak/' + fi['name'],
                                   'size': fi['size'], 'sha256': fi['sha256'],
                                   'mtime': 1700000000,
                                   'sources': [{'url': o.url(fi['name']), 'provider': p}
                                               for p, o in zip(PROVIDERS, origins.o)]}
                                  for fi in files]}, f, indent=1)
        for fi in files:
            fi['mount'] = os.path.join(mnt, 'soak', fi['name'])
            with open(fi['disk'], 'rb') as f:      # a warm server: data in the page cache
                while f.read(16 * MIB):
                    pass
        opts = [f'state_dir={state}', f'read_timeout={READ_TIMEOUT}', 'standby_delay=0',
                f'stall_timeout={STALL_TIMEOUT}']
        if args.opts:
            opts.append(args.opts)
        argv = [args.seamfs, '-f', '-o', ','.join(opts), catalog, mnt]
        say('mount: ' + ' '.join(argv))
        with open(log_path, 'wb') as logf:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                    start_new_session=True, env=daemon_env())
        pids.add(proc.pid)
        deadline = time.monotonic() + MOUNT_WAIT
        while not fs_mounted(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'seamfs did not mount (exit {proc.poll()}); log: {log_path}')
            time.sleep(0.05)
        for fi in files:
            st = os.stat(fi['mount'])
            if st.st_size != fi['size']:
                raise RuntimeError(f"{fi['mount']}: size {st.st_size}, want {fi['size']}")

        t0 = time.monotonic()
        args.wall0 = time.time() - (time.monotonic() - t0)
        end_at = t0 + args.duration
        spec = {'files': files, 't0': t0, 'deadline': end_at, 'seed': args.seed, 'out': out}
        spec_path = os.path.join(out, 'readers', 'spec.json')
        with open(spec_path, 'w') as f:
            json.dump(spec, f)
        chaos = Chaos(origins, files, t0, rng, os.path.join(out, 'chaos.log'), available,
                      args.duration < 120, mnt)
        sampler = Sampler(proc.pid, t0, chaos)
        sampler.start()
        nseq = sum(1 for r in range(args.readers) if r % 4 != 3)
        say(f'{args.readers} readers ({nseq} sequential 1 MiB reads, '
            f'{args.readers - nseq} random 4 MiB runs) over {len(files)} files x '
            f'{args.size_mib} MiB for {args.duration} s; chaos on '
            f'{", ".join(PROVIDERS)}, one at a time: {", ".join(available)}')
        for rid in range(args.readers):
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), 'reader',
                                  spec_path, str(rid)], stdin=subprocess.DEVNULL)
            pids.add(p.pid)
            readers.append(p)
        warmup = min(5.0, max(2.0, args.duration * 0.05))
        cthread = threading.Thread(target=chaos.loop, args=(t0 + warmup, end_at, stop_chaos),
                                   daemon=True)
        cthread.start()
        # progress every 10 s (every 30 s for long runs) until the end
        step = 10.0 if args.duration <= 120 else 30.0
        nxt = t0 + step
        while time.monotonic() < end_at:
            time.sleep(min(0.5, max(0.0, end_at - time.monotonic())))
            if proc.poll() is not None and not any('daemon' in x for x in failures):
                failures.append(f'the daemon exited during the soak (status {proc.returncode}); '
                                f'log: {log_path}')
                say('ERROR: ' + failures[-1])
            if time.monotonic() >= nxt:
                nxt += step
                s = sampler.samples[-1] if sampler.samples else None
                say(f'+{time.monotonic() - t0:.0f} s: '
                    + (f'RSS {s["rss"] / MIB:.0f} MiB, {s["fds"]} fds' if s else 'no sample')
                    + (f', chaos: {chaos.active()}' if chaos.active() else ''))
        stop_chaos.set()
        cthread.join(60)
        if cthread.is_alive():
            harness.append('the chaos thread did not end within 60 s')
        harness.extend(chaos.errors)
        # readers end at the deadline, each after its read in flight (bounded by
        # read_timeout); one that is still there later hangs
        wait_until = end_at + READ_TIMEOUT + 15
        for rid, p in enumerate(readers):
            try:
                p.wait(max(0.1, wait_until - time.monotonic()))
            except subprocess.TimeoutExpired:
                failures.append(f'reader {rid} (pid {p.pid}) still running '
                                f'{READ_TIMEOUT + 15} s after the end: a read hangs '
                                f'(read_timeout={READ_TIMEOUT})')
                say('ERROR: ' + failures[-1])
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            pids.remove(p.pid)
        t_end = time.monotonic()
        sampler.stop_ev.set()
        sampler.join(5)
        chaos.drain_all()
        try:
            status = read_json(os.path.join(mnt, '.seamfs', 'status.json'))
            with open(os.path.join(out, 'status.json'), 'w') as f:
                json.dump(status, f, indent=1)
            with open(os.path.join(mnt, '.seamfs', 'metrics')) as f:
                metrics = f.read()
            with open(os.path.join(out, 'metrics'), 'w') as f:
                f.write(metrics)
        except (OSError, ValueError) as e:
            failures.append(f'could not read .seamfs/status.json or metrics at the end: {e}')
    except Exception as e:  # noqa: BLE001 - the harness broke
        harness.append(f'{type(e).__name__}: {e}')
        say('HARNESS ERROR: ' + harness[-1])
        t_end = time.monotonic()
    finally:
        stop_chaos.set()
        for p in readers:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            pids.remove(p.pid)
        if sampler is not None:
            sampler.stop_ev.set()
        if proc is not None:
            unmount(mnt, tries=40)
            try:
                daemon_rc = proc.wait(15)
            except subprocess.TimeoutExpired:
                failures.append('the daemon did not exit within 15 s of the unmount')
                say('ERROR: ' + failures[-1] + '; stopping it with SIGTERM')
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
                daemon_rc = proc.returncode
            pids.remove(proc.pid)
        origins.stop_all()
    if harness and not readers:
        say(f'the harness broke before the readers started: {"; ".join(harness)}')
        return 2
    return report(args, files, readers, chaos, sampler, status, metrics, daemon_rc, log_path,
                  failures, harness, t_end - t_start, out)


def report(args, files, readers, chaos, sampler, status, metrics, daemon_rc, log_path,
           failures, harness, wall, out):
    res = []
    lat = array.array('d')
    for rid in range(len(readers)):
        base = os.path.join(out, 'readers', f'r{rid:02d}')
        try:
            res.append(read_json(base + '.json'))
            with open(base + '.lat', 'rb') as f:
                lat.frombytes(f.read())
        except (OSError, ValueError):
            harness.append(f'reader {rid} left no result (it died or was killed)')
    lat = sorted(lat)
    fails = [x for r in res for x in r['failures']]
    fails.sort(key=lambda x: x['t1'])
    wall0 = getattr(args, 'wall0', 0.0)
    for x in fails:
        x['chaos'] = chaos.context(x['t0'], x['t1']) if chaos else '-'
        x['wall'] = utc(wall0 + x['t1'])
    slow = sorted((tuple(s) for r in res for s in r['slowest']), reverse=True)[:TOP]
    slowest = [{'duration_s': d, 'file': fn, 'offset': off, 'bytes': n, 't': t,
                'wall': utc(wall0 + t), 'chaos': chaos.context(t, t + d) if chaos else '-'}
               for d, t, fn, off, n in slow]
    total_bytes = sum(r['bytes'] for r in res)
    total_reads = sum(r['reads'] for r in res)
    samples = sampler.samples if sampler else []
    rss = sorted(s['rss'] for s in samples)
    fds = [s['fds'] for s in samples]
    fetched = sum(chaos.origin_bytes) if chaos else None
    # sanitizer reports and warnings in the daemon's log
    san, warns = [], 0
    try:
        with open(log_path, errors='replace') as f:
            for ln in f:
                if ('ERROR: AddressSanitizer' in ln or 'ERROR: LeakSanitizer' in ln
                        or 'runtime error:' in ln or 'ThreadSanitizer' in ln):
                    san.append(ln.rstrip())
                elif ' warn' in ln.lower() or ' error' in ln.lower():
                    warns += 1
    except OSError:
        pass
    if san:
        failures.append(f'sanitizer report(s) in the daemon log ({log_path}): {san[0][:200]}')
    if daemon_rc not in (0, None) and not any('exited' in x for x in failures):
        failures.append(f'the daemon exited with status {daemon_rc} after the unmount '
                        f'(log: {log_path})')
    cut = (status or {}).get('cutovers', {})
    unusable = []
    for a in (status or {}).get('assets', []):
        for s in a.get('sources', []):
            if s.get('verification') in ('rejected', 'abandoned', 'dead'):
                unusable.append(f"{a['id']} {s['provider']}: {s['verification']}"
                                + (f" ({s['why']})" if s.get('why') else ''))
    by_kind = {}
    for r in res:
        for k, v in r['fail_counts'].items():
            by_kind[k] = by_kind.get(k, 0) + v
    wrong = sum(v for k, v in by_kind.items() if k in ('wrong_bytes', 'wrong_sha256'))
    errors = sum(v for k, v in by_kind.items() if k not in ('wrong_bytes', 'wrong_sha256'))
    crecs = chaos.records if chaos else []
    counts = {}
    for c in crecs:
        counts[c['action']] = counts.get(c['action'], 0) + 1
    skipped = [a for a in ACTIONS if chaos and a not in chaos.available]
    skipped_why = getattr(args, 'skipped_why', {})
    # per-second timeline: reader bytes/reads/max latency, daemon samples, chaos
    tl = {}
    for r in res:
        for sec, (b, n, mx) in r['timeline'].items():
            e = tl.setdefault(int(sec), [0, 0, 0.0])
            e[0] += b
            e[1] += n
            e[2] = max(e[2], mx)
    timeline = [{'t': s, 'bytes': tl[s][0], 'reads': tl[s][1], 'max_read_s': round(tl[s][2], 4)}
                for s in sorted(tl)]
    if harness:
        verdict = 'HARNESS BROKE' + (' + FAILURES' if by_kind or failures else '')
        rc = 1 if wrong else 2
    elif by_kind or failures:
        verdict, rc = 'FAIL', 1
    else:
        verdict, rc = 'PASS', 0
    nseq = sum(1 for r in res if r['mode'] == 'seq')
    p50, p99 = nearest_rank(lat, 0.50), nearest_rank(lat, 0.99)
    summary = {
        'result': verdict, 'exit': rc,
        'duration_s': args.duration, 'wall_s': round(wall, 1), 'readers': args.readers,
        'sequential_readers': nseq, 'random_readers': len(res) - nseq,
        'files': args.files, 'size_mib': args.size_mib, 'cpus': os.cpu_count(),
        'kernel': os.uname().release, 'seamfs': args.seamfs, 'origin': args.origin,
        'options': args.opts, 'stall_timeout': STALL_TIMEOUT, 'read_timeout': READ_TIMEOUT,
        'bytes_checked': total_bytes, 'reads': total_reads,
        'mb_per_s': total_bytes / 1e6 / args.duration,
        'whole_passes': sum(r['passes'] for r in res),
        'whole_passes_sha256_ok': sum(r['passes_sha_ok'] for r in res),
        'partial_passes': sum(r['partial_passes'] for r in res),
        'random_runs': sum(r['runs'] for r in res),
        'short_reads': sum(r['short_reads'] for r in res),
        'latency_s': {'p50': p50, 'p99': p99, 'max': lat[-1] if lat else None},
        'slowest': slowest,
        'rss_bytes': {'min': rss[0] if rss else None,
                      'median': statistics.median(rss) if rss else None,
                      'max': rss[-1] if rss else None},
        'fds': {'min': min(fds) if fds else None, 'max': max(fds) if fds else None},
        'origin_bytes_sent': fetched,
        'origin_bytes_sent_by_origin': dict(zip(PROVIDERS, chaos.origin_bytes)) if chaos else None,
        'origin_log_dropped': chaos.log_dropped if chaos else None,
        'cutovers': {'total': cut.get('total'), 'by_reason': cut.get('by_reason'),
                     'fallback_exhausted': cut.get('fallback_exhausted'),
                     'verifications': cut.get('verifications')},
        'sources_unusable_at_end': unusable,
        'providers_at_end': [{k: p.get(k) for k in ('name', 'state', 'why', 'sessions')}
                             for p in (status or {}).get('providers', [])],
        'metrics': metrics_subset(metrics) if metrics else None,
        'errors': errors, 'wrong_bytes': wrong, 'failures_by_kind': by_kind,
        'failures': fails, 'harness_failures': failures, 'harness_errors': harness,
        'daemon_exit': daemon_rc, 'daemon_log_warnings': warns, 'sanitizer': san[:20],
        'chaos': {'actions': crecs, 'counts': counts,
                  'skipped': {a: skipped_why.get(a, '') for a in skipped}},
        'samples': samples, 'timeline': timeline,
    }
    with open(os.path.join(out, 'soak.json'), 'w') as f:
        json.dump(summary, f, indent=1)

    def mib(v):
        return '-' if v is None else f'{v / MIB:.1f}'
    rows = [
        ('bytes read and checked', f'{fmt_bytes(total_bytes)} ({summary["mb_per_s"]:.0f} MB/s); '
                                   f'whole-file SHA-256 {summary["whole_passes_sha256_ok"]}'
                                   f'/{summary["whole_passes"]} passes, '
                                   f'{summary["random_runs"]} random 4 MiB runs'),
        ('reads', f'{total_reads} ({summary["short_reads"]} short); the daemon answered '
                  + ('-' if not metrics else
                     f"{metrics_subset(metrics).get('seamfs_read_latency_seconds_count', 0):.0f}")
                  + ' FUSE reads'),
        ('read latency p50 / p99 / max', f'{fmt_ms(p50)} / {fmt_ms(p99)} / '
                                         f'{fmt_ms(lat[-1] if lat else None)}'),
    ]
    if slowest:
        s = slowest[0]
        rows.append(('slowest read', f"{s['file']} @ {s['offset']} ({s['bytes']} B), "
                                     f"{s['duration_s'] * 1000:.0f} ms from +{s['t']:.2f} s "
                                     f"({s['wall']}), chaos: {s['chaos']}"))
    else:
        rows.append(('slowest read', '-'))
    rows += [
        ('daemon RSS min / median / max', f'{mib(summary["rss_bytes"]["min"])} / '
                                          f'{mib(summary["rss_bytes"]["median"])} / '
                                          f'{mib(summary["rss_bytes"]["max"])} MiB '
                                          f'({len(samples)} samples)'),
        ('daemon fds min / max', f'{summary["fds"]["min"]} / {summary["fds"]["max"]}'),
        ('bytes the origins sent', '-' if fetched is None else
         f'{fmt_bytes(fetched)} ({fetched / max(1, total_bytes):.2f} per byte checked; '
         'from their logs, less what a SIGKILL lost)'),
        ('cutovers', '-' if not cut else f"{cut.get('total')}: " + (', '.join(
            f'{k} {v}' for k, v in sorted((cut.get('by_reason') or {}).items())) or 'none')),
        ('fallback_exhausted', str(cut.get('fallback_exhausted', '-'))),
        ('verifications', '-' if not cut.get('verifications') else ', '.join(
            f'{k} {v}' for k, v in cut['verifications'].items())),
        ('sources unusable at end', str(len(unusable)) + (': ' + '; '.join(unusable[:4])
                                                          if unusable else '')),
        ('chaos actions', f'{len(crecs)}: ' + ', '.join(f'{k} {v}' for k, v in counts.items())
         + (f' (skipped: {", ".join(skipped)})' if skipped else '')),
        ('daemon exit / log warnings', f'{daemon_rc} / {warns}'),
        ('errors', str(errors)),
        ('wrong bytes', str(wrong)),
        ('result', verdict),
    ]
    print()
    print(f'soak: {args.duration} s, {len(readers)} readers ({nseq} sequential, '
          f'{len(res) - nseq} random), {args.files} files x {args.size_mib} MiB, 3 seam-origins '
          f'(chaos one at a time), stall_timeout={STALL_TIMEOUT} s, {os.cpu_count()} CPUs')
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f'{k:<{w}}  {v}')
    if by_kind or failures or harness:
        print('\nERRORS')
        for x in fails[:50]:
            print(f"  +{x['t1']:.2f} s ({x['wall']}) reader {x['reader']} ({x['mode']}): "
                  f"{x['kind']}: {x['file']} offset {x['offset']}: {x['msg']}; "
                  f"chaos: {x['chaos']}")
        if errors + wrong > 50:
            print(f'  ... {errors + wrong} in all (by kind: '
                  + ', '.join(f'{k} {v}' for k, v in sorted(by_kind.items()))
                  + '); soak.json keeps the first 200 of each reader')
        for x in failures:
            print(f'  {x}')
        for x in harness:
            print(f'  harness: {x}')
    slow_beyond = [x for x in slowest if x['duration_s'] > STALL_TIMEOUT + 0.5]
    if slow_beyond:
        print(f'\nSLOW READS: longer than stall_timeout + 0.5 s (of the {TOP} slowest)')
        for x in slow_beyond:
            print(f"  {x['duration_s'] * 1000:.0f} ms: {x['file']} @ {x['offset']}, from "
                  f"+{x['t']:.2f} s ({x['wall']}); chaos: {x['chaos']}")
    print(f'\nall of it: {os.path.join(out, "soak.json")}; chaos log: '
          f'{os.path.join(out, "chaos.log")}; daemon log: {log_path}')
    return rc


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == 'reader':
        if len(sys.argv) != 4:
            print('usage: soak.py reader SPEC ID', file=sys.stderr)
            return 2
        return reader_main(sys.argv[2], int(sys.argv[3]))
    ap = argparse.ArgumentParser()
    ap.add_argument('cmd', choices=['run'])
    ap.add_argument('--seamfs', required=True)
    ap.add_argument('--origin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--pidfile', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--duration', type=int, default=600)
    ap.add_argument('--readers', type=int, default=32)
    ap.add_argument('--files', type=int, default=8)
    ap.add_argument('--size-mib', type=int, default=256)
    ap.add_argument('--opts', default='')
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--own-group', action='store_true',
                    help="leave the caller's process group (soak.sh): a Ctrl-C then reaches "
                         'soak.sh alone, whose trap stops this helper, which stops the origins '
                         'and readers in order')
    args = ap.parse_args()
    if args.own_group:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), 'little')
    if args.duration < 10 or args.readers < 1 or args.files < 1 or args.size_mib < 8:
        ap.error('--duration at least 10, --readers and --files at least 1, '
                 '--size-mib at least 8')
    # SIGTERM (soak.sh's trap) and Ctrl-C end the run through the finally blocks
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    say(f'seed {args.seed}')
    try:
        return run(args)
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        say(f'harness error: {type(e).__name__}: {e}')
        return 2


if __name__ == '__main__':
    sys.exit(main())
