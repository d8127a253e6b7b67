"""Running under systemd: the unit files, and the sd_notify handshake.

The daemon is started the way a Type=notify unit starts it: without -f and
with NOTIFY_SOCKET naming a Unix datagram socket, which the test listens on
in place of systemd. It must stay the process that was started (no fork),
send READY=1 only once the mount answers (a file of the mount is stat()ed
and read through at the moment READY=1 arrives), a STATUS= line, and
STOPPING=1 when SIGTERM stops it.

The unit files are checked with `systemd-analyze verify`, which works
without a running systemd (CI runs in a container where systemd is not
PID 1): the service's ExecStart is pointed at the built binary, since
/usr/local/bin/seamfs is there only after meson install, and any line
systemd-analyze prints is a failure, its exit code being 0 for warnings.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (MOUNT_WAIT, EXIT_WAIT, Mount, asset, bounded, catalog, daemon_env,
                      is_seamfs_mounted, mounts_at, sha256_file, tail)

UNITS = Path(__file__).resolve().parents[2] / 'contrib' / 'systemd'


class Listener:
    """A NOTIFY_SOCKET: a datagram socket (a path, or an abstract name)."""

    def __init__(self, abstract=False):
        self.dir = tempfile.mkdtemp(prefix='sdn')   # short: sun_path is 108 bytes
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f'seamfs-test-{os.getpid()}-{id(self)}'
            self.sock.bind('\0' + name)
            self.address = '@' + name
        else:
            self.address = os.path.join(self.dir, 'notify')
            self.sock.bind(self.address)
        self.messages = []

    def next(self, timeout, proc=None):
        """The next datagram's lines as a dict; fails after timeout or when
        proc exits first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f'no notify message within {timeout:.0f} s; so far {self.messages}')
            self.sock.settimeout(min(left, 0.2))
            try:
                raw = self.sock.recv(4096).decode()
            except socket.timeout:
                if proc is not None and proc.poll() is not None:
                    pytest.fail(f'seamfs exited ({proc.returncode}) before notifying; '
                                f'so far {self.messages}')
                continue
            msg = dict(line.split('=', 1) for line in raw.split('\n') if '=' in line)
            self.messages.append(msg)
            return msg

    def until(self, key, timeout, proc=None, on_message=None):
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next(max(0.1, deadline - time.monotonic()), proc)
            if on_message:
                on_message(msg)
            if key in msg:
                return msg

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_managed(seamfs, cat, listener, extra_opts=()):
    mnt = seamfs.new_mountpoint()
    argv = seamfs.argv(cat, mnt, options=extra_opts, foreground=False)
    m = Mount(argv, cat, mnt, seamfs.state_dir, seamfs.dir / 'managed.stderr')
    seamfs.mounts.append(m)           # unmounted by the fixture, also on failure
    env = dict(daemon_env(), NOTIFY_SOCKET=listener.address)
    with open(m.stderr_path, 'ab') as err:
        m.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                  start_new_session=True, env=env)
    return m


@pytest.mark.parametrize('abstract', [False, True], ids=['path', 'abstract'])
def test_ready_after_mount_stopping_on_sigterm(seamfs, nginx, data, abstract):
    listener = Listener(abstract)
    try:
        cat = seamfs.write_catalog(catalog(
            asset('odd', 'Movies/odd.bin', nginx.url('odd.bin')),
            asset('mid', 'Movies/mid.bin', local=data['mid.bin'].path)))
        m = start_managed(seamfs, cat, listener)
        seen = {}

        def at_ready(msg):
            # the moment READY=1 is in: the mount must answer already
            if 'READY' in msg:
                seen['mounted'] = is_seamfs_mounted(m.mnt)
                seen['stat'] = bounded(lambda: os.stat(m.path('Movies/odd.bin')).st_size, 10,
                                       'stat at READY=1')

        ready = listener.until('READY', MOUNT_WAIT, m.proc, at_ready)
        assert ready['READY'] == '1'
        assert seen == {'mounted': True, 'stat': data['odd.bin'].size}
        # a status line before READY=1 (discovering) and one with it
        assert any('STATUS' in msg for msg in listener.messages[:-1]), listener.messages
        status = listener.until('STATUS', 5, m.proc)['STATUS']
        assert '2 of 2 assets' in status, status
        # no fork: the process systemd would watch is the one serving
        assert m.proc.poll() is None
        m.mount_id = mounts_at(m.mnt)[-1].mount_id
        for rel, name in (('Movies/odd.bin', 'odd.bin'), ('Movies/mid.bin', 'mid.bin')):
            got = bounded(lambda: sha256_file(m.path(rel)), 30, f'read {rel}')
            assert got == data[name].sha256
        m.proc.send_signal(signal.SIGTERM)
        stopping = listener.until('STOPPING', EXIT_WAIT, None)
        assert stopping['STOPPING'] == '1'
        assert m.wait_exit(EXIT_WAIT) == 0, tail(m.log())
        assert not is_seamfs_mounted(m.mnt)
        # the log went to stderr (the journal under systemd), not to syslog
        assert 'mounted' in m.log()
    finally:
        listener.close()


def test_reload_status_and_bad_start(seamfs, data):
    """SIGHUP under a manager: a STATUS= line about the reload. A start that
    fails sends no READY=1 and exits with its code."""
    listener = Listener()
    try:
        cat = seamfs.write_catalog(catalog(asset('mid', 'Movies/mid.bin',
                                                 local=data['mid.bin'].path)))
        m = start_managed(seamfs, cat, listener)
        listener.until('READY', MOUNT_WAIT, m.proc)
        assert 'mounted' in listener.until('STATUS', 5, m.proc)['STATUS']
        m.mount_id = mounts_at(m.mnt)[-1].mount_id
        m.proc.send_signal(signal.SIGHUP)
        msg = listener.until('STATUS', 10, m.proc)
        assert 'reloaded' in msg['STATUS'], msg
        assert m.proc.poll() is None
        assert bounded(lambda: sha256_file(m.path('Movies/mid.bin')), 30, 'read') == \
            data['mid.bin'].sha256
        assert m.unmount() == 0
        # fusermount3 -u: STOPPING=1 too
        assert listener.until('STOPPING', 5)['STOPPING'] == '1'

        bad = seamfs.write_catalog('{"assets": [')
        mnt2 = seamfs.new_mountpoint('mnt2')
        env = dict(daemon_env(), NOTIFY_SOCKET=listener.address)
        before = len(listener.messages)
        p = subprocess.run([seamfs.binary, str(bad), str(mnt2)], env=env, capture_output=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        assert p.returncode == 3, p.stderr
        listener.sock.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.sock.recv(4096)
        assert len(listener.messages) == before
    finally:
        listener.close()


def test_restarted_workers_tell_the_manager(seamfs, data, tmp_path):
    """With a keeper (the unit's main process), each worker after a restart
    still tells the manager how it is: the keeper a STATUS= line when the
    worker dies, the next worker READY=1 and a STATUS= line naming itself
    and the restart, after a kill -9 (a forked worker) and after seamfs ctl
    restart (the binary on disk, started with NOTIFY_SOCKET again)."""
    listener = Listener()
    sock = tmp_path / 'ctl.sock'
    try:
        cat = seamfs.write_catalog(catalog(asset('mid', 'Movies/mid.bin',
                                                 local=data['mid.bin'].path)))
        m = start_managed(seamfs, cat, listener, ['keeper', f'control_socket={sock}'])
        listener.until('READY', MOUNT_WAIT, m.proc)
        assert 'mounted' in listener.until('STATUS', 5, m.proc)['STATUS']
        m.mount_id = mounts_at(m.mnt)[-1].mount_id
        w = m.status()['worker_pid']
        os.kill(w, signal.SIGKILL)

        def status_with(text):
            while True:
                msg = listener.until('STATUS', 30, m.proc)
                if text in msg['STATUS']:
                    return msg['STATUS']
        assert f'worker pid {w} killed by signal 9' in status_with('restarting')
        line = status_with('restart 1;')
        w2 = m.status()['worker_pid']
        assert w2 != w and line.startswith(f'worker pid {w2} serves {m.mnt} again'), line
        assert 'READY' in listener.messages[-2], listener.messages[-3:]
        ctl = subprocess.run([seamfs.binary, 'ctl', '--socket', str(sock), 'restart', '--wait'],
                             capture_output=True, text=True, timeout=120)
        assert ctl.returncode == 0, ctl
        assert 'ended for an upgrade' in status_with('restarting')
        line = status_with('restart 2;')
        w3 = m.status()['worker_pid']
        assert w3 != w2 and line.startswith(f'worker pid {w3} serves {m.mnt} again'), line
        assert 'the last worker ended for an upgrade' in line, line
        assert bounded(lambda: sha256_file(m.path('Movies/mid.bin')), 30, 'read') == \
            data['mid.bin'].sha256
        assert m.unmount() == 0
        assert listener.until('STOPPING', 10)['STOPPING'] == '1'
    finally:
        listener.close()


def verify(units, tmp_path, binary):
    """systemd-analyze verify on copies of the units (ExecStart on the built
    binary); returns its output, which must be empty."""
    if not shutil.which('systemd-analyze'):
        pytest.fail('systemd-analyze is missing (contrib/setup-debian.sh installs systemd)')
    d = tmp_path / 'units'
    d.mkdir(exist_ok=True)
    paths = []
    for u in units:
        text = (UNITS / u).read_text().replace('/usr/local/bin/seamfs', os.path.abspath(binary))
        (d / u).write_text(text)
        paths.append(str(d / u))
    p = subprocess.run(['systemd-analyze', 'verify', '--man=no'] + paths, capture_output=True,
                       text=True, timeout=60, cwd=d)
    return p.returncode, (p.stdout + p.stderr).strip()


def test_units_verify(tmp_path, seamfs_bin):
    rc, out = verify(['seamfs@.service'], tmp_path, seamfs_bin)
    assert rc == 0 and out == '', out
    rc, out = verify(['srv-media.mount', 'srv-media.automount'], tmp_path, seamfs_bin)
    assert rc == 0 and out == '', out
    unit = (UNITS / 'seamfs@.service').read_text()
    for line in ('Type=notify', 'After=network-online.target', 'Wants=network-online.target',
                 'Restart=on-failure', 'ExecStart=/usr/local/bin/seamfs -f -o keeper,',
                 'ExecReload=/usr/local/bin/seamfs ctl --socket /run/seamfs/%i.sock restart --wait',
                 'KillMode=mixed',
                 '/etc/seamfs/%i.json /srv/seamfs/%i'):
        assert line in unit, line
    # the fstab line in the mount unit's comment is the README's form
    assert 'fuse.seamfs' in (UNITS / 'srv-media.mount').read_text()


def test_verify_catches_a_broken_unit(tmp_path):
    """The check above can fail: a misspelled key is reported."""
    bad = (UNITS / 'seamfs@.service').read_text().replace('Type=notify', 'Type=notiffy')
    (tmp_path / 'broken@.service').write_text(bad)
    shutil.copy(UNITS / 'seamfs@.service', tmp_path / 'seamfs@.service')
    p = subprocess.run(['systemd-analyze', 'verify', '--man=no',
                        str(tmp_path / 'broken@.service')], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert 'notiffy' in p.stdout + p.stderr
