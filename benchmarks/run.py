"""Train an implementation over a grid of envs x seeds, in parallel, resuming where a grid stopped.

IMPL is one of our scripts (trpo_discrete.py, trpo_continuous.py, ppo_continuous.py,
ppo_atari.py, trpo_atari.py) or a reference: sb3:trpo (sb3-contrib) or sb3:ppo
(stable-baselines3), both with the rl-baselines3-zoo hyperparameters (benchmarks/reference.py).
Each run gets its own folder, {work}/{env}/{label}/seed{seed}/, holding command.txt, machine.txt
(the CPU and the versions of the packages that set the numbers), stdout.log and the TensorBoard
logs under runs/; a run whose stdout.log ends with an evaluation is skipped. A finished run's
compact summary (benchmarks/summary.py) goes to benchmarks/results/runs/{env}/{label}/seed{seed}.json
(--summaries): that, not the logs, is what the repo keeps of a run.
A run that stopped early continues from its runs/**/checkpoint.pt if it saved one (the Atari
scripts with --checkpoint-every): the command gets --resume; command.txt, machine.txt and
stdout.log are appended to.
Jobs run with one torch thread each unless --threads says otherwise (two torch processes with
default threads oversubscribe a 2-core machine). --nproc N starts each run through torchrun with N
processes of one thread each (the *_multigpu.py scripts).

    python benchmarks/run.py trpo_discrete.py --envs CartPole-v1 Acrobot-v1 --seeds 1 2 3
    python benchmarks/run.py sb3:trpo --envs CartPole-v1 --seeds 1 2 3
    python benchmarks/run.py trpo_continuous.py --envs HalfCheetah-v5 -- --total-timesteps 1000000
    python benchmarks/run.py trpo_atari.py --envs BreakoutNoFrameskip-v4 --seeds 1 --label trpo_atari-kl0.01 -- --max-kl 0.01
    python benchmarks/run.py ppo_atari.py --envs PongNoFrameskip-v4 --seeds 1 -- --checkpoint-every 20
    python benchmarks/run.py ppo_atari_multigpu.py --envs BreakoutNoFrameskip-v4 --seeds 1 --jobs 1 --nproc 2
"""

import argparse
import importlib.metadata
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.summary import summarize_run, write_summary

EVAL_LINE = re.compile(r"^eval: mean return (-?[\d.]+)", re.MULTILINE)


def label_of(impl):
    """The name an implementation has in folders, tables and plots."""
    return {"sb3:trpo": "sb3-contrib-trpo", "sb3:ppo": "sb3-ppo"}.get(impl, impl.removesuffix(".py"))


def command_for(impl, env_id, seed, extra, nproc=1):
    if impl.startswith("sb3:"):
        script = [str(REPO / "benchmarks" / "reference.py"), f"--algo={impl[4:]}"]
    else:
        script = [str(REPO / impl)]
    if nproc > 1:
        with socket.socket() as sock:  # a free port for this run's rendezvous
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        script = ["-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--master-port={port}", *script]
    return [sys.executable, *script, f"--env-id={env_id}", f"--seed={seed}", *extra]


# Floating-point results differ across CPUs and library versions, so each run records both.
PACKAGES = ("torch", "numpy", "gymnasium", "mujoco", "ale-py", "stable-baselines3", "sb3-contrib")


def machine_line():
    """The CPU model, its vector instructions and the versions of python and of the installed PACKAGES, on one line."""
    cpu = platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        text = cpuinfo.read_text()
        names = re.findall(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        # A virtual machine's model name may be only the vendor's ("AMD EPYC"): CPUs of two
        # generations with one name and the same flags below still give other returns.
        generation = re.search(r"^cpu family\s*:\s*(\d+)$.*?^model\s*:\s*(\d+)$", text, re.MULTILINE | re.DOTALL)
        flag_lines = re.findall(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
        flags = set(flag_lines[0].split()) if flag_lines else set()
        vector_units = [flag for flag in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if flag in flags]
        name = names[0].strip() if names else cpu
        if generation:
            name += f" (family {generation.group(1)}, model {generation.group(2)})"
        cpu = ", ".join([name, *vector_units])
    versions = [f"python=={platform.python_version()}"]
    for package in PACKAGES:
        try:
            versions.append(f"{package}=={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return f"cpu: {cpu} ({os.cpu_count()} cores); " + " ".join(versions)


def run_dir(work, env_id, label, seed):
    return Path(work) / env_id.replace("/", "-") / label / f"seed{seed}"


def code_commit(impl):
    """The commit of the code a run uses, marked +modified where the script differs from it."""
    script = "benchmarks/reference.py" if impl.startswith("sb3:") else impl

    def git(*words):
        return subprocess.run(["git", *words], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "HEAD")
    return (commit + ("+modified" if git("status", "--porcelain", "--", script) else "")) or None


def run_one(impl, env_id, seed, extra, work, label, nproc=1, threads=1, summaries=None):
    folder = run_dir(work, env_id, label, seed)
    log_path = folder / "stdout.log"
    if log_path.exists() and EVAL_LINE.search(log_path.read_text()):
        return folder, "skipped (done)"
    folder.mkdir(parents=True, exist_ok=True)
    command = command_for(impl, env_id, seed, extra, nproc)
    checkpoints = sorted(folder.glob("runs/**/checkpoint.pt"))
    if checkpoints:
        command.append(f"--resume={checkpoints[-1].relative_to(folder)}")
    mode = "a" if checkpoints else "w"
    with (folder / "command.txt").open(mode) as command_file:
        command_file.write(shlex.join(command[1:]) + "\n")
    with (folder / "machine.txt").open(mode) as machine_file:
        machine_file.write(machine_line() + "\n")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with log_path.open(mode) as log:
        result = subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if summaries and EVAL_LINE.search(log_path.read_text()):
        write_summary(summarize_run(folder, label, code_commit(impl)), summaries)
    return folder, f"exit {result.returncode}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage="%(prog)s IMPL --envs ... [-- FLAGS]")
    parser.add_argument("impl", help="one of our scripts, or sb3:trpo / sb3:ppo")
    parser.add_argument("--envs", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", default=str(REPO / "benchmarks" / "work"))
    parser.add_argument("--label", help="the runs' folder and name in the report (default: from IMPL)")
    parser.add_argument("--nproc", type=int, default=1, help="processes per run, started by torchrun")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--summaries", default=str(REPO / "benchmarks" / "results" / "runs"), help="where summaries go")
    # Everything after a lone "--" goes to every run unchanged.
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not args.impl.startswith("sb3:") and not (REPO / args.impl).exists():
        sys.exit(f"run.py: error: no script {args.impl!r} in {REPO}")

    label = args.label or label_of(args.impl)
    grid = [(env_id, seed) for env_id in args.envs for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(
                run_one, args.impl, env_id, seed, extra, args.work, label, args.nproc, args.threads, args.summaries
            )
            for env_id, seed in grid
        ]
        for future in futures:
            folder, status = future.result()
            log = (folder / "stdout.log").read_text() if (folder / "stdout.log").exists() else ""
            match = EVAL_LINE.search(log)
            print(f"{folder}: {status}, eval {match.group(1) if match else 'missing'}", flush=True)


if __name__ == "__main__":
    main()
