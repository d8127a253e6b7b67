"""Messy failures, as mirrors and debrid links really fail: HTML pages
answered with 200, compressed answers, login redirects, a wrong file of the
right length, hung servers, capped 206s, outages of every origin.  While a
good source lives the reader never sees an error or a wrong byte; when none
does, the error comes within read_timeout of the application's read.

Three seam-origins serve one directory (hard links of the session data plus
small HTML pages and a wrong file of the right length); the catalog lists one
source on each, providers p1, p2, p3, so sessions start on p1."""

import hashlib
import json
import os
import time

import pytest

from conftest import KIB, MIB, bounded, sha256_file, wait_until

NAME = 'mid.bin'                  # 8 MiB + 77
BIG = 'big.bin'                   # 64 MiB: more than a read-ahead window
FAULT_AT = 3 * MIB + 4321         # past the cached head
EXPIRED = b'<!DOCTYPE html><html><body>This link has expired.</body></html>\n'
LOGIN = b'<html><body><form action="/login">Sign in</form></body></html>\n'
FAST = ['stall_timeout=1', 'liveness_interval=0']


@pytest.fixture
def root(data, tmp_path):
    """The origins' directory: the data file, the pages a broken origin
    answers with, and another file of the same length."""
    d = tmp_path / 'www'
    d.mkdir()
    os.link(data[NAME].path, d / NAME)
    os.link(data[BIG].path, d / BIG)
    (d / 'expired.html').write_bytes(EXPIRED)
    (d / 'login.html').write_bytes(LOGIN)
    wrong = bytearray(data.bytes(NAME))
    for i in range(0, len(wrong), 4096):
        wrong[i] ^= 0x5A
    (d / 'wrong.bin').write_bytes(bytes(wrong))
    return d


def catalog(origins, size=None, name=NAME):
    a = {'id': 'movie', 'path': 'movie.bin', 'mtime': 1700000000,
         'sources': [{'url': o.url(name), 'provider': f'p{i + 1}'} for i, o in enumerate(origins)]}
    if size is not None:
        a['size'] = size
    return {'providers': [{'name': f'p{i + 1}'} for i in range(len(origins))], 'assets': [a]}


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def source(st, provider):
    (a,) = st['assets']
    return next(s for s in a['sources'] if s['provider'] == provider)


def served(o, path='/' + NAME):
    return sum(r['bytes_sent'] for r in o.log()['requests'] if r['path'] == path)


def read_all(m, timeout=60):
    return bounded(lambda: sha256_file(m.path('movie.bin')), timeout, 'whole read')


def read_rest(f, h, timeout=60):
    """Reads f on to its end into the hash h (bounded); the hex digest."""
    def rest():
        while True:
            b = f.read(MIB)
            if not b:
                return h.hexdigest()
            h.update(b)
    return bounded(rest, timeout, 'read across the failure')


HOSTILE = {
    # an expired link: an HTML page, 200, no length, read to close
    'html_200_close': dict(serve='/expired.html', framing='close', no_range=1),
    'html_200_chunked': dict(serve='/expired.html', framing='chunked', no_range=1),
    'gzip_200': dict(content_encoding='gzip', no_range=1),
    'gzip_206': dict(content_encoding='gzip'),
    # the right length and ranges, but labelled an HTML page
    'html_plausible_length': dict(content_type='text/html; charset=utf-8'),
    # a login page behind a redirect
    'login_redirect': dict(redirect='/login.html'),
}


@pytest.mark.parametrize('kind', sorted(HOSTILE))
def test_hostile_first_source_is_never_served(seamfs, data, root, make_origin, kind):
    """The first source answers with something that is not the file; a
    correct standby exists: every byte comes from it."""
    o1, o2 = make_origin(root), make_origin(root)
    o1.rule('/' + NAME, **HOSTILE[kind])
    m = seamfs.mount(catalog([o1, o2], size=data[NAME].size), read_timeout=20, options=FAST)
    assert read_all(m) == data[NAME].sha256
    assert served(o2) >= data[NAME].size
    st = status(m)
    assert st['cutovers']['last_fallback_exhausted'] in ('', None), st['cutovers']


def test_size_discovery_ignores_a_login_page_listed_first(seamfs, data, root, make_origin):
    """No size in the catalog: the first source redirects to an 81-byte
    login page; the two good ones agree on the real size, which wins, and
    the status says why the first is not used."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    o1.rule('/' + NAME, redirect='/login.html')
    m = seamfs.mount(catalog([o1, o2, o3]), read_timeout=20, options=FAST)
    assert os.stat(m.path('movie.bin')).st_size == data[NAME].size
    assert read_all(m) == data[NAME].sha256
    # the first source only ever redirected: none of its answers was used
    assert all(r['status'] == 302 for r in o1.log()['requests'] if r['path'] == '/' + NAME)


def test_size_discovery_outvotes_a_wrong_size(seamfs, data, root, make_origin):
    """A source of another size listed first (an HTML page without the
    HTML label) is outvoted, marked dead, and the status says so."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    o1.rule('/' + NAME, serve='/expired.html', content_type='application/octet-stream')
    m = seamfs.mount(catalog([o1, o2, o3]), read_timeout=20, options=FAST)
    assert os.stat(m.path('movie.bin')).st_size == data[NAME].size
    s1 = source(status(m), 'p1')
    assert s1['verification'] == 'dead', s1
    assert str(len(EXPIRED)) in s1['why'], s1
    assert 'has %d bytes' % len(EXPIRED) in m.log()
    assert read_all(m) == data[NAME].sha256


def take_reference(m, providers=('p1', 'p2')):
    """Reads the head and waits until the reference is taken and the given
    sources are verified (standby_delay=0)."""
    with open(m.path('movie.bin'), 'rb') as f:
        f.read(64 * KIB)

        def ready():
            st = status(m)
            return st['assets'][0]['reference'] and all(
                source(st, p)['verification'] == 'verified' for p in providers)
        wait_until(ready, 20, 'reference taken')


def test_wrong_file_of_the_right_length_is_caught_at_its_first_bytes(seamfs, data, root,
                                                                     make_origin):
    """The reference is known (from an earlier mount, in the state dir);
    then the first source starts serving another file of the same length.
    Its first bytes are compared with the reference's samples before any
    reaches the reader: the session moves to a good source."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    opts = FAST + ['standby_delay=0']
    cat = catalog([o1, o2, o3], size=data[NAME].size)
    m = seamfs.mount(cat, read_timeout=20, options=opts)
    take_reference(m)
    m.unmount()
    o1.rule('/' + NAME, serve='/wrong.bin')
    m = seamfs.mount(cat, read_timeout=20, options=FAST)
    assert read_all(m) == data[NAME].sha256
    st = status(m)
    assert source(st, 'p1')['verification'] == 'rejected', source(st, 'p1')
    assert 'mismatch' in st['cutovers']['by_reason'], st['cutovers']


def test_html_source_first_across_a_remount(seamfs, data, root, make_origin):
    """An HTML-answering source listed first beside two good ones poisons
    nothing: after a remount with the same state dir, a failure of the
    active source still cuts over to the third."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    o1.rule('/' + NAME, serve='/expired.html', framing='close', no_range=1)
    cat = catalog([o1, o2, o3], size=data[NAME].size)
    opts = FAST + ['standby_delay=0']
    m = seamfs.mount(cat, read_timeout=20, options=opts)
    assert read_all(m) == data[NAME].sha256
    m.unmount()
    m = seamfs.mount(cat, read_timeout=20, options=opts)
    with open(m.path('movie.bin'), 'rb') as f:
        h = hashlib.sha256(f.read(64 * KIB))
        wait_until(lambda: status(m)['assets'][0]['reference'], 20, 'reference')
        active = status(m)['sessions'][0]['provider']
        assert active in ('p2', 'p3')
        other = {'p2': o3, 'p3': o2}[active]
        ({'p2': o2, 'p3': o3}[active]).rule('/' + NAME, reset_at=FAULT_AT)
        assert read_rest(f, h) == data[NAME].sha256
    assert served(other) > MIB
    assert status(m)['cutovers']['total'] >= 1


def test_stalled_standby_then_death_of_the_active(seamfs, data, root, make_origin):
    """A reader cuts over from a stalled origin to a second one; that one
    dies; the read goes on from the third, live one, not back to the hung
    first (which now answers nothing at all). The standbys send at most
    16 MiB/s per connection: the second must die with most of the file still
    to come (at loopback speed the window could hold the rest before it
    dies, and the test would prove nothing)."""
    capped = ['--rate', str(16 * MIB)]
    o1, o2, o3 = make_origin(root), make_origin(root, capped), make_origin(root, capped)
    m = seamfs.mount(catalog([o1, o2, o3], size=data[BIG].size, name=BIG), read_timeout=30,
                     options=FAST + ['standby_delay=0'])
    ref = data.bytes(BIG)
    with open(m.path('movie.bin'), 'rb', buffering=0) as f:
        got = bytearray(f.read(64 * KIB))
        wait_until(lambda: status(m)['assets'][0]['reference'] and
                   source(status(m), 'p2')['verification'] == 'verified' and
                   source(status(m), 'p3')['verification'] == 'verified', 20, 'verified')
        o1.rule('/' + BIG, stall_at=FAULT_AT, stall_ms=600000)

        def until(limit):
            while len(got) < limit:
                b = f.read(256 * KIB)
                assert b, 'early EOF'
                got.extend(b)
        bounded(lambda: until(FAULT_AT + 2 * MIB), 30, 'read across the stall')
        second = status(m)['cutovers']['recent'][0]['to']
        assert second in (o2.url(BIG), o3.url(BIG))
        third = o3 if second == o2.url(BIG) else o2
        o1.rule('/' + BIG, delay_ms=600000)      # hung: nothing answers now
        (o2 if third is o3 else o3).down(drop=True)
        bounded(lambda: until(len(ref)), 30, 'read across the death of the second')
    assert bytes(got[:len(ref)]) == ref
    st = status(m)
    assert len(st['cutovers']['recent']) >= 2, st['cutovers']
    assert st['cutovers']['recent'][0]['to'] == third.url(BIG), st['cutovers']
    assert st['cutovers']['fallback_exhausted'] == 0, st['cutovers']


def test_outage_of_every_origin_poisons_nothing(seamfs, data, root, make_origin):
    """Every origin down at once (reads fail: nothing can serve), then all
    back; no reference yet. Then the active origin dies mid-read: the
    others still take over."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    m = seamfs.mount(catalog([o1, o2, o3], size=data[NAME].size), read_timeout=3,
                     options=FAST + ['retries=2'])
    path = m.path('movie.bin')
    with open(path, 'rb', buffering=0) as f:
        f.read(64 * KIB)
    for o in (o1, o2, o3):
        o.down(drop=True)
    for off in (4 * MIB, 5 * MIB, 6 * MIB):
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(OSError):
                bounded(lambda: os.pread(fd, 4096, off), 20, 'read in the outage')
        finally:
            os.close(fd)
    for o in (o1, o2, o3):
        o.up()
    time.sleep(0.5)
    st = status(m)
    assert all(s['verification'] != 'abandoned' for s in st['assets'][0]['sources']), st
    # the session of the failed reads is over; a new one starts on p1. The
    # rule comes before the open: the first pages are in the page cache from
    # the first read, so the kernel's read-ahead may start the new session's
    # stream before its first read returns, and a rule takes effect only on
    # the requests that come after it (the head is cached: the rule touches
    # the stream alone)
    o1.rule('/' + NAME, reset_at=FAULT_AT)
    with open(path, 'rb') as f:
        assert read_rest(f, hashlib.sha256()) == data[NAME].sha256
    assert status(m)['cutovers']['total'] >= 1


def test_all_origins_stalled_fails_within_read_timeout(seamfs, data, root, make_origin):
    """Every origin hangs: the application's read fails within read_timeout
    of when it asked (the kernel's synchronous retry of the failed
    read-ahead page fails at once), and the failure is counted."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    read_timeout = 6
    m = seamfs.mount(catalog([o1, o2, o3], size=data[NAME].size), read_timeout=read_timeout,
                     options=FAST)
    for o in (o1, o2, o3):
        o.rule('/' + NAME, delay_ms=600000)
    fd = os.open(m.path('movie.bin'), os.O_RDONLY)
    try:
        t0 = time.monotonic()
        with pytest.raises(OSError):
            bounded(lambda: os.pread(fd, 4096, 0), 4 * read_timeout, 'read of a hung file')
        took = time.monotonic() - t0
    finally:
        os.close(fd)
    assert took < 1.5 * read_timeout, f'the read failed after {took:.1f} s'
    st = status(m)
    assert st['cutovers']['fallback_exhausted'] >= 1, st['cutovers']
    assert 'no source could serve it' in m.log()


def test_capped_206_answers_are_taken_as_they_come(seamfs, data, root, make_origin):
    """An origin that caps every answer at 64 KiB: each part is taken and the
    rest asked for at once, logged once, not retried as a failure."""
    o1 = make_origin(root)
    o1.rule('/' + NAME, cap=64 * KIB)
    m = seamfs.mount(catalog([o1], size=data[NAME].size), read_timeout=20, options=FAST)
    assert read_all(m) == data[NAME].sha256
    log = m.log()
    assert log.count('transfer failed') == 0, log[-3000:]
    assert log.count('answers in parts') <= 2, log[-3000:]


def test_scan_costs_no_verification(seamfs, tmp_path, make_origin):
    """A library scan (head and tail of 50 files) over two good sources costs
    the head and tail transfers alone: no fingerprint samples."""
    d = tmp_path / 'scan'
    d.mkdir()
    rnd = os.urandom(3 * MIB + 123)
    files = []
    for i in range(50):
        name = f'f{i:02d}.bin'
        (d / name).write_bytes(rnd[i:] + rnd[:i])
        files.append(name)
    o1, o2 = make_origin(d), make_origin(d)
    cat = {'providers': [{'name': 'p1'}, {'name': 'p2'}],
           'assets': [{'id': n, 'path': f'S/{n}', 'size': len(rnd), 'mtime': 1700000000,
                       'sources': [{'url': o1.url(n), 'provider': 'p1'},
                                   {'url': o2.url(n), 'provider': 'p2'}]} for n in files]}
    m = seamfs.mount(cat, read_timeout=20, options=FAST)
    o1.clear()
    o2.clear()

    def scan():
        for i, n in enumerate(files):
            want = (d / n).read_bytes()
            with open(m.path(f'S/{n}'), 'rb', buffering=0) as f:
                assert f.read(64 * KIB) == want[:64 * KIB]
                f.seek(-64 * KIB, os.SEEK_END)
                assert f.read(64 * KIB) == want[-64 * KIB:]
    bounded(scan, 120, 'scan')
    time.sleep(1.5)      # a reference would be taken in the background by now
    reqs = o1.log()['requests'] + o2.log()['requests']
    assert len(reqs) <= 2 * len(files), f'{len(reqs)} requests for {len(files)} files'


def test_every_origin_dead_does_not_spin(seamfs, data, root, make_origin):
    """Every origin dies under a reader whose standbys are verified: the read
    fails in time, and the session does not move back and forth between
    dead sources without a byte (before: tens of thousands of cutovers in
    seconds, a core busy until the deadline)."""
    o1, o2, o3 = make_origin(root), make_origin(root), make_origin(root)
    m = seamfs.mount(catalog([o1, o2, o3], size=data[BIG].size, name=BIG), read_timeout=6,
                     options=FAST + ['standby_delay=0'])
    with open(m.path('movie.bin'), 'rb', buffering=0) as f:
        f.read(64 * KIB)
        wait_until(lambda: status(m)['assets'][0]['reference'] and all(
            source(status(m), p)['verification'] == 'verified' for p in ('p2', 'p3')),
            20, 'verified')
        for o in (o1, o2, o3):
            o.down(drop=True)

        def read_on():
            with pytest.raises(OSError):
                while f.read(MIB):
                    pass
        t0 = time.monotonic()
        bounded(read_on, 60, 'read with every origin dead')
        assert time.monotonic() - t0 < 30
    st = status(m)
    assert st['cutovers']['total'] < 50, st['cutovers']
