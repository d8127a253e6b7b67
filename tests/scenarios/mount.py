#!/usr/bin/env python3
"""The scenario checker through a real mount (`tests/scenarios/run --mount`).

    mount.py [--count N] [--seed S | --seeds S1,S2,...] [--build DIR] [--batch B] [--parallel P]
             [--clean] [--verbose]

Scenario k (k = 0 .. N-1) is built from its seed S+k alone
(random.Random(seed)): one asset of a random size with 2-4 sources, each
on a seam-origin of its own or sharing one with another source of the
scenario (other paths), or on the batch's nginx. A source is, at random:

  ok       the file, no fault            nginx    the file, served by nginx
  slow     the file, headers after <= 1.5 s (less than stall_timeout)
  differ   1 B - 4 KiB differ at a random offset (no transport fault)
  size     another size (shorter or longer), otherwise the file's bytes
  kill     the file; its seam-origin is SIGKILLed (by PID) at a random
           moment of the read (once the reader has passed a random byte)
  stall    the file, stalls for good at a random offset
  drip     the file, from a seam-origin capped at 1-4 KB/s
  reset    the file, TCP reset at a random offset (every request over it)
  5xx      500/502/503 to every request       404   404 to every request
  badlen   a Content-Length/Content-Range that disagrees with the size
  notasset gzip-encoded or text/html answers of the file

and a reader pattern: sequential (paced, so a kill lands mid-read), random
seeks, or a scan's head and tail. Batches of B scenarios share one mount
(`build/seamfs -f`, one catalog with every asset), P readers at once.

--clean: every source is the file without a fault (the checker's own check:
it must find nothing). --verbose: a line per scenario.

Invariants, per scenario:
  bytes    every byte read equals the bytes of one source, the same one for
           the whole read (the served source; the SHA-256 of a whole
           sequential read equals that source file's);
  failures a read fails (EIO, a short read) only when some source that may
           have served it has no identical source that can serve (no
           transport fault, the right size);
  hangs    no read takes longer than HANG_S (a generous bound: the daemon
           promises read_timeout + 1 s; timings are not asserted here).

Per violation: the seed, what broke, the daemon's log lines of the asset, and
a replay command. The last line is exactly `scenarios: N run, V violations`;
exit status 1 if V > 0, 2 if the harness itself broke.
"""

import argparse
import errno
import hashlib
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / 'tests' / 'integration'))
sys.dont_write_bytecode = True      # no __pycache__ in the source tree

from conftest import Mounter, Nginx, sha256_bytes  # noqa: E402  (the harness's own)
from origin import Origin  # noqa: E402

KIB = 1024
MIB = 1024 * KIB
READ_TIMEOUT = 8                  # the mount's read_timeout (s)
HANG_S = 2 * READ_TIMEOUT + 5     # a read longer than this hangs
SETTINGS = ['stall_timeout=3', 'log_level=info']

# (kind, weight) for the first source and for the others
FIRST = [('ok', 4), ('nginx', 1), ('slow', 1), ('differ', 1), ('size', 1), ('kill', 5),
         ('stall', 2), ('drip', 2), ('reset', 2), ('5xx', 1), ('404', 1), ('badlen', 1),
         ('notasset', 1)]
OTHER = [('ok', 6), ('nginx', 2), ('slow', 1), ('differ', 2), ('size', 1), ('kill', 1),
         ('stall', 1), ('drip', 1), ('reset', 1), ('5xx', 1), ('404', 1), ('badlen', 1),
         ('notasset', 1)]
# --clean: the checker's own check, nothing may fail
CLEAN = [('ok', 3), ('nginx', 1)]
# may deliver the asset's bytes to a reader (the others never should: another
# size, an error status, an answer that is not the asset)
SERVABLE = {'ok', 'nginx', 'slow', 'differ', 'kill', 'stall', 'drip', 'reset'}
# serve every byte of their content, at a reader's pace, to the end
HEALTHY = {'ok', 'nginx', 'slow', 'differ'}
OWN_ORIGIN = {'kill', 'drip'}     # a fault of the whole server


def pick(r, table):
    total = sum(w for _, w in table)
    x = r.randrange(total)
    for kind, w in table:
        if x < w:
            return kind
        x -= w
    raise AssertionError('unreachable')


class Source:
    def __init__(self, index, kind):
        self.index = index
        self.kind = kind
        self.rule = {}          # seam-origin rule keys for its path
        self.rate = 0           # drip: the server's --rate
        self.kill_after = None  # kill: reader progress (bytes) that triggers it
        self.kill_delay = 0.0
        self.shared = False     # on the scenario's shared seam-origin
        self.file = None        # Path of its bytes
        self.url = None
        self.origin = None
        self.data = None        # its bytes (for the checks)
        self.describe = kind


class Scenario:
    """Everything random about one scenario comes from its seed."""

    def __init__(self, seed, clean=False):
        self.seed = seed
        self.aid = f's{seed}'
        r = random.Random(seed)
        self.size = (r.randrange(64 * KIB, 1 * MIB) if r.random() < 0.4
                     else r.randrange(1 * MIB, 4 * MIB))
        n = r.randint(2, 4)
        table = (lambda i: CLEAN) if clean else (lambda i: FIRST if i == 0 else OTHER)
        self.sources = [Source(i, pick(r, table(i))) for i in range(n)]
        self.pattern = r.choice(['seq', 'seeks', 'headtail'])
        self.reads = self._reads(r)
        # a kill lands before the last read at the latest
        before_last = sum(n for _, n in self.reads[:-1])
        for s in self.sources:
            self._params(r, s, before_last)
        self.pace = r.uniform(0.3, 2.0)     # the reader's seconds, paced
        self.violations = []
        self.notes = []

    def _reads(self, r):
        size = self.size
        if self.pattern == 'seq':
            chunk = r.choice([16 * KIB, 64 * KIB, 128 * KIB, 256 * KIB])
            return [(off, min(chunk, size - off)) for off in range(0, size, chunk)]
        if self.pattern == 'headtail':
            head = min(size, r.choice([4 * KIB, 64 * KIB, 512 * KIB]))
            tail = min(size, r.choice([4 * KIB, 64 * KIB, 512 * KIB]))
            return [(0, head), (size - tail, tail)]
        out = []
        for _ in range(r.randint(4, 12)):
            n = r.randint(1, min(size, 512 * KIB))
            out.append((r.randrange(0, size - n + 1), n))
        return out

    def _params(self, r, s, total):
        size = self.size
        k = s.kind
        if k == 'slow':
            s.rule = {'delay_ms': r.randint(200, 1500)}
        elif k == 'differ':
            off = r.randrange(size)
            s.diff = (off, min(size - off, r.randint(1, 4 * KIB)))
        elif k == 'size':
            s.newsize = (r.randrange(size // 2, size) if r.random() < 0.5
                         else size + r.randint(1, 64 * KIB))
        elif k == 'kill':
            s.kill_after = r.randint(0, total)
            s.kill_delay = r.uniform(0, 0.3)
        elif k == 'stall':
            s.rule = {'stall_at': r.randrange(size), 'stall_ms': 600000}
        elif k == 'drip':
            s.rate = r.choice([1000, 4000])
        elif k == 'reset':
            s.rule = {'reset_at': r.randrange(1, size)}
        elif k == '5xx':
            s.rule = {'status': r.choice([500, 502, 503])}
        elif k == '404':
            s.rule = {'status': 404}
        elif k == 'badlen':
            s.rule = (r.choice([{'length_delta': r.choice([-1, 1, 4096])},
                                {'content_range': r.choice(['shift', 'total', 'missing'])}]))
        elif k == 'notasset':
            s.rule = r.choice([{'content_encoding': 'gzip'},
                               {'content_type': 'text/html; charset=utf-8'}])
        s.shared = k not in OWN_ORIGIN and k != 'nginx' and r.random() < 0.3
        s.describe = k + (' ' + ','.join(f'{a}={b}' for a, b in s.rule.items())
                          if s.rule else '')
        if k == 'differ':
            s.describe += f' at {s.diff[0]}+{s.diff[1]}'
        elif k == 'size':
            s.describe += f' {s.newsize} B'
        elif k == 'kill':
            s.describe += f' after {s.kill_after} B read'
        elif k == 'drip':
            s.describe += f' {s.rate} B/s'

    def summary(self):
        srcs = '; '.join(f'{s.index}:{s.describe}' for s in self.sources)
        return f'{self.size} B, {self.pattern} ({len(self.reads)} reads), sources [{srcs}]'

    # -- files and servers ----------------------------------------------

    def make_files(self, data_dir):
        """The scenario's files under data_dir/AID/: the base file and each
        source's own path (a hard link of it, or its changed copy)."""
        d = data_dir / self.aid
        d.mkdir()
        r = random.Random(self.seed ^ 0x5EED)
        base = r.randbytes(self.size)
        (d / 'base.bin').write_bytes(base)
        for s in self.sources:
            s.file = d / f'src{s.index}.bin'
            if s.kind == 'differ':
                off, n = s.diff
                b = bytearray(base)
                for i in range(off, off + n):
                    b[i] ^= 0x5A
                s.data = bytes(b)
                s.file.write_bytes(s.data)
            elif s.kind == 'size':
                s.data = base[:s.newsize] + r.randbytes(max(0, s.newsize - self.size))
                s.file.write_bytes(s.data)
            else:
                s.data = base
                os.link(d / 'base.bin', s.file)

    def start_origins(self, binary, data_dir, work, nginx):
        shared = None
        for s in self.sources:
            rel = f'{self.aid}/src{s.index}.bin'
            if s.kind == 'nginx':
                s.url = nginx.url(rel)
                continue
            if s.shared and shared is not None:
                s.origin = shared
            else:
                args = ['--rate', str(s.rate)] if s.rate else []
                s.origin = Origin(binary, str(data_dir), str(work / f'{self.aid}-o{s.index}'),
                                  extra_args=args).start()
                if s.shared:
                    shared = s.origin
            s.url = s.origin.url(rel)
            if s.rule:
                s.origin.rule('/' + rel, **s.rule)

    def origins(self):
        seen = []
        for s in self.sources:
            if s.origin is not None and s.origin not in seen:
                seen.append(s.origin)
        return seen

    def providers(self):
        """A provider per source, named so that their order is the sources'
        (a new session takes the first name among equals): which source
        serves first does not hang on the ports the kernel picked."""
        return [{'name': f'{self.aid}-{s.index}'} for s in self.sources]

    def catalog_entry(self):
        return {'id': self.aid, 'path': f'S/{self.aid}.bin', 'size': self.size,
                'sources': [{'url': s.url, 'provider': f'{self.aid}-{s.index}'}
                            for s in self.sources]}

    # -- the checks -------------------------------------------------------

    def same(self, a, b):
        return len(a.data) == len(b.data) == self.size and a.data == b.data

    def may_serve(self, consistent):
        """The sources the reader's bytes so far may have come from."""
        return [i for i in consistent if self.sources[i].kind in SERVABLE
                and len(self.sources[i].data) == self.size]

    def failure_violation(self, consistent):
        """None when the failure is allowed: some source that may have served
        has no healthy identical one; else the identical healthy sources."""
        cands = self.may_serve(consistent)
        if not cands:
            return None
        backups = {}
        for i in cands:
            ok = [j for j, t in enumerate(self.sources)
                  if t.kind in HEALTHY and self.same(self.sources[i], t)]
            if not ok:
                return None
            backups[i] = ok
        return backups


def run_reader(sc, path, progress, out):
    """Reads the scenario's pattern through the mount; records per read
    (offset, length, bytes or error, seconds) in out; progress[0] is the
    bytes read so far (the killer watches it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        out.append(('open', 0, 0, e, 0.0))
        return
    try:
        if sc.pattern != 'seq':     # a scan or seeks: no kernel read-ahead
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        per_read = sc.pace / max(1, len(sc.reads))
        start = time.monotonic()
        for k, (off, n) in enumerate(sc.reads):
            t = time.monotonic()
            progress[1] = t
            try:
                b = os.pread(fd, n, off)
                res = b
            except OSError as e:
                res = e
            out.append(('read', off, n, res, time.monotonic() - t))
            progress[1] = None
            if isinstance(res, OSError) or len(res) < n:
                return              # a failed read ends the reader
            progress[0] += n
            ahead = start + (k + 1) * per_read - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    finally:
        os.close(fd)


def run_killer(sc, progress, done, log):
    """SIGKILLs each 'kill' source's seam-origin by PID once the reader
    passed its byte (or ended), after a random short delay."""
    todo = sorted((s for s in sc.sources if s.kind == 'kill'), key=lambda s: s.kill_after)
    for s in todo:
        while progress[0] < s.kill_after and not done.is_set():
            time.sleep(0.005)
        if done.is_set():
            return
        time.sleep(s.kill_delay)
        pid = s.origin.proc.pid if s.origin.proc else None
        s.origin.kill(hold_port=True)
        log.append(f'source {s.index} killed (pid {pid}) at {progress[0]} B read')


def check(sc, out):
    """The invariants over the reader's record; fills sc.violations."""
    consistent = set(range(len(sc.sources)))
    whole = hashlib.sha256() if sc.pattern == 'seq' else None
    for what, off, n, res, took in out:
        if took > HANG_S:
            sc.violations.append(f'{what} at {off}+{n} took {took:.1f} s (> {HANG_S} s)')
        if isinstance(res, OSError) or (what == 'read' and len(res) < n):
            err = (errno.errorcode.get(res.errno, res.errno) if isinstance(res, OSError)
                   else f'short read, {len(res)} of {n} B')
            bad = sc.failure_violation(consistent)
            if bad:
                ok = sorted({j for js in bad.values() for j in js})
                who = ', '.join(f'{j} ({sc.sources[j].kind})' for j in ok)
                sc.violations.append(f'{what} at {off}+{n} failed ({err}) though source(s) '
                                     f'{who}, identical to any that may have served, '
                                     f'have no fault')
            else:
                sc.notes.append(f'{what} at {off}+{n} failed ({err}): allowed')
            return
        if what != 'read':
            continue
        match = {i for i in consistent
                 if sc.sources[i].data[off:off + n] == res}
        if not match:
            anyone = [i for i, s in enumerate(sc.sources) if s.data[off:off + n] == res]
            sc.violations.append(
                f'bytes {off}+{n} (sha256 {sha256_bytes(res)[:16]}) are no source\'s bytes '
                f'consistent with the reads before (sources {sorted(consistent)}); alone they '
                f'match {anyone or "none"}')
            return
        consistent = match
        if whole is not None:
            whole.update(res)
    served = sc.may_serve(consistent)
    if whole is not None and sc.reads:
        got = whole.hexdigest()
        files = {i: sha256_bytes(sc.sources[i].data) for i in consistent}
        if not any(got == h for h in files.values()):
            sc.violations.append(f'sha256 of the whole read {got[:16]} equals no source file\'s')
    if not served and out and not sc.violations:
        sc.violations.append(f'bytes came from a source that must not serve '
                             f'({", ".join(sc.sources[i].kind for i in consistent)})')


def run_scenario(sc, mnt, results):
    progress = [0, None]
    out, log = [], []
    done = threading.Event()
    killer = threading.Thread(target=run_killer, args=(sc, progress, done, log), daemon=True)
    killer.start()
    t0 = time.monotonic()
    reader = threading.Thread(target=run_reader, daemon=True,
                              args=(sc, str(mnt / 'S' / f'{sc.aid}.bin'), progress, out))
    reader.start()
    bound = HANG_S * (len(sc.reads) + 1) + sc.pace
    while reader.is_alive():
        reader.join(0.2)
        started = progress[1]
        if started is not None and time.monotonic() - started > HANG_S:
            sc.violations.append(f'a read hangs: no answer {HANG_S} s after it was asked '
                                 f'(after {progress[0]} B)')
            break
        if time.monotonic() - t0 > bound:
            sc.violations.append(f'the reader did not end within {bound:.0f} s')
            break
    done.set()
    killer.join(5)
    if not sc.violations:
        check(sc, out)
    sc.notes.extend(log)
    results.append(sc)


def daemon_lines(log_text, aid, limit=8):
    """The daemon's last log lines that name the asset, a repeated message
    (a retry) once."""
    word = re.compile(r'\b%s\b' % re.escape(aid))
    seen, out = set(), []
    for ln in log_text.splitlines():
        msg = ln.split(' ', 1)[-1]          # without the time stamp
        if word.search(ln) and msg not in seen:
            seen.add(msg)
            out.append(ln)
    return out[-limit:]


def run_batch(scens, build, work, parallel):
    binary = str(build / 'seamfs')
    origin_bin = str(build / 'tests' / 'server' / 'seam-origin')
    data_dir = work / 'data'
    data_dir.mkdir()
    nginx = Nginx(data_dir, work / 'nginx')
    mounter = Mounter(binary, work)
    all_origins = []
    results = []
    try:
        nginx.start()
        for sc in scens:
            sc.make_files(data_dir)
            sc.start_origins(origin_bin, data_dir, work, nginx)
            all_origins.extend(sc.origins())
        cat = {'providers': [p for sc in scens for p in sc.providers()],
               'assets': [sc.catalog_entry() for sc in scens]}
        m = mounter.mount(cat, read_timeout=READ_TIMEOUT, options=SETTINGS)
        queue = list(scens)
        running = []
        while queue or running:
            while queue and len(running) < parallel:
                sc = queue.pop(0)
                t = threading.Thread(target=run_scenario, args=(sc, m.mnt, results),
                                     daemon=True)
                t.start()
                running.append(t)
            running = [t for t in running if t.is_alive()]
            time.sleep(0.05)
        log_text = m.log()
        for sc in scens:
            if sc.violations:
                sc.daemon_log = daemon_lines(log_text, sc.aid)
    finally:
        mounter.cleanup(report_logs=False)
        for o in all_origins:
            o.stop()
        nginx.stop()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--count', type=int, default=40)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--seeds', default='',
                    help='comma-separated seeds to run instead of --seed/--count')
    ap.add_argument('--build', default=str(REPO / 'build'))
    ap.add_argument('--batch', type=int, default=40, help='scenarios per mount')
    ap.add_argument('--parallel', type=int, default=8, help='readers at once')
    ap.add_argument('--verbose', action='store_true', help='a line per scenario')
    ap.add_argument('--clean', action='store_true',
                    help='identical sources without faults only (the checker\'s own check: '
                         'any violation is the checker\'s or the daemon\'s bug)')
    args = ap.parse_args()
    build = Path(args.build).resolve()
    for b in (build / 'seamfs', build / 'tests' / 'server' / 'seam-origin'):
        if not os.access(b, os.X_OK):
            print(f'mount.py: {b} is not an executable (--build names the meson build '
                  f'directory)', file=sys.stderr)
            return 2
    if not os.path.exists('/dev/fuse'):
        print('mount.py: /dev/fuse is missing', file=sys.stderr)
        return 2
    try:
        seeds = ([int(x) for x in args.seeds.split(',')] if args.seeds
                 else list(range(args.seed, args.seed + args.count)))
    except ValueError:
        print(f'mount.py: --seeds {args.seeds!r}: not a comma-separated list of numbers',
              file=sys.stderr)
        return 2
    run = violations = 0
    t0 = time.monotonic()
    for b in range(0, len(seeds), args.batch):
        scens = [Scenario(s, args.clean) for s in seeds[b:b + args.batch]]
        work = Path(tempfile.mkdtemp(prefix='seamfs-scen-'))
        try:
            results = run_batch(scens, build, work, args.parallel)
        except BaseException as e:  # noqa: BLE001 - pytest.fail of the harness too
            print(f'mount.py: the harness broke in the batch of seeds {scens[0].seed}-'
                  f'{scens[-1].seed}: {type(e).__name__}: {e}', file=sys.stderr)
            print(f'scenarios: {run} run, {violations} violations')
            return 2
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for sc in sorted(results, key=lambda s: s.seed):
            run += 1
            if args.verbose:
                print(f'seed {sc.seed}: {"VIOLATION" if sc.violations else "ok"}: '
                      f'{sc.summary()}; {"; ".join(sc.notes)}')
            if not sc.violations:
                continue
            violations += 1
            print(f'VIOLATION seed {sc.seed}: {sc.summary()}')
            for v in sc.violations:
                print(f'  {v}')
            for n in sc.notes:
                print(f'  note: {n}')
            for ln in getattr(sc, 'daemon_log', []):
                print(f'  log: {ln}')
            print(f'  replay: tests/scenarios/run --mount --count 1 --seed {sc.seed} '
                  f'--build {build}{" --clean" if args.clean else ""}')
        missing = len(scens) - len(results)
        if missing:
            print(f'mount.py: {missing} scenario(s) of seeds {scens[0].seed}-{scens[-1].seed} '
                  f'gave no result', file=sys.stderr)
            print(f'scenarios: {run} run, {violations} violations')
            return 2
    print(f'{time.monotonic() - t0:.0f} s', file=sys.stderr)
    print(f'scenarios: {run} run, {violations} violations')
    return 1 if violations else 0


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # meson ends a test that ran out of time with SIGTERM: unwind through
    # the finally blocks, which stop the daemons, servers and mounts
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    sys.exit(main())
