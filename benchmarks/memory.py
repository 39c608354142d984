"""Peak resident memory (RSS) of each script at its defaults, over one rollout and update.

Memory does not depend on how busy the machine is, so this can run beside other jobs.

    python benchmarks/memory.py
"""

import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# script -> its default batch (num_envs * num_steps): one full rollout and update
SCRIPTS = {
    "trpo_discrete.py": 4 * 512,
    "trpo_continuous.py": 4 * 512,
    "ppo_continuous.py": 4 * 512,
    "ppo_atari.py": 8 * 128,
    "trpo_atari.py": 8 * 128,
}


def peak_rss_mib(command):
    """Run a command to the end and return its peak RSS in MiB (from the kernel's rusage)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as cwd:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stderr = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command} failed: {stderr.decode()[-2000:]}")
    return usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main():
    print("| script | peak RSS (MiB), defaults, one update |")
    print("|-|-|")
    for script, batch_size in SCRIPTS.items():
        command = [sys.executable, os.path.join(REPO, script), f"--total-timesteps={batch_size}"]
        print(f"| {script} | {peak_rss_mib([*command, '--eval-episodes=1']):.0f} |", flush=True)


if __name__ == "__main__":
    main()
