"""Nothing is deleted that seamfs did not make (issue 14, "Safety").

work_dir may be any directory an operator names, and the daemon often runs
as root.  seamfs marks every directory it makes there with `.seamfs-work`
and removes only the files it made, only inside marked directories: a
work_dir holding someone else's files is refused before anything is mounted
or removed, and files dropped into a work_dir that seamfs made are left
alone while transcodes go on working.  Real mounts, the real writer, the
session's ffmpeg clip served by nginx (as in test_transcode.py); every
wait is bounded and the fixtures unmount everything, also on failure.
"""

import hashlib
import os
import signal
import time

import pytest

from conftest import bounded, is_seamfs_mounted, fusermount_unmount, sha256_file
from test_transcode import (PROFILE, committed_concat_sha, mount_tc, plan_of, playlist_entries,
                            read_sequential, tc_catalog)

MARKER = '.seamfs-work'


def snapshot(root):
    """{relative path: sha256 or 'dir'} of everything under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = 'dir'
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(open(p, 'rb').read()).hexdigest()
    return out


def put(path, data=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(4096) if data is None else data)


def refused_mount(seamfs, nginx, work, foreground):
    """Runs seamfs on a transcode catalog with work_dir=work, expecting it to
    exit by itself; a build that mounts anyway is unmounted and the test
    fails (in the foreground through run()'s own bound)."""
    cat = seamfs.write_catalog(tc_catalog(nginx))
    mnt = seamfs.new_mountpoint()
    argv = seamfs.argv(cat, mnt, options=[f'work_dir={work}'], foreground=foreground)[1:]
    try:
        r = seamfs.run(argv, timeout=20, mountpoints=[mnt])
    finally:
        if is_seamfs_mounted(mnt):
            fusermount_unmount(mnt)
    assert not is_seamfs_mounted(mnt)
    return r


FOREIGN = {
    # a user's file and folder
    'user': (['notes.txt', 'Photos/cat.jpg'], ('notes.txt', 'Photos')),
    # looks like an older seamfs's work_dir, but also holds a user's file
    'legacy+user': (['leases/clip-180.lease.1', 'clip-180/plan.json',
                     'clip-180/seg-000000.ts', 'todo.txt'], ('todo.txt',)),
    # a folder under a job's name, holding a user's file
    'job-name': (['clip-180/holiday.mov'], ('clip-180/holiday.mov',)),
}


@pytest.mark.parametrize('kind', list(FOREIGN))
@pytest.mark.parametrize('foreground', [True, False], ids=['-f', 'daemon'])
def test_foreign_work_dir_refused(seamfs, data, nginx, tmp_path, kind, foreground):
    files, named = FOREIGN[kind]
    work = tmp_path / 'work'
    for f in files:
        put(work / f)
    before = snapshot(work)
    r = refused_mount(seamfs, nginx, work, foreground)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert str(work) in r.stderr and any(n in r.stderr for n in named), r.stderr
    assert 'seamfs did not make it' in r.stderr, r.stderr
    # not a byte touched, no marker added
    assert snapshot(work) == before


def test_user_files_in_seamfs_work_dir_left_alone(seamfs, data, nginx, tmp_path):
    """A work_dir seamfs made, with a user's files dropped into it (and into
    a job directory) later: cleanup and recovery leave them alone, and the
    transcode still reads right."""
    work = tmp_path / 'work'
    # a paced writer, stopped by the unmount part-way: the next one recovers
    m, job = mount_tc(seamfs, nginx, tmp_path, options=['writer_max_speed=2'])
    for d in (work, work / 'leases', job):
        assert (d / MARKER).is_file(), d
    with open(m.path('Transcoded/clip 180p.ts'), 'rb', buffering=0) as fh:
        assert bounded(lambda: os.pread(fh.fileno(), 188, 0), 30, 'first packet')[0] == 0x47
    # SIGTERM: the writer reads through the mount and keeps it busy for
    # fusermount3 -u; the daemon stops it at once
    m.signal(signal.SIGTERM)
    assert m.wait_exit() == 0
    assert not m.is_mounted()
    entries, clean = playlist_entries(job)
    assert entries and not clean, 'the first writer finished before the stop'

    # dropped in later: beside the jobs, in a folder shaped like an old job
    # (no marker), and inside the job directory (names the recovery of old
    # removed: *.tmp, seg-N.ts beyond the plan)
    for rel in ('notes.txt', 'Photos/cat.jpg', 'ghost/seg-000000.ts', 'ghost/playlist',
                'clip-180/my-draft.tmp', 'clip-180/seg-12.ts', 'clip-180/README'):
        put(work / rel)
    user = {k: v for k, v in snapshot(work).items()
            if k.split('/')[0] in ('notes.txt', 'Photos', 'ghost')
            or k in ('clip-180/my-draft.tmp', 'clip-180/seg-12.ts', 'clip-180/README')}
    assert len(user) == 9, user

    m2 = seamfs.mount(m.catalog, read_timeout=20, options=[f'work_dir={work}'], mnt=m.mnt)
    f = m2.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    digest, n = bounded(lambda: read_sequential(f), 90, 'reading the transcode')
    assert n == plan['size'] == os.stat(f).st_size
    assert digest == committed_concat_sha(job, plan['segments'])
    assert bounded(lambda: sha256_file(f), 60, 'second read') == digest
    now = snapshot(work)
    assert {k: now.get(k) for k in user} == user, m2.log()
    log = m2.log()
    assert 'recovery: asset clip-180' in log, log      # the writer's start ran it
    assert 'leaving' in log and 'ghost' in log, log


def test_orphaned_job_dir_keeps_user_files(seamfs, data, nginx, tmp_path):
    """A job directory of an asset gone from the catalog is cleaned at mount:
    seamfs's files go, a user's file in it stays (and the directory with
    it); the new transcode works."""
    work = tmp_path / 'work'
    fast = ['heartbeat=0.5', 'orphan_after=1']
    m, job = mount_tc(seamfs, nginx, tmp_path, options=fast)
    assert bounded(lambda: read_sequential(m.path('Transcoded/clip 180p.ts')), 90, 'read')[1]
    assert m.unmount() == 0
    assert list(job.glob('seg-*.ts'))
    put(job / 'keep-me.txt', b'mine\n')
    time.sleep(2.5)      # the released lease's grace (orphan_after) is over

    cat = tc_catalog(nginx)
    cat['assets'][1] = {'id': 'clip-144', 'path': 'Transcoded/clip 144p.ts',
                        'transcode': dict(PROFILE, of='clip', height=144)}
    m2 = seamfs.mount(cat, read_timeout=20, options=[f'work_dir={work}'] + fast, mnt=m.mnt)
    # the marker stays: what is left is seamfs's to look at again, not to remove
    assert sorted(os.listdir(job)) == [MARKER, 'keep-me.txt']
    assert (job / 'keep-me.txt').read_bytes() == b'mine\n'
    log = m2.log()
    assert 'cleanup: removing' in log and 'keep-me.txt' in log, log
    f = m2.path('Transcoded/clip 144p.ts')
    job2 = work / 'clip-144'
    digest, n = bounded(lambda: read_sequential(f), 90, 'reading the new transcode')
    assert n == plan_of(job2)['size']
    assert digest == committed_concat_sha(job2, plan_of(job2)['segments'])


def test_older_work_dir_adopted(seamfs, data, nginx, tmp_path):
    """A work_dir of an older seamfs (no markers, only what seamfs makes) is
    adopted: marked, its committed segments served without a writer."""
    work = tmp_path / 'work'
    m, job = mount_tc(seamfs, nginx, tmp_path)
    f = m.path('Transcoded/clip 180p.ts')
    digest, _ = bounded(lambda: read_sequential(f), 90, 'first read')
    assert m.unmount() == 0
    for p in work.rglob(MARKER):
        p.unlink()
    before = {k: v for k, v in snapshot(work).items() if not k.endswith(MARKER)}

    m2 = seamfs.mount(m.catalog, read_timeout=20, options=[f'work_dir={work}'], mnt=m.mnt)
    assert 'made by an older seamfs' in m2.log(), m2.log()
    for d in (work, work / 'leases', job):
        assert (d / MARKER).is_file(), d
    assert bounded(lambda: read_sequential(f), 60, 'second read')[0] == digest
    after = {k: v for k, v in snapshot(work).items() if not k.endswith(MARKER)}
    assert set(after) >= {k for k in before if not k.startswith('leases/')}
