"""`seamfs verify` through the real binary, against nginx on 127.0.0.1.

Each test writes its own files (random bytes, made at test time) into a
private directory that a private nginx serves, then runs
`seamfs verify --state-dir DIR CATALOG [IDS]` and checks the verdict line of
every source, the summary and the exit status (0 all match, 1 mismatch or
size mismatch, 2 usage or unknown asset id, 4 inconclusive only).  Before it
trusts a verdict, each test checks the bytes behind it: the SHA-256 of the
files it served, and where exactly a changed copy differs.
"""

import json
import os
import re
from pathlib import Path

import pytest

from conftest import MIB, Nginx, sha256_bytes, sha256_file

S = 4096
GIB = 1 << 30


def plan(size):
    """The sample plan of verifier/sample.h: [(offset, length)]."""
    if size <= 0:
        return []
    chunks = (size + S - 1) // S
    n = min(chunks, 100 if size >= GIB else 20)
    out = []
    for i in range(n):
        k = i if n == chunks else i * (chunks - 1) // (n - 1)
        out.append((k * S, min(S, size - k * S)))
    return out


class Site:
    """A directory of test files and the nginx that serves it."""

    def __init__(self, tmp_path):
        self.root = tmp_path / 'www'
        self.root.mkdir()
        self.nginx = Nginx(self.root, tmp_path / 'nginx')

    def write(self, name, data):
        p = self.root / name
        p.write_bytes(data)
        return p

    def url(self, name):
        return self.nginx.url(name)


@pytest.fixture
def site(tmp_path):
    s = Site(tmp_path)
    try:
        s.nginx.start()
        yield s
    finally:
        s.nginx.stop()


def flipped(data, off):
    b = bytearray(data)
    b[off] ^= 0xFF
    return bytes(b)


def only_difference(a, b):
    """The one offset where two equal-length byte strings differ."""
    assert len(a) == len(b)
    diff = [i for i in range(len(a)) if a[i] != b[i]] if len(a) < 64 * 1024 else None
    if diff is None:
        # compare in blocks, then look inside the differing ones
        diff = []
        for start in range(0, len(a), 64 * 1024):
            if a[start:start + 64 * 1024] != b[start:start + 64 * 1024]:
                diff += [start + i for i in range(min(64 * 1024, len(a) - start))
                         if a[start + i] != b[start + i]]
    assert len(diff) == 1, diff[:10]
    return diff[0]


def write_catalog(tmp_path, assets, name='catalog.json'):
    p = tmp_path / name
    p.write_text(json.dumps({'assets': assets}, indent=1))
    return p


def verify(seamfs_cli, tmp_path, catalog, *args, timeout=60):
    r = seamfs_cli.run(['verify', '--state-dir', tmp_path / 'state', '--timeout', '5',
                        *args, catalog], timeout=timeout)
    return r


def verify_ids(seamfs_cli, tmp_path, catalog, ids, *args, timeout=60):
    return seamfs_cli.run(['verify', '--state-dir', tmp_path / 'state', '--timeout', '5',
                           *args, catalog, *ids], timeout=timeout)


def lines_of(out, aid):
    """{source: verdict text} from the result lines of asset aid."""
    res = {}
    for line in out.splitlines():
        if not line.startswith(aid + ' '):
            continue
        src, _, verdict = line[len(aid) + 1:].partition(': ')
        if verdict.startswith('full sha256'):
            res.setdefault('full', {})[src] = verdict
        else:
            res[src] = verdict
    return res


def no_sanitizer_report(r):
    for marker in ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:'):
        assert marker not in r.stderr, r.stderr


@pytest.fixture
def media(site):
    """ref.bin and copies: identical, one byte flipped inside a sample, one
    byte flipped between samples, one byte shorter."""
    size = 3 * MIB + 12345
    ref = os.urandom(size)
    p = plan(size)
    assert len(p) == 20
    inside = p[7][0] + 1000              # inside sample 7
    between = p[7][0] + S + 10           # after sample 7, before sample 8
    assert between < p[8][0]
    files = {
        'ref.bin': ref,
        'same.bin': ref,
        'flip.bin': flipped(ref, inside),
        'gap.bin': flipped(ref, between),
        'short.bin': ref[:-1],
    }
    for name, data in files.items():
        site.write(name, data)
    # the bytes on disk are what the test thinks they are
    assert sha256_file(site.root / 'same.bin') == sha256_bytes(ref)
    assert only_difference(ref, (site.root / 'flip.bin').read_bytes()) == inside
    assert only_difference(ref, (site.root / 'gap.bin').read_bytes()) == between
    assert (site.root / 'short.bin').stat().st_size == size - 1
    return {'size': size, 'sha256': sha256_bytes(ref), 'plan': p, 'inside': inside,
            'between': between, 'data': ref}


def test_verdicts_and_exit_status(seamfs_cli, tmp_path, site, media):
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'Movies/movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')},
                    {'url': site.url('flip.bin')}, {'url': site.url('short.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    assert r.returncode == 1, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('match (reference; 20 samples'), v
    assert v[site.url('same.bin')].startswith('match (20 samples'), v
    off = media['plan'][7][0]
    assert v[site.url('flip.bin')] == (
        f'mismatch: sample 7 of 20 (bytes {off}-{off + S - 1}) differs'), v
    assert v[site.url('short.bin')] == (
        f'size mismatch: has {media["size"] - 1} bytes, the asset {media["size"]}'), v
    assert '4 source(s): 2 match, 1 mismatch, 1 size mismatch, 0 inconclusive' in r.stdout

    # the size gate reads nothing from a source of another size: nginx saw
    # only the probe of short.bin (a one-byte range)
    short_reqs = [ln for ln in site.nginx.access_log().splitlines() if '/short.bin' in ln]
    assert len(short_reqs) == 1 and '"bytes=0-0"' in short_reqs[0], short_reqs
    # one request per sample on the others: 20 samples + 1 probe
    same_reqs = [ln for ln in site.nginx.access_log().splitlines() if '/same.bin' in ln]
    assert len(same_reqs) == 21, same_reqs


def test_all_identical_exit_0(seamfs_cli, tmp_path, site, media):
    local = tmp_path / 'local-copy.bin'
    local.write_bytes(media['data'])
    assert sha256_file(local) == media['sha256']
    # no size in the catalog: it comes from the first source's answer
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv',
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')},
                    {'path': str(local)}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    assert r.returncode == 0, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert all(x.startswith('match') for x in v.values()), v
    assert len(v) == 3
    assert '3 source(s): 3 match, 0 mismatch, 0 size mismatch, 0 inconclusive' in r.stdout


def test_full_checks_the_catalog_sha256(seamfs_cli, tmp_path, site, media):
    good = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'], 'sha256': media['sha256'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('gap.bin')}]}],
        'good.json')
    r = verify(seamfs_cli, tmp_path, good, '--full')
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    # sampling cannot see a byte between samples (the known limit) ...
    assert v[site.url('gap.bin')].startswith('match'), v
    # ... the whole-file check does
    assert v['full'][site.url('ref.bin')] == 'full sha256 match', v
    gap_sha = sha256_file(site.root / 'gap.bin')
    assert gap_sha != media['sha256']
    assert v['full'][site.url('gap.bin')] == (
        f'full sha256 mismatch: {gap_sha}, the catalog says {media["sha256"]}'), v
    assert r.returncode == 1

    wrong = '0' * 64
    bad = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'], 'sha256': wrong,
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')}]}],
        'bad.json')
    r = verify(seamfs_cli, tmp_path, bad, '--full')
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('same.bin')].startswith('match'), v
    for name in ('ref.bin', 'same.bin'):
        assert v['full'][site.url(name)] == (
            f'full sha256 mismatch: {media["sha256"]}, the catalog says {wrong}'), v
    assert r.returncode == 1

    # the same sources, right sha256, no changed copy: exit 0
    ok = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'sha256': media['sha256'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')}]}],
        'ok.json')
    r = verify(seamfs_cli, tmp_path, ok, '--full')
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'full sha256: 0 differ, 0 unread' in r.stdout


def test_unknown_asset_id(seamfs_cli, tmp_path, site, media):
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'sources': [{'url': site.url('ref.bin')}]}])
    r = verify_ids(seamfs_cli, tmp_path, cat, ['movie', 'no-such-movie'])
    assert r.returncode == 2
    assert f"unknown asset id 'no-such-movie' (not in {cat})" in r.stderr
    assert r.stdout == ''
    # nothing was read
    assert '/ref.bin' not in site.nginx.access_log()


def test_dead_source_is_inconclusive(seamfs_cli, tmp_path, site, media, dead_port):
    dead = f'http://127.0.0.1:{dead_port}/ref.bin'
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': dead},
                    {'url': site.url('missing.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    assert r.returncode == 4, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('match (reference'), v
    assert v[dead].startswith('inconclusive: no size: '), v
    assert re.search(r'connect', v[dead], re.I), v
    assert v[site.url('missing.bin')].startswith('inconclusive: no size: HTTP 404'), v

    # a mismatch outranks the inconclusive ones: exit 1
    cat2 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': dead},
                    {'url': site.url('flip.bin')}]}], 'cat2.json')
    r = verify(seamfs_cli, tmp_path, cat2)
    assert r.returncode == 1, r.stdout + r.stderr

    # no source readable at all: inconclusive, never a match
    cat3 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': dead}]}], 'cat3.json')
    r = verify(seamfs_cli, tmp_path, cat3)
    assert r.returncode == 4, r.stdout + r.stderr


def test_store_is_written_reused_and_survives_corruption(seamfs_cli, tmp_path, site, media):
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('flip.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    assert r.returncode == 1
    files = list((tmp_path / 'state' / 'fingerprints').glob('*.json'))
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert doc['asset'] == 'movie' and doc['reference'] == site.url('ref.bin')
    rec = doc['sources'][site.url('ref.bin')]
    assert rec['size'] == media['size'] and rec['etag'].startswith('"')
    # the stored sample digests are the SHA-256 of the file's bytes there
    for (off, ln, hexd), (poff, pln) in zip(rec['samples'], media['plan']):
        assert (off, ln) == (poff, pln)
        assert hexd == sha256_bytes(media['data'][off:off + ln])
    flip = doc['sources'][site.url('flip.bin')]
    assert flip['verdict']['outcome'] == 'mismatch' and flip['verdict']['sample'] == 7

    # reference source gone: the stored reference still judges the others
    (site.root / 'ref.bin').unlink()
    cat2 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')},
                    {'url': site.url('flip.bin')}]}], 'cat2.json')
    r = verify(seamfs_cli, tmp_path, cat2)
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('inconclusive'), v
    assert v[site.url('same.bin')].startswith('match (20 samples'), v
    assert v[site.url('flip.bin')].startswith('mismatch: sample 7'), v

    # a corrupt store file: a warning naming it, then a fresh, correct check
    files[0].write_text('{"version": 1, "asset": "movie", "sources": {"x": ')
    r = verify(seamfs_cli, tmp_path, cat2)
    assert str(files[0]) in r.stderr and 'corrupt' in r.stderr, r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('same.bin')].startswith('match (reference'), v
    assert v[site.url('flip.bin')].startswith('mismatch: sample 7'), v
    json.loads(files[0].read_text())   # rewritten whole


def test_large_sparse_file_100_samples(seamfs_cli, tmp_path, site):
    """1 GiB + 1 byte (sparse, so it costs no disk): 100 samples, the last
    one a single byte; a byte changed in sample 63 is named."""
    size = GIB + 1
    p = plan(size)
    assert len(p) == 100 and p[-1] == (GIB, 1)
    for name in ('big-a.bin', 'big-b.bin', 'big-c.bin'):
        with open(site.root / name, 'wb') as f:
            f.truncate(size)
            f.seek(12345)
            f.write(b'seamfs')
            f.seek(size - 1)
            f.write(b'\x01')
    with open(site.root / 'big-c.bin', 'r+b') as f:
        f.seek(p[63][0] + 7)
        f.write(b'\x02')
    cat = write_catalog(tmp_path, [{
        'id': 'big', 'path': 'big.mkv', 'size': size,
        'sources': [{'url': site.url(n)} for n in ('big-a.bin', 'big-b.bin', 'big-c.bin')]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'big')
    assert v[site.url('big-b.bin')].startswith('match (100 samples'), v
    assert v[site.url('big-c.bin')].startswith('mismatch: sample 63 of 100'), v
    assert r.returncode == 1


def test_usage(seamfs_cli, tmp_path):
    r = seamfs_cli.run(['verify', '--help'])
    assert r.returncode == 0
    assert 'exit status' in r.stdout and '--full' in r.stdout
    r = seamfs_cli.run(['verify'])
    assert r.returncode == 2 and 'missing CATALOG' in r.stderr
    r = seamfs_cli.run(['verify', '--bogus', 'x.json'])
    assert r.returncode == 2 and "--bogus" in r.stderr
    r = seamfs_cli.run(['verify', '--timeout', 'soon', tmp_path / 'x.json'])
    assert r.returncode in (2, 3)
    cat = tmp_path / 'c.json'
    cat.write_text('{"assets": []}')
    r = seamfs_cli.run(['verify', '--timeout', 'soon', cat])
    assert r.returncode == 2 and "'read_timeout': bad value 'soon'" in r.stderr
    r = seamfs_cli.run(['verify', tmp_path / 'nope.json'])
    assert r.returncode == 3 and 'nope.json' in r.stderr
