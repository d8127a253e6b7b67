#!/usr/bin/env bash
# Installs everything seamfs needs to build, run its demo and run its tests on
# Debian 12. Run as root (or through sudo). Safe to run again.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo -E bash "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
  build-essential clang meson ninja-build pkg-config git ca-certificates \
  libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev libjansson-dev libcmocka-dev \
  libmicrohttpd-dev zlib1g-dev libhiredis-dev redis-server \
  nginx-light lighttpd rclone curl openssl ffmpeg fio python3 python3-pytest python3-pytest-timeout \
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev \
  man-db groff-base systemd python3-yaml
# Kodi for tests/integration/test_kodi.py, which scans docs/kodi.md's library
# with it (skipped without). Its own line: on top of the above it pulls 51
# packages (38 MB to fetch, 145 MB installed; 46 s on a 2-core machine), and
# Xvfb 4 more (6 MB), as Debian's Kodi needs a display.
apt-get install -y -q --no-install-recommends kodi xvfb
