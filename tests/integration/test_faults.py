"""The daemon against a misbehaving origin (seam-origin, steered per test).

Survivable faults (a 200 that ignores Range, a redirect, a one-off reset,
truncation, bad Content-Range or 5xx) must still give the right bytes.
Persistent faults must give EIO within read_timeout (plus slack), and every
byte returned before the error must be the file's byte at that offset."""

import errno
import os
import random
import time

import pytest

from conftest import KIB, MIB, asset, bounded, catalog, sha256_file
from origin import Origin

SLACK = 5.0          # seconds on top of read_timeout for an error to arrive
FAULT_AT = 3 * MIB + 4321   # inside mid.bin (8 MiB + 77), not page aligned


def opath(name):
    """The origin's rule path for a file served at origin.url(name)."""
    return '/' + name


def steer(origin, name, **rule):
    """Empty the origin's log and rules (the mount's own probe requests are in
    it), then set one rule for `name`."""
    origin.clear()
    origin.rule(opath(name), **rule)


def fault_fired(origin, name, fault):
    """Whether the origin log shows that the one-off rule hit a request.
    The first request for the path after steer() takes a count=1 rule; an
    offset fault only fires when that request spans the offset."""
    reqs = [r for r in origin.log()['requests'] if r['path'] == opath(name)]
    if not reqs:
        return False, reqs
    if 'reset_at' in fault or 'truncate_at' in fault:
        return not reqs[0]['complete'], reqs
    if 'status' in fault:
        return reqs[0]['status'] == fault['status'], reqs
    return True, reqs


def mount_one(seamfs, data, origin, name='mid.bin', read_timeout=10, url_name=None):
    m = seamfs.mount(catalog(asset('f', f'F/{name}', origin.url(url_name or name),
                                   size=data[name].size),
                             asset('other', 'F/other.bin', origin.url('odd.bin'),
                                   size=data['odd.bin'].size)),
                     read_timeout=read_timeout)
    return m, m.path(f'F/{name}')


def read_until_error(path, ref, chunk=256 * KIB):
    """Read sequentially; return (bytes read, the OSError or None, seconds the
    failing call took).  Fails at once on a wrong byte or an early EOF."""
    off = 0
    t0 = time.monotonic()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return 0, e, time.monotonic() - t0
    try:
        while True:
            t0 = time.monotonic()
            try:
                b = os.pread(fd, chunk, off)
            except OSError as e:
                return off, e, time.monotonic() - t0
            if not b:
                assert off == len(ref), f'EOF at {off} of {len(ref)} bytes (silent truncation)'
                return off, None, 0.0
            want = ref[off:off + len(b)]
            if b != want:
                first = next(i for i in range(len(b)) if b[i] != want[i]) \
                    if len(b) <= len(want) else len(want)
                pytest.fail(f'wrong bytes: read at {off} of {len(b)} bytes differs at '
                            f'offset {off + first}')
            off += len(b)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Faults the daemon must hide
# --------------------------------------------------------------------------

def test_200_without_range_support(seamfs, data, origin):
    m, f = mount_one(seamfs, data, origin)
    steer(origin, 'mid.bin', no_range=1)
    ref = data.bytes('mid.bin')
    rng = random.Random(1234)

    def check():
        fd = os.open(f, os.O_RDONLY)
        try:
            for _ in range(20):
                off, n = rng.randrange(len(ref)), rng.randint(1, 300 * KIB)
                assert os.pread(fd, n, off) == ref[off:off + n], f'pread {off}+{n}'
        finally:
            os.close(fd)
        return sha256_file(f)

    assert bounded(check, 60, 'reads without range support') == data['mid.bin'].sha256
    reqs = [r for r in origin.log()['requests'] if r['path'] == opath('mid.bin')]
    assert reqs and all(r['status'] == 200 for r in reqs if r['method'] == 'GET'), reqs


def test_redirect(seamfs, data, origin):
    origin.rule(opath('moved.bin'), redirect=opath('mid.bin'))
    origin.rule(opath('moved-odd.bin'), redirect=opath('odd.bin'))
    m = seamfs.mount(catalog(asset('mid', 'R/mid.bin', origin.url('moved.bin'),
                                   size=data['mid.bin'].size),
                             asset('odd', 'R/odd.bin', origin.url('moved-odd.bin'))))  # discovered
    assert os.stat(m.path('R/odd.bin')).st_size == data['odd.bin'].size
    for n in ('mid', 'odd'):
        assert bounded(lambda: sha256_file(m.path(f'R/{n}.bin')), 30, n) == \
            data[f'{n}.bin'].sha256, n
    assert any(r['path'] == opath('moved.bin') and r['status'] in (301, 302, 303, 307, 308)
               for r in origin.log()['requests'])


@pytest.mark.parametrize('fault', [
    {'reset_at': 1000},
    {'reset_at': FAULT_AT},
    {'truncate_at': 1000},
    {'truncate_at': FAULT_AT},
    {'content_range': 'missing'},
    {'content_range': 'shift'},
    {'content_range': 'total'},
    {'status': 500},
    {'status': 503},
    {'stall_at': 1000, 'stall_ms': 1500},
], ids=lambda d: ','.join(f'{k}={v}' for k, v in d.items()))
def test_one_off_fault_is_retried(seamfs, data, origin, fault):
    """The first request for the file fails once; the retry on the same source
    must deliver the right bytes, no error.  For a fault at FAULT_AT the
    reader starts there, so that the first request spans it."""
    m, f = mount_one(seamfs, data, origin)
    ref = data.bytes('mid.bin')
    steer(origin, 'mid.bin', count=1, **fault)
    start = (FAULT_AT // MIB) * MIB if FAULT_AT in fault.values() else 0

    def read():
        fd = os.open(f, os.O_RDONLY)
        try:
            assert os.pread(fd, 64 * KIB, start) == ref[start:start + 64 * KIB], \
                f'first read at {start}'
        finally:
            os.close(fd)
        return read_until_error(f, ref)

    off, err, _ = bounded(read, 40, 'read')
    assert err is None, f'read failed at {off}: {err!r}'
    assert off == data['mid.bin'].size
    assert sha256_file(f) == data['mid.bin'].sha256
    fired, reqs = fault_fired(origin, 'mid.bin', fault)
    assert fired, 'the fault never hit a request, so nothing was tested; requests: ' + \
        ', '.join(f"{r['range']}:{r['status']}{'' if r['complete'] else '(cut)'}" for r in reqs[:8])


# --------------------------------------------------------------------------
# Faults that must become EIO, in time, without wrong bytes
# --------------------------------------------------------------------------

PERSISTENT = [
    ({'reset_at': FAULT_AT}, FAULT_AT),
    ({'truncate_at': FAULT_AT}, FAULT_AT),
    ({'reset_at': 0}, 0),
    ({'content_range': 'missing'}, 0),
    ({'content_range': 'shift'}, 0),
    ({'content_range': 'total'}, 0),
    ({'status': 500}, 0),
]


@pytest.mark.parametrize('fault, at', PERSISTENT,
                         ids=[','.join(f'{k}={v}' for k, v in f.items()) for f, _ in PERSISTENT])
def test_persistent_fault_gives_eio(seamfs, data, origin, fault, at):
    rt = 5
    m, f = mount_one(seamfs, data, origin, read_timeout=rt)
    steer(origin, 'mid.bin', **fault)
    off, err, took = bounded(lambda: read_until_error(f, data.bytes('mid.bin')),
                             3 * rt + 30, 'read')
    print(f'{fault}: {off} good bytes, then {err!r} after {took:.2f} s')
    assert err is not None, 'read the whole file although the origin never serves byte ' \
        f'{at}'
    assert err.errno == errno.EIO, f'{err!r}, want EIO'
    assert off <= at, f'read past byte {at}, which the origin never sent'
    assert took <= rt + SLACK, f'EIO after {took:.1f} s, read_timeout={rt}'
    # The daemon is still fine: another file of the same origin reads correctly.
    assert bounded(lambda: sha256_file(m.path('F/other.bin')), 30, 'other file') == \
        data['odd.bin'].sha256


def test_404_gives_eio_quickly(seamfs, data, origin):
    rt = 10
    m = seamfs.mount(catalog(asset('gone', 'gone.bin', origin.url('no-such-file.bin'),
                                   size=12345),
                             asset('ok', 'ok.bin', origin.url('page.bin'),
                                   size=data['page.bin'].size)),
                     read_timeout=rt)
    off, err, took = bounded(lambda: read_until_error(m.path('gone.bin'), b'\0' * 12345),
                             rt + 30, 'read')
    assert err is not None and err.errno == errno.EIO, f'{err!r}, want EIO'
    assert off == 0
    assert took < 3.0, f'404 took {took:.1f} s to fail (read_timeout={rt})'
    assert sha256_file(m.path('ok.bin')) == data['page.bin'].sha256


def test_stall_gives_eio_then_other_files_work(seamfs, data, origin):
    rt = 3
    m, f = mount_one(seamfs, data, origin, read_timeout=rt)
    steer(origin, 'mid.bin', stall_at=FAULT_AT, stall_ms=60000)
    off, err, took = bounded(lambda: read_until_error(f, data.bytes('mid.bin')),
                             3 * rt + 30, 'read')
    print(f'stall: {off} good bytes, then {err!r} after {took:.2f} s')
    assert err is not None and err.errno == errno.EIO, f'{err!r}, want EIO'
    assert off <= FAULT_AT
    assert took <= rt + SLACK, f'EIO after {took:.1f} s, read_timeout={rt}'
    assert bounded(lambda: sha256_file(m.path('F/other.bin')), 30, 'other file') == \
        data['odd.bin'].sha256
    # Once the origin behaves again, the same file reads correctly.
    origin.clear()
    assert bounded(lambda: sha256_file(f), 3 * rt + 30, 'reread') == data['mid.bin'].sha256


def test_origin_gone_gives_eio(seamfs, data, origin, tmp_path):
    """The origin process is stopped (connections refused, kept-alive ones
    closed): EIO within read_timeout; a new origin on the same port serves
    again and the same file then reads correctly."""
    rt = 5
    m, f = mount_one(seamfs, data, origin, read_timeout=rt)
    port = origin.port
    origin.stop(hold_port=True)
    off, err, took = bounded(lambda: read_until_error(f, data.bytes('mid.bin')),
                             3 * rt + 30, 'read')
    assert err is not None and err.errno == errno.EIO, f'{err!r}, want EIO'
    assert took <= rt + SLACK, f'EIO after {took:.1f} s, read_timeout={rt}'
    back = Origin(origin.binary, origin.root, tmp_path / 'origin-again',
                  extra_args=['--port', str(port)])
    with back:
        assert bounded(lambda: sha256_file(f), 3 * rt + 30, 'read after restart') == \
            data['mid.bin'].sha256


def test_sigterm_while_a_read_waits_on_a_stalled_source(seamfs, data, origin):
    """Stopping must not wait for read_timeout: the read that waits on a
    stalled source fails at once, and the daemon unmounts and exits 0."""
    import signal
    import threading
    name = 'mid.bin'
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', origin.url(name),
                                   size=data[name].size)), read_timeout=60)
    steer(origin, name, stall_at=FAULT_AT)
    box = {}

    def reader():
        try:
            with open(m.path('mid.bin'), 'rb') as f:
                f.seek(FAULT_AT - 4096)
                box['data'] = f.read(64 * KIB)
        except OSError as e:
            box['error'] = e

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    # the read gets stuck at the stall (the origin logs a request only
    # when it ends, so give it a moment)
    time.sleep(1.5)
    assert t.is_alive(), f'the read did not wait on the stall: {box}'
    start = time.monotonic()
    m.signal(signal.SIGTERM)
    rc = m.wait_exit(15)
    took = time.monotonic() - start
    t.join(10)
    assert rc == 0, f'exit code {rc} after SIGTERM'
    assert took < 10, f'stopping took {took:.1f} s with read_timeout=60'
    assert not m.is_mounted()
    assert not t.is_alive()
    if 'data' in box:   # whatever came back must be the file's bytes
        ref = data.bytes(name)
        assert box['data'] == ref[FAULT_AT - 4096:FAULT_AT - 4096 + len(box['data'])]
