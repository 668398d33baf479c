"""The policies by name, and the options each takes.

`register` makes a policy factory available by name with the options it takes; `make_policy`
(policies/__init__.py) builds one. The CLI's `--set key=value` and `--policy-options
FILE.yaml`, `service.yaml`'s `policy_options` and `make_policy(name, **options)` all go
through `check_options`, so an unknown key is an error that lists the valid ones wherever it
is written, and a value is converted and checked the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..errors import AndreasError
from .base import Policy
from .options import SEED, OptionSpec, read_options_file

# Options renamed when the plan steps took their own options (2026-12): what to write now
REPLACED = {
    "hold_share": "three steps' options: wait.share, company.share and consolidate.share "
                  "(the CLI's --hold sets all three; off turns the steps off)",
    "hold_max_load": "company.max_load",
    "consolidate_margin": "consolidate.margin",
    "consolidate_max_load": "consolidate.max_load",
    "defer": "a step: leave 'defer' out of the steps option to turn it off",
    "power_limits": "a step: leave 'power_limits' out of the steps option to turn it off",
}


@dataclass
class PolicyInfo:
    name: str
    factory: Callable[..., Policy]
    randomized: bool
    summary: str
    options: Mapping[str, OptionSpec] = field(default_factory=dict)  # besides `seed`
    # the options that the given ones make available (a step named by its import path)
    more_options: Callable[[Mapping[str, Any]], Mapping[str, OptionSpec]] | None = None


POLICIES: dict[str, PolicyInfo] = {}


def register(name: str, *, randomized: bool, summary: str,
             options: Mapping[str, OptionSpec] | None = None,
             more_options: Callable[[Mapping[str, Any]], Mapping[str, OptionSpec]] | None = None
             ) -> Callable:
    """Register a policy factory under `name`; `options` are the settings it takes (see
    `options.py`): make_policy refuses any other."""
    def wrap(factory: Callable[..., Policy]) -> Callable[..., Policy]:
        POLICIES[name] = PolicyInfo(name, factory, randomized, summary, dict(options or {}),
                                    more_options)
        return factory
    return wrap


def option_specs(policy: str, given: Mapping[str, Any] | None = None) -> dict[str, OptionSpec]:
    """The options `policy` takes (`seed` first); with the options `given`, also those they
    make available (a step named by its import path brings its own: `more_options`)."""
    info = POLICIES.get(policy)
    if info is None:
        raise AndreasError(f"unknown policy {policy!r}; expected one of {', '.join(POLICIES)}")
    specs = {"seed": SEED, **info.options}
    if given and info.more_options is not None:
        specs.update(info.more_options(given))
    return specs


def _unknown(policy: str, key: str, specs: Mapping[str, OptionSpec], prefix: str) -> AndreasError:
    hint = REPLACED.get(key)
    if hint is not None:
        return AndreasError(f"{prefix}option {key!r} of policy {policy!r} is now {hint}")
    return AndreasError(f"{prefix}unknown option {key!r} for policy {policy!r}; valid: "
                        f"{', '.join(sorted(specs))} (see `andreas policies {policy}`)")


def check_options(policy: str, options: Mapping[str, Any], where: str = "",
                  given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`options` converted to the policy's types; AndreasError naming `where` (a file and
    field, or a CLI flag), the key and the valid keys, for an unknown key or a bad value.
    `given`: every option given with them (the steps they name bring options of their own)."""
    specs = option_specs(policy, {**(given or {}), **options})
    prefix = f"{where}: " if where else ""
    out = {}
    for key, value in options.items():
        spec = specs.get(key)
        if spec is None:
            raise _unknown(policy, key, specs, prefix)
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
        takers = [p for p in names if key in option_specs(p, options)]
        if not takers:
            if key in REPLACED:
                raise _unknown(names[0], key, {}, where + ": " if where else "")
            valid = sorted(set().union(*(option_specs(p) for p in names)))
            raise AndreasError(f"{where + ': ' if where else ''}unknown option {key!r} for "
                               f"{', '.join(names)}; valid: {', '.join(valid)}")
        out[key] = check_options(takers[0], {key: value}, where, given=options)[key]
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
        flag = "--" + key.replace("_", "-").replace(".", "-")
        out.update(check_shared_options(names, {key: value}, flag))
    if options_file is not None:
        out.update(check_shared_options(names, read_options_file(options_file),
                                        str(options_file)))
    out.update(parse_assignments(assignments, names))
    return out


def options_for(policy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of shared options (one set for several policies) that `policy` takes."""
    specs = option_specs(policy, options)
    return {k: v for k, v in options.items() if k in specs}
