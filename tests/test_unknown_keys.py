"""A key the reader does not know is an error with a "did you mean", never ignored: `PUE: 1.5`
in cluster.yaml once changed a cost from 18.41 to 13.84 EUR with exit 0, and
`restart_overhead: 300` or `policy_optons:` in service.yaml were dropped without a word.
A key (or profile column) starting with `x-` is the writer's own note."""

import pytest
from conftest import write_service_files

from andreas.errors import ScenarioError
from andreas.io import read_cluster, read_profiles
from andreas.service.config import read_service_config

CLUSTER = """\
energy_price: 0.2
pue: 1.0
gpu_types:
  fast: {node_power_w: [400, 700]}
nodes:
  - {name: n1, gpu_type: fast, gpus: 2}
"""


@pytest.mark.parametrize("change, message", [
    (("pue: 1.0", "PUE: 1.5"), r"cluster.yaml:2: field 'PUE': unknown key; did you mean 'pue'\?"),
    (("gpus: 2}", "gpu: 2}"), r"field 'nodes\[0\].gpu': unknown key; did you mean 'gpus'\?"),
    (("[400, 700]}", "[400, 700], idle_power: 50}"),
     r"field 'gpu_types.fast.idle_power': unknown key; did you mean 'idle_power_w'\?"),
    (("energy_price: 0.2", "energy_price: {eur_per_kwh: [0.2], step: 60}"),
     r"field 'energy_price.step': unknown key; did you mean 'step_s'\?"),
])
def test_a_misspelt_cluster_key_is_an_error(tmp_path, change, message):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER.replace(*change))
    with pytest.raises(ScenarioError, match=message):
        read_cluster(path)


def test_an_x_key_is_the_writers_own(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("x-owner: ops team\n" + CLUSTER.replace("gpus: 2}", "gpus: 2, x-rack: 4}"))
    assert read_cluster(path).pue == 1.0


@pytest.mark.parametrize("line, message", [
    ("policy_optons: {seed: 2}\n",
     r"field 'policy_optons': unknown key; did you mean 'policy_options'\?"),
    ("restart_overhead: 300\n", r"field 'restart_overhead': .*belongs in the cluster file"),
    ("PUE: 1.5\n", r"field 'PUE': .*belongs in the cluster file"),
    ("grace: 5\n", r"field 'grace': unknown key; did you mean 'grace_s'\?"),
])
def test_a_misspelt_service_key_is_an_error(tmp_path, line, message):
    with pytest.raises(ScenarioError, match=message):
        read_service_config(write_service_files(tmp_path, extra=line))


def test_a_misspelt_profile_column_is_an_error(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    profiles = tmp_path / "profiles.csv"
    profiles.write_text("profile,gpu_type,gpus,seconds_per_epoch,power_limit,x-note\n"
                        "mlp,fast,1,0.3,250,measured\n")
    with pytest.raises(ScenarioError, match=r"profiles.csv:1: field 'power_limit': unknown "
                                            r"column; did you mean 'power_limit_w'\?"):
        read_profiles(profiles, read_cluster(cluster))
    profiles.write_text("profile,gpu_type,gpus,seconds_per_epoch,x-note\nmlp,fast,1,0.3,ok\n")
    assert read_profiles(profiles, read_cluster(cluster)).configs("mlp") == {("fast", 1): 0.3}
