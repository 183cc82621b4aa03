#!/usr/bin/env bash
# Creates (once) the virtual environment of the foreign adversary: py-libp2p
# 0.8.1 from PyPI with the trio and cryptography versions it brings
# (tests/support/venv.sh: idempotent, one install among parallel tests).
# Usage: tests/adversary/setup.sh VENV_DIR
set -euo pipefail
exec "$(dirname "$0")/../support/venv.sh" "${1:?usage: setup.sh VENV_DIR}" \
    'import libp2p, trio, multiaddr, cryptography' 'libp2p==0.8.1'
