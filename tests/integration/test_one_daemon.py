"""One daemon per mountpoint (issue 14, "Safety").

A second seamfs on a mountpoint that a live seamfs serves is refused (exit 1,
naming the first daemon's pid from the mount lock in the state directory, or
from /proc/self/mountinfo when the first uses another state_dir), and the
first keeps serving; once it is unmounted the mountpoint mounts again.
Daemons of one catalog on several mountpoints share its state file, and a
save never loses another daemon's records.  Every wait is bounded; mounts are
torn down by the fixtures, and a daemon stacked by a broken build is
unmounted here.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import MOUNT_WAIT, asset, bounded, catalog, mounts_at, sha256_file, wait_until

REFUSE_WITHIN = 15.0     # a refused second daemon exits within this


def one_file_catalog(data, nginx, name='mid.bin'):
    return catalog(asset('mid', name, nginx.url(name), size=data[name].size))


def second_daemon(seamfs, cat, mnt, foreground, state_dir=None):
    """Run a second `seamfs [-f] CATALOG MNT`; it must exit by itself.  If a
    broken build stacks a second mount, it is unmounted again (only the
    top one: the first daemon's mount stays) and the test fails."""
    argv = seamfs.argv(cat, mnt, options=(), state_dir=state_dir, foreground=foreground)[1:]
    before = len(mounts_at(mnt))
    t0 = time.monotonic()
    try:
        r = seamfs.run(argv, timeout=REFUSE_WITHIN)
    finally:
        for _ in range(3):
            if len(mounts_at(mnt)) <= before:
                break
            subprocess.run(['fusermount3', '-u', str(mnt)], capture_output=True, timeout=5)
            time.sleep(0.5)
    return r, time.monotonic() - t0


@pytest.mark.parametrize('foreground', [True, False], ids=['-f', 'daemon'])
def test_second_daemon_refused_first_keeps_serving(seamfs, data, nginx, foreground):
    cat = seamfs.write_catalog(one_file_catalog(data, nginx))
    m1 = seamfs.mount(cat)
    assert bounded(lambda: sha256_file(m1.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256

    r, took = second_daemon(seamfs, cat, m1.mnt, foreground)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert took < REFUSE_WITHIN
    assert f'pid {m1.pid}' in r.stderr, r.stderr
    assert 'already mounted' in r.stderr and str(m1.mnt) in r.stderr, r.stderr
    # the first mount is untouched and still serves
    assert len(mounts_at(m1.mnt)) == 1, mounts_at(m1.mnt)
    assert m1.is_mounted() and m1.proc.poll() is None
    assert bounded(lambda: sha256_file(m1.path('mid.bin')), 30, 'read after the refusal') == \
        data['mid.bin'].sha256
    # the lock file names the daemon
    locks = list(m1.state_dir.glob('*.mount.lock'))
    assert len(locks) == 1 and locks[0].read_text().split() == [str(m1.pid)], locks

    # once it is gone, the mountpoint mounts again
    assert m1.unmount() == 0
    m2 = seamfs.mount(cat, mnt=m1.mnt)
    assert bounded(lambda: sha256_file(m2.path('mid.bin')), 30, 'read after remount') == \
        data['mid.bin'].sha256
    assert locks[0].read_text().split() == [str(m2.pid)]


def test_second_daemon_with_other_state_dir_refused(seamfs, data, nginx, tmp_path):
    """No shared lock file: the live seamfs mount in mountinfo refuses it."""
    cat = seamfs.write_catalog(one_file_catalog(data, nginx))
    m1 = seamfs.mount(cat)
    other = tmp_path / 'other-state'
    other.mkdir()
    r, _ = second_daemon(seamfs, cat, m1.mnt, True, state_dir=other)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert 'already a live seamfs mount' in r.stderr and str(m1.mnt) in r.stderr, r.stderr
    assert len(mounts_at(m1.mnt)) == 1
    assert bounded(lambda: sha256_file(m1.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256


def test_stale_mount_still_cleared_with_lock(seamfs, data, nginx):
    """A killed daemon's lock goes with it: its dead mount is cleared and the
    mountpoint mounts again (no refusal naming a dead pid), even while the
    kernel still answers stat() of the dead mount from its cache."""
    cat = seamfs.write_catalog(one_file_catalog(data, nginx))
    m1 = seamfs.mount(cat)
    assert bounded(lambda: sha256_file(m1.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    os.stat(m1.mnt)      # its attributes now cached: a stat may still succeed once dead
    m1.crash()
    assert m1.is_mounted()
    # (the harness's wait cannot tell the dead mount's cached stat from the
    # new mount's answer: wait for the daemon's own word)
    m2 = seamfs.mount(cat, mnt=m1.mnt, wait=False)
    wait_until(lambda: ' main: mounted ' in m2.log() or m2.proc.poll() is not None,
               MOUNT_WAIT, 'the second daemon to mount')
    m2.wait_mounted()
    assert 'stale mount' in m2.log(), m2.log()
    assert len(mounts_at(m1.mnt)) == 1
    assert bounded(lambda: sha256_file(m2.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256


def test_the_keeper_alone_holds_the_lock_through_restarts(seamfs, data, nginx, tmp_path):
    """With a keeper the mount lock is the keeper's alone (its pid is in
    it): its workers hold no copy of it. A second seamfs on the mountpoint
    is refused while the keeper lives, also after its worker was killed and
    after seamfs ctl restart, and mounts once the keeper is gone."""
    cat = seamfs.write_catalog(one_file_catalog(data, nginx))
    sock = tmp_path / 'ctl.sock'
    m1 = seamfs.mount(cat, options=['keeper', f'control_socket={sock}'])
    (lock,) = m1.state_dir.glob('*.mount.lock')
    lock = os.path.realpath(lock)

    def holders():
        """Which of the keeper and its worker have the lock file open."""
        found = set()
        for pid in (m1.pid, m1.worker_pid()):
            for fd in os.listdir(f'/proc/{pid}/fd'):
                try:
                    if os.readlink(f'/proc/{pid}/fd/{fd}') == lock:
                        found.add(pid)
                except OSError:
                    pass
        return found

    def refused():
        r, _ = second_daemon(seamfs, cat, m1.mnt, True)
        assert r.returncode == 1 and f'pid {m1.pid}' in r.stderr, (r.returncode, r.stderr)
        assert len(mounts_at(m1.mnt)) == 1, mounts_at(m1.mnt)

    assert holders() == {m1.pid}
    refused()
    w = m1.worker_pid()
    os.kill(w, signal.SIGKILL)
    wait_until(lambda: m1.worker_pid() != w, MOUNT_WAIT, 'the next worker serving')
    assert holders() == {m1.pid}
    refused()
    w = m1.worker_pid()
    ctl = subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), 'restart', '--wait'],
                         capture_output=True, text=True, timeout=120)
    assert ctl.returncode == 0, ctl
    assert m1.worker_pid() != w
    assert holders() == {m1.pid}
    refused()
    assert bounded(lambda: sha256_file(m1.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    # the keeper gone (its worker with it): the mountpoint mounts again
    m1.crash()
    m2 = seamfs.mount(cat, mnt=m1.mnt, wait=False)
    wait_until(lambda: ' main: mounted ' in m2.log() or m2.proc.poll() is not None,
               MOUNT_WAIT, 'the second daemon to mount')
    m2.wait_mounted()
    assert bounded(lambda: sha256_file(m2.path('mid.bin')), 30, 'read') == data['mid.bin'].sha256
    assert open(lock).read().split() == [str(m2.pid)]


def test_two_mountpoints_share_one_state_dir(seamfs, data, nginx):
    """One catalog on two mountpoints and another catalog on a third, one
    state_dir: all serve; the catalog's state file is shared, each
    mountpoint has its own lock naming its daemon."""
    names = ['mid.bin', 'odd.bin']
    cat = seamfs.write_catalog(catalog(*[asset(n, n, nginx.url(n)) for n in names]))
    other = seamfs.write_catalog(catalog(asset('page', 'page.bin', nginx.url('page.bin'))))
    ms = [seamfs.mount(cat, mnt=seamfs.new_mountpoint('mnt-a'), wait=False),
          seamfs.mount(cat, mnt=seamfs.new_mountpoint('mnt-b'), wait=False),
          seamfs.mount(other, mnt=seamfs.new_mountpoint('mnt-c'), wait=False)]
    for m in ms:
        m.wait_mounted(MOUNT_WAIT)
    for m in ms[:2]:
        for n in names:
            assert bounded(lambda: sha256_file(m.path(n)), 30, n) == data[n].sha256
    assert bounded(lambda: sha256_file(ms[2].path('page.bin')), 30, 'page') == \
        data['page.bin'].sha256
    state = seamfs.state_dir
    files = sorted(p.name for p in state.glob('*.state.json'))
    assert len(files) == 2, files
    shared = json.loads(next(state.glob(f'{cat.name}-*.state.json')).read_text())
    assert sorted(shared['assets']) == sorted(names)
    locks = {p.read_text().split()[0] for p in state.glob('*.mount.lock')}
    assert locks == {str(m.pid) for m in ms}


def test_shared_state_file_keeps_both_daemons_records(seamfs, data, nginx, origin):
    """Two daemons of one catalog file save its state at about the same time:
    the first (whose probe the origin delays) opened the state before the
    second saved, and saves after it.  Its save merges under the lock: the
    second's record is kept, not overwritten."""
    cat = seamfs.dir / 'shared.json'
    cat.write_text(json.dumps(catalog(asset('slow', 'slow.bin', origin.url('odd.bin')))))
    origin.rule('/odd.bin', delay_ms=3000)
    m1 = seamfs.mount(cat, mnt=seamfs.new_mountpoint('mnt-a'), wait=False)
    time.sleep(0.7)      # m1 has read the (empty) state and waits for its probe
    assert m1.proc.poll() is None, m1.log()
    cat.write_text(json.dumps(catalog(asset('fast', 'fast.bin', nginx.url('mid.bin')))))
    m2 = seamfs.mount(cat, mnt=seamfs.new_mountpoint('mnt-b'))
    assert bounded(lambda: sha256_file(m2.path('fast.bin')), 30, 'fast') == data['mid.bin'].sha256
    m1.wait_mounted(MOUNT_WAIT)
    origin.clear()       # reads are not to wait
    assert bounded(lambda: sha256_file(m1.path('slow.bin')), 30, 'slow') == data['odd.bin'].sha256
    (path,) = seamfs.state_dir.glob('shared.json-*.state.json')
    got = json.loads(path.read_text())['assets']
    assert sorted(got) == ['fast', 'slow'], got
    assert got['slow']['size'] == data['odd.bin'].size
    assert got['fast']['size'] == data['mid.bin'].size
