#!/bin/sh
# What the test suite needs beyond the pip packages: Debian's chromium, which the console's browser
# tests drive (never a browser build of its own). As root it is installed with apt-get; otherwise
# this stops at once with the one command to run.
set -eu
chromium="${AUN_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
    if [ ! -x "$chromium" ]; then
        echo "error: apt-get installed chromium, but $chromium is still missing" >&2
        exit 1
    fi
else
    echo "error: the console's browser tests need Debian's chromium at $chromium." >&2
    echo "Install it once with:  sudo apt-get install -y chromium   then run make test again." >&2
    exit 1
fi
