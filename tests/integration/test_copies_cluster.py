"""Copies in cluster mode (docs/copies.md, "Cluster mode"): two daemons on
one Redis share one storage directory (a storage without "host", as an NFS
export would be). Exactly one host copies the asset there (a claim in the
store), it lists the copy in its own manifest, and the other host finds the
copy by reading that manifest, registers it, and serves every byte from it
with the origin stopped. A claim another host holds makes the job wait
(spending no attempt) until that host's manifest, read again by the
periodic rescan, lists the copy; a store that does not answer copies nothing
to the shared storage until it answers. Every byte read is checked by
SHA-256."""

import json

from conftest import sha256_file, wait_until
from test_cluster import mount_host, redis, resp  # noqa: F401 (redis: the fixture)
from test_copies import copies_of, entry, job, status, storage

COPY_WAIT = 60
RESCAN_WAIT = 25   # the rescan runs every 10 s


def listed(manifest, aid):
    if not manifest.exists():
        return False
    return aid in json.loads(manifest.read_text()).get('copies', {})


def test_one_copy_per_shared_storage_and_the_other_host_serves_it(seamfs, data, make_origin,
                                                                  redis, tmp_path):
    o = make_origin(data.dir)
    df = data['mid.bin']
    shared = tmp_path / 'nfs'
    shared.mkdir()
    cat = {'storages': [storage('nfs', shared)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    work = tmp_path / 'work'
    # each answer waits a while: the copy (nine 1 MiB ranges) lasts long
    # enough for the second host to find the claim held
    o.rule('/mid.bin', delay_ms=300)
    a = mount_host(seamfs, cat, redis, 'alpha', work)
    b = mount_host(seamfs, cat, redis, 'beta', work)
    reason = 'copying on another host'
    wait_until(lambda: any((job(status(m), 'movie') or {}).get('reason') == reason
                           for m in (a, b)), 20, f'a host waiting: "{reason}"')
    waiter = a if (job(status(a), 'movie') or {}).get('reason') == reason else b
    assert job(status(waiter), 'movie')['failed_attempts'] == 0

    # one copy, made by one host; each host's status lists it once the
    # other's manifest was read (the next rescan)
    for m in (a, b):
        wait_until(lambda m=m: copies_of(status(m), 'movie') == ['nfs'] and
                   job(status(m), 'movie') is None, COPY_WAIT + RESCAN_WAIT,
                   f'the copy of movie registered on {m.mnt}')
    on_disk = shared / 'Movies' / 'movie.bin'
    assert sha256_file(on_disk) == df.sha256
    assert not list((shared / 'Movies').glob('*partial*'))
    ma, mb = shared / '.seamfs-copies.alpha.json', shared / '.seamfs-copies.beta.json'
    assert listed(ma, 'movie') != listed(mb, 'movie'), \
        'exactly one host lists the copy in its manifest'
    assert not (shared / '.seamfs-copies.json').exists()
    maker, other = (a, b) if listed(ma, 'movie') else (b, a)
    assert other is waiter
    made = json.loads((ma if maker is a else mb).read_text())['copies']['movie']
    assert made['sha256'] == df.sha256 and made['size'] == df.size

    # the body went through the origin once, for one copy (a second copy
    # would have fetched the whole asset again)
    sent = sum(r['bytes_sent'] for r in o.requests('/mid.bin'))
    assert df.size <= sent < 2 * df.size, f'{sent} bytes of {df.size} sent by the origin'
    assert 'copying from' in maker.log()
    assert 'copying from' not in other.log()
    assert 'serves here' in other.log()   # registered from the maker's manifest
    # the claim is dropped when the job ends
    wait_until(lambda: resp(redis.port, 'EXISTS', 'seamfs:copy:{movie}:nfs') == 0, 10,
               'the claim dropped')

    # the other host reads every byte from the copy, the origin stopped
    o.stop(hold_port=True)
    assert sha256_file(other.path('Movies/movie.bin')) == df.sha256
    assert sha256_file(maker.path('Movies/movie.bin')) == df.sha256


def test_a_held_claim_waits_and_another_hosts_manifest_is_rescanned(seamfs, data, make_origin,
                                                                    redis, tmp_path):
    o = make_origin(data.dir)
    df = data['mid.bin']
    shared = tmp_path / 'nfs'
    shared.mkdir()
    # a host "gamma" holds the claim, as one copying the asset would
    assert resp(redis.port, 'SET', 'seamfs:copy:{movie}:nfs', 'gamma', 'PX', 60000) == b'OK'
    cat = {'storages': [storage('nfs', shared)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    a = mount_host(seamfs, cat, redis, 'alpha', tmp_path / 'work')
    reason = 'copying on another host'
    wait_until(lambda: (job(status(a), 'movie') or {}).get('reason') == reason, 15,
               f'movie waiting for "{reason}"')
    j = job(status(a), 'movie')
    assert j['failed_attempts'] == 0 and j['state'] == 'waiting'
    assert not list((shared / 'Movies').glob('*partial*'))

    # gamma's copy lands, with gamma's manifest (the claim still held): the
    # rescan registers it here, no copy is made here
    (shared / 'Movies').mkdir()
    (shared / 'Movies' / 'movie.bin').write_bytes(df.path.read_bytes())
    (shared / '.seamfs-copies.gamma.json').write_text(json.dumps(
        {'copies': {'movie': {'file': 'Movies/movie.bin', 'size': df.size,
                              'sha256': df.sha256, 'source': '', 'etag': ''}}}))
    wait_until(lambda: copies_of(status(a), 'movie') == ['nfs'] and
               job(status(a), 'movie') is None, RESCAN_WAIT, 'gamma\'s copy registered')
    assert 'copying from' not in a.log()
    assert not listed(shared / '.seamfs-copies.alpha.json', 'movie')
    o.stop(hold_port=True)
    assert sha256_file(a.path('Movies/movie.bin')) == df.sha256


def test_store_down_copies_nothing_to_a_shared_storage_until_it_answers(seamfs, data,
                                                                       make_origin, redis,
                                                                       tmp_path):
    o = make_origin(data.dir)
    df = data['mid.bin']
    shared = tmp_path / 'nfs'          # made once the store is down
    cat = {'storages': [storage('nfs', shared)],
           'assets': [entry('movie', 'Movies/movie.bin', df, o.url('mid.bin'), copies=1)]}
    a = mount_host(seamfs, cat, redis, 'alpha', tmp_path / 'work')
    wait_until(lambda: (job(status(a), 'movie') or {}).get('reason') == 'storage not ready',
               15, 'movie waiting for "storage not ready"')
    port = redis.port
    redis.stop()
    shared.mkdir()
    reason = 'store not answering'
    wait_until(lambda: (job(status(a), 'movie') or {}).get('reason') == reason, 15,
               f'movie waiting for "{reason}"')
    j = job(status(a), 'movie')
    assert j['failed_attempts'] == 0 and j['state'] == 'waiting'
    assert not (shared / 'Movies').exists()
    # the store answers again (empty): the claim is had, the copy made
    redis.port = port
    redis.start()
    wait_until(lambda: copies_of(status(a), 'movie') == ['nfs'], COPY_WAIT, 'the copy made')
    assert listed(shared / '.seamfs-copies.alpha.json', 'movie')
    o.stop(hold_port=True)
    assert sha256_file(a.path('Movies/movie.bin')) == df.sha256
