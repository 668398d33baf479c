#!/usr/bin/env bash
# Install Debian's Slurm and munge for the slurm executor's tests (tests/test_service_slurm.py),
# if they are not there yet. The tests start their own slurmctld and slurmd on this machine
# (andreas.executors.slurm_sandbox); nothing is started or enabled here.
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
        && command -v sbatch >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
    exit 0
fi
"$(dirname "$0")/apt-install.sh" "the Slurm executor's tests" slurmctld slurmd slurm-client munge
command -v slurmctld
