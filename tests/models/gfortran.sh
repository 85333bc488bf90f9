#!/usr/bin/env bash
# Debian's gfortran for the Fortran tests (tests/models/test_command_files.py, marker fortran):
# installs it when missing (root only).
#   tests/models/gfortran.sh install | status
set -euo pipefail
case "${1:-status}" in
  status) command -v gfortran >/dev/null && gfortran --version | head -1 ;;
  install)
    if ! command -v gfortran >/dev/null; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends gfortran >/dev/null
    fi
    gfortran --version | head -1 ;;
  *) echo "usage: $0 install|status" >&2; exit 2 ;;
esac
