#!/usr/bin/env bash
# Install Debian's acl (setfacl) for the job-isolation tests (tests/test_job_isolation.py):
# they let their unprivileged job users pass through the folders above the interpreter (a
# pyenv under /root, say) for the session only, rather than open those folders to everyone.
set -euo pipefail
if command -v setfacl >/dev/null 2>&1; then
    exit 0
fi
"$(dirname "$0")/apt-install.sh" "the job-isolation tests" acl
command -v setfacl
