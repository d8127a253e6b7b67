"""Path sources that could hurt: a FIFO, a device or a directory given as a
source must never block a reader (a FIFO's open would hold it in the kernel,
unkillable, until a writer came) and never be read; a playlist (.strm, M3U)
or `seamfs ctl add-source` may name a local file only inside the folders of
`strm_paths`, after symlinks, so whoever can write to a library cannot read
/etc/shadow through the mount; errors never quote a file that is not a
playlist."""

import json
import os
import subprocess

import pytest

from conftest import MIB, bounded, sha256_file

SECRET = 'TOPSECRET-do-not-show-0xC0FFEE'


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def sources(m):
    (a,) = status(m)['assets']
    return a['sources']


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / 'pipe.mkv'
    os.mkfifo(p)
    yield p
    # if anything ever blocked on it, a writer end releases it
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


@pytest.mark.parametrize('kind', ['fifo', 'device', 'directory'])
def test_special_file_as_a_path_source_never_blocks(seamfs, data, origin, fifo, tmp_path, kind):
    """The special file is listed first; the URL beside it serves every byte,
    and the read is bounded whatever happens."""
    where = {'fifo': str(fifo), 'device': '/dev/zero', 'directory': str(tmp_path)}[kind]
    cat = {'providers': [{'name': 'a-local'}, {'name': 'b-web'}],
           'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                       'mtime': 1700000000,
                       'sources': [{'path': where, 'provider': 'a-local'},
                                   {'url': origin.url('mid.bin'), 'provider': 'b-web'}]}]}
    m = seamfs.mount(cat, read_timeout=10)
    assert bounded(lambda: sha256_file(m.path('movie.bin')), 30, 'read') == \
        data['mid.bin'].sha256
    s = next(s for s in sources(m) if s['provider'] == 'a-local')
    assert s['verification'] == 'dead', s
    words = {'fifo': 'a FIFO', 'device': 'a device', 'directory': 'a directory'}[kind]
    assert words in m.log(), m.log()[-2000:]


def test_fifo_alone_fails_in_time(seamfs, data, fifo):
    cat = {'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': MIB, 'mtime': 1700000000,
                       'sources': [{'path': str(fifo)}]}]}
    m = seamfs.mount(cat, read_timeout=5)

    def read():
        with pytest.raises(OSError):
            with open(m.path('movie.bin'), 'rb') as f:
                f.read(4096)
    bounded(read, 20, 'read of a FIFO source')


def strm_lib(tmp_path, lines):
    lib = tmp_path / 'library'
    lib.mkdir()
    for name, text in lines.items():
        (lib / name).write_text(text)
    return lib


def test_strm_cannot_name_a_file_outside_strm_paths(seamfs, data, tmp_path):
    secret = tmp_path / 'secret.bin'
    secret.write_bytes(SECRET.encode() * 1000)
    lib = strm_lib(tmp_path, {'Leak.strm': f'{secret}\n',
                              'Page.strm': f'{data["page.bin"].path}\n'})
    # default: no local path from a playlist at all, so nothing is left
    mnt = tmp_path / 'mnt0'
    mnt.mkdir()
    r = seamfs.run(['-f', '-o', f'state_dir={tmp_path / "state"}', lib, mnt], timeout=30,
                   mountpoints=[mnt])
    assert r.returncode != 0
    assert 'Leak.strm:1: path:' in r.stderr and 'strm_paths allows no local path' in r.stderr, r.stderr
    assert 'no usable .strm files' in r.stderr, r.stderr
    # allowed folder: the data dir only; the secret next to the library stays out
    m = seamfs.mount(lib, read_timeout=5, options=[f'strm_paths={data.dir}'])
    assert bounded(lambda: sha256_file(m.path('Page')), 20, 'allowed read') == \
        data['page.bin'].sha256
    assert not os.path.exists(m.path('Leak'))
    assert 'Leak.strm:1: path:' in m.log() and 'outside strm_paths' in m.log()


def test_strm_outside_strm_paths_is_never_listed(seamfs, data, tmp_path):
    """A .strm naming a root-only file outside strm_paths: the entry is left
    out, so no listing or stat through the mount tells whoever wrote it that
    the file exists, its size or its age; the log names the .strm file, the
    line and the rule. A .strm with an allowed line beside the refused one
    is served from the allowed one, byte-exact."""
    shadow = tmp_path / 'etc' / 'shadow'
    shadow.parent.mkdir()
    shadow.write_bytes(SECRET.encode() * 123)
    os.chmod(shadow, 0o600)
    os.utime(shadow, (1111111111, 1111111111))
    page = data['page.bin']
    lib = strm_lib(tmp_path, {'Leak.strm': f'# the shadow file\n{shadow}\n',
                              'Mixed.strm': f'{shadow}\n{page.path}\n',
                              'Page.strm': f'{page.path}\n'})
    m = seamfs.mount(lib, read_timeout=5, options=[f'strm_paths={data.dir}'])
    assert sorted(os.listdir(m.path())) == ['.seamfs', 'Mixed', 'Page']
    assert not os.path.exists(m.path('Leak'))
    for dirpath, dirs, files in os.walk(m.path()):
        for name in dirs + files:
            st = os.lstat(os.path.join(dirpath, name))
            assert st.st_size != shadow.stat().st_size, name
            assert int(st.st_mtime) != 1111111111, name
    with open(m.path('.seamfs/status.json')) as f:
        text = f.read()
    assert str(shadow) not in text and 'Leak' not in text
    for name in ('Mixed', 'Page'):
        assert os.stat(m.path(name)).st_size == page.size
        assert bounded(lambda: sha256_file(m.path(name)), 20, 'read ' + name) == page.sha256
    log = m.log()
    assert 'Leak.strm:2: path:' in log and 'Mixed.strm:1: path:' in log, log[-3000:]
    assert f'outside strm_paths ({data.dir})' in log
    assert 'Leak.strm: no source left' in log
    assert str(shadow) not in log


def test_strm_symlink_into_the_allowed_folder_is_resolved(seamfs, data, tmp_path):
    """A link inside the allowed folder that points out of it is refused."""
    allowed = tmp_path / 'media'
    allowed.mkdir()
    secret = tmp_path / 'secret.bin'
    secret.write_bytes(SECRET.encode() * 100)
    (allowed / 'innocent.bin').symlink_to(secret)
    (allowed / 'page.bin').write_bytes(data.bytes('page.bin'))
    lib = strm_lib(tmp_path, {'Inn.strm': f'{allowed / "innocent.bin"}\n',
                              'Page.strm': f'{allowed / "page.bin"}\n'})
    m = seamfs.mount(lib, read_timeout=5, options=[f'strm_paths={allowed}'])
    assert not os.path.exists(m.path('Inn'))
    assert 'Inn.strm:1: path:' in m.log() and 'once symlinks are resolved' in m.log()
    assert bounded(lambda: sha256_file(m.path('Page')), 20, 'allowed read') == \
        data['page.bin'].sha256


def test_symlinked_strm_never_quotes_its_target(seamfs_cli, tmp_path):
    secret = tmp_path / 'shadow'
    secret.write_text(SECRET + ':x:0:0\n')
    lib = tmp_path / 'library'
    lib.mkdir()
    (lib / 'evil.strm').symlink_to(secret)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={tmp_path / "state"}', lib, mnt], timeout=30,
                       mountpoints=[mnt])
    assert r.returncode != 0
    assert SECRET not in r.stderr and SECRET not in r.stdout, r.stderr
    assert 'neither an http(s) URL nor an absolute path' in r.stderr, r.stderr


def test_ctl_add_source_refuses_special_files_and_paths_outside(seamfs, data, origin, fifo,
                                                                tmp_path):
    sock = tmp_path / 'ctl.sock'
    cat = {'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data['mid.bin'].size,
                       'mtime': 1700000000, 'sources': [{'url': origin.url('mid.bin')}]}]}
    # the FIFO and the folder lie inside strm_paths: refused for what they
    # are; outside it nothing is looked at, whatever it is
    adir = tmp_path / 'adir'
    adir.mkdir()
    m = seamfs.mount(cat, options=[f'control_socket={sock}',
                                   f'strm_paths={data.dir}:{tmp_path}'])

    def ctl(*args):
        return subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), *args],
                              capture_output=True, text=True, timeout=15)
    for bad, words in ((str(fifo), 'a FIFO'), ('/proc/self/environ', 'outside strm_paths'),
                       ('/dev/zero', 'outside strm_paths'), (str(adir), 'a directory'),
                       (str(tmp_path / 'state' / '..' / 'pipe.mkv'), 'outside strm_paths')):
        r = ctl('add-source', 'movie', bad)
        assert r.returncode != 0 and words in r.stderr + r.stdout, (bad, r.stderr, r.stdout)
    r = ctl('add-source', 'movie', str(data['mid.bin'].path))
    assert r.returncode == 0, r.stderr
    assert any(s['source'] == str(data['mid.bin'].path) for s in sources(m))
    assert bounded(lambda: sha256_file(m.path('movie.bin')), 30, 'read') == \
        data['mid.bin'].sha256
