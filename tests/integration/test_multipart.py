"""Head and tail in one request: the first read of an asset's head asks
the origin for the head's first part and the tail together (two ranges),
which nginx answers as multipart/byteranges, so a first scan costs one
request per file.  A broken multipart answer (another boundary, parts
that overlap, a part missing) is refused, as is one range or the whole
file where two were asked; the bytes through the mount stay the file's,
and the provider is asked one range at a time from then on.  Reads use
O_DIRECT so that they reach seamfs, not the kernel's page cache, and
a first read of 256 KiB (as the kernel reads ahead for a scanner: a
small direct read brings no tail)."""
import hashlib
import json
import os
import re

import pytest

from conftest import KIB, MIB, Nginx, bounded, sha256_file, wait_until

OPTS = ['liveness_interval=0']
TAIL = 1 * MIB   # tail_size's default


def make_files(root, n, size=3 * MIB + 333):
    root.mkdir(exist_ok=True)
    for i in range(n):
        (root / f'f{i}.bin').write_bytes(os.urandom(size + i))
    return [root / f'f{i}.bin' for i in range(n)]


def cat_for(url, files):
    return {'assets': [{'id': f.stem, 'path': f.name, 'size': f.stat().st_size,
                        'mtime': 1700000000, 'sources': [{'url': url(f.name)}]}
                       for f in files]}


def scan(m, files):
    """Reads what a scanner reads of each file (its first 256 KiB, the
    size the kernel reads a page-cache reader's first read in, then the
    last 64 KiB and the last 6000 bytes), checking every byte."""
    def run():
        for f in files:
            body = f.read_bytes()
            fd = os.open(m.path(f.name), os.O_RDONLY | os.O_DIRECT)
            try:
                for off, n in [(0, 256 * KIB), (len(body) - 64 * KIB, 64 * KIB),
                               (len(body) - 6000, 6000)]:
                    got = os.pread(fd, n, off)
                    assert hashlib.sha256(got).digest() == \
                        hashlib.sha256(body[off:off + n]).digest(), (f.name, off, n)
            finally:
                os.close(fd)
    bounded(run, 60, 'a scan of heads and tails')


def reads(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)['reads']


LINE = re.compile(r'^\S+ "GET (\S+) [^"]*" (\d+) (\d+) "([^"]*)"')


def nginx_requests(n):
    """(path, status, range) of each GET in nginx's access log."""
    out = []
    for line in n.access_log().splitlines():
        mt = LINE.match(line)
        if mt:
            out.append((mt.group(1), int(mt.group(2)), mt.group(4)))
    return out


def test_first_scan_is_one_request_per_file_on_nginx(seamfs, tmp_path):
    files = make_files(tmp_path / 'www', 6)
    n = Nginx(tmp_path / 'www', tmp_path / 'nginx')
    try:
        n.start()
        m = seamfs.mount(cat_for(n.url, files), options=OPTS)
        scan(m, files)
        # a fill ends (and is counted) on the fetch thread after its
        # reader has its bytes, and nginx logs a request once it is sent:
        # both can come after the scan returned
        wait_until(lambda: reads(m)['head_tail_multipart'] >= len(files), 10,
                   'every fill counted')
        wait_until(lambda: len(nginx_requests(n)) >= len(files), 10, "nginx's log lines")
        reqs = nginx_requests(n)
        for f in files:
            mine = [r for r in reqs if r[0] == '/' + f.name]
            size = f.stat().st_size
            # one request, for the head's first part and the whole tail,
            # answered as two parts
            assert len(mine) == 1, mine
            assert mine[0][1] == 206, mine
            first, second = mine[0][2][len('bytes='):].split(',')
            assert first.startswith('0-') and second == f'{size - TAIL}-{size - 1}', mine
        r = reads(m)
        assert r['head_tail_multipart'] == len(files), r
        # the scans cost 1 request a file, and count as scans
        wait_until(lambda: reads(m)['scans'] >= len(files), 10, 'the scans counted')
        r = reads(m)
        assert r['scan_requests'] == r['scans'], r
    finally:
        n.stop()


def test_matroska_scan_asks_the_kernels_reach_alone(seamfs, tmp_path):
    """A file named as Matroska: a probe reads its header and first
    clusters and not its end, and the kernel's read-ahead takes that to
    less than twice the mount's read_ahead_kb (512 KiB, set by the daemon),
    so its first read asks for that much past its bytes in one range, with
    no tail (a .bin of the same bytes asks head part and tail); the tail
    comes in a request of its own once something reads it."""
    www = tmp_path / 'www'
    files = make_files(www, 2)
    mkv = www / 'movie.MKV'
    files[0].rename(mkv)
    files = [mkv, files[1]]
    n = Nginx(www, tmp_path / 'nginx')
    try:
        n.start()
        m = seamfs.mount(cat_for(n.url, files), options=OPTS)
        scan(m, files)
        wait_until(lambda: len(nginx_requests(n)) >= 3, 10, "nginx's log lines")
        reqs = nginx_requests(n)
        st = os.stat(m.path())
        with open(f'/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/'
                  'read_ahead_kb') as f:
            ra = int(f.read()) * KIB
        assert ra == 512 * KIB, ra   # the daemon's, at the first open
        first = 256 * KIB + 2 * ra   # the scan's first read and the kernel's reach
        size = mkv.stat().st_size
        mine = [r for r in reqs if r[0] == '/' + mkv.name]
        # that part of the head, alone; then the tail, when the scan read it
        assert [r[2] for r in mine] == [f'bytes=0-{first - 1}',
                                        f'bytes={size - TAIL}-{size - 1}'], mine
        other = [r for r in reqs if r[0] == '/' + files[1].name]
        assert len(other) == 1 and ',' in other[0][2], other
        assert bounded(lambda: sha256_file(m.path(mkv.name)), 60, 'whole read') == \
            sha256_file(mkv)
    finally:
        n.stop()


def test_small_direct_reads_bring_no_tail(seamfs, make_origin, tmp_path):
    """4 KiB of each file with O_DIRECT (a thousand files opened for a
    peek): the head's small first part alone, no tail."""
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    m = seamfs.mount(cat_for(o.url, files), options=OPTS)
    for f in files:
        fd = os.open(m.path(f.name), os.O_RDONLY | os.O_DIRECT)
        try:
            assert os.pread(fd, 4 * KIB, 0) == f.read_bytes()[:4 * KIB]
        finally:
            os.close(fd)
    reqs = [r for r in o.log()['requests'] if not r['path'].startswith('/_ctl')]
    assert len(reqs) == 3 and all(',' not in r['range'] for r in reqs), reqs
    assert sum(r['bytes_sent'] for r in reqs) <= 3 * 512 * KIB, reqs


@pytest.mark.parametrize('mode', ['boundary', 'overlap', 'missing', 'single', 'ignore'])
def test_answers_other_than_two_parts_fall_back(seamfs, make_origin, tmp_path, mode):
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    # the first file's origin breaks its answer to two ranges; the
    # others' would answer it well, but are not asked
    o.rule('/f0.bin', multipart=mode)
    m = seamfs.mount(cat_for(o.url, files), options=OPTS)
    scan(m, files)
    reqs = [r for r in o.log()['requests'] if not r['path'].startswith('/_ctl')]
    multi = [r for r in reqs if ',' in (r['range'] or '')]
    assert [r['path'] for r in multi] == ['/f0.bin'], reqs
    # remembered for the provider: every later request asks one range
    assert all(',' not in (r['range'] or '') for r in reqs[reqs.index(multi[0]) + 1:]), reqs
    assert reads(m)['head_tail_multipart'] == 0
    wait_until(lambda: 'heads and tails are asked for apart from now on' in m.log(), 10,
               'the fallback logged')
    if mode in ('boundary', 'overlap', 'missing'):
        assert 'multipart/byteranges' in m.log()
