#!/usr/bin/env bash
# Creates (once) the virtual environment that writes tiny test models:
# llama.cpp's own GGUF writer (PyPI `gguf`) and numpy
# (tests/support/venv.sh: idempotent, one install among parallel tests).
# Usage: tests/archs/setup.sh VENV_DIR
set -euo pipefail
exec "$(dirname "$0")/../support/venv.sh" "${1:?usage: setup.sh VENV_DIR}" \
    'import gguf, numpy' 'gguf==0.19.0' 'numpy<3'
