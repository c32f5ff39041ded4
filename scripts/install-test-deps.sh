#!/bin/sh
# What the test suite needs beyond the pip packages, from Debian's packages:
#   chromium    the console's browser tests drive it (never a browser build of its own);
#   postgresql  the tests start a throwaway PostgreSQL server of their own (initdb, pg_ctl);
#   valgrind    the instruction gate counts a delivery's instructions with its callgrind
#               (tests/test_instruction_gate.py, bench/instruction_gate.py);
#   prometheus  a real Prometheus server scrapes the commands' /metrics in the operating tests;
#   iproute2    the tests across network namespaces make them with `ip netns` (as root only:
#               elsewhere those tests are reported as not run, with the reason).
# As root the missing ones are installed with apt-get, in one go; otherwise this stops at once
# with the one command to run.
set -eu
chromium="${AUN_CHROMIUM:-/usr/bin/chromium}"
prometheus="${AUN_PROMETHEUS:-/usr/bin/prometheus}"
root=false
[ "$(id -u)" = 0 ] && root=true

has_postgres() {
    if [ -n "${AUN_POSTGRES_BIN:-}" ]; then
        [ -x "$AUN_POSTGRES_BIN/initdb" ] && [ -x "$AUN_POSTGRES_BIN/pg_ctl" ]
        return
    fi
    for bin in /usr/lib/postgresql/*/bin; do
        [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && return 0
    done
    return 1
}

missing=""
[ -x "$chromium" ] || missing="$missing chromium"
has_postgres || missing="$missing postgresql"
command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"
[ -x "$prometheus" ] || missing="$missing prometheus"
if $root && ! command -v ip >/dev/null 2>&1; then
    missing="$missing iproute2"
fi
missing="${missing# }"
if [ -z "$missing" ]; then
    exit 0
fi
if $root; then
    apt-get update
    # shellcheck disable=SC2086  # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
    if [ ! -x "$chromium" ]; then
        echo "error: apt-get installed chromium, but $chromium is still missing" >&2
        exit 1
    fi
    if [ ! -x "$prometheus" ]; then
        echo "error: apt-get installed prometheus, but $prometheus is still missing" >&2
        exit 1
    fi
    if ! has_postgres; then
        echo "error: apt-get installed postgresql, but no /usr/lib/postgresql/*/bin/initdb is there" >&2
        exit 1
    fi
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "error: apt-get installed valgrind, but no valgrind is on PATH" >&2
        exit 1
    fi
else
    echo "error: the tests need Debian's $missing (the console's browser tests drive chromium;" >&2
    echo "the PostgreSQL tests start a throwaway server with postgresql's initdb and pg_ctl;" >&2
    echo "the instruction gate counts instructions with valgrind's callgrind; the operating tests" >&2
    echo "scrape the commands' metrics with prometheus)." >&2
    echo "Install once with:  sudo apt-get install -y $missing   then run make test again." >&2
    exit 1
fi
