"""Storages and work directories others can write to (docs/copies.md,
"Storages others can write to"; docs/transcode.md, "Only what seamfs
made"): the daemon runs as root, an unprivileged user who can write the
storage or a job directory plants links and files there, and root never
writes through a link, never
follows a linked folder out of the storage, never replaces a file it did
not make, and never copies onto the bare mount point of an unmounted
storage.  The attacker's target is a file only root can read or write (0600
in a 0700 root folder): its SHA-256 must be unchanged afterwards.  Every
byte read through the mount is checked by SHA-256."""

import hashlib
import json
import errno
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from conftest import bounded, catalog, sha256_file, wait_until
from test_copies import (COPY_WAIT, copies_of, ctl, entry, job, metrics, sockdir,  # noqa: F401
                         status, storage, tmpfs, wait_copies, wait_reason)
from test_transcode_seek import clip60, seek_catalog, seg_bounds  # noqa: F401
from test_cluster import mount_host, redis, seg_file, store_playlist, tc_cat  # noqa: F401
from test_transcode import (assert_read_whole, committed_concat_sha, mount_tc, plan_of,
                            playlist_clean, playlist_entries, read_sequential, start_reader,
                            writer_pids)


@pytest.fixture
def attacker():
    """An unprivileged user made for the test (no home), removed after."""
    name = 'seamfs-t' + uuid.uuid4().hex[:8]
    r = subprocess.run(['useradd', '-M', '-s', '/usr/sbin/nologin', name],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.fail(f'useradd {name}: {r.stderr}')
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(['userdel', name], capture_output=True, timeout=30)


@pytest.fixture
def arena(attacker):
    """A folder others may traverse (tmp_path is root's alone) with
    store/ (the attacker's) and vault/secret (root's alone)."""
    base = tempfile.mkdtemp(prefix='seamfs-safe-', dir='/tmp')
    try:
        os.chmod(base, 0o755)
        store = os.path.join(base, 'store')
        os.mkdir(store)
        os.chown(store, *attacker)
        vault = os.path.join(base, 'vault')
        os.mkdir(vault, 0o700)
        secret = os.path.join(vault, 'secret')
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(4096))
        os.close(fd)
        yield {'base': base, 'store': store, 'vault': vault, 'secret': secret,
               'secret_sha': sha256_file(secret)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_attacker(attacker, *argv):
    """Runs argv as the attacker; its exit status must be 0."""
    r = subprocess.run(list(argv), user=attacker[0], group=attacker[1], extra_groups=[],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f'{argv}: {r.stderr}'


def copy_or_reason(m, aid, reason):
    """Waits until the asset has a serving copy or its job waits for reason."""
    wait_until(lambda: copies_of(status(m), aid) or
               (job(status(m), aid) or {}).get('reason') == reason,
               COPY_WAIT, f'a copy of {aid} or "{reason}"')


@pytest.mark.parametrize('planted', ['Movies/movie.bin.partial', '.seamfs-copies.json.tmp'])
def test_a_planted_link_is_never_written_through(seamfs, data, make_origin, arena, attacker,
                                                 planted):
    """A link to the root-only file at the copy's old .partial name, or at
    the manifest's old temporary name: the copy and the manifest are made
    beside it, the target keeps its bytes and the link stays as it was."""
    o = make_origin(data.dir)
    df = data['mid.bin']
    store = arena['store']
    as_attacker(attacker, 'mkdir', os.path.join(store, 'Movies'))
    link = os.path.join(store, planted)
    as_attacker(attacker, 'ln', '-s', arena['secret'], link)
    cat = {'storages': [storage('disk', store)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1)
    assert sha256_file(arena['secret']) == arena['secret_sha'], 'root wrote through the link'
    assert os.path.islink(link) and os.readlink(link) == arena['secret']
    copy = os.path.join(store, 'Movies', 'movie.bin')
    assert not os.path.islink(copy) and sha256_file(copy) == df.sha256
    manifest = os.path.join(store, '.seamfs-copies.json')
    assert not os.path.islink(manifest) and df.sha256 in open(manifest).read()
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256


def test_a_linked_folder_never_takes_the_copy_out_of_the_storage(seamfs, data, make_origin,
                                                                 arena, attacker):
    o = make_origin(data.dir)
    df = data['mid.bin']
    as_attacker(attacker, 'ln', '-s', arena['vault'], os.path.join(arena['store'], 'Movies'))
    cat = {'storages': [storage('disk', arena['store'])],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    copy_or_reason(m, 'movie', 'link in the way')
    assert sorted(os.listdir(arena['vault'])) == ['secret'], 'the copy left the storage'
    assert sha256_file(arena['secret']) == arena['secret_sha']
    assert copies_of(status(m), 'movie') == []
    assert 'link in the way' in m.log(), m.log()[-2000:]
    assert metrics(m)['seamfs_copies_in_way_total'] >= 1
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256


def test_a_foreign_file_at_the_copys_place_is_never_replaced(seamfs, data, make_origin, arena,
                                                             attacker):
    """The attacker's file (the asset's size, other bytes) stays; the job
    waits with the reason, and goes on once the file is gone."""
    o = make_origin(data.dir)
    df = data['mid.bin']
    movies = os.path.join(arena['store'], 'Movies')
    as_attacker(attacker, 'mkdir', movies)
    foreign = os.path.join(movies, 'movie.bin')
    src = os.path.join(arena['base'], 'foreign.src')
    with open(src, 'wb') as f:
        f.write(os.urandom(df.size))
    os.chmod(src, 0o644)
    foreign_sha = sha256_file(src)
    as_attacker(attacker, 'cp', src, foreign)
    cat = {'storages': [storage('disk', arena['store'])],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    copy_or_reason(m, 'movie', 'foreign file in the way')
    assert sha256_file(foreign) == foreign_sha, 'a file seamfs did not make was replaced'
    assert 'made and verified' not in m.log()
    assert 'foreign file in the way' in m.log(), m.log()[-2000:]
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256
    # the way cleared: the copy is made
    as_attacker(attacker, 'rm', foreign)
    wait_copies(m, 'movie', 1)
    assert sha256_file(foreign) == df.sha256


def test_an_unmounted_storage_is_not_ready_and_never_written(seamfs, data, make_origin,
                                                            tmpfs, sockdir):
    """Seen mounted (role off), then unmounted: with the role on, its bare
    mount point on the root file system gets nothing."""
    o = make_origin(data.dir)
    df = data['mid.bin']
    disk = tmpfs('disk', '64m')
    cat = {'storages': [storage('disk', disk, copying=False)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(cat, options=[f'control_socket={sock}'])
    wait_reason(m, 'movie', 'no storage')    # the only storage has the role off
    (st,) = status(m)['copies']['storages']
    assert st['reachable'], st
    r = subprocess.run(['umount', str(disk)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert ctl(seamfs, sock, 'storage', 'enable', 'disk').returncode == 0
    copy_or_reason(m, 'movie', 'storage not ready')
    assert os.listdir(disk) == [], 'copied onto the root file system'
    (st,) = status(m)['copies']['storages']
    assert not st['reachable'] and 'not the file system' in st['why'], st
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256


@pytest.mark.parametrize('planted', ['playlist.tmp', 'seg-000004.ts.tmp'])
def test_a_link_planted_in_a_job_directory_is_never_written_through(
        seamfs, data, nginx, arena, attacker, planted):
    """work_dir/ASSET/playlist.tmp (px_write_atomic's old temporary name),
    or a later segment's .tmp, linked to the root-only file while a (paced)
    writer runs, after its first commit; the job directory is writable by
    others (an export shared with them). The transcode still reads whole."""
    m, job = mount_tc(seamfs, nginx, Path(arena['base']), options=['writer_max_speed=2'])
    plan = plan_of(job)
    os.chmod(job, 0o777)
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    wait_until(lambda: (job / 'playlist').exists(), 60, 'the first commit')
    as_attacker(attacker, 'ln', '-s', arena['secret'], str(job / planted))
    t.join(90)
    assert sha256_file(arena['secret']) == arena['secret_sha'], 'root wrote through the link'
    assert not os.path.islink(job / 'playlist')
    assert_read_whole(t, box, job, plan, 'the reader is still blocked after 90 s')


def test_a_file_planted_at_a_segments_tmp_name_is_never_written_through(
        seamfs, data, nginx, arena, attacker):
    """The attacker's own file, hard-linked at a later segment's old .tmp
    name (seg-000004.ts.tmp) while a paced writer runs: the writer makes its
    segment as a new file under a random name (O_EXCL) and renames that, so
    the attacker's file keeps its bytes and never becomes the committed
    segment (which the attacker could rewrite through its other link)."""
    m, job = mount_tc(seamfs, nginx, Path(arena['base']), options=['writer_max_speed=2'])
    plan = plan_of(job)
    os.chmod(job, 0o777)
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    wait_until(lambda: (job / 'playlist').exists(), 60, 'the first commit')
    evil = job / 'attacker.bin'
    as_attacker(attacker, 'sh', '-c', f'printf attacker > {evil} && chmod 666 {evil}')
    as_attacker(attacker, 'ln', str(evil), str(job / 'seg-000004.ts.tmp'))
    t.join(90)
    assert_read_whole(t, box, job, plan, 'the reader is still blocked after 90 s')
    assert evil.read_bytes() == b'attacker', 'root wrote into the planted file'
    seg = os.stat(job / 'seg-000004.ts')
    assert seg.st_ino != os.stat(evil).st_ino and seg.st_uid == 0
    assert not list(job.glob('seg-*.ts.*.tmp'))


def test_a_copy_of_ours_stale_across_a_remount_is_replaced(seamfs, make_origin, tmp_path):
    """The manifest keeps what seamfs made: the asset changed while
    unmounted, its old copy (in the manifest, size and SHA-256 as made) is
    replaced by the new one, not taken for a foreign file."""
    root = tmp_path / 'root'
    root.mkdir()
    first, second = os.urandom(2 * 1024 * 1024 + 7), os.urandom(2 * 1024 * 1024 + 7)
    (root / 'f.bin').write_bytes(first)
    o = make_origin(root)
    disk = tmp_path / 'disk'
    disk.mkdir()
    sha1, sha2 = (hashlib.sha256(b).hexdigest() for b in (first, second))
    cat = {'storages': [storage('disk', disk)],
           'assets': [{'id': 'f', 'path': 'f.bin', 'size': len(first), 'sha256': sha1,
                       'copies': 1, 'sources': [{'url': o.url('f.bin')}]}]}
    m = seamfs.mount(cat)
    wait_copies(m, 'f', 1)
    assert m.unmount() == 0
    (root / 'f.bin').write_bytes(second)
    cat['assets'][0]['sha256'] = sha2
    m = seamfs.mount(cat)
    wait_copies(m, 'f', 1)
    assert sha256_file(disk / 'f.bin') == sha2
    assert 'in the way' not in m.log()
    assert sha256_file(m.path('f.bin')) == sha2


def test_a_storage_unmounted_after_its_copy_gets_no_manifest_and_no_new_copy(
        seamfs, make_origin, tmp_path, tmpfs, sockdir):
    """A copy made on a mounted storage, the storage unmounted, then a
    reload that changes the asset: its copy goes stale, the job waits
    (storage not ready), and the bare mount point gets no manifest and no
    copy."""
    root = tmp_path / 'root'
    root.mkdir()
    first, second = os.urandom(2 * 1024 * 1024 + 7), os.urandom(2 * 1024 * 1024 + 7)
    (root / 'f.bin').write_bytes(first)
    o = make_origin(root)
    disk = tmpfs('disk', '64m')
    sha1, sha2 = (hashlib.sha256(b).hexdigest() for b in (first, second))
    cat = {'storages': [storage('disk', disk)],
           'assets': [{'id': 'f', 'path': 'Movies/f.bin', 'size': len(first), 'sha256': sha1,
                       'copies': 1, 'sources': [{'url': o.url('f.bin')}]}]}
    path = seamfs.write_catalog(cat, 'catalog.json')
    sock = os.path.join(sockdir, 'ctl.sock')
    m = seamfs.mount(path, options=[f'control_socket={sock}'])
    wait_copies(m, 'f', 1)
    r = subprocess.run(['umount', str(disk)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    (root / 'f.bin').write_bytes(second)
    cat['assets'][0]['sha256'] = sha2
    path.write_text(json.dumps(cat))
    assert ctl(seamfs, sock, 'reload').returncode == 0
    copy_or_reason(m, 'f', 'storage not ready')
    assert os.listdir(disk) == [], 'written onto the root file system'
    assert copies_of(status(m), 'f') == []
    assert sha256_file(m.path('Movies/f.bin')) == sha2


def test_a_manifest_linked_to_a_root_only_file_is_not_read(seamfs, data, make_origin, arena,
                                                         attacker):
    """.seamfs-copies.json linked to a root-only file of words: its parse
    error would quote them in the log; it is not opened, and the copy's
    manifest replaces the link (the target unchanged)."""
    os.chmod(arena['secret'], 0o600)
    with open(arena['secret'], 'w') as f:
        f.write('TOPSECRET-root-only-words\n')
    secret_sha = sha256_file(arena['secret'])
    o = make_origin(data.dir)
    df = data['mid.bin']
    manifest = os.path.join(arena['store'], '.seamfs-copies.json')
    as_attacker(attacker, 'ln', '-s', arena['secret'], manifest)
    cat = {'storages': [storage('disk', arena['store'])],
           'assets': [entry('movie', 'movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1)
    assert 'TOPSECRET' not in m.log(), m.log()[-2000:]
    assert sha256_file(arena['secret']) == secret_sha
    assert not os.path.islink(manifest) and df.sha256 in open(manifest).read()
    assert sha256_file(m.path('movie.bin')) == df.sha256


def root_only(arena, name, size):
    """A file only root can read, of size random bytes, in the vault."""
    path = os.path.join(arena['vault'], name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(size))
    os.close(fd)
    return path, sha256_file(path)


def location(m, aid, storage_name):
    for a in status(m)['copies']['assets']:
        if a['asset'] == aid:
            return next(l for l in a['locations'] if l.get('storage') == storage_name)
    return None


def swap_copy(attacker, arena, how, secret, size):
    """The attacker replaces the finished copy Movies/movie.bin: by a link
    to the root-only file, the folder Movies by a link to the vault (which
    holds a root-only movie.bin), or the copy by a file of its own."""
    store = arena['store']
    movies = os.path.join(store, 'Movies')
    copy = os.path.join(movies, 'movie.bin')
    if how == 'file':
        as_attacker(attacker, 'mv', copy, os.path.join(movies, 'moved.bin'))
        as_attacker(attacker, 'ln', '-s', secret, copy)
    elif how == 'folder':
        as_attacker(attacker, 'mv', movies, os.path.join(store, 'Moved'))
        as_attacker(attacker, 'ln', '-s', arena['vault'], movies)
    else:
        mine = os.path.join(arena['base'], 'foreign.src')
        with open(mine, 'wb') as f:
            f.write(os.urandom(size))
        os.chmod(mine, 0o644)
        as_attacker(attacker, 'mv', copy, os.path.join(movies, 'moved.bin'))
        as_attacker(attacker, 'cp', mine, copy)


@pytest.mark.parametrize('how', ['file', 'folder', 'foreign'])
def test_a_copy_swapped_for_a_link_or_a_foreign_file_is_never_served(
        seamfs, data, make_origin, arena, attacker, how):
    """A verified copy on this host's disk (new sessions go there first);
    the attacker, who owns the storage's folder, swaps the copy (or the
    folder above it) for a link to a root-only file of the asset's size, or
    the copy for a file of its own: root opens the copy beneath the
    storage without following links and checks it is the file it made, so
    the reader gets the asset's bytes (from the origin, no error), never the
    other file's; the copy stops serving, logged once and counted."""
    o = make_origin(data.dir)
    df = data['mid.bin']
    as_attacker(attacker, 'mkdir', os.path.join(arena['store'], 'Movies'))
    secret, secret_sha = root_only(arena, 'movie.bin', df.size)
    cat = {'storages': [storage('disk', arena['store'], host=socket.gethostname())],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat, options=['session_ttl=0'])
    wait_copies(m, 'movie', 1)
    swap_copy(attacker, arena, how, secret, df.size)
    for _ in range(3):  # a new session each time: the first finds the copy replaced
        assert sha256_file(m.path('Movies/movie.bin')) == df.sha256
    assert sha256_file(secret) == secret_sha
    assert copies_of(status(m), 'movie') == []
    reason = 'foreign file in the way' if how == 'foreign' else 'link in the way'
    # the copies thread drops it (within a second); no session went there meanwhile
    wait_until(lambda: location(m, 'movie', 'disk')['dropped'] == reason, 15,
               f'the copy dropped for "{reason}"')
    assert status(m)['copies']['in_way_read_total'] == 1
    assert metrics(m)['seamfs_copies_in_way_total'] >= 1
    said = 'is not the file seamfs made' if how == 'foreign' else 'is reached through a link'
    assert m.log().count(said) == 1, m.log()[-3000:]
    # the copy job comes back to the place and leaves what is there alone
    copy_or_reason(m, 'movie', reason)
    assert copies_of(status(m), 'movie') == []
    assert sha256_file(secret) == secret_sha
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256


def test_a_copy_folder_swapped_for_a_link_while_unmounted_is_not_served(
        seamfs, data, make_origin, arena, attacker):
    """The folder above a copy swapped for a link to the vault while
    seamfs was not mounted: the manifest's copy is looked for beneath the
    storage at the remount, not through the link, so it does not serve."""
    o = make_origin(data.dir)
    df = data['mid.bin']
    as_attacker(attacker, 'mkdir', os.path.join(arena['store'], 'Movies'))
    secret, secret_sha = root_only(arena, 'movie.bin', df.size)
    cat = {'storages': [storage('disk', arena['store'], host=socket.gethostname())],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    m = seamfs.mount(cat)
    wait_copies(m, 'movie', 1)
    assert m.unmount() == 0
    swap_copy(attacker, arena, 'folder', secret, df.size)
    m = seamfs.mount(cat, options=['session_ttl=0'])
    copy_or_reason(m, 'movie', 'link in the way')
    assert copies_of(status(m), 'movie') == []
    assert sha256_file(m.path('Movies/movie.bin')) == df.sha256
    assert sha256_file(secret) == secret_sha


def tc_row(m, aid='clip-180'):
    return next(t for t in status(m)['transcodes'] if t['asset'] == aid)


def work_links_metric(m):
    with open(m.path('.seamfs/metrics')) as f:
        for line in f:
            if line.startswith('seamfs_work_dir_links_total '):
                return float(line.split()[1])
    return None


def swap_segment(attacker, arena, job, k, how, size):
    """The attacker moves committed segment k aside and puts at its name a
    link to a root-only file of the segment's size, or a file of its own
    of that size with the mtime the playlist lists (so that only the
    owner tells it from the segment). The root-only file and its SHA-256."""
    secret, secret_sha = root_only(arena, 'segment', size)
    seg = job / f'seg-{k:06d}.ts'
    listed = next(ln.split() for ln in (job / 'playlist').read_text().splitlines()
                  if ln and ln[0] != '#' and int(ln.split()[0]) == k)
    as_attacker(attacker, 'mv', str(seg), str(job / 'moved.ts'))
    if how == 'link':
        as_attacker(attacker, 'ln', '-s', secret, str(seg))
    else:
        ns = int(listed[2])
        as_attacker(attacker, 'sh', '-c', f'head -c {size} /dev/urandom > {seg} && '
                    f'touch -m -d @{ns // 10**9}.{ns % 10**9:09d} {seg}')
    return secret, secret_sha


@pytest.mark.parametrize('kind,how', [('transcode', 'link'), ('transcode', 'foreign'),
                                      ('remux', 'link')])
def test_a_committed_segment_swapped_is_made_again(seamfs, data, nginx, arena, attacker, kind,
                                                   how):
    """A finished transcode, read whole once (every byte served); the
    attacker swaps a middle segment for a link to a root-only file, or for
    a file of its own: root never reads either for a viewer. The daemon
    takes the segment for one that is not there any more (logged, the link
    counted in the status and the metric), a writer makes it again from
    the segments still trusted, renamed over what is in the way (the
    root-only file unchanged), and the next read gets the whole file with
    no error, equal to the committed segments. A remux, whose restarted
    segments are byte-identical to a full run's, gets back the very bytes
    it served (docs/transcode.md: a byte once served never changes); a
    transcode's is a new encoding of the same media time."""
    if kind == 'remux':
        work = Path(arena['base']) / 'work'
        m = seamfs.mount(catalog(
            {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]},
            {'id': 'clip-ts', 'path': 'clip.ts', 'remux': {'of': 'clip'}}),
            read_timeout=20, options=[f'work_dir={work}'])
        job, f = work / 'clip-ts', m.path('clip.ts')
    else:
        m, job = mount_tc(seamfs, nginx, Path(arena['base']))
        f = m.path('Transcoded/clip 180p.ts')
    plan = plan_of(job)
    os.chmod(job, 0o777)
    first, n = bounded(lambda: read_sequential(f), 90, 'the first read')
    assert n == plan['size'] and playlist_clean(job)[1]
    assert first == committed_concat_sha(job, plan['segments'])
    k = plan['segments'] // 2
    served = (job / f'seg-{k:06d}.ts').read_bytes()
    secret, secret_sha = swap_segment(attacker, arena, job, k, how, len(served))
    digest, n = bounded(lambda: read_sequential(f), 90, 'the read after the swap')
    assert n == plan['size']
    seg = job / f'seg-{k:06d}.ts'
    assert not os.path.islink(seg) and os.stat(seg).st_uid == 0
    assert digest == committed_concat_sha(job, plan['segments'])
    assert sha256_file(secret) == secret_sha
    log = m.log()
    assert 'making the segment again' in log, log[-3000:]
    if how == 'link':
        assert 'a link seamfs did not make is in the way' in log
        assert tc_row(m, job.name)['work_dir_links'] >= 1
        assert work_links_metric(m) >= 1
    else:
        assert 'not the file seamfs made' in log
    if kind == 'remux':
        assert digest == first and seg.read_bytes() == served
    assert sha256_file(f) == digest


def test_recovery_leaves_a_link_at_a_seamfs_name_alone_and_counts_it(seamfs, data, nginx,
                                                                     arena, attacker):
    """A link planted at a name seamfs makes in the job directory (a
    segment's old .tmp name), then the writer killed: recovery, which
    removes seamfs's leftovers, leaves the link alone, logs and counts it
    (status, metric); the transcode still reads whole."""
    # one writer to kill (no probe of the tail beside it)
    m, job = mount_tc(seamfs, nginx, Path(arena['base']),
                      options=['writer_max_speed=2', 'tail_ahead=0'])
    plan = plan_of(job)
    os.chmod(job, 0o777)
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    wait_until(lambda: (job / 'playlist').exists(), 60, 'the first commit')
    link = job / 'seg-000008.ts.tmp'
    as_attacker(attacker, 'ln', '-s', arena['secret'], str(link))
    pids = wait_until(lambda: writer_pids(m.worker_pid()), 10, 'the writer process')
    os.kill(pids[0], signal.SIGKILL)
    t.join(120)
    assert_read_whole(t, box, job, plan, 'the reader is still blocked after 120 s')
    assert os.path.islink(link) and os.readlink(link) == arena['secret']
    assert sha256_file(arena['secret']) == arena['secret_sha']
    assert tc_row(m)['work_dir_links'] >= 1
    assert work_links_metric(m) >= 1
    assert m.log().count('is a link seamfs did not make') >= 1


def test_a_playlist_link_is_never_followed(seamfs, data, nginx, arena, attacker):
    """The job's playlist swapped for a link to a root-only file while a
    paced writer runs: neither the daemon nor the writer reads through it
    (the list is opened beneath work_dir without following links). The
    link is reported in the way (log, status, metric), the segments the
    daemon trusts stand in for the list (the committed work is kept, not
    started afresh), recovery saves the list over the link, and the reader
    gets the whole file."""
    m, job = mount_tc(seamfs, nginx, Path(arena['base']), options=['writer_max_speed=2'])
    plan = plan_of(job)
    os.chmod(job, 0o777)
    t, box = start_reader(m.path('Transcoded/clip 180p.ts'))
    wait_until(lambda: len(playlist_entries(job)[0]) >= 3, 60, 'three commits')
    pl = job / 'playlist'
    as_attacker(attacker, 'mv', str(pl), str(job / 'moved-playlist'))
    as_attacker(attacker, 'ln', '-s', arena['secret'], str(pl))
    t.join(120)
    assert_read_whole(t, box, job, plan, 'the reader is still blocked after 120 s')
    assert sha256_file(arena['secret']) == arena['secret_sha']
    assert not os.path.islink(pl)
    log = m.log()
    assert 'playlist: a link seamfs did not make is in the way: not read' in log, log[-3000:]
    assert 'starting afresh' not in log, log[-3000:]
    assert tc_row(m)['work_dir_links'] >= 1
    assert work_links_metric(m) >= 1


def test_a_link_swapped_for_a_probes_segment_is_reported(seamfs, data, clip60, nginx, arena,
                                                         attacker, tmp_path):
    """A far read across segments 20..21 of a transcode gets a probe (a
    short writer run beside the main one, paced here by a wrapper so that
    it takes seconds per segment). Once the probe has put segment 20 at its
    NAME.probe.tmp, and before it lists it, the attacker swaps that for a
    link to a root-only file: the probe does not list it, says so on its
    stdout (`link PATH`), and the daemon counts it (status, metric); the
    segment is made again (a new probe renames its file over the link) and
    the read gets the committed bytes, the root-only file unchanged."""
    real = os.path.join(os.path.dirname(seamfs.binary), 'seamfs-writer')
    wrap = Path(arena['base']) / 'writer-wrap'
    wrap.write_text('#!/bin/sh\ncase " $* " in *" --probe-until "*) '
                    f'exec {real} "$@" --max-speed 0.5 ;; esac\nexec {real} "$@"\n')
    wrap.chmod(0o755)
    work = Path(arena['base']) / 'work'
    m = seamfs.mount(seek_catalog(nginx, 'transcode'), read_timeout=90,
                     options=[f'work_dir={work}', f'writer={wrap}', 'writer_max_speed=1',
                              'tail_ahead=0'])   # the far read's probe, alone
    job = work / 'clip60-ts'
    plan = plan_of(job)
    bounds = seg_bounds(plan)
    os.chmod(job, 0o777)
    probe_tmp = job / 'seg-000020.ts.probe.tmp'
    fd = os.open(m.path('clip60.ts'), os.O_RDONLY)
    box = {}

    def far_read():
        try:
            box['got'] = os.pread(fd, 4096, bounds[21] - 2048)
        except OSError as e:
            box['error'] = e

    stopped = None
    t = threading.Thread(target=far_read, daemon=True)
    try:
        assert len(os.pread(fd, 188, 0)) == 188  # the main writer, paced at 1x
        t.start()
        pid = int(wait_until(lambda: re.findall(r'probe pid (\d+) for asset clip60-ts '
                                                r'started: segments 20\.\.21', m.log()),
                             60, 'the probe of 20..21')[0])
        wait_until(lambda: probe_tmp.exists(), 60, 'segment 20 at its .probe.tmp')
        os.kill(pid, signal.SIGSTOP)  # before it lists it (21 takes seconds more)
        stopped = pid
        assert not (job / 'seg-000021.ts.probe.tmp').exists(), 'the probe was too quick'
        as_attacker(attacker, 'mv', str(probe_tmp), str(job / 'moved.tmp'))
        as_attacker(attacker, 'ln', '-s', arena['secret'], str(probe_tmp))
        os.kill(pid, signal.SIGCONT)
        stopped = None
        t.join(120)
        assert not t.is_alive(), 'the far read is still blocked'
    finally:
        if stopped:
            os.kill(stopped, signal.SIGCONT)
        t.join(30)
        os.close(fd)
    assert 'error' not in box, box
    want = b''.join((job / f'seg-{k:06d}.ts').read_bytes() for k in (20, 21))
    off = bounds[21] - 2048 - bounds[20]
    assert box['got'] == want[off:off + 4096]
    assert sha256_file(arena['secret']) == arena['secret_sha']
    log = m.log()
    assert f'{probe_tmp} is not the file seamfs made (a link?): left alone' in log, log[-3000:]
    assert tc_row(m, 'clip60-ts')['work_dir_links'] >= 1
    assert work_links_metric(m) >= 1
    assert not os.path.islink(job / 'seg-000020.ts')


def swap_cluster_segment(attacker, arena, job, path, size):
    """The attacker moves a committed cluster segment (its name carries
    its generation) aside and puts at its name a link to a root-only file
    of its size. The root-only file and its SHA-256."""
    secret, secret_sha = root_only(arena, 'segment', size)
    os.chmod(job, 0o777)
    as_attacker(attacker, 'mv', str(path), str(job / 'moved.ts'))
    as_attacker(attacker, 'ln', '-s', secret, str(path))
    return secret, secret_sha


def store_sha(redis, job):
    """SHA-256 of the segments the store lists, in index order, and the
    entries."""
    entries, _ = store_playlist(redis, 'clip-ts')
    h = hashlib.sha256()
    for k, _, g in sorted(entries):
        h.update(seg_file(job, k, g).read_bytes())
    return h.hexdigest(), entries


def test_a_swapped_segment_in_cluster_mode_is_made_under_a_new_generation(
        seamfs, data, nginx, arena, attacker, redis):
    """Cluster mode, a finished remux written by host alpha: the attacker
    swaps a middle segment's file for a link to a root-only file. The
    read on beta (which never read the asset) recovers the list under its
    own lease; alpha, which served the old file, then finds the link and
    takes the segment for one that is not there: it is made again under a
    new generation, never at the swapped name, and both reads get
    the very bytes served before (a remux's), with no error. The link is
    left alone and the root-only file is unchanged. On 598ca28 the read
    failed with EIO ("failing the read")."""
    work = Path(arena['base']) / 'work'
    cat = tc_cat(nginx)
    a = mount_host(seamfs, cat, redis, 'alpha', work)
    b = mount_host(seamfs, cat, redis, 'beta', work)
    job = work / 'clip-ts'
    plan = plan_of(job)
    first, n = bounded(lambda: read_sequential(a.path('clip.ts')), 90, 'the first read')
    assert n == plan['size']
    wait_until(lambda: store_playlist(redis, 'clip-ts')[1], 30, 'the list closed')
    listed, entries = store_sha(redis, job)
    assert listed == first
    k, size, gen = sorted(entries)[len(entries) // 2]
    swapped = seg_file(job, k, gen)
    secret, secret_sha = swap_cluster_segment(attacker, arena, job, swapped, size)
    for m in (b, a):
        digest, n = bounded(lambda: read_sequential(m.path('clip.ts')), 90,
                            f'the read on {m.mnt} after the swap')
        assert (digest, n) == (first, plan['size'])
    # beta's first read recovered the list under its lease (the link is
    # no regular file); alpha had trusted the old file and read it
    assert 'making the segment again under a new generation' in a.log(), a.log()[-3000:]
    now, entries = store_sha(redis, job)
    assert now == first
    regen = dict((kk, g) for kk, _, g in entries)[k]
    assert regen > gen and not seg_file(job, k, regen).is_symlink()
    assert os.path.islink(swapped) and sha256_file(secret) == secret_sha
    assert sha256_file(b.path('clip.ts')) == first


def test_a_swapped_segment_under_a_live_writer_is_made_again_by_its_host(
        seamfs, data, nginx, arena, attacker, redis):
    """Cluster mode, alpha's paced writer still runs: the attacker swaps
    its first committed segment for a link. beta reads from the start,
    finds the link, cannot take a live lease, and asks alpha (a far read);
    alpha sees the listed file is not the one made and writes the segment
    again under a new generation. beta's read gets the bytes a remux
    gives, whole, with no error; so does alpha's own reader. On 598ca28
    beta's read failed with EIO."""
    work = Path(arena['base']) / 'work'
    cat = tc_cat(nginx)
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=['writer_max_speed=4'])
    b = mount_host(seamfs, cat, redis, 'beta', work)
    job = work / 'clip-ts'
    plan = plan_of(job)
    t, box = start_reader(a.path('clip.ts'))
    try:
        wait_until(lambda: len(store_playlist(redis, 'clip-ts')[0]) >= 2, 60,
                   'two segments committed')
        k, size, gen = sorted(store_playlist(redis, 'clip-ts')[0])[0]
        swapped = seg_file(job, k, gen)
        secret, secret_sha = swap_cluster_segment(attacker, arena, job, swapped, size)
        digest, n = bounded(lambda: read_sequential(b.path('clip.ts')), 120,
                            'the read on beta after the swap')
    finally:
        t.join(120)
    assert not t.is_alive() and 'error' not in box, repr(box.get('error'))
    listed, entries = store_sha(redis, job)
    assert n == plan['size'] and digest == listed and box['result'] == (listed, n)
    assert os.path.islink(swapped) and sha256_file(secret) == secret_sha
    assert dict((kk, g) for kk, _, g in entries)[k] > gen
    # alpha made it again: asked by beta, or found by its own reader first
    assert ('whose file is not the one made' in a.log() or
            'making the segment again under a new generation' in a.log()), a.log()[-3000:]
