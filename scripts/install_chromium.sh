#!/usr/bin/env bash
# Install headless Chromium and its WebDriver (Debian packages `chromium` and `chromium-driver`) for
# the HTML report screenshot test (tests/test_html_report.py) and the UI test that drives the Dagster
# UI through Selenium (tests/test_ui_lineage.py). Idempotent: does nothing when /usr/bin/chromium
# and /usr/bin/chromedriver already exist. Needs root and Debian's package mirror. Quiet: apt/dpkg
# output goes to a log, shown only on failure.
set -uo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

LOG="$(mktemp -t install_chromium.XXXXXX.log)"

fail() {
    echo "install_chromium.sh: $1" >&2
    if [ -s "$LOG" ]; then
        echo "--- last lines of $LOG ---" >&2
        tail -n 20 "$LOG" >&2
    fi
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "must run as root to apt-get install chromium"
command -v apt-get >/dev/null || fail "apt-get not found (this script expects Debian)"

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >>"$LOG" 2>&1 || fail "apt-get update failed (is Debian's package mirror reachable?)"
apt-get install -y -qq chromium chromium-driver >>"$LOG" 2>&1 || fail "apt-get install -y chromium chromium-driver failed"
[ -x /usr/bin/chromium ] || fail "chromium package installed but /usr/bin/chromium is missing"
[ -x /usr/bin/chromedriver ] || fail "chromium-driver package installed but /usr/bin/chromedriver is missing"
rm -f "$LOG"
