"""Cluster mode: providers' connection slots across hosts.  Two daemons on
one Redis (each its own mountpoint, state_dir and host_id) share a
provider's max_connections: the origin (seam-origin, whose log counts the
connections open at once) never sees more, readers on both mounts all get
their bytes (SHA-256 checked), a host's closed sessions give their slots up
when the other host waits, and a daemon killed with -9 keeps its slots only
until its holding expires.  Redis is started per test (test_cluster.Redis)
and stopped by PID; every wait is bounded."""
import hashlib
import os
import random
import signal
import subprocess
import sys
import threading

from conftest import MIB, bounded, catalog, run_viewers, sha256_file, wait_until
from test_cluster import mount_host, redis, resp, status  # noqa: F401 (fixture)

# Opens the file, reads 64 KiB, says "ready" with their SHA-256 and waits
# for a line: a playback that holds its slot.
HOLDER = r'''
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
print('ready', hashlib.sha256(os.read(fd, 65536)).hexdigest(), flush=True)
sys.stdin.readline()
'''

OPTS = ['admission_timeout=60', 'liveness_interval=0']


def head_sha(data):
    with open(data['mid.bin'].path, 'rb') as f:
        return hashlib.sha256(f.read(65536)).hexdigest()


def cdn_catalog(origin, data, limit):
    return catalog({'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                    'mtime': 1700000000,
                    'sources': [{'url': origin.url('mid.bin'), 'provider': 'cdn'}]},
                   providers=[{'name': 'cdn', 'max_connections': limit}])


def slot_fields(redis):
    raw = resp(redis.port, 'HGETALL', 'seamfs:slots') or []
    return {raw[i].decode(): raw[i + 1].decode() for i in range(0, len(raw), 2)}


def churn(path, ref, rounds, seed):
    """Reopens path and reads at random offsets (4 KiB to 2 MiB), rounds
    times, each read checked against ref; raises on a wrong byte."""
    rnd = random.Random(seed)
    for i in range(rounds):
        with open(path, 'rb', buffering=0) as f:
            off = rnd.randrange(0, len(ref) - 2 * MIB)
            n = rnd.choice([4096, 65536, 700 * 1024, 2 * MIB])
            f.seek(off)
            got = f.read(n)
            if got != ref[off:off + n]:
                raise AssertionError(f'{path}: reopen {i}: wrong bytes at {off}')


def test_limit_holds_across_two_hosts(redis, seamfs, data, make_origin, tmp_path):
    """Ten viewers, five on each mount, and a process on each mount that
    reopens and seeks 15 times, on a provider with max_connections=2 for the
    whole cluster: every byte is right, the origin never sees more than 2
    connections at once, and each host's status shows the slots it and the
    other host hold."""
    o = make_origin(data.dir, extra_args=['--rate', str(16 * MIB)])
    cat = cdn_catalog(o, data, 2)
    work = tmp_path / 'work'
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=OPTS, read_timeout=60)
    b = mount_host(seamfs, cat, redis, 'beta', work, options=OPTS, read_timeout=60)
    ref = data.bytes('mid.bin')
    o.clear()
    errors = []

    def churner(m, seed):
        try:
            churn(m.path('movie.bin'), ref, 15, seed)
        except Exception as e:  # reported below, on the test's thread
            errors.append(e)
    threads = [threading.Thread(target=churner, args=(m, i)) for i, m in enumerate((a, b))]
    for t in threads:
        t.start()
    try:
        run_viewers([m.path('movie.bin') for m in (a, b) * 5], data['mid.bin'].sha256)
    finally:
        for t in threads:
            t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    log = o.log()
    assert log['max_concurrent'] <= 2, log['max_concurrent']
    for m in (a, b):
        cdn = status(m)['providers'][0]
        assert cdn['max_connections'] == 2
        assert cdn['cluster'] is not None
        assert cdn['cluster']['slots_granted'] + cdn['cluster']['slots_other_hosts'] <= 2
        assert not cdn['cluster']['local_share']


def test_killed_host_leaks_no_slot(redis, seamfs, data, make_origin, tmp_path):
    """max_connections=1: a playback on A holds the cluster's one slot, so an
    open on B waits; A is killed with -9; B gets the slot once A's holding
    expires, reads every byte, and the store no longer names A."""
    o = make_origin(data.dir)
    cat = cdn_catalog(o, data, 1)
    work = tmp_path / 'work'
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=OPTS, read_timeout=60)
    b = mount_host(seamfs, cat, redis, 'beta', work, options=OPTS, read_timeout=60)
    holder = subprocess.Popen([sys.executable, '-c', HOLDER, a.path('movie.bin')],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bounded(holder.stdout.readline, 30, 'A holds the slot').split() == \
            ['ready', head_sha(data)]
        wait_until(lambda: any(k.startswith('alpha\x1f') for k in slot_fields(redis)), 10,
                   "A's holding in the store")
        os.kill(a.pid, signal.SIGKILL)
        holder.kill()
        holder.wait(10)
        assert bounded(lambda: sha256_file(b.path('movie.bin')), 60,
                       'B reads the whole file') == data['mid.bin'].sha256
        assert not any(k.startswith('alpha\x1f') for k in slot_fields(redis))
        assert o.log()['max_concurrent'] <= 1
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(5)


def test_closed_sessions_give_way_to_the_other_host(redis, seamfs, data, make_origin,
                                                    tmp_path):
    """max_connections=1 and a long session_ttl: A reads the file whole and
    closes it (its session lingers, holding the slot); B's open does not
    wait for A's session_ttl: A ends its lingering session because B wants
    the slot, and B reads every byte."""
    o = make_origin(data.dir)
    cat = cdn_catalog(o, data, 1)
    work = tmp_path / 'work'
    opts = OPTS + ['session_ttl=600']
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=opts, read_timeout=60)
    b = mount_host(seamfs, cat, redis, 'beta', work, options=opts + ['admission_timeout=20'],
                   read_timeout=60)
    assert bounded(lambda: sha256_file(a.path('movie.bin')), 60, 'A reads') == \
        data['mid.bin'].sha256
    wait_until(lambda: status(a)['sessions'] and
               status(a)['sessions'][0]['state'] == 'lingering', 10, "A's session lingering")
    assert bounded(lambda: sha256_file(b.path('movie.bin')), 60, 'B reads') == \
        data['mid.bin'].sha256
    cdn = status(a)['providers'][0]
    assert cdn['counters']['lingering_sessions_ended'] >= 1
    assert o.log()['max_concurrent'] <= 1


def test_fewest_sessions_counts_both_hosts(redis, seamfs, data, make_origin, tmp_path):
    """Three providers, ten playbacks on A (4/3/3), then twenty on B: B
    counts A's sessions, so the cluster ends 10/10/10 (B alone would have
    made 7/7/6, 11/10/9 in all); every playback read its first bytes right."""
    origins = [make_origin(data.dir) for _ in range(3)]
    cat = catalog({'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                   'mtime': 1700000000,
                   'sources': [{'url': o.url('mid.bin'), 'provider': f'p{i + 1}'}
                               for i, o in enumerate(origins)]},
                  providers=[{'name': f'p{i + 1}'} for i in range(3)])
    work = tmp_path / 'work'
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=OPTS)
    b = mount_host(seamfs, cat, redis, 'beta', work, options=OPTS)
    holders = []

    def hold(m):
        p = subprocess.Popen([sys.executable, '-c', HOLDER, m.path('movie.bin')],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        holders.append(p)
        assert bounded(p.stdout.readline, 30, 'a playback').split() == \
            ['ready', head_sha(data)]

    def by_provider(m, key):
        return {p['name']: (p['sessions'] if key == 'sessions'
                            else p['cluster']['sessions_other_hosts'])
                for p in status(m)['providers']}
    try:
        for _ in range(10):
            hold(a)
        wait_until(lambda: sum(by_provider(b, 'others').values()) == 10, 10,
                   "A's ten sessions counted on B")
        for _ in range(20):
            hold(b)
        sa, sb = by_provider(a, 'sessions'), by_provider(b, 'sessions')
        total = {k: sa[k] + sb[k] for k in sa}
        assert total == {'p1': 10, 'p2': 10, 'p3': 10}, (sa, sb)
    finally:
        for p in holders:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    assert all(o.log()['requests'] for o in origins)


def test_store_down_each_host_keeps_its_share(redis, seamfs, data, make_origin, tmp_path):
    """max_connections=2 on two hosts, then Redis stops: each host keeps to
    its local share (1), reads on both mounts still get every byte, the
    status says local_share; Redis back (empty): the hosts lease again."""
    o = make_origin(data.dir, extra_args=['--rate', str(16 * MIB)])
    cat = cdn_catalog(o, data, 2)
    work = tmp_path / 'work'
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=OPTS, read_timeout=60)
    b = mount_host(seamfs, cat, redis, 'beta', work, options=OPTS, read_timeout=60)
    wait_until(lambda: len(status(a)['hosts']) == 2, 10, 'both hosts listed')
    port = redis.port
    redis.stop()
    o.clear()
    run_viewers([m.path('movie.bin') for m in (a, b, a, b)], data['mid.bin'].sha256)
    assert o.log()['max_concurrent'] <= 2
    for m in (a, b):
        cdn = status(m)['providers'][0]
        assert cdn['cluster']['local_share'] is True
        assert cdn['cluster']['slots_granted'] == 1
    redis.port = port
    redis.start()
    assert bounded(lambda: sha256_file(a.path('movie.bin')), 60, 'A reads again') == \
        data['mid.bin'].sha256
    wait_until(lambda: not status(a)['providers'][0]['cluster']['local_share'], 10,
               'A leasing from the store again')


def test_provider_down_on_one_host_is_down_for_all(redis, seamfs, data, make_origin,
                                                    tmp_path):
    """A probes its providers, B never does: when p1 stops answering, A finds
    it down within liveness_ttl and B, told by the store, shows it down and
    opens on p2 without trying p1 first (every byte right); when p1 answers
    again, A's probe sees it and B shows it live again. A holds a file open
    throughout: an idle mount probes no provider that answers (issue 33)."""
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    cat = catalog({'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                   'mtime': 1700000000,
                   'sources': [{'url': o1.url('mid.bin'), 'provider': 'p1'},
                               {'url': o2.url('mid.bin'), 'provider': 'p2'}]},
                  providers=[{'name': 'p1'}, {'name': 'p2'}])
    work = tmp_path / 'work'
    a = mount_host(seamfs, cat, redis, 'alpha', work,
                   options=['liveness_interval=0.2', 'liveness_ttl=1'])
    b = mount_host(seamfs, cat, redis, 'beta', work,
                   options=['liveness_interval=0', 'liveness_ttl=1'])

    def state(m, name):
        return next(p['state'] for p in status(m)['providers'] if p['name'] == name)
    held = open(a.path('movie.bin'), 'rb', buffering=0)
    try:
        with open(data['mid.bin'].path, 'rb') as f:
            assert bounded(lambda: held.read(64 * 1024), 30, 'A reads') == f.read(64 * 1024)
        o1.down(drop=True)
        wait_until(lambda: state(a, 'p1') == 'down', 15, 'A finds p1 down')
        wait_until(lambda: state(b, 'p1') == 'down', 10, 'B told that p1 is down')
        o2.clear()
        assert bounded(lambda: sha256_file(b.path('movie.bin')), 60, 'B reads') == \
            data['mid.bin'].sha256
        assert [s['provider'] for s in status(b)['sessions']] == ['p2']
        o1.up()
        wait_until(lambda: state(a, 'p1') == 'live', 15, 'A sees p1 answer again')
        wait_until(lambda: state(b, 'p1') == 'live', 10, 'B told that p1 answers')
    finally:
        held.close()
