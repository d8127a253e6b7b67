"""contrib/demo.sh: the cutover it shows, unattended, and its stop.

`demo.sh cutover` (in a demo directory of the test's own, SEAMFS_DEMO_DIR,
with the binary under test, SEAMFS_BIN) sets up two nginx on free ports,
mounts the movie with both as sources, reads it at a player's pace, stops
the origin the reader is on and must print PASS: the reader's SHA-256 equal
to the original's and a cutover in .seamfs/status.json. The test reads the
movie through the mount again itself, holds it open (a session on one
origin) and an HTTP request to each origin, and runs `demo.sh stop-origin`:
when that returns, the stopped origin's port must refuse connections and no
process of its group live. Then `demo.sh stop` stops everything: no process
of the demo's groups (seamfs, both nginx, masters and workers) may be left,
and a second `stop` must say that nothing runs there and fail.
test_stop_after_master_died: nginx masters killed (a crash, or the SIGKILL
after the old 10 s SIGTERM wait) leave workers that serve on; `stop` must
end them.
"""

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import (MIB, Nginx, bounded, can_connect, daemon_env, fusermount_unmount,
                      group_members, is_seamfs_mounted, sha256_file, wait_until)

DEMO = Path(__file__).resolve().parents[2] / 'contrib' / 'demo.sh'
MOVIE = 'Movies/Big Buck Test (2026)/Big Buck Test (2026).mkv'


def run_demo(args, env, timeout):
    try:
        return subprocess.run(['bash', str(DEMO)] + args, env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f'demo.sh {args} did not finish within {timeout} s:\n{e.stdout}\n{e.stderr}')


ORIGINS = ('origin-a', 'origin-b')


def demo_groups(demo_dir):
    """The process groups the demo made (each server under setsid leads its
    own): seamfs's, and each nginx's (master and workers)."""
    groups = set()
    for pidfile in [demo_dir / 'seamfs.pid'] + [demo_dir / o / 'nginx.pid' for o in ORIGINS]:
        try:
            pid = int(pidfile.read_text())
            if os.getpgid(pid) == pid:
                groups.add(pid)
        except (OSError, ValueError):
            continue
    for pgidfile in [demo_dir / 'seamfs.pgid'] + [demo_dir / o / 'nginx.pgid' for o in ORIGINS]:
        try:
            groups.add(int(pgidfile.read_text()))
        except (OSError, ValueError):
            continue
    return groups


def kill_groups(groups):
    """SIGKILL to the groups (only while a seamfs or nginx of theirs lives:
    the group id is then still theirs)."""
    for g in groups:
        comms = set()
        for pid in group_members(g):
            try:
                comms.add(Path(f'/proc/{pid}/comm').read_text().strip())
            except OSError:
                pass
        if comms & {'seamfs', 'nginx'}:
            try:
                os.killpg(g, signal.SIGKILL)
            except ProcessLookupError:
                pass


def kill_leftovers(demo_dir, groups=()):
    """What a failed demo left: its mount and the process groups it made."""
    mnt = demo_dir / 'mnt'
    if is_seamfs_mounted(mnt):
        fusermount_unmount(mnt)
    kill_groups(set(groups) | demo_groups(demo_dir))


def refuses(port):
    """A connection to 127.0.0.1:port is refused (nothing listens)."""
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def hold_request(port):
    """A socket with a GET of the movie under way (the body left unread):
    a client holding a connection open while its origin stops."""
    s = socket.create_connection(('127.0.0.1', port), timeout=10)
    s.sendall(b'GET /movie.mkv HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    assert s.recv(4096).startswith(b'HTTP/1.1 200')
    return s


def test_demo_cutover_and_stop(tmp_path, seamfs_bin):
    if not os.path.exists('/dev/fuse'):
        pytest.skip('/dev/fuse is missing')
    # nginx's workers (www-data) must reach the media: not under pytest's
    # 0700 tmp_path
    demo_dir = Path(tempfile.mkdtemp(prefix='seamfs-demo-'))
    demo_dir.chmod(0o755)
    # a 60 s movie at 8 Mbit/s: a stream's window (at most 32 MiB) cannot
    # hold the rest of it when the origin stops, so the cutover is certain
    # (with 30 s it held it all on a loaded machine, and no cutover came)
    env = dict(daemon_env(), SEAMFS_DEMO_DIR=str(demo_dir), SEAMFS_SKIP_SETUP='1',
               SEAMFS_BIN=seamfs_bin, SEAMFS_DEMO_SECONDS='60', SEAMFS_DEMO_RATE='4000000')
    try:
        p = run_demo(['cutover'], env, 240)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert 'PASS' in p.stdout, out
        assert re.search(r'SHA-256 check:\s+OK', p.stdout), out
        assert re.search(r'largest gap:\s+\d+ ms', p.stdout), out
        assert re.search(r'cutover: big-buck-test-2026 at byte \d+: http://127\.0\.0\.1:\d+/movie'
                         r'\.mkv -> http://127\.0\.0\.1:\d+/movie\.mkv', p.stdout), out
        # the ports were picked, not the old fixed 8089-8189
        ports = [int((demo_dir / o / 'port').read_text()) for o in ('origin-a', 'origin-b')]
        assert len(set(ports)) == 2

        mnt = demo_dir / 'mnt'
        assert is_seamfs_mounted(mnt)
        want = sha256_file(demo_dir / 'media' / 'movie.mkv')
        assert bounded(lambda: sha256_file(mnt / MOVIE), 60, 'read the movie') == want

        stop_origin_under_reader(demo_dir, env, mnt, want, ports)

        groups = demo_groups(demo_dir)
        assert len(groups) == 3, groups     # seamfs and both nginx
        assert all(group_members(g) for g in groups), groups
        p = run_demo(['stop'], env, 60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert 'stopped' in p.stdout
        assert not is_seamfs_mounted(mnt)
        # nothing of the demo is left: no process of its groups lives
        # (a zombie waiting for init to reap it holds nothing), no port answers
        left = {g: group_members(g) for g in groups}
        assert not any(left.values()), f'processes left after demo.sh stop: {left}'
        ports = [int((demo_dir / o / 'port').read_text()) for o in ORIGINS]
        assert all(refuses(port) for port in ports), ports
        p = run_demo(['stop'], env, 60)
        assert p.returncode == 1
        assert 'no demo is running in' in p.stderr and 'stopped' not in p.stdout, p.stdout
        # another directory: nothing runs there either
        p = run_demo(['stop'], dict(env, SEAMFS_DEMO_DIR=str(tmp_path / 'elsewhere')), 60)
        assert p.returncode == 1 and 'no demo is running' in p.stderr
    finally:
        kill_leftovers(demo_dir)
        if not is_seamfs_mounted(demo_dir / 'mnt'):
            shutil.rmtree(demo_dir, ignore_errors=True)


def stop_origin_under_reader(demo_dir, env, mnt, want, ports):
    """`demo.sh stop-origin` while the movie is open through the mount and
    a GET is under way on each origin: when it returns, the origin's port
    refuses connections and no process of its group lives; the reader goes
    on to the end on the other origin, byte-exact. Then `start-origins`."""
    # each nginx leads its own group (setsid): master and workers
    group = {o: os.getpgid(int((demo_dir / o / 'nginx.pid').read_text())) for o in ORIGINS}
    assert all(len(group_members(g)) >= 2 for g in group.values()), group
    held = [hold_request(port) for port in ports]
    try:
        h = hashlib.sha256()
        with open(mnt / MOVIE, 'rb', buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            h.update(f.read(MIB))
            p = run_demo(['stop-origin'], env, 60)
            out = p.stdout + p.stderr
            assert p.returncode == 0, out
            m = re.search(r'stopping (origin-[ab]) \(nginx on 127\.0\.0\.1:(\d+)\)', p.stdout)
            assert m, out
            name, port = m.group(1), int(m.group(2))
            assert refuses(port), f'{name} on port {port} still accepts connections: {out}'
            left = group_members(group[name])
            assert not left, f'{name} stopped, but its processes {left} live'
            for o in ORIGINS:
                if o != name:
                    assert can_connect(int((demo_dir / o / 'port').read_text()))
            while True:
                b = bounded(lambda: f.read(MIB), 60, 'read the movie past the stop')
                if not b:
                    break
                h.update(b)
        assert h.hexdigest() == want
    finally:
        for s in held:
            s.close()
    p = run_demo(['start-origins'], env, 60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_stop_after_master_died(tmp_path):
    """demo.sh stop ends an origin whose nginx master died: the workers the
    master left serve on, and a SIGTERM to the master's pid reaches nobody.
    Failed on the old demo.sh: `stop` found no live master, said no demo runs,
    and both origins' workers went on answering on their ports."""
    demo_dir = Path(tempfile.mkdtemp(prefix='seamfs-demo-'))
    demo_dir.chmod(0o755)
    media = demo_dir / 'media'
    media.mkdir(mode=0o755)
    (media / 'movie.mkv').write_bytes(os.urandom(MIB))
    (media / 'movie.mkv').chmod(0o644)
    env = dict(daemon_env(), SEAMFS_DEMO_DIR=str(demo_dir), SEAMFS_SKIP_SETUP='1')
    groups = set()
    try:
        p = run_demo(['start-origins'], env, 60)
        assert p.returncode == 0, p.stdout + p.stderr
        groups = demo_groups(demo_dir)
        assert len(groups) == 2, groups
        ports = [int((demo_dir / o / 'port').read_text()) for o in ORIGINS]
        for o in ORIGINS:
            master = int((demo_dir / o / 'nginx.pid').read_text())
            assert master in groups
            os.kill(master, signal.SIGKILL)
            wait_until(lambda: master not in group_members(master), 10, f'{o} master gone')
        # what the old demo left: the workers answer on
        assert all(can_connect(port) for port in ports), ports
        assert all(group_members(g) for g in groups)
        p = run_demo(['stop'], env, 60)
        assert p.returncode == 0, p.stdout + p.stderr
        left = {g: group_members(g) for g in groups}
        assert not any(left.values()), f'processes left after demo.sh stop: {left}'
        assert all(refuses(port) for port in ports), ports
    finally:
        kill_leftovers(demo_dir, groups)
        shutil.rmtree(demo_dir, ignore_errors=True)


def test_harness_nginx_stop_after_master_died(tmp_path):
    """The tests' own nginx (conftest.Nginx, the same master and workers):
    stop() after its master died ends the workers too. Failed on the old
    conftest: stop() waited for the dead master only, and the worker served
    on."""
    root = tmp_path / 'root'
    root.mkdir()
    (root / 'a.bin').write_bytes(os.urandom(64 * 1024))
    n = Nginx(root, tmp_path / 'nginx')
    n.start()
    pgid = n.proc.pid
    try:
        workers = [p for p in group_members(pgid) if p != pgid]
        assert workers, 'nginx started no worker'
        os.kill(pgid, signal.SIGKILL)
        wait_until(lambda: pgid not in group_members(pgid), 10, 'nginx master gone')
        assert can_connect(n.port)
        n.stop()
        assert not group_members(pgid)
        assert refuses(n.port)
    finally:
        kill_groups([pgid])
