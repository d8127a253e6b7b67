#!/usr/bin/env bash
# Sets up a Debian 12 machine and runs every test of seamfs: the unit tests
# and the integration tests (real mounts against nginx and the test origin)
# on a gcc build with -Werror, then all of them again on a clang build with
# AddressSanitizer + UndefinedBehaviorSanitizer. Run as root (or via sudo).
# SEAMFS_SKIP_SETUP=1 skips the package installation.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SEAMFS_SKIP_SETUP:-0}" != 1 ]; then
  bash contrib/setup-debian.sh
fi

start=$(date +%s)
echo "== gcc build (-Werror)"
rm -rf build-test build-asan
CC=gcc meson setup build-test -Dwerror=true >/dev/null
meson compile -C build-test
meson test -C build-test --print-errorlogs --num-processes 2

echo "== clang build, ASan + UBSan (-Werror)"
CC=clang meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined \
  -Db_lundef=false >/dev/null
meson compile -C build-asan
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:exitcode=86
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87
meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3

echo "== chaos soak, short (bench/soak.sh): 8 readers, every byte checked, ASan build"
soak_dir=$(mktemp -d)
bash bench/soak.sh --short --seamfs build-asan/seamfs --origin build-asan/tests/server/seam-origin \
  --work "$soak_dir"
rm -rf "$soak_dir"

echo "== fuzz targets, a short run each (corpora in tests/fuzz/corpus)"
# every tests/fuzz/fuzz_NAME.c is a target with its corpus in corpus/NAME
fuzzers=$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
ninja -C build-asan $(printf 'tests/fuzz/fuzz_%s ' $fuzzers)
for t in $fuzzers; do
  scratch=$(mktemp -d)
  # new inputs go to the scratch dir (first), the committed corpus is read only
  build-asan/tests/fuzz/fuzz_$t -max_total_time=10 -timeout=10 -print_final_stats=0 \
    "$scratch" tests/fuzz/corpus/$t 2>&1 | tail -n 2
  rm -rf "$scratch"
done

echo "== all tests passed in $(( $(date +%s) - start )) s"
