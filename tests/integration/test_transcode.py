"""Transcoded assets through the real daemon and the real seamfs-writer.

The source is the session's 20 s 320x240 H.264+AAC clip (made at test time
with ffmpeg's lavfi testsrc2 + sine), served by nginx; the failover tests give
it three sources (seam-origins that stall, drop and refuse on command, and
nginx). Each test gets its own work directory. Every wait is bounded; the fixtures unmount and stop
everything, also on failure; the writer is only ever killed by its PID,
found among the daemon's children.
"""

import errno
import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import Mount, bounded, catalog, make_clip, sha256_file, wait_until

PROFILE = {'height': 180, 'video_bitrate': 300000, 'audio_bitrate': 64000,
           'segment_seconds': 2}


def tc_catalog(nginx, **profile):
    """The clip and its transcode with PROFILE, changed by profile (a
    value of None leaves that key out: the catalog's default)."""
    p = dict(PROFILE)
    p.update(profile)
    p = {k: v for k, v in p.items() if v is not None}
    p['of'] = 'clip'
    return catalog(
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]},
        {'id': 'clip-180', 'path': 'Transcoded/clip 180p.ts', 'transcode': p})


def mount_tc(seamfs, nginx, tmp_path, options=(), read_timeout=20, **profile):
    work = tmp_path / 'work'
    opts = [f'work_dir={work}'] + list(options)
    m = seamfs.mount(tc_catalog(nginx, **profile), read_timeout=read_timeout, options=opts)
    return m, work / 'clip-180'


def plan_of(job):
    return json.loads((job / 'plan.json').read_text())


def playlist_entries(job):
    """[(index, size)] in commit order and whether it ends #CLEAN."""
    p = job / 'playlist'
    if not p.exists():
        return [], False
    lines = p.read_text().splitlines()
    entries = [tuple(int(x) for x in ln.split()[:2]) for ln in lines if ln and ln[0] != '#']
    return entries, bool(lines) and lines[-1] == '#CLEAN'


def playlist_clean(job, timeout=30):
    """playlist_entries() once the writer has ended the list #CLEAN: a
    reader at the end gets the last segment as soon as it is listed (the
    newest entry is served, issue 32), a moment before the writer's clean
    end (and its playlist.XXXXXX.tmp)."""
    wait_until(lambda: playlist_entries(job)[1], timeout, 'the playlist ended clean')
    return playlist_entries(job)


def committed_concat_sha(job, nseg):
    """SHA-256 of segments 0..nseg-1 as committed in the work dir."""
    entries, _ = playlist_entries(job)
    listed = {i for i, _ in entries}
    assert listed == set(range(nseg)), f'committed segments {sorted(listed)} of {nseg}'
    h = hashlib.sha256()
    for k in range(nseg):
        h.update((job / f'seg-{k:06d}.ts').read_bytes())
    return h.hexdigest()


def decode_errors(path):
    r = subprocess.run(['ffmpeg', '-nostdin', '-v', 'error', '-i', str(path), '-f', 'null', '-'],
                       capture_output=True, timeout=120)
    return r.returncode, r.stderr.decode(errors='replace')


def writer_pids(daemon_pid):
    """The daemon's child processes (its writers), from /proc."""
    pids = []
    task_dir = Path(f'/proc/{daemon_pid}/task')
    try:
        for t in task_dir.iterdir():
            try:
                pids += [int(x) for x in (t / 'children').read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return pids


def read_sequential(path, chunk=256 * 1024):
    h = hashlib.sha256()
    n = 0
    with open(path, 'rb') as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def start_reader(f):
    """Reads f whole in a thread (read_sequential); returns the thread and a
    box that gets 'result' (digest, bytes) or 'error'."""
    box = {}

    def reader():
        try:
            box['result'] = read_sequential(f, 64 * 1024)
        except BaseException as e:  # noqa: BLE001 - reported by assert_read_whole
            box['error'] = e

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    return t, box


def assert_read_whole(t, box, job, plan, blocked):
    """The reader of start_reader() ended without an error, and read every
    byte of the plan: the committed segments in order."""
    assert not t.is_alive(), blocked
    assert 'error' not in box, repr(box.get('error'))
    digest, n = box['result']
    assert n == plan['size']
    assert digest == committed_concat_sha(job, plan['segments'])


def test_older_default_plan_is_kept(seamfs, data, nginx, tmp_path):
    """segment_seconds defaults to 1 since issue 32, 2 before. A transcode
    whose catalog names none keeps a plan made with 2 s segments (the file
    an older seamfs served under that catalog): the same size and inode,
    the same bytes from the segments already there, no writer.
    Naming segment_seconds changes the profile as always: 1 plans afresh,
    in 1 s segments. On the tree before, the default was 2 s; with 1 s and
    no such rule the file's size changed under the reader's library."""
    work = tmp_path / 'work'
    job = work / 'clip-180'
    opts = [f'work_dir={work}']
    m = seamfs.mount(tc_catalog(nginx), read_timeout=20, options=opts)
    f = m.path('Transcoded/clip 180p.ts')
    assert plan_of(job)['segments'] == 10
    digest, _ = bounded(lambda: read_sequential(f), 90, 'first read')
    st1 = os.stat(f)
    assert m.unmount() == 0

    m2 = seamfs.mount(tc_catalog(nginx, segment_seconds=None), read_timeout=20,
                      options=opts, mnt=m.mnt)
    # the same size and inode (the mtime is the new catalog file's)
    st2 = os.stat(f)
    assert (st2.st_size, st2.st_ino) == (st1.st_size, st1.st_ino)
    assert bounded(lambda: read_sequential(f), 60, 'second read')[0] == digest
    log = m2.log()
    assert 'asset clip-180: keeps its plan of 2 s segments' in log, log
    assert 'writer pid' not in log, log
    assert plan_of(job)['segments'] == 10
    assert m2.unmount() == 0

    m3 = seamfs.mount(tc_catalog(nginx, segment_seconds=1), read_timeout=20,
                      options=opts, mnt=m.mnt)
    plan = plan_of(job)
    assert plan['segments'] == 20, plan
    assert os.stat(f).st_size == plan['size'] != st1.st_size
    digest3, n = bounded(lambda: read_sequential(f), 90, 'a read in 1 s segments')
    assert n == plan['size']
    assert digest3 == committed_concat_sha(job, plan['segments'])
    assert 'keeps its plan' not in m3.log()


def test_profile_change_right_after_a_clean_unmount(seamfs, data, nginx, tmp_path):
    """A profile changed in the catalog is planned afresh at once when this
    host's daemon that held the asset's lease unmounted cleanly (a restart
    with the new catalog): its lease is released and its process gone, so
    nobody works there. Before, the released lease's grace (orphan_after,
    30 s here) left the asset out of the mount: "its profile changed but
    ... still holds its lease". The new file reads whole, equal to its
    committed segments."""
    m, job = mount_tc(seamfs, nginx, tmp_path)
    f = m.path('Transcoded/clip 180p.ts')
    bounded(lambda: read_sequential(f), 90, 'first read')
    assert 'lease: asset clip-180 session' in m.log()
    old = plan_of(job)
    assert m.unmount() == 0
    m2 = seamfs.mount(tc_catalog(nginx, height=144), read_timeout=20,
                      options=[f'work_dir={tmp_path / "work"}'], mnt=m.mnt)
    log = m2.log()
    assert 'still holds its lease' not in log, log
    plan = plan_of(job)
    assert plan['profile'] != old['profile'] and '|144|' in plan['profile'], plan
    digest, n = bounded(lambda: read_sequential(f), 90, 'the new profile read whole')
    assert n == plan['size'] == os.stat(f).st_size
    assert digest == committed_concat_sha(job, plan['segments'])


def test_transcode_whole_file(seamfs, data, nginx, tmp_path):
    m, job = mount_tc(seamfs, nginx, tmp_path)
    f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    # the size is known and stable before a single segment exists
    st1 = os.stat(f)
    assert not list(job.glob('seg-*.ts'))
    assert st1.st_size == plan['segments'] * plan['segment_bytes'] == plan['size']
    assert plan['segment_bytes'] % 188 == 0
    assert plan['segments'] == 10   # 20 s in 2 s segments

    digest, n = bounded(lambda: read_sequential(f), 90, 'reading the transcode')
    assert n == st1.st_size
    st2 = os.stat(f)
    assert (st2.st_size, st2.st_ino, st2.st_mtime) == (st1.st_size, st1.st_ino, st1.st_mtime)
    assert digest == committed_concat_sha(job, plan['segments'])
    for k in range(plan['segments']):
        assert (job / f'seg-{k:06d}.ts').stat().st_size == plan['segment_bytes']
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err
    # a second read is the same bytes (no writer needed now)
    assert bounded(lambda: sha256_file(f), 60, 'second read') == digest
    assert 'lease: asset clip-180 session' in m.log()


def test_newest_listed_segment_is_served_and_kept(seamfs, data, nginx, tmp_path):
    """Issue 32: a read of the segment the writer has just listed returns
    then, not when the writer lists the next one; and a writer killed right
    after keeps it. A segment is fsynced and renamed into place before it
    is listed, so recovery trusts the newest entry too: the bytes served
    before the kill are the file's bytes after it. The writer is paced at
    half realtime (the next segment comes 4 s later). On 183413d the read
    waited for segment 1 (the newest entry of a live writer was not
    served) and recovery wrote segment 0 again."""
    m, job = mount_tc(seamfs, nginx, tmp_path,
                      options=['writer_max_speed=0.5', 'tail_ahead=0'])
    f = m.path('Transcoded/clip 180p.ts')
    seg = plan_of(job)['segment_bytes']
    fd = os.open(f, os.O_RDONLY)
    try:
        first = bounded(lambda: os.pread(fd, seg, 0), 30, 'reading segment 0')
        entries, clean = playlist_entries(job)
        assert len(first) == seg
        # served while segment 0 was the running writer's newest entry
        assert [k for k, _ in entries] == [0] and not clean, entries
        seg0 = job / 'seg-000000.ts'
        made = seg0.stat()
        assert hashlib.sha256(seg0.read_bytes()).digest() == hashlib.sha256(first).digest()
        pids = wait_until(lambda: writer_pids(m.worker_pid()), 10, 'the writer process')
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        # the next segment comes from a new writer; segment 0 is kept as it was
        second = bounded(lambda: os.pread(fd, seg, seg), 60, 'reading segment 1')
        again = bounded(lambda: os.pread(fd, seg, 0), 30, 'reading segment 0 again')
    finally:
        os.close(fd)
    assert again == first
    after = seg0.stat()
    assert (after.st_ino, after.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    assert second == (job / 'seg-000001.ts').read_bytes()
    log = m.log()
    assert f'died (signal {signal.SIGKILL})' in log, log
    assert 'recovery: asset clip-180: 1 of 1 listed segments trusted' in log, log


def test_writer_killed_mid_run(seamfs, data, nginx, tmp_path):
    # pace the writer (3x realtime) so that it is still running when killed
    m, job = mount_tc(seamfs, nginx, tmp_path, options=['writer_max_speed=3', 'tail_ahead=0'])
    f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    t, box = start_reader(f)
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        entries, clean = playlist_entries(job)
        assert not clean, 'the writer finished before it could be killed'
        pids = wait_until(lambda: writer_pids(m.worker_pid()), 10, 'the writer process')
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        killed_after = len(entries)
    finally:
        t.join(90)
    assert not t.is_alive(), 'the reader is still blocked 90 s after the kill'
    assert 'error' not in box, repr(box.get('error'))
    digest, n = box['result']
    assert n == plan['size']
    assert killed_after < plan['segments']
    assert digest == committed_concat_sha(job, plan['segments'])
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err
    log = m.log()
    assert f'died (signal {signal.SIGKILL})' in log, log
    # the dead writer's entries are all kept, its newest too (issue 32)
    assert re.search(r'recovery: asset clip-180: (\d+) of \1 listed segments trusted', log), log
    assert 'distrusted' not in log, log
    assert 'generation 2 claimed' in log, log
    assert playlist_clean(job)[1]
    assert not list(job.glob('*.tmp'))
    # the status shows the transcode: its segments, owner and the recovery
    with open(m.path('.seamfs/status.json')) as sf:
        (tc,) = json.load(sf)['transcodes']
    assert tc['asset'] == 'clip-180' and tc['segments'] == plan['segments']
    assert tc['committed'] == plan['segments'] and tc['recoveries'] >= 1
    assert tc['owner'].count(':') >= 2


def test_far_seek_restarts_writer(seamfs, data, nginx, tmp_path):
    """A far read is written by a probe beside the running writer, which
    goes on; a player that then reads on from there (its reads settle)
    moves the writer, which restarts just past the probe's segment."""
    m, job = mount_tc(seamfs, nginx, tmp_path,
                      options=['writer_max_speed=2', 'seek_restart_segments=1', 'tail_ahead=0'])
    f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    S, nseg = plan['segment_bytes'], plan['segments']
    target = nseg - 3

    def head_then_seek():
        with open(f, 'rb', buffering=0) as fh:
            head = os.pread(fh.fileno(), 188, 0)
            far = os.pread(fh.fileno(), 4096, target * S + 1000)
            # a player reads on from where it seeked
            on = b''
            while len(on) < S:
                on += os.pread(fh.fileno(), 65536, target * S + 5096 + len(on))
        return head, far, on

    head, far, on = bounded(head_then_seek, 60, 'head read then far seek')
    assert head[0] == 0x47
    seg = (job / f'seg-{target:06d}.ts').read_bytes()
    assert far == seg[1000:1000 + 4096]
    assert on == (seg + (job / f'seg-{target + 1:06d}.ts').read_bytes())[5096:5096 + len(on)]
    log = m.log()
    # the far read: a probe of its segment, the writer kept
    assert f'read of segment {target} ' in log and 'a probe writes it, the writer goes on' in log
    assert f'started: segments {target}..{target} (warm-up {target - 1})' in log, log
    # reading on settles there: the writer moves, past the probe's segment
    assert 'restarting it there' in log, log
    assert f'segments {target + 1}..{nseg - 1} (warm-up {target})' in log, log
    # segments between the two runs were never written by the first writer
    entries, _ = playlist_entries(job)
    assert target in {i for i, _ in entries}
    assert target - 2 not in {i for i, _ in entries}


@pytest.mark.parametrize('profile,field,words', [
    ({'height': 100}, 'assets[1].transcode.height', 'out of range'),
    ({'height': 181}, 'assets[1].transcode.height', 'must be even'),
    ({'segment_seconds': 7}, 'assets[1].transcode.segment_seconds', 'out of range (1 to 6)'),
    ({'segment_seconds': 0}, 'assets[1].transcode.segment_seconds', 'out of range (1 to 6)'),
    ({'video_bitrate': 'fast'}, 'assets[1].transcode.video_bitrate', 'must be a whole number'),
    ({'audio_bitrate': 1000}, 'assets[1].transcode.audio_bitrate', 'out of range'),
    ({'fps': 25}, 'assets[1].transcode.fps', 'unknown key'),
])
def test_bad_profile(seamfs_cli, tmp_path, profile, field, words):
    p = dict(PROFILE)
    p.update(profile)
    p['of'] = 'clip'
    cat = catalog(
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': 'http://127.0.0.1:9/c.mkv'}]},
        {'id': 'clip-180', 'path': 'clip.ts', 'transcode': p})
    path = seamfs_cli.write_catalog(cat)
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run([path, mnt], timeout=10, mountpoints=[mnt])
    assert r.returncode == 3, r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert f': {field}: ' in line and words in line, line
    assert str(path) in line


def test_bad_writer_option(seamfs_cli, tmp_path):
    cat = catalog({'id': 'a', 'path': 'a', 'sources': [{'url': 'http://127.0.0.1:9/a'}]})
    path = seamfs_cli.write_catalog(cat)
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-o', 'max_writers=0', path, mnt], timeout=10, mountpoints=[mnt])
    assert r.returncode == 2
    assert "option 'max_writers': bad value '0'" in r.stderr


def test_hung_writer_lease_orphaned(seamfs, data, nginx, tmp_path):
    """A writer that stops heartbeating (SIGSTOP) is orphaned after
    orphan_after, killed and replaced; the reader goes on."""
    m, job = mount_tc(seamfs, nginx, tmp_path,
                      options=['writer_max_speed=3', 'heartbeat=0.5', 'orphan_after=2',
                               'tail_ahead=0'])
    f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    t, box = start_reader(f)
    stopped = None
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        assert not playlist_entries(job)[1], 'the writer finished before it could be stopped'
        pids = wait_until(lambda: writer_pids(m.worker_pid()), 10, 'the writer process')
        stopped = pids[0]
        os.kill(stopped, signal.SIGSTOP)
        wait_until(lambda: 'orphaned (no heartbeat' in m.log(), 15, 'the orphaned lease')
    finally:
        t.join(90)
        if stopped and stopped in writer_pids(m.worker_pid()):
            os.kill(stopped, signal.SIGKILL)
    assert not t.is_alive()
    assert 'error' not in box, repr(box.get('error'))
    digest, n = box['result']
    assert n == plan['size']
    assert digest == committed_concat_sha(job, plan['segments'])
    log = m.log()
    assert f'writer pid {stopped} of asset clip-180 died (signal 9)' in log, log
    assert 'recovery: asset clip-180' in log
    # the replacement heartbeats (every 0.5 s): it is never taken for orphaned
    assert log.count('orphaned (no heartbeat') == 1, log


def test_max_writers_queue(seamfs, data, nginx, tmp_path):
    """Two transcodes, one writer slot: the second waits its turn, both
    files read completely and equal their committed segments."""
    work = tmp_path / 'work'
    p2 = dict(PROFILE, of='clip', height=144)
    cat = tc_catalog(nginx)
    cat['assets'].append({'id': 'clip-144', 'path': 'Transcoded/clip 144p.ts',
                          'transcode': p2})
    m = seamfs.mount(cat, read_timeout=30,
                     options=[f'work_dir={work}', 'max_writers=1', 'writer_max_speed=6'])
    files = {'clip-180': m.path('Transcoded/clip 180p.ts'),
             'clip-144': m.path('Transcoded/clip 144p.ts')}
    results = {}

    def read(aid):
        results[aid] = read_sequential(files[aid], 128 * 1024)

    threads = [threading.Thread(target=read, args=(a,), daemon=True) for a in files]
    for th in threads:
        th.start()
    for th in threads:
        th.join(90)
    assert not any(th.is_alive() for th in threads), 'a reader is still blocked'
    for aid in files:
        plan = plan_of(work / aid)
        assert results[aid][1] == plan['size']
        assert results[aid][0] == committed_concat_sha(work / aid, plan['segments'])
    assert 'writers running; waiting in line' in m.log()


@pytest.mark.parametrize('src', ['clip.mkv', 'bclip.mkv'])
def test_remux_killed_restart_identical(seamfs, data, nginx, tmp_path, src):
    """A remux: exact size with no padding, known before any segment; a
    writer SIGKILLed mid-run is replaced; the file equals its committed
    segments, and a fresh full run of the writer makes the same bytes.
    bclip.mkv has B-frames, as most films do: on 4362b8e its remux could
    not be planned (the muxer refused the DTS the code took from the
    PTS of the first packets, which Matroska gives none) and the asset was
    left out."""
    if src == 'bclip.mkv':
        path = data['clip.mkv'].path.parent / src
        if src not in data.files:
            make_clip(path, 20, '320x240', tmp_path / 'ffmpeg.log', bframes=True)
            data.add(src)
    work = tmp_path / 'work'
    cat = catalog(
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url(src)}]},
        {'id': 'clip-ts', 'path': 'clip.ts', 'remux': {'of': 'clip'}})
    m = seamfs.mount(cat, read_timeout=20, options=[f'work_dir={work}', 'writer_max_speed=4',
                                                    'tail_ahead=0'])
    job = work / 'clip-ts'
    plan = plan_of(job)
    f = m.path('clip.ts')
    assert os.stat(f).st_size == plan['size'] == sum(plan['sizes'])
    assert plan['segment_bytes'] == 0 and len(plan['starts']) == plan['segments'] - 1
    t, box = start_reader(f)
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        assert not playlist_entries(job)[1], 'the writer finished before it could be killed'
        pids = wait_until(lambda: writer_pids(m.worker_pid()), 10, 'the writer process')
        os.kill(pids[0], signal.SIGKILL)
    finally:
        t.join(90)
    assert not t.is_alive()
    assert 'error' not in box, repr(box.get('error'))
    digest, n = box['result']
    assert n == plan['size']
    h = hashlib.sha256()
    for k in range(plan['segments']):
        b = (job / f'seg-{k:06d}.ts').read_bytes()
        assert len(b) == plan['sizes'][k]
        h.update(b)
    assert digest == h.hexdigest()
    assert 'recovery: asset clip-ts' in m.log()
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err

    # the same plan written afresh in one run gives the same bytes
    fresh = tmp_path / 'fresh'
    fresh.mkdir()
    (fresh / 'plan.json').write_text((job / 'plan.json').read_text())
    writer = Path(m.argv[0]).parent / 'seamfs-writer'
    r = subprocess.run([str(writer), 'run', '--remux', '--input', str(data[src].path),
                        '--segment-seconds', '2', '--work-dir', str(fresh), '--from', '0',
                        '--segments', str(plan['segments']), '--segment-bytes', '0'],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    h2 = hashlib.sha256()
    for k in range(plan['segments']):
        h2.update((fresh / f'seg-{k:06d}.ts').read_bytes())
    assert h2.hexdigest() == digest


def test_cleanup_respects_leases(seamfs, data, nginx, tmp_path):
    """Work directories of assets no longer in the catalog are removed at
    mount only when no live or recently expired lease covers them."""
    work = tmp_path / 'work'
    (work / 'leases').mkdir(parents=True)
    now_ms = int(time.time() * 1000)
    for name, hb in (('ghost-live', now_ms), ('ghost-recent', now_ms - 40000),
                     ('ghost-old', now_ms - 3600 * 1000), ('ghost-none', None)):
        (work / name).mkdir()
        (work / name / 'seg-000000.ts').write_bytes(b'\x47' + b'\xff' * 187)
        if hb is not None:
            (work / 'leases' / f'{name}.lease.1').write_text(
                f'seamfs-lease 1\nkey {name}\nsession {"ab" * 16}\nowner otherhost:1:00\n'
                f'gen 1\nheartbeat_ms {hb}\nreleased 0\nwriter_pid 0\n')
    # orphan_after 30 s (3 x heartbeat 10): "recent" expired 10 s ago, in its grace
    m, job = mount_tc(seamfs, nginx, tmp_path)
    assert (work / 'ghost-live' / 'seg-000000.ts').exists()
    assert (work / 'ghost-recent' / 'seg-000000.ts').exists()
    assert not (work / 'ghost-old').exists()
    assert not (work / 'ghost-none').exists()
    assert not (work / 'leases' / 'ghost-old.lease.1').exists()
    assert (job / 'plan.json').exists()
    log = m.log()
    assert 'cleanup: keeping' in log and 'ghost-live' in log
    assert 'cleanup: removing' in log and 'ghost-old' in log


@pytest.mark.parametrize('writer,words', [
    ('/bin/echo', "the writer's plan is not JSON"),
    ('/nonexistent/seamfs-writer', 'cannot run /nonexistent/seamfs-writer'),
])
def test_bad_writer_left_out(seamfs, data, nginx, tmp_path, writer, words):
    """A writer that cannot run or answers nonsense leaves the transcode out
    with a clear log line; the rest of the mount works."""
    m, job = mount_tc(seamfs, nginx, tmp_path, options=[f'writer={writer}'])
    assert sorted(os.listdir(m.path())) == ['.seamfs', 'clip.mkv']
    log = m.log()
    assert words in log, log
    assert 'asset clip-180 left out: its transcode could not be planned' in log, log
    assert bounded(lambda: sha256_file(m.path('clip.mkv')), 30, 'plain read') == \
        data['clip.mkv'].sha256


def test_remount_serves_committed_work(seamfs, data, nginx, tmp_path):
    """A remount lists the same size, inode and mtime (the plan is kept) and
    serves the segments already committed without starting a writer."""
    m, job = mount_tc(seamfs, nginx, tmp_path)
    f = m.path('Transcoded/clip 180p.ts')
    digest, _ = bounded(lambda: read_sequential(f), 90, 'first read')
    st1 = os.stat(f)
    assert m.unmount() == 0
    m2 = seamfs.mount(m.catalog, read_timeout=20, options=[f'work_dir={tmp_path / "work"}'],
                      mnt=m.mnt)
    st2 = os.stat(f)
    assert (st2.st_size, st2.st_ino, st2.st_mtime) == (st1.st_size, st1.st_ino, st1.st_mtime)
    assert bounded(lambda: read_sequential(f), 60, 'second read')[0] == digest
    assert 'writer pid' not in m2.log()


def test_unmount_while_the_writer_runs(seamfs, data, nginx, tmp_path):
    """A player reads the head of a transcode and exits while its writer
    still runs (paced at realtime): `fusermount3 -u` right then succeeds,
    the daemon exits, and a remount at the same path serves the whole file.
    The writer's input must not keep the mount busy (issue 26: it read its
    input through the mount, and the unmount failed with EBUSY until the
    writer ended; a remount then found the old mount still there)."""
    m, job = mount_tc(seamfs, nginx, tmp_path, options=['writer_max_speed=1'])
    f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    two = 2 * plan['segment_bytes']
    with open(f, 'rb', buffering=0) as fh:
        head = bounded(lambda: os.pread(fh.fileno(), two, 0), 60, 'the first two segments')
        again = os.pread(fh.fileno(), two, 0)
    assert len(head) == two and again == head
    assert head == (job / 'seg-000000.ts').read_bytes() + (job / 'seg-000001.ts').read_bytes()
    # the player has gone; the writer has 20 s of clip to write at 1x
    pids = writer_pids(m.worker_pid())
    assert pids, 'no writer runs: the test would prove nothing'
    # it reads through the daemon's read path (a session of its own, its
    # pid the client), not through the mount: it holds no file there
    sessions = [x for x in status_json(m)['sessions'] if x['path'] == 'clip.mkv']
    assert any(x['client'] in pids and x['handles'] == 1 for x in sessions), sessions
    in_mount = []
    for pid in pids:
        for p in Path(f'/proc/{pid}/fd').iterdir():
            try:
                fd = os.readlink(p)
            except OSError:
                continue         # closed meanwhile
            if fd.startswith(str(m.mnt) + '/'):
                in_mount.append(fd)
    assert not playlist_entries(job)[1], 'the writer finished before the unmount'
    r = subprocess.run(['fusermount3', '-u', str(m.mnt)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, f'fusermount3 -u: {r.stderr} (the writer holds {in_mount})'
    assert not in_mount
    assert m.wait_exit(30) == 0, m.log()
    assert not m.is_mounted()
    assert 'stopped at unmount' in m.log(), m.log()

    m2 = seamfs.mount(m.catalog, read_timeout=20, options=[f'work_dir={tmp_path / "work"}'],
                      mnt=m.mnt)
    f2 = m2.path('Transcoded/clip 180p.ts')
    digest, n = bounded(lambda: read_sequential(f2), 90, 'reading the transcode after a remount')
    assert n == plan['size']
    assert digest == committed_concat_sha(job, plan['segments'])
    assert hashlib.sha256(head).hexdigest() == hashlib.sha256(
        (job / 'seg-000000.ts').read_bytes() + (job / 'seg-000001.ts').read_bytes()).hexdigest()


# --------------------------------------------------------------------------
# The writer's input fails over like any reader (issue 13)
# --------------------------------------------------------------------------

def three_source_catalog(data, first, nginx, third, **profile):
    """clip.mkv with three sources holding the same bytes, the fault-injecting
    origin `first` in catalog order and by provider name (so both the plan
    and the balancer try it first), and its transcode."""
    p = dict(PROFILE)
    p.update(profile)
    p['of'] = 'clip'
    return {'providers': [{'name': 'a-origin'}, {'name': 'b-nginx'}, {'name': 'c-origin'}],
            'assets': [{'id': 'clip', 'path': 'clip.mkv', 'size': data['clip.mkv'].size,
                        'mtime': 1700000000,
                        'sources': [{'url': first.url('clip.mkv'), 'provider': 'a-origin'},
                                    {'url': nginx.url('clip.mkv'), 'provider': 'b-nginx'},
                                    {'url': third.url('clip.mkv'), 'provider': 'c-origin'}]},
                       {'id': 'clip-180', 'path': 'Transcoded/clip 180p.ts', 'transcode': p}]}


# Small shared head and tail, so that the writer's input is streamed from a
# source rather than served from the cache; standbys verified at once.
FAILOVER_OPTS = ['head_size=256K', 'tail_size=256K', 'standby_delay=0',
                 'liveness_interval=0']


def between_samples(size):
    """An offset in the middle third of a file of `size` bytes that no
    verification sample (20 ranges of 4 KiB, verifier/sample.c) covers, so a
    stall there never holds up a fingerprint."""
    chunks = (size + 4095) // 4096
    n = min(chunks, 20)
    ks = list(range(chunks)) if n == chunks else [i * (chunks - 1) // (n - 1) for i in range(n)]
    gaps = [(b - a, a, b) for a, b in zip(ks, ks[1:])
            if size // 3 <= a * 4096 and b * 4096 <= 2 * size // 3]
    _, a, b = max(gaps)
    return (a + 1) * 4096 + ((b - a - 1) * 4096) // 2


def ffprobe_duration(path):
    r = subprocess.run(['ffprobe', '-v', 'error', '-show_entries', 'format=duration',
                        '-of', 'default=nw=1:nk=1', str(path)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    return float(r.stdout.strip())


def status_json(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def test_writer_input_cuts_over_when_origin_dies(seamfs, data, nginx, make_origin, tmp_path):
    """The writer reads its input through the mount: when the origin it
    streams from dies mid-transcode (it stalls there first, so the death
    surely falls mid-run; then it drops every connection and refuses new
    ones), the daemon cuts the writer's session over to an identical source
    and the writer never notices. The reader gets the whole file, which
    decodes clean and lasts the clip's 20 s."""
    o1, o3 = make_origin(data.dir), make_origin(data.dir)
    work = tmp_path / 'work'
    # one writer (no probe of the tail beside it, whose session would
    # take o1 and leave the writer's to another source)
    m = seamfs.mount(three_source_catalog(data, o1, nginx, o3), read_timeout=30,
                     options=[f'work_dir={work}', 'tail_ahead=0'] + FAILOVER_OPTS)
    job = work / 'clip-180'
    plan = plan_of(job)
    f = m.path('Transcoded/clip 180p.ts')
    read_while_first_origin_dies(o1, data, job, plan, f)
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err
    duration = bounded(lambda: ffprobe_duration(f), 60, 'probing the duration')
    assert abs(duration - plan['duration_us'] / 1e6) < 0.5, (duration, plan)
    assert abs(duration - 20.0) < 0.5, duration
    # the writer's session was cut over, away from the dead origin ...
    st = status_json(m)
    assert st['cutovers']['total'] >= 1, st['cutovers']
    moves = [(c['from'], c['to']) for c in st['cutovers']['recent']]
    assert any(fr == o1.url('clip.mkv') and to in (nginx.url('clip.mkv'), o3.url('clip.mkv'))
               for fr, to in moves), moves
    # ... which the other sources then served: the rest of the stream, not
    # only their verification samples (20 x 4 KiB each)
    served = sum(r['bytes_sent'] for r in o3.requests('/clip.mkv')) + sum(
        int(ln.split()[5]) for ln in nginx.access_log().splitlines() if '/clip.mkv ' in ln)
    assert served > 400 * 1024, served
    # and the writer never saw the death: no failure, no restart
    log = m.log()
    assert 'failed (exit' not in log and 'died (' not in log and 'restarting in' not in log, log
    (tc,) = st['transcodes']
    assert tc['committed'] == plan['segments'] and not tc['failed']


def test_plan_and_writer_skip_a_dead_first_source(seamfs, data, nginx, make_origin, tmp_path):
    """A first source that is dead before the mount: the plan falls back to
    the next source in catalog order, and the writer (through the mount)
    reads from the live ones; the transcode is listed and reads whole."""
    o1, o3 = make_origin(data.dir), make_origin(data.dir)
    o1.down(drop=True)
    work = tmp_path / 'work'
    m = seamfs.mount(three_source_catalog(data, o1, nginx, o3), read_timeout=30,
                     options=[f'work_dir={work}'] + FAILOVER_OPTS)
    job = work / 'clip-180'
    plan = plan_of(job)
    f = m.path('Transcoded/clip 180p.ts')
    assert os.stat(f).st_size == plan['size']
    assert plan['segments'] == 10
    digest, n = bounded(lambda: read_sequential(f), 90, 'reading the transcode')
    assert n == plan['size']
    assert digest == committed_concat_sha(job, plan['segments'])
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err
    log = m.log()
    assert f'asset clip-180: planning from {o1.url("clip.mkv")} failed' in log, log
    assert f'asset clip-180: planned from {nginx.url("clip.mkv")}' in log, log


def read_while_first_origin_dies(o1, data, job, plan, f):
    """Reads the transcode f whole while its writer's first source, o1,
    stalls mid-file and then dies after two committed segments; every byte
    read is the committed segments' (assert_read_whole)."""
    # from here on the first origin delivers the clip only up to mid-file
    o1.rule('/clip.mkv', stall_at=between_samples(data['clip.mkv'].size), stall_ms=600000)
    t, box = start_reader(f)
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        assert not playlist_entries(job)[1], 'the writer finished before the origin died'
        o1.down(drop=True)
    finally:
        t.join(90)
    assert_read_whole(t, box, job, plan, 'the reader is still blocked 90 s after the origin died')


def one_source_transcode_reader(seamfs, data, make_origin, tmp_path, read_timeout):
    """A transcode whose input has one source, a seam-origin that stalls
    mid-file, and a reader started on it: (origin, mount, job dir, plan,
    reader thread, box) for assert_read_whole()."""
    o1 = make_origin(data.dir)
    work = tmp_path / 'work'
    p = dict(PROFILE, of='clip')
    cat = {'providers': [{'name': 'a-origin'}],
           'assets': [{'id': 'clip', 'path': 'clip.mkv', 'size': data['clip.mkv'].size,
                       'mtime': 1700000000,
                       'sources': [{'url': o1.url('clip.mkv'), 'provider': 'a-origin'}]},
                      {'id': 'clip-180', 'path': 'Transcoded/clip 180p.ts', 'transcode': p}]}
    # tail_ahead=0: the tail's probe, from the source's cached tail, may
    # list the last segments and #CLEAN before the main writer's second
    # commit, and these tests count the main writer's starts
    m = seamfs.mount(cat, read_timeout=read_timeout,
                     options=[f'work_dir={work}', 'retries=0', 'tail_ahead=0'] + FAILOVER_OPTS)
    job = work / 'clip-180'
    plan = plan_of(job)
    o1.rule('/clip.mkv', stall_at=between_samples(data['clip.mkv'].size), stall_ms=600000)
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    return o1, m, job, plan, t, box


def test_writer_restarts_back_off_through_an_outage(seamfs, data, make_origin, tmp_path):
    """The input's only source dies mid-transcode: the writer's reads fail
    (EIO from the mount), and the writer is restarted after 250 ms, 500 ms,
    1 s, ... rather than five times at once. The source comes back after the
    second failure; a restart then finishes the file and the reader, which
    kept waiting (bounded by read_timeout), gets all of it."""
    o1, m, job, plan, t, box = one_source_transcode_reader(seamfs, data, make_origin,
                                                            tmp_path, 60)
    f = m.path('Transcoded/clip 180p.ts')
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        assert not playlist_entries(job)[1], 'the writer finished before the origin died'
        o1.down(drop=True)
        wait_until(lambda: 'restarting its writer in 500 ms (failure 2 of 5' in m.log(), 30,
                   'the second failed writer')
        o1.clear()
        o1.up()
    finally:
        t.join(90)
    assert_read_whole(t, box, job, plan, 'the reader is still blocked 90 s after the origin died')
    rc, err = bounded(lambda: decode_errors(f), 120, 'decoding through the mount')
    assert rc == 0 and not err.strip(), err
    log = m.log()
    assert 'restarting its writer in 250 ms (failure 1 of 5' in log, log
    assert 'giving up' not in log, log
    # the restarts backed off, and each start but the first followed a backoff
    assert 'restarting its writer in 500 ms (failure 2 of 5' in log, log
    starts = log.count(' started: asset clip-180 ')
    assert starts == log.count('restarting its writer in') + 1, log


def test_writer_gives_up_after_backoffs(seamfs, data, make_origin, tmp_path):
    """The input's only source dies for good: the writer is restarted five
    times, 250 ms, 500 ms, 1 s, 2 s and 4 s apart, then the supervisor gives
    up and the waiting reader gets EIO, long before read_timeout; a read
    right after that fails at once instead of starting the writer again."""
    o1, m, job, plan, t, box = one_source_transcode_reader(seamfs, data, make_origin,
                                                            tmp_path, 120)
    f = m.path('Transcoded/clip 180p.ts')
    try:
        wait_until(lambda: len(playlist_entries(job)[0]) >= 2, 30, 'two committed segments')
        o1.down(drop=True)
    finally:
        t.join(60)
    assert not t.is_alive(), 'the reader is still blocked 60 s after the origin died'
    assert isinstance(box.get('error'), OSError) and box['error'].errno == errno.EIO, box
    log = m.log()
    for n, ms in enumerate((250, 500, 1000, 2000, 4000), 1):
        assert f'restarting its writer in {ms} ms (failure {n} of 5 in a row)' in log, log
    assert 'writer failed 6 times in a row; giving up' in log, log
    assert log.count(' started: asset clip-180 ') == 6, log

    # a segment nobody wrote (the tail may have been written ahead)
    listed = {i for i, _ in playlist_entries(job)[0]}
    k = min(set(range(plan['segments'])) - listed)

    def read_unwritten_segment():
        with open(f, 'rb', buffering=0) as fh:
            return os.pread(fh.fileno(), 188, k * plan['segment_bytes'])
    with pytest.raises(OSError) as e:
        bounded(read_unwritten_segment, 30, 'a read after giving up')
    assert e.value.errno == errno.EIO
    assert m.log().count(' started: asset clip-180 ') == 6


def test_waiting_readers_do_not_starve_the_writer(seamfs, data, nginx, make_origin, tmp_path):
    """Fourteen players open fourteen transcodes with one writer slot: all
    but one wait, some until read_timeout. Their waits must not hold what
    the running writer needs to read its input through the mount (the
    kernel's dozen background request slots of a buffered read did): the
    first two transcodes are written one after the other and read well
    within read_timeout."""
    o1, o3 = make_origin(data.dir), make_origin(data.dir)
    work = tmp_path / 'work'
    cat = three_source_catalog(data, o1, nginx, o3)
    for i in range(14):
        cat['assets'].append({'id': f'clip-{i}', 'path': f'Queue/clip {i}.ts',
                              'transcode': dict(PROFILE, of='clip')})
    m = seamfs.mount(cat, read_timeout=12,
                     options=[f'work_dir={work}', 'max_writers=1', 'writer_max_speed=8'] +
                     FAILOVER_OPTS)
    res = {}

    def head(i):
        fd = os.open(m.path(f'Queue/clip {i}.ts'), os.O_RDONLY)
        try:
            res[i] = os.pread(fd, 4096, 0)
        except OSError as e:
            res[i] = e
        finally:
            os.close(fd)

    threads = []
    for i in range(14):
        threads.append(threading.Thread(target=head, args=(i,), daemon=True))
        threads[-1].start()
        time.sleep(0.05)     # in order: clip-0 gets the writer, clip-1 is next
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads), 'a reader is still blocked'
    for i in (0, 1):
        assert isinstance(res[i], bytes), (i, res[i])
        assert res[i] == (work / f'clip-{i}' / 'seg-000000.ts').read_bytes()[:4096]
    # the rest got their bytes or, waiting in line, EIO at read_timeout
    assert all(isinstance(r, bytes) or r.errno == errno.EIO for r in res.values()), res
    # and the two writers ran through before the first waiting reader's
    # read_timeout (12 s; they need some 2.5 s each at 8x): a writer
    # starved by the waiting readers only goes on once their reads expire
    log = m.log()
    done0 = log.find(' of asset clip-0 stopped cleanly')
    done1 = log.find(' of asset clip-1 stopped cleanly')
    expired = log.find('not committed within read_timeout')
    assert 0 <= done0 < done1 and (expired < 0 or done1 < expired), log


def test_single_threaded_writer_reads_the_next_source(seamfs, data, nginx, make_origin,
                                                     tmp_path):
    """With `-s` (one FUSE thread, which a waiting reader holds) writers read
    the sources directly; a writer whose source dies fails, and its
    replacement, after the backoff, reads the next source in catalog order."""
    o1, o3 = make_origin(data.dir), make_origin(data.dir)
    work = tmp_path / 'work'
    cat = seamfs.write_catalog(three_source_catalog(data, o1, nginx, o3))
    mnt = seamfs.new_mountpoint()
    argv = seamfs.argv(cat, mnt, 30, [f'work_dir={work}', 'tail_ahead=0'] + FAILOVER_OPTS)
    argv.insert(1, '-s')
    m = Mount(argv, cat, mnt, seamfs.state_dir, tmp_path / 'seamfs-single.stderr')
    seamfs.mounts.append(m)          # unmounted by the fixture, also on failure
    m.start()
    job = work / 'clip-180'
    plan = plan_of(job)
    f = m.path('Transcoded/clip 180p.ts')
    read_while_first_origin_dies(o1, data, job, plan, f)
    log = m.log()
    assert f'segments 0..9, input {o1.url("clip.mkv")}' in log, log
    assert f'the next writer reads source 2 of 3, {nginx.url("clip.mkv")}' in log, log
    assert f'), input {nginx.url("clip.mkv")}' in log, log
    assert 'through the mount' not in log, log


def test_writer_command_line_carries_no_secret(seamfs, data, make_origin, tmp_path):
    """A writer that reads a source itself (here under -s) gets a URL with a
    token and the provider's headers on its stdin, never on its command
    line, which every local user can read in /proc."""
    o1 = make_origin(data.dir)
    work = tmp_path / 'work'
    url = o1.url('clip.mkv') + '?token=SECRETTOKEN42'
    cat = seamfs.write_catalog({
        'providers': [{'name': 'a-origin', 'headers': {'X-Api-Key': 'SECRETKEY77'}}],
        'assets': [{'id': 'clip', 'path': 'clip.mkv', 'size': data['clip.mkv'].size,
                    'mtime': 1700000000, 'sources': [{'url': url, 'provider': 'a-origin'}]},
                   {'id': 'clip-180', 'path': 'Transcoded/clip 180p.ts',
                    'transcode': dict(PROFILE, of='clip')}]})
    mnt = seamfs.new_mountpoint()
    argv = seamfs.argv(cat, mnt, 30, [f'work_dir={work}', 'writer_max_speed=2'])
    argv.insert(1, '-s')
    m = Mount(argv, cat, mnt, seamfs.state_dir, tmp_path / 'seamfs-single.stderr')
    seamfs.mounts.append(m)          # unmounted by the fixture, also on failure
    m.start()
    job = work / 'clip-180'
    plan = plan_of(job)
    # read before the reader holds the one FUSE thread (-s): the mount
    # answers nothing else while it waits for the writer
    serving = m.worker_pid()
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    try:
        pids = wait_until(lambda: writer_pids(serving), 20, 'the writer process')
        cmdline = Path(f'/proc/{pids[0]}/cmdline').read_bytes()
    finally:
        t.join(90)
    assert b'SECRETTOKEN42' not in cmdline and b'SECRETKEY77' not in cmdline, cmdline
    assert b'--input\0-\0' in cmdline, cmdline
    assert_read_whole(t, box, job, plan, 'the reader is still blocked 90 s after it began')
    # the writer read its input, handed over on stdin
    reqs = [r for r in o1.log()['requests'] if r['path'] == '/clip.mkv']
    assert reqs and all(r['status'] in (200, 206) for r in reqs), reqs


def shared_handles(pid):
    """{fd: target} of process pid's sockets, pipes, anonymous inodes and
    FUSE devices: what two processes can hold in common."""
    out = {}
    try:
        fds = os.listdir(f'/proc/{pid}/fd')
    except OSError:
        return out
    for fd in fds:
        try:
            link = os.readlink(f'/proc/{pid}/fd/{fd}')
        except OSError:
            continue
        if link.startswith(('socket:', 'pipe:', 'anon_inode:', '/dev/fuse')):
            out[int(fd)] = link
    return out


def test_writer_inherits_nothing_of_the_daemon(seamfs, data, nginx, tmp_path):
    """A writer gets its input, output, stderr and feed (fds 0 to 3) and nothing
    else of the daemon's. libcurl 7.88 makes its sockets without
    close-on-exec, so on 3c499ca every writer inherited the daemon's
    connections to the origins (and libcurl's wakeup pair): a connection
    the daemon closed stayed open at the origin, counting against the
    provider's connection limit, for as long as the writer ran."""
    m, job = mount_tc(seamfs, nginx, tmp_path, options=['writer_max_speed=1'])
    daemon = m.worker_pid()
    # a plain read first: the daemon holds connections to the origin
    with open(m.path('clip.mkv'), 'rb') as f:
        assert f.read(1 << 20) == data.bytes('clip.mkv')[:1 << 20]
        mine = shared_handles(daemon)
        assert any(v.startswith('socket:') for v in mine.values()), mine
        t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
        try:
            # the writer, and the one writing the tail beside it
            kids = wait_until(lambda: writer_pids(daemon), 20, 'the writer')
            theirs = {(w, fd): v for w in kids for fd, v in shared_handles(w).items()
                      if fd > 3}
            mine = set(shared_handles(daemon).values())
        finally:
            t.join(120)
    inherited = {k: v for k, v in theirs.items() if v in mine}
    assert not inherited, f"writers hold the daemon's {inherited}"
    assert_read_whole(t, box, job, plan_of(job), 'the reader is still blocked')
