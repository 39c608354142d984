#!/usr/bin/env bash
# What to run the day a GPU is lent: the test suite (its cuda tests run on the GPU), then steps/s of
# ppo_atari.py and trpo_atari.py (float32 and --bf16; 8, 16, 32 and 64 envs; 100k agent steps each)
# and of trpo_continuous.py on HalfCheetah-v5 (100k steps), as one markdown table in OUT.
#
#     bash benchmarks/gpu_check.sh [OUT]        # OUT: benchmarks/results/gpu_check.md by default
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${1:-benchmarks/results/gpu_check.md}
if ! python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check.sh: no GPU visible to torch, nothing to check"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python -m pytest -q | tail -n 1 > "$work/suite.txt"

# Steps/s of one run: the last progress line's sps.
sps() {
    (cd "$work" && python "$repo/$1" "${@:2}" --eval-episodes 1) | grep -o 'sps *[0-9]*' | tail -n 1 | grep -o '[0-9]*$'
}
{
    python -c 'import torch; print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}")'
    echo "Test suite: $(cat "$work/suite.txt")"
    echo
    echo "| script | env | precision | envs | steps/s |"
    echo "|-|-|-|-|-|"
    for script in ppo_atari.py trpo_atari.py; do
        for precision in float32 bf16; do
            flag=$([ "$precision" = bf16 ] && echo --bf16 || true)
            for envs in 8 16 32 64; do
                echo "| $script | BreakoutNoFrameskip-v4 | $precision | $envs | $(sps "$script" --num-envs "$envs" --total-timesteps 100000 $flag) |"
            done
        done
    done
    echo "| trpo_continuous.py | HalfCheetah-v5 | float32 | 4 | $(sps trpo_continuous.py --total-timesteps 100000) |"
} > "$out"
cat "$out"
