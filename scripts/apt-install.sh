#!/usr/bin/env bash
# apt-install.sh WHAT PACKAGE...: install Debian packages that the tests of WHAT need, as root
# or through sudo; without apt-get, say what to install and fail.
set -euo pipefail
what="$1"
shift
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install $* with your system's package manager ($what needs them)" >&2
    exit 1
fi
run=""
if [ "$(id -u)" != "0" ]; then
    run="sudo"
fi
echo "installing Debian's $* for $what ..."
$run apt-get update -qq
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq "$@" >/dev/null
