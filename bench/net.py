#!/usr/bin/python3
"""The read engine on real networks: bench/net.sh's helper (see bench/README.md).

seamfs next to raw curl, the FUSE ceiling of this machine (bench-nullfs, a
null FUSE daemon mounted as seamfs is) and rclone where it applies, against
three origins on 127.0.0.1:

  fast     nginx, sendfile: sequential throughput and CPU seconds per GiB
  far      seam-origin --delay-ms D (25): every answer's first byte waits
           one round trip: open + 64 KiB, seek + 1 MiB, the Kodi pattern,
           and 32 paced viewers
  capped   nginx with limit_rate 4m (per connection), on two ports (one
           per provider, each its own log): one reader through seamfs with
           max_connections=4 and =1, against one curl

    net.py run --seamfs BIN --nullfs BIN --origin BIN --work DIR --out DIR
               --pidfile FILE [--quick] [--runs N] [--delay-ms N]
               [--seamfs-opt OPTS] [--budget-mib N] [--cases LIST]
               [--no-rclone] [--viewers N] [--view-secs S] [--seek-secs S]

Prints one table (stdout), progress on stderr, writes OUT/net.json. Exit 0
whether targets are met or not; 1 when the harness broke. The timed reads
through a mount that are not fio's run in a child (net.py open64k | seeks |
kodi, bounded by a timeout and killed past it), so a hung FUSE read cannot
hang the run. Standard library only.
"""

import argparse
import json
import os
import random
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mountlib import Pids, any_mounted, daemon_env, random_file, say, stop, unmount  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
TICK = os.sysconf('SC_CLK_TCK')
MOUNT_WAIT = 30.0
CHILD_CAP = 180         # bound of one helper child (open64k, seeks, kodi), s
CAP_RATE = '4m'         # nginx limit_rate of the capped origin
SEEKS = 20
KODI_MID_MIB = 20
VIEW_BS = 64 * 1024
RATES = (('8 Mbit/s', 1_000_000), ('25 Mbit/s', 3_125_000))   # bytes per second

# ------------------------------------------------------------ child probes
# Reads go into tools.py's page-aligned buffer, as a player's or dd's would.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tools import exact_pread, tree_cpu, tree_status  # noqa: E402  (bench/tools.py, beside this file)


def same_bytes(path, data_path, spans):
    """Reads spans [(off, n)] again through the mount (the page cache now
    holds what the daemon served) and compares them with the origin's
    file; returns the first difference as text, or None."""
    with open(path, 'rb', buffering=0) as m, open(data_path, 'rb', buffering=0) as d:
        for off, n in spans:
            for o in range(off, off + n, 4 * MIB):
                k = min(4 * MIB, off + n - o)
                if os.pread(m.fileno(), k, o) != os.pread(d.fileno(), k, o):
                    return f'WRONG BYTES in {os.path.basename(path)} at {o}..{o + k}'
    return None


def probe_open64k(argv):
    """open + pread of 64 KiB at 0, per file: [ms]."""
    data_path, paths = argv[0], argv[1:]
    ms, errs = [], []
    for p in paths:
        try:
            t0 = time.monotonic()
            fd = os.open(p, os.O_RDONLY)
            try:
                exact_pread(fd, 65536, 0)
            finally:
                os.close(fd)
            ms.append((time.monotonic() - t0) * 1000)
        except OSError as e:
            errs.append(f'{p}: {e.strerror or e} (errno {e.errno})')
    res = {'ms': ms}
    if not errs and paths:
        bad = same_bytes(paths[0], data_path, [(0, 65536)])
        if bad:
            errs.append(bad)
    if errs:
        res['error'] = '; '.join(errs[:5])
    print(json.dumps(res))


def probe_seeks(argv):
    """One open (not timed), then pread of 1 MiB at each offset: [ms]."""
    path, data_path, offs = argv[0], argv[1], [int(x) for x in argv[2].split(',')]
    ms, res = [], {}
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            for off in offs:
                t0 = time.monotonic()
                exact_pread(fd, MIB, off)
                ms.append((time.monotonic() - t0) * 1000)
        finally:
            os.close(fd)
        bad = same_bytes(path, data_path, [(o, MIB) for o in offs])
        if bad:
            res['error'] = bad
    except OSError as e:
        res['error'] = f'{path}: {e.strerror or e} (errno {e.errno}) after {len(ms)} seeks'
    res['ms'] = ms
    print(json.dumps(res))


def probe_kodi(argv):
    """open; 64 KiB at 0; the last MiB; MID bytes from the middle in 64 KiB
    reads. Total ms from before the open, and each step's."""
    path, data_path, mid_n = argv[0], argv[1], int(argv[2])
    res = {}
    t0 = time.monotonic()
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            mid = (size // 2) & ~4095
            tail = max(0, size - MIB)
            spans = [(0, 65536), (tail, min(MIB, size)), (mid, min(mid_n, size - mid))]
            slowest = 0.0
            for name, (off, n) in zip(('head', 'tail', 'middle'), spans):
                t1 = time.monotonic()
                for o in range(off, off + n, 65536):
                    t2 = time.monotonic()
                    exact_pread(fd, min(65536, off + n - o), o)
                    slowest = max(slowest, time.monotonic() - t2)
                res[name + '_ms'] = (time.monotonic() - t1) * 1000
        finally:
            os.close(fd)
        res['ms'] = (time.monotonic() - t0) * 1000
        res['lat_max_ms'] = slowest * 1000
        bad = same_bytes(path, data_path, spans)
        if bad:
            res['error'] = bad
    except OSError as e:
        res['error'] = f'{path}: {e.strerror or e} (errno {e.errno})'
    print(json.dumps(res))


# ------------------------------------------------------------ processes

def proc_cpu(pid):
    """utime + stime of a live process and its descendants (seamfs's keeper
    and worker), all threads, in seconds."""
    return tree_cpu(pid)


def proc_mem(pid):
    """(VmRSS, VmHWM) in KiB, summed over the process and its descendants."""
    st = tree_status(pid)
    return st['VmRSS'], st['VmHWM']


def mounted_as(mnt, fstype):
    with open('/proc/mounts') as f:
        return any(ln.split()[1] == mnt and ln.split()[2] == fstype for ln in f)


class Daemon:
    """A FUSE daemon in the foreground, in its own session, its PID in the
    PID file; up once its mount shows in /proc/mounts (at most 30 s)."""

    def __init__(self, name, argv, mnt, fstype, log, pids):
        self.name, self.argv, self.mnt, self.fstype = name, argv, mnt, fstype
        self.log, self.pids, self.proc = log, pids, None

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        unmount(self.mnt)
        with open(self.log, 'ab') as lf:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=lf,
                                         stderr=lf, start_new_session=True, env=daemon_env())
        self.pids.add(self.proc.pid)
        deadline = time.monotonic() + MOUNT_WAIT
        while not mounted_as(self.mnt, self.fstype):
            why = None
            if self.proc.poll() is not None:
                why = f'exited (status {self.proc.returncode}) before mounting'
            elif time.monotonic() > deadline:
                why = f'did not mount in {MOUNT_WAIT:.0f} s'
            if why:
                self.stop()
                raise RuntimeError(f'{self.name} {why} {self.mnt}; log: {self.log}')
            time.sleep(0.02)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def cpu(self):
        return proc_cpu(self.proc.pid)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """Unmounts (bounded), then waits for the exit, at most 10 s, then
        SIGTERM/SIGKILL. Returns the exit status."""
        if self.proc is None:
            return None
        unmount(self.mnt)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            stop(self.proc)
        self.pids.remove(self.proc.pid)
        rc, self.proc = self.proc.returncode, None
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def run_rusage(argvs, timeout):
    """Runs the commands at once, each stdout to a file; waits for all (at
    most timeout s, then SIGKILL). Returns (wall s, user+system CPU s of
    them all, [exit status], [stdout text])."""
    outs, procs = [], []
    t0 = time.monotonic()
    for argv in argvs:
        f = tempfile.TemporaryFile()
        outs.append(f)
        procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                      stderr=subprocess.DEVNULL, env=daemon_env()))
    cpu, rcs, left = 0.0, [None] * len(procs), set(range(len(procs)))
    deadline = t0 + timeout
    while left:
        for i in list(left):
            pid, status, ru = os.wait4(procs[i].pid, os.WNOHANG)
            if pid:
                cpu += ru.ru_utime + ru.ru_stime
                rcs[i] = os.waitstatus_to_exitcode(status)
                procs[i].returncode = rcs[i]
                left.discard(i)
        if not left:
            break
        if time.monotonic() > deadline:
            for i in left:
                procs[i].kill()
                _, status, ru = os.wait4(procs[i].pid, 0)
                cpu += ru.ru_utime + ru.ru_stime
                rcs[i] = -9
                procs[i].returncode = -9
            break
        time.sleep(0.002)
    wall = time.monotonic() - t0
    texts = []
    for f in outs:
        f.seek(0)
        texts.append(f.read().decode('utf-8', 'replace'))
        f.close()
    return wall, cpu, rcs, texts


def run_child(args_list, timeout):
    """net.py PROBE ...: its JSON line, or an error record."""
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__)] + args_list,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {'error': f'{args_list[0]} took more than {timeout} s (killed)'}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {'error': f'{args_list[0]}: no result (exit {r.returncode}): {r.stderr[-300:]}'}


def run_fio(fio_args, js, timeout, log):
    """fio, bounded; its JSON report's figures (group_reporting or not)."""
    argv = ['fio', '--output-format=json', f'--output={js}', '--readonly', '--thread',
            '--iomem_align=4k'] + fio_args
    try:
        with open(log, 'ab') as lf:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {'error': f'fio took more than {timeout} s (killed)'}
    try:
        with open(js) as f:
            text = f.read()
        doc = json.loads(text[text.index('{'):])
    except (OSError, ValueError) as e:
        return {'error': f'no fio report: {e}'}
    jobs = doc.get('jobs', [])
    rd = [j['read'] for j in jobs]
    io_bytes = sum(r['io_bytes'] for r in rd)
    runtime = max((r['runtime'] for r in rd), default=0) / 1000.0
    res = {'io_bytes': io_bytes, 'runtime_s': runtime, 'ios': sum(r.get('total_ios', 0) for r in rd),
           'mbps': io_bytes / runtime / 1e6 if runtime else 0.0}
    clat = rd[0].get('clat_ns', {}) if len(rd) == 1 else {}
    if clat:
        pc = clat.get('percentile', {})
        res['clat_ms'] = {k: pc[v] / 1e6 for k, v in
                          (('p50', '50.000000'), ('p90', '90.000000'), ('p99', '99.000000'),
                           ('p99.9', '99.900000')) if v in pc}
        res['clat_ms']['max'] = clat.get('max', 0) / 1e6
        res['clat_ms']['mean'] = clat.get('mean', 0) / 1e6
    errs = [(j.get('jobname'), j.get('error', 0)) for j in jobs if j.get('error', 0)]
    if errs:
        res['error'] = '; '.join(f'fio job {n}: errno {e} ({os.strerror(e)})' for n, e in errs[:5])
    elif io_bytes == 0:
        res['error'] = 'fio read no bytes'
    return res


# ------------------------------------------------------------ origins

def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


def port_open(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        return True
    except OSError:
        return False


NGINX_CONF = """daemon off;
worker_processes 2;
{user}
pid {ngx}/nginx.pid;
error_log {ngx}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format net '$msec $connection $status $bytes_sent $body_bytes_sent $request_time '
                   '"$request_uri" "$http_range"';
    client_body_temp_path {ngx}/tmp/body;
    proxy_temp_path {ngx}/tmp/proxy;
    fastcgi_temp_path {ngx}/tmp/fastcgi;
    uwsgi_temp_path {ngx}/tmp/uwsgi;
    scgi_temp_path {ngx}/tmp/scgi;
    types {{ }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    server {{
        listen 127.0.0.1:{fast};
        root {data};
        autoindex on;
        autoindex_exact_size on;
        access_log {ngx}/fast.log net;
    }}
    server {{
        listen 127.0.0.1:{cap4};
        root {data};
        autoindex on;
        autoindex_exact_size on;
        limit_rate {rate};
        access_log {ngx}/cap4.log net;
    }}
    server {{
        listen 127.0.0.1:{cap1};
        root {data};
        autoindex on;
        autoindex_exact_size on;
        limit_rate {rate};
        access_log {ngx}/cap1.log net;
    }}
}}
"""


def start_nginx(work, data, pids):
    ngx = os.path.join(work, 'nginx')
    os.makedirs(os.path.join(ngx, 'tmp'), exist_ok=True)
    try:
        import pwd
        pwd.getpwnam('www-data')
        user = 'user www-data;'
    except (KeyError, ImportError):
        user = 'user root;'
    for _ in range(5):
        ports = {'fast': free_port(), 'cap4': free_port(), 'cap1': free_port()}
        if len(set(ports.values())) < 3:
            continue
        conf = os.path.join(ngx, 'nginx.conf')
        with open(conf, 'w') as f:
            f.write(NGINX_CONF.format(user=user, ngx=ngx, data=data, rate=CAP_RATE, **ports))
        for name in ('fast.log', 'cap4.log', 'cap1.log', 'error.log'):
            open(os.path.join(ngx, name), 'w').close()
        with open(os.path.join(ngx, 'stdout.log'), 'ab') as lf:
            p = subprocess.Popen(['nginx', '-p', ngx, '-c', conf, '-e',
                                  os.path.join(ngx, 'error.log')],
                                 stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                 start_new_session=True)
        pids.add(p.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            if all(port_open(x) for x in ports.values()):
                return p, ports, ngx
            time.sleep(0.05)
        stop(p)
        pids.remove(p.pid)
        with open(os.path.join(ngx, 'error.log')) as f:
            err = f.read()
        if 'Address already in use' not in err:
            raise RuntimeError('nginx did not start: ' + err[-500:])
    raise RuntimeError('nginx: no free ports found')


def start_far(origin, data, delay_ms, work, pids):
    """seam-origin --delay-ms: (proc, port)."""
    err = os.path.join(work, 'seam-origin.stderr')
    with open(err, 'wb') as ef:
        p = subprocess.Popen([origin, '--root', data, '--delay-ms', str(delay_ms),
                              '--log-max', '1000'],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=ef,
                             start_new_session=True)
    pids.add(p.pid)
    buf = b''
    deadline = time.monotonic() + 10
    while b'\n' not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or p.poll() is not None:
            stop(p)
            raise RuntimeError(f'seam-origin printed no PORT line (see {err})')
        r, _, _ = select.select([p.stdout], [], [], left)
        if r:
            chunk = os.read(p.stdout.fileno(), 256)
            if not chunk:
                continue
            buf += chunk
    line = buf.split(b'\n')[0].decode().split()
    return p, int(line[1])


def log_size(path):
    return os.path.getsize(path)


def settle_log(path, secs=5.0):
    """Waits (at most secs) until nginx's log stops growing."""
    a = log_size(path)
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        time.sleep(0.2)
        b = log_size(path)
        if a == b:
            return
        a = b


def most_at_once(spans):
    """The most of the [start, end] spans that overlap. Times have ms
    resolution: spans that only touch do not overlap, and a span shorter
    than 1 ms counts as 0.5 ms."""
    ev = []
    for a, b in spans:
        ev += [(a, 1), (max(b, a + 0.0005) if b - a < 0.001 else b, -1)]
    cur = most = 0
    for _, d in sorted(ev):
        cur += d
        most = max(most, cur)
    return most


def log_slice(path, start):
    """The nginx log lines from byte start: requests and connections open at
    once (a connection spans from its first request's start to its last
    request's end), bytes sent."""
    with open(path, 'rb') as f:
        f.seek(start)
        text = f.read().decode('utf-8', 'replace')
    spans, conns, sent, reqs = [], {}, 0, 0
    for ln in text.splitlines():
        p = ln.split(' ', 6)
        if len(p) < 7 or p[6].split('"')[1].endswith('/'):
            continue            # directory listings (rclone)
        end, rt = float(p[0]), float(p[5])
        spans.append((end - rt, end))
        a, b = conns.get(p[1], (end - rt, end))
        conns[p[1]] = (min(a, end - rt), max(b, end))
        sent += int(p[3])
        reqs += 1
    return {'requests': reqs, 'connections': len(conns), 'in_flight_max': most_at_once(spans),
            'conns_max': most_at_once(conns.values()), 'origin_bytes': sent}


class TcpSampler(threading.Thread):
    """Counts, every 20 ms, the established TCP connections whose remote
    end is 127.0.0.1:port (the client side of each: ss's count)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.hexport = f':{port:04X}'
        self.most = 0
        self.samples = 0
        self.halt = threading.Event()

    def count(self):
        n = 0
        with open('/proc/net/tcp') as f:
            next(f)
            for ln in f:
                p = ln.split()
                if p[3] == '01' and p[2].endswith(self.hexport) and p[2].startswith('0100007F'):
                    n += 1
        return n

    def run(self):
        while not self.halt.is_set():
            self.most = max(self.most, self.count())
            self.samples += 1
            self.halt.wait(0.02)

    def finish(self):
        self.halt.set()
        self.join(5)
        return self.most


class RssSampler(threading.Thread):
    """VmRSS of a process every 0.5 s: the largest seen."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.most, self.halt = pid, 0, threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                self.most = max(self.most, proc_mem(self.pid)[0])
            except OSError:
                return
            self.halt.wait(0.5)

    def finish(self):
        self.halt.set()
        self.join(5)
        return self.most


# ------------------------------------------------------------ the bench

class Bench:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.data = os.path.join(a.work, 'data')
        self.out = a.out
        self.logs = os.path.join(a.out, 'logs')
        self.tmp = os.path.join(a.out, 'tmp')
        for d in (self.data, self.logs, self.tmp, os.path.join(self.data, 'v')):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.work, 0o755)
        os.chmod(self.data, 0o755)
        os.chmod(os.path.join(self.data, 'v'), 0o755)
        self.pids = Pids(a.pidfile)
        self.mnt = {t: os.path.join(a.work, f'mnt-{t}') for t in ('seamfs', 'null', 'rclone')}
        self.recs = []          # {case, tool, run, ...}
        self.seq_no = 0
        self.procs = []
        if a.quick:
            self.big_mib, self.part_mib, self.cap_mib, self.nopen = 256, 64, 16, 8
        else:
            self.big_mib, self.part_mib, self.cap_mib, self.nopen = 1024, 256, 64, 16

    # -- setup
    def make_data(self):
        self.sha = {'big.bin': random_file(os.path.join(self.data, 'big.bin'), self.big_mib)}
        for i in range(1, 5):
            n = f'part-{i}.bin'
            self.sha[n] = random_file(os.path.join(self.data, n), self.part_mib)
        self.nviews = max(self.a.viewers, self.nopen)
        for i in range(self.nviews):
            link = os.path.join(self.data, 'v', f'view-{i:02d}.bin')
            if not os.path.islink(link):
                os.symlink('../big.bin', link)
        for n in os.listdir(self.data):
            p = os.path.join(self.data, n)
            if os.path.isfile(p) and not os.path.islink(p):
                os.chmod(p, 0o644)

    def start_origins(self):
        self.ngx_proc, self.port, self.ngx = start_nginx(self.work, self.data, self.pids)
        self.procs.append(self.ngx_proc)
        self.far_proc, self.far = start_far(self.a.origin, self.data, self.a.delay_ms, self.work,
                                            self.pids)
        self.procs.append(self.far_proc)
        self.fast_url = f"http://127.0.0.1:{self.port['fast']}"
        # the two providers of the cap case on ports of their own: a liveness
        # probe of one is not a connection of the other
        self.cap_url = {k: f'http://127.0.0.1:{self.port[k]}' for k in ('cap4', 'cap1')}
        self.far_url = f'http://127.0.0.1:{self.far}'
        say(f"origins: nginx {self.fast_url} (fast), {self.cap_url['cap4']} and "
            f"{self.cap_url['cap1']} (limit_rate {CAP_RATE}); "
            f'seam-origin {self.far_url} (--delay-ms {self.a.delay_ms})')
        for url in (self.fast_url, self.cap_url['cap4'], self.cap_url['cap1'], self.far_url):
            r = subprocess.run(['curl', '-s', '--noproxy', '*', '-o', '/dev/null', '-r', '0-0',
                                '-w', '%{http_code}', f'{url}/big.bin'],
                               capture_output=True, text=True, timeout=30, env=daemon_env())
            if r.stdout != '206':
                raise RuntimeError(f'{url}/big.bin: no 206 for a range request ({r.stdout})')

    def write_catalog(self):
        assets = []
        size = {n: os.path.getsize(os.path.join(self.data, n)) for n in self.sha}
        mtime = int(os.path.getmtime(os.path.join(self.data, 'big.bin')))

        def add(aid, path, url, name, provider=None):
            src = {'url': url}
            if provider:
                src['provider'] = provider
            assets.append({'id': aid, 'path': path, 'size': size[name], 'mtime': mtime,
                           'sha256': self.sha[name], 'sources': [src]})
        for n in self.sha:
            add(f'local-{n}', f'local/{n}', f'{self.fast_url}/{n}', n)
            add(f'far-{n}', f'far/{n}', f'{self.far_url}/{n}', n)
        for i in range(self.nviews):
            add(f'view-{i:02d}', f'far/v/view-{i:02d}.bin', f'{self.far_url}/v/view-{i:02d}.bin',
                'big.bin')
        add('cap4-big', 'cap4/big.bin', f"{self.cap_url['cap4']}/big.bin", 'big.bin', 'cap4')
        add('cap1-big', 'cap1/big.bin', f"{self.cap_url['cap1']}/big.bin", 'big.bin', 'cap1')
        self.catalog = os.path.join(self.work, 'catalog.json')
        with open(self.catalog, 'w') as f:
            json.dump({'providers': [{'name': 'cap4', 'max_connections': 4},
                                     {'name': 'cap1', 'max_connections': 1}],
                       'assets': assets}, f, indent=1)

    # -- daemons
    def daemon(self, tool, **kw):
        self.seq_no += 1
        log = os.path.join(self.logs, f'{tool}-{self.seq_no:03d}.log')
        mnt = self.mnt[tool]
        if tool == 'seamfs':
            opts = f'state_dir={self.work}/state' + (f',{self.a.seamfs_opt}' if self.a.seamfs_opt else '')
            # every mount starts cold: the heads and tails an earlier one
            # kept in cache_dir would be served, or refused where the
            # origins' ports changed, neither of which is a cold open
            shutil.rmtree(os.path.join(self.work, 'state', 'cache'), ignore_errors=True)
            os.makedirs(os.path.join(self.work, 'state'), exist_ok=True)
            return Daemon('seamfs', [self.a.seamfs, '-f', '-o', opts, self.catalog, mnt], mnt,
                          'fuse.seamfs', log, self.pids)
        if tool == 'null':
            return Daemon('bench-nullfs', [self.a.nullfs, '-o',
                                           f"size={kw['size']},files={kw['files']}", mnt],
                          mnt, 'fuse.bench-nullfs', log, self.pids)
        conf = os.path.join(self.work, 'rclone.conf')
        open(conf, 'w').close()
        return Daemon('rclone', ['rclone', 'mount', ':http:', mnt, '--http-url', kw['url'],
                                 '--vfs-cache-mode', 'off', '--read-only', '--config', conf],
                      mnt, 'fuse.rclone', log, self.pids)

    def cold(self, names):
        """An empty page cache, then the origin's own copies read back in:
        the origin is a warm server; what is measured is the path from it
        to the reader, not this machine's disk."""
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
        for n in names:
            with open(os.path.join(self.data, n), 'rb', buffering=0) as f:
                while f.read(16 * MIB):
                    pass

    def rec(self, case, tool, run, d):
        d.update(case=case, tool=tool, run=run)
        self.recs.append(d)
        if 'error' in d:
            say(f'  {case} / {tool} / run {run}: ERROR {d["error"]}')
        return d

    def order(self, tools, run):
        n = len(tools)
        return [tools[(i + run - 1) % n] for i in range(n)]

    def curl(self, *extra):
        return ['curl', '-s', '--noproxy', '*', '--max-time', str(CHILD_CAP)] + list(extra)

    def js(self, name):
        return os.path.join(self.tmp, name + '.json')

    # -- sequential, fast origin: throughput and CPU per GiB
    def case_seq(self, run, readers):
        case = 'seq1' if readers == 1 else 'seq4'
        names = ['big.bin'] if readers == 1 else [f'part-{i}.bin' for i in range(1, 5)]
        each = (self.big_mib if readers == 1 else self.part_mib) * MIB
        tools = ['curl', 'seamfs', 'null'] + (['rclone'] if self.a.rclone else [])
        for tool in self.order(tools, run):
            say(f'{case}: run {run}, {tool}')
            if tool == 'curl':
                self.cold(names)
                wall, cpu, rcs, outs = run_rusage(
                    [self.curl('-o', '/dev/null', '-w',
                               '%{size_download} %{http_code} %{speed_download}',
                               f'{self.fast_url}/{n}') for n in names], CHILD_CAP)
                got = sum(int(o.split()[0]) for o in outs if o.split())
                # one curl: its own figure (bytes / its transfer time, as
                # fio's runtime leaves fio's start out); four: bytes / wall
                d = {'io_bytes': got, 'wall': wall, 'cpu': cpu,
                     'mbps': (float(outs[0].split()[2]) if readers == 1 and len(outs[0].split()) == 3
                              else got / wall) / 1e6}
                if got != each * readers or any(rcs):
                    d['error'] = f'curl: {got} of {each * readers} bytes, exit {rcs}'
            else:
                kw = {'size': each, 'files': readers} if tool == 'null' else {'url': self.fast_url}
                with self.daemon(tool, **kw) as dm:
                    self.cold(names if tool != 'null' else [])
                    if tool == 'null':
                        files = [f'{dm.mnt}/null-{i}.bin' for i in range(readers)]
                    elif tool == 'seamfs':
                        files = [f'{dm.mnt}/local/{n}' for n in names]
                    else:
                        files = [f'{dm.mnt}/{n}' for n in names]
                    args = ['--name=global', '--rw=read', '--bs=1M', '--ioengine=psync',
                            '--direct=0', f'--runtime={CHILD_CAP}']
                    for i, p in enumerate(files):
                        args += [f'--name=r{i}', f'--filename={p}']
                    c0 = dm.cpu()
                    d = run_fio(args, self.js(f'{case}-{tool}-{run}'), CHILD_CAP + 60,
                                os.path.join(self.logs, 'fio.log'))
                    d['cpu'] = dm.cpu() - c0 if dm.alive() else None
                    if not dm.alive():
                        d['error'] = f'{tool} died during the read (log {dm.log})'
            if d.get('io_bytes') and d.get('cpu') is not None:
                d['cpu_per_gib'] = d['cpu'] / (d['io_bytes'] / GIB)
            self.rec(case, tool, run, d)

    # -- far origin: latency of the first bytes, of seeks, the Kodi pattern
    def case_open(self, run):
        names = [f'v/view-{i:02d}.bin' for i in range(self.nopen)]
        for tool in self.order(['curl', 'seamfs'], run):
            say(f'open64k: run {run}, {tool}')
            if tool == 'curl':
                self.cold(['big.bin'])
                ms, errs = [], []
                for n in names:
                    _, _, rcs, outs = run_rusage(
                        [self.curl('-o', '/dev/null', '-r', '0-65535', '-w',
                                   '%{time_total} %{http_code} %{size_download}',
                                   f'{self.far_url}/{n}')], 60)
                    p = outs[0].split()
                    if rcs[0] == 0 and len(p) == 3 and p[1] == '206' and p[2] == '65536':
                        ms.append(float(p[0]) * 1000)
                    else:
                        errs.append(f'{n}: {outs[0]!r} exit {rcs[0]}')
                d = {'ms': ms}
                if errs:
                    d['error'] = 'curl: ' + '; '.join(errs[:3])
            else:
                with self.daemon('seamfs') as dm:
                    self.cold(['big.bin'])
                    d = run_child(['open64k', os.path.join(self.data, 'big.bin')] +
                                  [f'{dm.mnt}/far/{n}' for n in names], CHILD_CAP)
            self.rec('open64k', tool, run, d)

    def seek_offsets(self, size, run):
        rng = random.Random(run * 7919 + size)
        slot = size // SEEKS
        offs = [i * slot + (rng.randrange(max(1, (slot - MIB) // 2)) & ~4095)
                for i in range(SEEKS)]
        rng.shuffle(offs)
        return offs

    def case_seek(self, run):
        size = self.big_mib * MIB
        offs = self.seek_offsets(size, run)
        for tool in self.order(['curl', 'seamfs'], run):
            say(f'seek + 1 MiB x {SEEKS}: run {run}, {tool}')
            if tool == 'curl':
                self.cold(['big.bin'])
                cfg = os.path.join(self.tmp, f'seek-{run}.cfg')
                with open(cfg, 'w') as f:
                    f.write('silent\nnoproxy = "*"\n')
                    for i, o in enumerate(offs):
                        if i:
                            f.write('next\n')
                        f.write(f'url = "{self.far_url}/big.bin"\nrange = "{o}-{o + MIB - 1}"\n'
                                'output = "/dev/null"\n'
                                'write-out = "%{http_code} %{size_download} %{time_total}\\n"\n')
                _, _, rcs, outs = run_rusage([['curl', '-K', cfg]], CHILD_CAP)
                ms, bad = [], 0
                for ln in outs[0].splitlines():
                    p = ln.split()
                    if len(p) == 3 and p[0] == '206' and int(p[1]) == MIB:
                        ms.append(float(p[2]) * 1000)
                    else:
                        bad += 1
                d = {'ms': ms}
                if bad or len(ms) != SEEKS or rcs[0]:
                    d['error'] = f'curl: {len(ms)} of {SEEKS} ranges good, exit {rcs[0]}'
            else:
                with self.daemon('seamfs') as dm:
                    self.cold(['big.bin'])
                    d = run_child(['seeks', f'{dm.mnt}/far/big.bin',
                                   os.path.join(self.data, 'big.bin'),
                                   ','.join(map(str, offs))], CHILD_CAP)
            self.rec('seek', tool, run, d)

    def case_kodi(self, run):
        size = self.big_mib * MIB
        mid = (size // 2) & ~4095
        mid_n = KODI_MID_MIB * MIB
        for tool in self.order(['curl', 'seamfs'], run):
            say(f'Kodi pattern: run {run}, {tool}')
            if tool == 'curl':
                self.cold(['big.bin'])
                cfg = os.path.join(self.tmp, f'kodi-{run}.cfg')
                spans = [(0, 65536), (size - MIB, MIB), (mid, mid_n)]
                with open(cfg, 'w') as f:
                    f.write('silent\nnoproxy = "*"\n')
                    for i, (o, n) in enumerate(spans):
                        if i:
                            f.write('next\n')
                        f.write(f'url = "{self.far_url}/big.bin"\nrange = "{o}-{o + n - 1}"\n'
                                'output = "/dev/null"\n'
                                'write-out = "%{http_code} %{size_download} %{time_total}\\n"\n')
                _, _, rcs, outs = run_rusage([['curl', '-K', cfg]], CHILD_CAP)
                lines = [ln.split() for ln in outs[0].splitlines()]
                ok = (rcs[0] == 0 and len(lines) == 3 and
                      all(len(p) == 3 and p[0] == '206' and int(p[1]) == n
                          for p, (_, n) in zip(lines, spans)))
                d = {'ms': sum(float(p[2]) for p in lines if len(p) == 3) * 1000}
                if ok:
                    for name, p in zip(('head', 'tail', 'middle'), lines):
                        d[name + '_ms'] = float(p[2]) * 1000
                else:
                    d['error'] = f'curl: {outs[0]!r}, exit {rcs[0]}'
            else:
                with self.daemon('seamfs') as dm:
                    self.cold(['big.bin'])
                    d = run_child(['kodi', f'{dm.mnt}/far/big.bin',
                                   os.path.join(self.data, 'big.bin'), str(mid_n)], CHILD_CAP)
            self.rec('kodi', tool, run, d)

    # -- capped origin: one reader, max_connections 4 and 1
    def case_cap(self, run):
        n = self.cap_mib * MIB
        tools = ['curl', 'seamfs4', 'seamfs1'] + (['rclone'] if self.a.rclone else [])
        for tool in self.order(tools, run):
            say(f'4 MiB/s cap, {self.cap_mib} MiB: run {run}, {tool}')
            # cap1's port for max_connections=1, cap4's for the others
            key = 'cap1' if tool == 'seamfs1' else 'cap4'
            url = self.cap_url[key]
            log = os.path.join(self.ngx, f'{key}.log')
            start = log_size(log)
            sampler = TcpSampler(self.port[key])
            if tool == 'curl':
                self.cold(['big.bin'])
                sampler.start()
                _, cpu, rcs, outs = run_rusage(
                    [self.curl('-o', '/dev/null', '-r', f'0-{n - 1}', '-w',
                               '%{size_download} %{time_total} %{http_code}',
                               f'{url}/big.bin')], CHILD_CAP)
                p = (outs[0].split() + ['0', '0', '0'])[:3]
                d = {'io_bytes': int(p[0]), 'secs': float(p[1]),
                     'mbps': int(p[0]) / float(p[1]) / 1e6 if float(p[1]) else 0.0}
                if rcs[0] or p[2] != '206' or int(p[0]) != n:
                    d['error'] = f'curl: {outs[0]!r}, exit {rcs[0]}'
            else:
                base = 'seamfs' if tool.startswith('seamfs') else 'rclone'
                with self.daemon(base, url=url) as dm:
                    self.cold(['big.bin'])
                    path = (f'{dm.mnt}/cap{tool[-1]}/big.bin' if base == 'seamfs'
                            else f'{dm.mnt}/big.bin')
                    sampler.start()
                    t0 = time.monotonic()
                    d = run_fio(['--name=cap', f'--filename={path}', '--rw=read', '--bs=1M',
                                 '--ioengine=psync', '--direct=0', f'--size={n}',
                                 f'--runtime={CHILD_CAP}'],
                                self.js(f'cap-{tool}-{run}'), CHILD_CAP + 60,
                                os.path.join(self.logs, 'fio.log'))
                    # from before fio opens the file (seamfs fetches on open) to its exit
                    d['secs'] = time.monotonic() - t0
                    d['mbps'] = d.get('io_bytes', 0) / d['secs'] / 1e6
            # every request has ended (unmounted) before the log is read
            d['tcp_max'] = sampler.finish()
            settle_log(log)
            d.update(log_slice(log, start))
            self.rec('cap', tool, run, d)

    # -- paced viewers on the far origin
    def case_viewers(self, label, rate):
        case = f'viewers {label}'
        size = self.big_mib * MIB
        rng = random.Random(rate)
        zone = max(VIEW_BS, rate * self.a.seek_secs // VIEW_BS * VIEW_BS)
        say(f'{self.a.viewers} viewers at {label} for {self.a.view_secs} s, '
            f'a seek every {self.a.seek_secs} s')
        with self.daemon('seamfs') as dm:
            self.cold(['big.bin'])
            jf = os.path.join(self.tmp, f'viewers-{rate}.fio')
            with open(jf, 'w') as f:
                f.write('[global]\nrw=read\nioengine=psync\ndirect=0\nthread\niomem_align=4k\n'
                        f'bs={VIEW_BS}\nrate={rate}\ntime_based\nruntime={self.a.view_secs}\n'
                        f'zonemode=strided\nzonesize={zone}\n'
                        'group_reporting\npercentile_list=50:90:99:99.9\n'
                        'startdelay=0-3\n')
                for i in range(self.a.viewers):
                    off = rng.randrange(size // 2) & ~(VIEW_BS - 1)
                    skip = (16 * MIB + rng.randrange(80 * MIB)) & ~(VIEW_BS - 1)
                    f.write(f'[v{i:02d}]\nfilename={dm.mnt}/far/v/view-{i:02d}.bin\n'
                            f'offset={off}\nzoneskip={skip}\n')
            rss = RssSampler(dm.pid)
            rss.start()
            d = run_fio([jf], self.js(f'viewers-{rate}'), self.a.view_secs + 120,
                        os.path.join(self.logs, 'fio.log'))
            d['rss_max_mib'] = rss.finish() / 1024
            if dm.alive():
                d['hwm_mib'] = proc_mem(dm.pid)[1] / 1024
            else:
                d['error'] = f'seamfs died during the viewers (log {dm.log})'
            d['wanted_mbps'] = rate * self.a.viewers / 1e6
        self.rec(case, 'seamfs', 1, d)

    def run(self):
        cases = self.a.cases
        if 'seq' in cases:
            for run in range(1, self.a.runs + 1):
                self.case_seq(run, 1)
            for run in range(1, self.a.runs + 1):
                self.case_seq(run, 4)
        if 'far' in cases:
            for run in range(1, self.a.runs + 1):
                self.case_open(run)
            for run in range(1, self.a.runs + 1):
                self.case_seek(run)
            for run in range(1, self.a.runs + 1):
                self.case_kodi(run)
        if 'cap' in cases:
            for run in range(1, self.a.runs + 1):
                self.case_cap(run)
        if 'viewers' in cases:
            for label, rate in RATES:
                self.case_viewers(label, rate)

    def close(self):
        for t, m in self.mnt.items():
            if any_mounted(m):
                unmount(m)
        for p in self.procs:
            stop(p)
            self.pids.remove(p.pid)


# ------------------------------------------------------------ the table

def med(xs):
    return statistics.median(xs) if xs else None


def pct(xs, p):
    """Nearest-rank percentile."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, -(-p * len(s) // 100) - 1)
    return s[int(k)]


def fmt(v):
    if v is None:
        return '-'
    if isinstance(v, int):
        return f'{v:,}'
    a = abs(v)
    if a >= 1000:
        return f'{v:,.0f}'
    if a >= 100:
        return f'{v:.0f}'
    if a >= 10:
        return f'{v:.1f}'
    if a >= 1:
        return f'{v:.2f}'
    return f'{v:.3f}'


def machine_load():
    """The load average, and the processes (not this bench) that used 5 %
    of a CPU or more over one second: what else ran on the machine."""
    def ticks():
        out = {}
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try:
                    with open(f'/proc/{pid}/stat') as f:
                        st = f.read()
                    fl = st[st.rindex(')') + 2:].split()
                    out[int(pid)] = int(fl[11]) + int(fl[12])
                except (OSError, ValueError, IndexError):
                    pass
        return out
    with open('/proc/loadavg') as f:
        la = ' '.join(f.read().split()[:3])
    a = ticks()
    time.sleep(1.0)
    b = ticks()
    me = {os.getpid(), os.getppid()}
    use = sorted(((b[p] - a[p]) * 100 / TICK, p) for p in b if p in a and p not in me)
    busy = []
    for pc, pid in reversed(use):
        if pc < 5 or len(busy) == 8:
            break
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip()
        except OSError:
            continue
        busy.append(f'{pc:.0f}% {cmd[:80]}')
    return {'loadavg': la, 'busy': busy}


def cpu_busy():
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def report(recs, a, meta, out):
    """Prints the table and writes OUT/net.json; 1 when a record has an error."""

    def vals(case, tool, key):
        out = []
        for r in recs:
            if r['case'] == case and r['tool'] == tool and r.get(key) is not None:
                v = r[key]
                out.extend(v if isinstance(v, list) else [v])
        return out

    def m(case, tool, key):
        return med(vals(case, tool, key))

    def errs(case, tool):
        return any('error' in r for r in recs if r['case'] == case and r['tool'] == tool)

    budget = a.budget_mib
    rows = []

    def row(label, unit, cols, ratio=None, rlabel='', target=None, op=None, case=None):
        """cols: {tool: value}; ratio compared with target by op ('<=', '>=')."""
        r = {'measure': label, 'unit': unit, **{t: cols.get(t) for t in
                                               ('seamfs', 'curl', 'null', 'rclone')},
             'ratio': ratio, 'ratio_of': rlabel, 'target': None, 'result': ''}
        if target is not None:
            r['target'] = f'{op} {target:g}' + (f' {unit}' if not rlabel and unit != 'n' else '')
            v = ratio if rlabel else cols.get('seamfs')
            if v is None:
                r['result'] = 'n/a'
            else:
                r['result'] = 'PASS' if (v <= target if op == '<=' else v >= target) else 'MISS'
            if case and errs(case, 'seamfs'):
                r['result'] = 'MISS (errors)'
        rows.append(r)

    def q(x, y):
        return x / y if x is not None and y else None

    if 'seq' in a.cases:
        for case, label in (('seq1', 'sequential, 1 reader'), ('seq4', '4 readers, 4 files')):
            cpu = {t: m(case, t, 'cpu_per_gib') for t in ('seamfs', 'curl', 'null', 'rclone')}
            base = (cpu['curl'] + cpu['null']) if cpu['curl'] is not None and cpu['null'] is not None else None
            if case == 'seq1':
                row(f'daemon CPU, {label}', 's/GiB', cpu, q(cpu['seamfs'], base), 'x (curl+null)',
                    1.1, '<=', case)
            mb = {t: m(case, t, 'mbps') for t in ('seamfs', 'curl', 'null', 'rclone')}
            row(f'{label}', 'MB/s', mb, q(mb['seamfs'], mb['curl']), 'x curl', 0.9, '>=', case)
            row(f'{label}', 'MB/s', mb, q(mb['seamfs'], mb['null']), 'x null')
            if case == 'seq4':
                row(f'daemon CPU, {label}', 's/GiB', cpu, q(cpu['seamfs'], base), 'x (curl+null)')
    if 'far' in a.cases:
        d = a.delay_ms
        o = {t: med(vals('open64k', t, 'ms')) for t in ('seamfs', 'curl')}
        row(f'{d} ms origin: open + first 64 KiB, median', 'ms', o, q(o['seamfs'], o['curl']),
            'x curl', 1.15, '<=', 'open64k')
        s = {t: vals('seek', t, 'ms') for t in ('seamfs', 'curl')}
        sm = {t: med(v) for t, v in s.items()}
        sp = {t: pct(v, 90) for t, v in s.items()}
        row(f'{d} ms origin: seek + 1 MiB, median', 'ms', sm, q(sm['seamfs'], sm['curl']),
            'x curl', 1.3, '<=', 'seek')
        row(f'{d} ms origin: seek + 1 MiB, p90', 'ms', sp, q(sp['seamfs'], sp['curl']),
            'x curl', 1.3, '<=', 'seek')
        k = {t: m('kodi', t, 'ms') for t in ('seamfs', 'curl')}
        row(f'{d} ms origin: Kodi pattern (head, tail, {KODI_MID_MIB} MiB middle)', 'ms', k,
            q(k['seamfs'], k['curl']), 'x curl', 1.3, '<=', 'kodi')
    if 'cap' in a.cases:
        c = m('cap', 'curl', 'mbps')
        r_ = m('cap', 'rclone', 'mbps')
        for mc, tgt in ((4, 3.2), (1, 0.9)):
            t = f'seamfs{mc}'
            s4 = m('cap', t, 'mbps')
            row(f'4 MiB/s cap, max_connections={mc}', 'MB/s',
                {'seamfs': s4, 'curl': c, 'rclone': r_}, q(s4, c), 'x curl', tgt, '>=')
            if errs('cap', t):
                rows[-1]['result'] = 'MISS (errors)'
            lg = max(vals('cap', t, 'conns_max'), default=None)
            tc = max(vals('cap', t, 'tcp_max'), default=None)
            row('  connections at once (nginx log), max', 'n',
                {'seamfs': lg, 'curl': max(vals('cap', 'curl', 'conns_max'), default=None),
                 'rclone': max(vals('cap', 'rclone', 'conns_max'), default=None)},
                target=1 if mc == 1 else None, op='<=')
            row('  connections at once (sampled), max', 'n',
                {'seamfs': tc, 'curl': max(vals('cap', 'curl', 'tcp_max'), default=None),
                 'rclone': max(vals('cap', 'rclone', 'tcp_max'), default=None)},
                target=1 if mc == 1 else None, op='<=')
    if 'viewers' in a.cases:
        for label, rate in RATES:
            case = f'viewers {label}'
            r = next((x for x in recs if x['case'] == case), {})
            cl = r.get('clat_ms', {})
            head = f'{a.viewers} viewers at {label}'
            row(f'{head}: read latency p50', 'ms', {'seamfs': cl.get('p50')})
            row(f'{head}: read latency p99', 'ms', {'seamfs': cl.get('p99')}, target=50, op='<=',
                case=case)
            row(f'{head}: read latency p99.9', 'ms', {'seamfs': cl.get('p99.9')})
            row(f'{head}: read latency max', 'ms', {'seamfs': cl.get('max')}, target=500, op='<=',
                case=case)
            row(f'{head}: peak RSS (VmHWM)', 'MiB', {'seamfs': r.get('hwm_mib')},
                target=budget + 32, op='<=', case=case)
            row(f'{head}: throughput (wanted {fmt(r.get("wanted_mbps"))})', 'MB/s',
                {'seamfs': r.get('mbps')})

    head = ['measure', 'unit', 'seamfs', 'curl', 'null fuse', 'rclone', 'ratio', 'target', 'result']
    table = [head]
    for r in rows:
        ratio = f"{fmt(r['ratio'])} {r['ratio_of']}" if r['ratio'] is not None else (
            f"- {r['ratio_of']}" if r['ratio_of'] else '')
        table.append([r['measure'], r['unit'], fmt(r['seamfs']), fmt(r['curl']), fmt(r['null']),
                      fmt(r['rclone']), ratio, r['target'] or '', r['result']])
    w = [max(len(x[i]) for x in table) for i in range(len(head))]
    lines = []
    for n, x in enumerate(table):
        cells = [x[0].ljust(w[0]), x[1].ljust(w[1])] + [c.rjust(k) for c, k in zip(x[2:6], w[2:6])]
        cells += [x[6].ljust(w[6]), x[7].ljust(w[7]), x[8]]
        lines.append('  '.join(cells).rstrip())
        if n == 0:
            lines.append('  '.join('-' * k for k in w))
    text = '\n'.join(lines)
    print()
    print(f"seamfs on real networks ({meta['mode']}; median of {a.runs} run(s) per figure, viewers "
          f"1 run of {a.view_secs} s; {meta['cpus']} CPUs; MB = 10^6 B)")
    print(text)
    print(f"\nload: loadavg {meta['load_start']['loadavg']} at the start, "
          f"{meta['load_end']['loadavg']} at the end; CPU busy {meta['cpu_busy_pct']:.0f}% "
          f"of {meta['cpus']} CPUs over the run (this bench included)")
    for when in ('load_start', 'load_end'):
        if meta[when]['busy']:
            print(f"  other busy processes ({when[5:]}): " + ' | '.join(meta[when]['busy']))
    bad = [r for r in recs if 'error' in r]
    if bad:
        print(f'\nERRORS ({len(bad)}):')
        for r in bad:
            print(f"  {r['case']} / {r['tool']} / run {r['run']}: {r['error']}")
    else:
        print('\nerrors: none (every read returned its bytes; the bytes of the timed '
              'open/seek/Kodi reads matched the origin\'s)')
    dest = os.path.join(out, 'net.json')
    with open(dest, 'w') as f:
        json.dump({'meta': meta, 'table': text, 'rows': rows, 'records': recs}, f, indent=1)
    print(f'\nresults: {dest}')
    return 1 if bad else 0


def table(path):
    """net.py table OUT/net.json: the table of a finished run, again."""
    with open(path) as f:
        doc = json.load(f)
    meta, recs = doc['meta'], doc['records']
    seen = {r['case'].split()[0] for r in recs}
    cases = meta.get('cases') or [c for c, k in (('seq', 'seq1'), ('far', 'open64k'),
                                                 ('cap', 'cap'), ('viewers', 'viewers'))
                                  if k in seen]
    a = argparse.Namespace(runs=meta['runs'], cases=cases, delay_ms=meta['delay_ms'],
                           viewers=meta['viewers'], view_secs=meta['view_secs'],
                           budget_mib=meta['budget_mib'], rclone=meta.get('rclone', True))
    return report(recs, a, meta, os.path.dirname(os.path.abspath(path)))


def main():
    probes = {'open64k': probe_open64k, 'seeks': probe_seeks, 'kodi': probe_kodi}
    if len(sys.argv) > 1 and sys.argv[1] in probes:
        probes[sys.argv[1]](sys.argv[2:])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == 'table':
        return table(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument('cmd', choices=['run'])
    for k in ('--seamfs', '--nullfs', '--origin', '--work', '--out', '--pidfile'):
        ap.add_argument(k, required=True)
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--runs', type=int)
    ap.add_argument('--delay-ms', type=int, default=25)
    ap.add_argument('--seamfs-opt', default='')
    ap.add_argument('--budget-mib', type=int, default=256)
    ap.add_argument('--cases', default='seq,far,cap,viewers')
    ap.add_argument('--no-rclone', dest='rclone', action='store_false')
    ap.add_argument('--viewers', type=int, default=32)
    ap.add_argument('--view-secs', type=int)
    ap.add_argument('--seek-secs', type=int)
    a = ap.parse_args()
    a.runs = a.runs or (1 if a.quick else 3)
    a.view_secs = a.view_secs or (15 if a.quick else 60)
    a.seek_secs = a.seek_secs or (5 if a.quick else 10)
    a.cases = [c for c in a.cases.split(',') if c]
    for c in a.cases:
        if c not in ('seq', 'far', 'cap', 'viewers'):
            ap.error(f'unknown case {c!r} (seq, far, cap, viewers)')
    if a.runs < 1 or a.viewers < 1 or a.view_secs < 1 or a.seek_secs < 1 or a.delay_ms < 0:
        ap.error('--runs, --viewers, --view-secs, --seek-secs: positive; --delay-ms: >= 0')
    # SIGTERM (net.sh's trap) and SIGINT end the run through the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(a.out, exist_ok=True)
    b = Bench(a)
    t0 = time.monotonic()
    c0 = cpu_busy()
    meta = {'mode': 'quick' if a.quick else 'full', 'cpus': os.cpu_count(),
            'kernel': os.uname().release, 'seamfs': a.seamfs, 'seamfs_opt': a.seamfs_opt,
            'delay_ms': a.delay_ms, 'cap_rate': CAP_RATE, 'runs': a.runs,
            'viewers': a.viewers, 'view_secs': a.view_secs, 'seek_secs': a.seek_secs,
            'budget_mib': a.budget_mib, 'cases': a.cases, 'rclone': a.rclone,
            'load_start': machine_load()}
    try:
        b.make_data()
        meta.update(big_mib=b.big_mib, part_mib=b.part_mib, cap_mib=b.cap_mib,
                    open_files=b.nopen)
        b.start_origins()
        b.write_catalog()
        b.run()
    finally:
        b.close()
    c1 = cpu_busy()
    meta['load_end'] = machine_load()
    meta['cpu_busy_pct'] = 100.0 * (1 - (c1[1] - c0[1]) / max(1, c1[0] - c0[0]))
    meta['elapsed_s'] = time.monotonic() - t0
    rc = report(b.recs, a, meta, a.out)
    say(f'took {meta["elapsed_s"]:.0f} s')
    return rc


if __name__ == '__main__':
    sys.exit(main())
