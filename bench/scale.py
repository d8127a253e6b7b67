#!/usr/bin/python3
"""Scale benchmark helper (bench/scale.sh runs it; see bench/README.md).

What a large catalog costs the daemon: the time from start until the mount
shows in /proc/mounts, the daemon's memory (VmRSS, VmHWM) once it is up, and
the requests the origins receive while it mounts; then the same again for a
remount with the same state dir. Catalogs are generated at run time, one per
variant:

  mtime-1src     size + mtime, 1 source per asset
  nomtime-1src   size, no mtime, 1 source per asset
  mtime-3src     size + mtime, 3 sources per asset (3 origins: 3 providers)
  nomtime-3src   size, no mtime, 3 sources (not run unless asked for)

plus a base catalog of one asset, whose mount gives the daemon's own RSS.
Every source points at a counting origin on 127.0.0.1: a tiny http.server
in this process that counts the connections it accepts and the requests it
reads (and answers 404), so "no request at mount" is measured.

    scale.py run --seamfs BIN --work DIR --pidfile FILE [--assets N]
                 [--variants LIST] [--out FILE] [--mount-wait S] [--settle S]

Prints the table on stdout, progress on stderr, writes everything to --out
(JSON). Exit 0 whether targets are met or not; 1 when the harness broke (a
mount that never came up, a daemon that died or would not stop, assets not
listed). Standard library only.
"""

import argparse
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from mountlib import Pids, stop  # noqa: E402 (bench/, the script's own folder)
from tools import tree_cpu, tree_status  # noqa: E402 (bench/tools.py)

MIB = 1024 * 1024
KB = 1024
BASE_TIME = 1_600_000_000
PER_FOLDER = 20

# targets (issue 14)
T_PER_ASSET = 1024              # bytes of daemon memory per asset, beyond its JSON text
T_REMOUNT_S = 2.0               # remount of 100 000 assets
T_REMOUNT_RSS = 200 * MIB       # peak RSS of that remount
T_REQUESTS = 0                  # requests at mount when every asset has a size

VARIANTS = {
    'mtime-1src': {'mtime': True, 'sources': 1},
    'nomtime-1src': {'mtime': False, 'sources': 1},
    'mtime-3src': {'mtime': True, 'sources': 3},
    'nomtime-3src': {'mtime': False, 'sources': 3},
}
DEFAULT_VARIANTS = 'mtime-1src,nomtime-1src,mtime-3src'


class HarnessError(Exception):
    pass


def say(*a):
    print('==>', *a, file=sys.stderr, flush=True)


def daemon_env():
    # libcurl would send the loopback requests to a proxy
    return {k: v for k, v in os.environ.items()
            if k.lower() not in ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy')}


def _unescape(field):
    # /proc/mounts escapes space, tab, newline and backslash as \ooo
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), field)


def mount_type(mnt):
    """The filesystem type mounted on mnt, or None."""
    with open('/proc/mounts') as f:
        for line in f:
            p = line.split()
            if len(p) > 2 and _unescape(p[1]) == mnt:
                return p[2]
    return None


def unmount(mnt, budget=15.0):
    """fusermount3 -u, retried while busy for at most budget seconds, then
    lazily. True when it went without the lazy detach."""
    end = time.monotonic() + budget
    while time.monotonic() < end:
        if mount_type(mnt) is None:
            return True
        try:
            if subprocess.run(['fusermount3', '-u', mnt], capture_output=True,
                              timeout=10).returncode == 0:
                return True
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.25)
    try:
        subprocess.run(['fusermount3', '-uz', mnt], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return False


# ---- the counting origin

class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.first = []          # the first few request lines, for the report

    def conn(self):
        with self.lock:
            self.connections += 1

    def req(self, line):
        with self.lock:
            self.requests += 1
            if len(self.first) < 10:
                self.first.append(line)

    def snap(self):
        with self.lock:
            return {'connections': self.connections, 'requests': self.requests}


class CountingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, counter):
        self.counter = counter
        super().__init__(('127.0.0.1', 0), CountingHandler)

    def get_request(self):
        s = super().get_request()
        self.counter.conn()
        return s


class CountingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    timeout = 30

    def _answer(self):
        self.server.counter.req(self.requestline)
        body = b'not served: seamfs scale benchmark origin (counts requests)\n'
        self.send_response(404)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_OPTIONS = _answer

    def log_message(self, *a):
        pass


class Origin:
    def __init__(self):
        self.counter = Counter()
        self.server = CountingServer(self.counter)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={'poll_interval': 0.2}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def origin_counts(origins):
    c = {'connections': 0, 'requests': 0}
    for o in origins:
        s = o.counter.snap()
        c['connections'] += s['connections']
        c['requests'] += s['requests']
    return c


def diff(a, b):
    return {k: b[k] - a[k] for k in a}


def check_origins(origins):
    """One request to each origin, so a counter that does not count is found
    before it is trusted to say 0."""
    for o in origins:
        before = o.counter.snap()['requests']
        with socket.create_connection(('127.0.0.1', o.port), timeout=5) as s:
            s.sendall(b'GET /selftest HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
            s.settimeout(5)
            while s.recv(4096):
                pass
        end = time.monotonic() + 5
        while o.counter.snap()['requests'] == before and time.monotonic() < end:
            time.sleep(0.01)
        if o.counter.snap()['requests'] != before + 1:
            raise HarnessError(f'origin 127.0.0.1:{o.port} did not count its self-test request')


# ---- catalogs

def make_catalog(path, n, with_mtime, nsources, ports, seed=14):
    """N assets, PER_FOLDER per folder; returns the file's size in bytes."""
    rng = random.Random(seed)
    shows = max(1, (n + PER_FOLDER - 1) // PER_FOLDER)
    sw = max(4, len(str(shows - 1)))
    ew = max(6, len(str(n - 1)))
    parts = []
    for i in range(n):
        show = i // PER_FOLDER
        size = rng.randrange(100_000_000, 8_000_000_000)
        srcs = ','.join(
            f'{{"url":"http://127.0.0.1:{ports[k]}/media/show-{show:0{sw}d}/ep-{i:0{ew}d}.mkv"}}'
            for k in range(nsources))
        mt = f',"mtime":{BASE_TIME + rng.randrange(0, 100_000_000)}' if with_mtime else ''
        parts.append(f'{{"id":"ep-{i:0{ew}d}",'
                     f'"path":"Shows/Show {show:0{sw}d}/Season 01/Episode {i:0{ew}d}.mkv",'
                     f'"size":{size}{mt},"sources":[{srcs}]}}')
    text = '{"assets":[\n' + ',\n'.join(parts) + '\n]}\n'
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)
    # the last asset, to check that it is listed with its catalog size
    last = n - 1
    probe = (f'Shows/Show {last // PER_FOLDER:0{sw}d}/Season 01/Episode {last:0{ew}d}.mkv', size)
    return len(text.encode()), probe


# ---- one mount

def proc_status(pid):
    """Memory of the daemon: the process and its descendants (seamfs's
    keeper and worker), summed, in bytes (Threads: a count)."""
    st = tree_status(pid, ('VmRSS', 'VmHWM', 'VmSize', 'Threads', 'RssAnon', 'RssFile'))
    return {k: v if k == 'Threads' else v * KB for k, v in st.items()}


def proc_cpu(pid):
    return tree_cpu(pid)


def dir_bytes(d):
    total = 0
    for root, _, files in os.walk(d):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def log_summary(path):
    listed = total = None
    warns = []
    with open(path, errors='replace') as f:
        for line in f:
            m = re.search(r'(\d+) of (\d+) assets listed', line)
            if m:
                listed, total = int(m.group(1)), int(m.group(2))
            if re.search(r'\b(warn|warning|error)\b', line, re.I):
                if len(warns) < 20:
                    warns.append(line.rstrip()[:300])
    return listed, total, warns


def one_mount(args, label, catalog, state, mnt, origins, pids, logdir, probe, n):
    """Start seamfs, wait for the mount, measure, unmount. Returns a record;
    raises HarnessError when the mount did not come up or the daemon would
    not go."""
    log = os.path.join(logdir, f'{label}.log')
    cmd = [args.seamfs, '-f', '-o', f'state_dir={state}', catalog, mnt]
    rec = {'label': label, 'cmd': cmd, 'log': log}
    if mount_type(mnt) is not None:
        raise HarnessError(f'{mnt} is still mounted before {label}')
    c0 = origin_counts(origins)
    with open(log, 'wb') as lf:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                                env=daemon_env(), start_new_session=True)
    pids.add(proc.pid)
    try:
        deadline = t0 + args.mount_wait
        up = False
        while time.monotonic() < deadline:
            if mount_type(mnt) == 'fuse.seamfs':
                up = True
                break
            if proc.poll() is not None:
                break
            time.sleep(0.005)
        t_up = time.monotonic() - t0
        if not up:
            if proc.poll() is not None:
                raise HarnessError(f'{label}: seamfs exited {proc.returncode} before the mount '
                                   f'showed (log: {log})')
            raise HarnessError(f'{label}: no mount after {args.mount_wait:.0f} s (log: {log})')
        rec['mount_s'] = t_up
        rec['cpu_s_at_mount'] = proc_cpu(proc.pid)
        rec['origin_at_visible'] = diff(c0, origin_counts(origins))
        time.sleep(args.settle)
        if proc.poll() is not None:
            raise HarnessError(f'{label}: seamfs died {args.settle} s after mounting '
                               f'(exit {proc.returncode}, log: {log})')
        st = proc_status(proc.pid)
        rec['rss'] = st.get('VmRSS')
        rec['hwm'] = st.get('VmHWM')
        rec['rss_anon'] = st.get('RssAnon')
        rec['vmsize'] = st.get('VmSize')
        rec['threads'] = st.get('Threads')
        rec['origin_after_settle'] = diff(c0, origin_counts(origins))
        # a few lookups, after the memory was read: is the last asset there,
        # with its catalog size?
        if probe is not None:
            p = os.path.join(mnt, probe[0])
            try:
                sz = os.stat(p).st_size
                rec['probe_ok'] = sz == probe[1]
                if sz != probe[1]:
                    rec['probe_error'] = f'{probe[0]}: size {sz}, catalog says {probe[1]}'
            except OSError as e:
                rec['probe_ok'] = False
                rec['probe_error'] = f'{probe[0]}: {e.strerror}'
        t1 = time.monotonic()
        clean = unmount(mnt, budget=args.stop_wait)
        try:
            proc.wait(args.stop_wait)
            rec['exit'] = proc.returncode
        except subprocess.TimeoutExpired:
            rec['exit'] = None
            rec['stop_note'] = f'still running {args.stop_wait:.0f} s after the unmount; SIGTERM'
            if not stop(proc):
                rec['stop_note'] += ', then SIGKILL'
        rec['unmount_s'] = time.monotonic() - t1
        rec['unmount_clean'] = clean
        rec['origin_total'] = diff(c0, origin_counts(origins))
    finally:
        if proc.poll() is None:
            unmount(mnt, budget=5)
            stop(proc)
        if proc.poll() is not None:
            pids.remove(proc.pid)
    if proc.poll() is None:
        raise HarnessError(f'{label}: seamfs (pid {proc.pid}) survived SIGKILL')
    listed, total, warns = log_summary(log)
    rec['listed'], rec['catalog_assets'], rec['log_warnings'] = listed, total, warns
    rec['state_bytes'] = dir_bytes(state)
    problems = []
    if listed is None:
        problems.append('no "N of M assets listed" line in the log')
    elif listed != n:
        problems.append(f'{listed} of {n} assets listed')
    if rec.get('probe_ok') is False:
        problems.append(rec.get('probe_error', 'the last asset is missing'))
    if rec['exit'] not in (0,):
        problems.append(f'daemon exit {rec["exit"]}' + (f' ({rec["stop_note"]})' if 'stop_note' in rec else ''))
    rec['problems'] = problems
    say(f'{label}: up in {t_up:.3f} s, RSS {rec["rss"] / MIB:.1f} MiB (peak {rec["hwm"] / MIB:.1f}), '
        f'{rec["origin_after_settle"]["requests"]} requests, '
        f'{rec["origin_after_settle"]["connections"]} connections; unmounted in {rec["unmount_s"]:.2f} s'
        + (f'; PROBLEMS: {"; ".join(problems)}' if problems else ''))
    return rec


# ---- the run

def evaluate(v):
    """The targets of one variant: list of (name, target text, value text, met)."""
    m, r = v['mount'], v['remount']
    per_over_json = v['per_asset_bytes'] - v['json_per_asset']
    reqs = max(m['origin_after_settle']['requests'], r['origin_after_settle']['requests'])
    conns = max(m['origin_after_settle']['connections'], r['origin_after_settle']['connections'])
    checks = [
        ('memory', f'<= {T_PER_ASSET} B/asset beyond JSON',
         f'{per_over_json:.0f} B/asset beyond JSON ({v["per_asset_bytes"]:.0f} - {v["json_per_asset"]:.0f})',
         per_over_json <= T_PER_ASSET),
        ('remount time', f'< {T_REMOUNT_S:g} s', f'{r["mount_s"]:.3f} s', r['mount_s'] < T_REMOUNT_S),
        ('remount RSS', f'< {T_REMOUNT_RSS // MIB} MiB peak', f'{r["hwm"] / MIB:.1f} MiB (VmHWM)',
         r['hwm'] < T_REMOUNT_RSS),
        ('requests at mount', f'{T_REQUESTS} requests, 0 connections',
         f'{m["origin_after_settle"]["requests"]} + {r["origin_after_settle"]["requests"]} requests, '
         f'{m["origin_after_settle"]["connections"]} + {r["origin_after_settle"]["connections"]} connections',
         reqs <= T_REQUESTS and conns == 0),
    ]
    return [{'target': c[0], 'want': c[1], 'got': c[2], 'met': bool(c[3])} for c in checks]


def report(res, out):
    n = res['assets']
    lines = []
    lines.append(f'scale: {n} assets per catalog, {PER_FOLDER} per folder, counting origins on '
                 f'127.0.0.1, settle {res["settle_s"]:g} s, {os.cpu_count()} CPUs; base RSS '
                 f'{res["base"]["rss"] / MIB:.1f} MiB (1 asset)')
    if n != 100000:
        lines.append(f'(the remount targets are stated for 100 000 assets; here they are applied '
                     f'as they are to {n})')
    hdr = ['variant', 'assets', 'src/asset', 'mount s', 'remount s', 'RSS MiB', 'peak MiB',
           'B/asset', 'JSON B/asset', 'requests', 'target', 'met?']
    rows = []
    for v in res['variants']:
        m, r = v['mount'], v['remount']
        misses = [c['target'] for c in v['checks'] if not c['met']]
        rows.append([
            v['name'], str(n), str(v['sources']),
            f'{m["mount_s"]:.3f}', f'{r["mount_s"]:.3f}',
            f'{v["rss"] / MIB:.1f}', f'{v["hwm"] / MIB:.1f}',
            f'{v["per_asset_bytes"]:.0f}', f'{v["json_per_asset"]:.0f}',
            f'{m["origin_after_settle"]["requests"]}/{r["origin_after_settle"]["requests"]}',
            f'1K+JSON, <{T_REMOUNT_S:g}s, <{T_REMOUNT_RSS // MIB}M, 0 req',
            'yes' if not misses else 'NO: ' + ', '.join(misses),
        ])
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    fmt = lambda cells: '  '.join(c.ljust(w[i]) if i in (0, 10, 11) else c.rjust(w[i])
                                  for i, c in enumerate(cells)).rstrip()
    lines.append(fmt(hdr))
    for r in rows:
        lines.append(fmt(r))
    lines.append('')
    lines.append('mount s, remount s: from exec until the mount shows in /proc/mounts (fresh state '
                 'dir, then the same state dir)')
    lines.append('RSS, peak: the larger VmRSS / VmHWM of the two mounts, '
                 f'{res["settle_s"]:g} s after the mount showed; '
                 'B/asset = (RSS - base RSS) / assets')
    lines.append('requests: origin requests from exec to the end of the settle, mount/remount')
    lines.append('')
    lines.append('TARGETS (remount figures: the remount; memory: the larger RSS of the two):')
    for v in res['variants']:
        for c in v['checks']:
            lines.append(f'  {v["name"]:<13} {c["target"]:<18} {"PASS" if c["met"] else "MISS":<5} '
                         f'{c["got"]}  (target {c["want"]})')
    extra = []
    for v in res['variants']:
        for k in ('mount', 'remount'):
            rec = v[k]
            extra.append(f'  {v["name"]:<13} {k:<8} unmount {rec["unmount_s"]:.2f} s, '
                         f'cpu {rec["cpu_s_at_mount"]:.2f} s to mount, RSS {rec["rss"] / MIB:.1f} MiB, '
                         f'peak {rec["hwm"] / MIB:.1f} MiB, state {rec["state_bytes"] / MIB:.1f} MiB, '
                         f'{rec["threads"]} threads')
    lines.append('')
    lines.append('PER MOUNT (catalog JSON: ' + ', '.join(
        f'{v["name"]} {v["catalog_bytes"] / MIB:.1f} MiB' for v in res['variants']) + '):')
    lines.extend(extra)
    warn_lines = []
    for v in [{'name': 'base', 'mount': res['base']}] + res['variants']:
        for k in ('mount', 'remount'):
            rec = v.get(k)
            if rec and rec.get('log_warnings'):
                warn_lines.append(f'  {v["name"]} {k}: {len(rec["log_warnings"])} warning/error '
                                  f'line(s) in {rec["log"]}, first: {rec["log_warnings"][0]}')
    if warn_lines:
        lines.append('')
        lines.append('DAEMON LOG WARNINGS:')
        lines.extend(warn_lines)
    if res.get('origin_first_requests'):
        lines.append('')
        lines.append('FIRST REQUESTS THE ORIGINS SAW: ' + '; '.join(res['origin_first_requests']))
    print('\n'.join(lines), flush=True)
    with open(out, 'w') as f:
        json.dump(res, f, indent=1)
        f.write('\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('cmd', choices=['run'])
    ap.add_argument('--seamfs', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--pidfile', required=True)
    ap.add_argument('--out', default=None)
    ap.add_argument('--assets', type=int, default=100000)
    ap.add_argument('--variants', default=DEFAULT_VARIANTS)
    ap.add_argument('--mount-wait', type=float, default=120.0)
    ap.add_argument('--stop-wait', type=float, default=60.0)
    ap.add_argument('--settle', type=float, default=1.0)
    args = ap.parse_args()
    # SIGTERM (scale.sh's trap) ends the run through the finally blocks
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    variants = [x for x in args.variants.split(',') if x]
    for x in variants:
        if x not in VARIANTS:
            ap.error(f'unknown variant {x!r} ({", ".join(VARIANTS)})')
    if args.assets < 1:
        ap.error('--assets: at least 1')
    out = args.out or os.path.join(args.work, 'out', 'scale.json')
    logdir = os.path.join(os.path.dirname(out), 'logs')
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir, exist_ok=True)
    catdir = os.path.join(args.work, 'catalogs')
    os.makedirs(catdir, exist_ok=True)
    mnt = os.path.join(args.work, 'mnt')
    os.makedirs(mnt, exist_ok=True)
    statedir = os.path.join(args.work, 'state')
    shutil.rmtree(statedir, ignore_errors=True)
    pids = Pids(args.pidfile)
    origins = []
    t_start = time.monotonic()
    res = {'assets': args.assets, 'per_folder': PER_FOLDER, 'settle_s': args.settle,
           'seamfs': args.seamfs, 'cpus': os.cpu_count(),
           'targets': {'per_asset_bytes_beyond_json': T_PER_ASSET, 'remount_s': T_REMOUNT_S,
                       'remount_rss_bytes': T_REMOUNT_RSS, 'requests_at_mount': T_REQUESTS},
           'variants': []}
    errors = []
    try:
        origins = [Origin() for _ in range(3)]
        ports = [o.port for o in origins]
        check_origins(origins)
        say('counting origins on ' + ', '.join(f'127.0.0.1:{p}' for p in ports))
        res['origin_ports'] = ports
        # the base: one asset
        base_cat = os.path.join(catdir, 'base.json')
        make_catalog(base_cat, 1, True, 1, ports)
        base_state = os.path.join(statedir, 'base')
        os.makedirs(base_state)
        base = one_mount(args, 'base-mount', base_cat, base_state, mnt, origins, pids, logdir,
                         None, 1)
        if base['problems']:
            errors.extend(f'base: {p}' for p in base['problems'])
        res['base'] = base
        for name in variants:
            spec = VARIANTS[name]
            cat = os.path.join(catdir, f'{name}.json')
            t = time.monotonic()
            nbytes, probe = make_catalog(cat, args.assets, spec['mtime'], spec['sources'], ports)
            say(f'{name}: catalog of {args.assets} assets, {spec["sources"]} source(s) each, '
                f'{"with" if spec["mtime"] else "without"} mtime: {nbytes / MIB:.1f} MiB '
                f'({time.monotonic() - t:.1f} s to write)')
            state = os.path.join(statedir, name)
            os.makedirs(state)
            v = {'name': name, 'sources': spec['sources'], 'mtime': spec['mtime'],
                 'catalog': cat, 'catalog_bytes': nbytes,
                 'json_per_asset': nbytes / args.assets}
            v['mount'] = one_mount(args, f'{name}-mount', cat, state, mnt, origins, pids,
                                   logdir, probe, args.assets)
            v['remount'] = one_mount(args, f'{name}-remount', cat, state, mnt, origins, pids,
                                     logdir, probe, args.assets)
            for k in ('mount', 'remount'):
                errors.extend(f'{name} {k}: {p}' for p in v[k]['problems'])
            v['rss'] = max(v['mount']['rss'], v['remount']['rss'])
            v['hwm'] = max(v['mount']['hwm'], v['remount']['hwm'])
            v['per_asset_bytes'] = (v['rss'] - base['rss']) / args.assets
            v['checks'] = evaluate(v)
            res['variants'].append(v)
            # the catalog is regenerated on every run; the big ones go
            os.unlink(cat)
    except HarnessError as e:
        errors.append(str(e))
    finally:
        unmount(mnt, budget=10)
        firsts = []
        for o in origins:
            firsts.extend(f'127.0.0.1:{o.port} {line}' for line in o.counter.first
                          if 'selftest' not in line)
            o.close()
        res['origin_first_requests'] = firsts[:10]
    res['wall_s'] = time.monotonic() - t_start
    res['errors'] = errors
    if 'base' in res and res['variants']:
        report(res, out)
    else:
        with open(out, 'w') as f:
            json.dump(res, f, indent=1)
    if errors:
        print('\nERRORS:', file=sys.stdout)
        for e in errors:
            print('  ' + e, file=sys.stdout)
        print(f'\nscale.json: {out}', flush=True)
        return 1
    print(f'\nscale.json: {out}; logs: {logdir}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
