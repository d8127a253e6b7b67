"""A strict parser of the Prometheus text exposition format, version 0.0.4.

parse(text) returns {family name: Family} or raises PromError naming the
line.  It checks what a scraper relies on, more strictly than most
scrapers do:
- the text is UTF-8 and ends with a newline; lines are '# HELP name text',
  '# TYPE name type', other '#' comments, samples, or empty;
- metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
  [a-zA-Z_][a-zA-Z0-9_]* and do not start with '__';
- label values are double-quoted and use only the escapes \\\\, \\" and \\n;
  HELP text only \\\\ and \\n;
- a family has at most one HELP and one TYPE, both before its first sample,
  and its samples come together (not interleaved with another family's);
- values are Go-style floats (or +Inf, -Inf, NaN); an optional timestamp is
  an integer; no label name repeats within a sample; no sample repeats;
- counters are not negative;
- histograms: only _bucket, _sum and _count samples; per label set the
  buckets' le values ascend and end with +Inf, their counts never fall,
  and _count equals the +Inf bucket.
"""

import math
import re

NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
LABEL = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*')
FLOAT = re.compile(r'[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)')
TYPES = ('counter', 'gauge', 'histogram', 'summary', 'untyped')


class PromError(ValueError):
    pass


class Family:
    def __init__(self, name):
        self.name = name
        self.help = None
        self.type = None
        self.samples = []        # (sample name, {labels}, value)

    def value(self, labels=None, suffix=''):
        """The value of the sample with exactly these labels."""
        labels = labels or {}
        for n, lab, v in self.samples:
            if n == self.name + suffix and lab == labels:
                return v
        raise KeyError(f'{self.name}{suffix}{labels}')


def _value(s, where):
    if s in ('+Inf', 'Inf'):
        return math.inf
    if s == '-Inf':
        return -math.inf
    if s == 'NaN':
        return math.nan
    if not FLOAT.fullmatch(s):
        raise PromError(f'{where}: bad value {s!r}')
    return float(s)


def _labels(s, i, where):
    """Parses '{a="b",...}' from s[i] == '{'; returns (dict, index after)."""
    labels = {}
    i += 1
    while True:
        if i < len(s) and s[i] == '}':
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise PromError(f'{where}: bad label name at column {i + 1}')
        name = m.group(0)
        if name.startswith('__'):
            raise PromError(f'{where}: reserved label name {name!r}')
        if name in labels:
            raise PromError(f'{where}: label {name!r} repeats')
        i = m.end()
        if s[i:i + 2] != '="':
            raise PromError(f'{where}: expected =" after {name!r}')
        i += 2
        out = []
        while True:
            if i >= len(s):
                raise PromError(f'{where}: unterminated value of {name!r}')
            c = s[i]
            if c == '"':
                i += 1
                break
            if c == '\\':
                e = s[i + 1:i + 2]
                if e not in ('\\', '"', 'n'):
                    raise PromError(f'{where}: bad escape \\{e} in {name!r}')
                out.append('\n' if e == 'n' else e)
                i += 2
                continue
            if c == '\n':
                raise PromError(f'{where}: raw newline in {name!r}')
            out.append(c)
            i += 1
        labels[name] = ''.join(out)
        if i < len(s) and s[i] == ',':
            i += 1
        elif i < len(s) and s[i] != '}':
            raise PromError(f'{where}: expected , or }} after {name!r}')


def _family_of(families, name):
    if name in families:
        return families[name], ''
    for suffix in ('_bucket', '_sum', '_count'):
        if name.endswith(suffix):
            f = families.get(name[:-len(suffix)])
            if f is not None and f.type == 'histogram':
                return f, suffix
    return None, ''


def parse(text):
    if isinstance(text, bytes):
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as e:
            raise PromError(f'not UTF-8: {e}') from None
    if not text.endswith('\n'):
        raise PromError('the text does not end with a newline')
    families = {}
    current = None
    closed = set()
    seen = set()
    for no, line in enumerate(text[:-1].split('\n'), 1):
        where = f'line {no}'
        if line == '':
            continue
        if line.startswith('#'):
            parts = line.split(' ', 3)
            if len(parts) >= 3 and parts[0] == '#' and parts[1] in ('HELP', 'TYPE'):
                name = parts[2]
                if not NAME.fullmatch(name):
                    raise PromError(f'{where}: bad metric name {name!r}')
                f = families.setdefault(name, Family(name))
                if f.samples:
                    raise PromError(f'{where}: {parts[1]} of {name} after its samples')
                rest = parts[3] if len(parts) == 4 else ''
                if parts[1] == 'HELP':
                    if f.help is not None:
                        raise PromError(f'{where}: second HELP for {name}')
                    if re.search(r'\\[^\\n]|\\$', rest):
                        raise PromError(f'{where}: bad escape in HELP of {name}')
                    f.help = rest
                else:
                    if f.type is not None:
                        raise PromError(f'{where}: second TYPE for {name}')
                    if rest not in TYPES:
                        raise PromError(f'{where}: bad type {rest!r}')
                    f.type = rest
            continue
        m = NAME.match(line)
        if not m:
            raise PromError(f'{where}: bad metric name in {line!r}')
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == '{':
            labels, i = _labels(line, i, where)
        if line[i:i + 1] != ' ':
            raise PromError(f'{where}: expected a space before the value')
        fields = line[i + 1:].split(' ')
        if len(fields) not in (1, 2):
            raise PromError(f'{where}: expected a value and at most a timestamp')
        value = _value(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r'-?\d+', fields[1]):
            raise PromError(f'{where}: bad timestamp {fields[1]!r}')
        f, suffix = _family_of(families, name)
        if f is None or f.type is None:
            raise PromError(f'{where}: sample {name} before its TYPE')
        if f.name in closed:
            raise PromError(f'{where}: the samples of {f.name} are not together')
        if current is not None and current is not f:
            closed.add(current.name)
        current = f
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise PromError(f'{where}: sample {name}{labels} repeats')
        seen.add(key)
        if f.type == 'histogram':
            if suffix == '':
                raise PromError(f'{where}: histogram sample {name} without a suffix')
            if (suffix == '_bucket') != ('le' in labels):
                raise PromError(f'{where}: le belongs on _bucket samples only')
        elif 'le' in labels and f.type != 'untyped':
            raise PromError(f'{where}: le label on a {f.type}')
        if f.type == 'counter' and value < 0:
            raise PromError(f'{where}: negative counter {name}')
        f.samples.append((name, labels, value))
    for f in families.values():
        if f.type == 'histogram':
            _check_histogram(f)
    return families


def _check_histogram(f):
    groups = {}
    for name, labels, value in f.samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != 'le'))
        g = groups.setdefault(rest, {'buckets': [], 'count': None, 'sum': None})
        if name.endswith('_bucket'):
            g['buckets'].append((_value(labels['le'], f.name + ' le'), value))
        elif name.endswith('_count'):
            g['count'] = value
        else:
            g['sum'] = value
    for rest, g in groups.items():
        where = f'histogram {f.name}{dict(rest)}'
        b = g['buckets']
        if not b or not math.isinf(b[-1][0]) or b[-1][0] < 0:
            raise PromError(f'{where}: buckets do not end with le="+Inf"')
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if not le1 > le0:
                raise PromError(f'{where}: le {le1} after {le0}')
            if c1 < c0:
                raise PromError(f'{where}: bucket count falls at le {le1}')
        if g['count'] is None or g['sum'] is None:
            raise PromError(f'{where}: no _count or _sum')
        if g['count'] != b[-1][1]:
            raise PromError(f'{where}: _count {g["count"]} != +Inf bucket {b[-1][1]}')
