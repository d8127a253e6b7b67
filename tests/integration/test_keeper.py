"""keeper=1: a keeper process holds the FUSE connection; a worker that dies
(kill -9 here) is replaced on the same mount, and readers see a pause, not an
error (docs/restart.md). Every reader's bytes are checked; the origins are
slowed (--rate) so that reads are in flight at each kill."""

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time

from conftest import (MIB, asset, bounded, catalog, sha256_bytes, stop_process,
                      wait_until)

RATE = str(6 * MIB)  # per answer: a 64 MiB file takes some 10 s to read


def worker_of(m):
    """The keeper's one child (its worker), or None."""
    try:
        with open(f'/proc/{m.pid}/task/{m.pid}/children') as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def serving_worker(m, not_pid=None, timeout=20):
    """Waits until a worker other than not_pid serves: its pid is the
    keeper's child and the status names it (status.json answers only once
    the worker serves)."""
    box = {}

    def serves():
        w = worker_of(m)
        if not w or w == not_pid:
            return False
        try:
            box['s'] = bounded(lambda: status(m), 30, 'status.json')
        except OSError:
            return False
        return box['s']['worker_pid'] == w
    wait_until(serves, timeout, 'a new worker serving')
    return box['s']['worker_pid']


class Readers:
    """Readers in threads, each checking its bytes; errors are kept."""

    def __init__(self):
        self.threads, self.errors, self.done = [], [], []

    def start(self, name, fn):
        def run():
            try:
                fn()
                self.done.append(name)
            except Exception as e:  # noqa: BLE001 - any failure is the test's
                self.errors.append(f'{name}: {e!r}')
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self, timeout):
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, end - time.monotonic()))
        alive = sum(t.is_alive() for t in self.threads)
        assert not alive, f'{alive} reader(s) still running after {timeout} s'
        assert not self.errors, '\n'.join(self.errors)


def sequential(path, want, pace=0.0, chunk=MIB):
    def run():
        h = __import__('hashlib').sha256()
        with open(path, 'rb', buffering=0) as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                h.update(b)
                if pace:
                    time.sleep(pace)
        assert h.hexdigest() == want, f'{path}: SHA-256 differs'
    return run


def seeking(path, ref, seed, count=60):
    def run():
        rng = random.Random(seed)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            for _ in range(count):
                off = rng.randrange(0, len(ref) - MIB) & ~4095
                got = os.pread(fd, MIB, off)
                assert got == ref[off:off + MIB], f'{path}: bytes at {off} differ'
        finally:
            os.close(fd)
    return run


def test_worker_killed_three_times_under_readers(seamfs, data, make_origin):
    o = make_origin(data.dir, ['--rate', RATE])
    names = ['big.bin', 'mid.bin', 'odd.bin', 'clip.mkv']
    m = seamfs.mount(catalog(*[asset(n, n, o.url(n), size=data[n].size) for n in names]),
                     read_timeout=60, options=['keeper'])
    first = serving_worker(m)
    assert status(m)['keeper']['restarts'] == 0
    r = Readers()
    r.start('sequential big', sequential(m.path('big.bin'), data['big.bin'].sha256))
    r.start('sequential odd', sequential(m.path('odd.bin'), data['odd.bin'].sha256))
    r.start('paced mid', sequential(m.path('mid.bin'), data['mid.bin'].sha256, pace=0.05,
                                    chunk=256 * 1024))
    r.start('paced big', sequential(m.path('big.bin'), data['big.bin'].sha256, pace=0.02))
    big = data.bytes('big.bin')
    r.start('seeking 1', seeking(m.path('big.bin'), big, 1))
    r.start('seeking 2', seeking(m.path('big.bin'), big, 2))
    r.start('clip', sequential(m.path('clip.mkv'), data['clip.mkv'].sha256, pace=0.01,
                               chunk=64 * 1024))
    mpv = None
    if shutil.which('mpv'):
        mpv = subprocess.Popen(['mpv', '--no-config', '--cache=no', '--vo=null', '--ao=null',
                                '--untimed', '--really-quiet', str(m.path('clip.mkv'))],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        w = first
        for _ in range(3):
            time.sleep(1.0)
            os.kill(w, signal.SIGKILL)
            w = serving_worker(m, not_pid=w)
        r.join(180)
        if mpv:
            out, _ = mpv.communicate(timeout=120)
            assert mpv.returncode == 0, f'mpv exited {mpv.returncode}: {out!r}'
    finally:
        if mpv and mpv.poll() is None:
            stop_process(mpv, group=True)
    st = status(m)
    assert st['keeper']['restarts'] == 3
    assert 'signal 9' in st['keeper']['last_end']
    assert 0 <= st['keeper']['last_pause_ms'] < 30000
    metrics = m.path('.seamfs/metrics').read_text()
    assert 'seamfs_worker_restarts_total 3' in metrics
    # a new open after the kills reads right too
    assert sha256_bytes(m.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    assert m.log().count('starting another on the same mount') == 3
    assert m.unmount() == 0


def test_worker_killed_as_its_origin_dies(seamfs, data, make_origin):
    """The served origin stops and the worker is killed at once: the new
    worker (a fresh core) cuts over for the reader's rebuilt handle."""
    a = make_origin(data.dir, ['--rate', RATE])
    b = make_origin(data.dir, ['--rate', RATE])
    big = data['big.bin']
    doc = catalog({'id': 'big', 'path': 'big.bin', 'size': big.size,
                   'sources': [{'url': a.url('big.bin')}, {'url': b.url('big.bin')}]})
    m = seamfs.mount(doc, read_timeout=60, options=['keeper', 'stall_timeout=2'])
    w = serving_worker(m)
    r = Readers()
    r.start('sequential', sequential(m.path('big.bin'), big.sha256))
    wait_until(lambda: any(s['offset'] > 8 * MIB for s in status(m)['sessions']), 30,
               'the reader past 8 MiB')
    served = status(m)['sessions'][0]['source']
    (a if served == a.url('big.bin') else b).stop()
    os.kill(w, signal.SIGKILL)
    serving_worker(m, not_pid=w)
    r.join(180)
    assert m.unmount() == 0


def test_worker_killed_in_the_middle_of_a_cutover(seamfs, data, make_origin):
    """The active source's origin dies and, while the cutover waits for the
    standby's seam check (held by the origin), the worker is killed: the
    next worker serves the resent read, and the reader sees no error and
    every byte right."""
    a = make_origin(data.dir, ['--rate', RATE])
    b = make_origin(data.dir, ['--rate', RATE])
    big = data['big.bin']
    doc = {'providers': [{'name': 'p1'}, {'name': 'p2'}],
           'assets': [{'id': 'big', 'path': 'big.bin', 'size': big.size,
                       'sources': [{'url': a.url('big.bin'), 'provider': 'p1'},
                                   {'url': b.url('big.bin'), 'provider': 'p2'}]}]}
    # each candidate's checks get stall_timeout: longer than the hold
    m = seamfs.mount(doc, read_timeout=60,
                     options=['keeper', 'standby_delay=0', 'stall_timeout=20',
                              'liveness_interval=0'])
    w = serving_worker(m)
    r = Readers()
    r.start('sequential', sequential(m.path('big.bin'), big.sha256))

    def ready():
        st = status(m)
        asset_ = st['assets'][0] if st['assets'] else {}
        return (asset_.get('reference') and
                all(s['verification'] == 'verified' for s in asset_['sources']) and
                any(s['offset'] > 8 * MIB for s in st['sessions']))
    wait_until(ready, 60, 'the standby verified and the reader past 8 MiB')
    served = status(m)['sessions'][0]['source']
    active, standby = (a, b) if served == a.url('big.bin') else (b, a)
    # the standby's kept connections go, so that the next one it counts is
    # the cutover's; its next answer (the seam check) is held for 10 s. The
    # rule is set while it is down: set after up(), a request that came in
    # between (CI, ASan build, 2026-12-05) went unheld, and the rule held
    # the next worker's instead
    standby.down(drop=True)
    standby.rule('/big.bin', delay_ms=10000, count=1)
    standby.up()
    active.down(drop=True)
    wait_until(lambda: standby.log()['connections_current'] >= 1, 30,
               'the cutover asking the standby for the seam')
    os.kill(w, signal.SIGKILL)
    serving_worker(m, not_pid=w)
    r.join(180)
    # the kill landed inside the cutover: the held answer, the seam (at
    # most 4 KiB just before the cut), was never sent
    held = [q for q in standby.requests('/big.bin') if not q['complete']]
    assert held and held[0]['bytes_sent'] == 0, standby.requests('/big.bin')
    first, last = map(int, held[0]['range'].split('=')[1].split('-'))
    assert last - first < 4096, held
    assert status(m)['keeper']['restarts'] == 1
    assert m.unmount() == 0


def test_crash_loop_gives_up_and_readers_get_an_error(seamfs, data, make_origin):
    """Workers that die at once, five times in a row: the keeper backs off,
    then gives up and unmounts; a reader waiting meanwhile gets an error,
    not a hang."""
    o = make_origin(data.dir, ['--rate', str(MIB)])
    m = seamfs.mount(catalog(asset('big', 'big.bin', o.url('big.bin'),
                                   size=data['big.bin'].size)),
                     read_timeout=60, options=['keeper'])
    w = serving_worker(m)
    failed = []

    def reader():
        try:
            with open(m.path('big.bin'), 'rb', buffering=0) as f:
                while f.read(MIB):
                    pass
        except OSError as e:
            failed.append(e.errno)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    time.sleep(0.5)
    for _ in range(5):
        os.kill(w, signal.SIGKILL)
        deadline = time.monotonic() + 20
        nxt = None
        while time.monotonic() < deadline and m.proc.poll() is None:
            nxt = worker_of(m)
            if nxt and nxt != w:
                break
            time.sleep(0.005)
        if m.proc.poll() is not None:
            break
        w = nxt
    rc = m.wait_exit(30)
    assert rc == 1, f'keeper exit {rc}; log:\n{m.log()[-2000:]}'
    assert 'giving up, unmounting' in m.log()
    t.join(30)
    assert not t.is_alive(), 'the reader hangs after the keeper gave up'
    assert failed, 'the reader read the whole file although the mount went away'
    wait_until(lambda: not m.is_mounted(), 10, 'the mount gone')


def test_sigterm_to_the_keeper_ends_both(seamfs, data, make_origin):
    o = make_origin(data.dir)
    m = seamfs.mount(catalog(asset('odd', 'odd.bin', o.url('odd.bin'),
                                   size=data['odd.bin'].size)), options=['keeper'])
    w = serving_worker(m)
    assert sha256_bytes(m.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0
    wait_until(lambda: not os.path.exists(f'/proc/{w}'), 10, 'the worker gone')
    wait_until(lambda: not m.is_mounted(), 10, 'the mount gone')


def test_worker_killed_under_a_transcode_read(seamfs, data, nginx, tmp_path):
    """The worker dies while its writer is half way through a transcode:
    the writer goes with it, the next worker recovers the work from the
    last trusted segment, and the reader gets every segment's bytes."""
    work = tmp_path / 'work'
    profile = {'height': 180, 'video_bitrate': 300000, 'audio_bitrate': 64000,
               'segment_seconds': 2, 'of': 'clip'}
    doc = catalog({'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]},
                  {'id': 'clip-180', 'path': 'clip 180p.ts', 'transcode': profile})
    m = seamfs.mount(doc, read_timeout=30,
                     options=['keeper', f'work_dir={work}', 'writer_max_speed=3'])
    job = work / 'clip-180'
    w = serving_worker(m)
    plan = json.loads((job / 'plan.json').read_text())
    box = {}

    def reader():
        try:
            h, n = hashlib.sha256(), 0
            with open(m.path('clip 180p.ts'), 'rb') as f:
                while b := f.read(64 * 1024):
                    h.update(b)
                    n += len(b)
            box['result'] = (h.hexdigest(), n)
        except BaseException as e:  # noqa: BLE001 - asserted below
            box['error'] = e
    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def committed():
        p = job / 'playlist'
        lines = p.read_text().splitlines() if p.exists() else []
        return [int(x.split()[0]) for x in lines if x and x[0] != '#']
    wait_until(lambda: len(committed()) >= 2, 60, 'two committed segments')
    assert len(committed()) < plan['segments'], 'the writer finished before the kill'
    os.kill(w, signal.SIGKILL)
    serving_worker(m, not_pid=w)
    t.join(120)
    assert not t.is_alive(), 'the reader is still blocked 120 s after the kill'
    assert 'error' not in box, repr(box.get('error'))
    digest, n = box['result']
    assert n == plan['size']
    assert sorted(committed()) == list(range(plan['segments']))
    h = hashlib.sha256()
    for k in range(plan['segments']):
        h.update((job / f'seg-{k:06d}.ts').read_bytes())
    assert digest == h.hexdigest()
    assert m.unmount() == 0


def test_restart_starts_the_binary_on_disk(seamfs, data, make_origin, tmp_path):
    """seamfs ctl restart: the worker is replaced by the seamfs binary now
    at the path the keeper was started from (an upgrade), under readers;
    a binary there that does not come up leaves the running code serving."""
    original = seamfs.binary
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    exe = bindir / 'seamfs'
    shutil.copy2(original, exe)
    seamfs.binary = str(exe)
    o = make_origin(data.dir, ['--rate', RATE])
    sock = tmp_path / 'ctl.sock'
    names = ['big.bin', 'odd.bin']
    m = seamfs.mount(catalog(*[asset(n, n, o.url(n), size=data[n].size) for n in names]),
                     read_timeout=60, options=['keeper', f'control_socket={sock}'])
    w = serving_worker(m)
    r = Readers()
    r.start('sequential big', sequential(m.path('big.bin'), data['big.bin'].sha256))
    r.start('seeking', seeking(m.path('big.bin'), data.bytes('big.bin'), 3))
    time.sleep(1.0)
    # a new version on disk: another file at the same path
    shutil.copy2(original, bindir / 'seamfs.new')
    os.replace(bindir / 'seamfs.new', exe)
    # --wait (systemctl reload): it returns once the new worker serves
    ctl = subprocess.run([original, 'ctl', '--socket', str(sock), 'restart', '--wait'],
                         capture_output=True, text=True, timeout=120)
    assert ctl.returncode == 0 and 'restarting' in ctl.stdout, ctl
    w2 = status(m)['worker_pid']
    assert w2 != w and f'restarted: worker pid {w2} serves' in ctl.stdout, ctl
    assert os.readlink(f'/proc/{w2}/exe') == str(exe), 'the new worker is not the new file'
    r.join(180)
    st = status(m)
    assert st['keeper']['last_end'] == 'ended for an upgrade' and st['keeper']['restarts'] == 1
    # a binary that does not come up: the keeper serves with its own code
    (bindir / 'broken').write_text('#!/bin/sh\nexit 3\n')
    (bindir / 'broken').chmod(0o755)
    os.replace(bindir / 'broken', exe)
    # --wait says so (exit 1): a reload that did not upgrade is not done
    ctl = subprocess.run([original, 'ctl', '--socket', str(sock), 'restart', '--wait'],
                         capture_output=True, text=True, timeout=120)
    assert ctl.returncode == 1 and 'did not come up' in ctl.stderr, ctl
    assert 'serving with the running version' in m.log()
    serving_worker(m, not_pid=w2)
    assert sha256_bytes(m.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    # without a keeper a restart is refused: it would end the mount
    seamfs.binary = original
    m2 = seamfs.mount(catalog(asset('odd', 'odd.bin', o.url('odd.bin'),
                                    size=data['odd.bin'].size)),
                      options=['keeper=0', f'control_socket={tmp_path / "ctl2.sock"}'],
                      mnt=tmp_path / 'm2')
    ctl = subprocess.run([original, 'ctl', '--socket', str(tmp_path / 'ctl2.sock'), 'restart'],
                         capture_output=True, text=True, timeout=20)
    assert ctl.returncode != 0 and 'no keeper' in ctl.stderr, ctl
    assert m2.unmount() == 0
    assert m.unmount() == 0


def test_every_restart_is_answered(seamfs, data, make_origin, tmp_path):
    """The keeper ends the worker as soon as it is told to restart: the
    worker tells it only once its answer is written, so `seamfs ctl
    restart` never sees the connection die unanswered (when the signal
    went first, one of the first dozen restarts did)."""
    o = make_origin(data.dir)
    sock = tmp_path / 'ctl.sock'
    m = seamfs.mount(catalog(asset('odd', 'odd.bin', o.url('odd.bin'),
                                   size=data['odd.bin'].size)),
                     options=['keeper', f'control_socket={sock}'])
    w = serving_worker(m)
    for i in range(12):
        ctl = subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), 'restart'],
                             capture_output=True, text=True, timeout=20)
        assert ctl.returncode == 0 and 'restarting' in ctl.stdout, (i, ctl)
        w = serving_worker(m, not_pid=w)
    assert status(m)['keeper']['restarts'] == 12
    assert sha256_bytes(m.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    assert m.unmount() == 0


def test_restart_json_wait_waits(seamfs, data, make_origin, tmp_path):
    """seamfs ctl restart --json --wait waits as --wait does: it prints one
    JSON object once the next worker serves (the daemon's answer with that
    worker's pid and whether it is the binary on disk), and says in it and
    in its exit status when that binary did not come up."""
    original = seamfs.binary
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    exe = bindir / 'seamfs'
    shutil.copy2(original, exe)
    seamfs.binary = str(exe)
    o = make_origin(data.dir, ['--rate', RATE])
    sock = tmp_path / 'ctl.sock'
    m = seamfs.mount(catalog(asset('big', 'big.bin', o.url('big.bin'),
                                   size=data['big.bin'].size)),
                     read_timeout=60, options=['keeper', f'control_socket={sock}'])
    w = serving_worker(m)
    r = Readers()
    r.start('sequential big', sequential(m.path('big.bin'), data['big.bin'].sha256))
    time.sleep(0.5)
    ctl = subprocess.run([original, 'ctl', '--socket', str(sock), '--json', 'restart', '--wait'],
                         capture_output=True, text=True, timeout=120)
    assert ctl.returncode == 0, ctl
    out = json.loads(ctl.stdout)
    # it returned once the new worker served: the status names it now
    w2 = status(m)['worker_pid']
    assert out == {'restarting': True, 'keeper_pid': m.pid, 'worker_pid': w,
                   'new_worker_pid': w2, 'upgraded': True}, out
    assert w2 != w
    r.join(180)
    # a binary that does not come up: upgraded false, exit 1
    (bindir / 'broken').write_text('#!/bin/sh\nexit 3\n')
    (bindir / 'broken').chmod(0o755)
    os.replace(bindir / 'broken', exe)
    ctl = subprocess.run([original, 'ctl', '--socket', str(sock), '--json', 'restart', '--wait'],
                         capture_output=True, text=True, timeout=120)
    assert ctl.returncode == 1 and 'did not come up' in ctl.stderr, ctl
    out = json.loads(ctl.stdout)
    w3 = status(m)['worker_pid']
    assert out['worker_pid'] == w2 and out['new_worker_pid'] == w3 and w3 != w2, out
    assert out['upgraded'] is False, out
    assert sha256_bytes(m.path('big.bin').read_bytes()) == data['big.bin'].sha256
    seamfs.binary = original
    assert m.unmount() == 0


def noresend_lib():
    """The library that makes seamfs see a kernel before 6.9 (noresend.c),
    as meson built it."""
    lib = os.environ.get('SEAMFS_NORESEND_LIB') or os.path.join(
        os.path.dirname(os.environ.get('SEAMFS_BIN', 'build/seamfs')),
        'tests/integration/libnoresend.so')
    assert os.path.exists(lib), f'{lib} is missing: build it (meson compile)'
    return lib


def test_a_kernel_that_cannot_resend(seamfs, data, make_origin, tmp_path):
    """A kernel before 6.9 (FUSE_NOTIFY_RESEND refused with EINVAL): the
    keeper serves as before, refuses a restart that would end the mount (it
    answered 202 and then did nothing), and a worker that dies ends the
    mount cleanly: the keeper unmounts and exits 1, and a remount works at
    once."""
    env = {'LD_PRELOAD': noresend_lib()}
    o = make_origin(data.dir)
    sock = tmp_path / 'ctl.sock'
    doc = catalog(asset('odd', 'odd.bin', o.url('odd.bin'), size=data['odd.bin'].size))
    m = seamfs.mount(doc, options=['keeper', f'control_socket={sock}'], env=env)
    w = serving_worker(m)
    assert sha256_bytes(m.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    assert 'the kernel does not resend' in m.log(), 'the library did not take effect'
    ctl = subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), 'restart'],
                         capture_output=True, text=True, timeout=20)
    assert ctl.returncode == 1 and 'cannot resend' in ctl.stderr, ctl
    assert status(m)['worker_pid'] == w
    os.kill(w, signal.SIGKILL)
    assert m.wait_exit(20) == 1, m.log()[-2000:]
    assert 'cannot resend what it held' in m.log()
    wait_until(lambda: not m.is_mounted(), 10, 'the mount gone')
    m2 = seamfs.mount(doc, mnt=m.mnt, options=['keeper'], env=env)
    assert sha256_bytes(m2.path('odd.bin').read_bytes()) == data['odd.bin'].sha256
    assert m2.unmount() == 0
