"""Worker hosts for tests: the coordinator's Postgres and broker, and two worker hosts, each in a
network namespace of its own that reaches them over its own address, never loopback.

Real parts only, started by the scripts a deployment uses (deploy/hosts/): Debian's iproute2 for
the namespaces (a bridge, one veth pair per host), PostgreSQL and redis-server listening on the
coordinator's bridge address (`coordinator.sh services`), one dagster-celery worker per host
(`worker.sh`, with its own SABOT_HOST_LABEL), and the coordinator's store-queue worker
(`coordinator.sh store-worker`). The namespaces share this machine's file system, so
the shared path every host mounts (step storage, the run root) is a directory here.

Namespaces need root: without it (or without the packages) the tests skip, unless
SABOT_REQUIRE_HOSTS is set (CI), where they fail. Names and ports, to keep several checkouts apart:
SABOT_NETNS_PREFIX, SABOT_NETNS_SUBNET (deploy/hosts/netns.sh), SABOT_HOSTS_PG_PORT (55433),
SABOT_HOSTS_REDIS_PORT (56380).
"""

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pytest

PROJECT = Path(__file__).resolve().parents[1]
HOSTS = PROJECT / "deploy" / "hosts"
LABELS = ("w1", "w2")  # the worker hosts
STORE_WORKER = "coordinator"  # the label of the coordinator's store-queue worker (its name: "store")
# What every host gets for a wave: 4 cells a backfill run (one run's execute step runs on one host,
# so a small wave spreads over both) and a scripted model that answers fast.
WAVE_ENV = {"SABOT_LIVE_CHUNK": "4", "SABOT_SCRIPTED_LATENCY": "0.02"}
READY_DEADLINE_S = 240  # a worker imports Dagster and the executor first; slow on a loaded machine


@dataclass
class WorkerHosts:
    env: dict[str, str]  # what every host's environment holds (coordinator.sh services)
    coordinator: str  # the coordinator's address on the hosts' network
    addresses: dict[str, str]  # label -> that worker host's own address
    logs: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @contextmanager
    def environment(self):
        """This process as the coordinator: the deployment's environment, for the instance and the executor."""
        with pytest.MonkeyPatch.context() as patch:
            for key, value in self.env.items():
                patch.setenv(key, value)
            yield

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(self.env["DAGSTER_HOME"])

    def start(self, label: str) -> None:
        """Start that host's worker: a worker host in its namespace, or the coordinator's store writer here."""
        env = {
            **os.environ,
            **self.env,
            "SABOT_HOST_LABEL": label,
            "SABOT_WORKER_HOME": str(self.logs / f"home-{label}"),
        }
        if label == STORE_WORKER:
            command = ["bash", str(HOSTS / "coordinator.sh"), "store-worker"]
            env["SABOT_COORDINATOR_ADDRESS"] = self.coordinator
        else:
            command = ["ip", "netns", "exec", _namespace(label), "bash", str(HOSTS / "worker.sh")]
        with open(self.logs / f"worker-{label}.log", "a") as log:
            self.processes[label] = subprocess.Popen(
                command, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill(self, label: str) -> None:
        """Everything of that host dies at once, as when a machine is lost: SIGKILL to its processes
        (a worker host's: every process in its namespace)."""
        process = self.processes.pop(label, None)
        if label == STORE_WORKER:
            pids = [str(process.pid)] if process is not None else []
        else:
            pids = subprocess.run(
                ["ip", "netns", "pids", _namespace(label)], capture_output=True, text=True
            ).stdout.split()
        for pid in pids:
            try:
                os.killpg(int(pid), signal.SIGKILL) if label == STORE_WORKER else os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        if process is not None:
            process.wait()

    def ready_workers(self) -> set[str]:
        """The labels of the workers answering the broker's ping."""
        from dagster_celery.executor import CeleryExecutor
        from dagster_celery.make_app import make_app
        from kombu.exceptions import OperationalError
        from redis.exceptions import ConnectionError as RedisConnectionError

        broker = self.env["SABOT_CELERY_BROKER"]
        app = make_app(CeleryExecutor.for_cli(broker=broker, backend=broker).app_args())
        try:
            replies = app.control.ping(timeout=1.0) or []
        except (OSError, RedisConnectionError, OperationalError):  # a broker just started may drop the first connection
            return set()
        names = {name.split("@")[0] for reply in replies for name in reply}
        return {STORE_WORKER if name == "store" else name for name in names}

    def wait_ready(self, labels=(*LABELS, STORE_WORKER)) -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        while not set(labels) <= self.ready_workers():
            for label in labels:
                process = self.processes.get(label)
                if process is not None and process.poll() is not None:
                    raise RuntimeError(
                        f"worker {label} exited with {process.returncode}: see {self.logs / f'worker-{label}.log'}"
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"workers {sorted(set(labels) - self.ready_workers())} did not answer in {READY_DEADLINE_S} s: see {self.logs}"
                )
            time.sleep(1)


def _namespace(label: str) -> str:
    return f"{os.environ.get('SABOT_NETNS_PREFIX', 'sabot')}w{LABELS.index(label) + 1}"


def unavailable() -> str | None:
    """Why worker hosts cannot be laid out here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "redis-server", "redis-cli", "psql"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y iproute2 redis-server postgresql)"
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return "PostgreSQL is not installed (apt-get install -y postgresql)"
    return None


def _netns(*args: str) -> str:
    return subprocess.run(
        ["bash", str(HOSTS / "netns.sh"), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _stop_services(pg_dir: Path, redis_dir: Path) -> None:
    """Stop the coordinator's Postgres and Redis of this harness (by their data and pid files) and remove them."""
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if (pg_dir / "data").is_dir() and binaries:
        subprocess.run(
            ["su", "postgres", "-s", "/bin/sh", "-c", f"'{binaries[-1]}' -D '{pg_dir / 'data'}' -m immediate stop"],
            capture_output=True,
        )
    pid_file = redis_dir / "redis.pid"
    if pid_file.is_file():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    shutil.rmtree(pg_dir, ignore_errors=True)
    shutil.rmtree(redis_dir, ignore_errors=True)


def peak_in_flight(intervals) -> int:
    """The most (start, end) intervals open at one instant; an end sorts before a start at the same instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = live = 0
    for _, change in edges:
        live += change
        peak = max(peak, live)
    return peak


@contextmanager
def hosts_layout(tmp: Path, labels=LABELS, extra_env: dict[str, str] | None = None):
    """The coordinator's services and a worker host per label, all stopped and removed on exit;
    `extra_env` joins the environment every host gets (the scripted model's latency, the chunk size)."""
    pg_port = os.environ.get("SABOT_HOSTS_PG_PORT", "55433")
    redis_port = os.environ.get("SABOT_HOSTS_REDIS_PORT", "56380")
    pg_dir, redis_dir = Path(f"/tmp/sabot-hosts-pg-{pg_port}"), Path(f"/tmp/sabot-hosts-redis-{redis_port}")
    _stop_services(pg_dir, redis_dir)  # what an interrupted earlier session left
    _netns("down")
    _netns("up", str(len(LABELS)))
    coordinator = _netns("address", "0")
    hosts = None
    try:
        services = subprocess.run(
            ["bash", str(HOSTS / "coordinator.sh"), "services"],
            check=True,
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "SABOT_COORDINATOR_ADDRESS": coordinator,
                "SABOT_WORKER_NETWORK": f"{coordinator.rsplit('.', 1)[0]}.0/24",
                "SABOT_PG_PORT": pg_port,
                "SABOT_PG_DIR": str(pg_dir),
                "SABOT_REDIS_PORT": redis_port,
                "SABOT_REDIS_DIR": str(redis_dir),
                "SABOT_SHARED": str(tmp / "shared"),
            },
        ).stdout
        env = dict(
            line.removeprefix("export ").split("=", 1) for line in services.splitlines() if line.startswith("export ")
        )
        env.update(extra_env or {})
        hosts = WorkerHosts(
            env=env,
            coordinator=coordinator,
            addresses={label: _netns("address", str(i + 1)) for i, label in enumerate(LABELS)},
            logs=tmp,
        )
        with hosts.environment():
            hosts.instance().dispose()  # creates the instance's tables once, before several hosts race to
        for label in (*labels, STORE_WORKER):
            hosts.start(label)
        hosts.wait_ready((*labels, STORE_WORKER))
        yield hosts
    finally:
        for label in list(hosts.processes) if hosts is not None else ():
            hosts.kill(label)
        _stop_services(pg_dir, redis_dir)
        _netns("down")


@pytest.fixture(scope="module")
def worker_hosts(tmp_path_factory):
    missing = unavailable()
    if missing:
        if os.environ.get("SABOT_REQUIRE_HOSTS"):
            pytest.fail(f"SABOT_REQUIRE_HOSTS is set but {missing}")
        pytest.skip(missing)
    with hosts_layout(tmp_path_factory.mktemp("hosts"), extra_env=WAVE_ENV) as hosts:
        yield hosts
