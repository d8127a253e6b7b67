"""https sources: the certificate is verified by default, ca_file names the
CA to trust, and `insecure` turns verification off.  A CA and a server
certificate for 127.0.0.1 are made at test time with openssl."""

import os
import subprocess

import pytest

from conftest import Nginx, asset, bounded, catalog, nginx_conf, sha256_file

TLS_CONF = nginx_conf('        listen 127.0.0.1:{port} ssl;\n'
                      '        ssl_certificate {dir}/server.crt;\n'
                      '        ssl_certificate_key {dir}/server.key;\n'
                      '        root {root};\n', connections=64)


def openssl(*args, cwd):
    r = subprocess.run(['openssl', *args], cwd=cwd, capture_output=True, timeout=60)
    assert r.returncode == 0, f'openssl {args}: {r.stderr.decode(errors="replace")}'


@pytest.fixture
def https(data, tmp_path):
    """nginx over TLS with a certificate for IP 127.0.0.1 signed by a test CA;
    yields (server, path of the CA certificate)."""
    d = tmp_path / 'nginx-tls'
    d.mkdir()
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
            '-subj', '/CN=seamfs test CA', '-keyout', 'ca.key', '-out', 'ca.crt', cwd=d)
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1',
            '-keyout', 'server.key', '-out', 'server.csr', cwd=d)
    (d / 'ext.cnf').write_text('subjectAltName=IP:127.0.0.1\n')
    openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key',
            '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.crt', cwd=d)
    n = Nginx(data.dir, d, conf=TLS_CONF, scheme='https')
    try:
        n.start()
        yield n, d / 'ca.crt'
    finally:
        n.stop()


def test_https_with_ca_file(seamfs, data, https):
    server, ca = https
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', server.url('mid.bin'))),
                     options=[f'ca_file={ca}'])
    assert os.stat(m.path('mid.bin')).st_size == data['mid.bin'].size
    assert bounded(lambda: sha256_file(m.path('mid.bin')), 60, 'read') == data['mid.bin'].sha256


def test_https_untrusted_certificate_is_refused(seamfs, data, https):
    server, _ = https
    # size unknown: the probe fails on the certificate and the asset is left out
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', server.url('mid.bin')),
                             asset('odd', 'odd.bin', server.url('odd.bin'),
                                   size=data['odd.bin'].size, mtime=1700000000)),
                     read_timeout=5, options=['retries=1'])
    assert sorted(os.listdir(m.mnt)) == ['.seamfs', 'odd.bin']
    assert 'asset mid left out' in m.log()
    assert 'certificate' in m.log().lower()
    # size known: listed, but no byte of an unverified server is served
    with pytest.raises(OSError) as e:
        bounded(lambda: open(m.path('odd.bin'), 'rb').read(4096), 30, 'read')
    assert e.value.errno == 5


def test_https_insecure(seamfs, data, https):
    server, _ = https
    m = seamfs.mount(catalog(asset('odd', 'odd.bin', server.url('odd.bin'))),
                     options=['insecure'])
    assert bounded(lambda: sha256_file(m.path('odd.bin')), 60, 'read') == data['odd.bin'].sha256
