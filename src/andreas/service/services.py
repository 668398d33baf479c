"""What the API and the dashboard work with (`Services`): the repository, the configuration,
the read models (the plan board, the costs so far, the executor's nodes) and the scheduler's
entry points for requests (wake it, forecast a job before it is submitted).

Routes and pages read these; none reaches into the scheduler's loop. `api.py` assembles them
once per app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..executors import NodeInfo
from ..sim.forecast import JobForecast
from .accounting import Accounting
from .config import ServiceConfig
from .db import JobRow
from .plan_board import PlanBoard
from .runs import Runs
from .scheduler import Scheduler
from .store import Store


@dataclass(frozen=True)
class Services:
    store: Store
    config: ServiceConfig
    board: PlanBoard  # the latest decision, its forecasts, the decision log
    accounting: Accounting  # what the jobs have cost so far
    runs: Runs  # progress posts are recorded through it
    nodes: Callable[[], list[NodeInfo]]  # the executor's nodes now
    wake: Callable[[str], None]  # ask the scheduler for a new decision, saying why
    what_if: Callable[[JobRow, str], JobForecast]  # a job's forecast before it is accepted
    scheduler_alive: Callable[[], bool]

    @classmethod
    def around(cls, store: Store, config: ServiceConfig, scheduler: Scheduler) -> "Services":
        return cls(store=store, config=config, board=scheduler.board,
                   accounting=scheduler.accounting, runs=scheduler.runs,
                   nodes=scheduler.executor.nodes, wake=scheduler.wake,
                   what_if=scheduler.what_if, scheduler_alive=scheduler.alive)
