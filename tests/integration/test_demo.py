"""contrib/demo.sh: the cutover it shows, unattended, and its stop.

`demo.sh cutover` (in a demo directory of the test's own, SEAMFS_DEMO_DIR,
with the binary under test, SEAMFS_BIN) sets up two nginx on free ports,
mounts the movie with both as sources, reads it at a player's pace, stops
the origin the reader is on and must print PASS: the reader's SHA-256 equal
to the original's and a cutover in .seamfs/status.json. The test reads the
movie through the mount again itself, then `demo.sh stop` stops everything,
and a second `stop` must say that nothing runs there and fail.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import bounded, daemon_env, fusermount_unmount, is_seamfs_mounted, sha256_file

DEMO = Path(__file__).resolve().parents[2] / 'contrib' / 'demo.sh'
MOVIE = 'Movies/Big Buck Test (2026)/Big Buck Test (2026).mkv'


def run_demo(args, env, timeout):
    try:
        return subprocess.run(['bash', str(DEMO)] + args, env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f'demo.sh {args} did not finish within {timeout} s:\n{e.stdout}\n{e.stderr}')


def kill_leftovers(demo_dir):
    """What a failed demo left: its mount and the processes of its pid files."""
    mnt = demo_dir / 'mnt'
    if is_seamfs_mounted(mnt):
        fusermount_unmount(mnt)
    for pidfile in [demo_dir / 'seamfs.pid', demo_dir / 'origin-a' / 'nginx.pid',
                    demo_dir / 'origin-b' / 'nginx.pid']:
        try:
            pid = int(pidfile.read_text())
            comm = Path(f'/proc/{pid}/comm').read_text().strip()
        except (OSError, ValueError):
            continue
        if comm in ('seamfs', 'nginx'):
            os.kill(pid, signal.SIGKILL)


def test_demo_cutover_and_stop(tmp_path, seamfs_bin):
    if not os.path.exists('/dev/fuse'):
        pytest.skip('/dev/fuse is missing')
    # nginx's workers (www-data) must reach the media: not under pytest's
    # 0700 tmp_path
    demo_dir = Path(tempfile.mkdtemp(prefix='seamfs-demo-'))
    demo_dir.chmod(0o755)
    env = dict(daemon_env(), SEAMFS_DEMO_DIR=str(demo_dir), SEAMFS_SKIP_SETUP='1',
               SEAMFS_BIN=seamfs_bin, SEAMFS_DEMO_SECONDS='30', SEAMFS_DEMO_RATE='4000000')
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

        p = run_demo(['stop'], env, 60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert 'stopped' in p.stdout
        assert not is_seamfs_mounted(mnt)
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
