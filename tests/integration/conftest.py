"""Harness for the seamfs integration tests.

Every test mounts the real daemon (SEAMFS_BIN) in the foreground against real
servers on 127.0.0.1: nginx for an honest origin, seam-origin (origin.py) for
faults.  The fixtures here give each test a private directory, generate the
test data once per session (random bytes, an ffmpeg clip; under meson, once
per file), start and stop the servers and the daemon, and bound every wait.
Teardown always runs: unmount with fusermount3 -u (then -uz), wait for the
daemon, SIGKILL what is left.  Processes are only ever stopped by their own
PID (or the process group the harness created for them).  Each file may run
in a pytest of its own beside the others (tests/integration/meson.build):
servers listen on ports the kernel picks, a port a test takes down stays
held (origin.hold_port), and every path is the test's own (tmp_path, or
mkdtemp for short socket paths).

Helpers that tests import (`from conftest import ...`) live at the top.
"""

import dataclasses
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from origin import hold_port as held_port   # tests/integration/origin.py

HERE = Path(__file__).resolve().parent
KIB = 1024
MIB = 1024 * 1024

# How long the harness waits for things; every wait has one of these bounds.
MOUNT_WAIT = 15.0       # daemon start until it shows in /proc/self/mountinfo
EXIT_WAIT = 10.0        # daemon exit after unmount / SIGTERM
SERVER_WAIT = 10.0      # nginx / origin accepting connections


# --------------------------------------------------------------------------
# Small helpers (importable by the tests)
# --------------------------------------------------------------------------

def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path, chunk=MIB):
    """SHA-256 of a file read sequentially with plain read() calls."""
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def bounded(fn, timeout, what):
    """Run fn() in a helper thread and return its result, or fail the test if
    it has not finished after `timeout` seconds.  Exceptions from fn propagate.

    Reads through a FUSE mount can block in the kernel; doing them here keeps
    the test in control so teardown (which aborts the mount and unblocks the
    thread) still runs."""
    box = {}

    def run():
        try:
            box['value'] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box['error'] = e

    t = threading.Thread(target=run, name='bounded:' + what, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f'{what}: still blocked after {timeout:.0f} s')
    if 'error' in box:
        raise box['error']
    return box['value']


def wait_until(pred, timeout, what, interval=0.05):
    """Poll pred() until it returns something true; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f'timed out after {timeout:.0f} s waiting for {what}')
        time.sleep(interval)


def free_port():
    """A port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture
def dead_port():
    """A port nothing answers on for the whole test: held, not listening
    (origin.hold_port), so no server of a test running beside this one
    can get it."""
    s = held_port(0)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def can_connect(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.5):
            return True
    except OSError:
        return False


def _unescape_mount_field(s):
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), s)


@dataclasses.dataclass
class MountEntry:
    mount_id: int
    mountpoint: str
    fstype: str
    source: str
    options: str


def _canonical(path):
    # Do not stat the mountpoint itself: a dead FUSE mount answers ENOTCONN.
    path = os.path.abspath(str(path))
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def mounts_at(path):
    """Entries of /proc/self/mountinfo whose mount point is `path`."""
    want = _canonical(path)
    out = []
    with open('/proc/self/mountinfo', encoding='utf-8', errors='surrogateescape') as f:
        for line in f:
            left, _, right = line.rstrip('\n').partition(' - ')
            lf, rf = left.split(' '), right.split(' ')
            mp = _unescape_mount_field(lf[4])
            if mp == want:
                out.append(MountEntry(int(lf[0]), mp, rf[0], _unescape_mount_field(rf[1]), lf[5]))
    return out


def is_seamfs_mounted(path):
    return any(e.fstype == 'fuse.seamfs' for e in mounts_at(path))


def fusermount_unmount(mnt, tries=10):
    """fusermount3 -u, retried briefly (EBUSY right after a close), then -uz."""
    for _ in range(tries):
        if not mounts_at(mnt):
            return True
        try:
            r = subprocess.run(['fusermount3', '-u', str(mnt)], capture_output=True, timeout=5)
            if r.returncode == 0:
                return True
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.2)
    if mounts_at(mnt):
        subprocess.run(['fusermount3', '-uz', str(mnt)], capture_output=True, timeout=5)
    return False


def group_members(pgid):
    """The live processes of process group pgid, from /proc.  A zombie does
    not count: it holds no socket, and this machine's init may take seconds
    to reap an orphan."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat') as f:
                stat = f.read()
        except OSError:
            continue
        # after "(comm)": state ppid pgrp ...; comm may hold spaces and ')'
        fields = stat[stat.rindex(')') + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ('Z', 'X'):
            found.append(int(name))
    return found


def pid_lives(pid):
    """Whether any thread of process pid is not a zombie. Its descriptors
    (a FUSE connection) are closed only once the last thread has exited:
    a leader that exited first shows as a zombie while the others run."""
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f'/proc/{pid}/task/{tid}/stat') as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(')') + 2:].split()[0] not in ('Z', 'X'):
            return True
    return False


def _wait_exited_unreaped(proc, timeout):
    """Waits (bounded) until the child exits, leaving it a zombie: while it
    is one its pid, hence its process group's id, names nobody else."""
    deadline = time.monotonic() + timeout
    while proc.returncode is None:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def stop_process(proc, sig=signal.SIGTERM, timeout=EXIT_WAIT, group=False):
    """Signal one child we started, wait bounded, then SIGKILL it.  group:
    the child leads a process group of its own (start_new_session) and may
    have forked workers (nginx): once it exited, or after the bound, what
    is left of its group gets SIGKILL, and the wait goes on until no process
    of the group lives.  A worker that outlives its master keeps serving the
    port; a group that survives SIGKILL raises RuntimeError."""
    if proc.poll() is None and sig is not None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
    if group:
        return _stop_group(proc, timeout)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        return proc.wait(5)
    except subprocess.TimeoutExpired:
        return None


def _stop_group(proc, timeout):
    pgid = proc.pid
    _wait_exited_unreaped(proc, timeout)
    if group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = group_members(pgid)
    try:
        rc = proc.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
    if left:
        raise RuntimeError(f'process group {pgid} ({proc.args[0]}): pids {left} '
                           f'survived SIGKILL')
    return rc


def tail(text, lines=80):
    return '\n'.join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------
# Session data
# --------------------------------------------------------------------------

@dataclasses.dataclass
class DataFile:
    name: str
    path: Path
    size: int
    sha256: str

    def read(self):
        return self.path.read_bytes()


class Data:
    """Files generated once per session under a pytest tmp dir."""

    SIZES = {
        'empty.bin': 0,
        'one.bin': 1,
        'page.bin': 4095,
        'mib1.bin': MIB + 1,
        'odd.bin': 3 * MIB + 12345,
        'mid.bin': 8 * MIB + 77,
        'big.bin': 64 * MIB,
    }

    def __init__(self, root):
        self.dir = Path(root)
        self.files = {}
        self._cache = {}

    def add(self, name):
        p = self.dir / name
        self.files[name] = DataFile(name, p, p.stat().st_size, sha256_file(p))
        return self.files[name]

    def __getitem__(self, name):
        return self.files[name]

    def bytes(self, name):
        """Contents of a data file, read once and kept (for byte compares)."""
        if name not in self._cache:
            self._cache[name] = self.files[name].read()
        return self._cache[name]


def make_clip(path, seconds, size, log, bframes=False):
    """An H.264 + AAC Matroska clip from lavfi sources (testsrc2 + sine).
    bframes: with B-frames, as most real films are (x264 veryfast, whose
    Matroska packets carry no DTS), not ultrafast's none."""
    preset = ['-preset', 'veryfast', '-bf', '3'] if bframes else ['-preset', 'ultrafast']
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-f', 'lavfi', '-i', f'testsrc2=size={size}:rate=25:duration={seconds}',
           '-f', 'lavfi', '-i', f'sine=frequency=440:sample_rate=48000:duration={seconds}',
           '-c:v', 'libx264'] + preset + ['-pix_fmt', 'yuv420p', '-g', '50',
           '-c:a', 'aac', '-b:a', '96k', '-shortest', str(path)]
    with open(log, 'wb') as lf:
        r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=90)
    if r.returncode != 0:
        pytest.fail(f'ffmpeg failed ({r.returncode}): {Path(log).read_text(errors="replace")}')


@pytest.fixture(scope='session')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('data')
    d = Data(root)
    for name, size in Data.SIZES.items():
        with open(root / name, 'wb') as f:
            left = size
            while left:
                n = min(left, 16 * MIB)
                f.write(os.urandom(n))
                left -= n
        d.add(name)
    make_clip(root / 'clip.mkv', 20, '320x240', tmp_path_factory.mktemp('ffmpeg') / 'ffmpeg.log')
    d.add('clip.mkv')
    return d


# A viewer in its own process (its own client, so its own session): reads
# the whole file with O_DIRECT, so that its bytes come through seamfs and not
# from a page cache another reader filled, and prints their SHA-256.
VIEWER = r'''
import hashlib, os, sys
h = hashlib.sha256()
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    h.update(b)
os.close(fd)
print(h.hexdigest(), flush=True)
'''


# A playback that holds its place: opens the file with O_DIRECT, reads the
# first 64 KiB, says "ready", waits for a line on stdin, reads on to the end
# and prints the SHA-256 of all of it.
PAUSED_READER = r'''
import hashlib, os, sys
h = hashlib.sha256()
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
h.update(os.read(fd, 65536))
print('ready', flush=True)
sys.stdin.readline()
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    h.update(b)
os.close(fd)
print(h.hexdigest(), flush=True)
'''


class PausedReaders:
    """PAUSED_READERs (`with PausedReaders(paths) as r:`), each started and
    "ready" before the next; r.go(sha) lets them read on and checks that
    each exits 0 with that SHA-256. Those left are killed at the end, also
    on failure."""

    def __init__(self, paths, ready_timeout=30):
        self.paths = [str(p) for p in paths]
        self.ready_timeout = ready_timeout
        self.procs = []

    def __enter__(self):
        try:
            for path in self.paths:
                p = subprocess.Popen([sys.executable, '-c', PAUSED_READER, path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                self.procs.append(p)
                assert bounded(p.stdout.readline, self.ready_timeout,
                               'reader ready').strip() == 'ready'
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def go(self, sha, timeout=90):
        for p in self.procs:
            p.stdin.write('go\n')
            p.stdin.flush()
        for p in self.procs:
            out, _ = p.communicate(timeout=timeout)
            assert p.returncode == 0, f'reader exited {p.returncode}'
            assert out.split()[-1] == sha

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        return False


def run_viewers(paths, sha, timeout=120):
    """A VIEWER per path, all at once; asserts that each one exits 0 having
    read bytes whose SHA-256 is sha. Kills those left, also on failure."""
    procs = []
    try:
        for p in paths:
            procs.append(subprocess.Popen([sys.executable, '-c', VIEWER, str(p)],
                                          stdout=subprocess.PIPE, text=True))
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            assert p.returncode == 0, f'viewer exited {p.returncode}'
            assert out.split()[-1] == sha
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------

AUTH_TOKEN = 'Bearer abc'

NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 512; }}
http {{
    log_format seam '$remote_addr "$request" $status $body_bytes_sent '
                    '"$http_range" "$http_authorization"';
    access_log {dir}/access.log seam;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    types {{ }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        # Same files, but only for a client that sends the provider header.
        location /auth/ {{
            if ($http_authorization != "{token}") {{ return 401; }}
            alias {root}/;
        }}
    }}
}}
"""


def nginx_conf(server, connections=512):
    """An nginx.conf template for Nginx(conf=...) (placeholders dir, user,
    port, root; braces doubled), its one server block made of the lines
    `server` (each indented by 8 and ending in a newline)."""
    temps = ''.join(f'    {kind}_temp_path {{dir}}/tmp/{sub};\n'
                    for kind, sub in (('client_body', 'body'), ('proxy', 'proxy'),
                                      ('fastcgi', 'fastcgi'), ('uwsgi', 'uwsgi'),
                                      ('scgi', 'scgi')))
    return ('daemon off;\nmaster_process on;\nworker_processes 1;\n{user}\n'
            'pid {dir}/nginx.pid;\nerror_log {dir}/error.log info;\n'
            f'events {{{{ worker_connections {connections}; }}}}\n'
            'http {{\n    access_log {dir}/access.log;\n' + temps +
            '    types {{ }}\n    default_type application/octet-stream;\n'
            '    server {{\n' + server + '    }}\n}}\n')


class Nginx:
    """A private nginx (daemon off) serving `root` on 127.0.0.1:<free port>."""

    def __init__(self, root, workdir, conf=None, scheme='http'):
        self.conf = conf or NGINX_CONF
        self.scheme = scheme
        self.root = Path(root)
        self.dir = Path(workdir)
        self.proc = None
        self.port = None
        self._held = None

    @property
    def base_url(self):
        return f'{self.scheme}://127.0.0.1:{self.port}'

    def url(self, name, auth=False):
        return f'{self.base_url}/{"auth/" if auth else ""}{name}'

    def access_log(self):
        p = self.dir / 'access.log'
        return p.read_text(errors='replace') if p.exists() else ''

    def error_log(self):
        p = self.dir / 'error.log'
        return p.read_text(errors='replace') if p.exists() else ''

    def start(self):
        (self.dir / 'tmp').mkdir(parents=True, exist_ok=True)
        user = 'user root root;' if os.geteuid() == 0 else ''
        for _attempt in range(5):
            self.port = free_port()
            conf = self.dir / 'nginx.conf'
            conf.write_text(self.conf.format(dir=self.dir, root=self.root, port=self.port,
                                             user=user, token=AUTH_TOKEN))
            (self.dir / 'error.log').write_text('')
            out = open(self.dir / 'stdout.log', 'wb')
            self.proc = subprocess.Popen(
                ['nginx', '-p', str(self.dir), '-c', str(conf), '-e', str(self.dir / 'error.log')],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
            out.close()
            deadline = time.monotonic() + SERVER_WAIT
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if (self.dir / 'nginx.pid').exists() and can_connect(self.port):
                    return self
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop()
                pytest.fail(f'nginx did not accept connections within {SERVER_WAIT} s:\n'
                            f'{self.error_log()}')
            err = self.error_log() + (self.dir / 'stdout.log').read_text(errors='replace')
            if 'Address already in use' not in err:
                pytest.fail(f'nginx exited with {self.proc.returncode}:\n{err}')
            self.proc = None  # lost the port race; try another one
        pytest.fail('nginx: no free port after 5 attempts')

    def stop(self, hold_port=False):
        """Stops nginx.  hold_port: for a server that dies mid-test, the port
        stays held (origin.hold_port) until the next stop(), the fixture's
        at the latest."""
        if self._held is not None:
            self._held.close()
            self._held = None
        if self.proc is not None:
            stop_process(self.proc, signal.SIGTERM, EXIT_WAIT, group=True)
            self.proc = None
            if hold_port:
                self._held = held_port(self.port)


@pytest.fixture
def nginx(data, tmp_path):
    n = Nginx(data.dir, tmp_path / 'nginx')
    try:
        n.start()
        yield n
    finally:
        n.stop()


def origin_binary():
    b = os.environ.get('SEAM_ORIGIN_BIN')
    if not b and os.environ.get('SEAMFS_BIN'):
        b = str(Path(os.environ['SEAMFS_BIN']).parent / 'tests' / 'server' / 'seam-origin')
    return b


@pytest.fixture
def origin_bin():
    """The seam-origin binary (tests that start several origins)."""
    b = origin_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.fail(f'seam-origin binary not found (SEAM_ORIGIN_BIN={b!r})')
    return b


@pytest.fixture
def make_origin(origin_bin, tmp_path):
    """Starts seam-origins serving a directory (make_origin(root), with
    seam-origin's extra_args if given); stops them all at the end of the
    test."""
    from origin import Origin  # tests/integration/origin.py
    started = []

    def make(root, extra_args=()):
        wd = tmp_path / f'origin{len(started) + 1}'
        wd.mkdir()
        o = Origin(origin_bin, str(root), str(wd), extra_args=extra_args)
        started.append(o)
        o.start()
        return o
    try:
        yield make
    finally:
        for o in started:
            o.stop()


@pytest.fixture
def origin(data, tmp_path):
    """The fault-injecting origin serving the session data directory."""
    from origin import Origin  # tests/integration/origin.py
    b = origin_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.fail(f'seam-origin binary not found (SEAM_ORIGIN_BIN={b!r})')
    workdir = tmp_path / 'origin'
    workdir.mkdir()
    o = Origin(b, str(data.dir), str(workdir))
    with o:
        yield o


# --------------------------------------------------------------------------
# The daemon
# --------------------------------------------------------------------------

def seamfs_binary():
    b = os.environ.get('SEAMFS_BIN')
    if not b:
        pytest.skip('SEAMFS_BIN is not set')
    if not os.access(b, os.X_OK):
        pytest.fail(f'SEAMFS_BIN={b} is not an executable file')
    return os.path.abspath(b)


@pytest.fixture
def seamfs_bin():
    return seamfs_binary()


def daemon_env():
    """The environment for seamfs: no proxy variables (libcurl would send the
    loopback requests to a proxy)."""
    return {k: v for k, v in os.environ.items()
            if k.lower() not in ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy')}


KEEPER_DEFAULT = True    # seamfs's default for the option keeper


def keeper_in(argv):
    """Whether a seamfs command line mounts under a keeper: the last
    keeper / keeper=VALUE in its -o options says, else KEEPER_DEFAULT."""
    on = KEEPER_DEFAULT
    for i, a in enumerate(argv[:-1]):
        if a != '-o':
            continue
        for o in argv[i + 1].split(','):
            if o == 'keeper' or o.startswith('keeper='):
                on = o.partition('=')[2] not in ('0', 'false', 'no')
    return on


class Mount:
    """One seamfs daemon process and its mountpoint."""

    def __init__(self, argv, catalog, mnt, state_dir, stderr_path, env=None):
        self.argv = argv
        self.env = env or {}
        self.catalog = Path(catalog)
        self.mnt = Path(mnt)
        self.state_dir = Path(state_dir) if state_dir else None
        self.stderr_path = Path(stderr_path)
        self.proc = None
        self.mount_id = None
        self.returncode = None
        self._before = set()

    @property
    def pid(self):
        """The pid the test started: the daemon without a keeper, the
        keeper with one (worker_pid() is the process that serves)."""
        return self.proc.pid

    @property
    def keeper(self):
        """Whether this mount runs under a keeper (docs/restart.md)."""
        return keeper_in(self.argv)

    def status(self, timeout=30):
        """.seamfs/status.json, read in a bounded helper thread."""
        def read():
            with open(self.path('.seamfs/status.json')) as f:
                return json.load(f)
        return bounded(read, timeout, f'{self.mnt}/.seamfs/status.json')

    def worker_pid(self, timeout=30):
        """The process that serves the mount now, as status.json names it
        (`worker_pid`): the daemon itself without a keeper, its current
        worker with one. Its children are the transcode writers; a kill of
        it is a crash the keeper recovers from."""
        return self.status(timeout)['worker_pid']

    def path(self, rel=''):
        return self.mnt / rel if rel else self.mnt

    def log(self):
        try:
            return self.stderr_path.read_text(errors='replace')
        except FileNotFoundError:
            return ''

    def start(self, wait=True, timeout=MOUNT_WAIT):
        self._before = {e.mount_id for e in mounts_at(self.mnt)}
        with open(self.stderr_path, 'ab') as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=err,
                                         stderr=err, start_new_session=True,
                                         env={**daemon_env(), **self.env})
        if wait:
            self.wait_mounted(timeout)
        return self

    def wait_mounted(self, timeout=MOUNT_WAIT):
        """Wait until a fuse.seamfs mount that was not there before start()
        appears on the mountpoint; fail with the daemon's stderr if it exits
        first or the bound passes."""
        deadline = time.monotonic() + timeout
        while True:
            ours = [e for e in mounts_at(self.mnt) if e.fstype == 'fuse.seamfs']
            new = [e for e in ours if e.mount_id not in self._before]
            # A stale mount cleared and replaced may come back under the same
            # mount id (ids are reused); then a mountpoint that answers, with
            # a seamfs mount listed on it before and after, is new. (Between
            # the stale one's removal and the new mount, the directory below
            # answers: without the second look, test_stale_mount_is_cleared
            # once found no mount left, 2026-12-05.)
            if not new and ours and self._before and self._answers():
                new = [e for e in mounts_at(self.mnt) if e.fstype == 'fuse.seamfs']
            if new:
                self.mount_id = new[-1].mount_id
                if self.keeper:
                    self._wait_serving(deadline)
                return self
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                pytest.fail(f'seamfs exited with {rc} before mounting {self.mnt}; stderr:\n'
                            f'{tail(self.log())}')
            if time.monotonic() > deadline:
                pytest.fail(f'seamfs did not mount {self.mnt} within {timeout:.0f} s; stderr:\n'
                            f'{tail(self.log())}')
            time.sleep(0.05)

    def _wait_serving(self, deadline):
        """A keeper mounts before its worker has built the core and answers
        the kernel's INIT (docs/restart.md): until then a request to the
        mount waits. The mount is ready, as a daemon without a keeper is
        once it shows, when the mountpoint answers statvfs()."""
        box = {}

        def probe():
            try:
                box['ok'] = os.statvfs(self.mnt)
            except OSError as e:
                box['error'] = e

        t = threading.Thread(target=probe, name='keeper-serving', daemon=True)
        t.start()
        while t.is_alive():
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                pytest.fail(f'seamfs exited with {rc} before its worker served {self.mnt}; '
                            f'stderr:\n{tail(self.log())}')
            if time.monotonic() > deadline:
                pytest.fail(f'the worker of {self.mnt} did not serve in time; stderr:\n'
                            f'{tail(self.log())}')
            t.join(0.05)
        if 'error' in box:
            pytest.fail(f'statvfs({self.mnt}) after the mount: {box["error"]!r}; stderr:\n'
                        f'{tail(self.log())}')

    def _answers(self):
        """statvfs() of the mountpoint succeeds (a stale mount gives
        ENOTCONN); done in a thread so a hung daemon cannot block the
        harness. Not stat(): the kernel may answer it for a stale mount from
        its attribute cache, and wait_mounted() then took the stale mount
        for the new one (test_stale_mount_is_cleared failed in CI: the new
        daemon cleared it just after, and no mount was left to count)."""
        box = []

        def probe():
            try:
                box.append(os.statvfs(self.mnt))
            except OSError:
                pass

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        t.join(1.0)
        return bool(box)

    def is_mounted(self):
        return self.mount_id is not None and any(
            e.mount_id == self.mount_id for e in mounts_at(self.mnt))

    def wait_exit(self, timeout=EXIT_WAIT):
        """Wait (bounded) for the daemon to exit; returns its exit code or None."""
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def crash(self, timeout=EXIT_WAIT):
        """kill -9 of the daemon, as a crash of the whole mount: the started
        pid (with a keeper the keeper, whose worker dies with it:
        PR_SET_PDEATHSIG). Waits (bounded) until it and the worker that
        served are gone, so that the mount is dead, not dying."""
        worker = self.worker_pid() if self.keeper else None
        self.signal(signal.SIGKILL)
        rc = self.wait_exit(timeout)
        if worker is not None:
            wait_until(lambda: not pid_lives(worker), timeout, f'worker pid {worker} gone')
        return rc

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def unmount(self):
        """fusermount3 -u, wait for the daemon to exit, SIGKILL if it does not.
        Returns the daemon's exit code (or None if it had to be killed).
        Safe to call more than once and on a daemon that already died."""
        if self.proc is None:
            return None
        if self.is_mounted():
            fusermount_unmount(self.mnt)
        rc = self.wait_exit(EXIT_WAIT)
        if rc is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.is_mounted():
            subprocess.run(['fusermount3', '-uz', str(self.mnt)], capture_output=True, timeout=5)
        return rc


class Mounter:
    """Factory for mounts within one test; tears them all down at the end."""

    def __init__(self, binary, tmp_path):
        self.binary = binary
        self.dir = tmp_path
        self.mounts = []
        self.state_dir = tmp_path / 'state'
        self.state_dir.mkdir(exist_ok=True)
        self._n = 0

    def write_catalog(self, catalog, name=None):
        """Write a catalog (dict → JSON, str/bytes → verbatim); returns its path."""
        self._n += 1
        p = self.dir / (name or f'catalog-{self._n}.json')
        if isinstance(catalog, (dict, list)):
            p.write_text(json.dumps(catalog, indent=2))
        elif isinstance(catalog, bytes):
            p.write_bytes(catalog)
        else:
            p.write_text(catalog)
        return p

    def new_mountpoint(self, name='mnt'):
        p = self.dir / name
        p.mkdir(exist_ok=True)
        return p

    def argv(self, catalog, mnt, read_timeout=10, options=(), state_dir=None, foreground=True):
        opts = []
        if state_dir is not False:
            opts.append(f'state_dir={state_dir or self.state_dir}')
        if read_timeout is not None:
            opts.append(f'read_timeout={read_timeout}')
        opts.extend(options)
        # SEAMFS_TEST_KEEPER=1 (0): every mount of the suite that does not
        # say under a keeper (without one) (docs/restart.md); unset: the
        # binary's default
        choice = os.environ.get('SEAMFS_TEST_KEEPER')
        if choice in ('0', '1') and not any(o == 'keeper' or o.startswith('keeper=')
                                            for o in opts):
            opts.append('keeper' if choice == '1' else 'keeper=0')
        argv = [self.binary]
        if foreground:
            argv.append('-f')
        if opts:
            argv += ['-o', ','.join(opts)]
        return argv + [str(catalog), str(mnt)]

    def mount(self, catalog, *, read_timeout=10, options=(), state_dir=None, mnt=None,
              wait=True, env=None):
        """Start `seamfs -f -o state_dir=..,read_timeout=.. CATALOG MNT` and (by
        default) wait until it is mounted.  `catalog` is a dict, text or a path;
        env: variables the daemon gets besides the harness's."""
        if not isinstance(catalog, Path):
            catalog = self.write_catalog(catalog)
        mnt = Path(mnt) if mnt else self.new_mountpoint()
        if not mounts_at(mnt):       # a stale mount there answers ENOTCONN to stat
            mnt.mkdir(exist_ok=True)
        self._n += 1
        m = Mount(self.argv(catalog, mnt, read_timeout, options, state_dir),
                  catalog, mnt, state_dir or self.state_dir,
                  self.dir / f'seamfs-{self._n}.stderr', env)
        self.mounts.append(m)
        return m.start(wait=wait)

    def run(self, args, timeout=10, mountpoints=()):
        """Run the binary with `args`, expecting it to exit by itself.  If it
        is still running after `timeout` (it mounted when it should not have)
        it is unmounted and killed, and the test fails."""
        proc = subprocess.Popen([self.binary] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=daemon_env())
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for mp in mountpoints:
                if is_seamfs_mounted(mp):
                    fusermount_unmount(mp)
            stop_process(proc, signal.SIGTERM, 5)
            out, err = proc.communicate()
            pytest.fail(f'seamfs {args} did not exit within {timeout} s; stderr:\n'
                        f'{err.decode(errors="replace")}')
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           out.decode(errors='replace'),
                                           err.decode(errors='replace'))

    def cleanup(self, report_logs):
        for m in reversed(self.mounts):
            try:
                m.unmount()
            except Exception as e:  # noqa: BLE001 - keep cleaning up the rest
                print(f'cleanup of {m.mnt} failed: {e!r}')
        if report_logs:
            for m in self.mounts:
                print(f'--- seamfs stderr ({" ".join(map(str, m.argv))}) ---')
                print(tail(m.log(), 150))

    def sanitizer_reports(self):
        """Sanitizer reports in the daemons' stderr (the ASan+UBSan build):
        a leak or an error fails the test even when every read was right."""
        found = []
        for m in self.mounts:
            log = m.log()
            for marker in SANITIZER_MARKERS:
                i = log.find(marker)
                if i >= 0:
                    found.append(f'{m.mnt}: {log[max(0, i - 200):i + 3000]}')
                    break
        return found


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, 'rep_' + rep.when, rep)


def _require_fuse():
    if not os.path.exists('/dev/fuse'):
        pytest.skip('/dev/fuse is missing')


SANITIZER_MARKERS = ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:')


@pytest.fixture
def seamfs(request, tmp_path, seamfs_bin):
    """Mount factory: seamfs.mount(catalog, read_timeout=.., options=..)."""
    _require_fuse()
    m = Mounter(seamfs_bin, tmp_path)
    try:
        yield m
    finally:
        rep = getattr(request.node, 'rep_call', None)
        m.cleanup(report_logs=rep is None or rep.failed)
    reports = m.sanitizer_reports()
    if reports:
        pytest.fail('sanitizer report from seamfs:\n' + '\n'.join(reports))


@pytest.fixture
def seamfs_cli(tmp_path, seamfs_bin):
    """Like `seamfs` but for invocations that must not mount (no /dev/fuse needed)."""
    m = Mounter(seamfs_bin, tmp_path)
    try:
        yield m
    finally:
        m.cleanup(report_logs=False)


# --------------------------------------------------------------------------
# Catalog helpers
# --------------------------------------------------------------------------

def asset(aid, path, url=None, *, size=None, local=None, provider=None, **extra):
    """One catalog asset with one source (an URL or a local path)."""
    src = {'url': url} if url is not None else {'path': str(local)}
    if provider:
        src['provider'] = provider
    a = {'id': aid, 'path': path, 'sources': [src]}
    if size is not None:
        a['size'] = size
    a.update(extra)
    return a


def catalog(*assets, providers=None, settings=None):
    c = {'assets': list(assets)}
    if providers is not None:
        c['providers'] = providers
    if settings is not None:
        c['settings'] = settings
    return c


def tree_of(root):
    """{relative path: 'd' | 'f'} of everything under root (os.walk, no follow)."""
    out = {}
    root = str(root)
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d))] = 'd'
        for f in filenames:
            out[os.path.normpath(os.path.join(rel, f))] = 'f'
    return out


def expected_tree(paths):
    out = {}
    for p in paths:
        parts = p.split('/')
        for i in range(1, len(parts)):
            out['/'.join(parts[:i])] = 'd'
        out[p] = 'f'
    return out

