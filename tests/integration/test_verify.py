"""`seamfs verify` through the real binary, against nginx on 127.0.0.1.

Each test writes its own files (random bytes, made at test time) into a
private directory that a private nginx serves, then runs
`seamfs verify --state-dir DIR CATALOG [IDS]` and checks the verdict line of
every source, the summary and the exit status (0 all match, 1 mismatch or
size mismatch, 2 usage or unknown asset id, 4 inconclusive only, 6 undecided:
no majority).  The right bytes are what a majority of the sources agree on
(or, with --full, the catalog's sha256), never the first source's.  Before it
trusts a verdict, each test checks the bytes behind it: the SHA-256 of the
files it served, and where exactly a changed copy differs.
"""

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from conftest import MIB, Nginx, bounded, sha256_bytes, sha256_file

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
        res[src] = verdict
    return res


def stored(tmp_path):
    """The fingerprint store's files, parsed: [doc]."""
    d = tmp_path / 'state' / 'fingerprints'
    return [json.loads(f.read_text()) for f in sorted(d.glob('*.json'))] if d.is_dir() else []


def stored_samples_are(rec, data, plan_):
    """The stored sample digests are the SHA-256 of data's bytes there."""
    assert [(o, n) for o, n, _ in rec['samples']] == plan_
    return all(h == sha256_bytes(data[o:o + n]) for o, n, h in rec['samples'])


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
    # sampling cannot see a byte between samples (the known limit); the
    # whole-file check does, and then the source is no match
    assert v[site.url('ref.bin')].startswith(
        "match (reference; 20 samples, whole file = the catalog's sha256"), v
    gap_sha = sha256_file(site.root / 'gap.bin')
    assert gap_sha != media['sha256']
    assert v[site.url('gap.bin')] == (
        f'mismatch: full sha256 {gap_sha}, the catalog says {media["sha256"]}'), v
    assert (f"movie: reference {site.url('ref.bin')}: its whole file has the catalog's "
            'sha256') in r.stdout
    assert 'full sha256: 1 differ, 0 unread' in r.stdout
    assert r.returncode == 1
    (doc,) = stored(tmp_path)
    assert doc['reference'] == site.url('ref.bin')
    assert doc['sources'][site.url('gap.bin')]['verdict']['outcome'] == 'mismatch'

    wrong = '0' * 64
    bad = write_catalog(tmp_path, [{
        'id': 'movie2', 'path': 'movie2.mkv', 'size': media['size'], 'sha256': wrong,
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')}]}],
        'bad.json')
    r = verify(seamfs_cli, tmp_path, bad, '--full')
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie2')
    for name in ('ref.bin', 'same.bin'):
        assert v[site.url(name)] == (
            f'mismatch: full sha256 {media["sha256"]}, the catalog says {wrong}'), v
    assert "movie2: no reference stored: no source has the catalog's sha256" in r.stdout
    assert r.returncode == 1
    assert len(stored(tmp_path)) == 1      # nothing of movie2

    # the same sources, right sha256, no changed copy: exit 0
    ok = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'sha256': media['sha256'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')}]}],
        'ok.json')
    r = verify(seamfs_cli, tmp_path, ok, '--full')
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'full sha256: 0 differ, 0 unread' in r.stdout
    # without --full the catalog's sha256 is not checked, and the output says so
    r = verify(seamfs_cli, tmp_path, ok)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "movie: the catalog's sha256 is not checked" in r.stdout


def test_full_different_whole_files_are_never_both_match(seamfs_cli, tmp_path, site, media):
    """Issue 25: `verify --full` printed two different whole-file hashes and
    still said match, exit 0.  Without a sha256 in the catalog the right
    whole file is the majority's; two that differ have none."""
    gap_sha = sha256_file(site.root / 'gap.bin')
    assert gap_sha != media['sha256']
    assert sha256_file(site.root / 'ref.bin') == media['sha256']
    two = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('gap.bin')}]}], 'two.json')
    r = verify(seamfs_cli, tmp_path, two, '--full')
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    assert len(v) == 2, r.stdout
    for name, sha in (('ref.bin', media['sha256']), ('gap.bin', gap_sha)):
        assert not v[site.url(name)].startswith('match'), v
        assert v[site.url(name)].startswith(f'undecided: no majority: full sha256 {sha}'), v
    assert r.returncode == 6, r.stdout + r.stderr
    assert stored(tmp_path) == []

    # a third source that agrees with one of them makes it the majority
    three = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('gap.bin')}, {'url': site.url('ref.bin')},
                    {'url': site.url('same.bin')}]}], 'three.json')
    r = verify(seamfs_cli, tmp_path, three, '--full')
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('gap.bin')] == (
        f"mismatch: full sha256 {gap_sha}, the majority's {media['sha256']} (2 of 3 sources)"), v
    assert v[site.url('ref.bin')].startswith(
        "match (reference; 20 samples, whole file = the majority's sha256"), v
    assert v[site.url('same.bin')].startswith("match (20 samples, whole file = the majority's"), v
    assert r.returncode == 1, r.stdout + r.stderr
    (doc,) = stored(tmp_path)
    assert doc['reference'] == site.url('ref.bin')


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
    # 1 of 3 answering is no majority: no reference, and it says so
    assert r.returncode == 6, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')] == (
        'undecided: no majority: 1 of the 1 sources that answered agree with it (a '
        'reference needs more than half of them, and at least two)'), v
    assert v[dead].startswith('inconclusive: no size: '), v
    assert re.search(r'connect', v[dead], re.I), v
    assert v[site.url('missing.bin')].startswith('inconclusive: no size: HTTP 404'), v
    assert stored(tmp_path) == []

    # a mismatch outranks the inconclusive ones: exit 1
    cat2 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': dead},
                    {'url': site.url('flip.bin')}, {'url': site.url('same.bin')}]}],
        'cat2.json')
    r = verify(seamfs_cli, tmp_path, cat2)
    assert r.returncode == 1, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('flip.bin')].startswith('mismatch: sample 7'), v

    # no source readable at all: inconclusive, never a match
    cat3 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': dead}]}], 'cat3.json')
    r = verify(seamfs_cli, tmp_path, cat3)
    assert r.returncode == 4, r.stdout + r.stderr


def test_two_sources_that_disagree_store_nothing(seamfs_cli, tmp_path, site, media):
    """Issue 25: with two sources that differ, the first one was stored as
    the reference and the other called the mismatch.  Nothing says which is
    right: both undecided, no reference stored, exit 6."""
    assert only_difference(media['data'], (site.root / 'flip.bin').read_bytes()) == \
        media['inside']
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('flip.bin')}, {'url': site.url('ref.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    for name in ('flip.bin', 'ref.bin'):
        assert v[site.url(name)].startswith('undecided: no majority: 1 of the 2 sources'), v
    assert 'movie: no reference stored: no majority' in r.stdout
    assert '2 source(s): 0 match, 0 mismatch, 0 size mismatch, 0 inconclusive, ' \
        '2 undecided, 0 alone' in r.stdout
    assert r.returncode == 6, r.stdout + r.stderr
    assert stored(tmp_path) == []


def test_only_source_is_alone(seamfs_cli, tmp_path, site, media):
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'sha256': media['sha256'],
        'sources': [{'url': site.url('ref.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')] == (
        "alone: the asset's only source: nothing to compare it with (--full compares it "
        "with the catalog's sha256)"), v
    assert r.returncode == 0, r.stdout + r.stderr
    assert stored(tmp_path) == []
    # with --full the catalog's sha256 backs it
    r = verify(seamfs_cli, tmp_path, cat, '--full')
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith("match (reference; 20 samples, whole file = the "
                                             "catalog's sha256"), v
    assert r.returncode == 0, r.stdout + r.stderr
    (doc,) = stored(tmp_path)
    assert stored_samples_are(doc['sources'][site.url('ref.bin')], media['data'],
                              media['plan'])


def test_corrupt_first_source_is_the_minority(seamfs_cli, tmp_path, site, media):
    """Issue 25: a corrupt first source became the reference; the two good
    sources that agree were reported as the mismatch and it as the match."""
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('flip.bin')}, {'url': site.url('ref.bin')},
                    {'url': site.url('same.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    off = media['plan'][7][0]
    assert v[site.url('flip.bin')] == (
        f'mismatch: sample 7 of 20 (bytes {off}-{off + S - 1}) differs'), v
    assert v[site.url('ref.bin')].startswith('match (reference; 20 samples'), v
    assert v[site.url('same.bin')].startswith('match (20 samples'), v
    assert (f"movie: reference {site.url('ref.bin')}: 2 of the 3 sources that answered "
            'agree on its bytes') in r.stdout
    assert r.returncode == 1, r.stdout + r.stderr
    # the stored reference is the majority's bytes
    (doc,) = stored(tmp_path)
    assert doc['reference'] == site.url('ref.bin')
    assert stored_samples_are(doc['sources'][site.url('ref.bin')], media['data'], media['plan'])
    assert doc['sources'][site.url('flip.bin')]['verdict']['outcome'] == 'mismatch'
    assert doc['sources'][site.url('same.bin')]['verdict']['outcome'] == 'match'


def test_mount_after_verify_serves_the_majority(seamfs, seamfs_cli, make_origin, tmp_path):
    """Issue 25: after `seamfs verify` stored the corrupt first source as the
    reference, the daemon rejected the good sources and served wrong bytes.
    Three seam-origins, the first (p1, first by name too) with one byte
    flipped in sample 7: verify names it, and a mount on the same state
    directory serves the good bytes and gives p1 no session."""
    size = 3 * MIB + 12345
    good = os.urandom(size)
    p = plan(size)
    bad = flipped(good, p[7][0] + 100)
    dirs = {}
    for name, data in (('bad', bad), ('good1', good), ('good2', good)):
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
        (dirs[name] / 'movie.bin').write_bytes(data)
    assert only_difference(good, (dirs['bad'] / 'movie.bin').read_bytes()) == p[7][0] + 100
    good_sha = sha256_bytes(good)
    assert sha256_file(dirs['good2'] / 'movie.bin') == good_sha
    origins = [make_origin(dirs[n]) for n in ('bad', 'good1', 'good2')]
    cat = {'providers': [{'name': f'p{i + 1}'} for i in range(3)],
           'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': size, 'mtime': 1700000000,
                       'sources': [{'url': o.url('movie.bin'), 'provider': f'p{i + 1}'}
                                   for i, o in enumerate(origins)]}]}
    cat_path = tmp_path / 'catalog.json'
    cat_path.write_text(json.dumps(cat))

    r = verify(seamfs_cli, tmp_path, cat_path)
    no_sanitizer_report(r)
    v = lines_of(r.stdout, 'movie')
    assert v[origins[0].url('movie.bin')].startswith('mismatch: sample 7 of 20'), v
    assert v[origins[1].url('movie.bin')].startswith('match (reference'), v
    assert v[origins[2].url('movie.bin')].startswith('match (20 samples'), v
    assert r.returncode == 1, r.stdout + r.stderr
    (doc,) = stored(tmp_path)
    assert doc['reference'] == origins[1].url('movie.bin')

    for o in origins:
        o.clear()
    m = seamfs.mount(cat_path, read_timeout=20, options=['liveness_interval=0'])
    h = hashlib.sha256()
    with open(m.path('movie.bin'), 'rb') as f:
        h.update(f.read(64 * 1024))
        with open(m.path('.seamfs/status.json')) as sf:
            sessions = json.load(sf)['sessions']
        assert sessions and all(s['provider'] != 'p1' for s in sessions), sessions

        def rest():
            while True:
                b = f.read(MIB)
                if not b:
                    return
                h.update(b)
        bounded(rest, 60, 'reading the file through the mount')
    assert h.hexdigest() == good_sha
    # no byte of the file came from the corrupt source
    assert all(q['bytes_sent'] <= 1 for q in origins[0].log()['requests']), \
        origins[0].log()['requests']


def test_store_is_written_replaced_and_survives_corruption(seamfs_cli, tmp_path, site, media):
    # two copies of the flipped file are the majority of this catalog: the
    # reference is theirs (a majority is what backs a reference)
    site.write('flip2.bin', (site.root / 'flip.bin').read_bytes())
    flip_data = (site.root / 'flip.bin').read_bytes()
    cat = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('flip.bin')}, {'url': site.url('flip2.bin')},
                    {'url': site.url('ref.bin')}]}])
    r = verify(seamfs_cli, tmp_path, cat)
    assert r.returncode == 1, r.stdout + r.stderr
    files = list((tmp_path / 'state' / 'fingerprints').glob('*.json'))
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert doc['asset'] == 'movie' and doc['reference'] == site.url('flip.bin')
    rec = doc['sources'][site.url('flip.bin')]
    assert rec['size'] == media['size'] and rec['etag'].startswith('"')
    assert stored_samples_are(rec, flip_data, media['plan'])
    good = doc['sources'][site.url('ref.bin')]
    assert good['verdict']['outcome'] == 'mismatch' and good['verdict']['sample'] == 7

    # the stored reference does not judge a later run: the sources do.  Two
    # good ones against one flipped: the majority's reference replaces it
    cat2 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('flip.bin')}, {'url': site.url('ref.bin')},
                    {'url': site.url('same.bin')}]}], 'cat2.json')
    r = verify(seamfs_cli, tmp_path, cat2)
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('match (reference'), v
    assert v[site.url('same.bin')].startswith('match (20 samples'), v
    assert v[site.url('flip.bin')].startswith('mismatch: sample 7'), v
    doc = json.loads(files[0].read_text())
    assert doc['reference'] == site.url('ref.bin')
    assert stored_samples_are(doc['sources'][site.url('ref.bin')], media['data'], media['plan'])
    assert doc['sources'][site.url('flip.bin')]['verdict']['outcome'] == 'mismatch'

    # reference source gone, the two left disagree: undecided, and the
    # store stays as it was
    (site.root / 'ref.bin').unlink()
    before = files[0].read_text()
    cat3 = write_catalog(tmp_path, [{
        'id': 'movie', 'path': 'movie.mkv', 'size': media['size'],
        'sources': [{'url': site.url('ref.bin')}, {'url': site.url('same.bin')},
                    {'url': site.url('flip.bin')}]}], 'cat3.json')
    r = verify(seamfs_cli, tmp_path, cat3)
    assert r.returncode == 6, r.stdout + r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('inconclusive'), v
    assert v[site.url('same.bin')].startswith('undecided: no majority'), v
    assert v[site.url('flip.bin')].startswith('undecided: no majority'), v
    assert ('movie: no reference stored: no majority of the sources that answered agrees; '
            f"the one stored before is left as it was: {site.url('ref.bin')}") in r.stdout
    assert files[0].read_text() == before

    # a corrupt store file: a warning naming it, then a fresh, correct check
    site.write('ref.bin', media['data'])
    files[0].write_text('{"version": 1, "asset": "movie", "sources": {"x": ')
    r = verify(seamfs_cli, tmp_path, cat3)
    assert str(files[0]) in r.stderr and 'corrupt' in r.stderr, r.stderr
    v = lines_of(r.stdout, 'movie')
    assert v[site.url('ref.bin')].startswith('match (reference'), v
    assert v[site.url('flip.bin')].startswith('mismatch: sample 7'), v
    assert json.loads(files[0].read_text())['reference'] == site.url('ref.bin')


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
