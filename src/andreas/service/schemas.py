"""Request and response bodies of the REST API (pydantic models, shown in `/docs`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ProfileRow(BaseModel):
    gpu_type: str = Field(description="GPU type name, e.g. V100 (case-insensitive)")
    gpus: int = Field(ge=1)
    seconds_per_epoch: float = Field(gt=0)


class JobSubmit(BaseModel):
    """A training job. Give `command` or `script`; `due_date` or `deadline_s`; `weight` or
    `priority`; `profile` or `inline_profile`."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=200)
    command: list[str] | None = Field(None, min_length=1, description="argv to run")
    script: str | None = Field(None, description="a Python script, run with the service's "
                                                 "interpreter")
    args: list[str] = Field(default_factory=list, description="arguments for `script`")
    workdir: str | None = Field(None, description="working directory (default: the service's)")
    epochs: float = Field(gt=0)
    due_date: float | None = Field(None, description="Unix time the job is due")
    deadline_s: float | None = Field(None, gt=0, description="due this many seconds after "
                                                             "submission")
    weight: float | None = Field(None, ge=0, description="tardiness cost, EUR per second late")
    priority: int | None = Field(None, ge=1, le=5, description="1 (low) to 5 (high); sets the "
                                                               "weight from the configuration")
    profile: str | None = Field(None, description="a profile name from the service's "
                                                  "profiles.csv")
    inline_profile: list[ProfileRow] | None = Field(None, min_length=1)


class RunOut(BaseModel):
    id: int
    node: str
    gpu_type: str
    gpu_indices: list[int]
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
    predicted: dict | None = Field(description="forecast made when the job was first planned")
    forecast: dict | None = Field(description="the latest forecast")
    measured: dict | None = Field(description="energy (modelled from busy time, or NVML) and "
                                              "tardiness so far")
    reason: str | None = Field(None, description="why a queued or paused job waits (held for "
                               "company, waiting for GPUs on node N, deferred to a cheaper "
                               "hour, no capacity, ...)")
    held_until: float | None = Field(None, description="when a job held back on purpose "
                                     "starts at the latest (Unix time)")


class ProgressIn(BaseModel):
    epochs_done: float = Field(ge=0)


class TokenCreate(BaseModel):
    user: str = Field(min_length=1, max_length=100)
    role: str = Field("user", pattern="^(admin|user)$")


class NodeOut(BaseModel):
    name: str
    gpu_type: str
    gpus: int
    gpu_indices: list[int]
    busy: dict[str, str] = Field(description="GPU index -> job id")
