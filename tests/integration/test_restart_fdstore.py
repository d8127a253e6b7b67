"""The service manager's file-descriptor store as the other holder of the
FUSE connection (docs/restart.md): the keeper stores the connection and its
saved INIT (FDSTORE=1, FDNAME=fuse and fuse-init); when the keeper and its
worker are killed, the mount stays and a reader pauses; a seamfs started
with those descriptors (LISTEN_FDS, LISTEN_FDNAMES) serves the same mount
again, and the reader goes on with every byte right. A stop removes them
(FDSTOREREMOVE=1) and unmounts.

systemd is not PID 1 where this runs (CI containers): the store is played by
the test, a NOTIFY_SOCKET listener that keeps the descriptors it receives
(SCM_RIGHTS), as systemd does, and hands them to the next seamfs as fds 3
and 4 through an exec wrapper that sets LISTEN_PID to seamfs's own pid.
Without the store (a seamfs before it) the test fails waiting for FDSTORE=1.
"""

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import (MIB, EXIT_WAIT, Mount, asset, catalog, daemon_env, is_seamfs_mounted,
                      mounts_at, pid_lives, tail, wait_until)

RATE = str(6 * MIB)  # per answer: the 64 MiB file takes some 10 s to read

# Puts the descriptors named in argv[1] at 3, 4, ... and execs argv[2:]
# with LISTEN_PID naming the process systemd would have started.
WRAPPER = '''
import fcntl, os, sys
high = [fcntl.fcntl(int(f), fcntl.F_DUPFD_CLOEXEC, 10) for f in sys.argv[1].split(",")]
for i, f in enumerate(high):
    os.dup2(f, 3 + i)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])
'''


class FakeStore:
    """A NOTIFY_SOCKET that keeps FDSTORE=1 descriptors by FDNAME, closes
    them on FDSTOREREMOVE=1, and records every message."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='sdfd')  # sun_path is 108 bytes
        self.address = os.path.join(self.dir, 'notify')
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.address)
        self.fds = {}        # FDNAME -> [fd]
        self.messages = []   # (monotonic time, {VAR: value})

    def _receive(self, timeout):
        self.sock.settimeout(timeout)
        try:
            raw, fds, _, _ = socket.recv_fds(self.sock, 4096, 8)
        except socket.timeout:
            return None
        msg = dict(line.split('=', 1) for line in raw.decode().split('\n') if '=' in line)
        name = msg.get('FDNAME', 'stored')
        if msg.get('FDSTORE') == '1':
            self.fds.setdefault(name, []).extend(fds)
        else:
            for fd in fds:
                os.close(fd)
        if msg.get('FDSTOREREMOVE') == '1':
            for fd in self.fds.pop(name, []):
                os.close(fd)
        self.messages.append((time.monotonic(), msg))
        return msg

    def until(self, pred, timeout, what):
        """Reads messages until pred(msg) holds; the time it came."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f'no {what} within {timeout:.0f} s; so far '
                            f'{[m for _, m in self.messages]}')
            msg = self._receive(min(left, 0.2))
            if msg is not None and pred(msg):
                return self.messages[-1][0]

    def kept(self):
        """The stored descriptors, the connection first, and their names."""
        names = ['fuse', 'fuse-init']
        assert all(len(self.fds.get(n, [])) == 1 for n in names), self.fds
        return [self.fds[n][0] for n in names], names

    def close(self):
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)
        self.fds = {}
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class TimedReader:
    """Reads a file through the mount in a thread, 1 MiB at a time, hashing
    every byte and noting when each read returned."""

    def __init__(self, path):
        self.path, self.times, self.error, self.digest = path, [], None, None
        self.offset = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        h = hashlib.sha256()
        try:
            with open(self.path, 'rb', buffering=0) as f:
                while True:
                    b = f.read(MIB)
                    self.times.append(time.monotonic())
                    if not b:
                        break
                    h.update(b)
                    self.offset += len(b)
            self.digest = h.hexdigest()
        except OSError as e:
            self.error = e

    def join(self, timeout):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f'the reader still reads after {timeout} s'
        assert self.error is None, f'the reader saw {self.error!r}'

    def pause(self, start, end):
        """The longest time between two reads' returns that ended within
        [start, end]: the pause (reads from the page cache may go on for a
        while after a kill)."""
        pairs = zip(self.times, self.times[1:])
        return max((b - a for a, b in pairs if start <= b <= end), default=0.0)


def keeper_child(pid):
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None


def start_from_store(seamfs, store, argv, stderr, env):
    """seamfs started as systemd starts it with a store: the kept
    descriptors at 3 and 4, LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID."""
    fds, names = store.kept()
    env = dict(env, LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=':'.join(names))
    with open(stderr, 'ab') as err:
        return subprocess.Popen([sys.executable, '-c', WRAPPER, ','.join(map(str, fds))] + argv,
                                stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                pass_fds=fds, start_new_session=True, env=env)


def kill_keeper_and_worker(m):
    keeper, worker = m.proc.pid, m.worker_pid()
    t = time.monotonic()
    os.kill(keeper, signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)
    m.wait_exit(EXIT_WAIT)
    wait_until(lambda: not pid_lives(worker), EXIT_WAIT, f'worker pid {worker} gone')
    return t, worker


def test_keeper_killed_the_store_keeps_the_mount(seamfs, data, make_origin, tmp_path):
    o = make_origin(data.dir, ['--rate', RATE])
    big = data['big.bin']
    cat = seamfs.write_catalog(catalog(asset('big', 'big.bin', o.url('big.bin'),
                                             size=big.size)))
    store = FakeStore()
    mnt = seamfs.new_mountpoint()
    sock = tmp_path / 'ctl.sock'
    argv = seamfs.argv(cat, mnt, read_timeout=60, options=['keeper', f'control_socket={sock}'])
    env = {'NOTIFY_SOCKET': store.address, 'FDSTORE': '2'}
    first = Mount(argv, cat, mnt, seamfs.state_dir, seamfs.dir / 'keeper-1.stderr', env)
    seamfs.mounts.append(first)
    mounts, reader = [first], None
    try:
        first.start()
        store.until(lambda m: m.get('FDNAME') == 'fuse-init', 10, 'FDSTORE=1 FDNAME=fuse-init')
        store.until(lambda m: 'READY' in m, 30, 'READY=1')
        store.kept()
        reader = TimedReader(first.path('big.bin'))
        wait_until(lambda: reader.offset > 8 * MIB or reader.error, 60, 'the reader past 8 MiB')
        pauses, m = [], first
        for n in (2, 3):
            killed, worker = kill_keeper_and_worker(m)
            # the store's copy keeps the connection: the mount stays
            assert is_seamfs_mounted(mnt) and reader.error is None, reader.error
            time.sleep(0.3)  # a RestartSec=
            started = time.monotonic()
            nxt = Mount(argv, cat, mnt, seamfs.state_dir, seamfs.dir / f'keeper-{n}.stderr')
            nxt.proc = start_from_store(seamfs, store, argv, nxt.stderr_path,
                                        {**daemon_env(), **env})
            nxt.mount_id = m.mount_id
            seamfs.mounts.append(nxt)
            mounts.append(nxt)
            ready = store.until(lambda msg: 'READY' in msg, 30, 'READY=1 of the next keeper')
            st = nxt.status()
            assert st['worker_pid'] == keeper_child(nxt.proc.pid) != worker, st
            assert st['keeper']['pid'] == nxt.proc.pid and st['keeper']['restarts'] == 1, st
            assert 'ended with its keeper' in st['keeper']['last_end'], st
            assert 'serving ' + str(mnt) + ' again on the connection' in nxt.log()
            pauses.append((killed, ready, ready - started, ready - killed))
            m = nxt
            time.sleep(1.0)
        # an upgrade under the keeper that took over: the binary on disk,
        # handed the kept INIT copy
        w = m.worker_pid()
        ctl = subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), 'restart', '--wait'],
                             capture_output=True, text=True, timeout=120)
        assert ctl.returncode == 0, ctl
        st = m.status()
        assert st['worker_pid'] not in (w, None) and st['keeper']['restarts'] == 2, st
        reader.join(120)
        assert reader.digest == big.sha256
        again = TimedReader(m.path('big.bin'))
        again.join(120)
        assert again.digest == big.sha256
        for killed, ready, start, total in pauses:
            # what the reader saw: the kill, the 0.3 s wait, the start, and
            # the resent read served by a new core
            print(f'fdstore resume: start to READY {start * 1000:.0f} ms, kill to READY '
                  f'{total * 1000:.0f} ms, reader pause '
                  f'{reader.pause(killed, ready + 1.0) * 1000:.0f} ms')
        # a stop: the store is emptied and the mount ends
        m.proc.send_signal(signal.SIGTERM)
        store.until(lambda msg: msg.get('FDSTOREREMOVE') == '1' and
                    msg.get('FDNAME') == 'fuse-init', EXIT_WAIT, 'FDSTOREREMOVE=1')
        assert m.wait_exit(EXIT_WAIT) == 0, tail(m.log())
        assert store.fds == {}
        wait_until(lambda: not mounts_at(mnt), EXIT_WAIT, 'the mount gone')
    finally:
        store.close()   # the connection ends with the last copy
        if reader:
            reader.thread.join(10)


def test_unmount_empties_the_store_and_an_ended_connection_is_not_served(seamfs, data):
    """fusermount3 -u (an unmount request): the keeper removes what it
    stored. A seamfs handed that connection anyway (ended: POLLERR) gives it
    up and mounts anew."""
    mid = data['mid.bin']
    cat = seamfs.write_catalog(catalog(asset('mid', 'mid.bin', local=mid.path)))
    store = FakeStore()
    mnt = seamfs.new_mountpoint()
    argv = seamfs.argv(cat, mnt, options=['keeper'])
    env = {'NOTIFY_SOCKET': store.address, 'FDSTORE': '2'}
    first = Mount(argv, cat, mnt, seamfs.state_dir, seamfs.dir / 'keeper-1.stderr', env)
    seamfs.mounts.append(first)
    kept = []
    try:
        first.start()
        store.until(lambda m: m.get('FDNAME') == 'fuse-init', 10, 'FDSTORE=1 FDNAME=fuse-init')
        kept = [os.dup(fd) for fd in store.kept()[0]]
        assert first.unmount() == 0, tail(first.log())
        store.until(lambda m: m.get('FDSTOREREMOVE') == '1' and m.get('FDNAME') == 'fuse-init',
                    EXIT_WAIT, 'FDSTOREREMOVE=1')
        assert store.fds == {}
        store.fds = {'fuse': [kept[0]], 'fuse-init': [kept[1]]}
        kept = []
        nxt = Mount(argv, cat, mnt, seamfs.state_dir, seamfs.dir / 'keeper-2.stderr')
        nxt.proc = start_from_store(seamfs, store, argv, nxt.stderr_path,
                                    {**daemon_env(), **env})
        seamfs.mounts.append(nxt)
        store.until(lambda msg: 'READY' in msg, 30, 'READY=1 of a fresh mount')
        assert 'a connection that has ended' in nxt.log(), tail(nxt.log())
        nxt.mount_id = mounts_at(mnt)[-1].mount_id
        assert nxt.status()['keeper']['restarts'] == 0
        with open(nxt.path('mid.bin'), 'rb') as f:
            assert hashlib.sha256(f.read()).hexdigest() == mid.sha256
        assert nxt.unmount() == 0
    finally:
        for fd in kept:
            os.close(fd)
        store.close()


def test_unit_keeps_the_store_across_a_crash():
    """contrib/systemd's unit: a store with room for both descriptors, the
    room told to systemd 252 too, and no ExecStopPost that would unmount
    the kept mount before Restart= starts the next keeper."""
    from pathlib import Path
    unit = (Path(__file__).resolve().parents[2] / 'contrib' / 'systemd' /
            'seamfs@.service').read_text()
    lines = unit.splitlines()
    assert 'FileDescriptorStoreMax=2' in lines and 'Environment=FDSTORE=2' in lines
    assert 'Type=notify' in lines and 'NotifyAccess=all' in lines
    post = [x for x in lines if x.startswith('ExecStopPost=')]
    assert post and all('SERVICE_RESULT' in x for x in post if 'fusermount3' in x), post
