#!/usr/bin/env bash
# Install Debian's Chromium for the dashboard's browser tests (tests/test_ui.py), if it is not
# there yet. Playwright drives this browser (executable_path); it downloads none of its own.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install Chromium with your system's package manager (the UI tests need it)" >&2
    exit 1
fi
run=""
if [ "$(id -u)" != "0" ]; then
    run="sudo"
fi
echo "installing Debian's chromium for the dashboard's browser tests ..."
$run apt-get update -qq
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq chromium >/dev/null
command -v chromium
