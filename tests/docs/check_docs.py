#!/usr/bin/env python3
"""The option list has one source, px_config_options (proxy/catalog/config.c):
`seamfs --help` prints it and the build writes it into seamfs.1 (mangen).
This check fails when the option table of docs/configuration.md or the man
pages drift from it, or when a man page renders with warnings.

    check_docs.py SOURCE_ROOT MANGEN SEAMFS_1 SEAMFS_WRITER_1

Checked:
  - every option of the table is a row of docs/configuration.md's "Options"
    table with the same argument (`name=ARG`, or `name` for a flag), and every
    `name=...` row there is an option of the table;
  - seamfs.1 describes every option (`-o name`);
  - seamfs-writer.1 describes every long option of writer_main.c;
  - `man --warnings -l PAGE` prints no warning for either page;
  - the figures the docs quote from the code and the build: how many sources
    an asset may gain while mounted (proxy/source/context.h), and that
    README.md's dependency list names every library meson.build links.
"""

import os
import re
import shutil
import subprocess
import sys

DOC = 'docs/configuration.md'   # the page that lists every option


def table_options(mangen):
    out = subprocess.run([mangen, '--list'], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    opts = {}
    for line in out.splitlines():
        name, arg = line.split('\t')
        opts[name] = None if arg == '-' else arg
    return opts


def doc_options(doc):
    """The rows of the table under '## Options': {name: ARG or None}."""
    text = open(doc, encoding='utf-8').read()
    m = re.search(r'^## Options\n(.*?)(?=^#|\Z)', text, re.M | re.S)
    if not m:
        sys.exit(f'{doc}: no "## Options" section')
    opts = {}
    for row in m.group(1).splitlines():
        cell = re.match(r'\|\s*`([^`]+)`', row)
        if not cell or cell.group(1).startswith('-'):
            continue          # the header, and -f, -d, -s
        name, _, arg = cell.group(1).partition('=')
        opts[name] = arg or None
    return opts


def fact_errors(root):
    """Figures the docs quote that the code or the build defines:
    the sources an asset may gain while mounted (proxy/source/context.h)
    and the libraries meson.build links (README.md's dependency list)."""
    errors = []
    ctx = open(os.path.join(root, 'proxy/source/context.h'), encoding='utf-8').read()
    small = re.search(r'#define PX_SPARE_SOURCES_SMALL (\d+)', ctx).group(1)
    large = re.search(r'#define PX_SPARE_SOURCES_LARGE (\d+)', ctx).group(1)
    docs = ['README.md'] + ['docs/' + f for f in sorted(os.listdir(os.path.join(root, 'docs')))
                            if f.endswith('.md')]
    quoted = 0
    for rel in docs:
        text = open(os.path.join(root, rel), encoding='utf-8').read()
        for m in re.finditer(r'gain up to (\d+) sources[^(]*\((\d+) in a library', text):
            quoted += 1
            if (m.group(1), m.group(2)) != (small, large):
                errors.append(f'{rel}: says an asset can gain up to {m.group(1)} sources '
                              f'({m.group(2)} in a large library) but context.h allows '
                              f'{small} ({large})')
        for m in re.finditer(r'gain up to (\d+) sources(?![^(]*\(\d+ in a library)', text):
            quoted += 1
            errors.append(f'{rel}: says an asset can gain up to {m.group(1)} sources; '
                          f'context.h allows {small} ({large} in a large library)')
    if not quoted:
        errors.append('no page says how many sources an asset may gain while mounted '
                      '(docs/status.md, "Known limits")')

    build = open(os.path.join(root, 'meson.build'), encoding='utf-8').read()
    readme = open(os.path.join(root, 'README.md'), encoding='utf-8').read()
    deps = re.search(r'^Dependencies \(pkg-config names.*?(?=^\s*$)', readme, re.M | re.S)
    if not deps:
        errors.append('README.md: no "Dependencies (pkg-config names ..." paragraph')
    else:
        for name in re.findall(r"dependency\('([^']+)'", build):
            if name != 'threads' and f'`{name}`' not in deps.group(0):
                errors.append(f'README.md: meson.build links {name}, which the '
                              f'dependency list does not name')
    return errors


def man_text(page):
    """The page as plain text (roff escapes of '-' removed)."""
    return open(page, encoding='utf-8').read().replace('\\-', '-')


def main():
    root, mangen, seamfs1, writer1 = sys.argv[1:5]
    errors = []
    table = table_options(mangen)
    documented = doc_options(os.path.join(root, DOC))
    for name, arg in table.items():
        if name not in documented:
            errors.append(f'{DOC}: option {name} of px_config_options has no row in the '
                          f'Options table')
        elif documented[name] != arg:
            errors.append(f'{DOC}: option {name} is `{name}={documented[name]}` but '
                          f'px_config_options says `{name}={arg}`')
    for name in documented:
        if name not in table:
            errors.append(f'{DOC}: the Options table lists {name}, which is not in '
                          f'px_config_options (seamfs would refuse it)')

    errors += fact_errors(root)

    page = man_text(seamfs1)
    for name in table:
        if not re.search(r'-o ' + re.escape(name) + r'\b', page):
            errors.append(f'{seamfs1}: option {name} is not described')

    writer_src = open(os.path.join(root, 'proxy/writer/writer_main.c'),
                      encoding='utf-8').read()
    opts_block = re.search(r'static const struct option opts\[\] = \{(.*?)\};', writer_src,
                           re.S)
    if not opts_block:
        errors.append('writer_main.c: no `static const struct option opts[]` table found')
    else:
        wpage = man_text(writer1)
        for name in re.findall(r'\{\s*"([a-z0-9-]+)"', opts_block.group(1)):
            if f'--{name}' not in wpage:
                errors.append(f'{writer1}: writer option --{name} is not described')

    man = shutil.which('man')
    if not man:
        errors.append('man is not installed (contrib/setup-debian.sh installs man-db and groff)')
    else:
        for p in (seamfs1, writer1):
            r = subprocess.run([man, '--warnings', '-l', p], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, MANWIDTH='80', LC_ALL='C.UTF-8'))
            if r.returncode != 0 or r.stderr.strip():
                errors.append(f'man --warnings -l {p}: exit {r.returncode}\n{r.stderr}')
            elif len(r.stdout) < 500:
                errors.append(f'man -l {p} rendered almost nothing:\n{r.stdout}')

    for e in errors:
        print(e)
    if errors:
        return 1
    print(f'{len(table)} options: {DOC}, seamfs --help and seamfs.1 agree; '
          f'both pages render without warnings')
    return 0


if __name__ == '__main__':
    sys.exit(main())
