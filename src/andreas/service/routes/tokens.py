"""API tokens: an admin creates them; everyone lists and revokes their own (an admin: all)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, HTTPException
from fastapi import Path as FastAPIPath

from ...errors import AndreasError
from ..db import Token, User
from ..schemas import TokenCreate, TokenCreated, TokenOut
from .deps import MAX_ID, AdminUser, CurrentUser, ServicesDep

router = APIRouter(tags=["tokens"])


def token_out(token: Token, user: User) -> TokenOut:
    return TokenOut(id=token.id, user=user.name, role=user.role, created_at=token.created_at,
                    expires_at=token.expires_at, revoked=token.revoked,
                    valid=token.valid(time.time()))


@router.post("/tokens", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, _: AdminUser, svc: ServicesDep):
    """Create a token for a user (made if new); the answer holds the secret, once."""
    expires = None if body.expires_in_s is None else time.time() + body.expires_in_s
    try:
        token_id, token = svc.store.create_token(body.user, body.role, expires)
    except AndreasError as exc:
        raise HTTPException(409, str(exc)) from None
    entry = next(e for e in svc.store.tokens() if e[0].id == token_id)
    return TokenCreated(**token_out(*entry).model_dump(), token=token)


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(user: CurrentUser, svc: ServicesDep):
    """Every token (an admin) or your own (a user), without the secrets."""
    mine = None if user.role == "admin" else user.id
    return [token_out(t, u) for t, u in svc.store.tokens(mine)]


@router.post("/tokens/{token_id}/revoke", response_model=TokenOut)
def revoke_token(token_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)], user: CurrentUser,
                 svc: ServicesDep):
    """Revoke a token (an admin: any; a user: their own); refused from the next request."""
    revoked = svc.store.revoke_token(token_id, None if user.role == "admin" else user.id)
    if revoked is None:
        raise HTTPException(404, f"no token {token_id} of yours")
    return token_out(*revoked)
