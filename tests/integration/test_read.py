"""Reading through the mount: whole files, random preads, player patterns,
concurrency, media tools, local sources, provider headers.  Every read is
compared with the original bytes (exactly or by SHA-256)."""

import http.client
import json
import os
import random
import subprocess
import threading
import urllib.parse

import pytest

from conftest import (AUTH_TOKEN, KIB, MIB, Data, asset, bounded, catalog, sha256_bytes,
                      sha256_file)


@pytest.fixture(params=['nginx', 'origin'])
def server(request):
    """Each test using this runs against nginx and against seam-origin (no faults)."""
    return request.getfixturevalue(request.param)


def all_names():
    """The files all_files_catalog lists (data may hold more: other test
    files' fixtures add theirs in the same session)."""
    return list(Data.SIZES) + ['clip.mkv']


def all_files_catalog(data, server, names=None):
    names = names or all_names()
    return catalog(*[asset(n, f'Files/{n}', server.url(n), size=data[n].size) for n in names])


def cat_sha256(path, timeout=60):
    """SHA-256 of `cat PATH` (a plain sequential reader that is not Python)."""
    p = subprocess.run(['cat', str(path)], capture_output=True, timeout=timeout)
    assert p.returncode == 0, f'cat {path}: exit {p.returncode}: {p.stderr!r}'
    return sha256_bytes(p.stdout)


def test_whole_files_sequential(seamfs, data, server):
    m = seamfs.mount(all_files_catalog(data, server))
    for name in all_names():
        f = data[name]
        path = m.path(f'Files/{name}')
        assert os.stat(path).st_size == f.size, name
        if name == 'big.bin':
            got = bounded(lambda: cat_sha256(path), 90, f'cat {name}')
        else:
            got = bounded(lambda: sha256_file(path), 60, f'read {name}')
        assert got == f.sha256, f'{name}: SHA-256 through the mount differs'


def random_seed():
    seed = os.environ.get('SEAMFS_TEST_SEED')
    seed = int(seed) if seed else random.SystemRandom().randrange(2 ** 32)
    print(f'random seed: {seed} (set SEAMFS_TEST_SEED={seed} to repeat)')
    return seed


def random_preads(path, ref, rng, count, max_len):
    """`count` preads at random offsets of random sizes, each compared exactly."""
    size = len(ref)
    fd = os.open(path, os.O_RDONLY)
    try:
        for i in range(count):
            kind = rng.random()
            if kind < 0.4:
                n = rng.randint(1, 4 * KIB)
            elif kind < 0.8:
                n = rng.randint(4 * KIB, 256 * KIB)
            else:
                n = rng.randint(256 * KIB, max_len)
            if rng.random() < 0.1:
                off = max(0, size - rng.randint(0, n))      # reads that cross EOF
            else:
                off = rng.randrange(0, size)
            got = os.pread(fd, n, off)
            want = ref[off:off + n]
            if got != want:
                first = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]),
                             min(len(got), len(want)))
                pytest.fail(f'pread #{i} off={off} len={n}: got {len(got)} bytes, want '
                            f'{len(want)}; first difference at +{first}')
    finally:
        os.close(fd)


def test_random_preads(seamfs, data, server):
    rng = random.Random(random_seed())
    m = seamfs.mount(catalog(asset('big', 'big.bin', server.url('big.bin'),
                                   size=data['big.bin'].size)))
    ref = data.bytes('big.bin')
    bounded(lambda: random_preads(m.path('big.bin'), ref, rng, 200, 2 * MIB), 100,
            '200 random preads')


def kodi_pattern(path, ref):
    """What a player does: probe head, tail, a bit of the middle, then reopen
    and play from the start to the end."""
    size = len(ref)
    with open(path, 'rb', buffering=0) as probe:
        assert probe.read(64 * KIB) == ref[:64 * KIB], 'head'
        probe.seek(size - MIB)
        assert probe.read(MIB) == ref[size - MIB:], 'tail'
        mid = size // 2 - 12345
        probe.seek(mid)
        assert probe.read(256 * KIB) == ref[mid:mid + 256 * KIB], 'middle'
        with open(path, 'rb', buffering=0) as play:
            assert play.read(64 * KIB) == ref[:64 * KIB], 'head (second handle)'
            off = 64 * KIB
            while off < size:
                b = play.read(128 * KIB)
                assert b, f'unexpected EOF at {off}'
                assert b == ref[off:off + len(b)], f'sequential read at {off}'
                off += len(b)
            assert play.read(128 * KIB) == b'', 'read past EOF returned data'
        probe.seek(0)
        assert probe.read(4096) == ref[:4096], 'head again after playback'


def test_kodi_pattern(seamfs, data, server):
    m = seamfs.mount(catalog(asset('movie', 'Movies/Big (2026)/Big (2026).mkv',
                                   server.url('big.bin'), size=data['big.bin'].size)))
    ref = data.bytes('big.bin')
    bounded(lambda: kodi_pattern(m.path('Movies/Big (2026)/Big (2026).mkv'), ref), 90,
            'kodi pattern')
    assert sha256_file(m.path('Movies/Big (2026)/Big (2026).mkv')) == data['big.bin'].sha256


def test_concurrent_readers(seamfs, data, server):
    names = ['big.bin', 'mid.bin', 'odd.bin', 'mib1.bin']
    m = seamfs.mount(catalog(*[asset(n, f'C/{n}', server.url(n), size=data[n].size)
                               for n in names]))
    chunks = [4 * KIB + 1, 64 * KIB, 128 * KIB, MIB]
    barrier = threading.Barrier(16, timeout=30)
    results = [None] * 16

    def reader(i):
        name = names[i % 4]
        try:
            barrier.wait()
            results[i] = (name, sha256_file(m.path(f'C/{name}'), chunk=chunks[i // 4]))
        except BaseException as e:  # noqa: BLE001 - reported below
            results[i] = (name, e)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(16)]

    def run():
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return [t.name for t in threads if t.is_alive()]

    stuck = bounded(run, 130, '16 concurrent readers')
    assert not stuck, f'readers still blocked: {stuck}'
    for i, (name, got) in enumerate(results):
        assert not isinstance(got, BaseException), f'reader {i} ({name}): {got!r}'
        assert got == data[name].sha256, f'reader {i} ({name}): SHA-256 differs'


def test_media_tools(seamfs, data, server):
    """ffprobe and a full ffmpeg decode through the mount, like a media server scan."""
    path = 'Movies/Clip (2026)/Clip (2026).mkv'
    m = seamfs.mount(catalog(asset('clip', path, server.url('clip.mkv'),
                                   size=data['clip.mkv'].size)))
    f = m.path(path)
    p = bounded(lambda: subprocess.run(
        ['ffprobe', '-v', 'error', '-show_entries', 'stream=codec_type,codec_name:format=duration',
         '-of', 'json', str(f)], capture_output=True, text=True, timeout=60), 70, 'ffprobe')
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == '', p.stderr
    info = json.loads(p.stdout)
    codecs = sorted((s['codec_type'], s['codec_name']) for s in info['streams'])
    assert codecs == [('audio', 'aac'), ('video', 'h264')]
    assert abs(float(info['format']['duration']) - 20.0) < 0.5
    p = bounded(lambda: subprocess.run(
        ['ffmpeg', '-nostdin', '-v', 'error', '-i', str(f), '-f', 'null', '-'],
        capture_output=True, text=True, timeout=90), 100, 'ffmpeg decode')
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == '', p.stderr
    assert bounded(lambda: sha256_file(f), 30, 'read clip') == data['clip.mkv'].sha256


def test_local_path_source(seamfs, data):
    names = ['mid.bin', 'page.bin', 'one.bin', 'clip.mkv']
    m = seamfs.mount(catalog(*[asset(n, f'Local/{n}', local=data[n].path, size=data[n].size)
                               for n in names[:2]],
                             # sizes and mtimes of local sources come from the file
                             *[asset(n, f'Local/{n}', local=data[n].path) for n in names[2:]]))
    for n in names:
        st = os.stat(m.path(f'Local/{n}'))
        assert st.st_size == data[n].size, n
        assert bounded(lambda: sha256_file(m.path(f'Local/{n}')), 30, n) == data[n].sha256, n
    rng = random.Random(random_seed())
    bounded(lambda: random_preads(m.path('Local/mid.bin'), data.bytes('mid.bin'), rng, 50, MIB),
            60, 'preads on a local source')


def http_status(url, headers=None):
    """Status of a GET (http.client: urllib would honour http_proxy)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request('GET', u.path, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def test_provider_headers(seamfs, data, nginx):
    """The provider's headers go with every request of its sources, size
    discovery included (nginx answers 401 to a request without them)."""
    url = nginx.url('mid.bin', auth=True)
    assert http_status(url) == 401, 'fixture: /auth/ must refuse requests without the header'
    assert http_status(url, {'Authorization': AUTH_TOKEN}) == 200
    seen = len(nginx.access_log().splitlines())

    m = seamfs.mount(catalog(
        asset('mid', 'Auth/mid.bin', url, provider='mirror-a'),                  # size discovered
        asset('odd', 'Auth/odd.bin', nginx.url('odd.bin', auth=True), provider='mirror-a',
              size=data['odd.bin'].size),
        providers=[{'name': 'mirror-a', 'max_connections': 4,
                    'headers': {'Authorization': AUTH_TOKEN}}]))
    assert os.stat(m.path('Auth/mid.bin')).st_size == data['mid.bin'].size
    for n in ('mid', 'odd'):
        got = bounded(lambda: sha256_file(m.path(f'Auth/{n}.bin')), 30, n)
        assert got == data[f'{n}.bin'].sha256, n
    lines = nginx.access_log().splitlines()[seen:]
    assert lines, 'nginx saw no requests from seamfs'
    bad = [ln for ln in lines if f'"{AUTH_TOKEN}"' not in ln or ' 401 ' in ln]
    assert not bad, 'requests without the provider header:\n' + '\n'.join(bad)
