"""The ray backend's config, and a ray config on a machine without Ray: refused before anything is written."""
import pytest

from framework.train.config import ConfigError, load_config, validate
from run_configs import cartpole_config
from train_cli import CONFIGS, cli_env, train


def test_the_defaults_start_two_simulated_nodes_of_two_workers_with_learners_at_the_head():
    assert validate({})["trainer"]["ray"] == {"address": None, "nodes": 2, "workers_per_node": 2,
                                              "sync_every_s": 0.05, "timeout_s": 10.0, "learner_node": None}
    assert validate({"trainer": {"ray": {"learner_node": "10.0.0.7"}}})["trainer"]["ray"]["learner_node"] == "10.0.0.7"
    config = validate({"trainer": {"backend": "ray", "workers": 6, "ray": {"nodes": 3, "address": "auto"}}})
    assert config["trainer"]["ray"]["nodes"] == 3 and config["trainer"]["backend"] == "ray"
    for address in ("auto", "10.0.0.5:6379", "ray://head.example:10001", "[::1]:6379"):
        assert validate({"trainer": {"ray": {"address": address}}})["trainer"]["ray"]["address"] == address


@pytest.mark.parametrize("trainer, message", [
    ({"backend": "ray", "workers": 2},
     "config key 'trainer.workers': got 2 with trainer.backend ray; allowed: 4, trainer.ray.nodes (2) times "
     "trainer.ray.workers_per_node (2)"),
    ({"backend": "ray", "workers": 4, "device": "cuda:0"},
     "config key 'trainer.device': got 'cuda:0' with trainer.backend ray; allowed: cpu"),
    ({"ray": {"address": "head"}}, "config key 'trainer.ray.address': got 'head'; allowed: null (start a local Ray), "
                                   "auto (join the cluster of this machine) or HOST:PORT / ray://HOST:PORT"),
    ({"ray": {"nodes": 0}}, "config key 'trainer.ray.nodes': got 0; allowed: an integer >= 1 and <= 1024"),
    ({"ray": {"sync_every_s": 0}}, "config key 'trainer.ray.sync_every_s': got 0; allowed: a number > 0"),
    ({"ray": {"timeout_s": -1}}, "config key 'trainer.ray.timeout_s': got -1; allowed: a number > 0"),
    ({"ray": {"node": 2}}, "config key 'trainer.ray.node': unknown key; allowed here: address, nodes"),
    ({"backend": "slurm"}, "config key 'trainer.backend': got 'slurm'; allowed: one of local, ray"),
])
def test_bad_ray_settings_name_key_value_and_allowed(trainer, message):
    with pytest.raises(ConfigError) as err:
        validate({"trainer": trainer})
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("name", ["a3c_ray.yaml", "impala_ray.yaml", "appo_ray.yaml"])
def test_the_shipped_ray_configs_are_valid(name):
    trainer = load_config(CONFIGS / name)["trainer"]
    assert trainer["backend"] == "ray" and trainer["ray"]["address"] is None and trainer["ray"]["nodes"] == 2
    assert trainer["workers"] == trainer["ray"]["nodes"] * trainer["ray"]["workers_per_node"]


def test_without_ray_a_ray_config_exits_2_naming_the_extra(tmp_path):
    hidden = tmp_path / "no_ray" / "ray"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError(\"No module named 'ray' (hidden by the test)\")\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{hidden.parent}:{env['PYTHONPATH']}"
    config = cartpole_config(trainer={"backend": "ray", "workers": 4})
    done, run_dir = train(tmp_path, config, env=env)
    assert done.returncode == 2 and run_dir is None
    assert done.stderr == ("train: error: trainer.backend ray needs Ray, which is not installed here: "
                           "pip install -e '.[ray]'\n")
