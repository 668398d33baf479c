"""The service configuration, `service.yaml`: which cluster, which database, which policy.

Example (paths are relative to the file)::

    cluster: cluster.yaml            # scenario format: GPU types, nodes, price, PUE, overhead
    profiles: profiles.csv           # optional: named profiles jobs can refer to
    database_url: sqlite:///state/andreas.db   # or postgresql://user@host/db
    data_dir: state                  # checkpoints, logs, run records
    executor: local                  # or ray, or slurm (nodes then come from Ray or Slurm)
    job_user: andreas-job            # the unprivileged OS user jobs run as (service as root)
    job_users: {alice: alice}        # per submitting user: their own OS account (as Slurm)
    jobs_as_service_user: false      # true: jobs run as the service's own user (trusted only)
    ray_address: auto
    slurm_partition: gpu             # slurm: the partition to submit to (default: Slurm's)
    gpu_indices: {ws0: [0, 1]}       # CUDA device numbers per node; default 0..gpus-1
    policy: andreas
    policy_options: {seed: 1}
    decision_budget_ms: 500          # a decision stops searching after this long (0: never)
    decide_in: process               # or thread: where decisions and forecasts run (decider.py)
    decide_nice: 10                  # the decision worker's CPU niceness, 0-19 (decider.py)
    forecast_budget_s: 30            # a forecast longer than this is stopped (null: never)
    switch_gain: 0.05                # a new plan replaces the running one only if 5 % cheaper
    period_s: 60                     # also replan every minute (null: only on events)
    grace_s: 10                      # SIGTERM, then SIGKILL after this long
    max_body_bytes: 4194304          # larger request bodies are refused (413)
    max_upload_bytes_per_user: 1073741824  # a user's uploads together, unpacked (413 past it)
    public_url: http://127.0.0.1:8000  # where jobs report progress (default: where serve binds)
    trusted_proxies: [10.0.0.5]      # whose X-Forwarded-For names the client (default: none)
    log_progress_posts: false        # access-log lines of accepted progress posts (one per epoch)
    priority_weights: {1: 0.0001, 2: 0.0002, 3: 0.0005, 4: 0.001, 5: 0.002}

Every problem is reported with the file, the line and the field, like scenario files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AndreasError, ScenarioError
from ..io import CLUSTER_KEYS, Fields, load_located_yaml, read_cluster, read_profiles
from ..model import Cluster, Profiles
from ..policies import POLICIES
from ..policies.registry import check_options, option_specs
from .decider import WORKER_NICENESS
from .planner import SWITCH_GAIN
from .quotas import Limits, Quotas

DEFAULT_DECISION_BUDGET_MS = 500.0
"""The service's default `decision_budget_ms` (policies/budget.py), for policies that take it:
while the scheduler decides, the service answers nothing else, so a live decision is bounded
(the simulator's default is no budget, so that experiments repeat exactly)."""

DEFAULT_PRIORITY_WEIGHTS = {1: 0.0001, 2: 0.0002, 3: 0.0005, 4: 0.001, 5: 0.002}
"""Tardiness weight (EUR per second late) for priorities 1 (lowest) to 5 (highest)."""


SERVICE_KEYS = (
    "cluster", "profiles", "database_url", "data_dir", "executor", "ray_address",
    "slurm_partition", "gpu_indices", "job_user", "job_users", "jobs_as_service_user", "policy",
    "policy_options", "decision_budget_ms", "decide_in", "decide_nice", "forecast_budget_s",
    "period_s", "poll_s", "grace_s", "max_body_bytes", "auth_max_failures", "auth_window_s",
    "public_url", "priority_weights", "learn", "replan_deviation", "switch_gain",
    "forecast_spread", "quotas",
    "max_retries",
    "max_upload_bytes", "max_upload_bytes_per_user", "upload_ttl_s", "allowed_roots",
    "trusted_proxies",
    "log_progress_posts")
"""Every key service.yaml may hold; any other is an error (io.Fields.only)."""
CLUSTER_FILE_KEYS = frozenset(CLUSTER_KEYS)


@dataclass(frozen=True)
class ServiceConfig:
    path: Path
    cluster: Cluster
    profiles: Profiles
    database_url: str
    data_dir: Path
    executor: str = "local"
    ray_address: str = "auto"
    slurm_partition: str | None = None
    gpu_indices: dict[str, tuple[int, ...]] = field(default_factory=dict)
    policy: str = "andreas"
    policy_options: dict = field(default_factory=dict)
    decide_in: str = "process"  # or "thread" (decider.py)
    decide_nice: int = WORKER_NICENESS  # the decision worker's niceness
    forecast_budget_s: float | None = 30.0  # a longer forecast is stopped (decider.ForecastCut)
    period_s: float | None = 60.0
    poll_s: float = 0.5
    grace_s: float = 10.0
    max_body_bytes: int = 4 * 1024 * 1024  # larger request bodies get 413
    auth_max_failures: int = 20  # failed logins from one address within auth_window_s ...
    auth_window_s: float = 60.0  # ... and it gets 429 until the oldest leaves the window
    public_url: str | None = None  # None: the address `andreas serve` binds (public_url_for)
    priority_weights: dict[int, float] = field(default_factory=lambda: dict(
        DEFAULT_PRIORITY_WEIGHTS))
    learn: bool = True
    replan_deviation: float = 0.1
    # a fresh decision replaces the plan carried out (after a changed speed or completions in
    # another order than foreseen) only if its forecast is this share cheaper (planner.py)
    switch_gain: float = SWITCH_GAIN
    # each job's speed is believed within this share until its reports say how much it
    # varies: its forecast's range (None: no range)
    forecast_spread: float | None = 0.1
    quotas: Quotas = field(default_factory=Quotas)  # per-user limits (quotas.py)
    max_retries: int = 3  # restarts from the checkpoint after a run is killed (OOM, signal)
    max_upload_bytes: int = 100 * 1024 * 1024  # a working folder sent with a job (gzipped)
    max_upload_bytes_per_user: int = 1024 ** 3  # a user's uploads together, unpacked
    upload_ttl_s: float = 7 * 86400.0  # an upload older than this is deleted (uploads.py)
    allowed_roots: tuple[Path, ...] = ()  # scripts and workdirs must lie inside (empty: anywhere)
    trusted_proxies: tuple[str, ...] = ()  # addresses whose X-Forwarded-For is believed
    log_progress_posts: bool = False  # uvicorn's access lines for accepted progress posts
    job_user: str | None = None  # the OS user jobs run as, unless job_users names the submitter
    job_users: dict[str, str] = field(default_factory=dict)  # service user -> OS user
    jobs_as_service_user: bool = False  # the operator's explicit choice: no separation

    def job_account(self, owner: str) -> str | None:
        """The OS user a job of service user `owner` runs as; None: the service's own."""
        return self.job_users.get(owner, self.job_user)

    def job_dir(self, job_id: str) -> Path:
        """Where a job's files live: its checkpoint, logs and runs."""
        return self.data_dir / "jobs" / job_id

    def run_dir(self, job_id: str, run_id: int) -> Path:
        """Where a run's launcher writes its pid and exit status."""
        return self.job_dir(job_id) / "runs" / str(run_id)

    def with_database(self, url: str | None) -> "ServiceConfig":
        if not url:
            return self
        from dataclasses import replace

        return replace(self, database_url=url)


def _sqlite_url(base: Path, url: str) -> str:
    """Resolve a relative SQLite path against the config file's folder."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and ":memory:" not in url:
        return prefix + str((base / url[len(prefix):]).resolve())
    return url


def read_service_config(path: str | Path) -> ServiceConfig:
    path = Path(path)
    base = path.parent
    doc = Fields(path, load_located_yaml(path))
    for key, item in doc.located.value.items():
        if str(key).lower() in CLUSTER_FILE_KEYS or str(key).lower().startswith("restart_overhead"):
            raise doc.error(str(key), "unknown key here; it belongs in the cluster file (the "
                            "one `cluster:` names), which describes the GPUs, price and PUE",
                            item.line)
    doc.only(*SERVICE_KEYS)

    def text(key: str, default: str | None = None) -> str:
        item = doc.get(key)
        if item is None or item.value is None:
            if default is None:
                raise doc.error(key, "missing; it is required")
            return default
        if not isinstance(item.value, str) or not item.value.strip():
            raise doc.error(key, f"expected a non-empty string, got {item.value!r}", item.line)
        return item.value.strip()

    executor = text("executor", "local")
    if executor not in ("local", "ray", "slurm"):
        raise doc.error("executor", f"expected local, ray or slurm, got {executor!r}",
                        doc.require("executor").line)
    cluster_path = base / text("cluster")
    cluster = read_cluster(cluster_path, require_nodes=executor == "local", wall_clock=True)
    if cluster.carbon_cap is not None:
        raise ScenarioError(cluster_path, "a carbon cap is enforced by the simulator only, for "
                            "now (docs/carbon.md); expected no carbon_cap_kg here",
                            field="carbon_cap_kg")
    profiles = Profiles({})
    if doc.get("profiles") is not None:
        profiles = read_profiles(base / text("profiles"), cluster)
        if profiles.levels:
            raise ScenarioError(base / text("profiles"), "GPU power limits are supported by the "
                                "simulator only, for now (the executors do not set them); "
                                "expected no power_limit_w values", field="power_limit_w")

    indices: dict[str, tuple[int, ...]] = {}
    item = doc.get("gpu_indices")
    if item is not None and item.value is not None:
        if not isinstance(item.value, dict):
            raise doc.error("gpu_indices", "expected a mapping node -> list of GPU numbers",
                            item.line)
        gpus = {n.name: n.gpus for n in cluster.nodes}
        for node, located in item.value.items():
            values = [v.value for v in located.value] if isinstance(located.value, list) else None
            if node not in gpus:
                raise doc.error(f"gpu_indices.{node}", f"unknown node; expected one of "
                                f"{', '.join(gpus)}", located.line)
            if values is None or len(values) != gpus[node] or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
                raise doc.error(f"gpu_indices.{node}", f"expected a list of {gpus[node]} GPU "
                                f"numbers >= 0, got {located.value!r}", located.line)
            indices[node] = tuple(values)

    policy = text("policy", "andreas")
    if policy not in POLICIES:
        raise doc.error("policy", f"unknown policy {policy!r}; expected one of "
                        f"{', '.join(sorted(POLICIES))}", doc.require("policy").line)
    options = doc.get("policy_options")
    if options is not None and not isinstance(options.value, dict):
        raise doc.error("policy_options", "expected a mapping", options.line)
    policy_options = {}
    for key, located in (options.value.items() if options else []):
        try:  # the same check as make_policy and the CLI's --set: a typo is not lost
            policy_options.update(check_options(policy, {key: located.plain()}))
        except AndreasError as exc:
            raise doc.error(f"policy_options.{key}", str(exc), located.line) from None
    budget = doc.number("decision_budget_ms", default=DEFAULT_DECISION_BUDGET_MS, minimum=0.0)
    if "decision_budget_ms" in option_specs(policy):  # policy_options' own value wins
        policy_options.setdefault("decision_budget_ms", budget)

    decide_in = text("decide_in", "process")
    if decide_in not in ("process", "thread"):
        raise doc.error("decide_in", f"expected process or thread, got {decide_in!r}",
                        doc.require("decide_in").line)

    nice = doc.number("decide_nice", default=WORKER_NICENESS, minimum=0)
    if nice > 19 or nice != int(nice):
        raise doc.error("decide_nice", f"expected a whole number from 0 to 19, got {nice!r}",
                        doc.require("decide_nice").line)

    forecast_budget = doc.number_or_none("forecast_budget_s", default=30.0, positive=True)

    weights = dict(DEFAULT_PRIORITY_WEIGHTS)
    item = doc.get("priority_weights")
    if item is not None:
        if not isinstance(item.value, dict):
            raise doc.error("priority_weights", "expected a mapping 1..5 -> EUR per second",
                            item.line)
        for key, located in item.value.items():
            if str(key) not in {"1", "2", "3", "4", "5"} or isinstance(located.value, bool) \
                    or not isinstance(located.value, (int, float)) or located.value < 0:
                raise doc.error(f"priority_weights.{key}", "expected priorities 1..5 mapped to "
                                f"a weight >= 0, got {key!r}: {located.value!r}", located.line)
            weights[int(key)] = float(located.value)

    period = doc.number_or_none("period_s", default=60.0, positive=True)
    data_dir = (base / text("data_dir", "andreas-state")).resolve()
    return ServiceConfig(
        path=path, cluster=cluster, profiles=profiles,
        database_url=_sqlite_url(base, text("database_url", f"sqlite:///{data_dir}/andreas.db")),
        data_dir=data_dir, executor=executor, ray_address=text("ray_address", "auto"),
        slurm_partition=(doc.get("slurm_partition") and text("slurm_partition", "")) or None,
        gpu_indices=indices, policy=policy, policy_options=policy_options,
        decide_in=decide_in, decide_nice=int(nice), forecast_budget_s=forecast_budget,
        period_s=period,
        poll_s=doc.number("poll_s", default=0.5, positive=True),
        grace_s=doc.number("grace_s", default=10.0, minimum=0.0),
        max_body_bytes=int(doc.number("max_body_bytes", default=4 * 1024 * 1024,
                                      positive=True)),
        auth_max_failures=int(doc.number("auth_max_failures", default=20, positive=True)),
        auth_window_s=doc.number("auth_window_s", default=60.0, positive=True),
        public_url=(doc.get("public_url") and text("public_url", "").rstrip("/")) or None,
        priority_weights=weights, learn=_flag(doc, "learn", True),
        replan_deviation=doc.number("replan_deviation", default=0.1, positive=True),
        switch_gain=_share(doc, "switch_gain", SWITCH_GAIN),
        forecast_spread=doc.number_or_none("forecast_spread", default=0.1, minimum=0.0),
        quotas=_quotas(doc),
        max_retries=int(doc.number("max_retries", default=3, minimum=0)),
        max_upload_bytes=int(doc.number("max_upload_bytes", default=100 * 1024 * 1024,
                                        positive=True)),
        max_upload_bytes_per_user=int(doc.number("max_upload_bytes_per_user",
                                                 default=1024 ** 3, positive=True)),
        upload_ttl_s=doc.number("upload_ttl_s", default=7 * 86400.0, positive=True),
        allowed_roots=_roots(doc, base), trusted_proxies=_proxies(doc),
        log_progress_posts=_flag(doc, "log_progress_posts", False), **_job_accounts(doc))


def _share(doc, key: str, default: float) -> float:
    """A share in [0, 1): 0.05 = 5 %."""
    value = doc.number(key, default=default, minimum=0.0)
    if value >= 1.0:
        raise doc.error(key, f"expected a share below 1 (0.05 = 5 %), got {value!r}",
                        doc.get(key).line)
    return value


def _flag(doc, key: str, default: bool) -> bool:
    item = doc.get(key)
    if item is None or item.value is None:
        return default
    if not isinstance(item.value, bool):
        raise doc.error(key, f"expected true or false, got {item.value!r}", item.line)
    return item.value


def _proxies(doc) -> tuple[str, ...]:
    """`trusted_proxies: [10.0.0.5, ...]`: the reverse proxies whose X-Forwarded-For names the
    client. Anyone else's is ignored: believed, a client could name a new address with each
    request and never be rate-limited."""
    import ipaddress

    def address(value) -> str | None:
        try:
            return str(ipaddress.ip_address(str(value)))
        except ValueError:
            return None
    return _list_of(doc, "trusted_proxies", "IP address", address)


def _job_accounts(doc) -> dict:
    """`job_user`, `job_users` and `jobs_as_service_user`, each account checked on this
    machine: it exists, is not root, and this process may start processes as it."""
    from ..executors.identity import IdentityError, JobIdentity

    shared = doc.get("jobs_as_service_user")
    if shared is not None and not isinstance(shared.value, bool):
        raise doc.error("jobs_as_service_user", f"expected true or false, got {shared.value!r}",
                        shared.line)

    def account(where: str, located) -> str:
        name = located.value
        if not isinstance(name, str) or not name.strip():
            raise doc.error(where, f"expected an OS user name, got {name!r}", located.line)
        try:
            JobIdentity.lookup(name.strip()).check_switchable()
        except IdentityError as exc:
            raise doc.error(where, f"{exc}; or set jobs_as_service_user: true where every "
                            "user is trusted", located.line) from None
        return name.strip()

    user_item, users_item = doc.get("job_user"), doc.get("job_users")
    job_user = account("job_user", user_item) if user_item is not None else None
    job_users: dict[str, str] = {}
    if users_item is not None:
        if not isinstance(users_item.value, dict):
            raise doc.error("job_users", "expected a mapping service user -> OS user",
                            users_item.line)
        job_users = {str(owner): account(f"job_users.{owner}", located)
                     for owner, located in users_item.value.items()}
    if shared is not None and shared.value:
        if job_user or job_users:
            raise doc.error("jobs_as_service_user", "true runs every job as the service's own "
                            "user; remove job_user and job_users, or set it false", shared.line)
        return {"jobs_as_service_user": True}
    if job_user is None:
        raise doc.error("job_user", "missing; jobs must not run as the service's own user (a "
                        "job could read its admin token, database and configuration): name an "
                        "unprivileged OS user (useradd --system --no-create-home andreas-job), "
                        "or set jobs_as_service_user: true where every user is trusted")
    return {"job_user": job_user, "job_users": job_users}


def _roots(doc, base: Path) -> tuple[Path, ...]:
    """`allowed_roots: [folder, ...]`, relative to the configuration's folder; each must exist."""
    def folder(value) -> Path | None:
        path = (base / value).resolve() if isinstance(value, str) else None
        return path if path is not None and path.is_dir() else None
    return _list_of(doc, "allowed_roots", "existing folder", folder)


def _list_of(doc, key: str, what: str, convert) -> tuple:
    """The list under `key` (empty when missing), each item through `convert`, which returns
    None for one that is not a `what`: an error naming the item, its line and its value."""
    item = doc.get(key)
    if item is None or item.value is None:
        return ()
    article = "an" if what[0].lower() in "aeio" or what.startswith("IP") else "a"
    if not isinstance(item.value, list):
        raise doc.error(key, f"expected a list, each item {article} {what}", item.line)
    out = []
    for i, located in enumerate(item.value):
        value = convert(located.value)
        if value is None:
            raise doc.error(f"{key}[{i}]", f"expected {article} {what}, got "
                            f"{located.value!r}", located.line)
        out.append(value)
    return tuple(out)


def _quotas(doc) -> Quotas:
    """`quotas: {default: {max_gpus: N, max_queued: M}, users: {NAME: {...}}}`."""
    item = doc.get("quotas")
    if item is None or item.value is None:
        return Quotas()
    if not isinstance(item.value, dict):
        raise doc.error("quotas", "expected a mapping with default and users", item.line)
    for key, located in item.value.items():
        if key not in ("default", "users"):
            raise doc.error(f"quotas.{key}", "unknown key; expected default and users",
                            located.line)
    users_item = item.value.get("users")
    users = {}
    if users_item is not None and users_item.value is not None:
        if not isinstance(users_item.value, dict):
            raise doc.error("quotas.users", "expected a mapping user -> limits",
                            users_item.line)
        users = {str(name): _limits(doc, f"quotas.users.{name}", located)
                 for name, located in users_item.value.items()}
    return Quotas(_limits(doc, "quotas.default", item.value.get("default")), users)


def _limits(doc, where: str, item) -> Limits:
    if item is None or item.value is None:
        return Limits()
    if not isinstance(item.value, dict):
        raise doc.error(where, "expected a mapping with max_gpus and max_queued", item.line)
    values: dict[str, int] = {}
    for key, located in item.value.items():
        if key not in ("max_gpus", "max_queued"):
            raise doc.error(f"{where}.{key}", "unknown key; expected max_gpus and max_queued",
                            located.line)
        v = located.value
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise doc.error(f"{where}.{key}", f"expected a whole number >= 0, got {v!r}",
                            located.line)
        values[key] = v
    return Limits(**values)


__all__ = ["ServiceConfig", "read_service_config", "ScenarioError"]


def public_url_for(config: ServiceConfig, host: str, port: int) -> str:
    """Where jobs report progress: the configured `public_url`, else the address the service
    binds (a wildcard address is reached on the loopback)."""
    if config.public_url:
        return config.public_url
    reach = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in reach and not reach.startswith("["):
        reach = f"[{reach}]"  # an IPv6 address in a URL
    return f"http://{reach}:{port}"
