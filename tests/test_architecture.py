"""The layers hold: no import cycle in the packages (module-level or inside functions), each layer imports only
the layers below it, and `import framework` loads the tensor library alone (no Ray, Optuna, MLflow or W&B
either)."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "sharing", "cuda_ipc")
TRAINING = ("framework.train", "framework.algorithms", "framework.rl", "framework.runtime")
"""The training system, from the top: the trainer, the algorithms, what actor-critic algorithms share, the runtime
they all share (the plugin contract, run statistics, the update tail). Everything else in framework/ is the tensor
library."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CHECKOUT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (CHECKOUT / pkg).rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its source (a function body included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere():
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _in(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("lower, forbidden", [
    (("sharing",), ("framework", "cuda_ipc")),
    (("cuda_ipc",), ("framework",)),
    (("framework",), TRAINING),
    (("framework.algorithms",), ("framework.train",)),
    (("framework.rl",), ("framework.train", "framework.algorithms")),
    (("framework.runtime",), ("framework.train", "framework.algorithms", "framework.rl")),
])
def test_each_layer_imports_only_the_layers_below_it(lower, forbidden):
    graph = _graph()
    in_layer = [m for m in graph if _in(m, lower) and (lower[0] in TRAINING or not _in(m, TRAINING))]
    wrong = sorted(f"{m} -> {t}" for m in in_layer for t in graph[m] if _in(t, forbidden))
    assert wrong == []


def test_the_schema_and_the_profile_import_nothing_of_the_project():
    graph = _graph()
    assert graph["framework.runtime.schema"] == set() and graph["framework.runtime.profile"] == set()


def test_the_environments_know_nothing_of_models_acting_or_learning():
    """rl/envs (a run's environment described once, and the batches workers step) imports of the training system
    only itself, how spaces are read, and the runtime."""
    graph = _graph()
    allowed = ("framework.rl.envs", "framework.rl.spaces", "framework.runtime")
    wrong = sorted(f"{m} -> {t}" for m in graph if _in(m, ("framework.rl.envs",))
                   for t in graph[m] if _in(t, TRAINING) and not _in(t, allowed))
    assert wrong == []


def _fresh_python(code: str) -> str:
    """What code prints when run by a fresh interpreter in the checkout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=CHECKOUT, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_framework_loads_the_tensor_library_alone():
    code = ("import json, sys, framework; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('gymnasium', 'yaml', 'tensorboard', 'tqdm', 'av', 'PIL', 'pygame', 'ray', 'optuna', 'mlflow', "
            "'wandb', 'matplotlib') or "
            "m.startswith(('framework.train', 'framework.algorithms', 'framework.rl', 'framework.runtime')))))")
    assert json.loads(_fresh_python(code)) == []


def test_ray_loads_only_when_a_run_chooses_the_ray_backend():
    """The training system, the ray backend's modules included, imports Ray only when the backend is made."""
    code = ("import sys; from framework.train import trainer, cli, config; "
            "from framework.train.backends import local, ray_cluster, ray_node, ray_server; "
            "config.default_config(); print('ray' in sys.modules)")
    assert _fresh_python(code).strip() == "False"


def test_optuna_mlflow_and_wandb_load_only_when_a_run_or_a_tune_uses_them():
    """The training system, the tune command and the trackers' modules included, imports none of their packages
    until a tune starts or a run's config turns a tracker on."""
    code = ("import sys; from framework.train import trainer, cli, config, tuning, tune_space, trackers; "
            "from framework.train.trackers import base, mlflow_tracker, wandb_tracker; "
            "print(trackers.build_trackers(config.default_config(), None, print), "
            "sorted(m for m in ('optuna', 'mlflow', 'wandb', 'matplotlib') if m in sys.modules))")
    assert _fresh_python(code).strip() == "[] []"
