"""Cluster mode: where transcode writers run (docs/cluster.md "Where a
transcode is written"). Two daemons on one real redis-server and one shared
work_dir; transcodes opened on one host run their writers on the host with
the lowest load and a free writer slot, and a writer that fails is
reassigned to another host from its last trusted segment.

Bytes: what a reader got is, byte for byte, the segment files the store's
playlist lists (each by its generation's name), and the other host serves
the same bytes. Every wait is bounded; the fixtures unmount and stop
everything, also on failure.
"""

import hashlib
import json
import os
import signal
import threading

from conftest import bounded, catalog, wait_until
from test_cluster import (mount_host, redis, resp, seg_file, status,  # noqa: F401
                          store_lease, store_playlist, tail_log)
from test_transcode import PROFILE, read_sequential, start_reader, writer_pids
from test_transcode_seek import CLIP, clip60  # noqa: F401 - the 60 s clip fixture

HOSTS_WAIT = 10.0
PLACED = ['placement=least-loaded']   # the default; test_cluster's mounts pin local


def listed_digest(redis, work, aid):
    """SHA-256 of the segments the store lists for aid, in order, each
    read from its generation's file; and whether every segment is listed."""
    plan = json.loads((work / aid / 'plan.json').read_text())
    entries, _ = store_playlist(redis, aid)
    h = hashlib.sha256()
    for k in range(plan['segments']):
        gens = [g for i, _, g in entries if i == k]
        if len(gens) != 1:
            return None, False
        h.update(seg_file(work / aid, k, gens[0]).read_bytes())
    return h.hexdigest(), True


def rows(m):
    return {t['asset']: t for t in status(m)['transcodes']}


def host_row(m, host_id):
    return {h['host_id']: h for h in status(m)['hosts']}.get(host_id, {})


def test_four_transcodes_spread_over_both_hosts(redis, seamfs, data, nginx, tmp_path):
    """Four transcodes opened and read on host alpha at once: their writers
    run on both hosts (each has max_writers=2, and a host at its max, its
    own placements counted at once, is not chosen), every reader gets the
    listed segments' bytes, and beta serves the same bytes."""
    work = tmp_path / 'work'
    ids = ['clip-a', 'clip-b', 'clip-c', 'clip-d']
    assets = [{'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]}]
    for n, aid in enumerate(ids):
        p = dict(PROFILE, of='clip', video_bitrate=200000 + 50000 * n)
        assets.append({'id': aid, 'path': f'{aid}.ts', 'transcode': p})
    cat = catalog(*assets)
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=PLACED + ['max_writers=2'])
    b = mount_host(seamfs, cat, redis, 'beta', work, options=PLACED + ['max_writers=2'])
    # both listed, both offering their writer slots
    for m in (a, b):
        wait_until(lambda m=m: all(host_row(m, h).get('max_writers') == 2
                                   for h in ('alpha', 'beta')), HOSTS_WAIT,
                   f'both hosts with their load in {m.mnt.name}')
    readers = [start_reader(a.path(f'{aid}.ts')) for aid in ids]
    for t, _ in readers:
        t.join(150)
    assert not any(t.is_alive() for t, _ in readers), 'a reader on alpha is still blocked'
    for aid, (_, box) in zip(ids, readers):
        assert 'error' not in box, f'{aid}: {box.get("error")!r}\n{tail_log(a)}'
    ra, rb = rows(a), rows(b)
    started_a = sum(ra[aid]['writer_starts'] for aid in ids)
    started_b = sum(rb[aid]['writer_starts'] for aid in ids)
    assert started_a >= 1 and started_b >= 1, (ra, rb)
    assert sum(ra[aid]['placed_away'] for aid in ids) >= 1, ra
    assert sum(rb[aid]['placed_here'] for aid in ids) >= 1, rb
    assert 'placed here by alpha' in b.log()
    for aid, (_, box) in zip(ids, readers):
        digest, n = box['result']
        size = os.stat(a.path(f'{aid}.ts')).st_size
        assert n == size
        wait_until(lambda aid=aid: listed_digest(redis, work, aid)[1], 30,
                   f'every segment of {aid} listed')
        assert listed_digest(redis, work, aid)[0] == digest, aid
        # beta serves the same bytes, from the shared work_dir
        assert bounded(lambda aid=aid: read_sequential(b.path(f'{aid}.ts')), 60,
                       f'reading {aid} on beta') == (digest, size)


def test_killed_writer_reassigned(redis, seamfs, data, nginx, clip60, tmp_path):  # noqa: F811
    """A transcode read on alpha whose writer runs on beta (alpha's one
    writer slot was taken when it started): kill -9 of beta's writer. Beta
    places its restart on alpha (free again by then), which writes the rest
    from the last trusted segment; alpha's reader sees no error and gets the
    listed segments' bytes, which beta serves too."""
    work = tmp_path / 'work'
    cat = catalog(
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]},
        {'id': 'clip60', 'path': CLIP, 'sources': [{'url': nginx.url(CLIP)}]},
        {'id': 'clip-ts', 'path': 'clip.ts', 'remux': {'of': 'clip'}},
        {'id': 'long', 'path': 'long.ts', 'transcode': dict(PROFILE, of='clip60')})
    opts = PLACED + ['max_writers=1', 'writer_max_speed=2']
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=opts, read_timeout=40)
    # alpha alone: its first transcode's writer is its own, and fills its slot
    ta, box_ts = start_reader(a.path('clip.ts'))
    wait_until(lambda: rows(a)['clip-ts']['writers'] == 1, 20, "alpha's clip-ts writer")
    b = mount_host(seamfs, cat, redis, 'beta', work, options=opts, read_timeout=40)
    wait_until(lambda: host_row(b, 'alpha').get('writers') == 1 and
               host_row(b, 'beta').get('max_writers') == 1, HOSTS_WAIT,
               "alpha's writer in the listing")
    # read on alpha, written on beta
    tl, box = start_reader(a.path('long.ts'))
    wait_until(lambda: rows(b)['long']['writers'] == 1, 30, "beta's writer of long.ts")
    assert rows(a)['long']['placed_away'] >= 1 and rows(b)['long']['placed_here'] >= 1
    assert store_lease(redis, 'long')['owner'].startswith('beta:')
    # alpha's slot frees once clip-ts is written
    ta.join(60)
    assert 'error' not in box_ts, repr(box_ts.get('error'))
    wait_until(lambda: host_row(b, 'alpha').get('writers') == 0, 20, 'alpha idle again')
    wait_until(lambda: len(store_playlist(redis, 'long')[0]) >= 3, 40,
               'three segments of long.ts committed by beta')
    entries, clean = store_playlist(redis, 'long')
    assert not clean, 'the writer finished before it could be killed'
    pid = rows(b)['long']['writer_pid']
    assert pid in writer_pids(b.worker_pid())
    os.kill(pid, signal.SIGKILL)
    tl.join(150)
    assert not tl.is_alive(), "alpha's reader is still blocked"
    assert 'error' not in box, f'{box.get("error")!r}\n{tail_log(a)}\n{tail_log(b)}'
    digest, n = box['result']
    size = os.stat(a.path('long.ts')).st_size
    assert n == size
    # beta let it go to alpha, which wrote the rest (by its main writer,
    # or by probes where the reader's reads had not settled)
    assert 'writer placed on host alpha' in b.log() and \
        'after its writer here failed' in b.log(), tail_log(b)
    assert rows(a)['long']['placed_here'] >= 1 or 'placed here by beta' in a.log()
    assert rows(b)['long']['writer_starts'] == 1, rows(b)['long']
    assert store_lease(redis, 'long')['owner'].startswith('alpha:')
    wait_until(lambda: listed_digest(redis, work, 'long')[1], 60, 'every segment listed')
    assert listed_digest(redis, work, 'long')[0] == digest
    assert bounded(lambda: read_sequential(b.path('long.ts')), 60,
                   'reading long.ts on beta') == (digest, size)
    # one writer per generation: the generations before the kill are
    # beta's; every segment listed after it is alpha's new generation
    entries, _ = store_playlist(redis, 'long')
    gens = [g for _, _, g in entries]
    assert gens == sorted(gens), entries
    assert len(set(gens)) >= 2, entries


def test_placement_not_taken_falls_back(redis, seamfs, data, nginx, tmp_path):
    """The least-loaded host never starts the writer placed on it (a host
    "aaa" whose heartbeat the test keeps fresh in the store, with nothing
    behind it): after the hold the reading host writes the transcode
    itself; its reader gets no error and the listed segments' bytes."""
    work = tmp_path / 'work'
    cat = catalog(
        {'id': 'clip', 'path': 'clip.mkv', 'sources': [{'url': nginx.url('clip.mkv')}]},
        {'id': 'clip-180', 'path': 'clip 180p.ts', 'transcode': dict(PROFILE, of='clip')})
    sock = tmp_path / 'a.sock'
    a = mount_host(seamfs, cat, redis, 'alpha', work, options=PLACED + [f'control_socket={sock}'])
    wait_until(lambda: host_row(a, 'alpha').get('max_writers') == 2, HOSTS_WAIT,
               "alpha's load in the listing")
    stop = threading.Event()
    ghost = ("local t = redis.call('TIME')\n"
             "redis.call('HSET', KEYS[1], 'seen', tonumber(t[1]) * 1000 + "
             "math.floor(tonumber(t[2]) / 1000), 'pid', '1', 'writers', '0', 'wmax', '4', "
             "'wcost', '0', 'cpu', '0')\n"
             "redis.call('SADD', KEYS[2], 'aaa')\nreturn 1")

    def beat():
        while not stop.is_set():
            resp(redis.port, 'EVAL', ghost, 2, 'seamfs:host:aaa', 'seamfs:hosts')
            stop.wait(0.1)
    resp(redis.port, 'EVAL', ghost, 2, 'seamfs:host:aaa', 'seamfs:hosts')
    t = threading.Thread(target=beat, daemon=True)
    t.start()
    try:
        wait_until(lambda: host_row(a, 'aaa'), HOSTS_WAIT, 'the ghost host listed')
        # seamfs ctl hosts: each host's writers (running / max) and load
        r = seamfs.run(['ctl', '--socket', sock, 'hosts'])
        assert r.returncode == 0, r.stderr
        head, *lines = [ln for ln in r.stdout.splitlines() if ln.startswith(('HOST', 'aaa'))]
        assert 'WRITERS' in head and 'LOAD' in head, r.stdout
        assert lines and lines[0].split()[5] == '0/4', r.stdout
        row = host_row(a, 'aaa')
        assert row['max_writers'] == 4 and row['load']['cpu'] == 0, row
        digest, n = bounded(lambda: read_sequential(a.path('clip 180p.ts')), 90,
                            'reading on alpha')
    finally:
        stop.set()
        t.join(5)
    assert n == os.stat(a.path('clip 180p.ts')).st_size
    row = rows(a)['clip-180']
    assert row['placed_away'] >= 1 and row['place_fallbacks'] >= 1, row
    assert row['writer_starts'] >= 1, row
    assert 'writer placed on host aaa' in a.log()
    assert 'host aaa did not start its writer within' in a.log()
    assert store_lease(redis, 'clip-180')['owner'].startswith('alpha:')
    wait_until(lambda: listed_digest(redis, work, 'clip-180')[1], 30, 'every segment listed')
    assert listed_digest(redis, work, 'clip-180')[0] == digest
