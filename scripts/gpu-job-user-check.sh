#!/usr/bin/env bash
# A job run as an unprivileged OS user still reaches the GPU: the launch wrapper (as root, as
# the service starts it) drops a real CUDA job to a fresh system account, which prints its uid,
# what torch sees and the result of a matrix product on the GPU (docs/reliability.md, "What a
# job can reach"). Needs root, an NVIDIA GPU and torch with CUDA; about 30 s.
#
#   scripts/gpu-job-user-check.sh            # PYTHON: the interpreter with torch (python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${PYTHON:-python3}
user=andreas-gpu-check
id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
work=$(mktemp -d /tmp/andreas-gpu-check.XXXXXX)
chmod 711 "$work"
echo "== device nodes and interpreter, as the job user will find them"
ls -l /dev/nvidia* 2>/dev/null | head -5 || true
py=$(command -v "$py")  # the path as given: a virtual environment's python is a link
ls -ld "$(dirname "$py")" "$(readlink -f "$py")"
echo "== the job, started through the wrapper as the service starts it"
job='import os, torch
print("uid", os.getuid(), "euid", os.geteuid(), "user", os.environ.get("USER"))
print("cuda", torch.cuda.is_available(), "devices", torch.cuda.device_count())
x = torch.randn(4096, 4096, device="cuda")
print("matmul on", torch.cuda.get_device_name(0), "finite", bool(torch.isfinite(x @ x).all()))'
(cd "$work" && PYTHONPATH="$repo/src" "$py" -m andreas.executors.launch --run-dir "$work/run" \
    --lock "$work/lock" --log "$work/log" --user "$user" -- \
    "$py" -c "$job") || true
cat "$work/log"
echo "== exit record (written by the wrapper, as root)"
cat "$work/run/exit.json"; echo
stat -c '%U %a %n' "$work/run" "$work/run/exit.json" "$work/log"
if grep -q "^uid $(id -u "$user") " "$work/log" && grep -q "finite True" "$work/log"; then
    echo "gpu-job-user-check: ok"
else
    echo "gpu-job-user-check: FAILED (see the log above)" >&2
    exit 1
fi
