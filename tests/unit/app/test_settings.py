"""The settings loader both servers use: file < VGPU_* < flags, with the source of each value."""

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from vgpu.app.errors import ConfigError
from vgpu.app.settings import (
    ResourceName,
    VendorWord,
    load_settings,
    parse_yaml_mapping,
    read_yaml_mapping,
)


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    period: float = Field(1.0, gt=0)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "x"
    port: int = Field(80, ge=0, le=65535)
    zones: tuple[str, ...] = ()
    inner: Inner = Field(default_factory=Inner)
    resource: ResourceName = "nvidia.com/gpu"
    vendor: VendorWord = "NVIDIA"


def load(
    path: Path | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, object] | None = None,
) -> Settings:
    return load_settings(Settings, "demo", path, env, overrides, {"HOST_NAME": "name"})


def test_each_layer_wins_over_the_one_below(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text("name: file\nport: 1\ninner: {enabled: true, period: 5}\n")

    settings = load(
        path,
        {"VGPU_PORT": "2", "VGPU_INNER__PERIOD": "7", "VGPU_ZONES": "a, b,,c"},
        {"port": 3, "name": None},
    )

    assert settings.name == "file"  # a None override leaves the value below it
    assert settings.port == 3
    assert settings.inner == Inner(enabled=True, period=7)  # merged, not replaced
    assert settings.zones == ("a", "b", "c")


def test_an_alias_variable_sits_below_the_vgpu_name() -> None:
    assert load(env={"HOST_NAME": "alias"}).name == "alias"
    assert load(env={"HOST_NAME": "alias", "VGPU_NAME": "own"}).name == "own"
    assert load(env={"HOST_NAME": ""}).name == "x"


@pytest.mark.parametrize(
    ("env", "overrides", "says"),
    [
        ({"VGPU_PORT": "high"}, {}, "field port: Input should be a valid integer"),
        ({"VGPU_PORT": "high"}, {}, "(got 'high') [from VGPU_PORT]"),
        ({"VGPU_INNER__PERIOD": "0"}, {}, "field inner.period: Input should be greater than 0"),
        ({"VGPU_INNER__PERIOD": "0"}, {}, "[from VGPU_INNER__PERIOD]"),
        ({"HOST_NAME": "7"}, {"port": -1}, "field port: Input should be greater than or equal"),
        ({}, {"port": -1}, "[from command line]"),
        ({}, {"resource": "gpu"}, "field resource: must be an extended resource name"),
        ({}, {"vendor": "A,B"}, "field vendor: String should match pattern"),
    ],
)
def test_an_invalid_value_names_the_field_the_value_and_its_source(
    env: dict[str, str], overrides: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(env=env, overrides=overrides)
    assert str(caught.value).startswith("invalid demo configuration: ")
    assert says in str(caught.value)


def test_a_file_value_is_reported_as_coming_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text("inner: {period: -1}\nsurprise: 1\n")
    with pytest.raises(ConfigError) as caught:
        load(path, {"VGPU_INNER__ENABLED": "true"})
    message = str(caught.value)
    assert f"field inner.period: Input should be greater than 0 (got -1) [from {path}]" in message
    assert f"field surprise: Extra inputs are not permitted (got 1) [from {path}]" in message
    with pytest.raises(ConfigError, match=r"field inner.period: .* \[from command line\]"):
        load(path, overrides={"inner": {"period": -2}, "surprise": None})


def test_unknown_vgpu_names_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    settings = load(env={"VGPU_PROT": "1", "VGPU_INNER": "x", "VGPU_INNER__NOPE": "1", "PATH": "/"})
    assert settings == Settings()
    for name in ("VGPU_PROT", "VGPU_INNER", "VGPU_INNER__NOPE"):
        assert f"ignoring {name}: no demo setting has that name" in caplog.text
    assert "PATH" not in caplog.text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- a list\n", "demo.yaml: must be a YAML mapping, not list"),
        ("key: [unclosed", "demo.yaml: not valid YAML"),
        ("just words", "demo.yaml: must be a YAML mapping, not str"),
    ],
)
def test_a_file_that_is_not_a_mapping_is_refused_with_its_name(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml_mapping(text, "demo.yaml")
    assert says in str(caught.value)


def test_malformed_yaml_is_placed_in_the_named_file_not_in_pyyaml_s_string(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("listen_port: 8080\nextender: [\n")

    with pytest.raises(ConfigError) as caught:
        read_yaml_mapping(path, "config file")

    message = str(caught.value)
    assert message.startswith(f"config file {path}: not valid YAML, line 3 column 1: ")
    assert "<unicode string>" not in message


def test_an_empty_file_is_an_empty_mapping_and_json_is_read(tmp_path: Path) -> None:
    assert parse_yaml_mapping("", "x") == {}
    path = tmp_path / "config.json"
    path.write_text('{"nodeconfig": [{"name": "n"}]}')
    assert read_yaml_mapping(path, "node config file") == {"nodeconfig": [{"name": "n"}]}


def test_a_missing_file_names_what_it_is_and_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file .*absent\.yaml: "):
        load(tmp_path / "absent.yaml")
