"""Bad catalogs through the real binary.

Each case is one catalog file.  seamfs must exit 3 with exactly one line on
stderr:  seamfs: CATALOG_PATH:LINE:COL: FIELD: message

The catalog texts carry markers «name» at the places LINE:COL may point at;
the markers are removed before the file is written and their 1-based line and
column are what the test expects.  A case lists the acceptable (FIELD, markers)
pairs: e.g. an unknown key may be reported at the key or at its value; a
missing field at the enclosing object.  For JSON syntax errors only the line is
checked (the column of a syntax error depends on the parser's lookahead).
"""

import os
import re

import pytest

MARK = re.compile(r'«(\w+)»')


KEY_BEFORE = re.compile(r'("(?:[^"\\]|\\.)*")\s*:\s*$')


def strip_markers(text):
    """Remove «name» markers; return (text, {name: [(line, col), ...]}).

    A marker placed on a member's value also accepts the position of that
    member's key: "point at the value" and "point at the key" both lead the
    reader to the same place."""
    out, pos = [], {}
    for lineno, line in enumerate(text.split('\n'), 1):
        clean, last = [], 0
        for m in MARK.finditer(line):
            clean.append(line[last:m.start()])
            before = ''.join(clean)
            pos[m.group(1)] = [(lineno, len(before) + 1)]
            k = KEY_BEFORE.search(before)
            if k:
                pos[m.group(1)].append((lineno, k.start(1) + 1))
            last = m.end()
        clean.append(line[last:])
        out.append(''.join(clean))
    return '\n'.join(out), pos


SRC = '"sources": [{"url": "http://127.0.0.1:9/a.bin"}]'
A0 = '{"id": "a0", "path": "Dir/a0.bin", "size": 10, ' + SRC + '}'
A1 = '{"id": "a1", "path": "Dir/a1.bin", "size": 10, ' + SRC + '}'


def doc(*assets, providers=None, settings=None, top=None, assets_value=None):
    """A catalog text, one asset per line, so markers land on known lines."""
    lines = ['«top»{']
    if providers is not None:
        lines.append('  "providers": [')
        lines.append(',\n'.join('    ' + p for p in providers))
        lines.append('  ],')
    if settings is not None:
        lines.append('  "settings": ' + settings + ',')
    if top is not None:
        lines.append('  ' + top + ',')
    if assets_value is not None:
        lines.append('  "assets": ' + assets_value)
    else:
        lines.append('  "assets": «assets»[')
        lines.append(',\n'.join('    ' + a for a in assets))
        lines.append('  ]')
    lines.append('}')
    return '\n'.join(lines) + '\n'


def asset_with(body):
    return '«obj»{' + body + '}'


# (id, catalog text with markers, [(FIELD, [marker, ...]), ...], line_only)
CASES = [
    # --- JSON itself ---------------------------------------------------
    ('syntax-bad-token', '{\n  "assets": [\n    «x»nope\n  ]\n}\n', [('(syntax)', ['x'])], True),
    ('syntax-trailing-comma-obj', '{\n  "assets": [],\n  «x»}\n', [('(syntax)', ['x'])], True),
    # A raw newline inside a string: at the string or where the newline ends it.
    ('syntax-unterminated-string', '{\n  "assets": [\n    {"id": «x»"abc\n«y»  ]\n}\n',
     [('(syntax)', ['x', 'y'])], True),
    ('empty-file', '«x»', [('(syntax)', ['x'])], True),
    ('top-level-array', '«x»[]\n', [(None, ['x'])], True),
    ('top-level-string', '«x»"assets"\n', [(None, ['x'])], True),
    ('top-level-null', '«x»null\n', [(None, ['x'])], True),

    # --- unknown keys ---------------------------------------------------
    ('unknown-top-key', doc(A0, top='«k»"colour": «v»1'), [('colour', ['k', 'v'])], False),
    ('unknown-asset-key',
     doc('{"id": "a0", "path": "Dir/a0.bin", «k»"colour": «v»"red", ' + SRC + '}'),
     [('assets[0].colour', ['k', 'v'])], False),
    ('unknown-source-key',
     doc(A0, '{"id": "a1", "path": "Dir/a1.bin", "sources": [{"url": "http://127.0.0.1:9/a", '
             '«k»"mirror": «v»true}]}'),
     [('assets[1].sources[0].mirror', ['k', 'v'])], False),
    ('unknown-provider-key', doc(A0, providers=['{"name": "p", «k»"colour": «v»1}']),
     [('providers[0].colour', ['k', 'v'])], False),
    ('unknown-setting', doc(A0, settings='{«k»"colour": «v»1}'),
     [('settings.colour', ['k', 'v'])], False),
    # A key with a newline in it: whatever FIELD shows, the message stays one line.
    ('unknown-key-with-newline', doc(A0, top=r'«k»"col\nour": «v»1'), [(None, ['k', 'v'])], False),

    # --- missing required fields -----------------------------------------
    ('missing-assets', '«top»{\n  "providers": []\n}\n', [('assets', ['top'])], False),
    ('missing-id', doc(asset_with('"path": "Dir/x.bin", ' + SRC)),
     [('assets[0].id', ['obj'])], False),
    ('missing-path', doc(A0, asset_with('"id": "x", ' + SRC)),
     [('assets[1].path', ['obj'])], False),
    ('missing-sources', doc(asset_with('"id": "x", "path": "Dir/x.bin"')),
     [('assets[0].sources', ['obj'])], False),
    ('empty-sources', doc('{"id": "x", "path": "Dir/x.bin", "sources": «v»[]}'),
     [('assets[0].sources', ['v'])], False),
    ('source-without-url-or-path',
     doc('{"id": "x", "path": "Dir/x.bin", "sources": [«s»{"provider": "p"}]}',
         providers=['{"name": "p"}']),
     [('assets[0].sources[0]', ['s']), ('assets[0].sources[0].url', ['s']),
      ('assets[0].sources[0].path', ['s'])], False),
    ('provider-without-name', doc(A0, providers=['«obj»{"max_connections": 2}']),
     [('providers[0].name', ['obj'])], False),

    # --- wrong types -------------------------------------------------------
    ('assets-not-array', doc(assets_value='«v»{}'), [('assets', ['v'])], False),
    ('id-number', doc('{"id": «v»7, "path": "Dir/x.bin", ' + SRC + '}'),
     [('assets[0].id', ['v'])], False),
    ('id-null', doc(A0, '{"id": «v»null, "path": "Dir/x.bin", ' + SRC + '}'),
     [('assets[1].id', ['v'])], False),
    ('path-bool', doc('{"id": "x", "path": «v»true, ' + SRC + '}'),
     [('assets[0].path', ['v'])], False),
    ('sources-string', doc('{"id": "x", "path": "Dir/x.bin", "sources": «v»"http://a/b"}'),
     [('assets[0].sources', ['v'])], False),
    ('source-not-object', doc('{"id": "x", "path": "Dir/x.bin", "sources": [«v»"http://a/b"]}'),
     [('assets[0].sources[0]', ['v'])], False),
    ('url-number', doc('{"id": "x", "path": "Dir/x.bin", "sources": [{"url": «v»5}]}'),
     [('assets[0].sources[0].url', ['v'])], False),
    ('mtime-string', doc('{"id": "x", "path": "Dir/x.bin", "mtime": «v»"yesterday", ' + SRC + '}'),
     [('assets[0].mtime', ['v'])], False),
    ('sha256-number', doc('{"id": "x", "path": "Dir/x.bin", "sha256": «v»12, ' + SRC + '}'),
     [('assets[0].sha256', ['v'])], False),
    ('providers-object', doc(A0, top='"providers": «v»{}'), [('providers', ['v'])], False),
    ('provider-name-number', doc(A0, providers=['{"name": «v»3}']),
     [('providers[0].name', ['v'])], False),
    ('max-connections-string', doc(A0, providers=['{"name": "p", "max_connections": «v»"4"}']),
     [('providers[0].max_connections', ['v'])], False),
    ('max-connections-fraction', doc(A0, providers=['{"name": "p", "max_connections": «v»1.5}']),
     [('providers[0].max_connections', ['v'])], False),
    ('headers-array', doc(A0, providers=['{"name": "p", "headers": «v»["Authorization: x"]}']),
     [('providers[0].headers', ['v'])], False),
    ('header-value-number', doc(A0, providers=['{"name": "p", "headers": {"X-Token": «v»1}}']),
     [('providers[0].headers.X-Token', ['v'])], False),
    ('source-provider-number',
     doc('{"id": "x", "path": "Dir/x.bin", "sources": [{"url": "http://a/b", "provider": «v»3}]}'),
     [('assets[0].sources[0].provider', ['v'])], False),
    ('settings-array', doc(A0, settings='«v»[]'), [('settings', ['v'])], False),
    ('setting-read-timeout-string', doc(A0, settings='{"read_timeout": «v»"abc"}'),
     [('settings.read_timeout', ['v'])], False),

    # --- sizes and checksums ---------------------------------------------
    ('size-negative', doc('{"id": "x", "path": "Dir/x.bin", "size": «v»-1, ' + SRC + '}'),
     [('assets[0].size', ['v'])], False),
    ('size-fraction', doc(A0, '{"id": "x", "path": "Dir/x.bin", "size": «v»1.5, ' + SRC + '}'),
     [('assets[1].size', ['v'])], False),
    ('size-string', doc('{"id": "x", "path": "Dir/x.bin", "size": «v»"12", ' + SRC + '}'),
     [('assets[0].size', ['v'])], False),
    ('sha256-short', doc('{"id": "x", "path": "Dir/x.bin", "sha256": «v»"' + 'a' * 63 + '", '
                         + SRC + '}'), [('assets[0].sha256', ['v'])], False),
    ('sha256-long', doc('{"id": "x", "path": "Dir/x.bin", "sha256": «v»"' + 'b' * 65 + '", '
                        + SRC + '}'), [('assets[0].sha256', ['v'])], False),
    ('sha256-not-hex', doc('{"id": "x", "path": "Dir/x.bin", "sha256": «v»"' + 'g' * 64 + '", '
                           + SRC + '}'), [('assets[0].sha256', ['v'])], False),

    # --- duplicates: reported at the second occurrence --------------------
    ('duplicate-id',
     doc(A0, '{"id": «v»"a0", "path": "Dir/other.bin", ' + SRC + '}'),
     [('assets[1].id', ['v'])], False),
    ('duplicate-path',
     doc(A0, '{"id": "other", "path": «v»"Dir/a0.bin", ' + SRC + '}'),
     [('assets[1].path', ['v'])], False),
    ('duplicate-provider',
     doc(A0, providers=['{"name": "p"}', '{"name": «v»"p"}']),
     [('providers[1].name', ['v'])], False),
    ('file-then-dir-same-path',
     doc('{"id": "f", "path": "A/b.mkv", ' + SRC + '}',
         '{"id": "g", "path": «v»"A/b.mkv/c.mkv", ' + SRC + '}'),
     [('assets[1].path', ['v'])], False),
    ('dir-then-file-same-path',
     doc('{"id": "g", "path": "A/b.mkv/c.mkv", ' + SRC + '}',
         '{"id": "f", "path": «v»"A/b.mkv", ' + SRC + '}'),
     [('assets[1].path', ['v'])], False),

    # --- URLs and local paths ----------------------------------------------
    ('url-ftp', doc('{"id": "x", "path": "Dir/x.bin", "sources": [{"url": «v»"ftp://127.0.0.1/x"}]}'),
     [('assets[0].sources[0].url', ['v'])], False),
    ('url-file', doc(A0, '{"id": "x", "path": "Dir/x.bin", "sources": '
                         '[{"url": "http://127.0.0.1:9/y"}, {"url": «v»"file:///etc/hostname"}]}'),
     [('assets[1].sources[1].url', ['v'])], False),
    ('url-and-path',
     doc('{"id": "x", "path": "Dir/x.bin", "sources": '
         '[«s»{"url": «u»"http://127.0.0.1:9/x", "path": «p»"/srv/x.bin"}]}'),
     [('assets[0].sources[0]', ['s']), ('assets[0].sources[0].url', ['u', 's']),
      ('assets[0].sources[0].path', ['p', 's'])], False),
    ('relative-local-path',
     doc('{"id": "x", "path": "Dir/x.bin", "sources": [{"path": «v»"media/x.bin"}]}'),
     [('assets[0].sources[0].path', ['v'])], False),
    ('unknown-provider',
     doc('{"id": "x", "path": "Dir/x.bin", "sources": '
         '[{"url": "http://127.0.0.1:9/x", "provider": «v»"nobody"}]}',
         providers=['{"name": "p"}']),
     [('assets[0].sources[0].provider', ['v'])], False),
    ('max-connections-zero', doc(A0, providers=['{"name": "p", "max_connections": «v»0}']),
     [('providers[0].max_connections', ['v'])], False),
    ('max-connections-negative', doc(A0, providers=['{"name": "p", "max_connections": «v»-2}']),
     [('providers[0].max_connections', ['v'])], False),
]

BAD_PATHS = [
    ('absolute', r'/Movies/x.mkv'),
    ('empty', r''),
    ('empty-component', r'Movies//x.mkv'),
    ('trailing-slash', r'Movies/x.mkv/'),
    ('dot-component', r'Movies/./x.mkv'),
    ('dotdot-component', r'Movies/../x.mkv'),
    ('dot', r'.'),
    ('dotdot', r'..'),
    ('control-char', r'Movies/a\u0001b.mkv'),
    ('tab', r'Movies/a\tb.mkv'),
    ('newline', r'Movies/a\nb.mkv'),      # the message must still be one line
    ('nul', r'Movies/a\u0000b.mkv'),
]

for _name, _p in BAD_PATHS:
    CASES.append((f'path-{_name}',
                  doc(A0, '{"id": "x", "path": «v»"' + _p + '", ' + SRC + '}'),
                  [('assets[1].path', ['v'])], False))

LINE = re.compile(r'^seamfs: (?P<path>.+):(?P<line>\d+):(?P<col>\d+): (?P<field>\S+): (?P<msg>.+)$')


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_bad_catalog(seamfs_cli, case):
    name, marked, expect, line_only = case
    text, pos = strip_markers(marked)
    cat = seamfs_cli.write_catalog(text.encode(), name=f'{name}.json')
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-f', '-o', f'state_dir={seamfs_cli.state_dir}', cat, mnt],
                       mountpoints=[mnt])
    print(f'catalog:\n{text}\nexit {r.returncode}\nstderr: {r.stderr!r}')
    assert r.returncode == 3, f'exit code {r.returncode}, stderr: {r.stderr!r}'
    lines = [ln for ln in r.stderr.split('\n') if ln.strip()]
    assert len(lines) == 1, f'want exactly one stderr line, got: {r.stderr!r}'
    m = LINE.match(lines[0])
    assert m, f'not "seamfs: PATH:LINE:COL: FIELD: message": {lines[0]!r}'
    assert m.group('path') == str(cat)
    got_field = m.group('field')
    got = (int(m.group('line')), int(m.group('col')))

    fields = [f for f, _ in expect]
    if fields == [None]:
        # Non-object top level: FIELD is not pinned down, the place is.
        want_lines = {p[0] for mk in expect[0][1] for p in pos[mk]}
        assert got[0] in want_lines, f'line {got[0]}, want {sorted(want_lines)}'
        return
    assert got_field in fields, f'FIELD {got_field!r}, want one of {fields}'
    markers = dict(expect)[got_field]
    want = [p for mk in markers for p in pos[mk]]
    if line_only:
        assert got[0] in {w[0] for w in want}, f'line {got[0]}, want {want}'
    else:
        assert got in want, f'LINE:COL {got[0]}:{got[1]}, want one of ' + \
            ', '.join(f'{ln}:{c}' for ln, c in want)


def test_catalog_missing_file(seamfs_cli, tmp_path):
    """A catalog that cannot be read fails (the contract does not say whether
    that is a catalog or a runtime error) with a message naming the file."""
    cat = tmp_path / 'nope.json'
    mnt = seamfs_cli.new_mountpoint()
    r = seamfs_cli.run(['-f', cat, mnt], mountpoints=[mnt])
    assert r.returncode in (1, 3), (r.returncode, r.stderr)
    assert str(cat) in r.stderr


def test_catalog_that_is_a_fifo(seamfs_cli, tmp_path):
    """A FIFO as the catalog: refused at once, named as one (the open does
    not wait for a writer); nothing is mounted."""
    cat = tmp_path / 'catalog.json'
    os.mkfifo(cat)
    mnt = seamfs_cli.new_mountpoint()
    try:
        r = seamfs_cli.run(['-f', '-o', f'state_dir={tmp_path / "state"}', cat, mnt],
                           timeout=20, mountpoints=[mnt])
    finally:
        try:   # whatever still waits on the FIFO gets a writer, and goes
            os.close(os.open(cat, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert f'{cat}: the catalog is a FIFO, not a regular file' in r.stderr, r.stderr
    assert not os.listdir(mnt)
