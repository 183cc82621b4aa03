#!/usr/bin/env bash
# Creates (once) the virtual environment of the foreign adversary: py-libp2p
# 0.8.1 from PyPI with the trio and cryptography versions it brings, kept
# apart from the system's Python. Idempotent: a venv that already imports
# libp2p 0.8.1 is left as it is. Prints how long the install took.
# Usage: tests/adversary/setup.sh VENV_DIR
set -euo pipefail
venv="${1:?usage: setup.sh VENV_DIR}"
stamp="$venv/.grove-adversary-ok"
mkdir -p "$(dirname "$venv")"
# Tests run in parallel processes: one installs, the others wait for it.
exec 9>"$venv.lock"
flock 9
if [ -e "$stamp" ] && "$venv/bin/python" -c 'import libp2p' 2>/dev/null; then
    echo "adversary venv ready at $venv (cached)" >&2
    exit 0
fi
start=$(date +%s)
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'libp2p==0.8.1'
"$venv/bin/python" -c 'import libp2p, trio, multiaddr, cryptography'
touch "$stamp"
echo "adversary venv installed at $venv in $(( $(date +%s) - start )) s" >&2
