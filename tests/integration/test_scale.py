"""Scale and bad numbers: what a large library costs at mount and at a
scan, and numbers a catalog must not carry."""

import json
import os

import pytest

from conftest import KIB, MIB, bounded

N_FILES = 200


@pytest.fixture
def library(tmp_path, make_origin):
    d = tmp_path / 'lib'
    d.mkdir()
    blob = os.urandom(3 * MIB + 4321)
    names = []
    for i in range(N_FILES):
        n = f'e{i:03d}.bin'
        (d / n).write_bytes(blob[i:] + blob[:i])
        names.append(n)
    return d, names, len(blob), make_origin(d)


def test_sized_catalog_without_mtime_costs_no_request(seamfs, library):
    """Sizes but no mtime: listed at once, nothing asked of the origin; the
    mtime is the catalog file's, and stays across a remount."""
    d, names, size, o = library
    cat = {'assets': [{'id': n, 'path': f'S/{n}', 'size': size,
                       'sources': [{'url': o.url(n)}]} for n in names]}
    o.clear()
    path = seamfs.write_catalog(cat)
    m = seamfs.mount(path)
    assert len(os.listdir(m.path('S'))) == N_FILES
    assert o.log()['requests'] == []
    mt = os.stat(m.path(f'S/{names[0]}')).st_mtime
    m.unmount()
    # the same catalog, touched since: the remembered mtime holds
    os.utime(path, (mt + 100, mt + 100))
    m = seamfs.mount(path)
    assert os.stat(m.path(f'S/{names[0]}')).st_mtime == mt
    assert o.log()['requests'] == []


def test_opening_many_files_for_4k_costs_little(seamfs, library):
    """200 files opened and 4 KiB read from each: the head is asked for in
    what the first reads need (4 KiB and a margin), not 2 MiB each."""
    d, names, size, o = library
    cat = {'assets': [{'id': n, 'path': f'S/{n}', 'size': size, 'mtime': 1700000000,
                       'sources': [{'url': o.url(n)}]} for n in names]}
    m = seamfs.mount(cat)
    o.clear()

    def scan():
        for n in names:
            fd = os.open(m.path(f'S/{n}'), os.O_RDONLY | os.O_DIRECT)
            try:
                import mmap
                buf = mmap.mmap(-1, 4 * KIB)
                assert os.preadv(fd, [buf], 0) == 4 * KIB
                assert bytes(buf) == (d / n).read_bytes()[:4 * KIB]
            finally:
                os.close(fd)
    bounded(scan, 120, 'scan')
    sent = sum(r['bytes_sent'] for r in o.log()['requests'])
    assert sent <= N_FILES * 512 * KIB, f'{sent} bytes from the origin for {N_FILES} x 4 KiB'


@pytest.mark.parametrize('what,text,words', [
    ('long path', lambda: 'a/' * 2100 + 'x.bin', 'longer than 4096 bytes'),
    ('deep path', lambda: 'd/' * 64 + 'x.bin', 'more than 64 components'),
])
def test_paths_past_the_caps_are_refused(seamfs_cli, tmp_path, what, text, words):
    cat = tmp_path / 'c.json'
    cat.write_text(json.dumps({'assets': [{'id': 'x', 'path': text(), 'size': 1,
                                           'sources': [{'url': 'http://127.0.0.1:9/x'}]}]}))
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={tmp_path / "s"}', cat, mnt], timeout=20,
                       mountpoints=[mnt])
    assert r.returncode != 0 and words in r.stderr and 'assets[0].path' in r.stderr, r.stderr


def test_size_past_2_62_is_refused(seamfs_cli, tmp_path):
    cat = tmp_path / 'c.json'
    cat.write_text(json.dumps({'assets': [{'id': 'x', 'path': 'x.bin', 'size': 2 ** 63 - 5,
                                           'sources': [{'url': 'http://127.0.0.1:9/x'}]}]}))
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={tmp_path / "s"}', cat, mnt], timeout=20,
                       mountpoints=[mnt])
    assert r.returncode != 0 and 'assets[0].size' in r.stderr, r.stderr
