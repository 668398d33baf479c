"""Policy options in one place: names, types, defaults and help, read from each policy's
parameter dataclass, and one parser for every way options arrive.

The CLI's `--set key=value` and `--policy-options FILE.yaml`, `service.yaml`'s
`policy_options` and `make_policy(name, **options)` all go through `check_options`, so an
unknown key is an error that lists the valid ones wherever it is written, and a value is
converted and checked the same way everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import AndreasError

OFF_WORDS = ("off", "none", "null")


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field that documents itself: `andreas policies NAME` prints `help`."""
    return dataclasses.field(default=default, metadata={"help": help}, **kw)


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
        kind = _KINDS.get(str(f.type))
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no option kind for type {f.type!r}")
        default = (f.default if f.default is not dataclasses.MISSING
                   else f.default_factory())  # type: ignore[operator]
        out[f.name] = OptionSpec(f.name, kind, default, f.metadata.get("help", ""))
    return out


SEED = OptionSpec("seed", "int", 1, "seed of a randomised policy (ignored by the others)")


def option_specs(policy: str) -> dict[str, OptionSpec]:
    from .base import POLICIES

    info = POLICIES.get(policy)
    if info is None:
        raise AndreasError(f"unknown policy {policy!r}; expected one of {', '.join(POLICIES)}")
    return {"seed": SEED, **info.options}


def check_options(policy: str, options: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """`options` converted to the policy's types; AndreasError naming `where` (a file and
    field, or a CLI flag), the key and the valid keys, for an unknown key or a bad value."""
    specs = option_specs(policy)
    prefix = f"{where}: " if where else ""
    out = {}
    for key, value in options.items():
        spec = specs.get(key)
        if spec is None:
            raise AndreasError(f"{prefix}unknown option {key!r} for policy {policy!r}; valid: "
                               f"{', '.join(sorted(specs))} (see `andreas policies {policy}`)")
        try:
            out[key] = spec.convert(value)
        except (TypeError, ValueError) as exc:
            raise AndreasError(f"{prefix}option {key!r} of policy {policy!r}: {exc}, got "
                               f"{value!r} ({spec.kind})") from None
    return out


def check_shared_options(policies: Iterable[str], options: Mapping[str, Any],
                         where: str = "") -> dict[str, Any]:
    """Options meant for several policies at once (`compare --set ...`): each key must be
    valid for at least one of them, and is converted by the first that takes it."""
    names = list(policies)
    out: dict[str, Any] = {}
    for key, value in options.items():
        takers = [p for p in names if key in option_specs(p)]
        if not takers:
            valid = sorted(set().union(*(option_specs(p) for p in names)))
            raise AndreasError(f"{where + ': ' if where else ''}unknown option {key!r} for "
                               f"{', '.join(names)}; valid: {', '.join(valid)}")
        out[key] = check_options(takers[0], {key: value}, where)[key]
    return out


def parse_assignments(items: Iterable[str], policies: str | Iterable[str],
                      where: str = "--set") -> dict[str, Any]:
    """['key=value', ...] -> {key: value}, checked as `check_shared_options` does."""
    names = [policies] if isinstance(policies, str) else list(policies)
    pairs: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AndreasError(f"{where}: expected key=value, got {item!r}")
        pairs[key.strip()] = value.strip()
    return check_shared_options(names, pairs, where)


def shared_options(policies: Iterable[str], base: Mapping[str, Any],
                   options_file: Path | None, assignments: Iterable[str]) -> dict[str, Any]:
    """Options from flags (`base`), then a --policy-options file, then --set items: each
    checked against the policies, and each later source winning."""
    names = list(policies)
    out: dict[str, Any] = {}
    for key, value in base.items():  # a flag's error names the flag
        out.update(check_shared_options(names, {key: value}, "--" + key.replace("_", "-")))
    if options_file is not None:
        out.update(check_shared_options(names, read_options_file(options_file),
                                        str(options_file)))
    out.update(parse_assignments(assignments, names))
    return out


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


def options_for(policy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of shared options (one set for several policies) that `policy` takes."""
    specs = option_specs(policy)
    return {k: v for k, v in options.items() if k in specs}
