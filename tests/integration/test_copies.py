"""Copies (docs/copies.md) through real mounts against seam-origin: placement
by free space and min_free_bytes, one copy per storage, each waiting reason
and its end (role back on through ctl, a storage added by reload, a
directory that appears), a corrupted transfer rejected and retried, a copy
serving every byte with every origin down (also after a remount), viewers
balanced over origin and copy, a cutover from a dying origin to the copy
mid-read, the role switched off under a running job, and copy jobs that
stay within max_connections and yield to viewers.  Storages are temporary
directories (and small tmpfs mounts where free space must differ).  Every
byte read is checked by SHA-256."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import MIB, PausedReaders, sha256_file, wait_until

COPY_WAIT = 60     # bounded wait for a copy to be made
HUGE = 1 << 60     # a min_free_bytes no disk has

@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix='seamfs-cp-', dir='/tmp')
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmpfs(tmp_path):
    """tmpfs(name, size): a tmpfs of that size mounted for the test."""
    mounted = []

    def make(name, size):
        p = tmp_path / name
        p.mkdir()
        r = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs', str(p)],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            pytest.fail(f'mount -t tmpfs failed: {r.stderr}')
        mounted.append(p)
        return p
    try:
        yield make
    finally:
        for p in reversed(mounted):
            subprocess.run(['umount', '-l', str(p)], timeout=20)


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def job(st, aid):
    return next((j for j in st['copies']['jobs'] if j['asset'] == aid), None)


def copies_of(st, aid):
    """Storages that hold a serving copy of the asset."""
    for a in st['copies']['assets']:
        if a['asset'] == aid:
            return sorted(l['storage'] for l in a['locations']
                          if l['kind'] == 'copy' and l['serving'])
    return []


def wait_copies(m, aid, n, timeout=COPY_WAIT):
    wait_until(lambda: len(copies_of(status(m), aid)) >= n and job(status(m), aid) is None,
               timeout, f'{n} copies of {aid}')
    return copies_of(status(m), aid)


def wait_reason(m, aid, reason, timeout=15):
    wait_until(lambda: (job(status(m), aid) or {}).get('reason') == reason, timeout,
               f'{aid} waiting for "{reason}"')


def read_sha(path):
    return sha256_file(path)


def entry(aid, path, df, url, copies=None, sha=True, provider=None):
    src = {'url': url}
    if provider:
        src['provider'] = provider
    a = {'id': aid, 'path': path, 'size': df.size, 'mtime': 1700000000, 'sources': [src]}
    if sha:
        a['sha256'] = df.sha256
    if copies is not None:
        a['copies'] = copies
    return a


def storage(name, path, **kw):
    s = {'name': name, 'path': str(path), 'min_free_bytes': 0}
    s.update(kw)
    return s


def ctl(seamfs, sock, *args):
    return seamfs.run(['ctl', '--socket', sock] + list(args), timeout=15)


def metrics(m):
    out = {}
    with open(m.path('.seamfs/metrics')) as f:
        for line in f:
            if line.startswith('seamfs_copies_'):
                k, v = line.split()
                out[k] = float(v)
    return out


# ---------------------------------------------------------------------------


def test_copy_serves_every_byte_with_origins_down_and_after_remount(seamfs, data, make_origin,
                                                                   tmp_path):
    o = make_origin(data.dir)
    disk = tmp_path / 'disk1'
    disk.mkdir()
    df = data['mid.bin']
    cat = {'storages': [storage('disk1', disk)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    assert wait_copies(m, 'movie', 1) == ['disk1']
    on_disk = disk / 'Movies' / 'movie.bin'
    assert sha256_file(on_disk) == df.sha256
    assert not list((disk / 'Movies').glob('*partial*'))
    manifest = json.loads((disk / '.seamfs-copies.json').read_text())
    assert manifest['copies']['movie']['sha256'] == df.sha256
    mt = metrics(m)
    assert mt['seamfs_copies_made_total'] == 1
    assert mt['seamfs_copies_bytes_total'] >= df.size

    o.stop(hold_port=True)
    assert read_sha(m.path('Movies/movie.bin')) == df.sha256
    m.unmount()

    # the copy is remembered on the storage: a remount serves it at once
    m2 = seamfs.mount(cat)
    wait_until(lambda: copies_of(status(m2), 'movie') == ['disk1'], 15, 'the copy registered')
    assert read_sha(m2.path('Movies/movie.bin')) == df.sha256
    assert metrics(m2)['seamfs_copies_made_total'] == 0


def test_placement_freest_wins_one_per_storage_min_free(seamfs, data, make_origin, tmp_path,
                                                        tmpfs):
    o = make_origin(data.dir)
    small = tmpfs('small', '24m')
    large = tmpfs('large', '48m')
    full = tmp_path / 'full'
    full.mkdir()
    a, b = data['mid.bin'], data['odd.bin']
    # one: the copies setting's 1; two: its own 2
    cat = {'storages': [storage('small', small), storage('large', large),
                        storage('full', full, min_free_bytes=HUGE)],
           'assets': [entry('one', 'one.bin', a, o.url('mid.bin')),
                      entry('two', 'two.bin', b, o.url('odd.bin'), copies=2)],
           'settings': {'copies': 1}}
    m = seamfs.mount(cat)
    # one copy: the freest storage (large); two copies: one on each that has
    # the room, never two on one disk, never on the one below min_free_bytes
    assert wait_copies(m, 'one', 1) == ['large']
    assert wait_copies(m, 'two', 2) == ['large', 'small']
    assert not (full / 'one.bin').exists() and not (full / 'two.bin').exists()
    assert sha256_file(large / 'one.bin') == a.sha256
    assert sha256_file(large / 'two.bin') == b.sha256
    assert sha256_file(small / 'two.bin') == b.sha256
    st = status(m)
    assert next(s for s in st['copies']['storages'] if s['name'] == 'full')['copies'] == 0
    for name, df in (('one.bin', a), ('two.bin', b)):
        assert read_sha(m.path(name)) == df.sha256


def test_no_room_then_a_storage_added_by_reload(seamfs, data, make_origin, tmp_path, sockdir):
    o = make_origin(data.dir)
    full = tmp_path / 'full'
    full.mkdir()
    extra = tmp_path / 'extra'
    extra.mkdir()
    df = data['mid.bin']
    cat = {'storages': [storage('full', full, min_free_bytes=HUGE)],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_reason(m, 'movie', 'no room')
    assert job(status(m), 'movie')['failed_attempts'] == 0   # waiting spends none
    cat['storages'].append(storage('extra', extra))
    path.write_text(json.dumps(cat))
    r = ctl(seamfs, sock, 'reload')
    assert r.returncode == 0, r.stderr
    assert wait_copies(m, 'movie', 1) == ['extra']
    assert sha256_file(extra / 'movie.bin') == df.sha256
    assert read_sha(m.path('movie.bin')) == df.sha256


def test_no_storage_until_the_role_comes_back_and_not_ready_until_the_dir_appears(
        seamfs, data, make_origin, tmp_path, sockdir):
    o = make_origin(data.dir)
    off = tmp_path / 'off'
    off.mkdir()
    later = tmp_path / 'later'   # not there yet: "not mounted"
    a, b, c = data['mid.bin'], data['odd.bin'], data['mib1.bin']
    cat = {'storages': [storage('off', off, copying=False),
                        storage('later', later, copying=True, min_free_bytes=0)],
           'assets': [entry('a', 'a.bin', a, o.url('mid.bin'), copies=1),
                      entry('b', 'b.bin', b, o.url('odd.bin'), copies=2),
                      entry('c', 'c.bin', c, o.url('mib1.bin'))],
           'settings': {'copies': 0}}
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(cat, options=[f'control_socket={sock}'])
    # the only storage with the role is not there
    wait_reason(m, 'a', 'storage not ready')
    assert job(status(m), 'c') is None      # copies 0: no job
    later.mkdir()
    assert wait_copies(m, 'a', 1) == ['later']
    # b wants two: one lands on later; the other has no storage with the role
    wait_reason(m, 'b', 'no storage', timeout=COPY_WAIT)
    assert copies_of(status(m), 'b') == ['later']
    r = ctl(seamfs, sock, 'storage', 'enable', 'off')
    assert r.returncode == 0, r.stderr
    assert wait_copies(m, 'b', 2) == ['later', 'off']
    r = ctl(seamfs, sock, 'copies')
    assert r.returncode == 0 and 'later' in r.stdout and 'off' in r.stdout, r.stdout
    for name, df in (('a.bin', a), ('b.bin', b), ('c.bin', c)):
        assert read_sha(m.path(name)) == df.sha256
    r = ctl(seamfs, sock, 'storage', 'disable', 'nosuch')
    assert r.returncode == 1 and 'nosuch' in r.stderr


def test_changed_asset_makes_copy_stale_copying_off_until_enabled(seamfs, make_origin, tmp_path,
                                                                  sockdir):
    root = tmp_path / 'root'
    root.mkdir()
    first, second = os.urandom(3 * MIB + 5), os.urandom(3 * MIB + 5)
    (root / 'f.bin').write_bytes(first)
    o = make_origin(root)
    disk = tmp_path / 'disk'
    disk.mkdir()
    sha1, sha2 = hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest()
    cat = {'storages': [storage('disk', disk)],
           'assets': [{'id': 'f', 'path': 'f.bin', 'size': len(first), 'sha256': sha1,
                       'copies': 1, 'sources': [{'url': o.url('f.bin')}]}]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_copies(m, 'f', 1)
    assert sha256_file(disk / 'f.bin') == sha1
    assert ctl(seamfs, sock, 'storage', 'disable', 'disk').returncode == 0
    # the origin's file changes; the catalog says so
    (root / 'f.bin').write_bytes(second)
    cat['assets'][0]['sha256'] = sha2
    path.write_text(json.dumps(cat))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    # the stale copy stops serving at once; its storage has the role off
    assert copies_of(status(m), 'f') == []
    wait_reason(m, 'f', 'copying off')
    assert ctl(seamfs, sock, 'storage', 'enable', 'disk').returncode == 0
    wait_copies(m, 'f', 1)
    assert sha256_file(disk / 'f.bin') == sha2
    o.stop(hold_port=True)
    assert read_sha(m.path('f.bin')) == sha2


def test_corrupted_transfer_is_rejected_and_retried(seamfs, data, make_origin, tmp_path):
    o = make_origin(data.dir)
    df = data['mid.bin']
    # the first two answers (the ETag probe, the first range) change the
    # bytes from 300 KiB on
    o.rule('/mid.bin', corrupt_from=300 * 1024, count=2)
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1)
    mt = metrics(m)
    assert mt['seamfs_copies_failed_total'] >= 1
    assert mt['seamfs_copies_made_total'] == 1
    assert sha256_file(disk / 'movie.bin') == df.sha256
    assert 'differs from the catalog' in m.log()
    o.stop(hold_port=True)
    assert read_sha(m.path('movie.bin')) == df.sha256


def test_corrupted_transfer_without_catalog_sha_is_caught_by_the_second_source(
        seamfs, data, make_origin, tmp_path):
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    df = data['odd.bin']
    # the ETag probe and the first three ranges: the last 2000 bytes of the
    # third range changed, where no sample of the sweep lies
    o1.rule('/odd.bin', corrupt_from=3 * MIB - 2000, count=4)
    disk = tmp_path / 'disk'
    disk.mkdir()
    a = entry('movie', 'movie.bin', df, o1.url('odd.bin'), copies=1, sha=False)
    a['sources'].append({'url': o2.url('odd.bin')})
    cat = {'storages': [storage('disk', disk)], 'assets': [a]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1, timeout=90)
    assert metrics(m)['seamfs_copies_failed_total'] >= 1
    assert sha256_file(disk / 'movie.bin') == df.sha256
    assert "differs from source %s's" % o2.url('odd.bin') in m.log()


def test_ten_viewers_balanced_over_origin_and_copy(seamfs, data, make_origin, tmp_path):
    o = make_origin(data.dir)
    df = data['mid.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat, options=['session_ttl=0'])
    wait_copies(m, 'movie', 1)
    with PausedReaders([m.path('movie.bin')] * 10) as readers:
        st = status(m)
        by = {}
        for s in st['sessions']:
            by[s['provider']] = by.get(s['provider'], 0) + 1
        assert sum(by.values()) == 10, by
        assert by.get('storage:disk') == 5, by
        loc = next(a for a in st['copies']['assets'] if a['asset'] == 'movie')['locations']
        assert sorted(l['viewers'] for l in loc) == [5, 5], loc
        readers.go(df.sha256, timeout=60)


def test_reader_cuts_over_from_dying_origin_to_copy(seamfs, data, make_origin, tmp_path):
    o = make_origin(data.dir)
    df = data['big.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('big.bin'), copies=1)]}
    m = seamfs.mount(cat, options=['session_ttl=0', 'stall_timeout=1'])
    wait_copies(m, 'movie', 1, timeout=90)
    with PausedReaders([m.path('movie.bin')]) as readers:
        st = status(m)
        assert [s['provider'] for s in st['sessions']] != ['storage:disk'], st['sessions']
        o.down(drop=True)
        readers.go(df.sha256, timeout=90)
    st = status(m)
    assert st['cutovers']['total'] >= 1, st['cutovers']


def test_role_off_while_a_job_runs(seamfs, data, make_origin, tmp_path, sockdir):
    # a paced origin: the copy of 64 MiB takes a few seconds
    o = make_origin(data.dir, extra_args=['--rate', str(12 * MIB)])
    big, small = data['big.bin'], data['mid.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('big', 'big.bin', big, o.url('big.bin'), copies=1),
                      entry('small', 'small.bin', small, o.url('mid.bin'))]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_until(lambda: (job(status(m), 'big') or {}).get('state') == 'copying', 20,
               'the copy of big running')
    assert ctl(seamfs, sock, 'storage', 'disable', 'disk').returncode == 0
    assert (job(status(m), 'big') or {}).get('state') == 'copying'
    # the running job finishes there
    assert wait_copies(m, 'big', 1, timeout=120) == ['disk']
    assert sha256_file(disk / 'big.bin') == big.sha256
    # a new job does not land there
    cat['assets'][1]['copies'] = 1
    path.write_text(json.dumps(cat))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    wait_reason(m, 'small', 'no storage')
    assert not (disk / 'small.bin').exists()
    st = status(m)
    assert next(s for s in st['copies']['storages'] if s['name'] == 'disk')['copying'] is False
    # its copies keep serving
    o.stop(hold_port=True)
    assert read_sha(m.path('big.bin')) == big.sha256


def test_copy_jobs_stay_within_max_connections_and_yield_to_viewers(seamfs, data, make_origin,
                                                                    tmp_path):
    # paced: the copy of 64 MiB takes 8 s at least, the viewers come meanwhile
    o = make_origin(data.dir, extra_args=['--rate', str(8 * MIB)])
    big = data['big.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'providers': [{'name': 'origin', 'max_connections': 2}],
           'storages': [storage('disk', disk)],
           'assets': [entry('big', 'big.bin', big, o.url('big.bin'), copies=1,
                            provider='origin'),
                      entry('mid', 'mid.bin', data['mid.bin'], o.url('mid.bin'),
                            provider='origin')]}
    m = seamfs.mount(cat, options=['session_ttl=0', 'max_streams=1'])
    wait_until(lambda: (job(status(m), 'big') or {}).get('state') == 'copying', 20,
               'the copy running')
    with PausedReaders([m.path('mid.bin')] * 2) as readers:
        # both slots are the viewers' now (each session keeps one): the copy
        # gets no new range; one already in flight may end (1 MiB)
        done1 = job(status(m), 'big')['bytes_done']
        time.sleep(1.5)
        done2 = job(status(m), 'big')['bytes_done']
        assert done2 - done1 <= MIB, (done1, done2)
        assert job(status(m), 'big')['state'] == 'copying'
        readers.go(data['mid.bin'].sha256, timeout=90)
    wait_copies(m, 'big', 1, timeout=120)
    assert sha256_file(disk / 'big.bin') == big.sha256
    log = o.log()
    assert log['max_concurrent'] <= 2, log['max_concurrent']


def test_source_with_a_new_etag_makes_the_copy_stale_and_it_is_made_again(
        seamfs, make_origin, tmp_path, sockdir):
    root = tmp_path / 'root'
    root.mkdir()
    first, second = os.urandom(2 * MIB + 3), os.urandom(2 * MIB + 3)
    (root / 'f.bin').write_bytes(first)
    os.utime(root / 'f.bin', (1600000000, 1600000000))
    o = make_origin(root)
    disk = tmp_path / 'disk'
    disk.mkdir()
    # no sha256 in the catalog: the origin's ETag is what says it changed
    cat = {'storages': [storage('disk', disk)],
           'assets': [{'id': 'f', 'path': 'f.bin', 'size': len(first), 'copies': 1,
                       'sources': [{'url': o.url('f.bin')}]}]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_copies(m, 'f', 1)
    assert sha256_file(disk / 'f.bin') == hashlib.sha256(first).hexdigest()
    assert json.loads((disk / '.seamfs-copies.json').read_text())['copies']['f']['etag']
    (root / 'f.bin').write_bytes(second)
    os.utime(root / 'f.bin', (1650000000, 1650000000))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    want = hashlib.sha256(second).hexdigest()
    wait_until(lambda: (disk / 'f.bin').exists() and sha256_file(disk / 'f.bin') == want
               and copies_of(status(m), 'f') == ['disk'], COPY_WAIT, 'the copy made again')
    assert metrics(m)['seamfs_copies_made_total'] == 2
    o.stop(hold_port=True)
    assert read_sha(m.path('f.bin')) == want


def test_local_disk_copy_preferred_and_another_hosts_disk_not_reachable(seamfs, data,
                                                                       make_origin, tmp_path):
    import socket
    o = make_origin(data.dir)
    df = data['mid.bin']
    mine, theirs = tmp_path / 'mine', tmp_path / 'theirs'
    mine.mkdir()
    theirs.mkdir()
    cat = {'storages': [storage('theirs', theirs, host='some-other-host'),
                        storage('mine', mine, host=socket.gethostname())],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=2)]}
    m = seamfs.mount(cat, options=['session_ttl=0'])
    # one copy on this host's disk; the other host's disk is not reachable here
    wait_until(lambda: copies_of(status(m), 'movie') == ['mine'], COPY_WAIT, 'the local copy')
    wait_reason(m, 'movie', 'storage not ready')
    st = next(s for s in status(m)['copies']['storages'] if s['name'] == 'theirs')
    assert not st['reachable'] and 'some-other-host' in st['why'], st
    assert not (theirs / 'movie.bin').exists()
    with PausedReaders([m.path('movie.bin')] * 4) as readers:
        # a copy on this host's disk costs no connection: every session there
        assert [s['provider'] for s in status(m)['sessions']] == ['storage:mine'] * 4
        readers.go(df.sha256, timeout=60)


def test_storage_removed_by_reload_stops_serving_and_keeps_its_files(seamfs, data, make_origin,
                                                                     tmp_path, sockdir):
    o = make_origin(data.dir)
    df = data['mid.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_copies(m, 'movie', 1)
    del cat['storages']
    path.write_text(json.dumps(cat))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    wait_reason(m, 'movie', 'no storage')
    assert copies_of(status(m), 'movie') == []
    assert sha256_file(disk / 'movie.bin') == df.sha256
    assert 'movie' in json.loads((disk / '.seamfs-copies.json').read_text())['copies']
    assert read_sha(m.path('movie.bin')) == df.sha256
    # back in the catalog: the copy serves again, no new copy made
    cat['storages'] = [storage('disk', disk)]
    path.write_text(json.dumps(cat))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    wait_copies(m, 'movie', 1)
    assert metrics(m)['seamfs_copies_made_total'] == 1


def test_unmount_ends_a_copy_stalled_mid_range_and_removes_its_partial(seamfs, data, make_origin,
                                                                       tmp_path):
    o = make_origin(data.dir)
    df = data['big.bin']
    # every answer stalls a minute half way into its range
    o.rule('/big.bin', stall_at=MIB // 2, stall_ms=60000)
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('big.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_until(lambda: (job(status(m), 'movie') or {}).get('state') == 'copying', 20,
               'the copy running')
    # the .partial has a random name (docs/copies.md): movie.bin.XXXXXX.partial
    wait_until(lambda: list(disk.glob('movie.bin.*.partial')), 10, 'the .partial')
    # the daemon exits within the unmount's bound (EXIT_WAIT), not killed
    assert m.unmount() == 0
    assert not list(disk.glob('*partial*'))
    assert not (disk / 'movie.bin').exists()


def test_drain_moves_the_viewers_off_the_storages_copies(seamfs, data, make_origin, tmp_path,
                                                         sockdir):
    import socket
    o = make_origin(data.dir)
    df = data['mid.bin']
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk, host=socket.gethostname())],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(cat, options=['session_ttl=0', f'control_socket={sock}'])
    wait_copies(m, 'movie', 1)
    with PausedReaders([m.path('movie.bin')] * 2) as readers:
        assert [s['provider'] for s in status(m)['sessions']] == ['storage:disk'] * 2
        r = ctl(seamfs, sock, 'storage', 'drain', 'disk')
        assert r.returncode == 0, r.stderr
        wait_until(lambda: all(s['provider'] != 'storage:disk'
                               for s in status(m)['sessions']), 20, 'the viewers moved')
        assert len(status(m)['sessions']) == 2
        readers.go(df.sha256, timeout=60)
    st = next(s for s in status(m)['copies']['storages'] if s['name'] == 'disk')
    assert st['drained'] is True and st['copying'] is False
    # a new viewer does not go there either
    assert read_sha(m.path('movie.bin')) == df.sha256


def test_a_broken_read_fails_the_attempt_and_the_copy_starts_again(seamfs, data, make_origin,
                                                                   tmp_path):
    o = make_origin(data.dir)
    df = data['odd.bin']
    # the ETag probe, then two ranges: the second cut by a reset
    o.rule('/odd.bin', reset_at=MIB + 4096, count=3)
    disk = tmp_path / 'disk'
    disk.mkdir()
    cat = {'storages': [storage('disk', disk)],
           'assets': [entry('movie', 'movie.bin', df, o.url('odd.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1)
    assert metrics(m)['seamfs_copies_failed_total'] >= 1
    assert 'reading %s at %d' % (o.url('odd.bin'), MIB) in m.log()
    assert sha256_file(disk / 'movie.bin') == df.sha256
    o.stop(hold_port=True)
    assert read_sha(m.path('movie.bin')) == df.sha256
