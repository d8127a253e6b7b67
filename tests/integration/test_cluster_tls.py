"""Cluster mode over TLS (store=rediss://...): a redis-server with TLS on
127.0.0.1, started by the test with certificates made by the test
(openssl(1)), two daemons on it; and the refusals: a server certificate of
another CA, a wrong host name, a key that is not the certificate's, a
plain port, a plain client on the TLS port; and a remux whose writer
commits through the TLS store. Every wait is bounded; Redis is stopped by
its PID.
"""

import hashlib
import itertools
import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import bounded, catalog, sha256_file, wait_until
from test_cluster import HOSTS_WAIT, Redis, hosts_of, mount_host, status, tc_cat


def openssl(*args, cwd):
    subprocess.run(['openssl', *args], cwd=cwd, check=True, timeout=30,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(d, name):
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
            '-nodes', '-keyout', f'{name}.key', '-out', f'{name}.crt', '-days', '2',
            '-subj', f'/CN={name}', cwd=d)


def make_cert(d, name, ca, san):
    """name.crt / name.key signed by ca, with subjectAltName san."""
    (d / f'{name}.ext').write_text(f'subjectAltName={san}\n')
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
            '-keyout', f'{name}.key', '-out', f'{name}.csr', '-subj', f'/CN={name}', cwd=d)
    openssl('x509', '-req', '-in', f'{name}.csr', '-CA', f'{ca}.crt', '-CAkey', f'{ca}.key',
            '-CAcreateserial', '-out', f'{name}.crt', '-days', '2',
            '-extfile', f'{name}.ext', cwd=d)
    (d / f'{name}.key').chmod(0o600)


@pytest.fixture(scope='module')
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp('certs')
    make_ca(d, 'ca')
    make_ca(d, 'other-ca')
    make_cert(d, 'server', 'ca', 'IP:127.0.0.1,DNS:localhost')
    make_cert(d, 'client', 'ca', 'DNS:seamfs-client')
    make_cert(d, 'stranger', 'other-ca', 'IP:127.0.0.1,DNS:localhost')
    return d


class TlsRedis(Redis):
    """A redis-server that listens with TLS only (--port 0), with the
    server certificate given, asking clients for theirs when
    auth_clients."""

    what = 'redis-server (TLS)'

    def __init__(self, workdir, certs, server='server', auth_clients=True, password=None):
        super().__init__(workdir, password=password)
        self.certs, self.server, self.auth_clients = Path(certs), server, auth_clients

    def query(self, **kw):
        c = self.certs
        q = {'tls_ca_file': c / 'ca.crt'}
        if self.auth_clients:
            q.update(tls_cert_file=c / 'client.crt', tls_key_file=c / 'client.key')
        q.update(kw)
        return '&'.join(f'{k}={v}' for k, v in q.items() if v is not None)

    @property
    def url(self):
        return f'rediss://127.0.0.1:{self.port}?{self.query()}'

    def argv(self, port):
        c = self.certs
        argv = ['redis-server', '--port', '0', '--tls-port', str(port),
                '--tls-cert-file', str(c / f'{self.server}.crt'),
                '--tls-key-file', str(c / f'{self.server}.key'),
                '--tls-ca-cert-file', str(c / 'ca.crt'),
                '--tls-auth-clients', 'yes' if self.auth_clients else 'no',
                '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                '--dir', str(self.dir), '--daemonize', 'no',
                '--logfile', str(self.dir / 'redis.log')]
        if self.password:
            argv += ['--requirepass', self.password]
        return argv


def test_tls_cluster_reads_and_follows_a_restart(seamfs, data, nginx, tmp_path, certs):
    """Two hosts on rediss:// with a client certificate and a password:
    both list both, read the same bytes; Redis killed and started again on
    its port is followed; the password is never logged."""
    pw = 'tls-s3cret-pw'
    pwfile = tmp_path / 'pw'
    pwfile.write_text(pw + '\n')
    pwfile.chmod(0o600)
    redis = TlsRedis(tmp_path / 'redis', certs, password=pw).start()
    try:
        cat = catalog({'id': 'one', 'path': 'one.bin',
                       'sources': [{'url': nginx.url('mid.bin')}]})
        work = tmp_path / 'work'
        opts = [f'store_password_file={pwfile}']
        a = mount_host(seamfs, cat, redis, 'alpha', work, options=opts)
        b = mount_host(seamfs, cat, redis, 'beta', work, options=opts)
        for m in (a, b):
            wait_until(lambda m=m: hosts_of(m) == ['alpha', 'beta'], HOSTS_WAIT,
                       f'both hosts in {m.mnt}/.seamfs/status.json')
            assert sha256_file(m.path('one.bin')) == data['mid.bin'].sha256
            st = status(m)['store']
            assert st['connected'] is True and st['url'] == redis.url
        # killed and started again on its port: both hosts follow
        redis.stop()
        wait_until(lambda: status(a)['store']['connected'] is False, HOSTS_WAIT,
                   'A sees the store down')
        redis.start()
        for m in (a, b):
            wait_until(lambda m=m: status(m)['store']['connected'] is True, HOSTS_WAIT,
                       f'{m.mnt} connected again')
            wait_until(lambda m=m: hosts_of(m) == ['alpha', 'beta'], HOSTS_WAIT,
                       f'both hosts again in {m.mnt}')
            assert sha256_file(m.path('one.bin')) == data['mid.bin'].sha256
        for m in (a, b):
            assert pw not in m.log()
            m.unmount()
    finally:
        redis.stop()


def test_tls_cluster_remux_written_and_followed(seamfs, data, nginx, tmp_path, certs):
    """A remux written in cluster mode over TLS: the writer process gets the
    daemon's rediss:// URL (CA, client certificate and key) and takes its
    lease and commits each segment in that Redis; the second host, which
    writes nothing, lists the segments from there and reads the same
    bytes, which are the segments on disk in order."""
    redis = TlsRedis(tmp_path / 'redis', certs).start()
    try:
        work = tmp_path / 'work'
        cat = tc_cat(nginx)
        a = mount_host(seamfs, cat, redis, 'alpha', work)
        b = mount_host(seamfs, cat, redis, 'beta', work)
        da = bounded(lambda: sha256_file(a.path('clip.ts')), 120, 'the remux through alpha')
        db = bounded(lambda: sha256_file(b.path('clip.ts')), 120, 'the remux through beta')
        assert da == db
        job = work / 'clip-ts'
        plan = json.loads((job / 'plan.json').read_text())
        h = hashlib.sha256()
        for k in range(plan['segments']):
            segs = sorted(job.glob(f'seg-{k:06d}.*ts'))
            assert len(segs) == 1, f'segment {k}: {segs}'
            h.update(segs[0].read_bytes())
        assert h.hexdigest() == da
        for m in (a, b):
            assert 'was fenced' not in m.log()
            assert 'seamfs-writer: ' not in m.log(), m.log()[-3000:]
            m.unmount()
    finally:
        redis.stop()


_attempts = itertools.count()


def attempt(seamfs, cat, tmp_path, *opts):
    """The daemon with opts, expected to exit; its result and how long it took."""
    mnt = seamfs.new_mountpoint(f'mnt-try-{next(_attempts)}')
    t0 = time.monotonic()
    r = seamfs.run(['-f', '-o', ','.join([f'state_dir={tmp_path / "st"}'] + list(opts)),
                    cat, mnt], timeout=20, mountpoints=[mnt])
    return r, time.monotonic() - t0


def test_tls_refusals(seamfs, data, nginx, tmp_path, certs):
    cat = seamfs.write_catalog(catalog({'id': 'one', 'path': 'one.bin',
                                        'sources': [{'url': nginx.url('mid.bin')}]}))
    good = TlsRedis(tmp_path / 'redis-good', certs).start()
    stranger = TlsRedis(tmp_path / 'redis-stranger', certs, server='stranger').start()
    plain = Redis(tmp_path / 'redis-plain').start()
    try:
        at = f'127.0.0.1:{good.port}'
        # a server certificate signed by another CA
        r, took = attempt(seamfs, cat, tmp_path, f'store={stranger.url}')
        assert r.returncode == 1 and took < 10, r.stderr
        assert f'certificate of 127.0.0.1:{stranger.port} is refused' in r.stderr, r.stderr
        assert 'unable to get local issuer certificate' in r.stderr, r.stderr
        # the name the certificate must carry is not in it
        url = f'rediss://127.0.0.1:{good.port}?{good.query(tls_server_name="redis.example")}'
        r, took = attempt(seamfs, cat, tmp_path, f'store={url}')
        assert r.returncode == 1 and took < 10, r.stderr
        assert f'certificate of {at} is refused: hostname mismatch' in r.stderr, r.stderr
        # a host name the certificate carries: accepted
        url = f'rediss://localhost:{good.port}?{good.query()}'
        m = seamfs.mount(cat, options=[f'store={url}', 'host_id=byname'],
                         state_dir=tmp_path / 'st-name', mnt=seamfs.new_mountpoint('mnt-name'))
        assert sha256_file(m.path('one.bin')) == data['mid.bin'].sha256
        m.unmount()
        # a CA file in a directory with a comma (-o splits at commas): %2C
        odd = tmp_path / 'tls,files'
        odd.mkdir()
        (odd / 'ca.crt').write_bytes((certs / 'ca.crt').read_bytes())
        ca = str(odd / 'ca.crt').replace(',', '%2C')
        url = f'rediss://127.0.0.1:{good.port}?{good.query(tls_ca_file=ca)}'
        m = seamfs.mount(cat, options=[f'store={url}', 'host_id=comma'],
                         state_dir=tmp_path / 'st-comma', mnt=seamfs.new_mountpoint('mnt-comma'))
        assert sha256_file(m.path('one.bin')) == data['mid.bin'].sha256
        assert status(m)['store']['connected'] is True
        m.unmount()
        # no client certificate for a Redis that wants one: said, no hang
        url = f'rediss://127.0.0.1:{good.port}?tls_ca_file={certs / "ca.crt"}'
        r, took = attempt(seamfs, cat, tmp_path, f'store={url}', 'host_id=nocert')
        assert r.returncode == 1 and took < 10, r.stderr
        assert at in r.stderr, r.stderr
        assert 'the server asks for a client certificate: give tls_cert_file=' in r.stderr, \
            r.stderr
        # a key that is not the certificate's
        url = f'rediss://127.0.0.1:{good.port}?' + good.query(
            tls_key_file=certs / 'server.key')
        r, _ = attempt(seamfs, cat, tmp_path, f'store={url}')
        assert r.returncode == 1, r.stderr
        assert f'tls_key_file {certs / "server.key"} is not the key of tls_cert_file' \
            in r.stderr, r.stderr
        # an unreadable CA file, a CA file that holds no certificate
        url = f'rediss://127.0.0.1:{good.port}?tls_ca_file={tmp_path / "none.crt"}'
        r, _ = attempt(seamfs, cat, tmp_path, f'store={url}')
        assert r.returncode == 1 and f'tls_ca_file {tmp_path / "none.crt"}: No such file' \
            in r.stderr, r.stderr
        junk = tmp_path / 'junk.crt'
        junk.write_text('not a certificate\n')
        url = f'rediss://127.0.0.1:{good.port}?tls_ca_file={junk}'
        r, _ = attempt(seamfs, cat, tmp_path, f'store={url}')
        assert r.returncode == 1 and f'tls_ca_file {junk}: no CA certificate' in r.stderr, \
            r.stderr
        # TLS to a plain port; plain to the TLS port: refused, no hang
        url = f'rediss://127.0.0.1:{plain.port}?tls_ca_file={certs / "ca.crt"}'
        r, took = attempt(seamfs, cat, tmp_path, f'store={url}')
        assert r.returncode == 1 and took < 10, r.stderr
        assert f'TLS handshake with 127.0.0.1:{plain.port}' in r.stderr, r.stderr
        r, took = attempt(seamfs, cat, tmp_path, f'store=redis://{at}')
        assert r.returncode == 1 and took < 10, r.stderr
        # a bad query is a bad option
        r, _ = attempt(seamfs, cat, tmp_path, f'store=rediss://{at}?tls_ca=/x')
        assert r.returncode == 2 and "unknown setting 'tls_ca'" in r.stderr, r.stderr
        r, _ = attempt(seamfs, cat, tmp_path, f'store=rediss://{at}?tls_cert_file=/x')
        assert r.returncode == 2 and 'go together' in r.stderr, r.stderr
    finally:
        for s in (good, stranger, plain):
            s.stop()


class TlsSentinel(Redis):
    """A sentinel that listens with TLS only and speaks TLS to the master
    (tls-replication), presenting the server certificate as its client's."""

    what = 'sentinel (TLS)'

    def __init__(self, workdir, certs, master, name):
        super().__init__(workdir)
        self.certs, self.master, self.name = Path(certs), master, name

    def argv(self, port):
        c = self.certs
        conf = self.dir / 'sentinel.conf'      # a sentinel rewrites its own
        conf.write_text(
            f'port 0\ntls-port {port}\nbind 127.0.0.1\ndaemonize no\ndir {self.dir}\n'
            f'logfile {self.dir / "redis.log"}\n'
            f'tls-cert-file {c / "server.crt"}\ntls-key-file {c / "server.key"}\n'
            f'tls-ca-cert-file {c / "ca.crt"}\ntls-replication yes\n'
            f'sentinel monitor {self.name} 127.0.0.1 {self.master.port} 1\n')
        return ['redis-server', str(conf), '--sentinel']


def test_tls_sentinel(seamfs, data, nginx, tmp_path, certs):
    """rediss-sentinel://: the sentinel asked over TLS names the master,
    which is reached over TLS; a sentinel certificate of another CA is
    refused, naming the sentinel."""
    master = TlsRedis(tmp_path / 'master', certs).start()
    sent = TlsSentinel(tmp_path / 'sentinel', certs, master, 'seam').start()
    try:
        cat = catalog({'id': 'one', 'path': 'one.bin',
                       'sources': [{'url': nginx.url('mid.bin')}]})
        url = f'rediss-sentinel://127.0.0.1:{sent.port}/seam?{master.query()}'
        m = mount_host(seamfs, cat, SimpleNamespace(url=url), 'alpha', tmp_path / 'work')
        st = status(m)['store']
        assert st['connected'] is True and st['sentinel_master'] == 'seam', st
        assert st['master'] == f'127.0.0.1:{master.port}', st
        assert sha256_file(m.path('one.bin')) == data['mid.bin'].sha256
        m.unmount()
        # the sentinel checked against another CA: no master named
        other = certs / 'other-ca.crt'
        url = f'rediss-sentinel://127.0.0.1:{sent.port}/seam?{master.query(tls_ca_file=other)}'
        r, took = attempt(seamfs, seamfs.write_catalog(cat), tmp_path, f'store={url}')
        assert r.returncode == 1 and took < 10, r.stderr
        assert f'certificate of 127.0.0.1:{sent.port} is refused' in r.stderr, r.stderr
    finally:
        sent.stop()
        master.stop()
