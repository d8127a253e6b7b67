"""Copies across hosts (docs/copies.md, "Across hosts"): two daemons on one
real Redis, each with its own local storage (a storage that names its
host). The cluster places an asset's one copy on one host's disk; that host
serves it on its peer endpoint (peer_listen, the cluster's secret), and the
other host reads it from there as a source of its own (provider
peer:HOST): with the origin down it reads every byte from the peer; with
the peer killed too its reads fail with EIO within read_timeout, and go to
the origin once the origin is back. The peer endpoint answers 401 without
the secret, 404 for an asset it holds no copy of, 416 past the end, and
never serves a link planted in its storage. The secret is in no log, no
status and no key of the store. Every byte read is checked by SHA-256."""

import errno
import hashlib
import http.client
import json
import os
import socket
import threading

import pytest

from conftest import MIB, free_port, wait_until
from test_cluster import mount_host, redis, resp  # noqa: F401 (redis: the fixture)
from test_copies import entry, job, status, storage

COPY_WAIT = 60
SECRET = 'peer-secret-0123456789-abcdef'


def read_direct(path):
    """SHA-256 of the whole file read with O_DIRECT: through seamfs, not the
    page cache an earlier read filled."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        while True:
            b = os.read(fd, MIB)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def read_outcome(path, timeout):
    """read_direct in a thread, bounded: ('ok', sha) or ('err', errno)."""
    box = {}

    def run():
        try:
            box['r'] = ('ok', read_direct(path))
        except OSError as e:
            box['r'] = ('err', e.errno)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f'a read of {path} did not end within {timeout} s'
    return box['r']


def get(port, path, headers=None):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    try:
        c.request('GET', path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def auth(secret=SECRET, **more):
    h = {'Authorization': f'Bearer {secret}'}
    h.update(more)
    return h


class Cluster:
    """Two hosts, alpha and beta, each with its own disk and peer port."""

    def __init__(self, seamfs, data, make_origin, redis, tmp_path, copies=1, min_free=0,
                 read_timeout=30, start=('alpha', 'beta'), off=()):
        self.o = make_origin(data.dir)
        self.df = data['mid.bin']
        self.other = data['odd.bin']
        self.secret = tmp_path / 'cluster.secret'
        self.secret.write_text(SECRET + '\n')
        os.chmod(self.secret, 0o600)
        self.disk = {}
        self.port = {}
        storages = []
        for h in ('alpha', 'beta'):
            d = tmp_path / f'disk-{h}'
            d.mkdir()
            self.disk[h] = d
            self.port[h] = free_port()
            storages.append(storage(f'disk-{h}', d, host=h, min_free_bytes=min_free,
                                    copying=h not in off))
        self.cat = {'storages': storages,
                    'assets': [entry('movie', 'Movies/movie.bin', self.df,
                                     self.o.url('mid.bin'), copies=copies),
                               entry('other', 'Movies/other.bin', self.other,
                                     self.o.url('odd.bin'), copies=0)]}
        self.args = (seamfs, redis, tmp_path / 'work', read_timeout)
        self.m = {}
        for h in start:
            self.start(h)

    def start(self, h, name=None):
        seamfs, redis, work, read_timeout = self.args
        opts = [f'peer_listen=127.0.0.1:{self.port[h]}', f'cluster_secret_file={self.secret}',
                'standby_delay=0']
        self.m[h] = mount_host(seamfs, self.cat, redis, h, work, options=opts,
                               read_timeout=read_timeout, name=name)

    def copy_file(self, h):
        return self.disk[h] / 'Movies' / 'movie.bin'

    def holders(self):
        return [h for h in ('alpha', 'beta') if self.copy_file(h).exists()]

    def wait_one_copy(self):
        """Exactly one host made the copy and both count it (no job left)."""
        wait_until(lambda: len(self.holders()) >= 1 and
                   all(job(status(m), 'movie') is None for m in self.m.values()),
                   COPY_WAIT, 'the copy made and counted by both hosts')
        assert len(self.holders()) == 1, f'copies on {self.holders()}'
        h = self.holders()[0]
        o = 'beta' if h == 'alpha' else 'alpha'
        return h, o


def peer_locations(m, aid):
    for a in status(m)['copies']['assets']:
        if a['asset'] == aid:
            return [loc for loc in a['locations'] if loc['kind'] == 'peer']
    return []


def test_one_copy_on_one_host_read_from_the_peer_then_eio_then_the_origin(
        seamfs, data, make_origin, redis, tmp_path):
    c = Cluster(seamfs, data, make_origin, redis, tmp_path, read_timeout=5)
    holder, other = c.wait_one_copy()
    df = c.df
    assert hashlib.sha256(c.copy_file(holder).read_bytes()).hexdigest() == df.sha256
    assert not list(c.disk[other].rglob('*.partial'))
    assert not (c.disk[other] / 'Movies').exists()
    assert 'copying from' in c.m[holder].log()
    assert 'copying from' not in c.m[other].log()
    # the other host has the holder's copy as a source of its own
    wait_until(lambda: [l['provider'] for l in peer_locations(c.m[other], 'movie')
                        if l['serving']] == [f'peer:{holder}'], 15,
               f'peer:{holder} a source on {other}')
    assert peer_locations(c.m[holder], 'movie') == []

    # the origin dies: the other host reads every byte from the peer
    c.o.down(drop=True)
    mo = c.m[other]
    assert read_direct(mo.path('Movies/movie.bin')) == df.sha256
    assert read_direct(c.m[holder].path('Movies/movie.bin')) == df.sha256

    # the holder dies too: reads fail with EIO, bounded by read_timeout
    c.m[holder].crash()
    outcome = read_outcome(mo.path('Movies/movie.bin'), 5 + 40)
    assert outcome == ('err', errno.EIO), outcome
    # its heartbeat expires: its copy leaves the choice
    wait_until(lambda: not any(l['serving'] for l in peer_locations(mo, 'movie')), 15,
               f'peer:{holder} out of the choice on {other}')

    # the holder comes back (its copy found on its disk): it is a source
    # again, and the other host reads every byte from it, the origin down
    c.start(holder, name=f'mnt-{holder}-again')
    wait_until(lambda: [l['provider'] for l in peer_locations(mo, 'movie')
                        if l['serving']] == [f'peer:{holder}'], 20,
               f'peer:{holder} a source on {other} again')
    assert read_direct(mo.path('Movies/movie.bin')) == df.sha256

    # the origin is back and the holder dies again: reads go to the origin
    c.o.up()
    c.m[holder].crash()
    wait_until(lambda: read_outcome(mo.path('Movies/movie.bin'), 45) == ('ok', df.sha256),
               60, 'a byte-exact read from the origin once it is back')


def test_peer_endpoint_secret_ranges_404_and_a_planted_link(seamfs, data, make_origin, redis,
                                                            tmp_path):
    c = Cluster(seamfs, data, make_origin, redis, tmp_path)
    holder, other = c.wait_one_copy()
    df = c.df
    port = c.port[holder]
    whole = df.path.read_bytes()

    # no secret, another secret: 401, no byte of the asset
    for headers in ({}, auth('not-the-secret-at-all-0000'), {'Authorization': SECRET}):
        st, _, body = get(port, '/v1/copies/movie', headers)
        assert st == 401 and whole[:64] not in body
    # the secret, an asset it holds no copy of: 404 (the origin is not asked)
    before = len(c.o.requests('/odd.bin'))
    assert get(port, '/v1/copies/other', auth())[0] == 404
    assert get(port, '/v1/copies/nosuch', auth())[0] == 404
    assert len(c.o.requests('/odd.bin')) == before
    # the held one: the whole file, ranges, 416 past the end
    st, _, body = get(port, '/v1/copies/movie', auth())
    assert st == 200 and hashlib.sha256(body).hexdigest() == df.sha256
    st, hd, body = get(port, '/v1/copies/movie', auth(Range='bytes=1000-1999'))
    assert st == 206 and body == whole[1000:2000]
    assert hd['Content-Range'] == f'bytes 1000-1999/{df.size}'
    st, hd, body = get(port, '/v1/copies/movie', auth(Range='bytes=-77'))
    assert st == 206 and body == whole[-77:]
    st, hd, _ = get(port, '/v1/copies/movie', auth(Range=f'bytes={df.size}-'))
    assert st == 416 and hd['Content-Range'] == f'bytes */{df.size}'

    # each host's peer URL is in the registry
    for m in c.m.values():
        urls = {h['host_id']: h['peer_url'] for h in status(m)['hosts']}
        assert urls == {h: f'http://127.0.0.1:{c.port[h]}' for h in ('alpha', 'beta')}

    # the secret is in no log, no status, no key of the store
    for m in c.m.values():
        assert SECRET not in m.log()
        with open(m.path('.seamfs/status.json')) as f:
            assert SECRET not in f.read()
    for key in resp(redis.port, 'KEYS', '*'):
        kind = resp(redis.port, 'TYPE', key)
        vals = (resp(redis.port, 'HGETALL', key) if kind == b'hash' else
                resp(redis.port, 'SMEMBERS', key) if kind == b'set' else
                [resp(redis.port, 'GET', key)] if kind == b'string' else [])
        assert all(SECRET.encode() not in (v or b'') for v in vals + [key]), key

    # a link planted in the copy's place (to a file of the same size): not
    # served; the asset is still read byte-exact on the other host
    bait = c.disk[holder] / 'bait.bin'
    bait.write_bytes(b'\xee' * df.size)
    f = c.copy_file(holder)
    tmp = f.with_name('planted')
    os.symlink(bait, tmp)
    os.rename(tmp, f)
    st, _, body = get(port, '/v1/copies/movie', auth(Range='bytes=0-4095'))
    assert st == 404 and b'\xee' * 64 not in body
    assert read_direct(c.m[other].path('Movies/movie.bin')) == df.sha256


def test_no_host_with_room_waits_without_an_attempt(seamfs, data, make_origin, redis, tmp_path):
    c = Cluster(seamfs, data, make_origin, redis, tmp_path, min_free=1 << 60)
    for m in c.m.values():
        wait_until(lambda m=m: (job(status(m), 'movie') or {}).get('reason') == 'no room', 20,
                   'movie waiting for "no room"')
        j = job(status(m), 'movie')
        assert j['failed_attempts'] == 0 and j['state'] == 'waiting'
    assert c.holders() == []
    assert read_direct(c.m['alpha'].path('Movies/movie.bin')) == c.df.sha256


def test_no_live_host_waits_until_one_comes(seamfs, data, make_origin, redis, tmp_path):
    # alpha's disk has the role off; beta's would take it, but beta is not up
    c = Cluster(seamfs, data, make_origin, redis, tmp_path, start=('alpha',), off=('alpha',))
    a = c.m['alpha']
    wait_until(lambda: (job(status(a), 'movie') or {}).get('reason') == 'no live host', 20,
               'movie waiting for "no live host"')
    assert job(status(a), 'movie')['failed_attempts'] == 0
    assert c.holders() == []
    # beta comes: the job goes on by itself, the copy is made on beta's disk
    # and alpha reads it from beta with the origin down
    c.start('beta')
    holder, _ = c.wait_one_copy()
    assert holder == 'beta'
    wait_until(lambda: [l['provider'] for l in peer_locations(a, 'movie') if l['serving']] ==
               ['peer:beta'], 15, 'peer:beta a source on alpha')
    c.o.down(drop=True)
    assert read_direct(a.path('Movies/movie.bin')) == c.df.sha256


def test_secret_file_refused_when_others_may_read_it(seamfs, data, redis, tmp_path):
    secret = tmp_path / 'open.secret'
    secret.write_text(SECRET + '\n')
    os.chmod(secret, 0o644)
    cat = seamfs.write_catalog({'assets': [entry('movie', 'm.bin', data['one.bin'],
                                                 'http://127.0.0.1:9/one.bin')]})
    mnt = seamfs.new_mountpoint('refused')
    base = [f'store={redis.url}', 'host_id=alpha']
    r = seamfs.run(['-f', '-o', ','.join(base + [f'peer_listen=127.0.0.1:{free_port()}',
                                              f'cluster_secret_file={secret}']),
                    cat, mnt], mountpoints=[mnt])
    assert r.returncode == 2
    assert 'cluster_secret_file' in r.stderr and 'readable by every user' in r.stderr
    assert SECRET not in r.stderr + r.stdout
    # serving copies without a secret is refused too
    r = seamfs.run(['-f', '-o', ','.join(base + [f'peer_listen=127.0.0.1:{free_port()}']),
                    cat, mnt], mountpoints=[mnt])
    assert r.returncode == 2 and 'cluster_secret_file' in r.stderr
    # a wildcard address needs the URL the others reach it by
    os.chmod(secret, 0o600)
    r = seamfs.run(['-f', '-o', ','.join(base + [f'peer_listen=0.0.0.0:{free_port()}',
                                              f'cluster_secret_file={secret}']),
                    cat, mnt], mountpoints=[mnt])
    assert r.returncode == 2 and 'peer_url=' in r.stderr
    # a port it cannot listen on: no mount
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        opts = base + [f'peer_listen=127.0.0.1:{busy}', f'cluster_secret_file={secret}']
        r = seamfs.run(['-f', '-o', ','.join(opts), cat, mnt], mountpoints=[mnt])
    assert r.returncode == 1, r.stderr
    assert f'peer_listen 127.0.0.1:{busy}' in r.stderr and 'not mounting' in r.stderr
    assert SECRET not in r.stderr + r.stdout
