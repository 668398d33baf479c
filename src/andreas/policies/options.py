"""Policy options: names, types, defaults and help, declared as fields of options
dataclasses (`option`) and read from them (`dataclass_options`), and how a value written in a
CLI flag, a YAML file or a keyword argument becomes the option's type (`OptionSpec.convert`).

Which policy takes which options, and the checks every way of giving them goes through, are
the registry's (registry.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..errors import AndreasError

OFF_WORDS = ("off", "none", "null")


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field that documents itself: `andreas policies NAME` prints `help`."""
    return dataclasses.field(default=default, metadata={"help": help}, **kw)


def at_least(name: str, value: float | None, low: float, off: bool = False) -> None:
    """AndreasError unless `value` >= `low` (None too, where `off` allows it): the check of
    an option's value, in an options dataclass's __post_init__."""
    if value is None and off:
        return
    if value is None or not value >= low:
        raise AndreasError(f"{name} must be >= {low:g}{' or off' if off else ''}, got {value}")


@dataclass(frozen=True)
class OptionSpec:
    name: str
    kind: str  # float, float?, int, str, bool, strs (a tuple of strings)
    default: Any
    help: str

    def convert(self, value: Any) -> Any:
        """`value` (a CLI string or a YAML scalar) as this option's type; ValueError if not."""
        if self.kind == "float?" and (value is None or str(value).strip().lower() in OFF_WORDS):
            return None
        if self.kind in ("float", "float?"):
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return float(value)
        if self.kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("expected an integer")
            return int(value)
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "yes", "on", "1"):
                return True
            if text in ("false", "no", "off", "0"):
                return False
            raise ValueError("expected true or false")
        if self.kind == "strs":
            if isinstance(value, (list, tuple)):
                return tuple(str(v).strip() for v in value if str(v).strip())
            return tuple(v.strip() for v in str(value).split(",") if v.strip())
        return str(value)

    def describe(self) -> str:
        default = "off" if self.default is None else (
            ",".join(self.default) if isinstance(self.default, tuple) else self.default)
        return f"{self.name} ({self.kind}, default {default}): {self.help}"


_KINDS = {"float": "float", "float | None": "float?", "int": "int", "str": "str",
          "bool": "bool", "tuple[str, ...]": "strs"}


def dataclass_options(cls: type, only: Iterable[str] | None = None) -> dict[str, OptionSpec]:
    """The options a parameter dataclass declares (fields made with `option`)."""
    keep = None if only is None else set(only)
    out = {}
    for f in dataclasses.fields(cls):
        if keep is not None and f.name not in keep:
            continue
        # the annotation as written (a string under `from __future__ import annotations`)
        written = f.type if isinstance(f.type, str) else (
            f.type.__name__ if isinstance(f.type, type) else str(f.type))
        kind = _KINDS.get(written)
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no option kind for type {f.type!r}")
        default = (f.default if f.default is not dataclasses.MISSING
                   else f.default_factory())  # type: ignore[operator]
        out[f.name] = OptionSpec(f.name, kind, default, f.metadata.get("help", ""))
    return out


SEED = OptionSpec("seed", "int", 1, "seed of a randomised policy (ignored by the others)")


def read_options_file(path: Path) -> dict[str, Any]:
    """A YAML mapping of options (the same as service.yaml's `policy_options`)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AndreasError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise AndreasError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AndreasError(f"{path}: expected a mapping of option: value")
    return data
