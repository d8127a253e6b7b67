"""In-place cutover through the mount: the active source fails mid-read (a
reset, a premature end, a wrong Content-Range, a 5xx, a stall, a 403, a
stopped origin) and a standby proven identical takes over at the same
offset, inside the same read: the reader sees no error, and the SHA-256 of
everything it read equals the file's.  A standby with a flipped byte in a
sampled range is rejected; when nothing can take over the read fails with
EIO within read_timeout and the status says fallback_exhausted."""

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import promparse
from conftest import MIB, KIB, bounded, wait_until

FAULT_AT = 3 * MIB + 4321       # inside mid.bin (8 MiB + 77), past the cached head


def flipped_copy(data, tmp_path, name='mid.bin', at=438272 + 10):
    """A copy of data[name] with one byte flipped inside sampled range 1 of
    its sample plan (20 samples of 4 KiB over 2049 chunks: chunk 107)."""
    d = tmp_path / 'flipped'
    d.mkdir(exist_ok=True)
    b = bytearray(open(data[name].path, 'rb').read())
    b[at] ^= 0xFF
    (d / name).write_bytes(bytes(b))
    return d


def cat_for(data, origins, name='mid.bin'):
    return {'providers': [{'name': f'p{i + 1}'} for i in range(len(origins))],
            'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data[name].size,
                        'mtime': 1700000000,
                        'sources': [{'url': o.url(name), 'provider': f'p{i + 1}'}
                                    for i, o in enumerate(origins)]}]}


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def metrics(m):
    with open(m.path('.seamfs/metrics')) as f:
        return promparse.parse(f.read())


def source_state(st, provider):
    (a,) = st['assets']
    return next(s for s in a['sources'] if s['provider'] == provider)


def start_reading(m, verified=('p2',), reference=True):
    """Opens the file, reads its first 64 KiB (served by p1, the first by
    name), and waits until the reference fingerprint is taken (unless not
    asked: sources that disagree give none) and the given standbys are
    verified (standby_delay=0)."""
    f = open(m.path('movie.bin'), 'rb')
    h = hashlib.sha256(f.read(64 * KIB))

    def ready():
        st = status(m)
        if not st['assets'] or (reference and not st['assets'][0]['reference']):
            return False
        return all(source_state(st, p)['verification'] == 'verified' for p in verified)
    wait_until(ready, 20, 'reference taken and standbys verified')
    return f, h


def read_rest(f, h, timeout=60):
    def run():
        while True:
            b = f.read(MIB)
            if not b:
                return h.hexdigest()
            h.update(b)
    return bounded(run, timeout, 'read across the failure')


OPTS = ['standby_delay=0', 'stall_timeout=1', 'liveness_interval=0']

TRIGGERS = {
    'reset': (dict(reset_at=FAULT_AT), 'reset_or_premature_end'),
    'premature_end': (dict(truncate_at=FAULT_AT), 'reset_or_premature_end'),
    'wrong_content_range': (dict(content_range='shift'), 'bad_response'),
    'http_5xx': (dict(status=503), 'http_5xx'),
    'stall': (dict(stall_at=FAULT_AT, stall_ms=60000), 'stall'),
}


@pytest.mark.parametrize('trigger', sorted(TRIGGERS))
def test_read_across_failure_cuts_over(seamfs, data, make_origin, trigger):
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2]), read_timeout=20, options=OPTS)
    f, h = start_reading(m)
    rule, reason = TRIGGERS[trigger]
    o1.rule('/mid.bin', **rule)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    st = status(m)
    assert st['cutovers']['total'] >= 1, st['cutovers']
    assert reason in st['cutovers']['by_reason'], st['cutovers']
    last = st['cutovers']['recent'][0]
    assert last['from'] == o1.url('mid.bin') and last['to'] == o2.url('mid.bin')
    assert last['offset'] >= 64 * KIB
    # the standby really served the rest
    assert any(r['path'] == '/mid.bin' and r['bytes_sent'] > MIB for r in o2.log()['requests'])
    assert metrics(m)['seamfs_cutovers_total'].value({'reason': reason}) >= 1


def test_stopped_origin_mid_read(seamfs, data, make_origin):
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2]), read_timeout=20, options=OPTS)
    f, h = start_reading(m)
    o1.down(drop=True)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    assert status(m)['cutovers']['total'] >= 1


def mixed_cat(data, first, second, name='mid.bin'):
    """An asset with two sources of either kind, p1 first by name: each is
    ('url', origin) or ('path', file)."""
    def src(kind, where, prov):
        return ({'url': where.url(name)} if kind == 'url' else {'path': str(where)}) | \
            {'provider': prov}
    return {'providers': [{'name': 'p1'}, {'name': 'p2'}],
            'assets': [{'id': 'movie', 'path': 'movie.bin', 'size': data[name].size,
                        'mtime': 1700000000,
                        'sources': [src(*first, 'p1'), src(*second, 'p2')]}]}


def mixed_mount(seamfs, data, make_origin, tmp_path, url_first):
    """mid.bin as one asset with two sources, an origin's URL and a local
    copy, the URL first (p1, so active) or the copy first."""
    copy = tmp_path / 'copy.bin'
    shutil.copyfile(data['mid.bin'].path, copy)
    o = make_origin(data.dir)
    srcs = [('url', o), ('path', copy)]
    m = seamfs.mount(mixed_cat(data, *(srcs if url_first else srcs[::-1])), read_timeout=20,
                     options=OPTS)
    return m, o, copy


def test_failed_url_cuts_over_to_a_path(seamfs, data, make_origin, tmp_path):
    """The active source is a URL, the standby a local copy: the read goes
    on from the file at the same offset."""
    m, o1, copy = mixed_mount(seamfs, data, make_origin, tmp_path, url_first=True)
    f, h = start_reading(m)
    o1.rule('/mid.bin', reset_at=FAULT_AT)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    last = status(m)['cutovers']['recent'][0]
    assert last['from'] == o1.url('mid.bin') and last['to'] == str(copy), last
    assert last['offset'] >= 64 * KIB
    # the origin sent less than the file: the copy served the rest
    assert sum(r['bytes_sent'] for r in o1.log()['requests']
               if r['path'] == '/mid.bin') < data['mid.bin'].size


def test_failed_path_cuts_over_to_a_url(seamfs, data, make_origin, tmp_path):
    """The active source is a local file that shrinks under the reader (a
    replaced or half-synced copy): a URL standby takes over at the offset
    where the file ended, checked against the bytes already read."""
    m, o2, copy = mixed_mount(seamfs, data, make_origin, tmp_path, url_first=False)
    f, h = start_reading(m)
    os.truncate(copy, FAULT_AT)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    st = status(m)
    last = st['cutovers']['recent'][0]
    assert last['from'] == str(copy) and last['to'] == o2.url('mid.bin'), last
    assert last['reason'] == 'size', last
    assert any(r['path'] == '/mid.bin' and r['bytes_sent'] > MIB for r in o2.log()['requests'])


def test_url_to_path_and_back(seamfs, data, make_origin, tmp_path):
    """Both ways in one read run: the URL fails once and the copy takes
    over; the copy then ends early and the URL, which served the first
    bytes and stays verified, takes over again."""
    m, o1, copy = mixed_mount(seamfs, data, make_origin, tmp_path, url_first=True)
    f, h = start_reading(m)
    o1.rule('/mid.bin', reset_at=FAULT_AT)
    try:
        while f.tell() < FAULT_AT + MIB:
            h.update(f.read(256 * KIB))
        assert status(m)['cutovers']['total'] == 1
        o1.clear()
        os.truncate(copy, FAULT_AT + 2 * MIB)
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    recent = status(m)['cutovers']['recent']
    assert [(c['from'], c['to']) for c in recent[:2]] == [
        (str(copy), o1.url('mid.bin')), (o1.url('mid.bin'), str(copy))], recent


def test_unverified_standby_is_verified_on_demand(seamfs, data, make_origin):
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2]), read_timeout=20,
                     options=['standby_delay=3600', 'stall_timeout=1', 'liveness_interval=0'])
    f = open(m.path('movie.bin'), 'rb')
    h = hashlib.sha256(f.read(64 * KIB))
    # no reference before standby_delay (a scan costs no samples) ...
    st = status(m)
    assert st['assets'][0]['reference'] == '' and \
        source_state(st, 'p2')['verification'] == 'unverified', st['assets']
    # ... so the cutover takes one from two sources that agree, then moves
    o1.rule('/mid.bin', reset_at=FAULT_AT)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    st = status(m)
    assert source_state(st, 'p2')['verification'] == 'verified'
    assert st['cutovers']['total'] >= 1


def test_flipped_standby_rejected_next_one_used(seamfs, data, make_origin, tmp_path):
    bad = flipped_copy(data, tmp_path)
    o1, o2, o3 = make_origin(data.dir), make_origin(bad), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2, o3]), read_timeout=20, options=OPTS)
    f, h = start_reading(m, verified=('p3',))
    wait_until(lambda: source_state(status(m), 'p2')['verification'] == 'rejected', 20,
               'the flipped copy rejected')
    assert 'sample 1' in source_state(status(m), 'p2')['why']
    o1.rule('/mid.bin', reset_at=FAULT_AT)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    last = status(m)['cutovers']['recent'][0]
    assert last['to'] == o3.url('mid.bin')
    # the rejected copy served no byte past what its check read
    assert all(r['bytes_sent'] <= 8 * KIB for r in o2.log()['requests'])


def test_nothing_can_take_over_fails_in_time(seamfs, data, make_origin, tmp_path):
    bad = flipped_copy(data, tmp_path)
    o1, o2 = make_origin(data.dir), make_origin(bad)
    read_timeout = 8
    m = seamfs.mount(cat_for(data, [o1, o2]), read_timeout=read_timeout,
                     options=['standby_delay=0', 'stall_timeout=1', 'liveness_interval=0'])
    f, h = start_reading(m, verified=(), reference=False)
    # two sources that disagree: no majority, so no reference and nothing
    # rejected for good; the cutover sweeps p2 against what p1 served
    o1.rule('/mid.bin', reset_at=FAULT_AT)
    ref = open(data['mid.bin'].path, 'rb').read()
    got = bytearray(ref[:64 * KIB])
    t0 = time.monotonic()
    try:
        with pytest.raises(OSError) as e:
            while True:
                b = f.read(256 * KIB)
                if not b:
                    break
                got += b
        assert e.value.errno == errno.EIO
    finally:
        f.close()
    assert time.monotonic() - t0 < read_timeout + 10
    assert bytes(got) == ref[:len(got)]     # what came before the error is right
    st = status(m)
    assert st['cutovers']['fallback_exhausted'] >= 1
    assert metrics(m)['seamfs_fallback_exhausted_total'].value() >= 1
    assert 'no standby could take over' in st['cutovers']['last_fallback_exhausted']
    assert 'differs from' in source_state(st, 'p2')['why']


def test_403_is_an_authentication_error_and_cutover_goes_on(seamfs, data, make_origin):
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2]), read_timeout=20, options=OPTS)
    f, h = start_reading(m)
    o1.rule('/mid.bin', status=403)
    try:
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    st = status(m)
    p1 = next(p for p in st['providers'] if p['name'] == 'p1')
    assert p1['state'] == 'auth_error' and 'authentication refused' in p1['auth_error']
    assert st['cutovers']['fallback_exhausted'] == 0
    assert 'authentication refused' in m.log()
    met = metrics(m)
    assert met['seamfs_provider_auth_errors_total'].value({'provider': 'p1'}) >= 1
    assert met['seamfs_provider_state'].value({'provider': 'p1', 'state': 'auth_error'}) == 1


def make_big_clip(path, log):
    """A 30 s clip at a high bitrate (~20 MB), so that reading it takes many
    requests; made at test time."""
    subprocess.run(['ffmpeg', '-v', 'error', '-y', '-f', 'lavfi', '-i',
                    'testsrc2=size=640x360:rate=25', '-f', 'lavfi', '-i',
                    'sine=frequency=440:sample_rate=48000', '-t', '30',
                    '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '6M',
                    '-c:a', 'aac', '-b:a', '128k', str(path)],
                   check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=open(log, 'w'))


def test_ffmpeg_decodes_while_active_nginx_stops(seamfs, data, nginx, make_origin, tmp_path):
    clipdir = tmp_path / 'clip'
    clipdir.mkdir()
    clip = clipdir / 'big.mkv'
    make_big_clip(clip, tmp_path / 'ffmpeg-make.log')
    shutil.copy(clip, data.dir / 'cutover-clip.mkv')
    try:
        ref = subprocess.run(['ffmpeg', '-v', 'error', '-i', str(clip), '-f', 'md5', '-'],
                             capture_output=True, timeout=120, check=True).stdout.strip()
        o2 = make_origin(data.dir)
        size = clip.stat().st_size
        cat = {'providers': [{'name': 'a-nginx'}, {'name': 'b-origin'}],
               'assets': [{'id': 'clip', 'path': 'clip.mkv', 'size': size, 'mtime': 1700000000,
                           'sources': [{'url': nginx.url('cutover-clip.mkv'), 'provider': 'a-nginx'},
                                       {'url': o2.url('cutover-clip.mkv'), 'provider': 'b-origin'}]}]}
        m = seamfs.mount(cat, read_timeout=20,
                         options=['standby_delay=0', 'stall_timeout=1', 'liveness_interval=0',
                                  'head_size=256K', 'tail_size=256K'])
        # -re: decode at the clip's own pace, so nginx stops mid-run
        p = subprocess.Popen(['ffmpeg', '-v', 'error', '-re', '-i', m.path('clip.mkv'),
                              '-f', 'md5', '-'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: status(m)['assets'] and
                       source_state(status(m), 'b-origin')['verification'] == 'verified',
                       20, 'standby verified')
            time.sleep(2)
            nginx.stop(hold_port=True)
            out, err = p.communicate(timeout=90)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        assert p.returncode == 0, err.decode(errors='replace')
        assert err.strip() == b''
        assert out.strip() == ref
        assert status(m)['cutovers']['total'] >= 1
    finally:
        os.unlink(data.dir / 'cutover-clip.mkv')


def test_fio_eight_readers_survive_a_killed_source(seamfs, data, make_origin, tmp_path):
    if not shutil.which('fio'):
        pytest.fail('fio is not installed (contrib/setup-debian.sh installs it)')
    o1, o2 = make_origin(data.dir), make_origin(data.dir)
    m = seamfs.mount(cat_for(data, [o1, o2], name='big.bin'), read_timeout=20,
                     options=['standby_delay=0', 'stall_timeout=1', 'liveness_interval=0',
                              'session_key=open'])
    path = m.path('movie.bin')
    # reference and verification first (one reader, then wait)
    f, _ = start_reading(m)
    f.close()
    # 8 fio readers (random and sequential, O_DIRECT) and 8 checked readers
    fio = subprocess.Popen(['fio', '--name=r', f'--filename={path}', '--readonly',
                            '--rw=randread', '--bs=64k', '--direct=1', '--numjobs=8',
                            '--time_based', '--runtime=6', '--ioengine=psync',
                            '--group_reporting', '--output-format=json'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    checker = r'''
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
h = hashlib.sha256()
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    h.update(b)
print(h.hexdigest())
'''
    readers = [subprocess.Popen([sys.executable, '-c', checker, path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(8)]
    try:
        time.sleep(1.0)
        o1.stop(hold_port=True)           # the active source dies
        for r in readers:
            out, err = r.communicate(timeout=90)
            assert r.returncode == 0, err
            assert out.strip() == data['big.bin'].sha256
        out, err = fio.communicate(timeout=90)
        assert fio.returncode == 0, err.decode(errors='replace')
        res = json.loads(out)
        assert res['jobs'][0]['error'] == 0
        assert res['jobs'][0]['read']['io_bytes'] > 0
    finally:
        for p in readers + [fio]:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    assert status(m)['cutovers']['total'] >= 1


def test_prevalidation_verdicts_in_status_and_store(seamfs, data, make_origin, tmp_path):
    flipped = flipped_copy(data, tmp_path)
    short = tmp_path / 'short'
    short.mkdir()
    (short / 'mid.bin').write_bytes(open(data['mid.bin'].path, 'rb').read()[:-1000])
    good, same, bad, small = (make_origin(data.dir), make_origin(data.dir),
                              make_origin(flipped), make_origin(short))
    cat = cat_for(data, [good, same, bad, small])
    m = seamfs.mount(cat, read_timeout=20, options=OPTS)
    f, h = start_reading(m, verified=('p2',))
    try:
        def settled():
            st = status(m)
            return (source_state(st, 'p3')['verification'] == 'rejected' and
                    source_state(st, 'p4')['verification'] == 'rejected')
        wait_until(settled, 20, 'verdicts for the flipped and the short copy')
        st = status(m)
        assert 'sample 1' in source_state(st, 'p3')['why']
        assert 'size' in source_state(st, 'p4')['why']
        assert st['cutovers']['verifications']['match'] >= 1
        # the short copy was rejected by its size alone: no sample was read
        assert all(r['bytes_sent'] <= 1 for r in small.log()['requests'])
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    m.unmount()
    # a second mount reuses the stored verdicts: the copies are not read again
    for o in (same, bad):
        o.clear()
    m2 = seamfs.mount(cat, read_timeout=20, options=OPTS)
    f, h = start_reading(m2, verified=('p2',))
    try:
        wait_until(lambda: source_state(status(m2), 'p3')['verification'] == 'rejected', 20,
                   'stored verdict for the flipped copy')
        assert read_rest(f, h) == data['mid.bin'].sha256
    finally:
        f.close()
    for o in (same, bad):
        assert all(r['bytes_sent'] <= 1 for r in o.log()['requests']), o.log()['requests']
