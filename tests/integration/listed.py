"""listed.py DIR NAME...: fails when a DIR/test_*.py is not among the NAMEs
(integration_files in meson.build), or a NAME has no file.  Each file is a
meson test of its own, so one left out of the list would never run."""

import sys
from pathlib import Path

here = {p.stem[len('test_'):] for p in Path(sys.argv[1]).glob('test_*.py')}
listed = set(sys.argv[2:])
for n in sorted(here - listed):
    print(f'tests/integration/test_{n}.py is not in integration_files (meson.build)')
for n in sorted(listed - here):
    print(f'integration_files (meson.build) names test_{n}.py, which does not exist')
sys.exit(1 if here != listed else 0)
