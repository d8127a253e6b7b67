"""Cluster mode behind Redis Sentinel (store=redis-sentinel://...): a
master, a replica and three sentinels (Debian's redis-server, the
sentinels run with --sentinel), two seamfs hosts; the master is killed
with -9 while both hosts read a transcode (a remux, whose bytes do not
depend on who writes them) and a plain asset.

Every process listens on 127.0.0.1 on a port the kernel picked, has its
own directory under tmp_path, and is stopped by its PID, also on failure.
The sentinels' down-after is 1 s so that a failover takes a few seconds.
"""

import hashlib
import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import bounded, free_port, wait_until
from test_cluster import redis  # noqa: F401 - a private redis-server, the fixture
from test_cluster import (connections_to, resp, seg_file, status, store_lease,
                          store_playlist, store_playlist_clean, tc_cat)
from test_transcode import start_reader, writer_pids

DOWN_AFTER_MS = 1000
NAME = 'seam'


class RedisNode:
    """One redis-server (a data node or, with sentinel_of, a sentinel) on a
    port of its own, started and stopped by its PID."""

    def __init__(self, workdir, *, replica_of=None, sentinel_of=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.replica_of = replica_of
        self.sentinel_of = sentinel_of
        self.port = None
        self.proc = None

    @property
    def addr(self):
        return f'127.0.0.1:{self.port}'

    def _argv(self, port):
        if self.sentinel_of is None:
            argv = ['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                    '--appendonly', 'no', '--dir', str(self.dir), '--daemonize', 'no',
                    '--logfile', str(self.dir / 'redis.log')]
            if self.replica_of is not None:
                argv += ['--replicaof', '127.0.0.1', str(self.replica_of.port)]
            return argv
        # a sentinel rewrites its configuration file: one of its own
        conf = self.dir / 'sentinel.conf'
        conf.write_text(
            f'port {port}\nbind 127.0.0.1\ndaemonize no\ndir {self.dir}\n'
            f'logfile {self.dir / "redis.log"}\n'
            f'sentinel monitor {NAME} 127.0.0.1 {self.sentinel_of.port} 2\n'
            f'sentinel down-after-milliseconds {NAME} {DOWN_AFTER_MS}\n'
            f'sentinel failover-timeout {NAME} 10000\n'
            f'sentinel parallel-syncs {NAME} 1\n')
        return ['redis-server', str(conf), '--sentinel']

    def start(self):
        for _attempt in range(5):
            port = free_port()
            self.proc = subprocess.Popen(self._argv(port), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if resp(port, 'PING', timeout=0.5) == b'PONG':
                        self.port = port
                        return self
                except (OSError, RuntimeError):
                    pass
                time.sleep(0.05)
            self.kill()       # the port was taken meanwhile: another one
        pytest.fail(f'redis-server did not start in {self.dir}: {self.log()}')

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def log(self):
        p = self.dir / 'redis.log'
        return p.read_text(errors='replace')[-3000:] if p.exists() else ''


def fields(text):
    """INFO's text as a dict."""
    out = {}
    for ln in text.decode(errors='replace').splitlines():
        k, sep, v = ln.partition(':')
        if sep:
            out[k] = v.strip()
    return out


@pytest.fixture
def sentinels(tmp_path):
    """A master, a replica in sync with it, three sentinels that know both
    and each other. Yields (master, replica, [sentinels])."""
    nodes = []
    try:
        master = RedisNode(tmp_path / 'master')
        nodes.append(master)
        master.start()
        replica = RedisNode(tmp_path / 'replica', replica_of=master)
        nodes.append(replica)
        replica.start()
        wait_until(lambda: fields(resp(replica.port, 'INFO', 'replication'))
                   .get('master_link_status') == 'up', 20, 'the replica in sync')
        sents = []
        for i in range(3):
            s = RedisNode(tmp_path / f'sentinel{i}', sentinel_of=master)
            nodes.append(s)
            sents.append(s.start())

        def ready():
            for s in sents:
                if len(resp(s.port, 'SENTINEL', 'sentinels', NAME)) != 2:
                    return False
                if len(resp(s.port, 'SENTINEL', 'replicas', NAME)) != 1:
                    return False
            return True
        wait_until(ready, 30, 'the sentinels knowing each other and the replica',
                   interval=0.2)
        yield master, replica, sents
    finally:
        for n in reversed(nodes):
            n.kill()


def sentinel_url(sents):
    return 'redis-sentinel://' + '+'.join(s.addr for s in sents) + f'/{NAME}'


def mount_host(seamfs, cat, url, host_id, work, options=()):
    state = seamfs.dir / f'state-{host_id}'
    state.mkdir(exist_ok=True)
    # writers where their reads are: A's reader starts A's writer
    opts = [f'store={url}', f'host_id={host_id}', f'work_dir={work}', 'heartbeat=0.5',
            'orphan_after=3', 'placement=local'] + list(options)
    return seamfs.mount(cat, read_timeout=30, options=opts, state_dir=state,
                        mnt=seamfs.new_mountpoint(f'mnt-{host_id}'))


def claims(log):
    """{(asset, generation): {owner, ...}} from a daemon's log."""
    out = {}
    for m in re.finditer(r'lease: asset (\S+) session \S+ generation (\d+) claimed by (\S+)',
                         log):
        out.setdefault((m.group(1), int(m.group(2))), set()).add(m.group(3))
    return out


def paced_read(path, box, pace=0.03):
    """Reads path whole, 256 KiB at a time at a player's pace (so that the
    read spans the failover); box gets 'result' (digest, bytes) or 'error'."""
    try:
        h, n = hashlib.sha256(), 0
        with open(path, 'rb') as f:
            while True:
                b = f.read(256 * 1024)
                if not b:
                    break
                h.update(b)
                n += len(b)
                time.sleep(pace)
        box['result'] = (h.hexdigest(), n)
    except BaseException as e:  # noqa: BLE001 - reported by the test
        box['error'] = e


def test_master_killed_hosts_follow_failover(sentinels, seamfs, data, nginx, tmp_path):
    """kill -9 of the master while both hosts read a transcode (A writes,
    B follows) and a plain asset: no reader gets an error, both hosts serve
    the same bytes (the plain file's SHA-256; the transcode's equals what a
    single full run of the writer makes), both hosts name the promoted
    replica as their master soon after the sentinels switch, the status
    and seamfs ctl hosts name the failover, and no generation has two
    owners. Each host reads a sentinel's +switch-master announcements
    (status: `watching`) and heard the switch there (`announcements`),
    which moves it to the new master at once rather than at its next
    retry; so does A's writer (its store's lines are in A's log). Then the new master dies too (no replica left): degraded mode,
    in which plain reads go on."""
    master, replica, sents = sentinels
    url = sentinel_url(sents)
    work = tmp_path / 'work'
    cat = tc_cat(nginx)
    for name in ('big', 'mid'):
        cat['assets'].append({'id': name, 'path': f'{name}.bin',
                              'sources': [{'url': nginx.url(f'{name}.bin')}]})
    sock = tmp_path / 'a.sock'
    a = mount_host(seamfs, cat, url, 'alpha', work,
                   options=['writer_max_speed=2', f'control_socket={sock}'])
    b = mount_host(seamfs, cat, url, 'beta', work, options=['writer_max_speed=2'])
    for m in (a, b):
        st = status(m)['store']
        assert st['master'] == master.addr and st['sentinel_master'] == NAME, st
        assert st['replicas'] == 1 and st['failovers'] == 0 and st['last_failover'] is None
        assert st['url'] == url
        assert st['watching'] in {f'127.0.0.1:{x.port}' for x in sents}, st
        assert st['announcements'] == 0, st
    job = work / 'clip-ts'
    plan = json.loads((job / 'plan.json').read_text())
    ta, boxa = start_reader(a.path('clip.ts'))       # A's reader starts A's writer
    wait_until(lambda: writer_pids(a.worker_pid()), 20, "A's writer")
    tb, boxb = start_reader(b.path('clip.ts'))       # B follows A's writer
    plain = {}
    pthreads = []
    for m in (a, b):
        box = plain.setdefault(m.mnt.name, {})
        t = threading.Thread(target=paced_read, args=(m.path('big.bin'), box), daemon=True)
        t.start()
        pthreads.append(t)
    wait_until(lambda: len(store_playlist(master, 'clip-ts')[0]) >= 2, 40,
               'two segments committed by A')
    entries, clean = store_playlist(master, 'clip-ts')
    assert not clean, 'the writer finished before the master could be killed'
    gen_a = int(store_lease(master, 'clip-ts')['gen'])
    t0 = time.monotonic()
    master.kill()
    # the sentinels promote the replica; both hosts follow it (bounded
    # generously: down-after, the election, the hosts' backoff, under load)
    wait_until(lambda: resp(sents[0].port, 'SENTINEL', 'get-master-addr-by-name', NAME)
               == [b'127.0.0.1', str(replica.port).encode()], 60,
               'the sentinels naming the replica')
    switched = time.monotonic() - t0
    for m in (a, b):
        wait_until(lambda m=m: status(m)['store']['master'] == replica.addr, 30,
                   f'{m.mnt.name} using the new master')
    followed = time.monotonic() - t0
    print(f'sentinels switched {switched:.1f} s after the kill; both hosts followed '
          f'within {followed:.1f} s (down-after {DOWN_AFTER_MS / 1000:.1f} s)')
    for t in [ta, tb] + pthreads:
        t.join(120)
    assert not any(t.is_alive() for t in [ta, tb] + pthreads), 'a reader is still blocked'
    for box in [boxa, boxb] + list(plain.values()):
        assert 'error' not in box, f"a reader failed: {box.get('error')!r}"
    # the plain asset: the file's bytes on both hosts
    for name, box in plain.items():
        assert box['result'] == (data['big.bin'].sha256, data['big.bin'].size), name
    # the transcode: the same bytes on both hosts, all of it
    assert boxa['result'] == boxb['result']
    digest, n = boxa['result']
    assert n == plan['size']
    # the status names the failover, and so does seamfs ctl hosts
    for m in (a, b):
        st = status(m)['store']
        assert st['connected'] is True and st['failovers'] >= 1, st
        fo = st['last_failover']
        assert fo['from'] == master.addr and fo['to'] == replica.addr, fo
        assert 'a failover' in m.log()
        # heard from the sentinels (whether that or a retry reached the new
        # master first is a race of a few ms: not asserted)
        assert st['announcements'] >= 1 and isinstance(fo['announced'], bool), st
        assert st['watching'] in {f'127.0.0.1:{x.port}' for x in sents}, st
    assert a.log().count("'s announcements of a failover") >= 2, 'A and its writer watching'
    r = seamfs.run(['ctl', '--socket', sock, 'hosts'])
    assert r.returncode == 0, r.stderr
    assert f'master {replica.addr}' in r.stdout, r.stdout
    assert f'from {master.addr} to {replica.addr}' in r.stdout, r.stdout
    # the new master lists every segment; what the hosts read is those
    # segments, and each is what one full single-host run makes
    wait_until(lambda: store_playlist(replica, 'clip-ts')[1], 60, 'the playlist complete')
    entries, _ = store_playlist(replica, 'clip-ts')
    assert sorted(k for k, _, _ in entries) == list(range(plan['segments'])), entries
    assert all(g >= gen_a for _, _, g in entries), entries
    fresh = tmp_path / 'fresh'
    fresh.mkdir()
    (fresh / 'plan.json').write_text((job / 'plan.json').read_text())
    writer = Path(a.argv[0]).parent / 'seamfs-writer'
    rw = subprocess.run([str(writer), 'run', '--remux', '--input', str(data['clip.mkv'].path),
                         '--segment-seconds', '2', '--work-dir', str(fresh), '--from', '0',
                         '--segments', str(plan['segments']), '--segment-bytes', '0'],
                        capture_output=True, timeout=60)
    assert rw.returncode == 0, rw.stderr.decode(errors='replace')
    h = hashlib.sha256()
    for k, _, g in sorted(entries):
        got = seg_file(job, k, g).read_bytes()
        assert got == (fresh / f'seg-{k:06d}.ts').read_bytes(), f'segment {k} (gen {g})'
        h.update(got)
    assert h.hexdigest() == digest
    # one owner per generation, across both hosts
    owners = {}
    for m in (a, b):
        for key, who in claims(m.log()).items():
            owners.setdefault(key, set()).update(who)
    assert owners and all(len(w) == 1 for w in owners.values()), owners
    # every segment file there is one the store lists
    listed = {seg_file(job, k, g).name for k, _, g in entries}
    present = {p.name for p in job.iterdir() if p.name.startswith('seg-')}
    assert present == listed, present ^ listed
    # the new master dies too, with no replica left: degraded mode, in
    # which plain reads go on, on both hosts
    replica.kill()
    for m in (a, b):
        wait_until(lambda m=m: status(m)['store']['connected'] is False, 30,
                   f'{m.mnt.name} showing the store down')
        assert bounded(lambda m=m: hashlib.sha256(m.path('mid.bin').read_bytes()).hexdigest(),
                       60, f'reading mid.bin on {m.mnt.name}') == data['mid.bin'].sha256
        assert status(m)['store']['last_error'], status(m)['store']


def test_rolled_back_playlist_put_back(redis, seamfs, data, nginx, tmp_path):
    """A failover to a replica that missed the last commits shows the
    writer an older playlist (played here on one Redis by writing an older
    version back while the writer runs): the writer, whose generation is
    still the lease's, puts its own list back with its next commit rather
    than going on from the older one, so no committed segment is lost from
    the list or written again; B's reader gets the whole file, every byte
    listed."""
    work = tmp_path / 'work'
    cat = tc_cat(nginx)
    a = mount_host(seamfs, cat, redis.url, 'alpha', work, options=['writer_max_speed=2',
                   'tail_ahead=0'])
    b = mount_host(seamfs, cat, redis.url, 'beta', work, options=['writer_max_speed=2',
                   'tail_ahead=0'])
    job = work / 'clip-ts'
    plan = json.loads((job / 'plan.json').read_text())
    key = 'seamfs:tc:{clip-ts}:pl'
    ta, boxa = start_reader(a.path('clip.ts'))
    wait_until(lambda: len(store_playlist(redis, 'clip-ts')[0]) >= 2, 40,
               'two segments committed')
    old_text, old_ver = resp(redis.port, 'HMGET', key, 'text', 'ver')
    wait_until(lambda: len(store_playlist(redis, 'clip-ts')[0]) >= 4, 40,
               'four segments committed')
    assert not store_playlist(redis, 'clip-ts')[1], 'the writer finished too soon'
    had = {k for k, _, _ in store_playlist(redis, 'clip-ts')[0]}
    resp(redis.port, 'HSET', key, 'text', old_text, 'ver', old_ver)
    wait_until(lambda: had < {k for k, _, _ in store_playlist(redis, 'clip-ts')[0]}, 60,
               'the entries the rollback lost listed again, and one more')
    tb, boxb = start_reader(b.path('clip.ts'))
    for t in (ta, tb):
        t.join(120)
    assert not ta.is_alive() and not tb.is_alive(), 'a reader is still blocked'
    for box in (boxa, boxb):
        assert 'error' not in box, f"a reader failed: {box.get('error')!r}"
    assert boxa['result'] == boxb['result'] and boxa['result'][1] == plan['size']
    wait_until(lambda: store_playlist(redis, 'clip-ts')[1], 60, 'the playlist complete')
    entries, _ = store_playlist(redis, 'clip-ts')
    assert sorted(k for k, _, _ in entries) == list(range(plan['segments'])), entries
    h = hashlib.sha256()
    for k, _, g in sorted(entries):
        h.update(seg_file(job, k, g).read_bytes())
    assert h.hexdigest() == boxb['result'][0]
    # put back, not written again: one writer run, no probe (on 2fbd266 the
    # writer went on from the older list, and once it stopped a second
    # writer and a probe wrote the lost segments again)
    log = a.log()
    assert 'putting ours back' in log
    assert len(re.findall(r'writer pid \d+ started: asset clip-ts', log)) == 1, log
    assert 'probe pid' not in log and 'was fenced' not in log, log


def test_writers_hold_no_connection_of_the_daemon(sentinels, seamfs, data, nginx, tmp_path):
    """A writer the daemon spawns holds connections of its own to the
    master and the sentinels, never the daemon's: hiredis made the daemon's
    sockets without close-on-exec, so on a954c3a every writer and probe
    inherited the daemon's watch on a sentinel (and its master connection
    unless that was fd 3, where the writer's input goes), which stayed
    open at the sentinel while the writer ran."""
    master, replica, sents = sentinels
    work = tmp_path / 'work'
    a = mount_host(seamfs, tc_cat(nginx), sentinel_url(sents), 'alpha', work,
                   options=['writer_max_speed=1', 'tail_ahead=0'])
    job = work / 'clip-ts'
    plan = json.loads((job / 'plan.json').read_text())
    ports = [n.port for n in (master, replica, *sents)]
    t, box = start_reader(a.path('clip.ts'))
    (w,) = wait_until(lambda: writer_pids(a.worker_pid()), 20, 'the writer')
    wait_until(lambda: store_playlist(master, 'clip-ts')[0], 60, 'a first segment committed')
    wait_until(lambda: status(a)['store']['watching'], 20, "the daemon's watch on a sentinel")
    mine = connections_to(a.worker_pid(), ports)
    theirs = connections_to(w, ports)
    assert len(mine) >= 2 and theirs, (mine, theirs)   # the master and a watch
    shared = set(mine) & set(theirs)
    assert not shared, f"the writer holds the daemon's {[mine[i] for i in shared]}"
    t.join(120)
    assert not t.is_alive(), 'the reader is still blocked'
    assert 'error' not in box, repr(box.get('error'))
    entries, clean = store_playlist_clean(master, 'clip-ts')
    assert clean
    h = hashlib.sha256()
    for k, _, g in sorted(entries):
        h.update(seg_file(job, k, g).read_bytes())
    assert box['result'] == (h.hexdigest(), plan['size'])
