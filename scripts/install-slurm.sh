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
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install Slurm (slurmctld, slurmd, client commands) and munge with your system's" \
         "package manager (the slurm executor's tests need them)" >&2
    exit 1
fi
run=""
if [ "$(id -u)" != "0" ]; then
    run="sudo"
fi
echo "installing Debian's slurmctld, slurmd, slurm-client and munge for the Slurm tests ..."
$run apt-get update -qq
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null
command -v slurmctld
