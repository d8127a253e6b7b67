#!/usr/bin/env python3
"""Cluster mode's cost on plain reads: the same catalog mounted twice in one
run, once embedded (no store=) and once with store=redis://..., against one
seam-origin on loopback; the two mounts are measured in turns.

  sudo python3 bench/cluster.py [--seamfs PATH] [--origin PATH] [--runs N]
                                [--files N] [--reads N] [--work DIR]
                                [--max-connections N]
                                [--case reads|failover|burst] [--down-after MS]

--case failover and --case burst are clusterha.py's (its docstring says
what they measure); the default case is this:

Files of 8 MiB. Files of 8 MiB. Prints, for each mount, the medians of
  - open + first 64 KiB of a file never read before (a fresh file per open,
    so the head cache does not answer), and
  - a random 64 KiB read of an open file (uniform offsets; the kernel's page
    cache of the file dropped before each, so that seamfs answers it),
the ratio cluster / embedded (the issue's target: at most 1.10 each), and
the Redis round trips per open and per read, from status.json's
store.calls before and after (the heartbeat's own calls, 3 a heartbeat,
are counted apart by measuring an idle period as long as the run).
Needs root (FUSE mounts), redis-server and a built seam-origin. Standard
library only; every process is stopped by its PID.
"""

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mountlib import daemon_env, fs_mounted, say, stop, unmount  # noqa: E402

KIB = 1024
MIB = 1024 * KIB


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def status(mnt):
    with open(os.path.join(mnt, '.seamfs', 'status.json')) as f:
        return json.load(f)


def calls(mnt):
    st = status(mnt).get('store')
    return st['calls'] if st else 0


def open_first(mnt, name):
    t0 = time.perf_counter()
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    try:
        got = os.pread(fd, 64 * KIB, 0)
    finally:
        os.close(fd)
    assert len(got) == 64 * KIB
    return time.perf_counter() - t0


def random_reads(mnt, name, size, n, rng):
    out = []
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    try:
        for _ in range(n):
            off = rng.randrange(0, size - 64 * KIB) // 4096 * 4096
            # not from the kernel's page cache: seamfs answers every read
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            t0 = time.perf_counter()
            got = os.pread(fd, 64 * KIB, off)
            out.append(time.perf_counter() - t0)
            assert len(got) == 64 * KIB
    finally:
        os.close(fd)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seamfs', default=os.path.join(here, '..', 'build', 'seamfs'))
    ap.add_argument('--origin', default=None)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--files', type=int, default=40, help='opens per mount and run')
    ap.add_argument('--reads', type=int, default=200, help='random reads per mount and run')
    ap.add_argument('--work', default=None)
    ap.add_argument('--max-connections', type=int, default=0,
                    help="the origin's provider limit (0: none); with one, the cluster "
                         "mount leases its slots from Redis")
    ap.add_argument('--case', choices=('reads', 'failover', 'burst'), default='reads',
                    help='reads: the cost of cluster mode on plain reads (above); failover: '
                         'readers across a Redis master failover behind Sentinel; burst: '
                         'where 8 transcodes opened on one host are written (clusterha.py)')
    ap.add_argument('--down-after', type=int, default=1000,
                    help="failover: the sentinels' down-after-milliseconds")
    ap.add_argument('--kill-at', type=float, default=10.0,
                    help='failover: seconds into the reads when the master is killed')
    ap.add_argument('--plain-mib', type=int, default=48, help='failover: the plain file')
    a = ap.parse_args()
    seamfs = os.path.abspath(a.seamfs)
    origin = a.origin or os.path.join(os.path.dirname(seamfs), 'tests', 'server', 'seam-origin')
    if a.case != 'reads':
        import clusterha
        a.seamfs, a.origin = seamfs, origin
        a.work = a.work or tempfile.mkdtemp(prefix='seamfs-cluster-bench-')
        try:
            sys.exit(clusterha.failover(a) if a.case == 'failover' else clusterha.burst(a))
        finally:
            if not any(x.startswith('--work') for x in sys.argv):
                subprocess.run(['rm', '-rf', a.work])
    work = a.work or tempfile.mkdtemp(prefix='seamfs-cluster-bench-')
    data = os.path.join(work, 'data')
    os.makedirs(data, exist_ok=True)
    size = 8 * MIB
    nfiles = a.files * a.runs
    say(f'{nfiles} files of {size // MIB} MiB in {data}')
    for i in range(nfiles):
        p = os.path.join(data, f'f{i:03d}.bin')
        if not os.path.exists(p) or os.path.getsize(p) != size:
            with open(p, 'wb') as f:
                f.write(os.urandom(size))
    procs = []
    mounts = []
    try:
        rport = free_port()
        procs.append(subprocess.Popen(
            ['redis-server', '--port', str(rport), '--bind', '127.0.0.1', '--save', '',
             '--appendonly', 'no', '--dir', work], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True))
        if not wait_port(rport):
            sys.exit('redis-server did not start')
        o = subprocess.Popen([origin, '--root', data], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(o)
        line = o.stdout.readline().decode().split()
        oport = int(line[1])
        src = {'provider': 'origin'} if a.max_connections else {}
        cat = {'assets': [{'id': f'f{i:03d}', 'path': f'f{i:03d}.bin', 'size': size,
                           'sources': [dict(src, url=f'http://127.0.0.1:{oport}/f{i:03d}.bin')]}
                          for i in range(nfiles)]}
        if a.max_connections:
            # a limited provider: in cluster mode its slots are leased from
            # the store (an open with no slot held here asks for one)
            cat['providers'] = [{'name': 'origin', 'max_connections': a.max_connections}]
        catp = os.path.join(work, 'catalog.json')
        with open(catp, 'w') as f:
            json.dump(cat, f)
        for kind in ('embedded', 'cluster'):
            mnt = os.path.join(work, 'mnt-' + kind)
            os.makedirs(mnt, exist_ok=True)
            opts = [f'state_dir={work}/state-{kind}']
            if kind == 'cluster':
                opts += [f'store=redis://127.0.0.1:{rport}', 'host_id=bench']
            p = subprocess.Popen([seamfs, '-f', '-o', ','.join(opts), catp, mnt],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, kind + '.log'), 'wb'),
                                 env=daemon_env(), start_new_session=True)
            procs.append(p)
            mounts.append(mnt)
            deadline = time.monotonic() + 20
            while not fs_mounted(mnt):
                if p.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f'{kind} mount failed; see {work}/{kind}.log')
                time.sleep(0.05)
        res = {k: {'open': [], 'read': [], 'calls': 0} for k in ('embedded', 'cluster')}
        rng = random.Random(7)
        t_start = time.monotonic()
        c0 = calls(mounts[1])
        fi = 0
        for run in range(a.runs):
            # each file is opened on both mounts, first on one, then on the
            # other, in turns: the origin's page cache favours the second
            for i in range(a.files):
                pairs = list(zip(('embedded', 'cluster'), mounts))
                for kind, mnt in (pairs if fi % 2 else pairs[::-1]):
                    res[kind]['open'].append(open_first(mnt, f'f{fi:03d}.bin'))
                fi += 1
            pairs = list(zip(('embedded', 'cluster'), mounts))
            for kind, mnt in (pairs if run % 2 else pairs[::-1]):
                res[kind]['read'] += random_reads(mnt, 'f000.bin', size, a.reads, rng)
        took = time.monotonic() - t_start
        ran = calls(mounts[1]) - c0
        # the heartbeat's own calls over as long a time, measured idle
        c1 = calls(mounts[1])
        time.sleep(min(took, 30))
        idle = (calls(mounts[1]) - c1) * took / min(took, 30)
        nopen, nread = a.files * a.runs, a.reads * a.runs
        print(f'{"":10} {"open+64K med ms":>16} {"rand 64K med ms":>16}')
        med = {}
        for kind in ('embedded', 'cluster'):
            med[kind] = (statistics.median(res[kind]['open']) * 1e3,
                         statistics.median(res[kind]['read']) * 1e3)
            print(f'{kind:10} {med[kind][0]:16.3f} {med[kind][1]:16.3f}')
        print(f'{"ratio":10} {med["cluster"][0] / med["embedded"][0]:16.2f} '
              f'{med["cluster"][1] / med["embedded"][1]:16.2f}   (target <= 1.10)')
        extra = max(0.0, ran - idle)
        print(f'Redis round trips: {ran} during the run, about {idle:.0f} of them the '
              f'heartbeat\'s; {extra / (nopen + nread):.3f} per open or read '
              f'({nopen} opens, {nread} reads)')
    finally:
        for mnt in mounts:
            unmount(mnt)
        for p in reversed(procs):
            stop(p)
        if not a.work:
            subprocess.run(['rm', '-rf', work])


if __name__ == '__main__':
    main()
