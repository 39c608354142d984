"""What the natural-gradient direction of trpo_atari.py costs and what it buys, per way of computing it.

The direction x solves (F + damping I) x = g by conjugate gradient, where every CG iteration is one
Fisher-vector product (FVP) through the CNN. This benchmark trains trpo_atari.py with the flags given
and, every --measure-every updates, computes the direction of the same batch and gradient several
ways, times each, and runs trpo_atari.py's own line search on each (then restores the parameters):

  - the Fisher on a subsample of the batch (the default 10%, or 25%) or on the whole batch;
  - 10 or 5 CG iterations;
  - CG warm-started from the previous update's direction (the default's, computed on the update
    before), scaled by the c that minimises the quadratic model along it: c = x0.g / x0.(F + damping I) x0.

The update itself is always the script's own, so the training run is the one the flags give. Per way:
the seconds of its FVPs and CG (the gradient and the line search's forward passes are common to all),
how often its line search succeeds and in how many trials, the whole batch's mean KL at the full
step over max_kl (1 when the quadratic model on its sample is right) and the surrogate improvement
of the accepted step. For scale, the median seconds of an update that was not measured.

    OMP_NUM_THREADS=1 python benchmarks/fvp_atari.py --out benchmarks/results/fvp_atari.json -- \\
        --env-id BreakoutNoFrameskip-v4 --num-envs 8 --max-kl 0.02 --bf16 --total-timesteps 204800
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import tyro
from torch.nn.utils import parameters_to_vector, vector_to_parameters

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import trpo_atari

# (name, fraction of the batch in the Fisher, CG iterations, warm-started)
WAYS = [
    ("10% subsample, CG 10 (default)", 0.1, 10, False),
    ("10% subsample, CG 5", 0.1, 5, False),
    ("10% subsample, CG 5, warm start", 0.1, 5, True),
    ("10% subsample, CG 10, warm start", 0.1, 10, True),
    ("25% subsample, CG 10", 0.25, 10, False),
    ("whole batch, CG 10", 1.0, 10, False),
    ("whole batch, CG 5, warm start", 1.0, 5, True),
]


def warm_conjugate_gradient(matrix_vector_product, b, iters, x0):
    """CG for A x = b from x0 scaled to the minimum of 1/2 x.A x - b.x along it (from 0 if x0.A x0
    is not positive). CG from a start x_s is CG from 0 on A y = b - A x_s, with x = x_s + y; the
    scaling costs one product, which also gives that right-hand side."""
    a_x0 = matrix_vector_product(x0)
    curvature = x0 @ a_x0
    if not curvature > 0:
        return trpo_atari.conjugate_gradient(matrix_vector_product, b, iters)
    scale = (x0 @ b) / curvature
    return scale * x0 + trpo_atari.conjugate_gradient(matrix_vector_product, b - scale * a_x0, iters)


class Probe:
    """Stands in for trpo_atari.trpo_step: measures the ways on chosen updates, then takes the script's step."""

    def __init__(self, measure_every, seed, fvp_subsample):
        self.measure_every = measure_every
        self.fvp_subsample = fvp_subsample
        self.trpo_step = trpo_atari.trpo_step
        self.generator = torch.Generator().manual_seed(seed)  # the training run's own RNG stays untouched
        self.update = 0
        self.previous_direction = None
        self.previous_entry = None
        self.plain_update_seconds = []
        self.records = []

    def direction(self, actor, fvp_obs, gradient, damping, cg_iters, x0=None):
        fisher_vector_product = trpo_atari.fisher_vector_product_fn(actor, fvp_obs)

        def damped(v):
            return fisher_vector_product(v) + damping * v

        if x0 is None:
            x = trpo_atari.conjugate_gradient(damped, gradient, cg_iters)
        else:
            x = warm_conjugate_gradient(damped, gradient, cg_iters, x0)
        return x, x @ fisher_vector_product(x)

    def __call__(self, actor, objective_and_kls_fn, fvp_obs, max_kl, args):
        entry = time.perf_counter()
        # The update before this one was plain unless it measured or remembered a direction.
        if self.previous_entry is not None and self.update % self.measure_every not in (0, self.measure_every - 1):
            self.plain_update_seconds.append(entry - self.previous_entry)
        self.previous_entry = entry
        self.update += 1
        measure = self.update % self.measure_every == 0
        remember = self.update % self.measure_every == self.measure_every - 1
        if measure or remember:
            objective, _ = objective_and_kls_fn()
            gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
        if remember:
            self.previous_direction, _ = self.direction(actor, fvp_obs, gradient, args.cg_damping, args.cg_iters)
        if measure:
            self.measure(actor, objective_and_kls_fn, fvp_obs, objective, gradient, max_kl, args)
        return self.trpo_step(actor, objective_and_kls_fn, fvp_obs, max_kl, args)

    def measure(self, actor, objective_and_kls_fn, fvp_obs, objective, gradient, max_kl, args):
        batch_obs = objective_and_kls_fn.args[1]
        old_params = parameters_to_vector(actor.parameters()).detach().clone()
        record = {"update": self.update, "max_kl": max_kl, "ways": {}}
        for name, fraction, cg_iters, warm in WAYS:
            if fraction == self.fvp_subsample:
                sample = fvp_obs  # the very sample the script's step uses
            else:
                size = max(1, int(fraction * batch_obs.shape[0]))
                sample = batch_obs[torch.randperm(batch_obs.shape[0], generator=self.generator)[:size]]
            start = time.perf_counter()
            x, curvature = self.direction(
                actor, sample, gradient, args.cg_damping, cg_iters, self.previous_direction if warm else None
            )
            seconds = time.perf_counter() - start
            full_step = torch.sqrt(2 * max_kl / curvature) * x
            with torch.no_grad():
                vector_to_parameters(old_params + full_step, actor.parameters())
                full_step_kl = objective_and_kls_fn()[1].mean().item()
            vector_to_parameters(old_params, actor.parameters())
            search = trpo_atari.line_search(actor, objective_and_kls_fn, full_step, objective.item(), max_kl, args)
            vector_to_parameters(old_params, actor.parameters())
            record["ways"][name] = {
                "seconds": seconds,
                "success": bool(search["line_search_success"]),
                "trials": search["line_search_iters"],
                "full_step_kl_ratio": full_step_kl / max_kl,
                "step_fraction": search["step_fraction"],
                "kl": search["kl"],
                "improvement": search["actual_improvement"],
            }
        self.records.append(record)
        print(f"measured update {self.update}", file=sys.stderr, flush=True)


def fisher_vector_products(cg_iters, warm):
    """Products per direction: one per CG iteration, one for x.F x, and one for the warm start's scale."""
    return cg_iters + 1 + int(warm)


def report(records, plain_update_seconds, threads):
    """The table: per way, medians and means over the measured updates. An update's seconds with a
    way are the unmeasured update's median with the default's direction time swapped for the way's."""
    median_update = statistics.median(plain_update_seconds) if plain_update_seconds else float("nan")
    default = WAYS[0][0]
    lines = [
        (
            f"{len(records)} measured updates (one in {records[1]['update'] - records[0]['update']}, the last at "
            f"update {records[-1]['update']}); torch threads: {threads}; an unmeasured update takes "
            f"{median_update:.2f} s (median: rollout, step and critic)."
        ),
        "",
        (
            "| direction | FVPs | seconds (median) | vs default | line searches ok | trials (mean) | "
            "full-step KL / max_kl (median) | accepted KL (median) | surrogate improvement, mean (vs default +- s.e.) | "
            "improvement per second of update (vs default) |"
        ),
        "|-|-|-|-|-|-|-|-|-|-|",
    ]
    default_seconds = statistics.median(r["ways"][default]["seconds"] for r in records)
    default_improvement = statistics.mean(r["ways"][default]["improvement"] for r in records)
    default_rate = default_improvement / median_update
    for name, _, cg_iters, warm in WAYS:
        ways = [r["ways"][name] for r in records]
        seconds = statistics.median(w["seconds"] for w in ways)
        improvement = statistics.mean(w["improvement"] for w in ways)
        # The standard error of the ratio from the paired (same batch) differences.
        differences = [w["improvement"] - r["ways"][default]["improvement"] for w, r in zip(ways, records)]
        standard_error = statistics.stdev(differences) / len(differences) ** 0.5 / default_improvement
        rate = improvement / (median_update - default_seconds + seconds)
        accepted = [w["kl"] for w in ways if w["success"]]
        lines.append(
            f"| {name} | {fisher_vector_products(cg_iters, warm)} | {seconds:.2f} | {seconds / default_seconds:.2f}x | "
            f"{len(accepted)}/{len(ways)} | {statistics.mean(w['trials'] for w in ways):.1f} | "
            f"{statistics.median(w['full_step_kl_ratio'] for w in ways):.2f} | "
            f"{statistics.median(accepted) if accepted else float('nan'):.4f} | "
            f"{improvement:.2e} ({improvement / default_improvement:.2f}x +- {standard_error:.2f}) | "
            f"{rate / default_rate:.2f}x |"
        )
    return "\n".join(lines)


def probe_parser(doc):
    """The parser of a probe's options, --out and --report so far (each probe adds its own): they come
    before `--`, the trpo_atari.py flags after it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0], usage="%(prog)s [options] -- TRPO_ATARI_FLAGS")
    parser.add_argument("--out", help="write every measurement to this JSON file")
    parser.add_argument("--report", help="print the table of a JSON file written with --out, without training")
    return parser


def split_argv(parser):
    """This benchmark's options, parsed from the arguments before `--`, and the trpo_atari.py flags after it."""
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def train_with_probe(probe, training_args):
    """trpo_atari.main(training_args) with trpo_step replaced by probe, in a scratch folder (its logs are
    not kept); a --resume path relative to the caller's folder is made absolute first."""
    if training_args.resume:
        training_args.resume = os.path.abspath(training_args.resume)
    trpo_atari.trpo_step = probe
    caller_folder = os.getcwd()
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)
        try:
            trpo_atari.main(training_args)
        finally:
            os.chdir(caller_folder)


def main():
    parser = probe_parser(__doc__)
    parser.add_argument("--measure-every", type=int, default=10, help="measure every this many updates (at least 2)")
    args, training_argv = split_argv(parser)
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        print(report(saved["records"], saved["plain_update_seconds"], saved["threads"]))
        return
    if args.measure_every < 2:
        parser.error("--measure-every must be at least 2: the update before a measured one gives the warm start")
    training_args = tyro.cli(trpo_atari.Args, args=training_argv)
    probe = Probe(args.measure_every, training_args.seed, trpo_atari.FVP_SUBSAMPLE)
    train_with_probe(probe, training_args)
    threads = torch.get_num_threads()
    if args.out:
        with open(args.out, "w") as f:
            saved = {"argv": training_argv, "threads": threads, "plain_update_seconds": probe.plain_update_seconds}
            json.dump({**saved, "records": probe.records}, f, indent=1)
    print(report(probe.records, probe.plain_update_seconds, threads))


if __name__ == "__main__":
    main()
