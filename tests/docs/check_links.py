#!/usr/bin/env python3
"""Every relative link of the project's Markdown resolves.

    check_links.py SOURCE_ROOT

Reads every *.md below SOURCE_ROOT (README.md, docs/, bench/, tests/, ...;
not build directories nor .git) and checks each inline link `[text](target)` whose target is not a URL: the file or
folder must exist, and a `#fragment` must be a heading of the target
Markdown file (GitHub's anchors: lowercase, punctuation dropped, spaces as
hyphens, a repeated heading gets -1, -2, ...). Links inside code (fenced
blocks and `spans`) are not links. Fails naming the file, line and link.
"""

import os
import re
import sys

LINK = re.compile(r'(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
IMAGE = re.compile(r'!\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
SKIP_DIRS = {'.git', 'build', 'subprojects', 'node_modules'}


def markdown_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not d.startswith('build')]
        for f in filenames:
            if f.endswith('.md'):
                yield os.path.join(dirpath, f)


def prose_lines(text):
    """(line number, line) outside fenced code, with code spans blanked."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r'\s*(```+|~~~+)', line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r'`+[^`]*`+', '``', line)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', s)   # a link in a heading: its text
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        out = set()
        for _, line in prose_lines(open(path, encoding='utf-8').read().replace('`', '')):
            m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            base = slug(m.group(1))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else f'{base}-{k}')
        _anchors[path] = out
    return _anchors[path]


def check(root):
    errors = []
    for md in sorted(markdown_files(root)):
        rel = os.path.relpath(md, root)
        text = open(md, encoding='utf-8').read()
        for n, line in prose_lines(text):
            for m in list(LINK.finditer(line)) + list(IMAGE.finditer(line)):
                target = m.group(1)
                if re.match(r'[a-z][a-z0-9+.-]*:', target, re.I):
                    continue          # http:, https:, mailto:
                path, _, frag = target.partition('#')
                dest = md if not path else os.path.normpath(
                    os.path.join(os.path.dirname(md), path))
                if not os.path.exists(dest):
                    errors.append(f'{rel}:{n}: link {target}: {path} does not exist')
                    continue
                if frag and dest.endswith('.md') and frag not in anchors(dest):
                    errors.append(f'{rel}:{n}: link {target}: '
                                  f'{os.path.relpath(dest, root)} has no heading #{frag}')
    return errors


def main():
    root = sys.argv[1]
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        return 1
    print('every relative link of the Markdown files resolves')
    return 0


if __name__ == '__main__':
    sys.exit(main())
