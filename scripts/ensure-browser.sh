#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (never `playwright install`: no browser builds are
# downloaded). Missing Chromium: install it from Debian's packages when root, else say what to install and fail.
set -euo pipefail

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "Missing $CHROMIUM, needed by the browser tests (tests/browser/)." >&2
  echo "Install Debian's Chromium: sudo apt-get update && sudo apt-get install -y chromium" >&2
  exit 1
fi
echo "Installing chromium from Debian's packages..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "chromium was installed but $CHROMIUM is missing." >&2
  exit 1
fi
echo "Chromium: $("$CHROMIUM" --version 2>/dev/null || echo installed)"
