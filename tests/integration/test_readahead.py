"""The read engine through the mount: many concurrent readers on streams,
connections bounded by sessions, and the shared head/tail cache that makes
library scans cost no new transfers.  Bytes are always compared."""

import hashlib
import os
import random
import threading
import time

import pytest

from conftest import MIB, asset, bounded, catalog, sha256_file

HEAD = 2 * MIB   # the defaults of head_size and tail_size
TAIL = 1 * MIB


def streams(reqs, size):
    """Requests that ran to the end of the file from before its tail: the
    streams (seamfs asks for bytes=START-LAST, up to the last byte; a
    head's first part asked with the tail names two ranges)."""
    out = []
    for r in reqs:
        rng = r['range'] or ''
        if rng.startswith('bytes=') and rng.endswith(f'-{size - 1}') and ',' not in rng:
            start = int(rng[len('bytes='):].split('-')[0])
            if start < size - TAIL:
                out.append(rng)
    return out


def file_requests(origin, name):
    """The origin's log entries for one file, the mount-time probe left out."""
    return [r for r in origin.log()['requests']
            if r['path'] == '/' + name and r['range'] != 'bytes=0-0']


def run_all(fns, secs=120):
    """Runs each of fns in its own thread, all at once; every one must end
    within secs (together)."""
    threads = [threading.Thread(target=fn, daemon=True) for fn in fns]
    for t in threads:
        t.start()
    deadline = time.monotonic() + secs
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        assert not t.is_alive(), f'a reader is still blocked after {secs} s'


def test_64_concurrent_readers(seamfs, data, origin):
    names = ['big.bin', 'mid.bin', 'odd.bin', 'clip.mkv']
    m = seamfs.mount(catalog(*[asset(n, f'F/{n}', origin.url(n)) for n in names]),
                     read_timeout=30)
    origin.clear()
    results = [None] * 64
    opened = threading.Barrier(64, timeout=30)

    def reader(i):
        name = names[i % len(names)]
        h = hashlib.sha256()
        with open(m.path(f'F/{name}'), 'rb') as f:
            opened.wait()   # all 64 sessions are open before anyone reads
            while True:
                b = f.read(256 * 1024)
                if not b:
                    break
                h.update(b)
        results[i] = (name, h.hexdigest())

    run_all([lambda i=i: reader(i) for i in range(64)])
    for i, r in enumerate(results):
        assert r is not None, f'reader {i} did not finish'
        assert r[1] == data[r[0]].sha256, f'reader {i}: {r[0]} differs'
    log = origin.log()
    assert log['max_concurrent'] <= 64, \
        f'{log["max_concurrent"]} concurrent connections for 64 open files'


def test_scans_hit_the_head_tail_cache(seamfs, data, origin):
    name = 'big.bin'
    size = data[name].size
    ref = data.bytes(name)
    m = seamfs.mount(catalog(asset('big', 'Movies/big.bin', origin.url(name), size=size)))
    origin.clear()
    path = m.path('Movies/big.bin')
    for _ in range(50):
        fd = os.open(path, os.O_RDONLY)
        try:
            # an ffprobe-like scan: the head, then the tail; no stream
            assert os.pread(fd, 64 * 1024, 0) == ref[:64 * 1024]
            assert os.pread(fd, 64 * 1024, size - 64 * 1024) == ref[-64 * 1024:]
            assert os.pread(fd, 4096, HEAD - 4096) == ref[HEAD - 4096:HEAD]
        finally:
            os.close(fd)
        # drop the kernel's copy so that every cycle reaches the daemon
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    reqs = file_requests(origin, name)
    ranges = sorted(r['range'] for r in reqs)
    # the head comes in two parts (the first read's bytes and a margin,
    # then the rest once a read goes past them: here the read at HEAD -
    # 4096), the tail whole with the head's first part (one request for
    # two ranges, which seam-origin answers as multipart/byteranges, as
    # nginx does); each once in 50 scans
    spans = sorted(tuple(int(x) for x in rng.split('-'))
                   for r in reqs for rng in r['range'][6:].split(','))
    assert len(reqs) == 2 and len(spans) == 3 and spans[0][0] == 0 and spans[0][1] + 1 == spans[1][0] and \
        spans[1][1] == HEAD - 1 and spans[2] == (size - TAIL, size - 1) and \
        spans[0][1] + 1 <= HEAD - 256 * 1024, f'50 scans made these transfers: {ranges}'
    assert all(r['complete'] for r in reqs)
    assert sum(r['bytes_sent'] for r in reqs) == HEAD + TAIL


def test_sequential_read_is_one_stream(seamfs, data, origin):
    """A plain sequential read costs the head, one open-ended stream, and
    little more: about as many bytes from the origin as were read."""
    name = 'big.bin'
    # one connection: a reader that waits 500 ms on a transfer bringing less
    # than 64 MiB/s turns its stream parallel, and on a loaded machine the
    # loopback origin is that slow; the first transfer, cancelled at its
    # part's end, had sent more than the daemon took (test_parallel.py)
    m = seamfs.mount(catalog(asset('big', 'big.bin', origin.url(name))),
                     options=['max_streams=1'])
    origin.clear()
    assert bounded(lambda: sha256_file(m.path('big.bin')), 60, 'read big.bin') == \
        data[name].sha256
    reqs = file_requests(origin, name)
    fetched = sum(r['bytes_sent'] for r in reqs)
    assert fetched <= 1.1 * data[name].size, \
        f'{fetched} bytes fetched for {data[name].size} read: {[r["range"] for r in reqs]}'
    assert len(streams(reqs, data[name].size)) == 1, f'requests: {[r["range"] for r in reqs]}'


def test_random_reads_fetch_what_they_read(seamfs, data, origin):
    """Random 64 KiB reads use bounded ranges: no stream, little waste."""
    name = 'big.bin'
    ref = data.bytes(name)
    size = len(ref)
    m = seamfs.mount(catalog(asset('big', 'big.bin', origin.url(name), size=size)))
    origin.clear()
    fd = os.open(m.path('big.bin'), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        rng = random.Random(1234)
        read = 0
        for _ in range(200):
            off = rng.randrange(HEAD, size - TAIL - 64 * 1024) // 4096 * 4096
            assert os.pread(fd, 64 * 1024, off) == ref[off:off + 64 * 1024]
            read += 64 * 1024
    finally:
        os.close(fd)
    reqs = file_requests(origin, name)
    assert not streams(reqs, size), 'a stream started'
    fetched = sum(r['bytes_sent'] for r in reqs)
    assert fetched <= 2 * read, f'{fetched} bytes fetched for {read} read'


def test_large_kernel_readahead(seamfs, data, origin):
    """An operator may raise the mount's read_ahead_kb: the kernel then sends
    many reads at once, far out of order, and one of them ending the stream
    must not fail the others that wait on it. Two readers of one file and a
    reader that seeks, all through one session."""
    name = 'big.bin'
    size = data[name].size
    ref = data.bytes(name)
    m = seamfs.mount(catalog(asset('big', 'big.bin', origin.url(name), size=size),
                             asset('mid', 'mid.bin', origin.url('mid.bin'))),
                     read_timeout=30)
    path = m.path('big.bin')
    with open(m.path('mid.bin'), 'rb') as f:
        assert f.read(4096) == data.bytes('mid.bin')[:4096]   # the first open sets 1 MiB
    st = os.stat(m.path())
    bdi = f'/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/read_ahead_kb'
    if not os.access(bdi, os.W_OK):
        pytest.skip(f'{bdi} is not writable (needs root)')
    with open(bdi, 'w') as f:
        f.write('4096')
    errors = []

    def whole():
        try:
            if sha256_file(path) != data[name].sha256:
                errors.append('whole-file read: wrong bytes')
        except OSError as e:
            errors.append(f'whole-file read: {e}')

    def seeker():
        # runs long enough to earn a stream, then a far jump while the
        # kernel's read-ahead of the run is still in flight
        rnd = random.Random(7)
        try:
            with open(path, 'rb', buffering=0) as f:
                for _ in range(30):
                    off = rnd.randrange(0, size - 8 * MIB)
                    f.seek(off)
                    for k in range(6):
                        got = f.read(MIB)
                        at = off + k * MIB
                        if got != ref[at:at + MIB]:
                            errors.append(f'read at {at} after a seek: wrong bytes')
                            return
        except OSError as e:
            errors.append(f'read after a seek: {e}')

    def drop():
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

    for _ in range(6):
        bounded(whole, 60, 'read big.bin alone')
        assert not errors, errors
        drop()
    run_all([whole, whole, seeker])
    assert not errors, errors
