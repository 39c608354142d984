"""How well trpo_atari.py's step direction generalizes: its improvement on held-out games at equal KL.

The line search accepts a step by the surrogate of the batch the step was computed from, so a
direction that fits that batch's noise passes it as well as one that improves the policy. This
benchmark trains (or resumes) trpo_atari.py with the flags given and, every --measure-every updates,
splits the batch by env: the first half of the envs gives the gradient and each way's direction; the
step along a direction is scaled until the mean KL on that half equals --kl; the surrogate (entropy
bonus included) is then measured on the other half's states, actions and advantages, games the
direction never saw, played by the same policy. Its improvement there estimates the step's
improvement of the policy; the first half's is what the line search sees. Ways: the script's
direction, (F + damping I)^-1 g by 10 CG iterations with F on as many states as the script's
subsample, at its default damping 0.1 and larger ones; F on the whole half; the gradient g itself.

    OMP_NUM_THREADS=1 python benchmarks/directions_atari.py --out benchmarks/results/directions_atari.json -- \\
        --env-id BreakoutNoFrameskip-v4 --seed 2 --num-envs 8 --max-kl 0.02 --bf16 \\
        --total-timesteps 1024000 --resume CHECKPOINT --eval-episodes 1

After measuring, the script's own step runs on the whole batch, so the training run is the one the
flags give.
"""

import json
import math
import os
import statistics
import sys
from functools import partial
from pathlib import Path

import torch
import tyro
from torch.nn.utils import parameters_to_vector, vector_to_parameters

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import trpo_atari
from benchmarks.fvp_atari import probe_parser, split_argv, train_with_probe

# (name, Fisher states: "subsample" as many as the script's or "half" all of the first half, damping);
# None for the gradient itself. The first is the script's direction at its default damping.
WAYS = [
    ("subsample, damping 0.1 (default)", "subsample", 0.1),
    ("subsample, damping 1", "subsample", 1.0),
    ("subsample, damping 10", "subsample", 10.0),
    ("subsample, damping 100", "subsample", 100.0),
    ("half the batch, damping 0.1", "half", 0.1),
    ("gradient", None, None),
]


def step_size_for_kl(kl_at, curvature, target_kl, iters=20):
    """The largest step size s with kl_at(s) <= target_kl, by bisection from the quadratic model's
    sqrt(2 target_kl / curvature) (the KL need not grow quadratically far from the old policy)."""
    low, high = 0.0, math.sqrt(2 * target_kl / curvature) if curvature > 0 else 1.0
    for _ in range(64):
        if kl_at(high) > target_kl:
            break
        low, high = high, 2 * high
    for _ in range(iters):
        middle = (low + high) / 2
        low, high = (middle, high) if kl_at(middle) <= target_kl else (low, middle)
    return low


def damped(fisher_vector_product, damping, vector):
    return fisher_vector_product(vector) + damping * vector


class Probe:
    """Stands in for trpo_atari.trpo_step: measures the ways on chosen updates, then takes the script's step."""

    def __init__(self, measure_every, seed, num_envs, target_kl):
        self.measure_every = measure_every
        self.num_envs = num_envs
        self.target_kl = target_kl
        self.trpo_step = trpo_atari.trpo_step
        self.generator = torch.Generator().manual_seed(seed)  # the training run's own RNG stays untouched
        self.update = 0
        self.records = []

    def __call__(self, actor, objective_and_kls_fn, fvp_obs, *step_args):
        self.update += 1
        if self.update % self.measure_every == 0:
            self.measure(actor, objective_and_kls_fn, fvp_obs.shape[0])
        return self.trpo_step(actor, objective_and_kls_fn, fvp_obs, *step_args)

    def measure(self, actor, objective_and_kls_fn, subsample_size):
        _, obs, actions, old_logprobs, advantages, ent_coef, old_logits = objective_and_kls_fn.args
        rows = torch.arange(obs.shape[0])  # row t * num_envs + env
        first_half = rows[rows % self.num_envs < self.num_envs // 2]
        second_half = rows[rows % self.num_envs >= self.num_envs // 2]

        def objective_and_kls(idx):
            return trpo_atari.surrogate_and_state_kls(
                actor, obs[idx], actions[idx], old_logprobs[idx], advantages[idx], ent_coef, old_logits[idx]
            )

        params = list(actor.parameters())
        old_params = parameters_to_vector(params).detach().clone()
        objective, _ = objective_and_kls(first_half)
        gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, params)])
        with torch.no_grad():
            old_objectives = objective.item(), objective_and_kls(second_half)[0].item()
        subsample = obs[first_half[torch.randperm(len(first_half), generator=self.generator)[:subsample_size]]]
        fisher_vector_products = {
            "subsample": trpo_atari.fisher_vector_product_fn(actor, subsample),
            "half": trpo_atari.fisher_vector_product_fn(actor, obs[first_half]),
        }

        def kl_at(direction, step_size):
            vector_to_parameters(old_params + step_size * direction, params)
            return objective_and_kls(first_half)[1].mean().item()

        record = {"update": self.update, "ways": {}}
        for name, states, damping in WAYS:
            if states is None:
                direction = gradient
            else:
                fvp = fisher_vector_products[states]
                direction = trpo_atari.conjugate_gradient(partial(damped, fvp, damping), gradient, 10)
            curvature = (direction @ fisher_vector_products["half"](direction)).item()
            with torch.no_grad():
                step_size = step_size_for_kl(partial(kl_at, direction), curvature, self.target_kl)
                vector_to_parameters(old_params + step_size * direction, params)
                (seen, seen_kls), (held_out, held_out_kls) = map(objective_and_kls, (first_half, second_half))
            vector_to_parameters(old_params, params)
            record["ways"][name] = {
                "kl": seen_kls.mean().item(),
                "max_state_kl": seen_kls.max().item(),
                "held_out_kl": held_out_kls.mean().item(),
                "improvement": seen.item() - old_objectives[0],
                "held_out_improvement": held_out.item() - old_objectives[1],
            }
        self.records.append(record)
        print(f"measured update {self.update}", file=sys.stderr, flush=True)


def report(records, target_kl):
    """The table: per way, means over the measured updates and the paired standard error against the default."""
    default = WAYS[0][0]
    lines = [
        (
            f"{len(records)} measured updates (one in {records[1]['update'] - records[0]['update']}, the last at "
            f"update {records[-1]['update']}); every step scaled to a mean KL of {target_kl} on the games it was "
            "computed from."
        ),
        "",
        (
            "| direction | improvement on its own games (mean) | on held-out games (mean) | held-out vs default "
            "(+- s.e.) | held-out / own | largest per-state KL (median) | held-out mean KL (median) |"
        ),
        "|-|-|-|-|-|-|-|",
    ]
    default_held_out = [r["ways"][default]["held_out_improvement"] for r in records]
    for name, *_ in WAYS:
        ways = [r["ways"][name] for r in records]
        own = statistics.mean(w["improvement"] for w in ways)
        held_out = statistics.mean(w["held_out_improvement"] for w in ways)
        differences = [w["held_out_improvement"] - d for w, d in zip(ways, default_held_out)]
        standard_error = statistics.stdev(differences) / len(differences) ** 0.5
        lines.append(
            f"| {name} | {own:.2e} | {held_out:.2e} | {held_out - statistics.mean(default_held_out):+.2e} "
            f"(+- {standard_error:.1e}) | {held_out / own:.2f} | "
            f"{statistics.median(w['max_state_kl'] for w in ways):.3f} | "
            f"{statistics.median(w['held_out_kl'] for w in ways):.4f} |"
        )
    return "\n".join(lines)


def main():
    parser = probe_parser(__doc__)
    parser.add_argument("--measure-every", type=int, default=2, help="measure every this many updates")
    parser.add_argument("--kl", type=float, default=0.005, help="the mean KL every step is scaled to")
    args, training_argv = split_argv(parser)
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        print(report(saved["records"], saved["kl"]))
        return
    training_args = tyro.cli(trpo_atari.Args, args=training_argv)
    if training_args.num_envs % 2:
        parser.error("the batch is split by env into two halves: --num-envs must be even")
    if args.measure_every < 1 or not args.kl > 0:
        parser.error("--measure-every must be at least 1 and --kl positive")
    probe = Probe(args.measure_every, training_args.seed, training_args.num_envs, args.kl)
    train_with_probe(probe, training_args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"argv": training_argv, "kl": args.kl, "records": probe.records}, f, indent=1)
    print(report(probe.records, args.kl))


if __name__ == "__main__":
    main()
