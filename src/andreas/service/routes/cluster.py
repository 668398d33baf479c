"""The cluster: `/nodes` (GPUs and who holds them), drain and undrain (admin), `/plan`."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from ..db import User
from ..gpus import gpu_holders
from ..schemas import NodeOut, ProfileConfigOut, ProfileOut
from ..services import Services
from ..store.jobs import owned_job_ids
from .deps import AdminUser, CurrentUser, ServicesDep

router = APIRouter(tags=["cluster"])


def node_list(svc: Services, user: User) -> list[NodeOut]:
    """GPUs and who holds them; a user sees other users' jobs only as "busy"."""
    with svc.store.session() as s:
        busy = gpu_holders(s, owned_job_ids(s, user))
    drained = svc.store.drained_nodes()
    return [NodeOut(name=n.name, gpu_type=n.gpu_type, gpus=n.gpus,
                    gpu_indices=list(n.gpu_indices), busy=busy.get(n.name, {}),
                    drained=n.name in drained)
            for n in svc.nodes()]


@router.get("/profiles", response_model=list[ProfileOut])
def profiles(_: CurrentUser, svc: ServicesDep):
    """The service's named profiles (profiles.csv), by name: what `profile` may say in a
    submission, and the configurations and speeds each gives."""
    profiles = svc.config.profiles
    return [ProfileOut(name=name, configurations=[
        ProfileConfigOut(gpu_type=t, gpus=g, nodes=n, seconds_per_epoch=spe)
        for (t, g, n), spe in sorted(
            [((t, g, 1), spe) for (t, g), spe in profiles.table[name].items()]
            + list(profiles.gangs.get(name, {}).items()))]) for name in sorted(profiles.table)]


@router.get("/nodes", response_model=list[NodeOut])
def nodes(user: CurrentUser, svc: ServicesDep):
    """GPUs and who holds them; a user sees other users' jobs only as "busy"."""
    return node_list(svc, user)


def set_drained(svc: Services, name: str, drained: bool, user: User) -> NodeOut:
    if name not in {n.name for n in svc.nodes()}:
        raise HTTPException(404, f"no node {name!r}")
    svc.store.set_drained(name, drained, user.name)
    svc.wake("drain" if drained else "undrain")
    return next(n for n in node_list(svc, user) if n.name == name)


@router.post("/nodes/{name}/drain", response_model=NodeOut)
def drain(name: str, user: AdminUser, svc: ServicesDep):
    """Let the node's jobs finish (or move, if the plan moves them) and start nothing new
    there, until undrained (kept across restarts)."""
    return set_drained(svc, name, True, user)


@router.post("/nodes/{name}/undrain", response_model=NodeOut)
def undrain(name: str, user: AdminUser, svc: ServicesDep):
    return set_drained(svc, name, False, user)


@router.get("/plan")
def plan(user: CurrentUser, svc: ServicesDep):
    """The latest decision: what runs where, why each waiting job waits, the forecast."""
    info = svc.board.latest
    with svc.store.session() as s:
        owned = owned_job_ids(s, user)

    def keep(job_id: str) -> bool:
        return owned is None or job_id in owned

    forecast = {j: f for j, f in info.forecast.items() if keep(j)}
    return {"time": info.time, "policy": svc.config.policy, "decisions": info.decisions,
            "source": info.source, "revisit_at": info.revisit_at,
            "reasons": info.reasons, "decision_seconds": info.decision_s,
            "assignments": {j: a for j, a in info.assignments.items() if keep(j)},
            "waiting": {j: w for j, w in info.waiting.items() if keep(j)},
            "forecast": forecast,
            "forecast_cut": info.forecast_cut,  # why no fresh forecast, if none
            "predicted_total_cost": sum(f["total_cost"] for f in forecast.values())}
