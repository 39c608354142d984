"""Time of one critic step of trpo_continuous.py on HalfCheetah's sizes (17 inputs, 64-64 tanh,
128-sample minibatches, Adam at lr 1e-3): through torch as the script does it (forward, loss check,
backward, fused Adam), against the same step written out in numpy (forward, backward and Adam by
hand). Alternating rounds, one thread; prints the median microseconds per step of each.

    OMP_NUM_THREADS=1 python benchmarks/critic_step.py
"""

import math
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import trpo_continuous

OBS_DIM, BATCH, MINIBATCH, LR = 17, 2048, 128, 1e-3


def torch_epoch(critic, optimizer, obs, returns):
    permutation = torch.randperm(BATCH)
    for start in range(0, BATCH, MINIBATCH):
        idx = permutation[start : start + MINIBATCH]
        value_loss = 0.5 * ((critic(obs[idx]) - returns[idx]) ** 2).mean()
        if not math.isfinite(value_loss.item()):
            continue
        optimizer.zero_grad()
        value_loss.backward()
        optimizer.step()


def numpy_epoch(params, adam_moments, step_count, obs, returns):
    """params = [W1, b1, W2, b2, W3, b3] as in nn.Linear; one Adam step per minibatch."""
    permutation = np.random.permutation(BATCH)
    for start in range(0, BATCH, MINIBATCH):
        idx = permutation[start : start + MINIBATCH]
        x, target = obs[idx], returns[idx]
        w1, b1, w2, b2, w3, b3 = params
        h1 = np.tanh(x @ w1.T + b1)
        h2 = np.tanh(h1 @ w2.T + b2)
        error = (h2 @ w3.T + b3)[:, 0] - target
        if not math.isfinite(0.5 * float(error @ error) / len(target)):
            continue
        d_value = (error / len(target))[:, None]
        d_h2 = (d_value @ w3) * (1 - h2 * h2)
        d_h1 = (d_h2 @ w2) * (1 - h1 * h1)
        grads = [d_h1.T @ x, d_h1.sum(0), d_h2.T @ h1, d_h2.sum(0), d_value.T @ h2, d_value.sum(0)]
        step_count[0] += 1
        bias_correction1, bias_correction2 = 1 - 0.9 ** step_count[0], 1 - 0.999 ** step_count[0]
        for param, grad, (mean, square) in zip(params, grads, adam_moments):
            mean += 0.1 * (grad - mean)
            square += 0.001 * (grad * grad - square)
            param -= LR * (mean / bias_correction1) / (np.sqrt(square / bias_correction2) + 1e-8)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    critic = trpo_continuous.Critic(OBS_DIM, 64)
    optimizer = torch.optim.Adam(critic.parameters(), lr=LR, fused=True)
    obs, returns = torch.randn(BATCH, OBS_DIM), torch.randn(BATCH)
    params = [p.detach().numpy().copy() for p in critic.parameters()]
    adam_moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    step_count = [0]
    epochs, steps = 5, 5 * BATCH // MINIBATCH
    torch_us, numpy_us = [], []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(epochs):
            torch_epoch(critic, optimizer, obs, returns)
        torch_us.append((time.perf_counter() - start) / steps * 1e6)
        start = time.perf_counter()
        for _ in range(epochs):
            numpy_epoch(params, adam_moments, step_count, obs.numpy(), returns.numpy())
        numpy_us.append((time.perf_counter() - start) / steps * 1e6)
    print(f"torch critic step: {statistics.median(torch_us):.0f} us (rounds {[round(t) for t in torch_us]})")
    print(f"numpy critic step: {statistics.median(numpy_us):.0f} us (rounds {[round(t) for t in numpy_us]})")


if __name__ == "__main__":
    main()
