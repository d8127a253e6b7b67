"""Helpers the benchmark drivers share (cutover.py, soak.py, scale.py):
messages, the daemon's environment, whether a mount is up, a bounded
unmount, stopping a child, the PID file for the shell trap, test data.
Standard library only."""

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time


def say(*a):
    print('==>', *a, file=sys.stderr, flush=True)


def daemon_env():
    # libcurl would send the loopback requests to a proxy
    return {k: v for k, v in os.environ.items()
            if k.lower() not in ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy')}


def fs_mounted(mnt):
    with open('/proc/mounts') as f:
        return any(ln.split()[1] == mnt and ln.split()[2] == 'fuse.seamfs' for ln in f)


def any_mounted(mnt):
    with open('/proc/mounts') as f:
        return any(ln.split()[1] == mnt for ln in f)


def unmount(mnt, tries=20):
    """fusermount3 -u, tried every 0.25 s while busy, then lazily. True when
    it went without the lazy detach."""
    for _ in range(tries):
        if not any_mounted(mnt):
            return True
        if subprocess.run(['fusermount3', '-u', mnt], capture_output=True).returncode == 0:
            return True
        time.sleep(0.25)
    subprocess.run(['fusermount3', '-uz', mnt], capture_output=True)
    return False


def stop(proc, timeout=10):
    """SIGTERM to this child, then SIGKILL; True when SIGTERM sufficed."""
    if proc is None or proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        return False


class Pids:
    """The PIDs a helper started, one a line in a file, so that its shell
    script's trap can stop them by PID should the helper die without
    cleaning up. Any thread."""

    def __init__(self, path):
        self.path = path
        self.pids = set()
        self.lock = threading.Lock()
        self._write()

    def add(self, pid):
        with self.lock:
            self.pids.add(pid)
            self._write()

    def remove(self, pid):
        with self.lock:
            self.pids.discard(pid)
            self._write()

    def _write(self):
        tmp = self.path + '.tmp'
        with open(tmp, 'w') as f:
            f.write(''.join(f'{p}\n' for p in sorted(self.pids)))
        os.replace(tmp, self.path)


def random_file(path, size_mib, mib=1 << 20):
    """A file of size_mib MiB of random bytes at path, made once and kept
    while its size matches; returns its SHA-256 (kept in PATH.sha256)."""
    if not (os.path.exists(path) and os.path.getsize(path) == size_mib * mib
            and os.path.exists(path + '.sha256')):
        say(f'generating {os.path.basename(path)} ({size_mib} MiB of random bytes)')
        h = hashlib.sha256()
        with open(path + '.tmp', 'wb') as f:
            for _ in range(size_mib):
                b = os.urandom(mib)
                h.update(b)
                f.write(b)
        os.replace(path + '.tmp', path)
        with open(path + '.sha256', 'w') as f:
            f.write(h.hexdigest() + '\n')
    with open(path + '.sha256') as f:
        return f.read().strip()
