import pytest

from vla.errors import ConfigError
from vla.training.train import train


@pytest.mark.parametrize(
    "override, message",
    [
        ("env.families=[name,colour]", "env.families=\\['name', 'colour'\\] has unknown"),
        ("env.held_out_pairs=[0,1,2,3,4,5,6,7,8,9,10,11]", "leave at least one pair"),
        ("env.split=novel_combos", "env.split='novel_combos'"),
    ],
)
def test_a_task_that_cannot_be_built_fails_before_any_data(
    compose_cfg, fast_overrides, tmp_path, override, message
):
    cfg = compose_cfg("train", [*fast_overrides, override, "~logger"])
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "data").exists()
