"""CATALOG as a directory of .strm files or as an M3U/M3U8 playlist
(docs/import.md): the mirrored tree is listed, every file reads back with
the origin file's SHA-256, and malformed input stops the daemon with exit 3
and one line naming the file and line."""

import json
import os
import re

import pytest

from conftest import Nginx, bounded, expected_tree, sha256_file, tree_of

# Media names served by a private nginx, each a symlink to a session data file.
MEDIA = {
    'heat.mkv': 'clip.mkv',
    'alien.mp4': 'odd.bin',
    'play-12345': 'mid.bin',      # no extension
    'ep2.webm': 'mib1.bin',
    'tiny.ts': 'one.bin',
    'empty.avi': 'empty.bin',
}


@pytest.fixture
def media(data, tmp_path):
    root = tmp_path / 'media'
    root.mkdir()
    for name, src in MEDIA.items():
        (root / name).symlink_to(data[src].path)
    n = Nginx(root, tmp_path / 'nginx-media')
    try:
        n.start()
        yield n
    finally:
        n.stop()


def mounted_tree(m):
    got = tree_of(m.path())
    return {k: v for k, v in got.items() if k != '.seamfs' and not k.startswith('.seamfs/')}


def check_reads(m, data, want):
    """want: {path in the mount: data file name}"""
    assert mounted_tree(m) == expected_tree(want)
    for rel, name in want.items():
        assert m.path(rel).stat().st_size == data[name].size, rel
        got = bounded(lambda: sha256_file(m.path(rel)), 60, rel)
        assert got == data[name].sha256, rel


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def test_strm_tree(seamfs, data, media, tmp_path):
    lib = tmp_path / 'library'
    # two lines, two sources; BOM, CRLF and comments tolerated
    write(lib / 'Movies' / 'Heat (1995)' / 'Heat (1995).strm',
          ('\ufeff# Heat\r\n' + media.url('heat.mkv') + '\r\n\r\n'
           + media.url('heat.mkv') + '?mirror=2\r\n').encode())
    # the first source is missing (404): the second line serves
    write(lib / 'Movies' / 'Alien (1979).strm',
          media.url('gone/alien.mp4') + '\n' + media.url('alien.mp4') + '\n')
    write(lib / 'Shows' / 'Show' / 'S01E01.strm', media.url('play-12345') + '\n')
    write(lib / 'Shows' / 'Show' / 'S01E02.strm', media.url('ep2.webm'))
    write(lib / 'Shows' / 'Show' / 'S01E03.strm', str(data['page.bin'].path) + '\n')
    write(lib / 'Shows' / 'Show' / 'folder.jpg', 'not media')
    write(lib / '.hidden' / 'x.strm', 'rtsp://ignored\n')
    (lib / 'Shows' / 'Show' / 'loop').symlink_to('..')

    # the local path of S01E03 is allowed by strm_paths (default: none)
    m = seamfs.mount(lib, options=[f'strm_paths={data.dir}'])
    check_reads(m, data, {
        'Movies/Heat (1995)/Heat (1995).mkv': 'clip.mkv',
        'Movies/Alien (1979).mp4': 'odd.bin',
        'Shows/Show/S01E01': 'mid.bin',
        'Shows/Show/S01E02.webm': 'mib1.bin',
        'Shows/Show/S01E03': 'page.bin',
    })
    assert '/gone/alien.mp4' in media.access_log()


def test_m3u_playlist(seamfs, data, media, tmp_path):
    pl = tmp_path / 'vod.m3u8'
    write(pl, '\n'.join([
        '#EXTM3U x-tvg-url="http://127.0.0.1:9/epg.xml"',
        '#EXTINF:-1 tvg-id="heat.1995" tvg-name="Heat" group-title="Movies",Heat (1995)',
        '#EXTVLCOPT:http-user-agent=Kodi',
        media.url('gone/heat.mkv'),
        '#EXTINF:-1 tvg-id="heat.1995" group-title="Movies HD",Heat (1995) HD',
        media.url('heat.mkv'),
        '#EXTINF:-1 group-title="Movies",Alien, the film',
        media.url('alien.mp4'),
        '#EXTINF:-1 group-title="Movies",Alien, the film',
        media.url('alien.mp4') + '?mirror=2',
        '#EXTINF:-1 tvg-id="live.1" group-title="Live",Camera',
        'rtsp://127.0.0.1:9/live',
        '#EXTINF:-1 group-title="Shows/Extras",Episode 1',
        media.url('play-12345'),
        '#EXTINF:-1 tvg-id="t1" group-title="Shows/Extras",Episode 1',
        media.url('tiny.ts'),
        '#EXTINF:-1,..Empty',
        media.url('empty.avi'),
        media.url('ep2.webm'),
        '',
    ]))
    m = seamfs.mount(pl)
    check_reads(m, data, {
        'Movies/Heat (1995).mkv': 'clip.mkv',
        'Movies/Alien, the film.mp4': 'odd.bin',
        'Shows-Extras/Episode 1.ts': 'mid.bin',
        'Shows-Extras/Episode 1 (2).ts': 'one.bin',
        'Empty.avi': 'empty.bin',
        'ep2.webm': 'mib1.bin',
    })
    assert '/gone/heat.mkv' in media.access_log()
    assert 'rtsp' in m.log() and 'skipped' in m.log()


LINE = re.compile(r'^seamfs: (?P<file>.+?):(?P<line>\d+): (?P<field>[^:]+): (?P<msg>.+)$')


def run_bad(seamfs_cli, catalog):
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={seamfs_cli.state_dir}', catalog, mnt],
                       mountpoints=[mnt])
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.split('\n') if ln.strip()]
    assert len(lines) == 1, f'want one stderr line, got {r.stderr!r}'
    return lines[0]


@pytest.mark.parametrize('text, line, field, words', [
    ('# one\n\nrtsp://127.0.0.1:9/live\n', 3, 'url', "unsupported scheme 'rtsp'"),
    ('http://127.0.0.1:9/a.mkv\nmedia/heat.mkv\n', 2, 'url', 'absolute path'),
    ('http://127.0.0.1:99999/a.mkv\n', 1, 'url', 'port'),
    ('http://127.0.0.1:9/a b.mkv\r\n', 1, 'url', 'space'),
], ids=['scheme', 'relative', 'port', 'space'])
def test_strm_malformed(seamfs_cli, tmp_path, text, line, field, words):
    lib = tmp_path / 'library'
    write(lib / 'Movies' / 'Good.strm', 'http://127.0.0.1:9/good.mkv\n')
    bad = lib / 'movies' / 'Heat.strm'
    write(bad, text)
    m = LINE.match(run_bad(seamfs_cli, lib))
    assert m, 'not "seamfs: FILE:LINE: FIELD: message"'
    assert m.group('file') == str(bad)
    assert int(m.group('line')) == line
    assert m.group('field') == field
    assert words in m.group('msg')


def test_strm_without_strm_files(seamfs_cli, tmp_path):
    lib = tmp_path / 'library'
    write(lib / 'notes.txt', 'nothing here\n')
    msg = run_bad(seamfs_cli, lib)
    assert msg.startswith(f'seamfs: {lib}: ') and 'no .strm files' in msg, msg


def test_strm_empty_file(seamfs_cli, tmp_path):
    lib = tmp_path / 'library'
    write(lib / 'a.strm', '# nothing\n')
    msg = run_bad(seamfs_cli, lib)
    assert msg.startswith(f'seamfs: {lib}/a.strm: ') and 'no URL' in msg, msg


@pytest.mark.parametrize('text, line, field, words', [
    ('#EXTM3U\n#EXTINF:-1,A\nhttp://127.0.0.1:9/a b.mkv\n', 3, 'url', 'space'),
    ('#EXTM3U\n#EXTINF:-1,A\nmovies/a.mkv\n', 3, 'url', 'absolute path'),
    ('#EXTM3U\n\n#EXTINF:-1 tvg-id="x,A\nhttp://127.0.0.1:9/a.mkv\n', 3, '#EXTINF',
     'unterminated quote'),
    ('#EXTINF:-1 tvg-id="x" A\nhttp://127.0.0.1:9/a.mkv\n', 1, '#EXTINF', "no ','"),
], ids=['space', 'relative', 'quote', 'comma'])
def test_m3u_malformed(seamfs_cli, tmp_path, text, line, field, words):
    pl = tmp_path / 'bad.M3U'
    write(pl, text)
    m = LINE.match(run_bad(seamfs_cli, pl))
    assert m, 'not "seamfs: FILE:LINE: FIELD: message"'
    assert m.group('file') == str(pl)
    assert int(m.group('line')) == line
    assert m.group('field') == field
    assert words in m.group('msg')


def test_m3u_without_entries(seamfs_cli, tmp_path):
    pl = tmp_path / 'live.m3u'
    write(pl, '#EXTM3U\n#EXTINF:-1,Camera\nrtsp://127.0.0.1:9/live\n')
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={seamfs_cli.state_dir}', pl, mnt],
                       mountpoints=[mnt])
    assert r.returncode == 3, (r.returncode, r.stderr)
    # the skipped entry is a warning, then the one error line
    assert f'{pl}:3: url: unsupported scheme' in r.stderr
    assert f'seamfs: {pl}: no usable entries' in r.stderr


def test_names_not_utf8_are_read_as_latin1(seamfs, data, media, tmp_path):
    """Playlists and file names in the wild are often Latin-1: such names
    are listed as UTF-8, the sizes are remembered, status stays JSON, and
    the bytes are the origin's (before, the mount failed 'out of memory')."""
    pl = tmp_path / 'latin1.m3u'
    write(pl, b'#EXTM3U\n'
              b'#EXTINF:-1 group-title="Cin\xe9ma",Caf\xe9 \xe0 Paris\n'
              + media.url('heat.mkv').encode() + b'\n'
              # the same title: a second source, its URL's own bytes kept
              b'#EXTINF:-1 group-title="Cin\xe9ma",Caf\xe9 \xe0 Paris\n'
              + media.url('heat.mkv').encode() + b'?copy=\xe9\n'
              b'#EXTINF:-1 group-title="Cin\xc3\xa9ma",D\xc3\xa9j\xc3\xa0 UTF-8\n'
              + media.url('alien.mp4').encode() + b'\n')
    m = seamfs.mount(pl)
    check_reads(m, data, {
        'Cinéma/Café à Paris.mkv': 'clip.mkv',
        'Cinéma/Déjà UTF-8.mp4': 'odd.bin',
    })
    assert f'{pl}:2: not UTF-8' in m.log()
    # status is JSON still; the URL that is not UTF-8 is shown scrubbed
    status = json.loads(m.path('.seamfs/status.json').read_bytes())
    assert status['providers'], status
    cafe = [a for a in status['assets'] if a['id'] == 'title:Café à Paris']
    assert len(cafe) == 1, status['assets']
    # (the query's value, the byte that is not UTF-8, is redacted as a secret)
    assert [s['source'][-9:] for s in cafe[0]['sources']] == ['/heat.mkv', '?copy=***']
    states = list(m.state_dir.glob('latin1.m3u-*.state.json'))
    assert len(states) == 1, states
    ids = json.loads(states[0].read_bytes())['assets']
    assert 'title:Café à Paris' in ids, ids
    m.unmount()

    lib = tmp_path / 'library'
    write(lib / os.fsdecode(b'Caf\xe9.strm'), media.url('tiny.ts') + '\n')
    write(lib / 'Plain.strm', media.url('play-12345') + '\n')
    m2 = seamfs.mount(lib)
    check_reads(m2, data, {'Café.ts': 'one.bin', 'Plain': 'mid.bin'})
    assert 'the file name is not UTF-8' in m2.log()


def test_strm_pointed_elsewhere_is_sized_again(seamfs, data, media, tmp_path):
    """A .strm rewritten to another file (a refreshed link, another
    release) is probed again at the next mount: the size remembered for the
    old source is not reused, and the new bytes read back whole."""
    lib = tmp_path / 'library'
    strm = lib / 'Movies' / 'Heat.strm'
    write(strm, media.url('heat.mkv') + '\n')
    m = seamfs.mount(lib)
    check_reads(m, data, {'Movies/Heat.mkv': 'clip.mkv'})
    m.unmount()

    # same name, same extension, another file of another size
    (tmp_path / 'media' / 'heat2.mkv').symlink_to(data['odd.bin'].path)
    assert data['odd.bin'].size != data['clip.mkv'].size
    write(strm, media.url('heat2.mkv') + '\n')
    m = seamfs.mount(lib)
    check_reads(m, data, {'Movies/Heat.mkv': 'odd.bin'})
    m.unmount()

    # back to the first: its size is found again too, and the state has one
    # record for the asset
    write(strm, media.url('heat.mkv') + '\n')
    m = seamfs.mount(lib)
    check_reads(m, data, {'Movies/Heat.mkv': 'clip.mkv'})
    states = list(m.state_dir.glob('library-*.state.json'))
    assert len(states) == 1, states
    assert list(json.loads(states[0].read_bytes())['assets']) == ['Movies/Heat.strm']
