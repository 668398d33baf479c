"""What routes depend on: the app's parts (`Services`: the store, the configuration, the
plan board...), and who is asking.

Every route but `/healthz` takes `CurrentUser` (or `AdminUser`): a bearer token looked up in
the store, refused with 401 when missing or invalid, and with 429 once the client's address
or the token tried has failed too often (the dashboard's sign-in counts failures with the
API's); a valid token is never refused for what its address did."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ..db import User
from ..services import Services
from ..store import hash_token

MAX_ID = 2**31 - 1  # integer ids fit both engines' INTEGER (a larger one was a 500 on SQLite)
bearer = HTTPBearer(auto_error=False, description="an API token (`andreas tokens create`; the "
                                                   "first admin's: ANDREAS_ADMIN_TOKEN)")


# One dependency, and a coroutine: FastAPI runs a plain function dependency in its thread
# pool, and a hop per accessor per request raised the API's latency under load
# (bench/service-load.md, 2026-12-02).
async def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def client_address(request: Request) -> str:
    """The client's address (as the socket gives it; a proxy's X-Forwarded-For only when the
    operator trusts that proxy: `trusted_proxies`)."""
    return request.client.host if request.client else "?"


def refuse(request: Request, address: str, status: int, detail: str,
           token: str | None = None) -> HTTPException:
    """A refusal that counts as a failed login of `address` and of the `token` tried; past
    the limit of either, a 429 with Retry-After instead. A valid token is never refused
    here, whatever its address did: 20 bad tokens from one address (a shared NAT, the jobs'
    own machine) once locked out every valid token from it."""
    limiter = request.app.state.limiter
    keys = [address] + ([token_key(token)] if token else [])
    wait = max(limiter.retry_after(key) for key in keys)  # before this failure counts
    for key in keys:
        limiter.failed(key)
    if wait > 0:
        return HTTPException(429, f"too many failed logins from {address}; try again in "
                                  f"{wait:.0f} s", headers={"Retry-After": f"{wait:.0f}"})
    return HTTPException(status, detail)


def token_key(token: str) -> str:
    """The limiter's key for a token tried (its hash: the token itself is not kept)."""
    return "token:" + hash_token(token)[:16]


def missing_token(request: Request, address: str) -> HTTPException:
    return refuse(request, address, 401, "missing token: send 'Authorization: Bearer <token>'")


async def current_user(request: Request, credentials: Credentials, svc: ServicesDep) -> User:
    """The token's user: from the store's cache at once, or from the database in a worker
    thread (a sync dependency would take a thread hop on every request)."""
    address = client_address(request)
    if credentials is None:
        raise missing_token(request, address)
    known, user = svc.store.cached_user(credentials.credentials)
    if not known:
        user = await run_in_threadpool(svc.store.user_for, credentials.credentials)
    if user is None:
        raise refuse(request, address, 401, "invalid or revoked token", credentials.credentials)
    return user


CurrentUser = Annotated[User, Depends(current_user)]


async def admin(user: CurrentUser) -> User:
    if user.role != "admin":
        raise HTTPException(403, "this needs an admin token")
    return user


AdminUser = Annotated[User, Depends(admin)]
