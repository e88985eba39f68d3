"""Fuzzers of every input boundary (faults 16-19), bounded so that all of them run in about a minute: generated
config values for every key of every algorithm's full schema (and a handful of real runs of accepted ones),
generated YAML documents, mutated real checkpoints restored as `--resume` does, and argument lists of `train`
and `evaluate`. Each records how many cases it generated."""
import copy
import io
import json
import math
import time

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from framework import algorithms
from framework.train import yaml_input
from framework.train.checkpoint import CheckpointError
from framework.train.cli import evaluate_main, train_main
from framework.train.config import (MAX_EVAL_EPISODES, MAX_SECONDS, ConfigError, full_schema, get_path,
                                    validate)
from framework.train.carryover import Carryover
from framework.runtime.run_stats import RunStats
from framework.runtime.schema import INT64_MAX, MAX_ITEMS, Field
from framework.train.run_checkpoint import load_optimizer_state, read_checkpoint
from npz_files import npy, peak_bytes, read_zip, write_zip
from reliability_support import Watch, only_run_dir, run_cli, short_run, write_config
from train_cli import call_main, summary

pytestmark = pytest.mark.timeout(300)
IN_PROCESS = dict(deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
"""No per-example deadline: a loaded machine may pause any example for seconds. What must be bounded in time says
so in its own test, generously; the file's timeout bounds the rest."""


# -- 16: config values -----------------------------------------------------------------------------
def _keys(schema, prefix=""):
    for name, spec in schema.items():
        if isinstance(spec, Field):
            yield prefix + name, spec
        else:
            yield from _keys(spec, prefix + name + ".")


SCHEMA_KEYS = [(algo, key, spec) for algo in algorithms.names() for key, spec in _keys(full_schema(algo))
               if key not in ("algorithm.name", "env.id", "dataset.path")]  # they import modules / read files


def _values(spec: Field):
    """Values in and out of a field's range, of its kind and of others."""
    numbers = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                        st.sampled_from([b for b in (spec.low, spec.high) if b is not None] or [0]).flatmap(
                            lambda b: st.sampled_from([b, b - 1, b + 1, b * 2, -b, b + 1e-9, b - 1e-9])))
    odd = st.one_of(st.none(), st.booleans(), st.text(max_size=30), st.just("1e3"), st.just("x" * 5000),
                    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers()))
    if spec.choices is not None:
        return st.one_of(st.sampled_from(list(spec.choices)), odd)
    if spec.kind.endswith("_list"):
        items = {"int": numbers, "float": numbers, "str": st.text(max_size=10)}[spec.kind[:-5]]
        return st.one_of(st.lists(items, max_size=4), st.lists(items, min_size=MAX_ITEMS + 1, max_size=MAX_ITEMS + 2),
                         odd)
    if spec.kind == "mapping":
        return st.one_of(st.recursive(st.one_of(st.integers(), st.text(max_size=5)),
                                      lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c,
                                                                                          max_size=3)), odd)
    return st.one_of(numbers, odd)


def _put(raw: dict, key: str, value) -> None:
    *sections, name = key.split(".")
    for section in sections:  # trainer.ray.address: two levels
        raw = raw.setdefault(section, {})
    raw[name] = value


@pytest.mark.fault("16", "generated values, in and out of range, of every type, for a few keys at once of every "
                         "algorithm's full schema (400 cases)",
                   "validate either accepts (every accepted number converted, finite, within its field's bounds "
                   "and int64, lists within their length) or raises ConfigError with one line")
@settings(max_examples=400, **IN_PROCESS)
@given(data=st.data())
def test_fuzz_every_key_accepts_in_range_or_refuses_in_one_line(examples, data):
    examples["n"] += 1
    algo = data.draw(st.sampled_from(algorithms.names()))
    chosen = data.draw(st.lists(st.sampled_from([k for k in SCHEMA_KEYS if k[0] == algo]), min_size=1, max_size=4,
                                unique_by=lambda k: k[1]))
    raw = {"algorithm": {"name": algo}}
    for _, key, spec in chosen:
        _put(raw, key, data.draw(_values(spec), label=key))
    try:
        config = validate(raw)
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000, str(exc)
        return
    for _, key, spec in chosen:
        value = get_path(config, key)
        items = value if isinstance(value, list) else [value]
        if value is None or spec.kind not in ("int", "float", "int_list", "float_list"):
            continue
        assert len(items) <= MAX_ITEMS
        for item in items:
            assert abs(item) <= INT64_MAX if isinstance(item, int) else math.isfinite(item)
            assert spec.low is None or item >= spec.low
            assert spec.high is None or item <= spec.high


CHEAP = {"trainer.workers": 3, "trainer.total_steps": 3000, "env.envs_per_worker": 8, "algorithm.n_steps": 50,
         "model.hidden": 64, "trainer.eval_episodes": 5, "trainer.target_window": 2000, "dataset.train_size": 2000,
         "dataset.test_size": 500, "dataset.n_features": 5000, "algorithm.batch_size": 64,
         "algorithm.max_nonfinite_updates": 200, "logging.video_max_frames": 50}
"""Keys whose values cost memory or time in proportion: the real runs draw them up to these caps (a Hogwild run whose
updates are all non-finite counts no samples, so it ends only after max_nonfinite_updates of them)."""
FIXED_IN_RUNS = ("experiment", "env.id", "env.kwargs", "dataset.path", "trainer.device", "trainer.backend",
                 "trainer.ray.address", "logging.logdir", "logging.hparams", "logging.progress", "dataset.kind",
                 # the trackers stay off: they would talk to MLflow and W&B services
                 "logging.mlflow.tracking_uri", "logging.mlflow.experiment", "logging.wandb.project",
                 "logging.wandb.entity", "logging.wandb.mode", "logging.wandb.group", "logging.wandb.tags")


def _accepted(key: str, spec: Field):
    """Values a field accepts, from its bounds up to the largest (or CHEAP's cap)."""
    if spec.choices is not None:
        return st.sampled_from(list(spec.choices))
    if spec.kind == "bool":
        return st.booleans()
    high = CHEAP.get(key, spec.high)
    if spec.kind in ("int", "int_list"):
        ints = st.integers(int(spec.low or 0) + spec.low_open, int(high if high is not None else INT64_MAX))
        return st.lists(ints, min_size=1, max_size=3) if spec.kind == "int_list" else ints
    if key == "optimizer.betas":
        return st.lists(st.floats(0, 0.999), min_size=2, max_size=2)
    if key in ("trainer.eval_every_s", "logging.video_every_s"):
        return st.one_of(st.just(0.0), st.floats(0.5, MAX_SECONDS))
    floats = st.floats(spec.low or 0.0, high if high is not None else 1e308, exclude_min=spec.low_open)
    return st.one_of(st.none(), floats) if spec.nullable else floats


@pytest.fixture(scope="module")
def run_watch(tmp_path_factory):
    watch = Watch(tmp_path_factory.mktemp("accepted"))
    yield watch
    assert not watch.leftovers()


@pytest.mark.fault("16", "a handful (5) of real runs of generated configs the schema accepts: every key drawn from "
                         "its whole accepted range (durations and counts up to their bounds, learning rates up to "
                         "1e308), with the keys that cost memory or time capped",
                   "each run starts and stops by itself: exit 0, or exit 1 with a one-line reason (e.g. non-finite "
                   "updates); never a traceback or a worker that raised; summary.json written")
@settings(max_examples=5, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_fuzz_accepted_configs_start_and_stop(examples, run_watch, tmp_path_factory, data):
    algo = data.draw(st.sampled_from(algorithms.names()))
    raw = {"algorithm": {"name": algo}, "logging": {"progress": False}}
    for key, spec in _keys(full_schema(algo)):
        if key not in FIXED_IN_RUNS and key != "algorithm.name":
            _put(raw, key, data.draw(_accepted(key, spec), label=key))
    try:
        validate(raw)
    except ConfigError:
        assume(False)  # a combination refused as a whole (e.g. a batch larger than a shard)
    examples["n"] += 1
    tmp = tmp_path_factory.mktemp("run")
    done = run_cli(run_watch, "--config", write_config(tmp / "c.yaml", raw), "--logdir", tmp / "runs", timeout=240)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr and "raised an exception" not in done.stderr, done.stderr
    assert summary(only_run_dir(tmp / "runs"))["exit_code"] == done.returncode


# -- 17: YAML input --------------------------------------------------------------------------------
_SCALARS = st.one_of(
    st.integers(min_value=-10**80, max_value=10**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["null", "true", "no", "~", "1e5", "0x1F", "0o17", "1:30:00", ".inf", "-.nan", "2024-01-01",
                     "!!binary aGk=", "!!python/object/apply:os.getpid []", "!!set {a, b}", "'quoted: #'",
                     "|\n  block", "&x 1", "*x", "*nowhere", "<<", "? complex", "%YAML 1.1", "---", "..."]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
)
_KEYS = st.sampled_from(["seed", "trainer", "workers", "env", "kwargs", "a", "b", "<<", "1", "null", "? x"])


def _documents():
    """YAML text built from random scalars, nested flow and block collections, anchors and aliases."""
    def flow(children):
        seq = st.lists(children, max_size=6).map(lambda xs: "[" + ", ".join(xs) + "]")
        mapping = st.lists(st.tuples(_KEYS, children), max_size=6).map(
            lambda kvs: "{" + ", ".join(f"{k}: {v}" for k, v in kvs) + "}")
        anchored = st.tuples(st.sampled_from(["a", "b", "c"]), children).map(lambda av: f"&{av[0]} {av[1]}")
        return st.one_of(seq, mapping, anchored, st.sampled_from(["*a", "*b", "*c"]))

    values = st.recursive(_SCALARS, flow, max_leaves=40)
    block = st.lists(st.tuples(_KEYS, values, st.integers(0, 3)), max_size=12).map(
        lambda rows: "\n".join(" " * indent + f"{key}: {value}" for key, value, indent in rows))
    return st.one_of(block, values, st.binary(max_size=200).map(lambda b: b.decode("latin-1")))


@pytest.mark.fault("17", "generated YAML documents (300 cases): random scalars (huge numbers, tags, sexagesimal, "
                         "binary), nested flow and block collections, anchors and aliases, duplicate and merge keys, "
                         "random bytes; each also repeated up to 40 times into a larger file",
                   "reading the file gives a value or ConfigError with one line, within 20 s (a document that "
                   "expands without bound would never end; any of these reads in milliseconds); parsing the text "
                   "gives a value or a YAML error, never another exception")
@settings(max_examples=300, **IN_PROCESS)
@given(text=_documents(), repeat=st.integers(1, 40))
def test_fuzz_any_document_loads_or_is_refused_in_one_line_quickly(examples, tmp_path_factory, text, repeat):
    examples["n"] += 1
    path = tmp_path_factory.getbasetemp() / "fuzz.yaml"
    path.write_text("\n".join([text] * repeat), errors="surrogatepass")
    started = time.monotonic()
    try:
        yaml_input.read_file(path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000, str(exc)
    assert time.monotonic() - started < 20
    try:
        yaml_input.parse(text)
    except yaml.YAMLError:
        pass


# -- 18: checkpoints -------------------------------------------------------------------------------
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=8)),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=12)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, prefix + (i,))


def _mutate_json(data, skeleton: dict) -> dict:
    """The skeleton with one part deleted, replaced, wrapped or nested deeply."""
    paths = [p for p in _paths(skeleton) if p]
    path = data.draw(st.sampled_from(paths), label="json path")
    parent = skeleton
    for part in path[:-1]:
        parent = parent[part]
    key, op = path[-1], data.draw(st.sampled_from(["delete", "replace", "wrap", "nest", "number", "number"]),
                                  label="json op")
    if op == "number":  # the same kind of value, any size: reaches the range checks
        value = parent[key]
        parent[key] = (data.draw(st.integers(-2**65, 2**65), label="int") if type(value) is int
                       else data.draw(st.floats(), label="float") if type(value) is float else value)
    elif op == "delete":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    elif op == "replace":
        parent[key] = data.draw(_JSON, label="value")
    elif op == "wrap":
        parent[key] = data.draw(st.sampled_from([[parent[key]], {"x": parent[key]}, {"__array__": parent[key]},
                                                 {"__items__": parent[key]}]))
    else:
        value = parent[key]
        for _ in range(data.draw(st.integers(10, 500), label="depth")):  # json.dumps of the test recurses
            value = [value]
        parent[key] = value
    return skeleton


def _mutate_entry(data, entries: dict[str, bytes]) -> None:
    """One array entry replaced: another dtype or shape, a header claiming far more than it holds, or garbage."""
    name = data.draw(st.sampled_from(sorted(n for n in entries if n != "__meta__.npy")), label="entry")
    kind = data.draw(st.sampled_from(["array", "huge header", "garbage", "object"]), label="entry op")
    if kind == "array":
        dtype = data.draw(st.sampled_from(["<f4", "<f8", "<i8", "|b1", "<c8", "<f2"]))
        shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3), label="shape"))
        array = np.zeros(shape, dtype=dtype)
        out = io.BytesIO()
        np.lib.format.write_array(out, array)
        entries[name] = out.getvalue()
    elif kind == "huge header":
        shape = (data.draw(st.integers(2**20, 2**62), label="declared"),)
        entries[name] = npy({"descr": "<f4", "fortran_order": False, "shape": shape}, bytes(64))
    elif kind == "garbage":
        entries[name] = data.draw(st.binary(max_size=200), label="bytes")
    else:
        out = io.BytesIO()
        np.lib.format.write_array(out, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        entries[name] = out.getvalue()


@pytest.fixture(scope="module")
def checkpoint_parts(tmp_path_factory):
    """A finished run's config, checkpoint entries and metadata skeleton."""
    finished_run = short_run(tmp_path_factory.mktemp("finished"))
    config = validate(yaml.safe_load((finished_run / "config.yaml").read_text()))
    entries = read_zip(finished_run / "checkpoints" / "checkpoint.npz")
    meta = np.lib.format.read_array(io.BytesIO(entries["__meta__.npy"]))
    return config, entries, json.loads(meta.tobytes())


@pytest.mark.fault("18", "mutated real checkpoints (150 cases): metadata parts deleted, replaced by other types "
                         "and sizes, wrapped, nested 500 deep; array entries of other dtypes and shapes, pickled, "
                         "garbage, or with headers declaring up to 2**62 elements; entries dropped, added, "
                         "compressed; files truncated",
                   "restored as `--resume` does (read, checked, model, optimizer, run state): it fits, or "
                   "CheckpointError says why in one line; never another exception, never more than 16 MiB of "
                   "memory")
@settings(max_examples=150, **IN_PROCESS)
@given(data=st.data())
def test_fuzz_mutated_real_checkpoints_resume_or_are_refused_in_one_line(examples, checkpoint_parts,
                                                                         tmp_path_factory, data):
    examples["n"] += 1
    config, entries, skeleton = checkpoint_parts
    entries, skeleton = dict(entries), copy.deepcopy(skeleton)
    compress = set()
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        part = data.draw(st.sampled_from(["json"] * 6 + ["entry"] * 3 + ["drop", "compress", "extra"]), label="part")
        if part == "json":
            skeleton = _mutate_json(data, skeleton)
        elif part == "entry":
            _mutate_entry(data, entries)
        elif part == "drop":
            entries.pop(data.draw(st.sampled_from(sorted(entries)), label="dropped"))
        elif part == "compress":
            compress.add(data.draw(st.sampled_from(sorted(entries)), label="compressed"))
        else:
            entries[data.draw(st.sampled_from(["extra.npy", "extra.txt", "a0/evil.npy"]))] = bytes(8)
    meta = json.dumps(skeleton).encode()
    if "__meta__.npy" in entries:
        entries["__meta__.npy"] = npy({"descr": "|u1", "fortran_order": False, "shape": (len(meta),)}, meta)
    run_dir = tmp_path_factory.mktemp("fuzz")
    (run_dir / "checkpoints").mkdir()
    write_zip(run_dir / "checkpoints" / "checkpoint.npz", entries, compress)
    if data.draw(st.sampled_from([False] * 9 + [True]), label="truncate"):
        path = run_dir / "checkpoints" / "checkpoint.npz"
        raw = path.read_bytes()
        path.write_bytes(raw[:data.draw(st.integers(0, len(raw)), label="kept bytes")])
    algorithm = algorithms.get("a3c")
    model = algorithm.build_model(config)
    optimizer = algorithm.build_optimizer(model, config)

    def restore():
        saved = read_checkpoint(run_dir, config, model)
        load_optimizer_state(optimizer, saved["optimizer"], run_dir / "checkpoints" / "checkpoint.npz")
        Carryover(2, 100).restore(saved["run"], RunStats(2, algorithm.metrics))

    try:
        peak = peak_bytes(restore)
    except CheckpointError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000, str(exc)
        return
    assert peak < 16 << 20


# -- 19: CLI arguments -----------------------------------------------------------------------------
_PATHS = st.sampled_from(["/nonexistent/x.yaml", "", "-", "/dev/null", "/", "a\nb", "x" * 5000, "/proc/self/fd/0",
                          "runs/../../etc", "\udcff.yaml"])
_NUMBERS = st.one_of(st.integers(-10**30, 10**30).map(str), st.sampled_from(["10**12", "1e3", "0x10", "", " 5", "nan",
                                                                             "1" * 5000, "-0", "٣"]))
_OVERRIDES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["trainer.workers=0", "a..b=1", "=1", "seed", "seed=1\nseed=2", "trainer.workers=[1,",
                     "seed=" + "9" * 100, "env.kwargs=" + "[" * 500, "model.hidden=[" + "1," * 3000 + "1]",
                     "seed=!!python/object/apply:os.getpid []", "experiment=" + "x" * 300]))


@st.composite
def _train_argv(draw):
    options = [("--config", _PATHS), ("--resume", _PATHS), ("--logdir", _PATHS), ("--set", _OVERRIDES),
               ("--wat", st.none()), ("--config", st.none())]
    argv = []
    for flag, values in draw(st.lists(st.sampled_from(options), max_size=6)):
        value = draw(values)
        argv += [flag] if value is None else [flag, value]
    if draw(st.booleans()):
        argv += [arg for _ in range(draw(st.integers(900, 1100))) for arg in ("--set", "seed=1")]
    return argv


@st.composite
def _evaluate_argv(draw):
    argv = ["--run", draw(_PATHS)] if draw(st.booleans()) else []
    for flag in ("--episodes", "--seed", "--bogus"):
        if draw(st.booleans()):
            argv += [flag, draw(_NUMBERS)]
    return argv


@pytest.mark.fault("19", "generated argument lists of `train` (150 cases): paths that are missing, empty, "
                         "directories, devices, 5000 characters long, with a newline or undecodable bytes; --set "
                         "values that are malformed, huge, nested 500 deep or tagged, and 900-1100 of them; unknown "
                         "and repeated options",
                   "exit 2 and one line on stderr (at most 2500 characters), nothing on stdout, no traceback")
@settings(max_examples=150, **IN_PROCESS)
@given(argv=_train_argv())
def test_fuzz_train_arguments_exit_2_with_one_line(examples, argv):
    examples["n"] += 1
    code, out, err = call_main(train_main, argv)
    assert code == 2 and out == "", (argv, err)
    assert err.startswith("train: error: ") and err.count("\n") == 1 and len(err) < 2500, (argv, err)


@pytest.mark.fault("19", "generated argument lists of `evaluate` (150 cases): run directories as above; --episodes "
                         "and --seed of any size (10**30, 10**12, -1, 5000 digits) or not numbers; unknown options",
                   "exit 2 and one line naming a bad argument (a number out of range names its option), or, "
                   "when all are good, the run directory")
@settings(max_examples=150, **IN_PROCESS)
@given(argv=_evaluate_argv())
def test_fuzz_evaluate_arguments_exit_2_with_one_line_naming_a_bad_number(examples, argv):
    examples["n"] += 1
    code, out, err = call_main(evaluate_main, argv)
    assert code == 2 and out == "", (argv, err)
    assert err.startswith("evaluate: error: ") and err.count("\n") == 1 and len(err) < 2500, (argv, err)
    values = dict(zip(argv[::2], argv[1::2]))
    named = []  # what the one line may be about: a bad argument, else the run directory
    for flag, allowed in (("--episodes", range(1, MAX_EVAL_EPISODES + 1)), ("--seed", range(0, 2**31))):
        try:
            if flag in values and int(values[flag]) not in allowed:
                named.append(f"argument {flag}: ")
        except ValueError:
            named.append(f"argument {flag}: ")
    if values.get("--run") == "":
        named.append("argument --run: ")
    if "--run" not in values:
        named.append("the following arguments are required: --run")
    if "--bogus" in values:
        named.append("unrecognized arguments: --bogus")
    assert any(text in err for text in named or ["run directory '"]), (argv, err)
