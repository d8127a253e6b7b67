"""The mount itself: command line, tree, metadata, read-only-ness, size
discovery, stopping, stale mounts, mount(8)."""

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (EXIT_WAIT, MOUNT_WAIT, asset, bounded, catalog, daemon_env, expected_tree,
                      fusermount_unmount, is_seamfs_mounted, mounts_at, sha256_file, tail,
                      tree_of, wait_until)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def test_help(seamfs_cli):
    r = seamfs_cli.run(['--help'])
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert 'seamfs' in out and 'read_timeout' in out, out


def test_version(seamfs_cli):
    r = seamfs_cli.run(['--version'])
    assert r.returncode == 0, r.stderr
    assert re.search(r'seamfs\D*\d+\.\d+', r.stdout + r.stderr), r.stdout + r.stderr


def good_catalog(seamfs_cli, data):
    return seamfs_cli.write_catalog(catalog(asset('one', 'one.bin', local=data['one.bin'].path)))


@pytest.mark.parametrize('opt, name', [
    ('read_timeout=abc', 'read_timeout'),
    ('connect_timeout=-5', 'connect_timeout'),
    ('retries=many', 'retries'),
    ('log_level=loud', 'log_level'),
    ('no_such_option=1', 'no_such_option'),
])
def test_bad_option(seamfs_cli, data, opt, name):
    cat = good_catalog(seamfs_cli, data)
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-f', '-o', opt, cat, mnt], mountpoints=[mnt])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert name in r.stderr, r.stderr


@pytest.mark.parametrize('nargs', [0, 1, 3])
def test_wrong_number_of_arguments(seamfs_cli, data, nargs):
    cat = good_catalog(seamfs_cli, data)
    mnt = seamfs_cli.new_mountpoint()
    args = [cat, mnt, seamfs_cli.new_mountpoint('extra')][:nargs]
    r = seamfs_cli.run(['-f'] + args, mountpoints=[mnt])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip(), 'no message on stderr'


def test_fstab_only_options_ignored(seamfs, data):
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', local=data['mid.bin'].path)),
                     options=['auto', 'noauto', 'nofail', '_netdev', 'user', 'users',
                              'defaults', 'x-systemd.automount', 'x-foo=bar'])
    assert bounded(lambda: sha256_file(m.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256


# --------------------------------------------------------------------------
# Tree and metadata
# --------------------------------------------------------------------------

TREE = {
    'Movies/Heat (1995)/Heat (1995).mkv': 'clip.mkv',
    'Movies/Big Buck Test (2026)/Big Buck Test (2026).mkv': 'mid.bin',
    'Shows/Show/Season 01/S01E01.bin': 'odd.bin',
    'Shows/Show/Season 01/S01E02.bin': 'mib1.bin',
    "Odd names/it's a #1 [test] & more, 100%.bin": 'page.bin',
    'Odd names/ünïcødé ✓.bin': 'one.bin',
    'top.bin': 'page.bin',
    'Data/empty.bin': 'empty.bin',
}


def tree_catalog(data, nginx):
    return catalog(*[asset(f'id-{i}', p, nginx.url(n), size=data[n].size)
                     for i, (p, n) in enumerate(TREE.items())])


def test_readdir_lists_catalog_tree(seamfs, data, nginx):
    m = seamfs.mount(tree_catalog(data, nginx))
    got = tree_of(m.path())
    got.pop('.seamfs', None)   # the status folder (DESIGN: "Control and status")
    for k in [k for k in got if k.startswith('.seamfs/')]:
        del got[k]
    assert got == expected_tree(TREE)
    for rel, kind in expected_tree(TREE).items():
        st = os.stat(m.path(rel))
        if kind == 'd':
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o555, rel
        else:
            assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444, rel
            assert st.st_size == data[TREE[rel]].size, rel
    for rel, name in TREE.items():
        assert bounded(lambda: sha256_file(m.path(rel)), 30, rel) == data[name].sha256, rel
    assert not os.path.exists(m.path('Movies/nope.mkv'))
    with pytest.raises(FileNotFoundError):
        os.stat(m.path('Movies/Heat (1995)/nope'))


def test_statfs(seamfs, data, nginx):
    m = seamfs.mount(tree_catalog(data, nginx))
    st = os.statvfs(m.path())
    assert st.f_bsize > 0
    assert st.f_namemax > 0
    print(st)


def expect_errno(want, fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == want, \
        f'{fn.__name__}{args}: {errno.errorcode.get(e.value.errno)}, want {errno.errorcode[want]}'


def test_writes_fail_with_erofs(seamfs, data, nginx):
    m = seamfs.mount(tree_catalog(data, nginx))
    d = m.path('Movies/Heat (1995)')
    f = d / 'Heat (1995).mkv'
    before = tree_of(m.path())

    def open_close(path, flags, mode=0o644):
        os.close(os.open(path, flags, mode))

    expect_errno(errno.EROFS, open_close, f, os.O_WRONLY)
    expect_errno(errno.EROFS, open_close, f, os.O_RDWR)
    expect_errno(errno.EROFS, open_close, f, os.O_WRONLY | os.O_TRUNC)
    expect_errno(errno.EROFS, open_close, f, os.O_WRONLY | os.O_APPEND)
    expect_errno(errno.EROFS, open_close, d / 'new.bin', os.O_WRONLY | os.O_CREAT)   # creat
    expect_errno(errno.EROFS, os.mkdir, d / 'newdir')
    expect_errno(errno.EROFS, os.mkdir, m.path('NewTop'))
    expect_errno(errno.EROFS, os.unlink, f)
    expect_errno(errno.EROFS, os.rename, f, d / 'renamed.mkv')
    expect_errno(errno.EROFS, os.rename, d, m.path('Movies/Renamed'))
    expect_errno(errno.EROFS, os.truncate, f, 0)
    expect_errno(errno.EROFS, os.chmod, f, 0o644)
    expect_errno(errno.EROFS, os.symlink, 'Heat (1995).mkv', d / 'link')
    expect_errno(errno.EROFS, os.link, f, d / 'hardlink')
    expect_errno(errno.EROFS, os.rmdir, m.path('Data'))

    assert tree_of(m.path()) == before
    assert bounded(lambda: sha256_file(f), 30, 'read') == data['clip.mkv'].sha256


def test_mtime_from_catalog(seamfs, data, nginx):
    m = seamfs.mount(catalog(
        asset('a', 'A/a.bin', nginx.url('page.bin'), size=data['page.bin'].size, mtime=1700000000),
        asset('b', 'A/b.bin', local=data['one.bin'].path, mtime=1500000000)))
    assert os.stat(m.path('A/a.bin')).st_mtime == 1700000000
    assert os.stat(m.path('A/b.bin')).st_mtime == 1500000000


def test_mtime_from_source(seamfs, data, nginx, tmp_path):
    """No catalog mtime: nginx's Last-Modified, or the local file's mtime."""
    local = tmp_path / 'old.bin'
    local.write_bytes(data.bytes('page.bin'))
    os.utime(local, (1600000000, 1600000000))
    nginx_mtime = int(os.stat(data['odd.bin'].path).st_mtime)
    m = seamfs.mount(catalog(asset('web', 'web.bin', nginx.url('odd.bin')),
                             asset('loc', 'loc.bin', local=local)))
    assert int(os.stat(m.path('web.bin')).st_mtime) == nginx_mtime
    assert int(os.stat(m.path('loc.bin')).st_mtime) == 1600000000


# --------------------------------------------------------------------------
# Size discovery, state, inodes
# --------------------------------------------------------------------------

def test_size_discovered_and_remembered(seamfs, data, origin):
    names = ['mid.bin', 'odd.bin', 'page.bin']
    cat = seamfs.write_catalog(catalog(*[asset(n, f'D/{n}', origin.url(n), mtime=1700000000)
                                         for n in names]))
    m = seamfs.mount(cat)
    for n in names:
        assert os.stat(m.path(f'D/{n}')).st_size == data[n].size, n
    assert bounded(lambda: sha256_file(m.path('D/odd.bin')), 30, 'read') == data['odd.bin'].sha256
    assert m.unmount() == 0, 'daemon did not exit 0 after fusermount3 -u'

    origin.stop(hold_port=True)
    m2 = seamfs.mount(cat, mnt=m.mnt)
    assert sorted(os.listdir(m2.path('D'))) == sorted(names)
    for n in names:
        assert os.stat(m2.path(f'D/{n}')).st_size == data[n].size, n


def test_undiscoverable_asset_left_out(seamfs, data, nginx):
    m = seamfs.mount(catalog(asset('good-one', 'Good/mid.bin', nginx.url('mid.bin')),
                             asset('ghost-404', 'Good/ghost.bin', nginx.url('no-such-file.bin')),
                             asset('ghost-dir', 'Ghost/ghost.bin', nginx.url('no-such-file.bin'))))
    assert os.listdir(m.path('Good')) == ['mid.bin']
    assert not os.path.exists(m.path('Ghost/ghost.bin'))
    assert os.stat(m.path('Good/mid.bin')).st_size == data['mid.bin'].size
    wait_until(lambda: 'ghost-404' in m.log() and 'ghost-dir' in m.log(), 5,
               'a log line naming the left-out assets')
    line = next(ln for ln in m.log().splitlines() if 'ghost-404' in ln)
    print(line)
    assert bounded(lambda: sha256_file(m.path('Good/mid.bin')), 30, 'read') == \
        data['mid.bin'].sha256


def test_inodes_stable_across_remounts(seamfs, data, nginx, tmp_path):
    """st_ino comes from the asset id: same after a remount, even with the
    catalog reordered, another asset added and a fresh state directory."""
    names = ['mid.bin', 'odd.bin', 'page.bin', 'one.bin']
    assets = [asset(f'id-{n}', f'I/{n}', nginx.url(n), size=data[n].size) for n in names]
    m = seamfs.mount(catalog(*assets))
    ino1 = {n: os.stat(m.path(f'I/{n}')).st_ino for n in names}
    assert len(set(ino1.values())) == len(names), f'inode numbers not unique: {ino1}'
    assert m.unmount() == 0

    m2 = seamfs.mount(catalog(*[assets[i] for i in (2, 0, 3, 1)],
                              asset('new', 'I/new.bin', nginx.url('mib1.bin'),
                                    size=data['mib1.bin'].size)),
                      mnt=m.mnt)
    ino2 = {n: os.stat(m2.path(f'I/{n}')).st_ino for n in names}
    assert ino2 == ino1
    assert os.stat(m2.path('I/new.bin')).st_ino not in ino1.values()
    m2.unmount()

    fresh = tmp_path / 'fresh-state'
    fresh.mkdir()
    m3 = seamfs.mount(catalog(*assets), mnt=m.mnt, state_dir=fresh)
    assert {n: os.stat(m3.path(f'I/{n}')).st_ino for n in names} == ino1


def test_state_dir_from_settings(seamfs, data, origin, tmp_path):
    """state_dir in the catalog's settings is used; the command line wins."""
    in_settings, on_cmdline = tmp_path / 'state-settings', tmp_path / 'state-cmdline'
    in_settings.mkdir()
    on_cmdline.mkdir()
    cat = seamfs.write_catalog(catalog(asset('mid', 'mid.bin', origin.url('mid.bin')),
                                       settings={'state_dir': str(in_settings)}))
    m = seamfs.mount(cat, state_dir=on_cmdline)
    assert os.stat(m.path('mid.bin')).st_size == data['mid.bin'].size
    wait_until(lambda: os.listdir(on_cmdline), 5, 'discovered size stored in state_dir')
    assert os.listdir(in_settings) == []
    assert m.unmount() == 0

    m = seamfs.mount(cat, state_dir=False, mnt=m.mnt)
    wait_until(lambda: os.listdir(in_settings), 5, 'state stored in settings.state_dir')
    assert bounded(lambda: sha256_file(m.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256


# --------------------------------------------------------------------------
# Stopping, stale mounts, mount(8)
# --------------------------------------------------------------------------

@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT], ids=['SIGTERM', 'SIGINT'])
def test_signal_unmounts_cleanly(seamfs, data, nginx, sig):
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', nginx.url('mid.bin'),
                                   size=data['mid.bin'].size)))
    assert bounded(lambda: sha256_file(m.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    m.signal(sig)
    rc = m.wait_exit(EXIT_WAIT)
    assert rc == 0, f'exit code {rc} after {sig.name}'
    assert not m.is_mounted(), 'mountpoint still in /proc/self/mountinfo'
    assert os.listdir(m.mnt) == []      # no "Transport endpoint is not connected"


def test_signal_with_files_open(seamfs, data, nginx):
    """A SIGTERM while a plain file and both status files are open: the
    daemon exits cleanly and frees what the releases it never gets would
    have freed (the ASan build's leak check fails the exit code otherwise)."""
    m = seamfs.mount(catalog(asset('mid', 'mid.bin', nginx.url('mid.bin'),
                                   size=data['mid.bin'].size)))
    files = [open(m.path(p), 'rb') for p in ('mid.bin', '.seamfs/status.json',
                                            '.seamfs/metrics')]
    try:
        head = bounded(lambda: files[0].read(64 * 1024), 30, 'read')
        assert head == data.bytes('mid.bin')[:64 * 1024]
        assert 'providers' in json.loads(bounded(lambda: files[1].read(), 30, 'status'))
        assert b'seamfs_' in bounded(lambda: files[2].read(), 30, 'metrics')
        m.signal(signal.SIGTERM)
        rc = m.wait_exit(EXIT_WAIT)
        assert rc == 0, f'exit code {rc} after SIGTERM with files open:\n{tail(m.log())}'
    finally:
        for f in files:
            try:
                f.close()
            except OSError:
                pass
    assert not m.is_mounted()


def test_stale_mount_is_cleared(seamfs, data, nginx):
    cat = seamfs.write_catalog(catalog(asset('mid', 'mid.bin', nginx.url('mid.bin'),
                                             size=data['mid.bin'].size)))
    m = seamfs.mount(cat)
    assert bounded(lambda: sha256_file(m.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    m.crash()
    assert m.is_mounted(), 'expected the killed daemon to leave its mount behind'
    with pytest.raises(OSError) as e:     # (stat could be answered from the attr cache)
        os.close(os.open(m.path('mid.bin'), os.O_RDONLY))
    assert e.value.errno == errno.ENOTCONN

    m2 = seamfs.mount(cat, mnt=m.mnt)
    # Cleared, not stacked on top (mount ids may be reused, so count them).
    assert len(mounts_at(m.mnt)) == 1, f'stale mount not cleared: {mounts_at(m.mnt)}'
    assert bounded(lambda: sha256_file(m2.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    log = m2.log()
    assert 'stale' in log.lower() or str(m.mnt) in log, \
        f'no message about the stale mount:\n{log}'


def find_daemons(catalog_path, mnt):
    """PIDs of seamfs processes started for this catalog and mountpoint."""
    pids = []
    for d in Path('/proc').iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / 'cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        if str(catalog_path).encode() in argv and str(mnt).encode() in argv:
            pids.append(int(d.name))
    return pids


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f'/proc/{pid}/stat').read_text().split(') ')[1][0] != 'Z'
    except (OSError, IndexError):
        return False


SAFE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


def test_mount_helper(seamfs, data, tmp_path):
    """mount -t fuse.seamfs CATALOG MNT -o state_dir=... (through mount.fuse3),
    which runs the daemon in the background, then fusermount3 -u.

    mount(8) runs its helper with a fixed PATH, so unless `seamfs` is installed
    there the test calls the helper itself with the arguments mount(8) would
    give it (mount.fuse3 SOURCE MNT -o OPTS -t fuse.seamfs) and a PATH that
    finds SEAMFS_BIN."""
    helper = next((h for h in ('/sbin/mount.fuse3', '/usr/sbin/mount.fuse3')
                   if os.path.exists(h)), None)
    if helper is None:
        pytest.skip('mount.fuse3 is not installed')
    binary = Path(seamfs.binary)
    bindir = binary.parent
    if binary.name != 'seamfs':
        bindir = tmp_path / 'bin'
        bindir.mkdir()
        (bindir / 'seamfs').symlink_to(binary)
    env = dict(daemon_env(), PATH=f'{bindir}:{os.environ.get("PATH", "/usr/bin:/bin")}:/sbin:/usr/sbin')
    cat = seamfs.write_catalog(catalog(asset('mid', 'Movies/mid.bin', local=data['mid.bin'].path),
                                       asset('odd', 'Movies/odd.bin', local=data['odd.bin'].path)))
    mnt = seamfs.new_mountpoint('fstab-mnt')
    state = tmp_path / 'helper-state'
    state.mkdir()
    pids = []
    try:
        opts = f'state_dir={state},read_timeout=10,nofail,_netdev'
        installed = shutil.which('seamfs', path=SAFE_PATH)
        if installed and os.path.samefile(installed, binary):
            cmd = ['mount', '-t', 'fuse.seamfs', str(cat), str(mnt), '-o', opts]
        else:
            cmd = [helper, str(cat), str(mnt), '-o', 'rw,' + opts, '-t', 'fuse.seamfs']
        print(' '.join(cmd))
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=MOUNT_WAIT + 5)
        pids = find_daemons(cat, mnt)
        assert r.returncode == 0, f'mount exit {r.returncode}: {r.stderr}'
        wait_until(lambda: is_seamfs_mounted(mnt), MOUNT_WAIT, 'the mount to appear')
        pids = find_daemons(cat, mnt)
        assert pids, 'no seamfs process found for the mount'
        assert bounded(lambda: sha256_file(mnt / 'Movies/odd.bin'), 30, 'read') == \
            data['odd.bin'].sha256
        r = subprocess.run(['fusermount3', '-u', str(mnt)], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0, r.stderr
        wait_until(lambda: not any(pid_alive(p) for p in pids), EXIT_WAIT,
                   'the daemon to exit after fusermount3 -u')
    finally:
        if is_seamfs_mounted(mnt):
            fusermount_unmount(mnt)
        for p in pids or find_daemons(cat, mnt):
            deadline = time.monotonic() + 5
            while pid_alive(p) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)
