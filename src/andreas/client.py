"""A Python client for the ANDREAS service's REST API (what the `andreas submit/jobs/...`
commands use, and what scripts can use too).

    from andreas.client import Client
    c = Client()                                  # URL and token: arguments, env, or file
    job = c.submit(script="train.py", args=["--lr", "0.1"], epochs=20, deadline_s=7200,
                   profile="resnet")
    print(job.state, job.reason, job.predicted_completion)

Where the URL and the token come from, first found wins: the arguments, `ANDREAS_URL` and
`ANDREAS_TOKEN`, the client file (`$ANDREAS_CLIENT_CONFIG`, default
`~/.config/andreas/client.yaml`, with keys `url` and `token`), then `http://127.0.0.1:8000`.

Requests that fail on the way (connection refused, a time-out, 429, 502-504) are retried with
capped exponential backoff. A submission carries an `Idempotency-Key`, so its retry never makes
a second job. Every other error is an `ApiError` with the service's own sentence.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import yaml

from .errors import AndreasError
from .service.states import FINAL_STATES
from .timing import on_time, shown_end

DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUS = (429, 502, 503, 504)


class ApiError(AndreasError):
    """The service refused a request. Its text is the service's sentence, in plain words (a
    person reads it on the command line); `status`, `method` and `path` say which HTTP
    answer to which request, for programs and bug reports."""

    def __init__(self, status: int, detail: str, method: str, path: str) -> None:
        super().__init__(plain_words(status, detail))
        self.status, self.detail, self.method, self.path = status, detail, method, path


def plain_words(status: int, detail: str) -> str:
    """What to tell a person about an HTTP answer `status` whose sentence is `detail`."""
    if status == 401:
        return (f"{detail} (give a valid token: --token, ANDREAS_TOKEN or the client file "
                f"{client_config_path()}; "
                "an admin makes one with `andreas tokens create NAME`)")
    if status == 403:
        return f"not allowed: {detail}"
    if status >= 500:
        return f"the service could not do this ({status}): {detail}"
    return detail


def client_config_path() -> Path:
    return Path(os.environ.get("ANDREAS_CLIENT_CONFIG")
                or Path.home() / ".config" / "andreas" / "client.yaml")


def resolve_settings(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The service URL and token: arguments, then environment, then the client file."""
    url = url or os.environ.get("ANDREAS_URL")
    token = token or os.environ.get("ANDREAS_TOKEN")
    if url is None or token is None:
        stored = read_client_config(client_config_path())
        url = url or stored.get("url")
        token = token or stored.get("token")
    return (url or DEFAULT_URL).rstrip("/"), token


def read_client_config(path: Path) -> dict[str, str]:
    """`url` and `token` from a client file; {} when there is none."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise AndreasError(f"{path}: cannot read the client file: {exc}") from None
    if not isinstance(data, dict):
        raise AndreasError(f"{path}: expected a mapping with keys url and token")
    unknown = set(data) - {"url", "token"}
    if unknown:
        raise AndreasError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                           "expected url and token")
    for key, value in data.items():
        if not isinstance(value, str):
            raise AndreasError(f"{path}: {key}: expected text, got {value!r}")
    return data


@dataclass(frozen=True)
class Job:
    """A job as the service shows it (`raw` keeps every field of the answer)."""

    id: str
    name: str
    owner: str
    state: str
    epochs: float
    epochs_done: float
    submitted_at: float
    due_date: float
    weight: float
    reason: str | None
    held_until: float | None
    message: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> "Job":
        return cls(data["id"], data["name"], data["owner"], data["state"], data["epochs"],
                   data["epochs_done"], data["submitted_at"], data["due_date"], data["weight"],
                   data.get("reason"), data.get("held_until"), data.get("message"), data)

    def _forecast(self, key: str) -> float | None:
        forecast = self.raw.get("forecast") or {}
        value = forecast.get(key)
        return None if value is None else float(value)

    @property
    def predicted_start(self) -> float | None:
        return self._forecast("start")

    @property
    def predicted_completion(self) -> float | None:
        """When the latest forecast ends the job; once it ended, what happened: its completion
        time, or None for a job that never completed (cancelled, failed, timed out)."""
        return shown_end(self._completed_at, self.final, self._forecast("completion"))

    @property
    def completion_range(self) -> tuple[float, float] | None:
        """How sure the latest forecast's completion is: its early and late bounds (the job
        faster, or slower with sampled arrivals; `sim.forecast.forecast_range`); None once the
        job ended, or where the service gives no range."""
        return None if self.final else self._range("completion_range")

    @property
    def cost_range(self) -> tuple[float, float] | None:
        """The same for the forecast's cost (EUR); None once the job ended."""
        return None if self.final else self._range("total_cost_range")

    def _range(self, key: str) -> tuple[float, float] | None:
        value = (self.raw.get("forecast") or {}).get(key)
        if not isinstance(value, list) or len(value) != 2:
            return None
        try:
            return float(value[0]), float(value[1])
        except (TypeError, ValueError):
            return None

    @property
    def _completed_at(self) -> float | None:
        value = self.raw.get("completed_at")
        return None if value is None else float(value)

    @property
    def predicted_cost(self) -> float | None:
        """The latest forecast's energy + tardiness cost of the job (EUR); once it ended, the
        cost measured (a forecast of a finished job is no longer one)."""
        if self.final:
            measured = (self.raw.get("measured") or {}).get("total_cost")
            return None if measured is None else float(measured)
        return self._forecast("total_cost")

    @property
    def emissions_kg(self) -> float | None:
        """kg CO2eq of the whole job where the service knows the grid's intensity: what its
        runs emitted so far plus, while it is not over, what the latest forecast adds."""
        so_far = (self.raw.get("measured") or {}).get("emissions_kg")
        to_come = None if self.final else self._forecast("emissions_kg")
        if so_far is None and to_come is None:
            return None
        return float(so_far or 0.0) + (to_come or 0.0)

    @property
    def on_time(self) -> bool | None:
        """Whether the job ends by its due date (the rule of every view: timing.on_time)."""
        return on_time(self._completed_at, self.final, self.due_date,
                       self._forecast("completion"))

    @property
    def node(self) -> str | None:
        run = self.raw.get("running_on")
        return None if not run else run["node"]

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


@dataclass(frozen=True)
class Token:
    """An API token as listed; `secret` only in the answer that created it."""

    id: int
    user: str
    role: str
    created_at: float
    expires_at: float | None
    revoked: bool
    valid: bool
    secret: str | None = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> "Token":
        return cls(data["id"], data["user"], data["role"], data["created_at"],
                   data.get("expires_at"), data["revoked"], data["valid"], data.get("token"))


class Client:
    """The service's API as methods with typed results."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 30.0, retries: int = 4, backoff_s: float = 0.5,
                 max_backoff_s: float = 8.0, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.url, self.token = resolve_settings(url, token)
        if not self.token:
            raise AndreasError(
                "no API token: pass --token, set ANDREAS_TOKEN, or write 'token: ...' in "
                f"{client_config_path()}")
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self._sleep = sleep
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Bearer {self.token}"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Exponential backoff, capped; a 429's Retry-After when it says more."""
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        if response is not None:
            try:
                delay = max(delay, min(self.max_backoff_s,
                                       float(response.headers.get("Retry-After", 0))))
            except ValueError:
                pass
        return delay

    def request(self, method: str, path: str, *, retry_unsent_only: bool = False,
                **kwargs: Any) -> httpx.Response:
        """One API call, retried on failures on the way; an `ApiError` on a refusal.
        `retry_unsent_only`: a request that is not safe to repeat (a cancel) is retried only
        when it never reached the service (connection refused)."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.ConnectError as exc:
                if last:
                    raise AndreasError(f"cannot reach the service at {self.url}: {exc}") from None
                self._sleep(self._delay(attempt, None))
                continue
            except httpx.TransportError as exc:
                if last or retry_unsent_only:
                    raise AndreasError(f"{method} {path}: no answer from {self.url}: "
                                       f"{type(exc).__name__}: {exc}") from None
                self._sleep(self._delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUS and not last and not (
                    retry_unsent_only and response.status_code != 429):
                self._sleep(self._delay(attempt, response))
                continue
            if response.status_code >= 400:
                raise ApiError(response.status_code, _detail(response), method, path)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    # ------------------------------------------------------------------ jobs
    def submit(self, *, epochs: float, command: list[str] | None = None,
               script: str | None = None, args: list[str] | tuple[str, ...] = (),
               deadline_s: float | None = None, due_date: float | None = None,
               priority: int | None = None, weight: float | None = None,
               profile: str | None = None, name: str | None = None,
               workdir: str | None = None, preemptible: bool = True,
               start_asap: bool = False, max_runtime_s: float | None = None,
               hard_deadline: bool = False, working_dir: str | None = None,
               idempotency_key: str | None = None,
               inline_profile: list[dict[str, Any]] | None = None) -> Job:
        """Submit a job (`wait_planned` then gives its forecast). Safe to retry: the same
        `idempotency_key` (one is made when not given) never makes a second job. With
        `hard_deadline`, a job the forecast ends late is refused: ApiError 409.
        `inline_profile` (instead of `profile`): rows of gpu_type, gpus, seconds_per_epoch
        and optionally nodes (a gang), power_w, startup_s."""
        body: dict[str, Any] = {"epochs": epochs}
        if inline_profile is not None:
            body["inline_profile"] = inline_profile
        if not preemptible:
            body["preemptible"] = False
        if start_asap:
            body["start_asap"] = True
        if max_runtime_s is not None:
            body["max_runtime_s"] = max_runtime_s
        if hard_deadline:
            body["hard_deadline"] = True
        for key, value in (("command", command), ("script", script), ("deadline_s", deadline_s),
                           ("due_date", due_date), ("priority", priority), ("weight", weight),
                           ("profile", profile), ("name", name), ("workdir", workdir),
                           ("working_dir", working_dir)):
            if value is not None:
                body[key] = value
        if args:
            body["args"] = list(args)
        key = idempotency_key or uuid.uuid4().hex
        return Job.of(self._json("POST", "/jobs", json=body, headers={"Idempotency-Key": key}))

    def wait_planned(self, job_id: str, timeout_s: float = 15.0, poll_s: float = 0.25) -> Job:
        """The job once the scheduler has planned it (it has a forecast, or has ended), or as
        it is after `timeout_s`. A submission is answered before the scheduler's next
        decision, which usually follows within a second."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job.raw.get("forecast") is not None or job.final or time.monotonic() >= deadline:
                return job
            self._sleep(poll_s)

    def upload_dir(self, folder: str | Path) -> dict[str, Any]:
        """Send a folder (its files, less symbolic links, .git and __pycache__) as a gzipped
        tar; the answer's `id` is a submission's `working_dir`."""
        import tarfile
        import tempfile

        root = Path(folder)
        if not root.is_dir():
            raise AndreasError(f"--working-dir: {str(root)!r} is not a folder")
        with tempfile.TemporaryFile() as f:
            with tarfile.open(fileobj=f, mode="w:gz") as tar:
                for path in sorted(root.rglob("*")):
                    rel = path.relative_to(root)
                    if path.is_symlink() or {".git", "__pycache__"} & set(rel.parts):
                        continue
                    tar.add(path, arcname=rel.as_posix(), recursive=False)
            f.seek(0)
            return self._json("POST", "/uploads", content=f.read(), retry_unsent_only=True,
                              headers={"Content-Type": "application/gzip"})

    def jobs(self, state: str | None = None) -> list[Job]:
        """Your jobs (every job with an admin token), oldest first."""
        params = {"state": state} if state else None
        return [Job.of(j) for j in self._json("GET", "/jobs", params=params)]

    def job(self, job_id: str) -> Job:
        return Job.of(self._json("GET", f"/jobs/{job_id}"))

    def cancel(self, job_id: str) -> Job:
        return Job.of(self._json("POST", f"/jobs/{job_id}/cancel", retry_unsent_only=True))

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        """Every start of the job: node, GPUs, start, end, why it stopped."""
        return self._json("GET", f"/jobs/{job_id}/runs")

    def logs(self, job_id: str, tail_bytes: int = 65536) -> str:
        return self.request("GET", f"/jobs/{job_id}/logs",
                            params={"tail_bytes": tail_bytes}).text

    def follow_logs(self, job_id: str, poll_s: float = 1.0,
                    tail_bytes: int = 1 << 20) -> Iterator[str]:
        """The job's log as it grows: first its last `tail_bytes`, then each new piece, until
        the job has ended (completed, failed, cancelled or timed out) and its last lines are out."""
        seen = ""
        while True:
            final = self.job(job_id).final  # read before the logs: nothing written after is lost
            text = self.logs(job_id, tail_bytes)
            new = _new_text(seen, text)
            if new:
                yield new
            seen = text
            if final:
                return
            self._sleep(poll_s)

    # ------------------------------------------------------------------ cluster
    def plan(self) -> dict[str, Any]:
        return self._json("GET", "/plan")

    def nodes(self) -> list[dict[str, Any]]:
        return self._json("GET", "/nodes")

    def profiles(self) -> list[dict[str, Any]]:
        """The service's named profiles: name and configurations (type, GPUs, s/epoch)."""
        return self._json("GET", "/profiles")

    def drain(self, node: str) -> dict[str, Any]:
        """Drain a node (admin): its jobs finish or move, nothing new starts there."""
        return self._json("POST", f"/nodes/{node}/drain")

    def undrain(self, node: str) -> dict[str, Any]:
        return self._json("POST", f"/nodes/{node}/undrain")

    def whoami(self) -> dict[str, str]:
        return self._json("GET", "/whoami")

    # ------------------------------------------------------------------ tokens
    def tokens(self) -> list[Token]:
        """Every token (admin) or your own, without their secrets."""
        return [Token.of(t) for t in self._json("GET", "/tokens")]

    def create_token(self, user: str, role: str = "user",
                     expires_in_s: float | None = None) -> Token:
        """A new token for `user` (an admin only); its `secret` is shown this once."""
        body: dict[str, Any] = {"user": user, "role": role}
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        return Token.of(self._json("POST", "/tokens", json=body, retry_unsent_only=True))

    def revoke_token(self, token_id: int) -> Token:
        return Token.of(self._json("POST", f"/tokens/{token_id}/revoke"))


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else (response.text.strip()[:500] or response.reason_phrase)


def _new_text(seen: str, text: str) -> str:
    """What `text` (a log's tail read now) adds to `seen` (the tail read before). Logs only
    grow; when the tail window has moved on, the overlap is found from the end of `seen`."""
    if text.startswith(seen):
        return text[len(seen):]
    for size in (4096, 512, 64):
        anchor = seen[-size:]
        if anchor and len(seen) >= size:
            at = text.rfind(anchor)
            if at >= 0:
                return text[at + len(anchor):]
    return text
