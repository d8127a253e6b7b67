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
    """Requests that ran to the end of the file, or to its cached tail,
    from before its tail: the streams (seamfs asks for bytes=START-LAST, up
    to the last byte, or up to the tail's start when the tail is cached or
    on its way; a head's first part asked with the tail names two
    ranges)."""
    out = []
    for r in reqs:
        rng = r['range'] or ''
        if rng.startswith('bytes=') and ',' not in rng and \
                (rng.endswith(f'-{size - 1}') or rng.endswith(f'-{size - TAIL - 1}')):
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
        assert f.read(4096) == data.bytes('mid.bin')[:4096]   # the first open sets 512 KiB
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


def paced_read(f, ref, rate, secs, block=128 * 1024):
    """Reads f from its position at rate bytes a second for secs seconds,
    checking every block against ref; returns the bytes read and the
    seconds it took."""
    t0 = time.monotonic()
    got = 0
    while got < rate * secs:
        wait = t0 + got / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        off = f.tell()
        b = f.read(block)
        assert b == ref[off:off + block], f'wrong bytes at {off}'
        got += len(b)
    return got, time.monotonic() - t0


def socket_queues(port):
    """Bytes the kernel holds in the TCP connections to the origin at port
    (/proc/net/tcp): received and not yet read by the daemon, or accepted
    from the origin and not yet received. The origin counts them as sent;
    they wait there while a transfer is paused, up to the sockets' buffers,
    which the kernel sizes (tcp_rmem: up to 32 MiB on some hosts), not
    seamfs."""
    held = 0
    with open('/proc/net/tcp') as f:
        next(f)
        for line in f:
            fld = line.split()
            local, remote, state = fld[1], fld[2], fld[3]
            tx, rx = (int(x, 16) for x in fld[4].split(':'))
            if state != '01':     # established
                continue
            if int(remote.split(':')[1], 16) == port:
                held += rx        # the daemon's end: received, unread
            elif int(local.split(':')[1], 16) == port:
                held += tx        # the origin's end: sent, not yet received
    return held


def settled_queues(port, secs=10):
    """socket_queues once it has not changed for a second (a paused
    transfer whose buffers are full), or after secs."""
    last, since, end = None, time.monotonic(), time.monotonic() + secs
    while time.monotonic() < end:
        now = socket_queues(port)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 1:
            break
        time.sleep(0.1)
    return last


def test_readahead_follows_the_readers_pace(seamfs, data, origin):
    """A viewer at 1 MiB/s with readahead_seconds=5 pulls from the origin
    its consumption, 5 s at its pace and the kernel's read-ahead, not the
    16-32 MiB the fill limit alone grows to (readahead_seconds=0, the same
    reader, in turn). What the origin sent is counted less what the
    kernel's socket buffers hold of it when the reader stops. The
    bytes are checked, and the whole file's SHA-256 once the paced part is
    done."""
    name = 'big.bin'
    size = data[name].size
    ref = data.bytes(name)
    rate, secs = MIB, 16
    taken = {}
    for pace in (5, 0):
        m = seamfs.mount(catalog(asset('big', 'big.bin', origin.url(name), size=size)),
                         options=[f'readahead_seconds={pace}', 'max_streams=1'])
        origin.clear()
        h = hashlib.sha256()
        with open(m.path('big.bin'), 'rb') as f:
            read, took = paced_read(f, ref, rate, secs)
            h.update(ref[:read])
            held = settled_queues(origin.port)
        # the stream's transfer ends with the handle: the origin logs it
        log = origin.wait_log(lambda lg: len(streams(
            [r for r in lg['requests'] if r['path'] == '/' + name], size)) == 1, timeout=10)
        reqs = [r for r in log['requests'] if r['path'] == '/' + name and r['range'] != 'bytes=0-0']
        sent = sum(r['bytes_sent'] for r in reqs)
        taken[pace] = sent - held
        with open(m.path('big.bin'), 'rb') as f:
            f.seek(read)
            h.update(f.read())
        assert h.hexdigest() == data[name].sha256
        m.unmount()
        if pace:
            # the head and tail (3 MiB), what was read, 5 s at the pace
            # measured, the kernel's read-ahead (1 MiB) and one step more
            # of the pace (1 MiB), and 1 MiB of slack
            bound = 3 * MIB + read + 5 * read / took + 3 * MIB
            assert taken[pace] <= bound, \
                f'{sent} bytes sent, {held} of them in the sockets, for {read} read ' \
                f'in {took:.1f} s: {[(r["range"], r["bytes_sent"]) for r in reqs]}'
    assert taken[0] > taken[5] + 4 * MIB, f'paced {taken[5]}, not paced {taken[0]}'


def test_scan_through_the_page_cache_starts_no_stream(seamfs, data, origin):
    """A scanner reading the head and the tail through the page cache (the
    kernel's read-ahead of them, sequential runs of each) is served by the
    head/tail cache: no stream, whatever readahead_seconds says."""
    name = 'big.bin'
    size = data[name].size
    ref = data.bytes(name)
    m = seamfs.mount(catalog(asset('big', 'big.bin', origin.url(name), size=size)),
                     options=['readahead_seconds=5'])
    origin.clear()
    with open(m.path('big.bin'), 'rb') as f:
        assert f.read(MIB) == ref[:MIB]
        f.seek(size - 512 * 1024)
        assert f.read() == ref[size - 512 * 1024:]
    reqs = file_requests(origin, name)
    assert not streams(reqs, size), f'a stream started: {[r["range"] for r in reqs]}'
    assert len(reqs) <= 2, f'requests: {[r["range"] for r in reqs]}'
