"""A player's seek in a transcoded (or remuxed) MPEG-TS file.

A player seeks in MPEG-TS by bisecting the file on timestamps: small reads
far apart, then it reads on from one place. Reads far from the running
writer's edge are written by probes (short writer runs of just those
segments, beside it); the writer moves only once a handle's reads settle
at a new place (docs/transcode.md "Seeks"). These tests read like that and
check bytes (every byte read equals the same byte read whole from a fresh
mount), who wrote what (the log), and the status counters; never timings.

The source is a 60 s clip (320x240 H.264 + AAC, ffmpeg lavfi) made once
per module beside the session's data and served by nginx: 30 segments of
2 s, room for a bisection far from the writer.
"""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from conftest import bounded, catalog, make_clip, wait_until
from test_transcode import PROFILE, playlist_entries, plan_of, writer_pids

CLIP = 'clip60.mkv'
SECONDS = 60
NSEG = 30
TARGET = 20          # the segment the "player" seeks to


@pytest.fixture(scope='module')
def clip60(data, tmp_path_factory):
    path = data.dir / CLIP
    if not path.exists():
        make_clip(path, SECONDS, '320x240', tmp_path_factory.mktemp('ffmpeg60') / 'ffmpeg.log')
    return data.add(CLIP)


def seek_catalog(nginx, kind, profile=PROFILE):
    src = {'id': 'clip60', 'path': CLIP, 'sources': [{'url': nginx.url(CLIP)}]}
    if kind == 'remux':
        return catalog(src, {'id': 'clip60-ts', 'path': 'clip60.ts', 'remux': {'of': 'clip60'}})
    return catalog(src, {'id': 'clip60-ts', 'path': 'clip60.ts',
                         'transcode': dict(profile, of='clip60')})


def status_row(m):
    with open(m.path('.seamfs/status.json')) as f:
        (row,) = json.load(f)['transcodes']
    return row


def seg_bounds(plan):
    """[start of segment k] for k in 0..nseg (the last is the size)."""
    if plan['segment_bytes']:
        return [k * plan['segment_bytes'] for k in range(plan['segments'] + 1)]
    out = [0]
    for s in plan['sizes']:
        out.append(out[-1] + s)
    return out


def bisect_then_play(path, bounds, job):
    """Reads like a player's seek to segment TARGET: the head, the tail,
    then small reads at bisection points below the target, each followed
    by a read at the upper bound (as ffmpeg's search does), then on
    sequentially from the target to the end in 64 KiB reads. Returns
    [(offset, bytes)] of every read."""
    size = bounds[-1]
    got = []

    def rd(fd, off, n):
        b = os.pread(fd, n, off)
        got.append((off, b))
        return b

    fd = os.open(path, os.O_RDONLY)
    try:
        rd(fd, 0, 188)
        # the writer the head read started has committed two segments:
        # from then on a settled read may move it
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 60, 'two committed segments')
        rd(fd, size - 4096, 4096)
        upper = bounds[TARGET] + 5000
        rd(fd, upper, 2048)
        for k in (TARGET // 2, 3 * TARGET // 4, TARGET - 2, TARGET - 1):
            rd(fd, bounds[k] + 3000, 2048)
            rd(fd, upper, 2048)
        off = bounds[TARGET]
        while off < size:
            b = rd(fd, off, 64 * 1024)
            assert b, f'no bytes at {off}'
            off += len(b)
    finally:
        os.close(fd)
    return got


def whole_file(path):
    with open(path, 'rb') as f:
        return f.read()


def check_pieces(got, whole):
    assert got
    for off, b in got:
        assert hashlib.sha256(b).hexdigest() == \
            hashlib.sha256(whole[off:off + len(b)]).hexdigest(), f'bytes at {off} differ'


def null_runs(seg):
    """[(packet index, length)] of the runs of MPEG-TS null packets (PID
    0x1FFF) in a segment."""
    runs, start = [], None
    n = len(seg) // 188
    for i in range(n + 1):
        null = i < n and seg[i * 188] == 0x47 and seg[i * 188 + 1] & 0x1f == 0x1f \
            and seg[i * 188 + 2] == 0xff
        if null and start is None:
            start = i
        elif not null and start is not None:
            runs.append((start, i - start))
            start = None
    return runs


def longest_null_run(seg):
    """The longest run of MPEG-TS null packets in a segment."""
    return max((n for _, n in null_runs(seg)), default=0)


TAIL_PAD_MAX = (250000 - 65536) // 188   # proxy/writer/writer.c


def tail_block_ok(seg):
    """The last segment: its padding spread as in the others, but a block
    of nulls (more than the spread leaves, at most TAIL_PAD_MAX) ends it,
    so that the last 250,000 bytes, where a probe looks for the duration,
    still hold muxed packets."""
    runs = null_runs(seg)
    if not runs:
        return False
    start, n = runs[-1]
    return start + n == len(seg) // 188 and 4 < n <= TAIL_PAD_MAX and \
        all(m <= 4 for _, m in runs[:-1])


def assert_probes_not_restarts(log, aid):
    """The far reads were written by probes beside the main writer, which
    moved once, when the reads settled at the target."""
    probes = re.findall(rf'probe pid \d+ for asset {aid} started: segments (\d+)\.\.(\d+)', log)
    assert len(probes) >= 3, log
    assert 'a probe writes it, the writer goes on' in log, log
    moves = re.findall(r'reads of pid \d+ settled at segment (\d+), outside the '
                       r"writer's reach .*; restarting it there", log)
    assert len(moves) == 1, log
    assert TARGET <= int(moves[0]) <= TARGET + 2, (moves, log)
    # two main writer runs: the first read's, and the moved one
    assert len(re.findall(rf'writer pid \d+ started: asset {aid} ', log)) == 2, log
    assert 'died (' not in log and 'failed (exit' not in log, log


def test_bisecting_reader_transcode(seamfs, data, clip60, nginx, tmp_path):
    """A transcode: a player's seek is served by probes; the main writer is
    not restarted by them and moves once, when the reads settle. Every byte
    read equals the same byte of a full sequential read from a fresh mount
    of the same work directory (nothing served was written again), and the
    file decodes; the status counts one seek, no recovery."""
    work = tmp_path / 'work'
    cat = seek_catalog(nginx, 'transcode')
    m = seamfs.mount(cat, read_timeout=30,
                     options=[f'work_dir={work}', 'writer_max_speed=2',
                              'seek_restart_segments=1'])
    job = work / 'clip60-ts'
    plan = plan_of(job)
    assert plan['segments'] == NSEG
    f = m.path('clip60.ts')
    got = bounded(lambda: bisect_then_play(f, seg_bounds(plan), job), 100, 'the seek')
    row = status_row(m)
    assert row['seeks'] == 1 and row['recoveries'] == 0, row
    log = m.log()
    assert_probes_not_restarts(log, 'clip60-ts')
    assert m.unmount() == 0
    assert not list(job.glob('*.tmp'))

    m2 = seamfs.mount(cat, read_timeout=30, options=[f'work_dir={work}'], mnt=m.mnt)
    whole = bounded(lambda: whole_file(f), 100, 'the whole file from a fresh mount')
    assert len(whole) == plan['size']
    check_pieces(got, whole)
    entries, _ = playlist_entries(job)
    assert {i for i, _ in entries} == set(range(NSEG))
    # the padding is spread between the muxed packets, not one block: a
    # player's interpolating search finds timestamps all through a segment;
    # the last segment ends with a block of it (see tail_block_ok)
    for k in range(NSEG):
        seg = (job / f'seg-{k:06d}.ts').read_bytes()
        assert len(seg) == plan['segment_bytes']
        if k + 1 < NSEG:
            assert longest_null_run(seg) <= 4, (k, longest_null_run(seg))
        else:
            assert tail_block_ok(seg), (k, null_runs(seg)[-3:])
    r = subprocess.run(['ffmpeg', '-nostdin', '-v', 'error', '-i', f, '-f', 'null', '-'],
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr.decode(errors='replace')
    assert status_row(m2)['recoveries'] == 0


def test_bisecting_reader_remux(seamfs, data, clip60, nginx, tmp_path):
    """A remux (restarted segments are byte-identical to a full run's): the
    bisecting reader's bytes equal a full sequential read from a fresh
    mount with a work directory of its own, written by one writer from the
    start."""
    cat = seek_catalog(nginx, 'remux')
    work = tmp_path / 'work'
    m = seamfs.mount(cat, read_timeout=30,
                     options=[f'work_dir={work}', 'writer_max_speed=2',
                              'seek_restart_segments=1'])
    job = work / 'clip60-ts'
    plan = plan_of(job)
    f = m.path('clip60.ts')
    got = bounded(lambda: bisect_then_play(f, seg_bounds(plan), job), 100, 'the seek')
    row = status_row(m)
    assert row['seeks'] == 1 and row['recoveries'] == 0, row
    assert_probes_not_restarts(m.log(), 'clip60-ts')
    assert m.unmount() == 0

    other = tmp_path / 'work-fresh'
    # one writer slot: no probe writes the tail ahead either
    m2 = seamfs.mount(cat, read_timeout=30, options=[f'work_dir={other}', 'max_writers=1'])
    whole = bounded(lambda: whole_file(m2.path('clip60.ts')), 100, 'a fresh full read')
    assert len(whole) == plan['size']
    check_pieces(got, whole)
    assert 'probe pid' not in m2.log()


CHILD = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.pread(fd, 188, 0)
print('head', flush=True)
os.pread(fd, 4096, int(sys.argv[2]))
print('far', flush=True)
"""


def test_reads_of_an_exited_player_start_nothing(seamfs, data, clip60, nginx, tmp_path):
    """One writer slot (max_writers=1), so no probe: a far read moves the
    writer, as before probes, once the writer may be moved (it has
    committed two segments since it started). A first player's far read
    has just moved it; a second player's far read must wait, and that
    player is killed meanwhile. Its read, which the kernel still waits
    for, must not move the writer when it could: it is answered with an
    error and starts nothing."""
    work = tmp_path / 'work'
    m = seamfs.mount(seek_catalog(nginx, 'transcode'), read_timeout=60,
                     options=[f'work_dir={work}', 'writer_max_speed=1', 'max_writers=1',
                              'log_level=debug'])
    job = work / 'clip60-ts'
    plan = plan_of(job)
    S = plan['segment_bytes']
    f = m.path('clip60.ts')
    box = {}

    def first_player():
        with open(f, 'rb', buffering=0) as fh:
            box['head'] = os.pread(fh.fileno(), 188, 0)
            box['far'] = os.pread(fh.fileno(), 4096, 10 * S + 1000)

    t = threading.Thread(target=first_player, daemon=True)
    t.start()
    child = None
    try:
        wait_until(lambda: 'restarting it there' in m.log(), 60, 'the first player\'s move')
        started = wait_until(lambda: re.findall(r'writer pid (\d+) started: asset clip60-ts '
                                                r'session \S+, segments 10\.\.', m.log()),
                             30, 'the moved writer')
        moved = int(started[0])
        far = TARGET * S + 1000
        child = subprocess.Popen([sys.executable, '-c', CHILD, f, str(far)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert bounded(child.stdout.readline, 30, 'the head read') == b'head\n'
        wait_until(lambda: f'read of 4096 bytes at {far} ' in m.log(), 30, 'the far read')
        child.send_signal(signal.SIGKILL)
        wait_until(lambda: 'has exited; its reads start no writer' in m.log(), 60,
                   'the dead player\'s read answered')
        child.wait(30)
    finally:
        t.join(60)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
    assert not t.is_alive() and box['far'] == \
        (job / 'seg-000010.ts').read_bytes()[1000:1000 + 4096]
    log = m.log()
    assert f'pid {child.pid} has exited' in log, log
    assert log.count('restarting it there') == 1 and 'probe pid' not in log, log
    assert 'no writer slot is free for a probe' in log, log
    row = status_row(m)
    assert row['seeks'] == 1 and row['recoveries'] == 0, row
    assert row['writer_pid'] in (moved, 0), (row, moved)
    assert writer_pids(m.worker_pid()) in ([], [moved])


FAR_CHILD = r"""
import os, sys
os.pread(int(sys.argv[1]), 2048, int(sys.argv[2]))
"""


def proc_state(pid):
    """The state letter of process pid ('T' stopped), None when gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rpartition(')')[2].split()[0]
    except OSError:
        return None


def stopped_probe(m, f, fd, seg, S):
    """A far read of segment seg through fd (the same open file, so the
    same handle) in a child process, its probe stopped (SIGSTOP) while it
    runs. Returns (child, probe pid), or None when the probe was done
    before it could be stopped."""
    child = subprocess.Popen([sys.executable, '-c', FAR_CHILD, str(fd), str(seg * S + 1000)],
                             pass_fds=(fd,), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        pat = rf'probe pid (\d+) for asset clip60-ts started: segments {seg}\.\.'
        pid = int(wait_until(lambda: re.findall(pat, m.log()), 30, 'the far read\'s probe')[0])
        os.kill(pid, signal.SIGSTOP)
    except BaseException:
        child.kill()
        child.wait(30)
        raise
    wait_until(lambda: proc_state(pid) in ('T', 'Z', None), 10, 'the probe stopped')
    if proc_state(pid) == 'T' and f'probe pid {pid} of asset clip60-ts done' not in m.log():
        return child, pid
    # it was done first: that read is served; try another segment
    child.wait(30)
    return None


def hold_a_probe(m, f, fd, S, got):
    """stopped_probe() at segments 20, 24, then 27, until one probe is held
    stopped; the reads whose probes were done first are appended to got.
    Returns (child, probe pid)."""
    held = None
    for seg in (20, 24, 27):
        held = stopped_probe(m, f, fd, seg, S)
        if held:
            break
        got.append((seg * S + 1000, bounded(lambda: os.pread(fd, 2048, seg * S + 1000),
                                            60, 'a probe\'s read')))
    assert held, 'every probe was done before it could be stopped'
    return held


def test_probe_of_a_reader_that_moved_on_is_cancelled(seamfs, data, clip60, nginx, tmp_path):
    """A probe for a far read whose reader has moved on (its process was
    killed while the probe ran, then the same open file reads elsewhere) is
    killed, not left to write segments nobody waits for; it listed
    nothing, and every byte read before and after equals a full read from
    a fresh mount (issue 32). The probe is held stopped (SIGSTOP) so that it
    cannot end before the reader moves on; without the cancel it stays so
    and is let go at the end."""
    work = tmp_path / 'work'
    cat = seek_catalog(nginx, 'transcode')
    m = seamfs.mount(cat, read_timeout=60,
                     options=[f'work_dir={work}', 'writer_max_speed=1',
                              'seek_restart_segments=1'])
    job = work / 'clip60-ts'
    plan = plan_of(job)
    S = plan['segment_bytes']
    f = m.path('clip60.ts')
    fd = os.open(f, os.O_RDONLY)
    got, held, child = [], None, None
    try:
        got.append((0, os.pread(fd, 188, 0)))
        held = hold_a_probe(m, f, fd, S, got)
        child, pid = held
        child.kill()
        child.wait(30)
        # the same open file reads elsewhere: the reader moved on
        got.append((10 * S + 500, bounded(lambda: os.pread(fd, 2048, 10 * S + 500), 60,
                                          'the read elsewhere')))
        wait_until(lambda: proc_state(pid) is None or
                   f'probe pid {pid} of asset clip60-ts cancelled' in m.log(), 30,
                   'the probe cancelled')
        log = m.log()
        assert f'cancelling probe pid {pid} ' in log, log
        assert f'probe pid {pid} of asset clip60-ts cancelled' in log, log
        seg = int(re.search(rf'cancelling probe pid {pid} \(segments (\d+)\.\.', log).group(1))
        assert seg not in {i for i, _ in playlist_entries(job)[0]}, 'the cancelled probe listed'
        # the segment is written again for a later read, by another writer
        got.append((seg * S + 1000, bounded(lambda: os.pread(fd, 4096, seg * S + 1000), 60,
                                            'the cancelled segment read again')))
    finally:
        os.close(fd)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
        if held and proc_state(held[1]) == 'T':
            os.kill(held[1], signal.SIGCONT)   # the old code's probe: let it end
    assert m.unmount() == 0
    m2 = seamfs.mount(cat, read_timeout=30, options=[f'work_dir={work}'], mnt=m.mnt)
    whole = bounded(lambda: whole_file(f), 100, 'the whole file from a fresh mount')
    assert len(whole) == plan['size']
    check_pieces(got, whole)
    # the cancelled probe listed nothing: its segment is another run's
    entries, _ = playlist_entries(job)
    assert {i for i, _ in entries} == set(range(NSEG))


SCHED_IDLE = 5


def thread_nices(pid, field=16):
    """{thread id: nice} of every thread of process pid, from /proc
    (field=38: {thread id: scheduling policy})."""
    out = {}
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f'/proc/{pid}/task/{tid}/stat') as f:
                # after the command's ')': state is field 3, nice field 19,
                # policy field 41
                out[int(tid)] = int(f.read().rpartition(')')[2].split()[field])
        except (OSError, ValueError, IndexError):
            pass
    return out


def test_main_writer_yields_with_every_thread(seamfs, data, clip60, nginx, tmp_path):
    """While a probe for a far read runs, the main writer gives it the CPU
    with every thread it has (its encoder's and decoder's threads do the
    work), not only its first: each runs 10 nicer, and under SCHED_IDLE
    when the daemon runs as root (nice 10 still took a tenth of the CPU
    from the probe: a 720p probe took 0.82-0.88 s beside such a writer,
    0.64-0.78 s alone or beside one under SCHED_IDLE); the probe is held
    stopped (SIGSTOP) so that it runs while this looks. Regression test
    for a fixed bug (proxy/transcode/spawn.c, tc_main_yield):
    setpriority(PRIO_PROCESS, pid) renices one thread on Linux, so x264's
    threads, started at the encoder's open, kept their priority and shared
    two cores with the probe a seeking player waited for (a 720p probe
    took 1.3 s beside the writer, 0.8 s alone). The bytes read equal a
    fresh mount's whole file."""
    work = tmp_path / 'work'
    cat = seek_catalog(nginx, 'transcode')
    m = seamfs.mount(cat, read_timeout=60,
                     options=[f'work_dir={work}', 'writer_max_speed=1', 'tail_ahead=0',
                              'seek_restart_segments=1'])
    job = work / 'clip60-ts'
    plan = plan_of(job)
    S = plan['segment_bytes']
    f = m.path('clip60.ts')
    fd = os.open(f, os.O_RDONLY)
    got, held, child, nices = [], None, None, {}
    try:
        got.append((0, os.pread(fd, 188, 0)))
        main = int(wait_until(lambda: re.findall(r'writer pid (\d+) started: asset clip60-ts ',
                                                 m.log()), 30, 'the main writer')[0])
        wait_until(lambda: len(thread_nices(main)) > 1, 30, 'the main writer\'s threads')
        before = thread_nices(main)
        assert set(before.values()) == {before[main]}, before
        held = hold_a_probe(m, f, fd, S, got)
        child, pid = held
        nices = thread_nices(main)
        assert len(nices) > 1, nices
        assert all(n >= before[main] + 10 or n == 19 for n in nices.values()), \
            f'threads of the main writer {main} and their nice: {nices} (before: {before})'
        if os.geteuid() == 0:
            policies = thread_nices(main, 38)
            assert set(policies.values()) == {SCHED_IDLE}, policies
        os.kill(pid, signal.SIGCONT)
        child.wait(60)
        assert child.returncode == 0
        if os.geteuid() == 0:
            # the probe's end gives the CPU back: no thread stays idle
            wait_until(lambda: SCHED_IDLE not in thread_nices(main, 38).values(), 30,
                       'the main writer back under SCHED_OTHER')
        seg = int(re.search(rf'probe pid {pid} for asset clip60-ts started: segments (\d+)',
                            m.log()).group(1))
        got.append((seg * S + 1000, bounded(lambda: os.pread(fd, 2048, seg * S + 1000), 60,
                                            'the far read again')))
    finally:
        os.close(fd)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
        if held and proc_state(held[1]) == 'T':
            os.kill(held[1], signal.SIGCONT)
    assert m.unmount() == 0
    m2 = seamfs.mount(cat, read_timeout=30, options=[f'work_dir={work}'], mnt=m.mnt)
    whole = bounded(lambda: whole_file(f), 100, 'the whole file from a fresh mount')
    assert len(whole) == plan['size']
    check_pieces(got, whole)
    assert m2.unmount() == 0


def seg_at_offset(plan, off):
    """The segment that holds byte off (negative: from the end)."""
    bounds = seg_bounds(plan)
    if off < 0:
        off = max(0, bounds[-1] + off)
    return max(k for k in range(len(bounds) - 1) if bounds[k] <= off)


def frame_md5(path, at):
    """ffmpeg's own seek to `at` seconds (its interpolating search on
    timestamps, which mpv and other ffmpeg-based players use) and the MD5
    of the first frame it decodes there."""
    r = subprocess.run(['ffmpeg', '-nostdin', '-v', 'error', '-ss', str(at), '-i', str(path),
                        '-map', '0:v', '-frames:v', '1', '-f', 'framemd5', '-'],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    lines = [ln for ln in r.stdout.decode().splitlines() if ln and not ln.startswith('#')]
    assert lines, r.stderr.decode(errors='replace')
    return lines[0].split(',')[-1].strip()


def keyframe_times(path):
    """The presentation times of the video's keyframes, in order."""
    r = subprocess.run(['ffprobe', '-v', 'error', '-select_streams', 'v', '-skip_frame', 'nokey',
                        '-show_entries', 'frame=pts_time', '-of', 'csv=p=0', str(path)],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    return [float(t.strip(',')) for t in r.stdout.decode().split() if t.strip(',')]


@pytest.mark.parametrize('seconds', [2, None], ids=['2s', 'default'])
def test_seek_to_a_segment_boundary_probes_only_there(seamfs, data, clip60, nginx, tmp_path,
                                                       seconds):
    """ffmpeg's seek to a segment's start (a target in the last frame of
    the segment before it, as `-ss` and mpv's --start=50% ask) is served by
    probes of the segments there and of the tail, nothing in between: its
    first guess lands just before the target, because the last segment
    ends with a block of nulls (docs/transcode.md "Seeks"). With the
    padding spread through the last segment too, the guess found the next
    segment's first frame, the search bisected the file from its start and
    every step was a probe of a segment far below (issue 32). The frame
    decoded through the mount equals the frame decoded from the finished
    file; the tail was written ahead, beside the head.

    With segment_seconds=2 and with the default, 1 s since issue 32 (a
    cold seek waits for two places of one segment each to be encoded, and
    a 1 s segment costs about half a 2 s one): the file has one segment
    and one keyframe per D seconds."""
    d = seconds or 1
    nseg, target = SECONDS // d, TARGET * 2 // d
    work = tmp_path / 'work'
    profile = dict(PROFILE, segment_seconds=seconds) if seconds else \
        {k: v for k, v in PROFILE.items() if k != 'segment_seconds'}
    cat = seek_catalog(nginx, 'transcode', profile)
    m = seamfs.mount(cat, read_timeout=60,
                     options=[f'work_dir={work}', 'writer_max_speed=1'])
    plan = plan_of(work / 'clip60-ts')
    assert plan['segments'] == nseg, plan
    f = m.path('clip60.ts')
    at = target * d
    seen = bounded(lambda: frame_md5(f, at), 100, 'ffmpeg\'s seek')
    log = m.log()
    probes = [(int(a), int(b)) for a, b in
              re.findall(r'probe pid \d+ for asset clip60-ts started: segments (\d+)\.\.(\d+)',
                         log)]
    # the tail: the segments of the last 250,000 bytes, where ffmpeg
    # looks for the duration
    tail = (seg_at_offset(plan, -250000), nseg - 1)
    assert tail in probes, (tail, log)
    assert re.search(rf'segments {tail[0]}\.\.{tail[1]} .*the tail ahead of its read', log), log
    far = [p for p in probes if p != tail and not target - 2 <= p[0] <= target + 1]
    assert not far, (far, log)
    assert m.unmount() == 0
    m2 = seamfs.mount(cat, read_timeout=30, options=[f'work_dir={work}'], mnt=m.mnt)
    whole = tmp_path / 'whole.ts'
    whole.write_bytes(bounded(lambda: whole_file(f), 100, 'the whole file'))
    assert m2.unmount() == 0
    assert seen == frame_md5(whole, at)
    assert tail_block_ok(whole.read_bytes()[-plan['segment_bytes']:])
    keys = keyframe_times(whole)
    assert len(keys) == nseg, keys
    assert all(abs(b - a - d) < 0.05 for a, b in zip(keys, keys[1:])), keys
