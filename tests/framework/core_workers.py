"""Child-process bodies for test_core_multiprocess (importable by spawned children)."""
from __future__ import annotations

import numpy as np

import framework as F
import sharing

TIMEOUT = 60


def fill_received(inbox, outbox) -> None:
    """Receive [tensor, view of it], fill both, report what arrived."""
    x, column = inbox.get(timeout=TIMEOUT)
    with F.no_grad():
        x.fill_(7.0)
        column.fill_(3.0)
    outbox.put({"shared": x.is_shared() and column.is_shared(), "grad": x.grad, "requires_grad": x.requires_grad,
                "alias": np.shares_memory(x.data_array, column.data_array)})


def arena_report(model, opt) -> dict:
    """What a received (model, optimizer) looks like in this process."""
    arena = model.arena
    params = list(model.parameters())
    return {
        "arena_shared": arena is not None and arena.is_shared(),
        "views": all(p._arena is arena and np.shares_memory(p.data_array, arena.data) for p in params),
        "identity": all(a is b for a, b in zip(opt.param_groups[0]["params"], params)),
        "state_shared": all(sharing.is_shared(a) for entry in opt.state.values() for a in entry.values()),
        "fused": opt._plan(0) is not None,
        "grad_zero": not arena.grad.any(),
    }


def step_and_watch(model, opt, inbox, outbox) -> None:
    """Step the shared optimizer once with a gradient of ones, then report the weights the parent sets."""
    outbox.put(arena_report(model, opt))
    model.arena.grad[...] = 1.0
    opt.step()
    outbox.put("stepped")
    assert inbox.get(timeout=TIMEOUT) == "look"
    outbox.put(float(model.arena.data.sum()))


def step_pair(pair, outbox) -> None:
    """The same with (model, optimizer) passed as one argument."""
    model, opt = pair
    outbox.put(arena_report(model, opt))
    model.arena.grad[...] = 1.0
    opt.step()
    outbox.put("stepped")


def receive_separately(inbox, outbox) -> None:
    """Receive the model and then, in another message, its optimizer."""
    model = inbox.get(timeout=TIMEOUT)
    opt = inbox.get(timeout=TIMEOUT)
    outbox.put(arena_report(model, opt))
    model.arena.grad[...] = 1.0
    opt.step()
    outbox.put("stepped")


def hogwild_sgd(rank, model, steps) -> None:
    """Lock-free SGD on a shared model from a sharing.spawn worker (gradient of sum(model(x)))."""
    F.manual_seed(rank)
    opt = F.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        model(F.ones(2, 3)).sum().backward()
        opt.step()


def fill_cuda(inbox, outbox) -> None:
    """Receive a CUDA tensor, fill it on the device, report its device."""
    t = inbox.get(timeout=TIMEOUT)
    t.fill_(4.0)
    import cupy
    cupy.cuda.Device().synchronize()
    outbox.put(t.device)


def train_locally_and_report(rank, model, opt, report) -> None:
    """A CPU worker of a shared model (and optimizer, received too): seed, then train a local copy; report the
    loss and whether this process loaded CuPy or declared itself a CUDA user (test_core_without_cuda)."""
    import copy
    import sys

    from cuda_ipc import guard

    F.manual_seed(rank)
    local = copy.deepcopy(model)
    local_opt = F.optim.Adam(local.parameters(), lr=0.01)
    x = F.randn(8, 4)
    for _ in range(3):
        local_opt.zero_grad()
        loss = (local(x) ** 2).mean()
        loss.backward()
        local_opt.step()
    report.put({"rank": rank, "loss": float(loss.item()), "cupy": "cupy" in sys.modules,
                "cuda_user": guard._initialised_pid is not None})


def lock_free_rounds(model, opt, gradient, rounds, steps, barrier) -> None:
    """Lock-free optimizer steps with a constant gradient on a shared model, `steps` a round, between the parent's
    resets of the parameters and the state (a barrier on each side of a round)."""
    for _ in range(rounds):
        barrier.wait()
        for _ in range(steps):
            model.arena.grad[...] = gradient
            opt.step()
        barrier.wait()
