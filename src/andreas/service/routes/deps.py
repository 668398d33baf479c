"""What routes depend on: the app's store, scheduler and configuration, and who is asking.

Every route but `/healthz` takes `CurrentUser` (or `AdminUser`): a bearer token looked up in
the store, refused with 401 when missing or invalid, and with 429 while the client's address
has failed too often (the dashboard's sign-in counts failures with the API's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..config import ServiceConfig
from ..db import User
from ..scheduler import Scheduler
from ..store import Store

MAX_ID = 2**31 - 1  # integer ids fit both engines' INTEGER (a larger one was a 500 on SQLite)
bearer = HTTPBearer(auto_error=False, description="an API token (`andreas tokens create`; the "
                                                   "first admin's: ANDREAS_ADMIN_TOKEN)")


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_scheduler(request: Request) -> Scheduler:
    return request.app.state.scheduler


def get_config(request: Request) -> ServiceConfig:
    return request.app.state.config


StoreDep = Annotated[Store, Depends(get_store)]
SchedulerDep = Annotated[Scheduler, Depends(get_scheduler)]
ConfigDep = Annotated[ServiceConfig, Depends(get_config)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def check_rate(request: Request) -> str:
    """The client's address, refused with 429 while it has failed too often."""
    address = request.client.host if request.client else "?"
    wait = request.app.state.limiter.retry_after(address)
    if wait > 0:
        raise HTTPException(429, f"too many failed logins from {address}; try again in "
                                 f"{wait:.0f} s", headers={"Retry-After": f"{wait:.0f}"})
    return address


def refuse(request: Request, address: str, status: int, detail: str) -> HTTPException:
    """A refusal that counts as a failed login of `address`."""
    request.app.state.limiter.failed(address)
    return HTTPException(status, detail)


def missing_token(request: Request, address: str) -> HTTPException:
    return refuse(request, address, 401, "missing token: send 'Authorization: Bearer <token>'")


def current_user(request: Request, credentials: Credentials, store: StoreDep) -> User:
    address = check_rate(request)
    if credentials is None:
        raise missing_token(request, address)
    user = store.user_for(credentials.credentials)
    if user is None:
        raise refuse(request, address, 401, "invalid or revoked token")
    return user


CurrentUser = Annotated[User, Depends(current_user)]


def admin(user: CurrentUser) -> User:
    if user.role != "admin":
        raise HTTPException(403, "this needs an admin token")
    return user


AdminUser = Annotated[User, Depends(admin)]
