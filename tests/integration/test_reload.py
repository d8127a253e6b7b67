"""Catalog reload while mounted (SIGHUP or `seamfs ctl reload`): new assets
appear, removed ones disappear for new opens while open files read on to the
end, sources of known assets change, and an invalid catalog keeps the old
one and says why.  Every read is checked by SHA-256."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from conftest import MIB, bounded, sha256_file, wait_until

READER = r'''
import hashlib, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
h = hashlib.sha256()
while True:
    b = os.read(fd, 256 * 1024)
    if not b:
        break
    h.update(b)
    time.sleep(0.01)
print(h.hexdigest())
'''


@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix='seamfs-rl-', dir='/tmp')
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def two_origins(data, make_origin):
    return [make_origin(data.dir) for _ in range(2)]


def asset(aid, path, urls, size=None):
    a = {'id': aid, 'path': path,
         'sources': [{'url': u, 'provider': p} for p, u in urls]}
    if size is not None:
        a['size'] = size
    return a


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def test_reload_while_reading(seamfs, data, two_origins, sockdir):
    o1, o2 = two_origins
    sock = os.path.join(sockdir, 'ctl.sock')
    providers = [{'name': 'p1'}, {'name': 'p2'}]
    before = {'providers': providers, 'assets': [
        asset('a', 'Movies/a.bin', [('p1', o1.url('mid.bin'))], data['mid.bin'].size),
        asset('b', 'Movies/b.bin', [('p1', o1.url('odd.bin'))], data['odd.bin'].size)]}
    catfile = seamfs.write_catalog(before, name='catalog.json')
    m = seamfs.mount(catfile, read_timeout=20, options=[f'control_socket={sock}'])
    # a name the kernel has looked up and found missing (a cached negative entry)
    assert not os.path.exists(m.path('Shows/c.bin'))
    readers = [subprocess.Popen([sys.executable, '-c', READER, m.path('Movies/a.bin')],
                                stdout=subprocess.PIPE, text=True) for _ in range(4)]
    b_open = open(m.path('Movies/b.bin'), 'rb')
    try:
        first = b_open.read(MIB)
        after = {'providers': providers, 'assets': [
            asset('a', 'Movies/a.bin', [('p1', o1.url('mid.bin')), ('p2', o2.url('mid.bin'))]),
            asset('c', 'Shows/c.bin', [('p2', o2.url('mib1.bin'))])]}
        seamfs.write_catalog(after, name='catalog.json')
        m.signal(signal.SIGHUP)
        wait_until(lambda: status(m)['reload']['reloads'] >= 1, 20, 'reload done')
        st = status(m)
        assert st['reload']['ok'], st['reload']
        # the new asset appears at once (no stale negative entry), with its
        # size learned as at mount
        assert os.stat(m.path('Shows/c.bin')).st_size == data['mib1.bin'].size
        assert bounded(lambda: sha256_file(m.path('Shows/c.bin')), 30, 'read c') == \
            data['mib1.bin'].sha256
        # the removed asset: gone for new opens, the open file reads on
        with pytest.raises(FileNotFoundError):
            open(m.path('Movies/b.bin'), 'rb')
        rest = bounded(lambda: b_open.read(), 30, 'read b to the end')
        import hashlib
        assert hashlib.sha256(first + rest).hexdigest() == data['odd.bin'].sha256
        # the known asset gained a source
        (a,) = [x for x in status(m)['assets'] if x['id'] == 'a']
        assert {s['provider'] for s in a['sources']} == {'p1', 'p2'}
        for r in readers:
            out, _ = r.communicate(timeout=60)
            assert r.returncode == 0
            assert out.strip() == data['mid.bin'].sha256
        assert sorted(os.listdir(m.path())) == ['.seamfs', 'Movies', 'Shows']
        assert os.listdir(m.path('Movies')) == ['a.bin']
    finally:
        b_open.close()
        for r in readers:
            if r.poll() is None:
                r.kill()
                r.wait(5)

    # an invalid catalog keeps the old one and says why (ctl reload: exit 1)
    catfile.write_text('{"assets": [ {"id": "x", "path": "/abs", "sources": []} ]}')
    r = seamfs.run(['ctl', '--socket', sock, 'reload'])
    assert r.returncode == 1
    assert 'catalog.json:1:' in r.stderr and 'old one stays' in r.stderr
    st = status(m)
    assert st['reload']['ok'] is False and 'catalog.json' in st['reload']['last']
    assert bounded(lambda: sha256_file(m.path('Movies/a.bin')), 30, 'read a') == \
        data['mid.bin'].sha256
    # a valid one again, through ctl: reports what needs a remount
    moved = {'providers': providers, 'assets': [
        asset('a', 'Elsewhere/a.bin', [('p1', o1.url('mid.bin'))])]}
    seamfs.write_catalog(moved, name='catalog.json')
    r = seamfs.run(['ctl', '--socket', sock, 'reload'])
    assert r.returncode == 0, r.stderr
    assert 'catalog reloaded' in r.stdout and 'new path needs a remount' in r.stdout
    assert os.path.exists(m.path('Movies/a.bin'))
    assert m.proc.poll() is None


def soon(pred, timeout, what):
    """wait_until that gives up quietly: a daemon of the old code never got
    there, and the test goes on to the check that says what went wrong."""
    try:
        return wait_until(pred, timeout, what)
    except pytest.fail.Exception:
        return None


def stop_within_bound(m):
    """SIGTERM: the daemon's PID exits within a bound and the mount is gone."""
    m.signal(signal.SIGTERM)
    rc = m.wait_exit(20)
    assert rc is not None, 'SIGTERM did not end the daemon within 20 s:\n' + m.log()[-2000:]
    assert rc == 0, m.log()[-2000:]
    assert not m.is_mounted()


def test_catalog_replaced_by_a_fifo(seamfs, data, two_origins):
    """A FIFO in the catalog's place: the reload refuses it at once (the open
    does not wait for a writer) and says why, naming the file; the old
    catalog serves on byte-exact; SIGTERM ends the daemon."""
    o1, _ = two_origins
    cat = {'providers': [{'name': 'p1'}], 'assets': [
        asset('a', 'Movies/a.bin', [('p1', o1.url('mid.bin'))], data['mid.bin'].size)]}
    catfile = seamfs.write_catalog(cat, name='catalog.json')
    m = seamfs.mount(catfile, read_timeout=20)
    catfile.unlink()
    os.mkfifo(catfile)
    try:
        m.signal(signal.SIGHUP)
        assert bounded(lambda: sha256_file(m.path('Movies/a.bin')), 30, 'read a') == \
            data['mid.bin'].sha256
        assert sorted(os.listdir(m.path('Movies'))) == ['a.bin']
        why = 'catalog.json: the catalog is a FIFO, not a regular file'
        refused = soon(lambda: why in m.log(), 20, 'the reload refused')
        if refused:
            st = status(m)
            assert st['reload']['ok'] is False and why in st['reload']['last'], st['reload']
        stop_within_bound(m)
        assert refused, m.log()[-2000:]
    finally:
        # whatever still waits on the FIFO gets a writer, and goes
        try:
            os.close(os.open(catfile, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def all_stopped(pid):
    """Whether every thread of pid is stopped (state T)."""
    states = []
    for t in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{t}/stat') as f:
                states.append(f.read().rsplit(')', 1)[1].split()[0])
        except OSError:
            pass
    return bool(states) and all(s == 'T' for s in states)


def test_reload_stuck_on_a_hung_file_system(seamfs, data, two_origins, tmp_path):
    """The .strm library leads (a symlink) into a file system that stops
    answering, as a hung NFS mount does: here another seamfs mount whose
    daemon is stopped (SIGSTOP). A reload is given up at its bound, keeps
    the old catalog and says why; the old files read on byte-exact; a second
    reload is stuck when SIGTERM comes, and the daemon still ends."""
    o1, o2 = two_origins
    other = seamfs.mount({'assets': [{'id': 'x', 'path': 'x.bin', 'size': data['odd.bin'].size,
                                      'sources': [{'url': o2.url('odd.bin')}]}]},
                         mnt=tmp_path / 'other')
    lib = tmp_path / 'library'
    lib.mkdir()
    (lib / 'Movie.strm').write_text(o1.url('mid.bin') + '\n')
    (lib / 'more').symlink_to(other.mnt)
    m = seamfs.mount(lib, read_timeout=20)
    assert bounded(lambda: sha256_file(m.path('Movie')), 30, 'read Movie') == \
        data['mid.bin'].sha256
    # the process that serves (a keeper's worker): stopped, it answers nothing
    served_by = other.worker_pid()
    os.kill(served_by, signal.SIGSTOP)
    try:
        # every thread stopped first: one woken by the stop could still take
        # a request off the queue, and a request taken by a FUSE daemon cannot
        # be killed (not even at exit), unlike one still queued or an NFS read
        wait_until(lambda: all_stopped(served_by), 20, 'the other daemon stopped')
        m.signal(signal.SIGHUP)
        why = 'library: not read within 30 s (a hung file system?)'
        given_up = soon(lambda: why in m.log(), 60, 'the reload given up')
        if given_up:
            st = status(m)
            assert st['reload']['ok'] is False and why in st['reload']['last'], st['reload']
        assert sorted(os.listdir(m.path())) == ['.seamfs', 'Movie']
        assert bounded(lambda: sha256_file(m.path('Movie')), 30, 'read Movie') == \
            data['mid.bin'].sha256
        m.signal(signal.SIGHUP)
        soon(lambda: m.log().count('SIGHUP: reading the catalog again') == 2, 20,
             'the second reload begun')
        stop_within_bound(m)
        assert given_up, m.log()[-2000:]
    finally:
        os.kill(served_by, signal.SIGCONT)
