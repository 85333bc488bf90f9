#!/usr/bin/env bash
# The system tier's services (tests marked system): a real single-node SLURM, Debian's Chromium
# and gfortran, installed with apt-get and started when missing (root only); `down` stops SLURM.
#   sudo tests/system.sh up && python -m pytest -q -m system && sudo tests/system.sh down
set -euo pipefail
here="$(dirname "$0")"
case "${1:-status}" in
  up) bash "$here/cluster/slurm.sh" status >/dev/null 2>&1 || bash "$here/cluster/slurm.sh" up
      bash "$here/browser/chromium.sh" install
      bash "$here/models/gfortran.sh" install ;;
  down) bash "$here/cluster/slurm.sh" down ;;
  status) bash "$here/cluster/slurm.sh" status && bash "$here/browser/chromium.sh" status &&
          bash "$here/models/gfortran.sh" status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
