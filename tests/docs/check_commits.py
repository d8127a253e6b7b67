#!/usr/bin/env python3
"""Commit subjects are one line of at most 72 characters (issue 27).

    check_commits.py SOURCE_ROOT

Checks every commit after BASE, the last one before the rule was checked
(earlier subjects are history and stay as they are): its subject at most
72 characters, and a blank line (or nothing) after it, the body the why.
The same rule as contrib/git-hooks/commit-msg, which refuses such a
commit before it is made. Skips (exit 77) outside a git checkout, or in a
shallow one that lacks BASE. Fails naming each commit and its subject.
"""

import subprocess
import sys

BASE = '77764d4'
MAX = 72


def git(root, *args):
    return subprocess.run(['git', '-C', root, *args], capture_output=True, text=True,
                          timeout=30)


def main():
    root = sys.argv[1]
    if git(root, 'rev-parse', '--git-dir').returncode != 0:
        print('check_commits: not a git checkout: skipped')
        return 77
    if git(root, 'cat-file', '-e', BASE + '^{commit}').returncode != 0:
        print(f'check_commits: {BASE} is not in this clone (shallow?): skipped')
        return 77
    log = git(root, 'log', '--format=%h%x00%B%x01', f'{BASE}..HEAD')
    if log.returncode != 0:
        print(f'check_commits: git log failed: {log.stderr.strip()}')
        return 1
    bad, n = [], 0
    for entry in log.stdout.split('\x01'):
        entry = entry.strip('\n')
        if not entry:
            continue
        n += 1
        sha, _, msg = entry.partition('\x00')
        lines = msg.split('\n')
        subject = lines[0]
        if len(subject) > MAX:
            bad.append(f'{sha}: subject of {len(subject)} characters (at most {MAX}): '
                       f'{subject!r}')
        if len(lines) > 1 and lines[1].strip():
            bad.append(f'{sha}: the second line is not blank (a subject of one line, '
                       f'then the body): {subject!r}')
    for b in bad:
        print(b)
    print(f'check_commits: {n} commit(s) after {BASE}, {len(bad)} problem(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
