"""contrib/seamfs-loadtest and the fio profiles of contrib/fio/, run briefly
on a mount over nginx: each profile's table parses, shows every player
reading with no stall and no error, and the seamfs rows are there; then
every file read through the mount has its original's SHA-256 (fio reads
bytes but cannot check read-only data). The stall detector can fail (a
scan budget no read can meet), and a directory that is not a seamfs mount
is refused."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import HERE, MIB, asset, bounded, catalog, sha256_file, wait_until

SCRIPT = HERE.parent.parent / 'contrib' / 'seamfs-loadtest'
FIO_DIR = HERE.parent.parent / 'contrib' / 'fio'
DURATION = 2
VIEWERS = 2
RUN_BOUND = 90

# name in the session data -> path in the mount
LIBRARY = {
    'big.bin': 'Movies/Big (2020)/Big (2020).mkv',
    'mid.bin': 'Movies/Mid (2021)/Mid (2021).mkv',
    'odd.bin': 'Shows/Odd/Season 1/Odd S01E01.mkv',
    'mib1.bin': 'Shows/Odd/Season 1/Odd S01E02.mkv',
    'clip.mkv': 'Shows/Clip/Clip S01E01.mkv',
    'page.bin': 'Shows/Clip/Clip S01E01.nfo',
    'one.bin': 'Movies/Big (2020)/poster.jpg',
    'empty.bin': 'Movies/empty.mkv',
}


@pytest.fixture
def fio():
    f = shutil.which('fio')
    if not f:
        pytest.fail('fio is not installed (contrib/setup-debian.sh installs it)')
    return f


@pytest.fixture
def library(seamfs, nginx, data):
    cat = catalog(*(asset(name.replace('.', '-'), path, nginx.url(name), size=data[name].size,
                          mtime=1700000000)
                    for name, path in LIBRARY.items()))
    return seamfs.mount(cat)


def run(mnt, profile, *extra, expect=0):
    argv = [sys.executable, str(SCRIPT), str(mnt), profile, '--viewers', str(VIEWERS)]
    if '--duration' not in extra:
        argv += ['--duration', str(DURATION)]
    argv += list(extra)
    env = dict(os.environ, SEAMFS_FIO_DIR=str(FIO_DIR))
    r = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_BOUND, env=env)
    assert r.returncode == expect, f'exit {r.returncode}\n{r.stdout}\n{r.stderr}'
    return r


def parse_table(text):
    """The players' table ({job: row}) and the seamfs table ({name: (before,
    after, delta)}) of the script's output; fails on anything unexpected."""
    lines = text.splitlines()
    assert lines[0].startswith('seamfs-loadtest: profile '), lines[0]
    i = lines.index(next(x for x in lines if x.startswith('JOB ')))
    head = lines[i].split()
    assert head == ['JOB', 'MBIT', 'READS', 'BYTES', 'SEEKS', 'P50_MS', 'P99_MS', 'MAX_MS',
                    'BUDGET_MS', 'STALLS', 'ERRORS', 'FILE'], head
    jobs = {}
    for line in lines[i + 1:]:
        if not line.strip():
            break
        cells = line.split(None, 11)
        assert len(cells) >= 11, line
        row = dict(zip(head, cells + [''] * (12 - len(cells))))
        for k in ('READS', 'BYTES', 'STALLS', 'ERRORS'):
            row[k] = int(row[k])
        row['SEEKS'] = None if row['SEEKS'] == '-' else int(row['SEEKS'])
        for k in ('P50_MS', 'P99_MS', 'MAX_MS', 'BUDGET_MS', 'MBIT'):
            row[k] = None if row[k] == '-' else float(row[k])
        jobs[row['JOB']] = row
    j = lines.index(next(x for x in lines if x.startswith('SEAMFS ')))
    assert lines[j].split() == ['SEAMFS', 'BEFORE', 'AFTER', 'DELTA'], lines[j]
    seam = {}
    for line in lines[j + 1:]:
        if not line.strip():
            break
        name, before, after, delta = line.split()
        seam[name] = (float(before), float(after), float(delta))
        assert seam[name][1] - seam[name][0] == seam[name][2], line
    result = [x for x in lines if x.startswith('result: ')]
    assert len(result) == 1, text
    return jobs, seam, result[0]


def check_bytes(m, data):
    """Every file through the mount is its original, byte for byte."""
    for name, path in LIBRARY.items():
        got = bounded(lambda p=path: sha256_file(m.path(p)), 60, f'read {path}')
        assert got == data[name].sha256, path


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


PROFILES = {
    # profile: (rated jobs, each with its bitrate in Mbit/s; scan jobs)
    'viewers': ([('viewer', 8)] * VIEWERS, 0),
    'viewers-25m': ([('viewer', 25)] * VIEWERS, 0),
    'seekstorm': ([('seeker', 8)] * VIEWERS, 0),
    'scan': ([], 2),
    'mixed': ([('viewer', 8)] * VIEWERS + [('hd', 25), ('seeker', 8)], 2),
}


@pytest.mark.parametrize('profile', list(PROFILES))
def test_profile(library, data, fio, profile):
    m = library
    r = run(m.mnt, profile, '--fail-on-stall')
    jobs, seam, result = parse_table(r.stdout)
    rated, nscan = PROFILES[profile]
    want = {}
    for role, mbit in rated:
        want[f'{role}.{sum(1 for k in want if k.startswith(role + "."))}'] = mbit
    want.update({'scan-head.0': None, 'scan-tail.0': None} if nscan else {})
    assert set(jobs) == set(want) | {'all'}, jobs
    paths = set(LIBRARY.values())
    big_enough = sorted(p for n, p in LIBRARY.items() if data[n].size >= MIB)
    for name, mbit in want.items():
        row = jobs[name]
        assert row['MBIT'] == mbit, row
        assert row['READS'] >= 1 and row['BYTES'] >= row['READS'], row
        assert row['STALLS'] == 0 and row['ERRORS'] == 0, row
        assert row['MAX_MS'] is not None and row['P50_MS'] <= row['MAX_MS'], row
        if mbit:
            # one read of 1 MiB lasts 8 Mibit / bitrate at the player
            assert row['BUDGET_MS'] == pytest.approx(MIB * 8 / (mbit * 1e6) * 1e3, abs=0.1)
            assert row['FILE'] in paths, row
        else:
            assert row['BUDGET_MS'] == 1000.0 and row['FILE'] == f'({len(big_enough)} files)'
            assert row['SEEKS'] is None, row      # reads of many files: not counted
    if 'viewer.0' in want:
        # 64 MiB, read from its start for 2 s: in order, no jump
        assert jobs['viewer.0']['FILE'] == LIBRARY['big.bin']
        assert jobs['viewer.0']['SEEKS'] == 0, jobs['viewer.0']
    if nscan:
        # a scan reads heads and tails of every file of 1 MiB or more, once:
        # 256 KiB of head and 8 x 64 KiB about the tail each
        assert jobs['scan-head.0']['BYTES'] == len(big_enough) * 256 * 1024
        assert jobs['scan-tail.0']['BYTES'] == len(big_enough) * 512 * 1024
    assert jobs['all']['STALLS'] == 0 and jobs['all']['ERRORS'] == 0
    assert jobs['all']['BYTES'] == sum(jobs[k]['BYTES'] for k in want)
    assert result == 'result: ok: no stall, no error'
    for row in ('cutovers', 'failed_reads', 'admission_refused', 'slot_waits',
                'slot_timeouts', 'cache_hits', 'cache_fills', 'scans_from_cache',
                'streams', 'direct_reads'):
        assert row in seam, (row, r.stdout)
    assert seam['cutovers'][2] == 0 and seam['failed_reads'][2] == 0, r.stdout
    # the mount is fresh: the first reads of every file fill its head
    assert seam['cache_fills'][2] >= 1, r.stdout
    if nscan:
        # (a scan, whether its reads filled the cache or found it filled:
        # scans_from_cache counts only the latter)
        wait_until(lambda: status(m)['reads']['scans'] >= 1, 10,
                   'the scan counted in status.json')
    assert 'providers at the end: 127.0.0.1:' in r.stdout
    check_bytes(m, data)


def test_seekstorm_jumps(library, data, fio):
    """Seekers jump every fourth read: in 10 s at 8 Mbit/s (about ten reads
    of 1 MiB each) each jumps twice, to a random offset of a file of 8 or
    64 MiB; at least one of those lands elsewhere than where the read
    before ended (all four landing there has odds of 1 in 8^2 x 64^2)."""
    r = run(library.mnt, 'seekstorm', '--duration', '10', '--min-size', '4M',
            '--fail-on-stall')
    jobs, _seam, result = parse_table(r.stdout)
    seekers = [jobs[f'seeker.{k}'] for k in range(VIEWERS)]
    assert {s['FILE'] for s in seekers} == {LIBRARY['big.bin'], LIBRARY['mid.bin']}
    assert sum(s['SEEKS'] for s in seekers) >= 1, r.stdout
    assert all(s['STALLS'] == 0 and s['ERRORS'] == 0 for s in seekers), r.stdout
    assert result == 'result: ok: no stall, no error'
    check_bytes(library, data)


def test_fio_overrunning_its_bound_is_stopped(library, data, fio):
    """--timeout shorter than the run: fio's whole process group is
    stopped, the run fails (exit 3) and names fio's pid, and nothing of
    that group is left."""
    r = run(library.mnt, 'viewers', '--duration', '30', '--timeout', '2', expect=3)
    m = re.search(r'fio did not finish within 2 s; stopped it \(pid (\d+)\)', r.stderr)
    assert m, r.stderr
    with pytest.raises(ProcessLookupError):
        os.killpg(int(m.group(1)), 0)
    check_bytes(library, data)


def test_json(library, data, fio):
    r = run(library.mnt, 'viewers-25m', '--json', '--fail-on-stall')
    doc = json.loads(r.stdout)
    assert doc['ok'] is True and doc['stalls'] == 0 and doc['errors'] == 0
    assert doc['profile'] == 'viewers-25m' and doc['fio_exit'] == 0
    assert [j['job'] for j in doc['jobs']] == [f'viewer.{k}' for k in range(VIEWERS)]
    for j in doc['jobs']:
        assert j['rate_bps'] == 25_000_000 and j['error'] == 0 and j['bytes'] > 0
        assert j['reads'] >= 1 and j['max_ms'] >= j['p50_ms']
    names = {c['name'] for c in doc['seamfs']['counters']}
    assert {'cutovers', 'failed_reads', 'slot_waits', 'admission_refused'} <= names
    assert doc['seamfs']['read_latency']['reads'] >= 1
    check_bytes(library, data)


def test_stall_detector_fails_the_run(library, data, fio):
    """A budget no read can meet: every read of the scan is a stall, and
    --fail-on-stall makes that exit 1; without it the run exits 0."""
    r = run(library.mnt, 'scan', '--scan-budget-ms', '0.000001', '--fail-on-stall', expect=1)
    jobs, _seam, result = parse_table(r.stdout)
    assert jobs['all']['STALLS'] == jobs['all']['READS'] > 0
    assert result.startswith('result: FAIL: ') and 'stalled reads' in result, result
    r = run(library.mnt, 'scan', '--scan-budget-ms', '0.000001')
    assert parse_table(r.stdout)[2].startswith('result: FAIL: ')
    check_bytes(library, data)


def test_failed_reads_are_errors(seamfs, nginx, data, fio, dead_port):
    """A file whose only source refuses connections: the viewer's read
    fails (EIO), the table shows the error on that viewer and seamfs's
    failed reads, and --fail-on-stall exits 1; the good file beside it
    still reads right."""
    dead = 'Movies/Dead (1999)/Dead (1999).mkv'
    m = seamfs.mount(catalog(
        asset('dead', dead, f'http://127.0.0.1:{dead_port}/dead.mkv', size=8 * MIB,
              mtime=1700000000),
        asset('mid', LIBRARY['mid.bin'], nginx.url('mid.bin'), size=data['mid.bin'].size,
              mtime=1700000000)))
    r = run(m.mnt, 'viewers', '--viewers', '1', '--under', 'Movies/Dead (1999)',
            '--fail-on-stall', expect=1)
    jobs, seam, result = parse_table(r.stdout)
    assert jobs['viewer.0']['FILE'] == dead and jobs['viewer.0']['ERRORS'] == 1, r.stdout
    assert seam['failed_reads'][2] >= 1, r.stdout
    assert result.startswith('result: FAIL: 1 read errors (fio), '), result
    assert jobs['all']['ERRORS'] == 1
    got = bounded(lambda: sha256_file(m.path(LIBRARY['mid.bin'])), 60, 'read mid')
    assert got == data['mid.bin'].sha256


def test_refuses_what_is_not_a_mount(tmp_path, fio):
    env = dict(os.environ, SEAMFS_FIO_DIR=str(FIO_DIR))
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), 'viewers'],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 3, r
    assert 'is not a seamfs mount' in r.stderr and str(tmp_path) in r.stderr, r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), 'netflix'],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "unknown profile 'netflix'" in r.stderr, r.stderr
