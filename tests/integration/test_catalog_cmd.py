"""`seamfs catalog MIRROR...`: a catalog from mirrors of one library.

A small library of random files in nested folders (names with spaces, '#',
'&', '%', '+' and non-ASCII letters, a hidden folder, a non-media file) is
served by nginx's autoindex, lighttpd's mod_dirlisting and `rclone serve
http`, each on a free 127.0.0.1 port and stopped by its PID, and given as a
local folder. The catalog made from them lists every media file and every
sidecar file a media server reads (NFO, poster, subtitles) once, with
one source per mirror, the right size and ids equal to the relative path;
seamfs mounts it and every file reads back with the original's SHA-256, and
`seamfs verify` finds every source of every asset identical. Two mirrors of
which one lacks a file and holds another at a different size: the size
mismatch is reported (file, both mirrors, both sizes) and that copy is not
a source; the missing file has one source. --merge keeps ids (and the other
fields of an asset) stable and adds new files; --provider and
--max-connections name providers and their limits. A listing of no known
server (Python's http.server) whose server refuses HEAD gets its sizes from
one-byte range GETs, and its dates from their Last-Modified. A movie, its
NFO, a poster and a subtitle on nginx: four assets dated as the listing
dates them (to the minute), the same in two runs written to different
files, and two mounts of those (each with its own state directory) show
those dates and the files' bytes; rclone's listing and a folder give the
dates to the second, --merge keeps a date it has. A listing date that is
none (31 February, a clock of 25 hours) is skipped with a line naming the
file and the date. Bad input (an
unreachable mirror, a page that is not a listing, a bad option, a bad
--merge catalog) exits non-zero with one clear line, within a bound, and
writes nothing.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (Nginx, SERVER_WAIT, can_connect, free_port, nginx_conf, sha256_file,
                      stop_process)

KIB = 1024

# relative path -> size; the media and sidecar files a default catalog lists
MEDIA = {
    'Movies/Heat (1995)/Heat (1995).mkv': 300 * KIB + 7,
    'Movies/Heat (1995)/movie.nfo': 321,
    'Movies/Heat (1995)/poster.jpg': 2000,
    'Movies/Heat (1995)/Heat (1995).en.srt': 1500,
    'Shows/Show Ü/Season 01/S01E01 – Pilot.ass': 800,
    'Movies/Amélie (2001)/Amélie & co #1.mp4': 180 * KIB,
    'Shows/Show Ü/Season 01/S01E01 – Pilot.mkv': 96 * KIB + 1,
    'Shows/Show Ü/Season 01/S01E02.webm': 64 * KIB,
    'Misc/100% real+plus.ts': 12 * KIB + 3,
    'Misc/café/日本語 ファイル.m4v': 40 * KIB,
    'top level.avi': 1,
    'empty.mov': 0,
}
# present, but not in a default catalog
OTHER = {
    'Shows/Show Ü/Season 01/notes.txt': 100,
    '.hidden/secret.mkv': 1000,
    'Movies/Heat (1995)/Heat.iso': 3000,
}

NGINX_AUTOINDEX = nginx_conf('        listen 127.0.0.1:{port};\n'
                             '        root {root};\n'
                             '        autoindex on;\n')

LIGHTTPD_CONF = """\
server.document-root = "{root}"
server.bind = "127.0.0.1"
server.port = {port}
server.modules = ("mod_dirlisting")
dir-listing.activate = "enable"
server.errorlog = "{dir}/error.log"
server.upload-dirs = ("{dir}")
"""

RUN_WAIT = 60   # one `seamfs catalog` run against loopback servers


def make_library(root, files):
    root = Path(root)
    for rel, size in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(size))
    return root


class Server:
    """A server process on a free 127.0.0.1 port, stopped by its PID."""

    name = 'server'

    def __init__(self, root, workdir):
        self.root = Path(root)
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = None
        self.port = None

    @property
    def root_url(self):
        return f'http://127.0.0.1:{self.port}/'

    def argv(self):
        raise NotImplementedError

    def log(self):
        p = self.dir / 'stdout.log'
        return p.read_text(errors='replace') if p.exists() else ''

    def start(self):
        for _attempt in range(5):
            self.port = free_port()
            argv = self.argv()
            with open(self.dir / 'stdout.log', 'wb') as out:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + SERVER_WAIT
            while time.monotonic() < deadline and self.proc.poll() is None:
                if can_connect(self.port):
                    return self
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop()
                pytest.fail(f'{self.name} did not accept connections within {SERVER_WAIT} s:\n'
                            f'{self.log()}')
            self.proc = None   # exited: most likely lost the port race
        pytest.fail(f'{self.name}: could not start on a free port:\n{self.log()}')

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc, signal.SIGTERM, 10, group=True)
            self.proc = None


class Lighttpd(Server):
    name = 'lighttpd'

    def argv(self):
        conf = self.dir / 'lighttpd.conf'
        conf.write_text(LIGHTTPD_CONF.format(root=self.root, port=self.port, dir=self.dir))
        return ['lighttpd', '-D', '-f', str(conf)]


class Rclone(Server):
    name = 'rclone'

    def argv(self):
        return ['rclone', 'serve', 'http', str(self.root), '--addr', f'127.0.0.1:{self.port}',
                '--config', str(self.dir / 'rclone.conf')]


@pytest.fixture
def servers(tmp_path):
    """start(kind, root) -> a started server (nginx, lighttpd or rclone)
    serving root at .root_url; all are stopped at the end of the test."""
    started = []

    def start(kind, root):
        wd = tmp_path / f'{kind}{len(started) + 1}'
        if kind == 'nginx':
            s = Nginx(root, wd, conf=NGINX_AUTOINDEX)
            started.append(s)
            s.start()
            s.root_url = s.base_url + '/'
            return s
        s = {'lighttpd': Lighttpd, 'rclone': Rclone}[kind](root, wd)
        started.append(s)
        return s.start()
    try:
        yield start
    finally:
        for s in started:
            s.stop()


@pytest.fixture
def library(tmp_path):
    return make_library(tmp_path / 'library', {**MEDIA, **OTHER})


def run_catalog(cli, *args, timeout=RUN_WAIT):
    """Runs `seamfs catalog ARGS`; the test fails if it has not exited
    within timeout (every request of it is bounded)."""
    return cli.run(['catalog', *[str(a) for a in args]], timeout=timeout)


def ok_catalog(cli, *args):
    r = run_catalog(cli, *args)
    assert r.returncode == 0, f'exit {r.returncode}\nstderr:\n{r.stderr}'
    return r


def by_path(cat):
    return {a['path']: a for a in cat['assets']}


def read_all(mount, expected, originals):
    """Reads every expected file through the mount; SHA-256 against originals."""
    for rel in expected:
        got = sha256_file(mount.path(rel))
        assert got == sha256_file(originals / rel), rel


def test_servers_and_folder(servers, library, seamfs, seamfs_cli, tmp_path):
    ng = servers('nginx', library)
    lt = servers('lighttpd', library)
    rc = servers('rclone', library)
    out = tmp_path / 'catalog.json'
    r = ok_catalog(seamfs_cli, ng.root_url, lt.root_url, rc.root_url, library, '-o', out)
    cat = json.loads(out.read_text())
    assets = by_path(cat)
    assert set(assets) == set(MEDIA), r.stderr
    mirrors = [ng.root_url, lt.root_url, rc.root_url]
    for rel, size in MEDIA.items():
        a = assets[rel]
        assert a['id'] == rel
        assert a['size'] == size
        srcs = a['sources']
        assert len(srcs) == 4, (rel, srcs)
        for s, m in zip(srcs[:3], mirrors):
            assert s['url'].startswith(m)
            assert s['provider'] == f'127.0.0.1:{m.split(":")[2].rstrip("/")}'
        assert srcs[3] == {'path': str(library.resolve() / rel), 'provider': 'local'}
    names = [p['name'] for p in cat['providers']]
    assert sorted(names) == sorted([f'127.0.0.1:{s.port}' for s in (ng, lt, rc)] + ['local'])
    # nginx gives exact sizes: no HEAD went to it; lighttpd's are rounded
    assert 'HEAD ' not in ng.access_log()
    assert 'size mismatch:' not in r.stderr

    # every source of every asset holds the same bytes
    v = seamfs_cli.run(['verify', '--state-dir', tmp_path / 'vstate', out], timeout=RUN_WAIT)
    assert v.returncode == 0, v.stdout + v.stderr

    # and the mount reads each file back as it is
    m = seamfs.mount(out)
    listed = {str(p.relative_to(m.mnt)) for p in m.mnt.rglob('*')
              if p.is_file() and '.seamfs' not in p.parts}
    assert listed == set(MEDIA)
    read_all(m, MEDIA, library)

    # stdout, the same catalog
    r2 = ok_catalog(seamfs_cli, ng.root_url, lt.root_url, rc.root_url, library)
    assert json.loads(r2.stdout) == cat


def test_mismatch_and_missing(servers, library, seamfs, seamfs_cli, tmp_path):
    lib_b = tmp_path / 'library-b'
    shutil.copytree(library, lib_b)
    gone = 'Shows/Show Ü/Season 01/S01E02.webm'
    grown = 'Movies/Heat (1995)/Heat (1995).mkv'
    (lib_b / gone).unlink()
    with open(lib_b / grown, 'ab') as f:
        f.write(b'extra')
    a = servers('nginx', library)
    b = servers('rclone', lib_b)
    out = tmp_path / 'catalog.json'
    r = ok_catalog(seamfs_cli, a.root_url, b.root_url, '-o', out)
    cat = by_path(json.loads(out.read_text()))
    assert set(cat) == set(MEDIA)
    # the mismatch: named with the file, both mirrors and both sizes
    lines = [l for l in r.stderr.splitlines() if 'size mismatch:' in l]
    assert len(lines) == 1, r.stderr
    line = lines[0]
    size = MEDIA[grown]
    for want in (grown, a.root_url, b.root_url, f'{size + 5} bytes', f'{size} bytes'):
        assert want in line, (want, line)
    assert [s['url'][:len(a.root_url)] for s in cat[grown]['sources']] == [a.root_url]
    assert cat[grown]['size'] == size
    # the file mirror b lacks: one source
    assert len(cat[gone]['sources']) == 1 and cat[gone]['sources'][0]['url'].startswith(a.root_url)
    for rel in set(MEDIA) - {gone, grown}:
        assert len(cat[rel]['sources']) == 2, rel

    m = seamfs.mount(out)
    read_all(m, MEDIA, library)

    # with the two mirrors swapped, the earlier one wins the tie: b's size
    r = ok_catalog(seamfs_cli, b.root_url, a.root_url, '-o', out)
    cat = by_path(json.loads(out.read_text()))
    assert cat[grown]['size'] == size + 5
    assert [s['url'][:len(b.root_url)] for s in cat[grown]['sources']] == [b.root_url]
    # a third mirror that agrees with a: the majority wins
    c = servers('lighttpd', library)
    r = ok_catalog(seamfs_cli, b.root_url, a.root_url, c.root_url, '-o', out)
    cat = by_path(json.loads(out.read_text()))
    assert cat[grown]['size'] == size
    assert len(cat[grown]['sources']) == 2
    assert sum('size mismatch:' in l for l in r.stderr.splitlines()) == 1


def test_merge_keeps_ids(servers, library, seamfs, seamfs_cli, tmp_path):
    ng = servers('nginx', library)
    out = tmp_path / 'catalog.json'
    ok_catalog(seamfs_cli, ng.root_url, library, '-o', out)
    cat = json.loads(out.read_text())
    heat = 'Movies/Heat (1995)/Heat (1995).mkv'
    # the user names an asset and adds fields, a provider setting, a transcode
    for a in cat['assets']:
        if a['path'] == heat:
            a['id'] = 'heat-1995'
            a['mtime'] = 817776000
            a['sources'].append({'url': 'http://127.0.0.1:9/elsewhere/heat.mkv'})
    cat['assets'].append({'id': 'heat-1995-360p', 'path': 'Movies/Heat (1995)/Heat 360p.ts',
                          'transcode': {'of': 'heat-1995', 'height': 360}})
    cat['settings'] = {'read_timeout': 20}
    out.write_text(json.dumps(cat, indent=2, ensure_ascii=False))
    ids_before = [a['id'] for a in cat['assets']]

    # a new file on both mirrors, one gone from the folder
    new = 'Movies/Alien (1979)/Alien.mkv'
    (library / new).parent.mkdir(parents=True)
    (library / new).write_bytes(os.urandom(5000))
    r = ok_catalog(seamfs_cli, '--merge', out, ng.root_url, library, '-o', out)
    merged = json.loads(out.read_text())
    assert [a['id'] for a in merged['assets']][:len(ids_before)] == ids_before
    assets = by_path(merged)
    assert assets[new]['id'] == new and len(assets[new]['sources']) == 2
    h = assets[heat]
    assert h['id'] == 'heat-1995' and h['mtime'] == 817776000
    # its source on no walked mirror is kept, those on the mirrors are there
    assert [s.get('url', s.get('path'))[:22] for s in h['sources']][-1] == \
        'http://127.0.0.1:9/els'
    assert len(h['sources']) == 3
    assert assets['Movies/Heat (1995)/Heat 360p.ts']['transcode'] == {'of': 'heat-1995',
                                                                      'height': 360}
    assert merged['settings'] == {'read_timeout': 20}
    assert '1 new' in r.stderr

    # a rerun changes nothing
    before = out.read_text()
    ok_catalog(seamfs_cli, '--merge', out, ng.root_url, library, '-o', out)
    assert out.read_text() == before

    # providers and limits
    r = ok_catalog(seamfs_cli, '--provider', f'fast={ng.root_url}', '--max-connections', 'fast=2',
                   '--max-connections', '3', ng.root_url, library, '-o', out)
    cat = json.loads(out.read_text())
    provs = {p['name']: p for p in cat['providers']}
    assert provs['fast'] == {'name': 'fast', 'max_connections': 2}
    assert provs['local'] == {'name': 'local', 'max_connections': 3}
    for a in cat['assets']:
        assert [s['provider'] for s in a['sources']] == ['fast', 'local']

    m = seamfs.mount(out)
    read_all(m, {**MEDIA, new: 0}, library)


def test_filters(library, seamfs_cli, tmp_path):
    r = ok_catalog(seamfs_cli, library, '--all')
    paths = set(by_path(json.loads(r.stdout)))
    assert paths == set(MEDIA) | {'Shows/Show Ü/Season 01/notes.txt',
                                  'Movies/Heat (1995)/Heat.iso'}   # no hidden folder
    r = ok_catalog(seamfs_cli, library, '--ext', 'txt,JPG')
    assert set(by_path(json.loads(r.stdout))) == {'Shows/Show Ü/Season 01/notes.txt',
                                                  'Movies/Heat (1995)/poster.jpg'}
    r = ok_catalog(seamfs_cli, library, '--ext', '+txt')
    assert set(by_path(json.loads(r.stdout))) == set(MEDIA) | {'Shows/Show Ü/Season 01/notes.txt'}
    # --ext narrows: media only, no sidecar
    r = ok_catalog(seamfs_cli, library, '--ext', 'mkv,mp4,webm,ts,m4v,avi,mov')
    assert set(by_path(json.loads(r.stdout))) == {p for p in MEDIA if not p.endswith(
        ('.nfo', '.jpg', '.srt', '.ass'))}
    r = run_catalog(seamfs_cli, library, '--max-depth', '1')
    assert r.returncode == 1 and 'deeper than 1 levels' in r.stderr and not r.stdout
    r = run_catalog(seamfs_cli, library, '--max-files', '3')
    assert r.returncode == 1 and 'more than 3 files' in r.stderr and not r.stdout


def test_bad_input(servers, library, seamfs_cli, tmp_path, dead_port):
    out = tmp_path / 'out.json'
    # an unreachable mirror beside a good one: a clear error, nothing written
    r = run_catalog(seamfs_cli, library, f'http://127.0.0.1:{dead_port}/media/', '-o', out,
                    timeout=30)
    assert r.returncode == 1, r.stderr
    assert f'http://127.0.0.1:{dead_port}/media/' in r.stderr
    assert 'connect' in r.stderr.lower()
    assert 'no catalog written' in r.stderr
    assert not out.exists()

    # a page that is not a listing (nginx serves the folder's index.html)
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'index.html').write_text('<!DOCTYPE html><html><head><title>Welcome</title>'
                                     '</head><body><a href="about.html">About</a></body></html>')
    ng = servers('nginx', site)
    r = run_catalog(seamfs_cli, ng.root_url, '-o', out)
    assert r.returncode == 1
    assert f'{ng.root_url}: not a directory listing' in r.stderr, r.stderr
    assert not out.exists()
    # a file's URL: binary data
    (site / 'movie.mkv').write_bytes(b'\0' * 100000)
    r = run_catalog(seamfs_cli, ng.root_url + 'movie.mkv')
    assert r.returncode == 1 and '404' in r.stderr, r.stderr

    # the command line
    for args, want in [(['--bogus', library], "unknown option '--bogus'"),
                       ([], 'missing MIRROR'),
                       (['--max-connections', 'x', library], '--max-connections x'),
                       (['--max-connections', 'nope=2', library], 'no provider named "nope"'),
                       (['--provider', f'p=http://127.0.0.1:{dead_port}/', library],
                        'no MIRROR lies under it'),
                       (['--timeout', '0', library], '--timeout 0'),
                       (['ftp://example/media/'], 'unsupported URL scheme'),
                       (['-o'], "missing value for option '-o'")]:
        r = run_catalog(seamfs_cli, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert want in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    r = run_catalog(seamfs_cli, tmp_path / 'no-such-folder')
    assert r.returncode == 1 and 'no-such-folder: No such file or directory' in r.stderr

    # a bad --merge catalog: its file, line, column and field
    bad = tmp_path / 'bad.json'
    bad.write_text('{"assets": [{"id": "a", "path": "a.mkv", "sources": [{"url": "ftp://x/a"}]}]}')
    r = run_catalog(seamfs_cli, '--merge', bad, library, '-o', out)
    assert r.returncode == 3 and 'bad.json:1:' in r.stderr and 'sources[0].url' in r.stderr
    assert not out.exists()

    # no media at all
    empty = tmp_path / 'empty'
    empty.mkdir()
    r = run_catalog(seamfs_cli, empty)
    assert r.returncode == 1 and 'no media or sidecar files found' in r.stderr

    # help
    r = run_catalog(seamfs_cli, '--help')
    assert r.returncode == 0 and r.stdout.startswith('usage: seamfs catalog')


def test_generic_listing_without_head(library, seamfs_cli):
    """Python's http.server: a "Directory listing for" page of no known
    server (no sizes in it), and here HEAD refused (405): each size comes
    from a one-byte range GET instead (answered 200 with the whole length,
    as this server ignores Range)."""
    import functools
    import http.server
    import threading

    class NoHead(http.server.SimpleHTTPRequestHandler):
        def do_HEAD(self):
            self.send_error(405)

        def log_message(self, *args):
            pass

    handler = functools.partial(NoHead, directory=str(library))
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    srv.handle_error = lambda *args: None   # we hang up once the head is in
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f'http://127.0.0.1:{srv.server_address[1]}/'
        r = ok_catalog(seamfs_cli, url)
        cat = by_path(json.loads(r.stdout))
        assert {p: a['size'] for p, a in cat.items()} == MEDIA
        # a HEAD and a range GET per file
        assert f'{2 * len(MEDIA)} size request(s)' in r.stderr
        # dates: the range GET's Last-Modified (the page has none)
        for rel, a in cat.items():
            assert a['mtime'] == int((library / rel).stat().st_mtime), rel
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)


# a movie with the sidecars Kodi and Jellyfin read beside it, and their dates
DATED = {
    'Movies/Heat (1995)/Heat (1995).mkv': (200 * KIB + 3, '2021-03-04T05:06:07+00:00'),
    'Movies/Heat (1995)/movie.nfo': (417, '2021-03-05T10:20:59+00:00'),
    'Movies/Heat (1995)/poster.jpg': (3000, '2020-11-12T13:14:15+00:00'),
    'Movies/Heat (1995)/Heat (1995).en.srt': (1234, '2019-01-31T23:59:30+00:00'),
}


def test_sidecars_and_dates(servers, seamfs, seamfs_cli, tmp_path):
    from datetime import datetime
    lib = tmp_path / 'dated'
    want = {}
    for rel, (size, when) in DATED.items():
        p = lib / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(size))
        t = int(datetime.fromisoformat(when).timestamp())
        os.utime(p, (t, t))
        want[rel] = t
    ng = servers('nginx', lib)
    cats = [tmp_path / 'one' / 'catalog.json', tmp_path / 'two' / 'lib.json']
    for out in cats:
        out.parent.mkdir()
        ok_catalog(seamfs_cli, ng.root_url, '-o', out)
    one, two = (by_path(json.loads(c.read_text())) for c in cats)
    assert set(one) == set(DATED)
    for rel, t in want.items():
        # nginx dates a row in UTC to the minute
        assert one[rel]['mtime'] == t - t % 60, (rel, one[rel])
        assert two[rel]['mtime'] == one[rel]['mtime'], rel
    # mounts of both, each with its own state directory: the same dates
    for k, out in enumerate(cats):
        sd = tmp_path / f'state{k}'
        sd.mkdir()
        m = seamfs.mount(out, state_dir=sd)
        for rel in DATED:
            st = os.stat(m.path(rel))
            assert st.st_mtime == one[rel]['mtime'], rel
            assert st.st_size == DATED[rel][0]
        read_all(m, DATED, lib)
        m.unmount()

    # rclone's listing and a folder: to the second; the first mirror's wins
    rc = servers('rclone', lib)
    r = ok_catalog(seamfs_cli, rc.root_url, lib)
    cat = by_path(json.loads(r.stdout))
    assert {rel: a['mtime'] for rel, a in cat.items()} == want
    r = ok_catalog(seamfs_cli, ng.root_url, lib)
    cat = by_path(json.loads(r.stdout))
    assert {rel: a['mtime'] for rel, a in cat.items()} == \
        {rel: t - t % 60 for rel, t in want.items()}

    # --merge keeps a date the catalog has, and dates an asset without one
    cat = json.loads(cats[0].read_text())
    nfo = 'Movies/Heat (1995)/movie.nfo'
    for a in cat['assets']:
        if a['path'] == nfo:
            a['mtime'] = 1000000000
        else:
            del a['mtime']
    cats[0].write_text(json.dumps(cat))
    ok_catalog(seamfs_cli, '--merge', cats[0], lib, '-o', cats[0])
    merged = by_path(json.loads(cats[0].read_text()))
    assert {rel: a['mtime'] for rel, a in merged.items()} == {**want, nfo: 1000000000}


def test_bad_listing_date(seamfs, seamfs_cli):
    """A listing (nginx's markup) dating one file "31-Feb-2026 06:15" and
    another with a clock of 25 hours: read strictly, those dates are
    skipped with a line naming the file and the date as written; the
    well-dated file keeps its date, and the page's exact sizes mean no
    request is made for the others' dates. The catalog mounts: the dated
    file shows its date, every file its bytes."""
    import http.server
    import re
    import threading

    files = {'good.mkv': os.urandom(12345), 'feb.mkv': os.urandom(1200),
             'clock.nfo': os.urandom(700)}
    page = ('<html>\r\n<head><title>Index of /</title></head>\r\n<body>\r\n'
            '<h1>Index of /</h1><hr><pre><a href="../">../</a>\r\n'
            '<a href="good.mkv">good.mkv</a>     01-Dec-2026 06:15      12345\r\n'
            '<a href="feb.mkv">feb.mkv</a>       31-Feb-2026 06:15      1200\r\n'
            '<a href="clock.nfo">clock.nfo</a>   01-Dec-2026 25:15      700\r\n'
            '</pre><hr></body>\r\n</html>\r\n').encode()
    asked = []

    class Listing(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def answer(self, code, body, extra=()):
            self.send_response(code)
            for k, v in extra:
                self.send_header(k, v)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            asked.append(('GET', self.path))
            if self.path == '/':
                self.answer(200, page, [('Content-Type', 'text/html')])
                return
            data = files.get(self.path[1:])
            if data is None:
                self.answer(404, b'')
                return
            m = re.fullmatch(r'bytes=(\d+)-(\d*)', self.headers.get('Range', ''))
            if not m:
                self.answer(200, data)
                return
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            self.answer(206, data[a:b + 1],
                        [('Content-Range', f'bytes {a}-{b}/{len(data)}')])

        def do_HEAD(self):
            asked.append(('HEAD', self.path))
            self.answer(404, b'')

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Listing)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f'http://127.0.0.1:{srv.server_address[1]}/'
        out = seamfs_cli.dir / 'bad-dates.json'
        r = ok_catalog(seamfs_cli, url, '-o', out)
        cat = by_path(json.loads(out.read_text()))
        assert {p: a['size'] for p, a in cat.items()} == {p: len(d) for p, d in files.items()}
        assert cat['good.mkv']['mtime'] == 1796105700   # 2026-12-01 06:15 UTC
        assert 'mtime' not in cat['feb.mkv'] and 'mtime' not in cat['clock.nfo'], cat
        for name, date in (('feb.mkv', '31-Feb-2026 06:15'), ('clock.nfo', '01-Dec-2026 25:15')):
            line = f'seamfs catalog: {url}{name}: the listing dates it "{date}", which is ' \
                   'not a date and time; that date is skipped'
            assert line in r.stderr.splitlines(), r.stderr
        assert 'good.mkv' not in r.stderr, r.stderr
        assert asked == [('GET', '/')], asked
        m = seamfs.mount(out)
        try:
            assert os.stat(m.path('good.mkv')).st_mtime == 1796105700
            for name, data in files.items():
                assert sha256_file(m.path(name)) == hashlib.sha256(data).hexdigest(), name
        finally:
            m.unmount()
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)
