#!/usr/bin/python3
"""The scenario checker's cluster mode (`tests/scenarios/run --cluster`).

Each scenario, built from its seed alone (random.Random(seed)), mounts two
or three seamfs daemons on one real redis-server (store=redis://..., each
its own host_id, mountpoint and state_dir, one shared work_dir), and reads
through them, at once, a plain asset with two nginx sources and the
transcode and remux of a clip. The plain asset wants one copy: each host
has a disk of its own (a storage naming it) and serves its copies to the
others on its peer endpoint (peer_listen, the cluster's secret), so a
reader may be on another host's copy when that host is killed. Meanwhile
it kills (SIGKILL, by PID) hosts
(the daemon and its writers) and Redis at random moments, and starts them
again after a random pause; it never kills the last live host. It also
swaps committed segments of the remux for links to files of other bytes,
as someone who can write work_dir could, and kills single writers
(SIGKILL of one writer's PID, its daemon left alive): the daemons place
writers on the least-loaded host (placement=least-loaded, the default;
docs/cluster.md "Where a transcode is written"), and a killed writer is
reassigned to another host. One scenario in three runs behind Redis
Sentinel (store=redis-sentinel://..., a master, a replica and three
sentinels, down-after 1 s): its Redis fault is a failover (kill -9 of
the master, once; the replica is promoted and the hosts follow it), so
the invariants are checked across a failover too. Redis keeps
an append-only file fsynced at each write, so its restart loses nothing
(docs/cluster.md: without persistence a restart may cost a transcode's
list; that limit is documented, not checked here).

Invariants, each a violation when broken:
  - a reader on a host that lived through its whole read gets no error and
    every byte (0 reader errors while one host lives);
  - a plain asset's bytes, through every host, are the file's (SHA-256);
  - a transcode's bytes are the committed ones: what each reader got, and
    what every host serves at the end, are the segment files the store
    lists, in order; all hosts serve the same bytes;
  - every copy on a host's disk is the file's bytes (SHA-256), and once the
    faults end some live host's disk holds one (within COPY_WAIT);
  - one writer per generation: no generation is claimed by two owners (the
    daemons' "generation G claimed by OWNER" lines), and every listed
    segment's generation is one that was claimed.

A violation prints its seed and a command that replays it; the last line
is `scenarios: N run, V violations`; the exit code is 1 when V > 0 (77 when
a tool the checker needs, or /dev/fuse, is missing).
"""

import argparse
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'integration'))

import pytest  # noqa: E402 - the harness fails with pytest.fail; caught below

from conftest import (Mounter, Nginx, catalog, free_port, make_clip, pid_lives,  # noqa: E402
                      sha256_file, wait_until)
from test_cluster import Redis, mount_host, resp, store_playlist, seg_file  # noqa: E402
from test_sentinel import NAME, RedisNode, fields  # noqa: E402
from test_transcode import PROFILE, writer_pids  # noqa: E402

READ_TIMEOUT = 30          # the daemons' read_timeout (s)
READER_WAIT = 150          # how long a reader may take, all faults included (s)
PLAIN_SIZE = 12 * 1024 * 1024
TC_ASSETS = {'clip-180': 'clip 180p.ts', 'clip-ts': 'clip.ts'}
COPY_WAIT = 60             # a copy of the plain asset made once the faults end (s)
HOST_NAMES = ('h0', 'h1', 'h2')
CLAIM = re.compile(r'lease: asset (\S+) session \S+ generation (\d+) claimed by (\S+)')


class Violation(Exception):
    pass


# --------------------------------------------------------------------------
# The scenario's world: data and origins (once per run), Redis and hosts
# --------------------------------------------------------------------------

def make_data(root):
    """A random plain file and a 20 s clip, which the origins serve; the
    plain file's SHA-256."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / 'plain.bin', 'wb') as f:
        f.write(os.urandom(PLAIN_SIZE))
    make_clip(root / 'clip.mkv', 20, '320x240', root.parent / 'ffmpeg.log')
    return sha256_file(root / 'plain.bin')


def make_catalog(origins, base):
    """Each possible host's disk is a storage of its own; the plain asset
    wants one copy."""
    p = dict(PROFILE)
    p['of'] = 'clip'
    c = catalog(
        {'id': 'plain', 'path': 'plain.bin', 'size': PLAIN_SIZE, 'copies': 1,
         'sources': [{'url': o.url('plain.bin')} for o in origins]},
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': o.url('clip.mkv')} for o in origins]},
        {'id': 'clip-180', 'path': TC_ASSETS['clip-180'], 'transcode': p},
        {'id': 'clip-ts', 'path': TC_ASSETS['clip-ts'], 'remux': {'of': 'clip'}})
    c['storages'] = [{'name': f'disk-{h}', 'path': str(base / f'disk-{h}'), 'host': h,
                      'min_free_bytes': 0} for h in HOST_NAMES]
    return c


class Host:
    """One daemon of the cluster, started again under the same host_id."""

    def __init__(self, world, name, speed):
        self.world, self.name, self.speed = world, name, speed
        self.mount = None
        self.lives = 0          # how many daemons it had
        self.kills = []         # when each was killed (monotonic)
        self.alive = False
        self.since = 0.0        # when the current daemon mounted (monotonic)
        self.port = free_port()  # its peer endpoint, the same in every life
        self.disk = world.dir / f'disk-{name}'
        self.disk.mkdir(exist_ok=True)

    def start(self):
        w = self.world
        self.mount = mount_host(w.mounter, w.cat, w.redis, self.name, w.work,
                                options=['placement=least-loaded',
                                         f'writer_max_speed={self.speed}',
                                         f'peer_listen=127.0.0.1:{self.port}',
                                         f'cluster_secret_file={w.secret}'],
                                read_timeout=READ_TIMEOUT, name=f'mnt-{self.name}')
        self.lives += 1
        self.alive = True
        self.since = time.monotonic()

    def kill(self):
        """SIGKILL of the whole host, by PID: the keeper, the worker that
        serves and its writers, at once (a worker left to die of its
        keeper's death would live on for a moment, still registered)."""
        worker = self.mount.worker_pid(10)
        pids = [self.mount.pid, worker] + writer_pids(worker)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.alive = False
        self.mount.proc.wait(10)
        for p in pids[1:]:
            wait_until(lambda: not pid_lives(p), 10, f'pid {p} of {self.name} gone')
        self.mount.unmount()     # the dead mount goes before the next daemon


class SentinelStore:
    """A master, a replica and three sentinels (test_sentinel.py's nodes),
    used where the scenario uses a Redis: url names the sentinels, port is
    the master's as they name it now. failover() kills the master (once)
    and waits for the sentinels to name the replica."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.nodes = []
        self.master = self.replica = None
        self.sents = []
        self.failed_over = False

    @property
    def url(self):
        return 'redis-sentinel://' + '+'.join(s.addr for s in self.sents) + f'/{NAME}'

    @property
    def port(self):
        for s in self.sents:
            try:
                return int(resp(s.port, 'SENTINEL', 'get-master-addr-by-name', NAME)[1])
            except (OSError, RuntimeError, TypeError, IndexError):
                continue
        return self.master.port

    def start(self):
        self.master = RedisNode(self.dir / 'master')
        self.nodes.append(self.master)
        self.master.start()
        self.replica = RedisNode(self.dir / 'replica', replica_of=self.master)
        self.nodes.append(self.replica)
        self.replica.start()
        wait_until(lambda: fields(resp(self.replica.port, 'INFO', 'replication'))
                   .get('master_link_status') == 'up', 20, 'the replica in sync')
        for i in range(3):
            n = RedisNode(self.dir / f'sentinel{i}', sentinel_of=self.master)
            self.nodes.append(n)
            self.sents.append(n.start())
        wait_until(lambda: all(len(resp(n.port, 'SENTINEL', 'sentinels', NAME)) == 2 and
                               len(resp(n.port, 'SENTINEL', 'replicas', NAME)) == 1
                               for n in self.sents), 30, 'the sentinels ready', interval=0.2)
        return self

    def failover(self):
        """kill -9 of the master; True once the sentinels name the replica."""
        if self.failed_over:
            return False
        self.failed_over = True
        self.master.kill()
        wait_until(lambda: self.port == self.replica.port, 30,
                   'the sentinels naming the replica', interval=0.2)
        return True

    def stop(self):
        for n in reversed(self.nodes):
            n.kill()


class World:
    def __init__(self, base, origins, rng, seed, sentinel=False):
        self.dir = base
        self.rng, self.seed = rng, seed
        self.work = base / 'work'
        self.mounter = Mounter(SEAMFS, base)
        self.cat = self.mounter.write_catalog(make_catalog(origins, base))
        self.secret = base / 'cluster.secret'
        self.secret.write_text(f'scenario-{seed}-{os.urandom(12).hex()}\n')
        os.chmod(self.secret, 0o600)
        self.sentinel = sentinel
        self.redis = SentinelStore(base / 'sentinel') if sentinel else \
            Redis(base / 'redis', persist=True)
        self.hosts = []
        self.readers = []
        self.lock = threading.Lock()
        self.violations = []
        self.events = []        # what the faults did, for the scenario's line

    def violate(self, what):
        with self.lock:
            self.violations.append(what)

    def alive(self):
        return [h for h in self.hosts if h.alive]


# --------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------

class Reader:
    """Reads one asset through one host's mount from `start` to the end in
    reads of `chunk` bytes (plain assets paced like a player), in a thread."""

    def __init__(self, host, asset, path, start, chunk, pace):
        self.host, self.asset, self.path = host, asset, path
        self.start, self.chunk, self.pace = start, chunk, pace
        self.t0 = time.monotonic()
        self.data = None
        self.error = None
        self.t1 = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        buf = bytearray()
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                off = self.start
                while True:
                    b = os.pread(fd, self.chunk, off)
                    if not b:
                        break
                    buf += b
                    off += len(b)
                    if self.pace:
                        time.sleep(self.pace)
            finally:
                os.close(fd)
            self.data = bytes(buf)
        except OSError as e:
            self.error = e
        self.t1 = time.monotonic()

    def survived(self):
        """No kill of its host's daemon fell within the read."""
        t1 = self.t1 if self.t1 is not None else time.monotonic()
        return not any(self.t0 <= k <= t1 for k in self.host.kills)


def start_reader(world, rng, host):
    asset = rng.choice(['plain', 'plain', 'clip-180', 'clip-ts'])
    if asset == 'plain':
        path = host.mount.path('plain.bin')
        start = rng.choice([0, 0, rng.randrange(PLAIN_SIZE)])
        r = Reader(host, asset, path, start, rng.choice([65536, 131072, 262144]), 0.03)
    else:
        path = host.mount.path(TC_ASSETS[asset])
        size = os.stat(path).st_size
        start = rng.choice([0, 0, rng.randrange(size)])
        r = Reader(host, asset, path, start, rng.choice([65536, 262144, 1 << 20]), 0)
    world.readers.append(r)
    r.thread.start()
    return r


# --------------------------------------------------------------------------
# One scenario
# --------------------------------------------------------------------------

def plant_link(world, rng, at):
    """Someone who can write work_dir moves a committed segment of the
    remux aside and puts at its name a link to a file of its size with
    other bytes (outside work_dir). No reader may get those bytes: the
    segment is made again under a new generation, and a remux's bytes are
    the same (docs/transcode.md, "Only what seamfs made")."""
    entries, _ = store_playlist(world.redis, 'clip-ts')
    if not entries:
        return
    k, size, g = rng.choice(entries)
    job = world.work / 'clip-ts'
    seg = seg_file(job, k, g)
    bait = world.dir / f'bait-{k}-{g}'
    try:
        bait.write_bytes(os.urandom(size))
        os.rename(seg, job / f'moved-{k}-{g}.ts')
        os.symlink(bait, seg)
    except OSError:
        return                  # made again or gone meanwhile
    world.events.append(f'link:{k}@{at:.1f}s')


def kill_writer(world, rng, at):
    """SIGKILL of one writer of a live host, its daemon left alive: the
    writer is reassigned (placed again, another host first)."""
    pids = [(h, p) for h in world.alive() for p in writer_pids(h.mount.worker_pid(10))]
    if not pids:
        return
    h, p = rng.choice(pids)
    try:
        os.kill(p, signal.SIGKILL)
    except ProcessLookupError:
        return
    world.events.append(f'writer on {h.name}@{at:.1f}s')


def faults(world, rng, t_end):
    """Kills and restarts hosts and Redis, and plants links, at random
    moments until t_end."""
    events = sorted((rng.uniform(0.5, t_end),
                     rng.choice(['host', 'host', 'redis', 'link', 'writer']))
                    for _ in range(rng.randint(1, 4)))
    t0 = time.monotonic()
    for at, kind in events:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        if kind == 'link':
            plant_link(world, rng, at)
            continue
        if kind == 'writer':
            kill_writer(world, rng, at)
            continue
        if kind == 'redis' and world.sentinel:
            if world.redis.failover():
                world.events.append(f'failover@{at:.1f}s')
            continue
        if kind == 'redis':
            world.events.append(f'redis@{at:.1f}s')
            world.redis.stop()
            time.sleep(rng.uniform(0.3, 3.0))
            world.redis.start()
            continue
        live = world.alive()
        if len(live) < 2:
            continue            # never the last live host
        victim = rng.choice(live)
        world.events.append(f'{victim.name}@{at:.1f}s')
        victim.kills.append(time.monotonic())
        victim.kill()
        time.sleep(rng.uniform(0.5, 4.0))
        victim.start()
        start_reader(world, rng, victim)


def faults_checked(world, rng, t_end):
    """faults(), a failure of the harness itself (a host that did not come
    back) counted as a violation rather than lost with its thread."""
    try:
        faults(world, rng, t_end)
    except (Exception, pytest.fail.Exception) as e:  # noqa: BLE001 - reported as one
        world.violate(f'harness: the fault schedule failed: {e!r}')


def committed(world, asset):
    """The bytes the store lists for a transcode, in order, or None."""
    entries, _ = store_playlist(world.redis, asset)
    job = world.work / asset
    by = {}
    for k, _, g in entries:
        by[k] = g
    if sorted(by) != list(range(len(by))) or not by:
        return None, entries
    return b''.join(seg_file(job, k, by[k]).read_bytes() for k in sorted(by)), entries


def read_whole(path, timeout):
    box = {}

    def run():
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                out = bytearray()
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    out += b
                box['v'] = bytes(out)
            finally:
                os.close(fd)
        except OSError as e:
            box['e'] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        return None, 'still blocked after %d s' % timeout
    return box.get('v'), box.get('e')


def check(world, plain_sha):
    # readers on hosts that lived through their read
    for r in world.readers:
        r.thread.join(max(0.0, r.t0 + READER_WAIT - time.monotonic()) if r.t0 else READER_WAIT)
        if r.thread.is_alive():
            if r.survived():
                world.violate(f'reader of {r.asset} on {r.host.name} from {r.start} '
                              f'still blocked after {READER_WAIT} s')
            continue
        if not r.survived():
            continue
        if r.error is not None:
            world.violate(f'reader of {r.asset} on {r.host.name} (chunk {r.chunk}, from '
                          f'{r.start}) failed after {r.t1 - r.t0:.1f} s: {r.error!r}')
    plain = (world.dir.parent / 'data' / 'plain.bin').read_bytes()
    for r in world.readers:
        if r.asset == 'plain' and r.data is not None and r.survived() and \
                r.data != plain[r.start:]:
            world.violate(f'plain asset: reader on {r.host.name} from {r.start} got other '
                          f'bytes than the file\'s ({first_diff(r.data, plain[r.start:])})')
    # every host reads every asset whole; all the same, all what they must be
    tc = {}
    for h in world.alive():
        for asset, name in [('plain', 'plain.bin')] + list(TC_ASSETS.items()):
            data, err = read_whole(h.mount.path(name), READER_WAIT)
            if data is None:
                world.violate(f'final read of {asset} on {h.name}: {err!r}')
                continue
            if asset == 'plain':
                if hashlib.sha256(data).hexdigest() != plain_sha:
                    world.violate(f'plain asset on {h.name}: SHA-256 differs from the file\'s')
            else:
                tc.setdefault(asset, {})[h.name] = data
    for asset, by_host in tc.items():
        want, entries = committed(world, asset)
        if want is None:
            world.violate(f'{asset}: the store does not list every segment: {entries}')
            continue
        for name, data in by_host.items():
            if data != want:
                world.violate(f'{asset} on {name}: not the committed segments '
                              f'({first_diff(data, want)})')
        for r in world.readers:
            if r.asset == asset and r.data is not None and r.survived() and \
                    r.data != want[r.start:]:
                world.violate(f'{asset}: reader on {r.host.name} from {r.start} got bytes '
                              f'that are not the committed ones ({first_diff(r.data, want[r.start:])})')
    check_generations(world)
    check_copies(world, plain_sha)


def check_copies(world, plain_sha):
    """Every copy on a host's disk is the file's bytes; once the faults
    end, a live host's disk holds one."""
    def copies():
        return [h.disk / 'plain.bin' for h in world.alive() if (h.disk / 'plain.bin').exists()]
    deadline = time.monotonic() + COPY_WAIT
    while not copies() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not copies():
        world.violate(f'no live host\'s disk holds a copy of plain after {COPY_WAIT} s')
    for h in world.hosts:
        f = h.disk / 'plain.bin'
        if f.exists() and not f.is_symlink() and sha256_file(f) != plain_sha:
            world.violate(f'the copy of plain on {h.name}\'s disk is not the file\'s bytes')


def first_diff(a, b):
    if len(a) != len(b):
        return f'{len(a)} bytes, {len(b)} expected'
    i = next(i for i in range(len(a)) if a[i] != b[i])
    return f'first difference at byte {i}'


def check_generations(world):
    """One writer per generation: each claimed generation has one owner, and
    every listed segment's generation was claimed."""
    owners = {}
    for m in world.mounter.mounts:
        for aid, gen, owner in CLAIM.findall(m.log()):
            key = (aid, int(gen))
            if owners.setdefault(key, owner) != owner:
                world.violate(f'{aid}: generation {gen} claimed by {owners[key]} and {owner}')
    for aid in TC_ASSETS:
        entries, _ = store_playlist(world.redis, aid)
        for k, _, g in entries:
            if (aid, g) not in owners:
                world.violate(f'{aid}: segment {k} listed under generation {g}, which no '
                              'host claimed')
        for f in (world.work / aid).glob('seg-*.ts'):
            m = re.fullmatch(r'seg-(\d+)\.g(\d+)\.ts', f.name)
            if m and (aid, int(m.group(2))) not in owners:
                world.violate(f'{aid}: {f.name} has a generation no host claimed')


def scenario(seed, base, origins, plain_sha):
    """Runs the scenario of `seed` in base; returns its world (its
    violations, and a summary of what it did)."""
    rng = random.Random(seed)
    sentinel = rng.random() < 1 / 3
    world = World(base, origins, rng, seed, sentinel)
    nhosts = rng.choice([2, 2, 3])
    try:
        world.redis.start()
        for i in range(nhosts):
            world.hosts.append(Host(world, HOST_NAMES[i], rng.choice([1, 2, 3])))
            world.hosts[-1].start()
        ft = threading.Thread(target=faults_checked, args=(world, rng, rng.uniform(2.0, 10.0)),
                              daemon=True)
        for h in world.hosts:
            for _ in range(rng.randint(1, 3)):
                start_reader(world, rng, h)
        ft.start()
        ft.join(120)
        if ft.is_alive():
            world.violate('the fault schedule did not end within 120 s (a host did not '
                          'stop or start)')
        else:
            check(world, plain_sha)
    except (Exception, pytest.fail.Exception) as e:  # noqa: BLE001 - reported as one
        world.violate(f'harness: {e!r}')
    finally:
        world.mounter.cleanup(report_logs=False)
        world.redis.stop()
    readers = len(world.readers)
    kept = sum(r.survived() for r in world.readers)
    placed = sum(m.log().count('placed here by') for m in world.mounter.mounts)
    world.summary = (f'{nhosts} hosts{" behind Sentinel" if sentinel else ""}, '
                     f'{readers} readers ({kept} on hosts that lived), '
                     f'{placed} writers placed on another host, '
                     f'killed: {", ".join(world.events) or "nothing"}')
    return world
# --------------------------------------------------------------------------

def tools_missing():
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse'
    for t in ('redis-server', 'nginx', 'ffmpeg', 'fusermount3'):
        if not shutil.which(t):
            return t
    return None


def main():
    global SEAMFS
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--count', type=int, default=5)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--build', required=True, help='the meson build directory')
    ap.add_argument('--keep', action='store_true', help='keep every scenario\'s directory')
    args = ap.parse_args()
    SEAMFS = str(Path(args.build).resolve() / 'seamfs')
    if not os.access(SEAMFS, os.X_OK):
        print(f'--build {args.build}: no seamfs binary there ({SEAMFS})', file=sys.stderr)
        return 2
    missing = tools_missing()
    if missing:
        print(f'cluster scenarios: {missing} is missing; skipped', file=sys.stderr)
        return 77
    seed0 = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    root = Path(tempfile.mkdtemp(prefix='seamfs-cluster-'))
    origins = []
    nviol = nrun = 0
    try:
        plain_sha = make_data(root / 'data')
        for i in range(2):
            origins.append(Nginx(root / 'data', root / f'nginx{i}').start())
        for i in range(args.count):
            seed = seed0 + i
            base = root / f's{seed}'
            base.mkdir()
            t0 = time.monotonic()
            world = scenario(seed, base, origins, plain_sha)
            found = world.violations
            nrun += 1
            print(f'scenario seed {seed}: {world.summary}: {len(found)} violations '
                  f'({time.monotonic() - t0:.1f} s)', flush=True)
            for v in found:
                nviol += 1
                print(f'violation: seed {seed}: {v}', flush=True)
            if found:
                print(f'  replay: python3 {Path(__file__).resolve()} --count 1 --seed {seed} '
                      f'--build {args.build}   (logs kept in {base})', flush=True)
            elif not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    finally:
        for o in origins:
            o.stop()
        if not nviol and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f'scenarios: {nrun} run, {nviol} violations', flush=True)
    return 1 if nviol else 0


SEAMFS = None

if __name__ == '__main__':
    # meson ends a test that ran out of time with SIGTERM: unwind through
    # the finally blocks, which stop the daemons, servers and mounts
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    sys.exit(main())
