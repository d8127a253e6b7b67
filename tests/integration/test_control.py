"""The control API and `seamfs ctl` through a real mount: the socket's mode,
status as tables and as JSON, the metrics (from the mount and from ctl)
through a strict exposition-format parser, drain and resume (new opens
avoid a drained provider while an open file reads on, bytes checked by
SHA-256), malformed requests answered with 4xx JSON errors while the
daemon goes on serving reads, and a mount that fails when its socket
cannot be made.  Every daemon, origin and socket directory is stopped or
removed by the fixtures, also on failure."""

import json
import os
import shutil
import socket
import stat
import tempfile

import pytest

from conftest import MIB, bounded, sha256_file
import promparse


@pytest.fixture
def sockdir():
    """A short private directory for the socket (sun_path holds 107 bytes;
    pytest's tmp_path can be longer)."""
    d = tempfile.mkdtemp(prefix='seamfs-ctl-', dir='/tmp')
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def origins(data, make_origin):
    return [make_origin(data.dir) for _ in range(2)]


def two_providers(data, origins, name='mid.bin'):
    return {'providers': [{'name': 'p1'}, {'name': 'p2'}],
            'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data[name].size,
                        'mtime': 1700000000,
                        'sources': [{'url': o.url(name), 'provider': f'p{i + 1}'}
                                    for i, o in enumerate(origins)]}]}


def ctl(seamfs, sock, *args, timeout=15):
    return seamfs.run(['ctl', '--socket', sock] + list(args), timeout=timeout)


def http(sock, method, target, body=b'', headers=None, timeout=10):
    """One raw HTTP/1.1 request over the Unix socket: (status, headers, body).
    The whole request is sent even if the daemon answers early."""
    head = [f'{method} {target} HTTP/1.1', 'Host: seamfs', 'Connection: close']
    if headers is None:
        headers = {'Content-Length': str(len(body))}
    head += [f'{k}: {v}' for k, v in headers.items()]
    raw = ('\r\n'.join(head) + '\r\n\r\n').encode() + body
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock)
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was read; the answer is there
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
    resp = b''.join(chunks)
    top, _, payload = resp.partition(b'\r\n\r\n')
    lines = top.decode('latin-1').split('\r\n')
    status = int(lines[0].split(' ')[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(':')
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, payload


def status_file(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def sessions_on(st):
    out = {}
    for s in st['sessions']:
        out[s['provider']] = out.get(s['provider'], 0) + 1
    return out


def read_rest(f, h):
    while True:
        b = f.read(MIB)
        if not b:
            return h.hexdigest()
        h.update(b)


def test_socket_mode_status_tables_and_json(seamfs, data, origins, sockdir):
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(two_providers(data, origins), options=[f'control_socket={sock}'])
    st = os.lstat(sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    with open(m.path('movie.bin'), 'rb', buffering=0) as f:
        assert f.read(65536) == data.bytes('mid.bin')[:65536]
        r = ctl(seamfs, sock, 'status')
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].split() == ['PROVIDER', 'STATE', 'SESSIONS', 'TRANSFERS', 'LIMIT',
                                    'DRAINED', 'WHY']
        rows = {ln.split()[0]: ln.split() for ln in lines[1:3]}
        assert rows['p1'][1:6] == ['live', '1', rows['p1'][3], 'none', 'no']
        assert rows['p2'][1:3] == ['live', '0']
        sess_head = next(i for i, ln in enumerate(lines) if ln.startswith('SESSION'))
        assert lines[sess_head].split() == ['SESSION', 'ASSET', 'CLIENT', 'PROVIDER', 'OFFSET',
                                            'BYTES', 'STATE', 'AGE_S']
        row = lines[sess_head + 1].split()
        assert row[1] == 'movie' and row[3] == 'p1' and row[6] == 'open'
        assert int(row[5]) >= 65536
        assert 'read-ahead memory' in r.stdout

        r = ctl(seamfs, sock, '--json', 'status')
        assert r.returncode == 0, r.stderr
        js = json.loads(r.stdout)
        assert {p['name'] for p in js['providers']} == {'p1', 'p2'}
        assert [s['provider'] for s in js['sessions']] == ['p1']
        assert js['sessions'][0]['asset'] == 'movie'
        assert sessions_on(status_file(m)) == {'p1': 1}
    m.unmount()
    assert not os.path.exists(sock), 'the socket is removed at unmount'


def test_metrics_parse_from_mount_and_ctl(seamfs, data, origins, sockdir):
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(two_providers(data, origins), options=[f'control_socket={sock}'])
    assert bounded(lambda: sha256_file(m.path('movie.bin')), 60, 'read') == data['mid.bin'].sha256
    with open(m.path('.seamfs/metrics'), 'rb') as f:
        from_mount = promparse.parse(f.read())
    r = ctl(seamfs, sock, 'metrics')
    assert r.returncode == 0, r.stderr
    from_ctl = promparse.parse(r.stdout)
    status, hdrs, body = http(sock, 'GET', '/v1/metrics')
    assert status == 200 and hdrs['content-type'].startswith('text/plain; version=0.0.4')
    promparse.parse(body)
    for fams in (from_mount, from_ctl):
        assert fams['seamfs_read_latency_seconds'].type == 'histogram'
        reads = fams['seamfs_read_latency_seconds'].value(suffix='_count')
        assert reads >= data['mid.bin'].size // MIB
        assert fams['seamfs_first_byte_seconds'].value(suffix='_count') >= 1
        assert fams['seamfs_provider_up'].value({'provider': 'p1'}) == 1
        assert fams['seamfs_provider_state'].value({'provider': 'p1', 'state': 'live'}) == 1
        assert fams['seamfs_provider_answers_total'].value(
            {'provider': 'p1', 'result': 'good'}) >= 1
        assert fams['seamfs_readahead_budget_bytes'].value() == 256 * MIB
        assert fams['seamfs_provider_max_connections'].type == 'gauge'
    # the daemon's histogram only grows between the two scrapes
    assert (from_ctl['seamfs_read_latency_seconds'].value(suffix='_count') >=
            from_mount['seamfs_read_latency_seconds'].value(suffix='_count'))


def test_drain_moves_new_opens_and_open_file_reads_on(seamfs, data, origins, sockdir):
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(two_providers(data, origins),
                     options=[f'control_socket={sock}', 'session_key=open', 'session_ttl=0'])
    path = m.path('movie.bin')
    want = data['mid.bin'].sha256
    import hashlib
    first = open(path, 'rb', buffering=0)
    try:
        h1 = hashlib.sha256(first.read(65536))
        assert sessions_on(status_file(m)) == {'p1': 1}    # the first by name

        r = ctl(seamfs, sock, 'drain', 'p1', '--reason', 'maintenance')
        assert r.returncode == 0, r.stderr
        assert 'p1 drained' in r.stdout
        st = status_file(m)
        p1 = next(p for p in st['providers'] if p['name'] == 'p1')
        assert p1['drained'] and p1['state'] == 'drained'

        others = [open(path, 'rb', buffering=0) for _ in range(3)]
        try:
            assert sessions_on(status_file(m)) == {'p1': 1, 'p2': 3}
            # the file opened before the drain reads on from p1
            assert bounded(lambda: read_rest(first, h1), 60, 'read on') == want
            st = status_file(m)
            on_p1 = [s for s in st['sessions'] if s['provider'] == 'p1']
            assert len(on_p1) == 1 and on_p1[0]['bytes_served'] == data['mid.bin'].size
            for f in others:
                assert bounded(lambda f=f: read_rest(f, hashlib.sha256()), 60, 'read') == want
        finally:
            for f in others:
                f.close()
    finally:
        first.close()

    r = ctl(seamfs, sock, 'resume', 'p1')
    assert r.returncode == 0, r.stderr
    assert 'p1 resumed' in r.stdout
    with open(path, 'rb', buffering=0) as f:
        assert sessions_on(status_file(m)) == {'p1': 1}
        assert bounded(lambda: read_rest(f, hashlib.sha256()), 60, 'read') == want
    assert 'provider p1 drained' in m.log() and 'provider p1 resumed' in m.log()


def test_malformed_requests_get_4xx_and_the_daemon_serves_on(seamfs, data, origins, sockdir):
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(two_providers(data, origins), options=[f'control_socket={sock}'])

    def err(resp):
        status, hdrs, body = resp
        assert hdrs['content-type'] == 'application/json'
        js = json.loads(body)
        assert isinstance(js['error'], str) and js['error']
        return status, js

    status, js = err(http(sock, 'POST', '/v1/providers/p1/drain', b'{"reason": '))
    assert status == 400 and js['field'] == 'body'
    status, js = err(http(sock, 'POST', '/v1/providers/p1/drain', b'{"reason": 5}'))
    assert status == 400 and js['field'] == 'reason'
    status, js = err(http(sock, 'POST', '/v1/providers/p1/drain', b'{"force": true}'))
    assert status == 400 and js['field'] == 'force'
    status, js = err(http(sock, 'POST', '/v1/providers/no%20such/drain'))
    assert status == 404 and js['field'] == 'name' and 'no such' in js['error']
    status, js = err(http(sock, 'POST', '/v1/providers/p%zz/drain'))
    assert status == 400 and js['field'] == 'name'
    status, js = err(http(sock, 'GET', '/v1/nothing'))
    assert status == 404 and js['field'] == 'path'
    resp = http(sock, 'DELETE', '/v1/status')
    status, js = err(resp)
    assert status == 405 and js['field'] == 'method' and resp[1]['allow'] == 'GET'
    status, js = err(http(sock, 'POST', '/v1/providers/p1/drain', b' ' * (1 << 20)))
    assert status == 413 and js['field'] == 'body'
    chunked = b''.join(b'1000\r\n' + b' ' * 0x1000 + b'\r\n' for _ in range(20)) + b'0\r\n\r\n'
    status, js = err(http(sock, 'POST', '/v1/providers/p1/drain', chunked,
                          headers={'Transfer-Encoding': 'chunked'}))
    assert status == 413 and js['field'] == 'body'
    # broken HTTP framing is refused by libmicrohttpd itself (its own body)
    status, _, _ = http(sock, 'POST', '/v1/providers/p1/drain', b'{}' + b' ' * 100,
                        headers={'Transfer-Encoding': 'chunked'})
    assert status == 400
    with socket.socket(socket.AF_UNIX) as s:   # a client that says nothing and goes
        s.connect(sock)
        s.sendall(b'GARBAGE\r\n\r\n')

    # nothing was drained, and the daemon still serves reads and requests
    st = status_file(m)
    assert not any(p['drained'] for p in st['providers'])
    assert bounded(lambda: sha256_file(m.path('movie.bin')), 60, 'read') == data['mid.bin'].sha256
    r = ctl(seamfs, sock, 'status')
    assert r.returncode == 0, r.stderr

    # seamfs ctl reports the daemon's error and field, exit 1
    r = ctl(seamfs, sock, 'drain', 'nobody')
    assert r.returncode == 1
    assert 'no provider named "nobody"' in r.stderr and 'field: name' in r.stderr
    assert m.proc.poll() is None


def test_ctl_errors_and_exit_codes(seamfs_cli, sockdir):
    missing = os.path.join(sockdir, 'none.sock')
    r = seamfs_cli.run(['ctl', '--socket', missing, 'status'])
    assert r.returncode == 3 and 'no control socket' in r.stderr
    r = seamfs_cli.run(['ctl', '--socket', missing, 'frobnicate'])
    assert r.returncode == 2 and 'unknown subcommand' in r.stderr
    r = seamfs_cli.run(['ctl', '--socket', missing, 'drain'])
    assert r.returncode == 2
    r = seamfs_cli.run(['ctl', 'status'])
    assert r.returncode == 2 and 'SEAMFS_CONTROL_SOCKET' in r.stderr
    r = seamfs_cli.run(['ctl', '--help'])
    assert r.returncode == 0 and 'exit status' in r.stdout
    # a socket nobody listens on (left by a dead daemon)
    stale = os.path.join(sockdir, 'stale.sock')
    s = socket.socket(socket.AF_UNIX)
    s.bind(stale)
    s.close()
    r = seamfs_cli.run(['ctl', '--socket', stale, 'status'])
    assert r.returncode == 3 and 'nobody answers' in r.stderr
    # permission denied, when not root can be made to matter
    if os.geteuid() != 0:
        os.chmod(stale, 0)
        r = seamfs_cli.run(['ctl', '--socket', stale, 'status'])
        assert r.returncode == 3 and 'permission denied' in r.stderr


def test_mount_fails_when_the_socket_cannot_be_made(seamfs, data, origins, sockdir, tmp_path):
    path = os.path.join(sockdir, 'taken')
    with open(path, 'w') as f:
        f.write('not a socket\n')
    cat = seamfs.write_catalog(two_providers(data, origins))
    mnt = seamfs.new_mountpoint()
    r = seamfs.run(['-f', '-o', f'control_socket={path},state_dir={tmp_path / "state"}',
                    cat, mnt], timeout=30, mountpoints=[mnt])
    assert r.returncode == 1
    assert path in r.stderr and 'not a socket' in r.stderr
    assert open(path).read() == 'not a socket\n'
    from conftest import mounts_at
    assert not mounts_at(mnt)
    # a relative path is refused as a bad option (exit 2)
    r = seamfs.run(['-f', '-o', 'control_socket=rel.sock', cat, mnt], timeout=30,
                   mountpoints=[mnt])
    assert r.returncode == 2 and 'control_socket' in r.stderr


def test_source_added_to_live_session_takes_over(seamfs, data, origins, sockdir):
    """A source added through the API joins the live session's standbys; when
    the original origin dies, it takes over at the same offset."""
    import hashlib
    sock = os.path.join(sockdir, 'ctl.sock')
    a, b = origins
    cat = {'providers': [{'name': 'p1'}],
           'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                       'mtime': 1700000000,
                       'sources': [{'url': a.url('mid.bin'), 'provider': 'p1'}]}]}
    m = seamfs.mount(cat, read_timeout=20,
                     options=[f'control_socket={sock}', 'standby_delay=0', 'stall_timeout=1',
                              'liveness_interval=0'])
    f = open(m.path('movie.bin'), 'rb')
    try:
        h = hashlib.sha256(f.read(65536))
        # a source at a host nobody knew: its implicit provider is made
        r = ctl(seamfs, sock, 'add-source', 'movie', b.url('mid.bin'))
        assert r.returncode == 0, r.stderr
        assert 'added' in r.stdout

        def verified():
            st = status_file(m)
            srcs = st['assets'][0]['sources'] if st['assets'] else []
            return any(s['source'] == b.url('mid.bin') and s['verification'] == 'verified'
                       for s in srcs)
        from conftest import wait_until
        wait_until(verified, 20, 'the added source verified')
        a.down(drop=True)
        assert bounded(lambda: read_rest(f, h), 60, 'read across the failure') == \
            data['mid.bin'].sha256
    finally:
        f.close()
    st = status_file(m)
    assert st['cutovers']['total'] >= 1
    assert st['cutovers']['recent'][0]['to'] == b.url('mid.bin')

    # the same again, an unknown asset, an unknown provider, a bad URL: 4xx
    r = ctl(seamfs, sock, 'add-source', 'movie', b.url('mid.bin'))
    assert r.returncode == 1 and 'already a source' in r.stderr
    r = ctl(seamfs, sock, 'add-source', 'nope', b.url('mid.bin'))
    assert r.returncode == 1 and 'no listed asset' in r.stderr and 'field: asset' in r.stderr
    r = ctl(seamfs, sock, 'add-source', 'movie', b.url('odd.bin'), '--provider', 'zz')
    assert r.returncode == 1 and 'field: provider' in r.stderr
    status, _, body = http(sock, 'POST', '/v1/assets/movie/sources',
                           b'{"url": "ftp://x/y.bin"}')
    assert status == 400 and json.loads(body)['field'] == 'url'
    status, _, body = http(sock, 'POST', '/v1/assets/movie/sources', b'{}')
    assert status == 400 and json.loads(body)['field'] == 'url'
    status, _, body = http(sock, 'POST', '/v1/assets/movie/sources',
                           b'{"url": "http://127.0.0.1:1/a", "path": "/x"}')
    assert status == 400

    # removing it: new sessions avoid it
    r = ctl(seamfs, sock, 'remove-source', 'movie', b.url('mid.bin'))
    assert r.returncode == 0, r.stderr
    st = status_file(m)
    (src,) = [s for s in st['assets'][0]['sources'] if s['source'] == b.url('mid.bin')]
    assert src['verification'] == 'dead'
    r = ctl(seamfs, sock, 'remove-source', 'movie', 'http://127.0.0.1:1/none')
    assert r.returncode == 1 and 'not a source' in r.stderr
    assert m.proc.poll() is None


def test_answers_are_as_documented(seamfs, data, origins, sockdir):
    """docs/control.md: a name that is not UTF-8 is 400 (field name) on
    every route that takes one; removing a source twice is 404 the second
    time; a removed source may be added again and serves byte-exact."""
    sock = os.path.join(sockdir, 'ctl.sock')
    a, b = origins
    m = seamfs.mount(two_providers(data, origins), options=[f'control_socket={sock}'])
    for target, body in (('/v1/providers/p%FF1/drain', b''),
                         ('/v1/providers/%C3%28/resume', b''),
                         ('/v1/assets/mov%E9/sources', b'{"url": "http://127.0.0.1:1/a"}'),
                         ('/v1/assets/mov%E9/sources/remove', b'{"url": "http://127.0.0.1:1/a"}'),
                         ('/v1/storages/st%FF/drain', b'')):
        status, _, payload = http(sock, 'POST', target, body)
        js = json.loads(payload)
        assert (status, js['field']) == (400, 'name'), (target, status, js)
        assert 'UTF-8' in js['error'], js
    one = json.dumps({'url': b.url('mid.bin')}).encode()
    status, _, payload = http(sock, 'POST', '/v1/assets/movie/sources/remove', one)
    assert status == 200 and json.loads(payload)['result'] == 'removed', payload
    status, _, payload = http(sock, 'POST', '/v1/assets/movie/sources/remove', one)
    js = json.loads(payload)
    assert status == 404 and 'removed' in js['error'] and js['field'] == 'url', (status, js)
    r = ctl(seamfs, sock, 'remove-source', 'movie', b.url('mid.bin'))
    assert r.returncode == 1 and 'field: url' in r.stderr, r.stderr
    # added again: a source once more, and reads still come out whole
    status, _, payload = http(sock, 'POST', '/v1/assets/movie/sources', one)
    assert status == 200 and json.loads(payload)['result'] == 'added', payload
    st = status_file(m)
    (src,) = [s for s in st['assets'][0]['sources'] if s['source'] == b.url('mid.bin')]
    assert src['verification'] != 'dead', src
    assert bounded(lambda: sha256_file(m.path('movie.bin')), 60, 'read') == data['mid.bin'].sha256
    assert m.proc.poll() is None
