"""Helpers the benchmark drivers share (cutover.py, soak.py): messages,
the daemon's environment, whether a mount is up, a bounded unmount.
Standard library only."""

import os
import subprocess
import sys
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
