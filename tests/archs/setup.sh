#!/usr/bin/env bash
# Creates (once) the virtual environment that writes tiny test models:
# llama.cpp's own GGUF writer (PyPI `gguf`) and numpy. Idempotent; tests
# running in parallel wait for the one that installs.
# Usage: tests/archs/setup.sh VENV_DIR
set -euo pipefail
venv="${1:?usage: setup.sh VENV_DIR}"
stamp="$venv/.grove-gguf-ok"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -e "$stamp" ] && "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'gguf==0.19.0' 'numpy<3'
"$venv/bin/python" -c 'import gguf, numpy'
touch "$stamp"
