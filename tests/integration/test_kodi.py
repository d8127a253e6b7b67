"""docs/kodi.md's library scanned by Kodi itself (issue 33): movies in
folders of their own, each with its movie.nfo, poster.jpg and a subtitle,
served by nginx autoindex on loopback, catalogued by `seamfs catalog` and
mounted; then Kodi 20, under Xvfb (Debian's Kodi has no windowless mode),
set up as the guide's "Without the GUI" section says (sources.xml, the
video database's `path` row written while Kodi is stopped, JSON-RPC) and
driven over its JSON-RPC TCP server on a loopback port: a scan adds every
movie with its NFO's title and year, an update of the unchanged library
reads no byte from the origin, and every file reads back through the mount
with its SHA-256. The scan's cost (origin requests and bytes, the cache's
fills) is printed, not asserted: it is Kodi's to choose."""
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import (KIB, Nginx, bounded, free_port, make_clip, nginx_conf, sha256_file,
                      stop_process, tail, wait_until)

KODI = Path('/usr/lib/x86_64-linux-gnu/kodi/kodi.bin')
XVFB = shutil.which('Xvfb')
START_WAIT = 180     # Kodi's start on a loaded 2-core machine, llvmpipe GL
SCAN_WAIT = 300

pytestmark = pytest.mark.skipif(
    not KODI.exists() or XVFB is None,
    reason='needs Kodi and Xvfb (contrib/setup-debian.sh installs both: kodi xvfb)')

# folder: (file name, NFO title, year, whether it has a poster); the NFO
# titles differ from the folder names, so a movie named from its path fails
# the test; a movie without a poster gets a thumbnail Kodi extracts from it
MOVIES = {
    'Heat (1995)': ('Heat (1995).mkv', 'The NFO Heat', 1995, True),
    'Alien (1979)': ('Alien (1979).mp4', 'The NFO Alien', 1979, True),
    'Ronin (1998)': ('Ronin (1998).mkv', 'The NFO Ronin', 1998, True),
    'Drive (2011)': ('Drive (2011).mkv', 'The NFO Drive', 2011, False),
}

AUTOINDEX = nginx_conf('        listen 127.0.0.1:{port};\n'
                       '        root {root};\n'
                       '        autoindex on;\n')


def make_library(lib, log):
    for folder, (name, title, year, poster) in MOVIES.items():
        d = lib / 'Movies' / folder
        d.mkdir(parents=True)
        make_clip(d / name, 10, '1280x720', log)
        (d / 'movie.nfo').write_text(
            f'<?xml version="1.0" encoding="UTF-8"?>\n<movie>\n  <title>{title}</title>\n'
            f'  <year>{year}</year>\n  <plot>A test clip.</plot>\n</movie>\n')
        if poster:
            (d / 'poster.jpg').write_bytes(os.urandom(30 * KIB))
        (d / (Path(name).stem + '.en.srt')).write_text(
            '1\n00:00:01,000 --> 00:00:02,000\nhello\n\n')


def kodi_userdata(home, mnt, rpc_port, es_port):
    """Kodi's user data as the guide writes it: sources.xml with the mount's
    Movies folder, and settings that turn on the JSON-RPC TCP server on a
    loopback port (advancedsettings.xml's jsonrpc/tcpport; "remote control
    from applications on this system" only), the rest of the network off
    (WS-Discovery would listen on UDP 3702 of every interface)."""
    ud = home / '.kodi' / 'userdata'
    ud.mkdir(parents=True)
    (ud / 'sources.xml').write_text(
        '<sources>\n  <video>\n    <default pathversion="1"></default>\n'
        '    <source>\n      <name>Movies</name>\n'
        f'      <path pathversion="1">{mnt}/Movies/</path>\n'
        '      <allowsharing>true</allowsharing>\n    </source>\n  </video>\n</sources>\n')
    (ud / 'advancedsettings.xml').write_text(
        '<advancedsettings version="1.0">\n'
        f'  <jsonrpc><tcpport>{rpc_port}</tcpport></jsonrpc>\n'
        '</advancedsettings>\n')
    settings = {
        'services.esenabled': 'true', 'services.esallinterfaces': 'false',
        'services.esport': str(es_port), 'services.webserver': 'false',
        'services.zeroconf': 'false', 'services.upnp': 'false',
        'services.airplay': 'false', 'services.wsdiscovery': 'false',
        'general.addonupdates': '2',
    }
    (ud / 'guisettings.xml').write_text(
        '<settings version="2">\n' + ''.join(
            f'  <setting id="{k}">{v}</setting>\n' for k, v in settings.items())
        + '</settings>\n')
    return ud


class Rpc:
    """One JSON-RPC TCP connection to Kodi: calls, and the notifications
    Kodi sends on it (one JSON object after another, no delimiter)."""

    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port), timeout=5)
        self.buf = ''
        self.n = 0
        self.notes = []

    def close(self):
        self.sock.close()

    def _next(self, deadline):
        dec = json.JSONDecoder()
        while True:
            s = self.buf.lstrip()
            if s:
                try:
                    obj, end = dec.raw_decode(s)
                    self.buf = s[end:]
                    return obj
                except ValueError:
                    pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError('no answer from Kodi')
            self.sock.settimeout(min(left, 5))
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not b:
                raise ConnectionError('Kodi closed the JSON-RPC connection')
            self.buf += b.decode()

    def call(self, method, params=None, timeout=60):
        self.n += 1
        req = {'jsonrpc': '2.0', 'id': self.n, 'method': method}
        if params is not None:
            req['params'] = params
        self.sock.sendall(json.dumps(req).encode())
        deadline = time.monotonic() + timeout
        while True:
            obj = self._next(deadline)
            if obj.get('id') == self.n:
                assert 'error' not in obj, (method, obj)
                return obj['result']
            self.notes.append(obj)

    def wait_note(self, method, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for i, o in enumerate(self.notes):
                if o.get('method') == method:
                    return self.notes.pop(i)
            self.notes.append(self._next(deadline))


class Kodi:
    """Xvfb and Kodi, each in a process group of its own, stopped by that
    group's id only."""

    def __init__(self, home, rpc_port):
        self.home = home
        self.rpc_port = rpc_port
        self.xvfb = None
        self.proc = None
        self.runs = 0

    @property
    def log(self):
        p = self.home / '.kodi' / 'temp' / 'kodi.log'
        return tail(p.read_text(errors='replace'), 60) if p.exists() else '(no kodi.log)'

    def start_display(self):
        r, w = os.pipe()
        self.xvfb = subprocess.Popen(
            [XVFB, '-displayfd', str(w), '-nolisten', 'tcp', '-screen', '0', '640x480x24'],
            pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.home / 'xvfb.log', 'wb'), start_new_session=True)
        os.close(w)
        self.displayfd = r      # open while Xvfb runs: it may write again

        def number():
            out = b''
            while not out.endswith(b'\n'):
                b = os.read(r, 64)
                if not b:
                    break
                out += b
            return out
        out = bounded(number, 60, 'Xvfb display number')
        assert out.strip().isdigit(), (self.home / 'xvfb.log').read_text(errors='replace')
        self.display = ':' + out.decode().strip()

    def start(self):
        self.runs += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith(('DISPLAY', 'WAYLAND'))}
        env.update(HOME=str(self.home), DISPLAY=self.display)
        self.proc = subprocess.Popen(
            [str(KODI), '--windowing=x11'], env=env, cwd=self.home,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.home / f'kodi-{self.runs}.stderr', 'wb'), start_new_session=True)

        def up():
            if self.proc.poll() is not None:
                pytest.fail(f'Kodi exited ({self.proc.returncode}) at start:\n{self.log}')
            try:
                rpc = Rpc(self.rpc_port)
            except OSError:
                return None
            try:
                if rpc.call('JSONRPC.Ping', timeout=30) == 'pong':
                    return rpc
            except (OSError, TimeoutError, ConnectionError):
                pass
            rpc.close()
            return None
        return wait_until(up, START_WAIT, "Kodi's JSON-RPC server", interval=1)

    def stop(self, rpc=None):
        """Application.Quit when a connection is given, then the group."""
        if self.proc is None:
            return
        if rpc is not None and self.proc.poll() is None:
            try:
                rpc.call('Application.Quit', timeout=30)
            except (OSError, TimeoutError, ConnectionError, AssertionError):
                pass
            rpc.close()
        stop_process(self.proc, sig=None if rpc else 15, timeout=60, group=True)
        self.proc = None

    def close(self):
        self.stop()
        if self.xvfb is not None:
            stop_process(self.xvfb, timeout=10, group=True)
            self.xvfb = None
            os.close(self.displayfd)


def origin_reads(server, since):
    """Requests and body bytes of nginx's access log from line `since` on,
    and per path the reads of more than one byte (a 1-byte GET is a size
    check or a liveness probe, not a read)."""
    lines = server.access_log().splitlines()
    reads, nbytes = {}, 0
    for line in lines[since:]:
        path = urllib.parse.unquote(line.split('"')[1].split()[1]).lstrip('/')
        n = int(line.split('"')[2].split()[1])
        nbytes += n
        if n > 1:
            reads.setdefault(path, []).append(n)
    return len(lines) - since, nbytes, reads, len(lines)


def wait_quiet(server, quiet=10, timeout=120):
    """Kodi may read on after its scan's notification (a window's loader
    of thumbnails and stream details): waits until the origin has logged
    no request for `quiet` seconds."""
    last = [len(server.access_log().splitlines()), time.monotonic()]

    def settled():
        n = len(server.access_log().splitlines())
        if n != last[0]:
            last[:] = [n, time.monotonic()]
        return time.monotonic() - last[1] >= quiet
    wait_until(settled, timeout, 'the origin quiet after the scan', interval=0.5)


def counters(m):
    st = m.status()
    return (sum(p['counters']['good_answers'] for p in st['providers']),
            st['reads']['head_tail_cache_fills'])


# pytest.ini's 120 s cannot hold two starts of Kodi and a scan on a loaded
# machine (about 60 s unloaded): each wait has its own bound, this is over
# their likely sum
@pytest.mark.timeout(900)
def test_kodi_scans_the_guides_library(seamfs, seamfs_cli, tmp_path):
    lib = tmp_path / 'lib'
    make_library(lib, tmp_path / 'ffmpeg.log')
    server = Nginx(lib, tmp_path / 'nginx', conf=AUTOINDEX).start()
    home = tmp_path / 'kodi-home'
    home.mkdir()
    kodi = Kodi(home, free_port())
    rpc = None
    try:
        out = tmp_path / 'kodi.json'
        r = seamfs_cli.run(['catalog', server.base_url + '/', '-o', out], timeout=60)
        assert r.returncode == 0, r.stderr
        cat = json.loads(out.read_text())
        paths = sorted(a['path'] for a in cat['assets'])
        # movie, NFO, poster (if any), subtitle
        assert len(paths) == sum(4 if v[3] else 3 for v in MOVIES.values()), paths
        m = seamfs.mount(out)
        kodi_userdata(home, m.mnt, kodi.rpc_port, free_port())
        kodi.start_display()

        # 1. a first start makes the video database; Kodi stops
        rpc = kodi.start()
        kodi.stop(rpc)
        rpc = None
        dbs = sorted((home / '.kodi' / 'userdata' / 'Database').glob('MyVideos*.db'),
                     key=lambda p: int(p.stem[len('MyVideos'):]))
        assert dbs, kodi.log
        # 3. content and scraper: the path row, strPath as in sources.xml
        with sqlite3.connect(dbs[-1]) as db:
            db.execute('INSERT INTO path (strPath, strContent, strScraper, scanRecursive, '
                       'useFolderNames, noUpdate, exclude) VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (f'{m.mnt}/Movies/', 'movies', 'metadata.local', 2147483647, 1, 0, 0))
        db.close()

        # 4. Kodi again, a scan of the source
        rpc = kodi.start()
        # away from the home screen, whose "recently added" widgets would
        # read the new movies' files when a scan ends (a GUI's, not a scan's)
        rpc.call('GUI.ActivateWindow', {'window': 'systeminfo'})
        since = len(server.access_log().splitlines())
        before = counters(m)
        t0 = time.monotonic()
        rpc.call('VideoLibrary.Scan', {'directory': f'{m.mnt}/Movies/', 'showdialogs': False})
        try:
            rpc.wait_note('VideoLibrary.OnScanFinished', SCAN_WAIT)
        except TimeoutError:
            pytest.fail(f'no VideoLibrary.OnScanFinished within {SCAN_WAIT} s:\n{kodi.log}')
        scan_s = time.monotonic() - t0

        got = rpc.call('VideoLibrary.GetMovies', {'properties': ['title', 'year', 'file']})
        movies = {Path(mv['file']).relative_to(m.mnt).as_posix(): (mv['title'], mv['year'])
                  for mv in got.get('movies', [])}
        want = {f'Movies/{folder}/{name}': (title, year)
                for folder, (name, title, year, _) in MOVIES.items()}
        assert movies == want, f'{movies}\n{kodi.log}'

        def details():
            got = rpc.call('VideoLibrary.GetMovies', {'properties': ['streamdetails']})
            return all(mv['streamdetails']['video'] for mv in got['movies'])
        # "Extract video information": the streams Kodi read from each file
        wait_until(details, SCAN_WAIT, 'the stream details of every movie', interval=1)
        wait_quiet(server)
        reqs, nbytes, reads, since = origin_reads(server, since)
        answers, fills = (a - b for a, b in zip(counters(m), before))
        print(f'\nkodi scan of {len(MOVIES)} movies ({len(paths)} files): {reqs} origin '
              f'requests, {nbytes} bytes ({answers} good answers, {fills} cache fills), '
              f'{scan_s:.1f} s')
        for p in paths:
            print(f'  {p}: {reads.get(p, [])}')

        # an update of the unchanged library: no read from the origin
        before = counters(m)
        rpc.call('VideoLibrary.Scan', {'directory': f'{m.mnt}/Movies/', 'showdialogs': False})
        try:
            rpc.wait_note('VideoLibrary.OnScanFinished', SCAN_WAIT)
        except TimeoutError:
            pytest.fail(f'update: no VideoLibrary.OnScanFinished within {SCAN_WAIT} s')
        wait_quiet(server)
        reqs, nbytes, reads, since = origin_reads(server, since)
        answers, fills = (a - b for a, b in zip(counters(m), before))
        print(f'kodi update, library unchanged: {reqs} origin requests, {nbytes} bytes '
              f'({answers} good answers, {fills} cache fills)')
        assert reads == {}, reads
        got = rpc.call('VideoLibrary.GetMovies', {'properties': ['title', 'year', 'file']})
        assert len(got.get('movies', [])) == len(MOVIES), got

        # thumbnails: the movies' list, shown, has Kodi extract a frame of
        # each movie without artwork ("Extract thumbnails from video
        # files", on by default) into its texture cache
        plain = [f'Movies/{folder}/{v[0]}' for folder, v in MOVIES.items() if not v[3]]
        rpc.call('GUI.ActivateWindow', {'window': 'videos',
                                        'parameters': ['videodb://movies/titles/']})

        def extracted():
            got = rpc.call('VideoLibrary.GetMovies', {'properties': ['art', 'file']})
            urls = [mv['art'].get('thumb', '') for mv in got['movies']
                    if Path(mv['file']).relative_to(m.mnt).as_posix() in plain]
            if not all(u.startswith('image://video@') for u in urls):
                return False
            tex = rpc.call('Textures.GetTextures', {
                'properties': ['url', 'cachedurl'],
                'filter': {'or': [{'field': 'url', 'operator': 'is', 'value': u} for u in urls]}})
            return len(tex.get('textures', [])) == len(urls)
        wait_until(extracted, SCAN_WAIT, "Kodi's thumbnails extracted", interval=1)
        wait_quiet(server)
        reqs, nbytes, reads, since = origin_reads(server, since)
        print(f'kodi thumbnails of {len(plain)} movie(s) without a poster: {reqs} origin '
              f'requests, {nbytes} bytes')
        for p, r in reads.items():
            print(f'  {p}: {r}')
        kodi.stop(rpc)
        rpc = None

        # every file's bytes through the mount are the served file's
        for p in paths:
            assert bounded(lambda p=p: sha256_file(m.path(p)), 60, p) == \
                sha256_file(lib / p), p
    finally:
        try:
            kodi.stop(rpc)
            kodi.close()
        finally:
            server.stop()
