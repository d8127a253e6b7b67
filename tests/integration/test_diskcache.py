"""The persistent tier of the head and tail cache (proxy/read/disk.c):
heads and tails kept in cache_dir serve a rescan after a remount with no
request to the origin; a part that no longer checks (the asset changed
size, the file was torn or a byte flipped) is never served, and a full
cache_dir turns the tier off with one warning while reads go on.  The
origin is seam-origin, whose log lists every request; reads use
O_DIRECT so that they reach seamfs, not the kernel's page cache."""
import hashlib
import json
import os
import subprocess
import threading

import pytest

import promparse
from conftest import KIB, MIB, bounded, sha256_file, wait_until

OPTS = ['liveness_interval=0']
# a first read smaller than the kernel's first window (64 KiB at the
# daemon's read-ahead): the head's first part alone, then the tail
SPANS = lambda size: [(0, 32 * KIB), (16 * KIB, 16 * KIB), (size - 64 * KIB, 64 * KIB),
                      (size - 6000, 6000)]


def make_files(root, n, size=3 * MIB + 333):
    root.mkdir(exist_ok=True)
    for i in range(n):
        (root / f'f{i}.bin').write_bytes(os.urandom(size + i))
    return [root / f'f{i}.bin' for i in range(n)]


def cat_for(o, files, mtimes=None):
    return {'assets': [{'id': f.stem, 'path': f.name, 'size': f.stat().st_size,
                        'mtime': (mtimes or {}).get(f.stem, 1700000000),
                        'sources': [{'url': o.url(f.name)}]}
                       for f in files]}


def read_spans(m, files):
    """Reads the head and tail spans of each file through the mount with
    O_DIRECT and checks their bytes against the file's."""
    def run():
        for f in files:
            body = f.read_bytes()
            fd = os.open(m.path(f.name), os.O_RDONLY | os.O_DIRECT)
            try:
                for off, n in SPANS(len(body)):
                    got = os.pread(fd, n, off)
                    assert hashlib.sha256(got).digest() == \
                        hashlib.sha256(body[off:off + n]).digest(), (f.name, off, n)
            finally:
                os.close(fd)
    bounded(run, 60, 'reads of heads and tails')


def disk_status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)['disk_cache']


def disk_metrics(m):
    with open(m.path('.seamfs/metrics')) as f:
        met = promparse.parse(f.read())
    return {k[len('seamfs_disk_cache_'):]: met[k].value({}) for k in met
            if k.startswith('seamfs_disk_cache_')}


def parts(cache_dir):
    if not cache_dir.is_dir():
        return []
    return sorted(p for p in cache_dir.iterdir() if p.name.endswith(('.head', '.tail')))


def requests(o, since=0):
    """The origin's requests for files, from the since-th on."""
    return [r for r in o.log()['requests'] if not r['path'].startswith('/_ctl')][since:]


def scan_and_keep(seamfs, o, files, options=OPTS):
    """Mounts, reads every head and tail, waits until they are all on disk
    (two parts a file), unmounts. Returns the cache directory."""
    cache_dir = seamfs.state_dir / 'cache'
    m = seamfs.mount(cat_for(o, files), options=options)
    read_spans(m, files)
    wait_until(lambda: len(parts(cache_dir)) == 2 * len(files), 20,
               'every head and tail kept on disk')
    m.unmount()
    return cache_dir


def test_remount_rescans_with_no_request(seamfs, make_origin, tmp_path):
    files = make_files(tmp_path / 'www', 4)
    o = make_origin(tmp_path / 'www')
    scan_and_keep(seamfs, o, files)
    first = len(requests(o))
    assert first >= 8, requests(o)     # a head part and a tail a file
    m = seamfs.mount(cat_for(o, files), options=OPTS)
    read_spans(m, files)
    assert requests(o, first) == [], requests(o, first)
    # the status and the metrics count it: a hit a part, none refused
    d = disk_status(m)
    assert (d['on'], d['parts'], d['hits'], d['rejects'], d['evictions']) == \
        (True, 8, 8, 0, 0), d
    assert d['hit_bytes'] == d['bytes'] - sum(
        p.read_bytes().index(b'\n\n') + 2 for p in parts(seamfs.state_dir / 'cache')), d
    met = disk_metrics(m)
    assert (met['up'], met['hits_total'], met['rejects_total'], met['bytes']) == \
        (1, 8, 0, d['bytes']), met
    # and after the rescan the whole files still read right
    for f in files[:1]:
        assert bounded(lambda: sha256_file(m.path(f.name)), 60, 'whole read') == \
            sha256_file(f)


def test_part_of_an_asset_that_changed_is_refetched(seamfs, make_origin, tmp_path):
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    scan_and_keep(seamfs, o, files)
    # f0 changes: longer, other bytes; f1: the same size, other bytes, a
    # new mtime; the catalog says so. f2 stays.
    files[0].write_bytes(os.urandom(files[0].stat().st_size + 4096))
    files[1].write_bytes(os.urandom(files[1].stat().st_size))
    since = len(requests(o))
    m = seamfs.mount(cat_for(o, files, {'f1': 1700000999}), options=OPTS)
    read_spans(m, files)    # the new files' bytes
    again = requests(o, since)
    assert {r['path'] for r in again} == {'/f0.bin', '/f1.bin'}, again
    assert m.log().count("the asset's size changed") == 2, m.log()
    assert m.log().count("the asset's mtime changed") == 2, m.log()


def test_parallel_first_reads_of_kept_parts_ask_nothing(seamfs, make_origin, tmp_path):
    """After a remount, the kernel's parallel reads of a head and a tail
    (a film's probe: its index read up to the end) all wait for the one
    load from disk. On 8dfce1b a read that came while another loaded the
    part found the slot empty and started a fill: the bench's two-hour
    film fetched its 1 MiB tail again on a rescan."""
    files = make_files(tmp_path / 'www', 2)
    o = make_origin(tmp_path / 'www')
    scan_and_keep(seamfs, o, files)
    since = len(requests(o))
    for round_ in range(3):
        m = seamfs.mount(cat_for(o, files), options=OPTS)
        spans = []
        for f in files:
            size = f.stat().st_size
            spans += [(f, off, 16 * KIB) for off in range(0, 256 * KIB, 32 * KIB)]
            spans += [(f, off, 16 * KIB) for off in range(size - MIB, size, 128 * KIB)]
        barrier = threading.Barrier(len(spans))
        errors = []

        def reader(f, off, n):
            body = f.read_bytes()[off:off + n]
            fd = os.open(m.path(f.name), os.O_RDONLY | os.O_DIRECT)
            try:
                barrier.wait(10)
                if os.pread(fd, n, off) != body:
                    errors.append((f.name, off))
            except Exception as e:     # noqa: BLE001 -- reported below
                errors.append((f.name, off, repr(e)))
            finally:
                os.close(fd)
        threads = [threading.Thread(target=reader, args=sp) for sp in spans]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads) and not errors, errors
        assert requests(o, since) == [], (round_, requests(o, since))
        m.unmount()


def test_torn_parts_are_never_served(seamfs, make_origin, tmp_path):
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    cache_dir = scan_and_keep(seamfs, o, files)
    ps = parts(cache_dir)
    assert len(ps) == 6
    # one truncated, one with a byte flipped in its bytes, one in its header
    b = ps[0].read_bytes()
    ps[0].write_bytes(b[:len(b) - 1000])
    b = bytearray(ps[1].read_bytes())
    b[-5000] ^= 0x01
    ps[1].write_bytes(bytes(b))
    b = bytearray(ps[2].read_bytes())
    b[b.index(b'\nsource ') + 12] ^= 0x01
    ps[2].write_bytes(bytes(b))
    since = len(requests(o))
    m = seamfs.mount(cat_for(o, files), options=OPTS)
    read_spans(m, files)
    # the three bad parts came from the origin again, the three good ones not
    assert len(requests(o, since)) == 3, requests(o, since)
    assert m.log().count('is not served') == 3, m.log()
    d = disk_status(m)
    assert (d['hits'], d['rejects']) == (3, 3), d
    # the three refetched parts are kept again, whole
    wait_until(lambda: disk_status(m)['stored'] == 3, 20, 'the parts stored again')


@pytest.fixture
def small_tmpfs(tmp_path):
    """A tmpfs of 1 MiB (a disk that fills up), unmounted at the end."""
    d = tmp_path / 'small'
    d.mkdir()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', str(d)],
                       capture_output=True, timeout=10)
    if r.returncode != 0:
        pytest.fail(f'cannot mount a tmpfs: {r.stderr.decode(errors="replace")}')
    try:
        yield d
    finally:
        subprocess.run(['umount', '-l', str(d)], capture_output=True, timeout=10)


def test_full_cache_dir_turns_the_tier_off(seamfs, make_origin, tmp_path, small_tmpfs):
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    m = seamfs.mount(cat_for(o, files), options=OPTS + [f'cache_dir={small_tmpfs}/cache'])
    read_spans(m, files)
    wait_until(lambda: 'no longer kept on disk' in m.log(), 20, 'the warning')
    d = disk_status(m)
    assert not d['on'] and 'No space left on device' in d['why_off'], d
    assert disk_metrics(m)['up'] == 0
    # reads go on, with the right bytes, and the warning is said once
    read_spans(m, files)
    for f in files:
        assert bounded(lambda: sha256_file(m.path(f.name)), 60, 'whole read') == \
            sha256_file(f)
    assert m.log().count('no longer kept on disk') == 1, m.log()


def test_a_part_of_another_version_is_dropped(seamfs, make_origin, tmp_path):
    """A kept head part, then the file changes in place (same size, the
    catalog's mtime kept) and the origin's ETag with it: the head's next
    part names another version, so the kept part is dropped, here and on
    disk, and every later read gets the new bytes."""
    (f,) = make_files(tmp_path / 'www', 1)
    o = make_origin(tmp_path / 'www')
    scan_and_keep(seamfs, o, [f])
    st = f.stat()
    f.write_bytes(os.urandom(st.st_size))
    os.utime(f, (st.st_mtime + 1000, st.st_mtime + 1000))
    body = f.read_bytes()

    def pread(m, off, n):
        fd = os.open(m.path(f.name), os.O_RDONLY | os.O_DIRECT)
        try:
            return bounded(lambda: os.pread(fd, n, off), 30, 'a read')
        finally:
            os.close(fd)
    m = seamfs.mount(cat_for(o, [f]), options=OPTS)
    # past the kept first part: the next part is asked for
    assert pread(m, MIB, 64 * KIB) == body[MIB:MIB + 64 * KIB]
    wait_until(lambda: 'another version' in m.log(), 10, 'the warning')
    assert pread(m, 0, 64 * KIB) == body[:64 * KIB]
    assert pread(m, 16 * KIB, 16 * KIB) == body[16 * KIB:32 * KIB]
    m.unmount()
    m = seamfs.mount(cat_for(o, [f]), options=OPTS)
    assert pread(m, 0, 64 * KIB) == body[:64 * KIB]


def part_names(aid):
    h = hashlib.sha256(aid.encode()).hexdigest()[:32]
    return {h + '.head', h + '.tail'}


def test_least_recently_used_parts_are_evicted(seamfs, make_origin, tmp_path):
    """cache_max_bytes holds two files' head and tail (1.31 MiB a file), not
    two and a head: the parts of the file used longest ago (loaded, not
    only stored) go, whole, in whichever order its head and tail were
    stored. (At 3M, two files and a head fitted: when the tail of the file
    used longest ago was stored after its head, its head stayed.)"""
    files = make_files(tmp_path / 'www', 3)
    o = make_origin(tmp_path / 'www')
    opts = OPTS + ['cache_max_bytes=2900K']
    cache_dir = seamfs.state_dir / 'cache'
    scan_and_keep(seamfs, o, files[:2], options=opts)
    m = seamfs.mount(cat_for(o, files), options=opts)
    read_spans(m, files[:1])          # f0's parts used again, f1's not
    assert disk_status(m)['hits'] == 2
    read_spans(m, files[2:])          # f2's parts need room
    wait_until(lambda: disk_status(m)['stored'] == 2, 20, "f2's parts stored")
    d = disk_status(m)
    assert (d['evictions'], d['parts']) == (2, 4) and d['bytes'] <= 2900 * KIB, d
    assert {p.name for p in parts(cache_dir)} == part_names('f0') | part_names('f2')
    m.unmount()
    since = len(requests(o))
    m = seamfs.mount(cat_for(o, files), options=opts)
    read_spans(m, [files[0], files[2]])
    assert requests(o, since) == [], requests(o, since)
    read_spans(m, files[1:2])
    assert {r['path'] for r in requests(o, since)} == {'/f1.bin'}


def test_cache_dir_others_can_write_is_not_used(seamfs, make_origin, tmp_path):
    """Parts are replaced and removed by name: a cache_dir others may
    write in (where a link could be planted) is not used; reads go on."""
    files = make_files(tmp_path / 'www', 1)
    o = make_origin(tmp_path / 'www')
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(shared, 0o777)
    m = seamfs.mount(cat_for(o, files), options=OPTS + [f'cache_dir={shared}'])
    read_spans(m, files)
    d = disk_status(m)
    assert not d['on'] and d['parts'] == 0, d
    assert 'writable by others' in m.log()
    assert list(shared.iterdir()) == []
