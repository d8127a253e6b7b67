"""Library scans: ffprobe of an MP4 whose index (moov) is at its end, as
Jellyfin's and Kodi's scanners run it, costs the origin the file's cached
head and tail and little more, and the status counts the scan.  The origin
is seam-origin, whose log has the bytes each request sent."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import KIB, MIB, bounded, make_clip, sha256_file, wait_until

HEAD = 2 * MIB      # head_size's default
TAIL = 1 * MIB      # tail_size's default
SCAN_SLACK = 512 * KIB


@pytest.fixture
def mp4(tmp_path):
    """An 8 s 720p H.264 + AAC MP4 with the index at its end (the mp4
    muxer's default: no faststart), several MiB so that head and tail are
    a small part of it."""
    d = tmp_path / 'www'
    d.mkdir()
    p = d / 'clip.mp4'
    cmd = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-y',
           '-f', 'lavfi', '-i', 'testsrc2=size=1280x720:rate=25:duration=8',
           '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=8',
           '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '8M', '-pix_fmt', 'yuv420p',
           '-c:a', 'aac', '-b:a', '96k', '-shortest', str(p)]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    if r.returncode != 0:
        pytest.fail(f'ffmpeg failed: {r.stderr.decode(errors="replace")}')
    body = p.read_bytes()
    assert len(body) > HEAD + TAIL + 2 * MIB, len(body)
    assert body.rfind(b'moov') > len(body) - TAIL, 'the index is not at the end'
    return p


def sent(o, path):
    return sum(r['bytes_sent'] for r in o.log()['requests'] if r['path'] == path)


def scans(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)['reads']['scans_from_cache']


def ffprobe_ok(path):
    r = subprocess.run(['ffprobe', '-v', 'error', '-show_entries',
                        'format=duration:stream=codec_name', '-of', 'json',
                        path], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    info = json.loads(r.stdout)
    assert sorted(s['codec_name'] for s in info['streams']) == ['aac', 'h264']
    assert abs(float(info['format']['duration']) - 8.0) < 0.5


def reads(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)['reads']


def test_ffprobe_scan_costs_head_and_tail(seamfs, make_origin, mp4, tmp_path):
    o = make_origin(mp4.parent)
    size = mp4.stat().st_size
    cat = {'assets': [{'id': 'clip', 'path': 'clip.mp4', 'size': size, 'mtime': 1700000000,
                       'sources': [{'url': o.url('clip.mp4')}]}]}
    state = tmp_path / 'state'
    m = seamfs.mount(cat, state_dir=state)
    ffprobe_ok(m.path('clip.mp4'))
    # the scan's cost at the origin: head, tail and little more
    scanned = sent(o, '/clip.mp4')
    assert scanned <= HEAD + TAIL + SCAN_SLACK, f'{scanned} bytes for one scan of {size}'
    # counted once ffprobe's open is released (FUSE releases after close):
    # a scan, whose reads filled the cache, so not one from the cache
    wait_until(lambda: reads(m)['scans'] >= 1, 10, 'the scan counted')
    assert scans(m) == 0
    m.unmount()
    # mounted again on the same state_dir: the head and tail come from its
    # cache_dir, and the scan asks the origin nothing
    m = seamfs.mount(cat, state_dir=state)
    ffprobe_ok(m.path('clip.mp4'))
    wait_until(lambda: reads(m)['scans'] >= 1, 10, 'the second scan counted')
    assert sent(o, '/clip.mp4') == scanned
    assert scans(m) == 1
    # and the bytes through the mount are the file's
    assert bounded(lambda: sha256_file(m.path('clip.mp4')), 60, 'whole read') == \
        sha256_file(mp4)


def boxes(body):
    """The top-level boxes of an MP4: [(type, offset, size)]."""
    out, off = [], 0
    while off + 8 <= len(body):
        n, kind = int.from_bytes(body[off:off + 4], 'big'), body[off + 4:off + 8].decode()
        if n == 1:
            n = int.from_bytes(body[off + 8:off + 16], 'big')
        assert n >= 8, f'box {kind} at {off}: size {n}'
        out.append((kind, off, n))
        off += n
    return out


def test_an_index_before_the_tail_costs_one_request(seamfs, make_origin, tmp_path):
    """An MP4 whose moov is larger than the cached tail (a two-hour film's
    is about 5 MB; here a 300 s clip's 220 KB against a 64 KiB tail): after
    the head, ffprobe jumps to the moov's start and reads it whole. That
    read costs one request, the asset's index slot up to the tail, which
    the disk tier keeps: a rescan after a remount costs none, and an index
    part flipped on disk is refetched, never served. On 5a7f3c5 the
    kernel's read-ahead ramp made each read a request of its own (three
    for this clip, six for the film), again after every remount."""
    www = tmp_path / 'www'
    www.mkdir()
    clip = www / 'long.mp4'
    make_clip(clip, 300, '160x90', tmp_path / 'ffmpeg.log', bframes=True)
    body = clip.read_bytes()
    size, tail = len(body), 64 * KIB
    kind, moov, moov_len = boxes(body)[-1]
    assert kind == 'moov' and moov + moov_len == size
    tail_start = size - tail
    assert HEAD < moov < tail_start - 128 * KIB, (moov, tail_start)
    o = make_origin(www)
    cat = {'assets': [{'id': 'long', 'path': 'long.mp4', 'size': size, 'mtime': 1700000000,
                       'sources': [{'url': o.url('long.mp4')}]}]}
    state = tmp_path / 'state'

    def scan():
        """ffprobe through a fresh mount: the origin's requests for it."""
        m = seamfs.mount(cat, options=['tail_size=64K'], state_dir=state)
        since = len(o.log()['requests'])
        r = subprocess.run(['ffprobe', '-v', 'error', '-show_entries', 'format=duration',
                            '-of', 'json', m.path('long.mp4')], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors='replace')
        assert abs(float(json.loads(r.stdout)['format']['duration']) - 300) < 1
        got = [q['range'] for q in o.log()['requests'][since:]
               if q['path'] == '/long.mp4' and q['range'] != 'bytes=0-0']
        return m, got

    m, got = scan()
    # head and tail in one request, the moov up to the tail in another
    index = f'bytes={moov // 4096 * 4096}-{tail_start - 1}'
    assert len(got) == 2 and got[1] == index, (got, moov)
    # a scan, with both its requests, not a playback of the middle
    wait_until(lambda: reads(m)['scans'] == 1, 10, 'the scan counted')
    assert reads(m)['scan_requests'] == 2
    # kept by the tier's thread (an unmount drops what it has not written)
    wait_until(lambda: sorted(p.suffix for p in (state / 'cache').glob('*.????')) ==
               ['.head', '.indx', '.tail'], 20, 'head, tail and index kept on disk')
    m.unmount()
    # after a remount the disk tier has all three: no request
    m, got = scan()
    assert got == [], got
    m.unmount()
    # an index part flipped on disk is dropped and fetched again; the
    # head and tail came from disk, so the source's live bytes are proved
    # first (the reference's first sample, 4 KiB)
    parts = list((state / 'cache').glob('*.indx'))
    assert len(parts) == 1, sorted(p.name for p in (state / 'cache').iterdir())
    raw = bytearray(parts[0].read_bytes())
    raw[-1000] ^= 0x40
    parts[0].write_bytes(bytes(raw))
    m, got = scan()
    proof = [g for g in got if g != index]
    assert index in got and len(proof) == 1, got
    a, _, b = proof[0][len('bytes='):].partition('-')
    assert int(b) - int(a) + 1 == 4096, got
    assert bounded(lambda: sha256_file(m.path('long.mp4')), 60, 'whole read') == \
        hashlib.sha256(body).hexdigest()


def test_a_kept_index_serves_a_later_jump(seamfs, make_origin, tmp_path):
    """The index part kept on disk runs from the first jump's page to the
    tail: after a remount, a reader whose jump lands further on (another
    player, another read size) is served from it with no request. On
    8dfce1b the part was "another range": removed, counted as a reject and
    fetched again."""
    www = tmp_path / 'www'
    www.mkdir()
    body = os.urandom(12 * MIB + 333)
    (www / 'film.bin').write_bytes(body)
    size, tail = len(body), 64 * KIB
    tail_start = size - tail
    jump = tail_start - 3 * MIB + 1000          # the first reader's index
    o = make_origin(www)
    cat = {'assets': [{'id': 'film', 'path': 'film.bin', 'size': size, 'mtime': 1700000000,
                       'sources': [{'url': o.url('film.bin')}]}]}
    state = tmp_path / 'state'

    def reader(m, spans):
        """Reads spans with O_DIRECT (each reaches the daemon), checking
        their bytes: the origin's requests for them."""
        since = len(o.log()['requests'])
        fd = os.open(m.path('film.bin'), os.O_RDONLY | os.O_DIRECT)
        try:
            for off, n in spans:
                got = bounded(lambda: os.pread(fd, n, off), 30, 'a read')
                assert got == body[off:off + n], (off, n)
        finally:
            os.close(fd)
        return [q['range'] for q in o.log()['requests'][since:]
                if q['path'] == '/film.bin' and q['range'] != 'bytes=0-0']

    m = seamfs.mount(cat, options=['tail_size=64K', 'liveness_interval=0'], state_dir=state)
    got = reader(m, [(0, 32 * KIB), (jump, 64 * KIB), (tail_start - 64 * KIB, 64 * KIB)])
    assert f'bytes={jump // 4096 * 4096}-{tail_start - 1}' in got, got
    wait_until(lambda: len(list((state / 'cache').glob('*.indx'))) == 1, 20,
               'the index kept on disk')
    m.unmount()
    m = seamfs.mount(cat, options=['tail_size=64K', 'liveness_interval=0'], state_dir=state)
    later = jump + MIB + 5000
    got = reader(m, [(0, 32 * KIB), (later, 64 * KIB), (tail_start - 4 * KIB, 4 * KIB)])
    assert got == [], got
    assert 'is not served' not in m.log(), m.log()
    d = status(m)['disk_cache']
    assert (d['hits'], d['rejects']) == (2, 0), d


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def my_session(m):
    """This process's session in the status (the one there must be)."""
    (s,) = [s for s in status(m)['sessions'] if s['client'] == os.getpid()]
    return s


def test_status_tells_scans_from_playbacks(seamfs, make_origin, mp4):
    """A scanner's session (ffprobe: head and tail) is a scan; a reader
    that goes through the middle is a playback, and its offset follows
    its reads, those the head and tail cache serve included."""
    import hashlib
    import os
    o = make_origin(mp4.parent)
    size = mp4.stat().st_size
    body = mp4.read_bytes()
    m = seamfs.mount({'assets': [{
        'id': 'clip', 'path': 'clip.mp4', 'size': size, 'mtime': 1700000000,
        'sources': [{'url': o.url('clip.mp4')}]}]}, options=['session_ttl=600'])
    r = subprocess.run(['ffprobe', '-v', 'error', '-show_entries', 'format=duration',
                        '-of', 'json', m.path('clip.mp4')], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors='replace')
    wait_until(lambda: status(m)['sessions'], 10, "ffprobe's session listed")
    st = status(m)
    assert [s['kind'] for s in st['sessions']] == ['scan'], st['sessions']
    assert (st['scan_sessions'], st['playback_sessions']) == (1, 0)

    # this process: another client, so another session. The kernel keeps
    # the pages ffprobe read (keep_cache): reads of those never reach
    # seamfs, so they are dropped first (docs/status-and-metrics.md,
    # "Sessions: playbacks and scans")
    fd = os.open(m.path('clip.mp4'), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        hits = status(m)['reads']['head_tail_cache_hits']
        got = os.pread(fd, 64 * KIB, 0)            # the cached head
        assert hashlib.sha256(got).digest() == hashlib.sha256(body[:64 * KIB]).digest()
        assert status(m)['reads']['head_tail_cache_hits'] > hits
        assert my_session(m)['kind'] == 'scan' and my_session(m)['offset'] >= 64 * KIB
        start, n = HEAD + 256 * KIB, 2 * MIB         # the middle: a playback
        got = os.pread(fd, n, start)
        assert hashlib.sha256(got).digest() == hashlib.sha256(body[start:start + n]).digest()
        s = my_session(m)
        assert s['kind'] == 'playback' and start + n <= s['offset'] <= size, s
        got = os.pread(fd, 64 * KIB, size - 64 * KIB)   # the cached tail
        assert hashlib.sha256(got).digest() == hashlib.sha256(body[-64 * KIB:]).digest()
        assert my_session(m)['offset'] == size
        got = os.pread(fd, 64 * KIB, 512 * KIB)         # back into the head
        assert got == body[512 * KIB:576 * KIB]
        assert 576 * KIB <= my_session(m)['offset'] <= HEAD
        st = status(m)
        assert (st['scan_sessions'], st['playback_sessions']) == (1, 1), st['sessions']
    finally:
        os.close(fd)


def test_playback_offset_ignores_another_handles_probe(seamfs, make_origin, mp4):
    """One process, so one session, with two handles: a player's, reading
    through the middle, and another (a scanner or thumbnailer of the same
    process, as Kodi's) that reads the head and the tail. The session's
    offset stays where the player reads, and moves on with it; once the
    player's handle is closed, the other's reads move it. Both with
    O_DIRECT, so that every read reaches seamfs. On 598ca28 the other
    handle's head read set the offset to 64 KiB (issue 33: a Kodi playback
    whose offset did not move)."""
    import hashlib
    import os
    o = make_origin(mp4.parent)
    size = mp4.stat().st_size
    body = mp4.read_bytes()
    m = seamfs.mount({'assets': [{
        'id': 'clip', 'path': 'clip.mp4', 'size': size, 'mtime': 1700000000,
        'sources': [{'url': o.url('clip.mp4')}]}]}, options=['session_ttl=600'])

    def check(fd, off, n):
        got = os.pread(fd, n, off)
        assert hashlib.sha256(got).digest() == hashlib.sha256(body[off:off + n]).digest()
    player = os.open(m.path('clip.mp4'), os.O_RDONLY | os.O_DIRECT)
    other = os.open(m.path('clip.mp4'), os.O_RDONLY | os.O_DIRECT)
    try:
        start, n = HEAD + 256 * KIB, 1 * MIB
        for k in range(2):
            check(player, start + k * n, n)
        # the kernel may split a read into parts served in parallel: the
        # offset is the end of one of the last read's parts
        s = my_session(m)
        assert s['kind'] == 'playback' and start + n < s['offset'] <= start + 2 * n, s
        check(other, 0, 64 * KIB)
        check(other, size - 64 * KIB, 64 * KIB)
        assert start + n < my_session(m)['offset'] <= start + 2 * n, my_session(m)
        check(player, start + 2 * n, n)
        assert start + 2 * n < my_session(m)['offset'] <= start + 3 * n, my_session(m)
        os.close(player)
        player = -1
        # the kernel sends the release after close() returns: wait for it
        wait_until(lambda: my_session(m)['handles'] == 1, 10, "the player's handle released")
        check(other, 128 * KIB, 64 * KIB)
        assert 128 * KIB < my_session(m)['offset'] <= 192 * KIB, my_session(m)
    finally:
        if player >= 0:
            os.close(player)
        os.close(other)


# Another client's reads (its own process, so its own session), with
# O_DIRECT so that they reach seamfs and not the pages the first reader
# left in the kernel: "OFF LEN" pairs in argv, the SHA-256 of each and
# the provider its session reads from, as JSON.
OTHER_READER = r'''
import hashlib, json, os, sys
path, status = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
shas = []
for pair in sys.argv[3:]:
    off, n = map(int, pair.split(':'))
    shas.append(hashlib.sha256(os.pread(fd, n, off)).hexdigest())
with open(status) as f:
    st = json.load(f)
mine = [s['provider'] for s in st['sessions'] if s['client'] == os.getpid()]
os.close(fd)
print(json.dumps({'shas': shas, 'providers': mine}), flush=True)
'''


def overlapping(o, path, spans, since):
    """The requests for path after the first `since` of o's log whose
    range overlaps one of spans [(off, len)]."""
    out = []
    for r in o.log()['requests'][since:]:
        if r['path'] != path:
            continue
        rng = (r['range'] or 'bytes=0-').split('=', 1)[1]
        a, _, b = rng.partition('-')
        lo, hi = int(a), int(b) + 1 if b else 1 << 62
        if any(lo < off + n and off < hi for off, n in spans):
            out.append(r)
    return out


def test_head_and_tail_serve_every_identical_source(seamfs, data, make_origin):
    """The cached head and tail belong to the asset: filled through one
    source, they serve a session of another process that reads the other
    (verified, identical) source, with no request to either origin."""
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    name, size = 'mid.bin', data['mid.bin'].size
    body = data.bytes(name)
    m = seamfs.mount({'providers': [{'name': 'p1'}, {'name': 'p2'}],
                      'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': size,
                                  'mtime': 1700000000,
                                  'sources': [{'url': o1.url(name), 'provider': 'p1'},
                                              {'url': o2.url(name), 'provider': 'p2'}]}]},
                     options=['standby_delay=0', 'liveness_interval=0'])
    fd = os.open(m.path('movie.bin'), os.O_RDONLY | os.O_DIRECT)
    try:
        # this handle's session reads p1 (the first by name): the head's
        # first part and the whole tail come from o1
        assert os.pread(fd, 64 * KIB, 0) == body[:64 * KIB]
        assert os.pread(fd, 64 * KIB, size - 64 * KIB) == body[-64 * KIB:]
        src = {s['provider']: s for s in status(m)['assets'][0]['sources']}

        def verified():
            a = status(m)['assets'][0]
            return a['reference'] and all(s['verification'] == 'verified'
                                          for s in a['sources'])
        wait_until(verified, 30, 'the reference taken and both sources verified')
        seen = (len(o1.log()['requests']), len(o2.log()['requests']))
        hits = status(m)['reads']['head_tail_cache_hits']
        # inside the head's first part and the tail: a dd of the second
        # 16 KiB, a player's larger read, a probe of the last 6 KB
        spans = [(16 * KIB, 16 * KIB), (4 * KIB, 4 * KIB), (128 * KIB, 96 * KIB),
                 (size - 6000, 6000), (size - 512 * KIB, 256 * KIB)]
        r = subprocess.run([sys.executable, '-c', OTHER_READER, m.path('movie.bin'),
                            m.path('.seamfs/status.json')] +
                           [f'{off}:{n}' for off, n in spans],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors='replace')
        got = json.loads(r.stdout)
        # the other client's session reads the other source
        assert got['providers'] == ['p2'], (got, src)
        assert got['shas'] == [hashlib.sha256(body[off:off + n]).hexdigest()
                               for off, n in spans]
        for o, since in zip((o1, o2), seen):
            assert overlapping(o, '/' + name, spans, since) == [], o.log()['requests'][since:]
        assert status(m)['reads']['head_tail_cache_hits'] >= hits + len(spans)
    finally:
        os.close(fd)


def test_playback_offset_follows_reads_the_page_cache_answers(seamfs, make_origin, mp4):
    """A player over bytes read through the mount before: the kernel
    answers its reads from the page cache (keep_cache) and seamfs sees
    none of them, yet the session's offset is where the player's open file
    is (/proc/PID/fdinfo). On 06451bb it stayed where the reads had left it
    (issue 33: a playback's offset follows its reads, those the page
    cache serves included)."""
    o = make_origin(mp4.parent)
    size = mp4.stat().st_size
    body = mp4.read_bytes()
    m = seamfs.mount({'assets': [{
        'id': 'clip', 'path': 'clip.mp4', 'size': size, 'mtime': 1700000000,
        'sources': [{'url': o.url('clip.mp4')}]}]}, options=['session_ttl=600'])
    # another process reads it whole: every page is in the page cache
    r = subprocess.run(['sha256sum', m.path('clip.mp4')], capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[0].decode() == hashlib.sha256(body).hexdigest()

    fd = os.open(m.path('clip.mp4'), os.O_RDONLY)
    try:
        h = hashlib.sha256()
        for stop in (HEAD + 1 * MIB, HEAD + 3 * MIB):
            while os.lseek(fd, 0, os.SEEK_CUR) < stop:
                h.update(os.read(fd, 256 * KIB))
            pos = os.lseek(fd, 0, os.SEEK_CUR)
            assert h.digest() == hashlib.sha256(body[:pos]).digest()
            s = my_session(m)
            assert s['offset'] == pos and s.get('offset_from') == 'file_position', (pos, s)
        # the reads the kernel answered never reached seamfs
        assert my_session(m)['bytes_served'] < HEAD, my_session(m)
        # a position in the head is a look at it, not the playback's place
        os.lseek(fd, 64 * KIB, os.SEEK_SET)
        assert my_session(m)['offset_from'] == 'reads', my_session(m)
    finally:
        os.close(fd)
