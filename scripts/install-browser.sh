#!/usr/bin/env bash
# Install Debian's Chromium for the dashboard's browser tests (tests/test_ui.py), if it is not
# there yet. Playwright drives this browser (executable_path); it downloads none of its own.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
"$(dirname "$0")/apt-install.sh" "the dashboard's browser tests" chromium
command -v chromium
