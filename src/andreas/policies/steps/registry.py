"""Plan steps by name, each with the options it owns.

A step is a class with a `name` (also the prefix of its options: `wait.share`), an `apply`
method, and optionally:

- `Options`: a frozen dataclass whose fields are made with `options.option(default, help)`;
  the policy then takes `<name>.<field>` options (`--set wait.share=0.2`), converted and
  checked as every other option is;
- `configure(options)`: a class method that builds the step from its options (an `Options`
  instance, or None for a step without), or returns None to stay off. Without it the class is
  built with no argument, or with its options if it has some.

Steps in this package register under a short name (`@register_step`); any other is named by
its import path (`my_module:MyStep`) in the policy's `steps` option. docs/plan-steps.md shows
one written outside the package.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

from ...errors import AndreasError
from ..arrivals import ArrivalLog
from ..base import Policy, Snapshot
from ..decision import Decision
from ..options import OptionSpec, dataclass_options
from .forward_check import CheckOptions


@dataclass
class StepContext:
    """What the steps of one decision share: the arrivals the policy has seen and the offered
    load they give (computed once), the policy's seed, whether a pass budget bounds the
    decision (trace replays: no step replays the queue), the policy that plays later
    decisions in a forward check and how the check judges, and the nodes that jobs wait to
    join."""

    arrivals: ArrivalLog
    load: float
    seed: int = 1
    budgeted: bool = False
    follower: Callable[[], Policy] | None = None
    check: CheckOptions = field(default_factory=CheckOptions)
    awaited: set[str] = field(default_factory=set)


class PlanStep(Protocol):
    name: str

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision: ...


@dataclass(frozen=True)
class StepKind:
    """A step as the policy knows it before building it: its name (its options' prefix), the
    class of its options (None: it has none) and how it is built from them."""

    name: str
    options: type | None
    build: Callable[[Any], "PlanStep | None"]

    def option_specs(self) -> dict[str, OptionSpec]:
        """This step's options, as the policy takes them (`<name>.<field>`)."""
        if self.options is None:
            return {}
        return {f"{self.name}.{key}": dataclasses.replace(spec, name=f"{self.name}.{key}")
                for key, spec in dataclass_options(self.options).items()}

    def configured(self, options: Mapping[str, Any]) -> "PlanStep | None":
        """The step built from the policy's options (those with this step's prefix)."""
        prefix = self.name + "."
        own = {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}
        if self.options is None:
            return self.build(None)
        try:
            options = self.options(**own)
        except TypeError as exc:  # a field the step's Options lacks
            raise AndreasError(f"{self.name}: {exc}") from None
        return self.build(options)


STEPS: dict[str, StepKind] = {}


def kind_of(cls: type, name: str | None = None) -> StepKind:
    """The StepKind of a step class (see the module's docstring)."""
    name = name or getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise AndreasError(f"steps: {cls.__name__} has no `name`")
    options = getattr(cls, "Options", None)
    if options is not None and not (isinstance(options, type)
                                    and dataclasses.is_dataclass(options)):
        raise AndreasError(f"steps: {cls.__name__}.Options must be a dataclass")
    configure = getattr(cls, "configure", None)
    if configure is not None:
        build = configure
    elif options is None:
        build = lambda _: cls()  # noqa: E731
    else:
        build = cls
    return StepKind(name, options, build)


def register_step(name: str) -> Callable:
    """Class decorator: make a step class available by `name` (its options' prefix)."""
    def wrap(cls):
        STEPS[name] = kind_of(cls, name)
        return cls
    return wrap


def resolve(name: str) -> StepKind:
    """A registered step, or `module:Class` imported (a step written outside this package)."""
    if name in STEPS:
        return STEPS[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise AndreasError(f"steps: cannot load {name!r}: {exc}") from None
        if not hasattr(cls, "apply"):
            raise AndreasError(f"steps: {name!r} has no apply(snapshot, decision, ctx) method")
        return kind_of(cls)
    raise AndreasError(f"steps: unknown step {name!r}; expected one of {', '.join(STEPS)} "
                       "or module:Class")


def step_option_specs(names: Iterable[str]) -> dict[str, OptionSpec]:
    """The options of the steps `names`, prefixed by each step's name."""
    out: dict[str, OptionSpec] = {}
    for name in names:
        out.update(resolve(name).option_specs())
    return out


def build_steps(names: Iterable[str], options: Mapping[str, Any]) -> list[PlanStep]:
    """The steps `names`, each configured from its options in `options` (turned-off ones left
    out)."""
    steps = (resolve(name).configured(options) for name in names)
    return [s for s in steps if s is not None]
