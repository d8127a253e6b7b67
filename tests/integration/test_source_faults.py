"""A faulty source first in line, a healthy identical one second: the faults
that once cost readers an error although the standby was up (issue 25).

- a drip (an honest 206, then about a kilobyte a second, far below
  stall_min_rate) is a stall: the read goes on from the standby, and new
  sessions avoid the dripping source;
- a 206 whose Content-Length disagrees with its Content-Range is a source
  failure that the standby cures at the same offset (this one held on
  88a783a already: kept so that it keeps holding);
- a source that answered HTML or gzip when its size was asked carries its
  reason in the status and gets no new session while another source can
  serve;
- a provider whose server was killed under a reader is not "answering
  again" while nothing listens on its port.

Every byte read is checked against the file's SHA-256."""

import hashlib
import json
import os
import time

import pytest

from conftest import MIB, bounded, wait_until


def two_sources(data, first, second, name='mid.bin', size=True):
    """Asset `movie` with a source on each origin: p1 (first) before p2."""
    a = {'id': 'movie', 'path': 'movie.bin', 'mtime': 1700000000,
         'sources': [{'url': first.url(name), 'provider': 'p1'},
                     {'url': second.url(name), 'provider': 'p2'}]}
    if size:
        a['size'] = data[name].size
    return {'providers': [{'name': 'p1'}, {'name': 'p2'}], 'assets': [a]}


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def prov(st, name):
    return next(p for p in st['providers'] if p['name'] == name)


def sha256_direct(path):
    """The file's SHA-256, read with O_DIRECT: past the kernel's page cache,
    so every read reaches the daemon."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        while True:
            b = os.read(fd, MIB)
            if not b:
                return h.hexdigest()
            h.update(b)
    finally:
        os.close(fd)


def read_whole(path, timeout=60):
    return bounded(lambda: sha256_direct(path), timeout, f'read {path}')


def file_requests(origin, name='mid.bin'):
    """The origin's answered requests for the file that carried bytes."""
    return [r for r in origin.log()['requests']
            if r['path'] == '/' + name and r['bytes_sent'] > 1]


def test_drip_origin_is_a_stall(seamfs, data, make_origin):
    drip = make_origin(data.dir, extra_args=['--rate', '1024'])
    good = make_origin(data.dir)
    m = seamfs.mount(two_sources(data, drip, good), read_timeout=20,
                     options=['stall_timeout=2', 'session_key=open', 'session_ttl=0'])
    ref = data['mid.bin']
    assert read_whole(m.path('movie.bin')) == ref.sha256
    # a new session avoids the source that dripped
    good.clear()
    drip.clear()
    assert read_whole(m.path('movie.bin')) == ref.sha256
    assert file_requests(good)
    assert not file_requests(drip)


@pytest.mark.parametrize('delta', [1000, -1000])
def test_content_length_disagrees_standby_takes_over(seamfs, data, make_origin, delta):
    bad = make_origin(data.dir)
    good = make_origin(data.dir)
    bad.rule('/mid.bin', clen_delta=delta)
    m = seamfs.mount(two_sources(data, bad, good), read_timeout=20,
                     options=['session_key=open', 'session_ttl=0'])
    assert read_whole(m.path('movie.bin')) == data['mid.bin'].sha256
    assert file_requests(good)


def test_killed_origin_does_not_answer_again(seamfs, data, make_origin):
    """The stream that was running when p1's server was killed ends with
    bytes after p1 was found down (closing the file cancels it): on
    88a783a that counted as a good answer, 'provider p1 answers again',
    while nothing listened on its port."""
    a = make_origin(data.dir)
    b = make_origin(data.dir)
    m = seamfs.mount(two_sources(data, a, b, name='big.bin'), read_timeout=20,
                     options=['session_key=open', 'session_ttl=0', 'liveness_ttl=1',
                              'liveness_interval=0.3'])
    ref = data['big.bin']
    fd = os.open(m.path('movie.bin'), os.O_RDONLY)
    try:
        # a stream on p1 fills its window and pauses
        got = bounded(lambda: os.read(fd, 4 * MIB), 20, 'first read')
        with open(ref.path, 'rb') as f:
            want = f.read(len(got))
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(want).hexdigest()
        assert prov(status(m), 'p1')['state'] == 'live'
        # p1's server is killed by its PID; its port stays held, closed
        a.proc.kill()
        a.proc.wait(timeout=10)
        a.stop(hold_port=True)
        wait_until(lambda: prov(status(m), 'p1')['state'] == 'down', 20, 'p1 down')
    finally:
        os.close(fd)
    # the cancelled stream's end has been counted once the session is gone
    wait_until(lambda: not status(m)['sessions'], 20, 'the session to end')
    assert prov(status(m), 'p1')['state'] == 'down'
    assert 'provider p1 answers again' not in m.log()
