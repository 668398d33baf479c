"""Request and response bodies of the REST API (pydantic models, shown in `/docs`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# Limits on what a submission may hold: each refused with a 422 that names the field.
MAX_TEXT = 4096  # characters in one argument, path or name
MAX_ARGS = 1000  # arguments of a command
MAX_EPOCHS = 1e9
MIN_EPOCHS = 1e-3  # below this a job would count as done before it starts
MAX_DEADLINE_S = 10 * 365 * 86400.0  # ten years
MIN_RUN_S = 0.01  # a job's whole run in any configuration (epochs x seconds per epoch) ...
MAX_RUN_S = MAX_DEADLINE_S  # ... lies between these: the planner divides by it, and forecasts
#                             and views turn it into dates
MAX_UNIX_TIME = 4102444800.0  # 2100-01-01: a due date past it is a unit mistake
MAX_WEIGHT = 1e6  # EUR per second late
MAX_PROFILE_ROWS = 256
MAX_BATCH = 1000  # jobs in one batch


def _plain_text(value: str) -> str:
    """Text a database and a command line can hold: no NUL, valid UTF-8 (no lone surrogate)."""
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid UTF-8 text (no lone surrogate)") from None
    return value


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_plain_text)]


class Strict(BaseModel):
    """Every request body: unknown fields, NaN and infinities are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ProfileRow(Strict):
    gpu_type: Text = Field(description="GPU type name, e.g. V100 (case-insensitive)",
                           max_length=100)
    gpus: int = Field(ge=1, le=1024, description="GPUs (per node, for a gang)")
    nodes: int = Field(1, ge=1, le=1024, description="nodes: above 1, a gang that runs on "
                                                     "all of them together (docs/gangs.md)")
    seconds_per_epoch: float = Field(gt=0, le=1e9)
    power_w: float | None = Field(None, gt=0, le=1e5,
                                  description="measured draw of each GPU while the job trains "
                                              "(W); without it, the power table's")
    startup_s: float | None = Field(None, ge=0, le=86400,
                                    description="measured start-up (s): launch to its first "
                                                "progress report, less an epoch; without it, "
                                                "the cluster's restart_overhead_s")


class JobSubmit(Strict):
    """A training job. Give `command` or `script`; `due_date` or `deadline_s`; `weight` or
    `priority`; `profile` or `inline_profile`."""

    name: Text | None = Field(None, max_length=200)
    command: list[Text] | None = Field(None, min_length=1, max_length=MAX_ARGS,
                                       description="argv to run")
    script: Text | None = Field(None, description="a Python script, run with the service's "
                                                  "interpreter")
    args: list[Text] = Field(default_factory=list, max_length=MAX_ARGS,
                             description="arguments for `script`")
    workdir: Text | None = Field(None, description="working directory on the service's "
                                                   "machine (default: the service's)")
    working_dir: str | None = Field(None, pattern=r"^upl-[0-9a-f]{16}$",
                                    description="an upload's id (POST /uploads): the job runs "
                                                "in that folder (unpacked once per upload); "
                                                "`script` is a path inside it")
    epochs: float = Field(ge=MIN_EPOCHS, le=MAX_EPOCHS)
    due_date: float | None = Field(None, ge=0, le=MAX_UNIX_TIME,
                                   description="Unix time the job is due")
    deadline_s: float | None = Field(None, gt=0, le=MAX_DEADLINE_S,
                                     description="due this many seconds after submission")
    weight: float | None = Field(None, ge=0, le=MAX_WEIGHT,
                                 description="tardiness cost, EUR per second late")
    priority: int | None = Field(None, ge=1, le=5, description="1 (low) to 5 (high); sets the "
                                                               "weight from the configuration")
    profile: Text | None = Field(None, max_length=200,
                                 description="a profile name from the service's profiles.csv")
    inline_profile: list[ProfileRow] | None = Field(None, min_length=1,
                                                    max_length=MAX_PROFILE_ROWS)
    preemptible: bool = Field(True, description="false: once started, never paused or moved")
    start_asap: bool = Field(False, description="true: never held back to save energy")
    max_runtime_s: float | None = Field(None, gt=0, le=MAX_DEADLINE_S,
                                        description="wall-time limit over all its runs: then "
                                                    "stopped, state 'timeout'")
    hard_deadline: bool = Field(False, description="true: refused (409, with the forecast) "
                                                   "when the forecast ends it after its due date")


class ErrorOut(BaseModel):
    """Every error answer: one sentence that says what was wrong (a 422 names the field)."""

    detail: str


ERROR_RESPONSES: dict[int | str, dict] = {  # JSON also on routes that answer plain text
    code: {"model": ErrorOut, "description": text, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ErrorOut"}}}} for code, text in (
        (400, "the request is well-formed but cannot be accepted (e.g. an unknown profile)"),
        (401, "missing, unknown or revoked token"),
        (403, "the token may not do this"),
        (404, "no such job, or not yours"),
        (409, "the request conflicts with the job's state"),
        (413, "the request body is too large"),
        (422, "a field is missing, unknown, or out of range; the text names it"),
        (429, "too many failed logins from this address"),
        (503, "the database is unreachable for the moment; retry after Retry-After seconds"),
        (507, "the service's disk is full; nothing was stored; retry after Retry-After seconds"),
    )}


class RankPlace(BaseModel):
    node: str
    gpu_indices: list[int]


class RunOut(BaseModel):
    id: int
    node: str
    gpu_type: str
    gpu_indices: list[int]
    more_nodes: list[RankPlace] = Field(default_factory=list,
                                        description="a gang's other nodes, rank 1 on")
    state: str
    started_at: float
    ended_at: float | None
    epochs_at_start: float
    epochs_at_end: float | None
    stop_reason: str | None
    exit_code: int | None


class JobOut(BaseModel):
    id: str
    name: str
    owner: str
    state: str
    command: list[str]
    epochs: float
    epochs_done: float
    submitted_at: float
    due_date: float
    weight: float
    profile: str | None
    first_started_at: float | None
    completed_at: float | None
    message: str | None
    running_on: RunOut | None
    restarts: int
    speed_factor: float
    startup_s: float | None = Field(None, description="its runs' start-up as learned from "
                                                      "their first reports (s)")
    predicted: dict | None = Field(description="forecast made when the job was first planned")
    forecast: dict | None = Field(description="the latest forecast")
    measured: dict | None = Field(description="energy (modelled from busy time, or NVML) and "
                                              "tardiness so far")
    reason: str | None = Field(None, description="why a queued or paused job waits (held for "
                               "company, waiting for GPUs on node N, deferred to a cheaper "
                               "hour, no capacity, ...)")
    reason_code: str | None = Field(None, description="the reason in one word, as squeue's "
                                    "REASON column (no_capacity, paused_for, drained_out, "
                                    "over_quota, held_for_company, not_planned, "
                                    "decision_failed, starting, ...)")
    held_until: float | None = Field(None, description="when a job held back on purpose "
                                     "starts at the latest (Unix time)")
    queue_position: int | None = Field(None, description="1 + how many waiting jobs the "
                                       "latest forecast starts before this one")
    preemptible: bool = True
    start_asap: bool = False
    max_runtime_s: float | None = None
    hard_deadline: bool = False


class ProgressIn(Strict):
    epochs_done: float = Field(ge=0, le=MAX_EPOCHS)


class TokenCreate(Strict):
    user: Text = Field(min_length=1, max_length=100)
    role: str = Field("user", pattern="^(admin|user)$")
    expires_in_s: float | None = Field(None, gt=0, le=MAX_DEADLINE_S,
                                       description="valid for this many seconds (default: "
                                                   "until revoked)")


class UploadOut(BaseModel):
    id: str = Field(description="name it as a job's `working_dir`")
    bytes: int
    files: int
    expires_at: float | None = Field(None, description="when it is deleted (Unix time): "
                                                       "upload_ttl_s after it was sent")


class TokenOut(BaseModel):
    """A token as listed: never the token itself, which is shown once, when created."""

    id: int
    user: str
    role: str
    created_at: float
    expires_at: float | None
    revoked: bool
    valid: bool = Field(description="neither revoked nor expired")


class TokenCreated(TokenOut):
    token: str = Field(description="the secret: shown this once, stored only hashed")


class ProfileConfigOut(BaseModel):
    gpu_type: str
    gpus: int = Field(description="GPUs (per node, for a gang)")
    nodes: int = Field(1, description="above 1: a gang over that many nodes")
    seconds_per_epoch: float


class ProfileOut(BaseModel):
    """A named profile of the service's profiles.csv: a job submitted with `profile: NAME`
    may run in these configurations, at these speeds."""

    name: str
    configurations: list[ProfileConfigOut]


class NodeOut(BaseModel):
    name: str
    gpu_type: str
    gpus: int
    gpu_indices: list[int]
    busy: dict[str, str] = Field(description="GPU index -> job id")
    drained: bool = Field(False, description="an admin drained it: its jobs finish or move, "
                                             "nothing new starts there")
