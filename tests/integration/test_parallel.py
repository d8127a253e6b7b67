"""Parallel ranges on a speed-capped origin (seam-origin --rate, as a CDN or
debrid host caps each connection): a reader that outruns one connection
gets more of them, up to max_connections by the origin's own connection
count, never a second one with max_connections=1, and a second viewer's
open takes a slot from the extra ones at once.  Every byte is checked by
SHA-256."""
import json
import subprocess
import sys

from conftest import MIB, VIEWER, bounded, sha256_file, wait_until


def catalog(data, origin, max_connections, names=('big.bin',)):
    return {'providers': [{'name': 'cdn', 'max_connections': max_connections}],
            'assets': [{'id': n.split('.')[0], 'path': n, 'size': data[n].size,
                        'mtime': 1700000000,
                        'sources': [{'url': origin.url(n), 'provider': 'cdn'}]}
                       for n in names]}


def status(m):
    with open(m.path('.seamfs/status.json')) as f:
        return json.load(f)


def read_all(path, timeout=120):
    return bounded(lambda: sha256_file(path), timeout, f'read {path}')


def test_capped_origin_gets_parallel_ranges_within_the_limit(seamfs, data, make_origin):
    o = make_origin(data.dir, extra_args=['--rate', str(8 * MIB)])
    m = seamfs.mount(catalog(data, o, 4))
    o.clear()
    assert read_all(m.path('big.bin')) == data['big.bin'].sha256
    log = o.log()
    assert 2 <= log['max_concurrent'] <= 4, log['max_concurrent']
    st = status(m)
    assert st['reads']['parallel_streams'] >= 1
    assert st['reads']['parallel_parts'] >= 3
    # bounded part requests besides the open-ended first one
    ranges = [r.get('range') or '' for r in log['requests']]
    assert sum(1 for r in ranges if r.startswith('bytes=') and not r.endswith('-')) >= 3, ranges


def test_one_connection_limit_is_never_exceeded(seamfs, data, make_origin):
    o = make_origin(data.dir, extra_args=['--rate', str(16 * MIB)])
    m = seamfs.mount(catalog(data, o, 1))
    o.clear()
    assert read_all(m.path('big.bin')) == data['big.bin'].sha256
    log = o.log()
    assert log['max_concurrent'] == 1, log['max_concurrent']
    assert status(m)['reads']['parallel_streams'] == 0


def test_second_viewer_takes_a_slot_from_parallel_ranges(seamfs, data, make_origin):
    o = make_origin(data.dir, extra_args=['--rate', str(8 * MIB)])
    m = seamfs.mount(catalog(data, o, 4, names=('big.bin', 'mid.bin')))
    o.clear()
    first = subprocess.Popen([sys.executable, '-c', VIEWER, m.path('big.bin')],
                             stdout=subprocess.PIPE, text=True)
    try:
        # the first viewer runs its own transfer and parallel parts in
        # every slot of the provider
        def all_slots_busy():
            st = status(m)
            sess = [s for s in st['sessions'] if s['asset'] == 'big']
            return sess and sess[0]['streams'] == 4 and st['providers'][0]['transfers'] == 4
        wait_until(all_slots_busy, 30, 'the first viewer running 4 streams')
        assert read_all(m.path('mid.bin'), timeout=60) == data['mid.bin'].sha256
        st = status(m)
        assert st['providers'][0]['counters']['background_preempted'] >= 1
        assert st['admission']['refused_at_limit'] == 0
        out, _ = first.communicate(timeout=120)
        assert first.returncode == 0
        assert out.split()[-1] == data['big.bin'].sha256
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(5)
    assert o.log()['max_concurrent'] <= 4
