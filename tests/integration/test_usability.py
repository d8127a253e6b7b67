"""What a new user runs into first: mistakes on the command line named at
once, where the log goes, --version.

A misspelled option must fail before anything slow: the catalog's source
is a listening socket that never answers (size discovery would wait for
probe_timeout), and the test checks that seamfs exited without connecting
to it at all.
"""

import json
import os
import re
import select
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import (EXIT_WAIT, MOUNT_WAIT, asset, bounded, catalog, daemon_env,
                      is_seamfs_mounted, fusermount_unmount, mounts_at, sha256_file,
                      wait_until)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_origin():
    """A port that accepts connections into its backlog and never answers."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(('127.0.0.1', 0))
    s.listen(16)
    try:
        yield s
    finally:
        s.close()


def nobody_connected(listener):
    r, _, _ = select.select([listener], [], [], 0)
    return not r


@pytest.mark.parametrize('opt,near', [('read_timout=20', 'read_timeout'),
                                      ('allow_othr', 'allow_other'),
                                      ('stal_timeout=2', 'stall_timeout'),
                                      ('frobnicate', None)])
def test_misspelled_option_fails_first(seamfs_cli, tmp_path, silent_origin, opt, near):
    port = silent_origin.getsockname()[1]
    cat = seamfs_cli.write_catalog(catalog(
        asset('a', 'a.bin', f'http://127.0.0.1:{port}/a.bin'),
        settings={'probe_timeout': '30', 'connect_timeout': '30'}))
    mnt = seamfs_cli.new_mountpoint()
    p = seamfs_cli.run(['-f', '-o', f'state_dir={tmp_path},{opt}', cat, mnt], timeout=60,
                       mountpoints=[mnt])
    assert p.returncode == 2, p
    name = opt.split('=')[0]
    line = [ln for ln in p.stderr.splitlines() if f"'{name}'" in ln]
    assert line, p.stderr
    assert 'unknown option' in line[0]
    if near:
        assert f"did you mean '{near}'" in line[0], line
    else:
        assert 'did you mean' not in line[0]
    assert nobody_connected(silent_origin), 'seamfs probed a source before checking options'


def test_bad_option_value_fails_first(seamfs_cli, tmp_path, silent_origin):
    port = silent_origin.getsockname()[1]
    cat = seamfs_cli.write_catalog(catalog(asset('a', 'a.bin', f'http://127.0.0.1:{port}/a'),
                                           settings={'probe_timeout': '30'}))
    mnt = seamfs_cli.new_mountpoint()
    p = seamfs_cli.run(['-o', 'read_timeout=soon', cat, mnt], timeout=60, mountpoints=[mnt])
    assert p.returncode == 2
    assert "option 'read_timeout': bad value 'soon'" in p.stderr, p.stderr
    assert nobody_connected(silent_origin)


def test_swapped_catalog_and_mountpoint(seamfs_cli, data):
    cat = seamfs_cli.write_catalog(catalog(asset('a', 'a.bin', local=data['mid.bin'].path)))
    mnt = seamfs_cli.new_mountpoint()
    p = seamfs_cli.run([mnt, cat], mountpoints=[mnt, cat])
    assert p.returncode == 2
    assert 'look swapped' in p.stderr and str(cat) in p.stderr, p.stderr
    assert 'no .strm' not in p.stderr
    # the same with a playlist as the catalog
    m3u = seamfs_cli.dir / 'list.m3u'
    m3u.write_text(f'#EXTM3U\n{data["mid.bin"].path}\n')
    p = seamfs_cli.run([mnt, m3u], mountpoints=[mnt])
    assert p.returncode == 2 and 'look swapped' in p.stderr, p.stderr


def test_mountpoint_is_a_file(seamfs_cli, data):
    cat = seamfs_cli.write_catalog(catalog(asset('a', 'a.bin', local=data['mid.bin'].path)))
    f = seamfs_cli.dir / 'notes.txt'
    f.write_text('not a directory\n')
    p = seamfs_cli.run([cat, f])
    assert p.returncode == 2
    assert f'mountpoint {f} is a regular file, not a directory' in p.stderr, p.stderr
    assert 'Invalid argument' not in p.stderr


def daemon_pid(mnt):
    """The mount's daemon (its keeper, else its one process), from its status."""
    with open(Path(mnt) / '.seamfs' / 'status.json') as f:
        st = json.load(f)
    return st['keeper']['pid'] if st.get('keeper') else st['worker_pid']


def test_log_file_and_reopen(seamfs, data, tmp_path, dead_port):
    """Without -f and with log_file: the log goes to the file and nowhere
    else (issue 33): nothing on the terminal when the mount is up, not even
    a warning of the start (an asset whose source refuses, left out), which
    the file has; a second start on the same mountpoint fails with one line
    naming the file, the reason being in the file. After a rename
    (logrotate) SIGHUP makes a new one. On 598ca28 the terminal got the
    warning and a "mounted on" line."""
    log = tmp_path / 'logs' / 'seamfs.log'
    log.parent.mkdir()
    cat = seamfs.write_catalog(catalog(
        asset('mid', 'Movies/mid.bin', local=data['mid.bin'].path),
        asset('gone', 'Movies/gone.bin', f'http://127.0.0.1:{dead_port}/gone.bin')))
    mnt = seamfs.new_mountpoint()
    p = seamfs.run(['-o', f'state_dir={seamfs.state_dir},log_file={log}', cat, mnt],
                   timeout=MOUNT_WAIT + 30, mountpoints=[mnt])
    try:
        assert p.returncode == 0, p.stderr
        assert (p.stdout, p.stderr) == ('', ''), (p.stdout, p.stderr)
        text = log.read_text()
        assert 'mounted' in text and 'discovering' in text and 'gone' in text, text
        assert is_seamfs_mounted(mnt)
        got = bounded(lambda: sha256_file(mnt / 'Movies/mid.bin'), 30, 'read')
        assert got == data['mid.bin'].sha256
        pid = daemon_pid(mnt)
        # a second daemon for the same mountpoint: refused, said in one line
        p2 = seamfs.run(['-o', f'state_dir={seamfs.state_dir},log_file={log}', cat, mnt],
                        timeout=MOUNT_WAIT + 30)
        assert p2.returncode != 0
        assert p2.stdout == '' and p2.stderr.splitlines() == [
            f"seamfs: not mounted (exit {p2.returncode}); the daemon's log: {log}"], p2.stderr
        assert 'already mounted' in log.read_text()
        rotated = log.with_suffix('.log.1')
        log.rename(rotated)
        os.kill(pid, signal.SIGHUP)
        wait_until(lambda: log.exists() and 'SIGHUP' in log.read_text(), 10,
                   'a new log file after SIGHUP')
        assert 'SIGHUP' not in rotated.read_text()
    finally:
        if is_seamfs_mounted(mnt):
            fusermount_unmount(mnt)
    wait_until(lambda: 'unmounting' in log.read_text(), EXIT_WAIT, 'the daemon logging its exit')


def test_log_file_unwritable(seamfs_cli, data, tmp_path):
    cat = seamfs_cli.write_catalog(catalog(asset('a', 'a.bin', local=data['mid.bin'].path)))
    mnt = seamfs_cli.new_mountpoint()
    p = seamfs_cli.run(['-o', f'state_dir={tmp_path},log_file={tmp_path}/no/such/dir/log',
                        cat, mnt], mountpoints=[mnt])
    assert p.returncode == 2
    assert 'log_file' in p.stderr and 'No such file or directory' in p.stderr, p.stderr
    p = seamfs_cli.run(['-o', 'log_file=relative.log', cat, mnt], mountpoints=[mnt])
    assert p.returncode == 2 and 'an absolute path' in p.stderr, p.stderr


def meson_version():
    m = re.search(r"version:\s*'([^']+)'", (ROOT / 'meson.build').read_text())
    return m.group(1)


def test_version(seamfs_cli):
    p = seamfs_cli.run(['--version'])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f'seamfs {meson_version()}'
    out = p.stdout
    assert re.search(r'^libfuse 3\.\d+\.\d+ ', out, re.M), out
    assert re.search(r'^libcurl \d+\.\d+\.\d+ \(OpenSSL/3\.', out, re.M), out
    assert re.search(r'^OpenSSL 3\.\d+\.\d+', out, re.M), out
    assert re.search(r'^jansson 2\.\d+', out, re.M), out
    assert re.search(r'^libavformat \d+\.\d+\.\d+$', out, re.M), out
    assert re.search(r'^libavcodec \d+\.\d+\.\d+$', out, re.M), out
    assert 'libfuse 314' not in out
