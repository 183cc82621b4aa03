#!/usr/bin/env bash
# Creates (once) a test's Python virtual environment, kept apart from the
# system's Python: pip installs the requirements, then the import check
# must pass. Idempotent: a venv whose stamp is there and whose import check
# passes is left as it is. Tests running in parallel processes wait for the
# one that installs. Prints how long an install took.
# Usage: tests/support/venv.sh VENV_DIR 'import a, b' REQUIREMENT...
set -euo pipefail
venv="${1:?usage: venv.sh VENV_DIR IMPORT_CHECK REQUIREMENT...}"
check="${2:?usage: venv.sh VENV_DIR IMPORT_CHECK REQUIREMENT...}"
shift 2
stamp="$venv/.grove-venv-ok"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -e "$stamp" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "venv ready at $venv (cached)" >&2
    exit 0
fi
start=$(date +%s)
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
"$venv/bin/python" -c "$check"
touch "$stamp"
echo "venv installed at $venv in $(( $(date +%s) - start )) s: $*" >&2
