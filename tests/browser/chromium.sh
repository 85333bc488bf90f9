#!/usr/bin/env bash
# Debian's Chromium for the browser tests (tests/browser): installs it when missing (root only).
#   tests/browser/chromium.sh install | status
set -euo pipefail
case "${1:-status}" in
  status) test -x /usr/bin/chromium && /usr/bin/chromium --version ;;
  install)
    if ! test -x /usr/bin/chromium; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    fi
    /usr/bin/chromium --version ;;
  *) echo "usage: $0 install|status" >&2; exit 2 ;;
esac
