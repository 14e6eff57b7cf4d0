#!/usr/bin/env bash
# Install the T3 sandbox's boundary (sabot/sandbox.py): Debian's bubblewrap, and libseccomp2 for its
# seccomp filter. Idempotent: does nothing when bwrap is already on PATH. Needs root (or sudo) and
# Debian's package mirror. Quiet: apt output goes to a log, shown only on failure.
set -uo pipefail

if command -v bwrap >/dev/null && ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
    exit 0
fi

LOG="$(mktemp -t install_bubblewrap.XXXXXX.log)"

fail() {
    echo "install_bubblewrap.sh: $1" >&2
    if [ -s "$LOG" ]; then
        echo "--- last lines of $LOG ---" >&2
        tail -n 20 "$LOG" >&2
    fi
    exit 1
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || fail "must run as root (or with sudo) to apt-get install bubblewrap"
    SUDO="sudo"
fi
command -v apt-get >/dev/null || fail "apt-get not found: install bubblewrap and libseccomp2 with your package manager"

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >>"$LOG" 2>&1 || fail "apt-get update failed (is Debian's package mirror reachable?)"
$SUDO apt-get install -y -qq bubblewrap libseccomp2 >>"$LOG" 2>&1 || fail "apt-get install -y bubblewrap libseccomp2 failed"
command -v bwrap >/dev/null || fail "bubblewrap installed but bwrap is not on PATH"
rm -f "$LOG"
