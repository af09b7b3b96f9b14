"""Checks of the deployment recipes in infra/ (docker, compose, k8s, systemd).

There is no Docker engine and no Kubernetes cluster here, so most checks are
static: the files parse, offline validators accept them (kubernetes-validate,
compose-spec, dockerfile: test dependencies, so a broken install fails rather
than skips), cross-references between them hold, and every ``lakelog ...``
command line they contain is parsed by the real CLI. Some checks run things:
``kubectl kustomize`` and ``systemd-analyze`` when those tools exist; the
compose brokers' own command, environment and healthcheck, and every recipe's
maintenance command line, against moto's S3 server. infra/README.md says what
was not run.
"""

from __future__ import annotations

import argparse
import configparser
import functools
import importlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import compose_spec
import dockerfile  # type: ignore[import-not-found]
import httpx
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped, unused-ignore]
from pydantic_settings import BaseSettings

from lakelog.cli import build_parser
from lakelog.testing.brokers import free_port

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
DOCKERFILE = INFRA / "docker" / "Dockerfile"
DOCKERIGNORE = INFRA / "docker" / "Dockerfile.dockerignore"
COMPOSE_DIR = INFRA / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
COMPOSE_ENV = COMPOSE_DIR / ".env.example"
K8S = INFRA / "k8s"
SYSTEMD = INFRA / "systemd"
SYSTEMD_ENV = SYSTEMD / "lakelog.env.example"
#: The recipes these tests own; infra/cron, infra/airflow and infra/spark-submit are not theirs.
RECIPE_DIRS = (INFRA / "docker", COMPOSE_DIR, K8S, SYSTEMD)

VENV_BIN = Path(sys.executable).parent
#: Commands being added to the CLI (compaction/cli.py): checked once they exist.
#: Where the systemd units expect the installed CLI (see infra/README.md).
SYSTEMD_LAKELOG = "/opt/lakelog/venv/bin/lakelog"
AWS_NAMES = frozenset(
    {
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    }
)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ----------------------------------------------------------------- helpers ---


def load_yaml(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def recipe_yaml_files() -> list[Path]:
    return sorted(p for d in RECIPE_DIRS for p in d.rglob("*") if p.suffix in {".yml", ".yaml"})


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines (compose .env and systemd EnvironmentFile syntax, unquoted)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and ENV_NAME.fullmatch(name), f"{path}:{number}: expected NAME=value"
        assert name not in values, f"{path}:{number}: {name} set twice"
        values[name] = value
    return values


@functools.cache
def cli_commands() -> frozenset[str]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return frozenset(action.choices)
    raise AssertionError("the lakelog CLI has no sub-commands")


def parse_cli(argv: list[str]) -> argparse.Namespace:
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"the CLI rejects `lakelog {shlex.join(argv)}`") from exc


#: pydantic-settings classes reading LAKELOG_<field> variables; those not written
#: yet are skipped (the scheduler's is in progress).
SETTINGS_CLASSES = (
    ("server.settings", "BrokerSettings"),
    ("compaction.scheduler", "SchedulerSettings"),
)


@functools.cache
def settings_classes() -> tuple[type[BaseSettings], ...]:
    found = []
    for module_name, class_name in SETTINGS_CLASSES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, class_name, None)
        if isinstance(cls, type) and issubclass(cls, BaseSettings):
            assert cls.model_config.get("env_prefix") == "LAKELOG_", class_name
            found.append(cls)
    return tuple(found)


@functools.cache
def consumed_env_names() -> frozenset[str]:
    """LAKELOG_* names lakelog reads: settings fields plus the names in the code and notebooks."""
    names = {f"LAKELOG_{name.upper()}" for cls in settings_classes() for name in cls.model_fields}
    for package in ("lakelog", "server", "compaction", "spark_connector", "notebooks"):
        sources = [*(REPO / package).rglob("*.py"), *(REPO / package).rglob("*.ipynb")]
        for source in sources:
            names.update(re.findall(r"\bLAKELOG_[A-Z0-9_]*[A-Z0-9]\b", source.read_text("utf-8")))
    return frozenset(names)


def check_env_names(where: str, env: dict[str, str]) -> None:
    """Every LAKELOG_/AWS_ variable is one lakelog reads, with a value its settings accept."""
    for name in env:
        if name.startswith("LAKELOG_"):
            assert name in consumed_env_names(), f"{where}: lakelog never reads {name}"
        elif name.startswith("AWS_"):
            assert name in AWS_NAMES, f"{where}: {name} is not an S3 setting lakelog reads"
    prefix = len("LAKELOG_")
    for cls in settings_classes():
        fields: dict[str, Any] = {
            name[prefix:].lower(): value
            for name, value in env.items()
            if name.startswith("LAKELOG_") and name[prefix:].lower() in cls.model_fields
        }
        try:
            cls.model_validate(fields)
        except ValueError as exc:
            raise AssertionError(f"{where}: invalid {cls.__name__}: {exc}") from exc


# -------------------------------------------------------------------- YAML ---


@pytest.mark.parametrize("path", recipe_yaml_files(), ids=lambda p: str(p.relative_to(INFRA)))
def test_yaml_parses(path: Path) -> None:
    assert load_yaml(path), f"{path} holds no document"


def test_recipes_exist() -> None:
    for path in (
        DOCKERFILE,
        DOCKERIGNORE,
        COMPOSE_FILE,
        COMPOSE_ENV,
        K8S / "kustomization.yaml",
        SYSTEMD / "lakelog-broker@.service",
        SYSTEMD / "lakelog-scheduler.service",
        SYSTEMD_ENV,
        INFRA / "README.md",
    ):
        assert path.is_file(), f"missing {path.relative_to(REPO)}"


# -------------------------------------------------------------- Dockerfile ---


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        assert self.args.startswith("["), f"line {self.line}: {self.keyword} not in exec form"
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value


def dockerfile_instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    found: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        keyword, _, args = " ".join(p for p in pending if p).partition(" ")
        found.append(Instruction(start, keyword.upper(), args.strip()))
        pending = []
    assert not pending, "the Dockerfile ends inside a continued line"
    return found


@functools.cache
def dockerfile_stages() -> list[list[Instruction]]:
    """The global ARGs (stage 0), then one list per FROM (starting with it)."""
    stages: list[list[Instruction]] = [[]]
    for instruction in dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8")):
        if instruction.keyword == "FROM":
            stages.append([])
        stages[-1].append(instruction)
    return stages


def dockerfile_final(keyword: str) -> Instruction:
    matches = [i for i in dockerfile_stages()[-1] if i.keyword == keyword]
    assert matches, f"the final stage has no {keyword}"
    return matches[-1]


def dockerfile_cmd() -> list[str]:
    return dockerfile_final("CMD").exec_form()


def dockerfile_env() -> dict[str, str]:
    """ENV of the final stage (NAME=value forms)."""
    return dict(
        match
        for i in dockerfile_stages()[-1]
        if i.keyword == "ENV"
        for match in re.findall(r"(\w+)=(\S+)", i.args)
    )


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(is an exception, regex) per line of the ignore file, in order."""
    rules = []
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i : end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((negated, re.compile(regex + r"\Z")))
    return rules


def docker_ignores(relative: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = relative.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for negated, regex in dockerignore_rules():
        if any(regex.match(prefix) for prefix in prefixes):
            ignored = not negated
    return ignored


def test_dockerfile_parses_with_buildkit_parser() -> None:
    parsed = dockerfile.parse_file(str(DOCKERFILE))
    ours = dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    assert [c.cmd.upper() for c in parsed] == [i.keyword for i in ours]


def test_dockerfile_base_image_and_java() -> None:
    global_args = {
        i.args.partition("=")[0]: i.args.partition("=")[2]
        for i in dockerfile_stages()[0]
        if i.keyword == "ARG"
    }
    assert global_args.get("PYTHON_IMAGE") == "python:3.11-slim"
    final_from = dockerfile_stages()[-1][0].args.split()
    assert final_from[0] == "${PYTHON_IMAGE}"
    runs = " ".join(i.args for i in dockerfile_stages()[-1] if i.keyword == "RUN")
    assert re.search(r"apt-get install\b[^;&]*\bdefault-jre-headless\b", runs)
    every_run = [i.args for stage in dockerfile_stages() for i in stage if i.keyword == "RUN"]
    assert any(re.search(r'\bpip install "\.\[all\]"(\s|$)', run) for run in every_run)
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ">=3.11" in requires, "python:3.11-slim no longer satisfies requires-python"


def test_dockerfile_runs_lakelog_as_non_root() -> None:
    user = dockerfile_final("USER").args.split(":")[0]
    assert user not in {"root", "0", ""}
    assert dockerfile_final("ENTRYPOINT").exec_form() == ["lakelog"]
    assert dockerfile_cmd()[:2] == ["broker", "start"]
    env = dockerfile_env()
    assert env["LAKELOG_HOST"] == "0.0.0.0", "a broker in a container must listen beyond loopback"
    # HTTP, and the Kafka listener's default port on the same interface.
    assert dockerfile_final("EXPOSE").args.split() == [env["LAKELOG_PORT"], "9092"]
    check_env_names("Dockerfile ENV", env)
    # Spark: SPARK_HOME is pyspark's directory in the venv, and its scripts are on PATH.
    assert env["SPARK_HOME"] == "/opt/lakelog/lib/python3.11/site-packages/pyspark"
    assert env["PATH"].startswith("/opt/lakelog/bin:")
    assert env["PYSPARK_PYTHON"] == "/opt/lakelog/bin/python"
    assert (VENV_BIN / "spark-class").exists(), "pip-installed pyspark should provide spark-class"


def test_dockerfile_copies_what_pip_install_needs() -> None:
    copies = [
        i.args.split()
        for stage in dockerfile_stages()
        for i in stage
        if i.keyword == "COPY" and not i.args.startswith("--from")
    ]
    sources = [source for args in copies for source in args[:-1]]
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
        assert not docker_ignores(source), f"COPY {source}: excluded by {DOCKERIGNORE.name}"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    needed = {p.rstrip("*").rstrip(".") for p in packages} | {"pyproject.toml"}
    needed.add(project["project"]["readme"])
    assert needed <= set(sources), f"not copied into the image: {needed - set(sources)}"
    for package in needed - {"pyproject.toml", project["project"]["readme"]}:
        assert not docker_ignores(f"{package}/__init__.py")


def test_dockerignore_keeps_local_state_out() -> None:
    for path in (
        ".venv/bin/python",
        "data/lakelog/_meta/x.json",
        ".git/config",
        "infra/compose/.env",
        "tests/conftest.py",
        "lakelog/__pycache__/x.cpython-311.pyc",
        "server/__pycache__",
    ):
        assert docker_ignores(path), f"{path} would be sent to the builder"
    assert not docker_ignores("lakelog/cli/__init__.py")


# ----------------------------------------------------------------- compose ---

_COMPOSE_REF = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_]\w*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.DOTALL)


@dataclass
class Interpolation:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``... over .env values."""

    env: dict[str, str]
    used: set[str] = field(default_factory=set)
    defaults: dict[str, set[str]] = field(default_factory=dict)

    def text(self, value: str) -> str:
        def replace(match: re.Match[str]) -> str:
            if match["escaped"]:
                return "$"
            expression = match["braced"] if match["braced"] is not None else match["named"]
            parsed = _BRACED.fullmatch(expression)
            assert parsed, f"bad interpolation ${{{expression}}}"
            name, op, arg = parsed["name"], parsed["op"] or "", parsed["arg"] or ""
            self.used.add(name)
            current = self.env.get(name)
            present = current is not None and (current != "" or not op.startswith(":"))
            if op.endswith("-"):
                self.defaults.setdefault(name, set()).add(arg)
                return current if present and current is not None else arg
            if op.endswith("+"):
                return arg if present else ""
            assert present and current is not None, f"{name} is not set: {arg or 'required'}"
            return current

        return _COMPOSE_REF.sub(replace, value)

    def tree(self, node: Any) -> Any:
        if isinstance(node, str):
            return self.text(node)
        if isinstance(node, list):
            return [self.tree(item) for item in node]
        if isinstance(node, dict):
            return {key: self.tree(value) for key, value in node.items()}
        return node


@dataclass(frozen=True)
class ComposeModel:
    raw: dict[str, Any]
    resolved: dict[str, Any]
    interpolation: Interpolation

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        services: dict[str, dict[str, Any]] = self.resolved["services"]
        return services


@functools.cache
def compose_model() -> ComposeModel:
    (raw,) = load_yaml(COMPOSE_FILE)
    interpolation = Interpolation(read_env_file(COMPOSE_ENV))
    return ComposeModel(raw, interpolation.tree(raw), interpolation)


def uses_lakelog_entrypoint(service: dict[str, Any]) -> bool:
    return "build" in service and "entrypoint" not in service


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def published_ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    """(host port, container port) of every published port."""
    ports = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.append((int(entry["published"]), int(entry["target"])))
            continue
        *host, container = str(entry).split("/")[0].split(":")
        assert host, f"port {entry}: publish it with an explicit host port"
        ports.append((int(host[-1]), int(container)))
    return ports


def broker_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose_model().services.items()
        if uses_lakelog_entrypoint(service) and service["command"][:2] == ["broker", "start"]
    }


def parse_duration(text: str) -> float:
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"bad duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def test_compose_env_example_matches_the_file() -> None:
    model = compose_model()
    env = model.interpolation.env
    undefined = model.interpolation.used - set(env)
    assert not undefined, f"used by the compose file but not in .env.example: {undefined}"
    unused = {n for n in env if not n.startswith("COMPOSE_")} - model.interpolation.used
    assert not unused, f"in .env.example but never used: {unused}"
    for name, defaults in model.interpolation.defaults.items():
        assert defaults == {env[name]}, f"{name}: compose default {defaults} != .env.example"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        assert env.get(name), f".env.example must define {name}"
    assert len(env["AWS_SECRET_ACCESS_KEY"]) >= 8, "MinIO rejects secrets under 8 characters"
    assert len(env["MINIO_ROOT_PASSWORD"]) >= 8, "MinIO rejects passwords under 8 characters"
    ignored = (COMPOSE_DIR / ".gitignore").read_text().split()
    assert ".env" in ignored, "infra/compose/.env holds secrets: keep it out of git"


def test_compose_spec_validator_accepts_the_file() -> None:
    resolved = compose_model().resolved
    compose_spec.PyCompose.from_json(json.dumps(resolved)).validate()
    # Negative control: the validator really is strict about unknown keys.
    broken = json.loads(json.dumps(resolved))
    broken["services"]["broker-1"]["healthcheck"]["intervall"] = "5s"
    with pytest.raises(ValueError):
        compose_spec.PyCompose.from_json(json.dumps(broken))


def test_compose_services_have_an_image_or_a_build() -> None:
    for name, service in compose_model().services.items():
        assert "image" in service or "build" in service, f"{name}: no image and no build"
        if "build" in service:
            context = (COMPOSE_DIR / service["build"]["context"]).resolve()
            assert context == REPO, f"{name}: the build context must be the repository root"
            assert (context / service["build"]["dockerfile"]).resolve() == DOCKERFILE
            assert service["image"], f"{name}: name the image it builds"


def test_compose_depends_on_targets_exist() -> None:
    services = compose_model().services
    graph: dict[str, set[str]] = {}
    for name, service in services.items():
        depends = service.get("depends_on", {})
        if isinstance(depends, list):
            depends = {target: {"condition": "service_started"} for target in depends}
        graph[name] = set(depends)
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown service {target}"
            condition = spec.get("condition", "service_started")
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{target} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert services[target].get("restart", "no") == "no", f"{target} must be one-shot"
            else:
                assert condition == "service_started", f"{name}: bad condition {condition}"
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> None:
        assert node not in visiting, f"depends_on cycle through {node}"
        if node in done:
            return
        visiting.add(node)
        for target in graph[node]:
            visit(target)
        visiting.discard(node)
        done.add(node)

    for node in graph:
        visit(node)


def test_compose_host_ports_are_unique() -> None:
    seen: dict[int, str] = {}
    for name, service in compose_model().services.items():
        for host, _ in published_ports(service):
            assert host not in seen, f"host port {host} used by {seen[host]} and {name}"
            seen[host] = name


def test_compose_healthchecks() -> None:
    services = compose_model().services
    for name, service in services.items():
        check = service.get("healthcheck")
        if check is None:
            continue
        test = check["test"]
        assert isinstance(test, list) and test[0] in {"CMD", "CMD-SHELL"}, f"{name}: test form"
        for key in ("interval", "timeout", "start_period"):
            if key in check:
                parse_duration(check[key])
    for name in (*broker_services(), "minio", "spark-master", "jupyter"):
        assert "healthcheck" in services[name], f"{name} has no healthcheck"
    for name, service in broker_services().items():
        assert "/healthz" in " ".join(service["healthcheck"]["test"]), name


def test_compose_brokers_share_one_root_on_distinct_ports() -> None:
    brokers = broker_services()
    assert len(brokers) >= 2
    roots, ports, urls = set(), set(), set()
    for name, service in brokers.items():
        env = service_env(service)
        check_env_names(f"compose:{name}", env)
        roots.add(env["LAKELOG_ROOT"])
        port = int(env["LAKELOG_PORT"])
        ports.add(port)
        assert (port, port) in published_ports(service), f"{name}: publish {port}:{port}"
        url = urlsplit(env["LAKELOG_ADVERTISED_URL"])
        assert url.scheme == "http" and url.port == port, f"{name}: advertised URL vs port"
        urls.add(env["LAKELOG_ADVERTISED_URL"])
        assert env["LAKELOG_BROKER_ID"] == name
    assert len(roots) == 1 and next(iter(roots)).startswith("s3://")
    assert len(ports) == len(brokers) and len(urls) == len(brokers)


def test_compose_storage_settings_point_at_minio() -> None:
    services = compose_model().services
    bucket_env = service_env(services["create-bucket"])
    for name, service in services.items():
        env = service_env(service)
        if "LAKELOG_ROOT" not in env:
            continue
        check_env_names(f"compose:{name}", env)
        root = urlsplit(env["LAKELOG_ROOT"])
        assert root.scheme == "s3" and root.netloc == bucket_env["BUCKET"], name
        endpoint = urlsplit(env["AWS_ENDPOINT_URL"])
        assert endpoint.hostname in services, f"{name}: {endpoint.hostname} is not a service"
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env[key] == bucket_env[key], f"{name}: {key} differs from create-bucket's"
    script = " ".join(services["create-bucket"]["command"])
    assert "mc mb" in script and "${BUCKET}" in script
    assert f"s3://{bucket_env['BUCKET']}/data" in services["scheduler"]["command"]


def test_compose_spark_cluster_is_wired() -> None:
    services = compose_model().services
    masters = {
        name: s
        for name, s in services.items()
        if s.get("entrypoint") == ["spark-class"]
        and s["command"][0] == "org.apache.spark.deploy.master.Master"
    }
    workers = [
        s
        for s in services.values()
        if s.get("entrypoint") == ["spark-class"]
        and s["command"][0] == "org.apache.spark.deploy.worker.Worker"
    ]
    assert masters and workers
    for worker in workers:
        master_url = urlsplit(worker["command"][1])
        assert master_url.scheme == "spark" and master_url.hostname in masters
        command = masters[master_url.hostname]["command"]
        assert command[command.index("--port") + 1] == str(master_url.port)
        assert "build" in worker, "workers run lakelog's Python code: use the lakelog image"
        assert "AWS_ACCESS_KEY_ID" in service_env(worker), "executors open storage themselves"
    for name, service in services.items():
        env = service_env(service)
        if "LAKELOG_SPARK_MASTER" in env:
            url = urlsplit(env["LAKELOG_SPARK_MASTER"])
            assert url.hostname in masters, f"{name}: Spark master {url.hostname} unknown"
    assert (VENV_BIN / "spark-class").exists()


def test_compose_volumes_exist() -> None:
    model = compose_model()
    declared = set(model.resolved.get("volumes") or {})
    for name, service in model.services.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith((".", "/")):
                assert (COMPOSE_DIR / source).resolve().is_dir(), f"{name}: {source} missing"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"


def test_compose_jupyter_runs_jupyter_lab_on_the_lakelog_image() -> None:
    jupyter = compose_model().services["jupyter"]
    assert jupyter["entrypoint"] == ["jupyter"] and jupyter["command"][0] == "lab"
    assert "jupyterlab" in jupyter["build"]["args"]["EXTRA_PACKAGES"]
    assert any(
        i.keyword == "ARG" and i.args.startswith("EXTRA_PACKAGES")
        for stage in dockerfile_stages()
        for i in stage
    )
    mounts = [str(v).split(":") for v in jupyter["volumes"]]
    assert any((COMPOSE_DIR / m[0]).resolve() == REPO / "notebooks" for m in mounts)


@dataclass
class Started:
    name: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


def wait_for_healthcheck(started: Started, test: list[str], deadline: float) -> None:
    """Run the service's own healthcheck command until it succeeds."""
    assert test[0] == "CMD" and test[1] == "python"
    argv = [sys.executable, *test[2:]]
    while True:
        assert started.process.poll() is None, f"{started.name} exited:\n{log_of(started)}"
        result = subprocess.run(argv, env=started.env, capture_output=True, timeout=30)
        if result.returncode == 0:
            return
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{started.name} never healthy:\n{log_of(started)}")
        time.sleep(0.5)


def log_of(started: Started) -> str:
    started.log.flush()
    return started.log_path.read_text(errors="replace")[-4000:]


@pytest.mark.s3
def test_compose_brokers_start_and_pass_their_healthcheck(
    make_bucket: Callable[[], str], s3_env: dict[str, str], tmp_path: Path
) -> None:
    """Each compose broker's command and environment, run here with MinIO -> moto.

    Only what cannot exist outside Docker is replaced: the S3 endpoint and
    credentials (moto's), the bucket (a fresh one), the listen address
    (loopback) and the port (a free one). The brokers' own healthcheck command
    then decides when they are up, and both must see each other in the
    registry under their advertised URLs.
    """
    bucket = make_bucket()
    started: list[Started] = []
    try:
        for name, service in broker_services().items():
            env = dict(s3_env)
            env.update({k: v for k, v in service_env(service).items() if k not in AWS_NAMES})
            env["LAKELOG_ROOT"] = f"s3://{bucket}/data"
            env["LAKELOG_HOST"] = "127.0.0.1"
            env["LAKELOG_PORT"] = str(free_port())
            log_path = tmp_path / f"{name}.log"
            log = log_path.open("wb")
            process = subprocess.Popen(
                [str(VENV_BIN / "lakelog"), *service["command"]],
                env=env,
                cwd=tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            started.append(Started(name, env, process, log, log_path))
        deadline = time.monotonic() + 90
        for broker in started:
            test = broker_services()[broker.name]["healthcheck"]["test"]
            wait_for_healthcheck(broker, test, deadline)
        expected = {b.env["LAKELOG_BROKER_ID"]: b.env["LAKELOG_ADVERTISED_URL"] for b in started}
        url = f"http://127.0.0.1:{started[0].env['LAKELOG_PORT']}/v1/brokers"
        while True:
            listed = httpx.get(url, timeout=5).json()["brokers"]
            seen = {b["broker_id"]: b["url"] for b in listed}
            if seen == expected:
                break
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail(f"registry shows {seen}, expected {expected}")
            time.sleep(0.5)
    finally:
        for broker in started:
            broker.process.terminate()
        for broker in started:
            try:
                broker.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                broker.process.kill()
                broker.process.wait(timeout=10)
            broker.log.close()


# -------------------------------------------------------------- Kubernetes ---


def k8s_manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


@functools.cache
def k8s_objects() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in k8s_manifest_files() for doc in load_yaml(path)]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    for _, doc in k8s_objects():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in infra/k8s")


def pod_template(doc: dict[str, Any]) -> dict[str, Any] | None:
    kind = doc["kind"]
    if kind in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
        template: dict[str, Any] = doc["spec"]["template"]
        return template
    if kind == "CronJob":
        template = doc["spec"]["jobTemplate"]["spec"]["template"]
        return template
    return None


def k8s_workloads() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(kind/name, object, pod template) of every workload."""
    found = []
    for _, doc in k8s_objects():
        template = pod_template(doc)
        if template is not None:
            found.append((f"{doc['kind']}/{doc['metadata']['name']}", doc, template))
    return found


_FIELD_EXAMPLES = {"status.podIP": "10.1.2.3", "metadata.name": "lakelog-broker-7c9d-x2x4q"}


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The environment Kubernetes would give the container (downward API faked)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            data = k8s_object("ConfigMap", source["configMapRef"]["name"])["data"]
        else:
            data = k8s_object("Secret", source["secretRef"]["name"])["stringData"]
        env.update({str(k): str(v) for k, v in data.items()})
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand_k8s_refs(str(item["value"]), env)
        elif "fieldRef" in item["valueFrom"]:
            env[item["name"]] = _FIELD_EXAMPLES[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            raise AssertionError(f"unexpected valueFrom in {item['name']}")
    return env


def expand_k8s_refs(value: str, env: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        assert match[1] in env, f"$({match[1]}) refers to an undefined variable"
        return env[match[1]]

    return re.sub(r"\$\$|\$\(([A-Za-z_]\w*)\)", replace, value)


def k8s_containers() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    return [
        (f"{where}/{container['name']}", container, container_env(container))
        for where, _, template in k8s_workloads()
        for container in template["spec"]["containers"]
    ]


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_CRON_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_CRON_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {m: i for i, m in enumerate(_MONTHS, 1)},
    {d: i for i, d in enumerate(_WEEKDAYS)},
)
_CRON_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


def valid_cron(schedule: str) -> bool:
    """Five fields of numbers, names, ranges, lists and steps, as CronJob accepts."""
    if schedule.strip() in _CRON_MACROS:
        return True
    fields = schedule.split()
    if len(fields) != 5:
        return False
    for text, (low, high), names in zip(fields, _CRON_FIELDS, _CRON_NAMES, strict=True):
        for item in text.split(","):
            base, slash, step = item.partition("/")
            if slash and not (step.isdigit() and int(step) > 0):
                return False
            if base in {"*", "?"}:
                continue
            bounds = base.split("-")
            if len(bounds) > 2:
                return False
            values = []
            for bound in bounds:
                value = names.get(bound.upper()) if not bound.isdigit() else int(bound)
                if value is None or not low <= value <= high:
                    return False
                values.append(value)
            if len(values) == 2 and values[0] > values[1]:
                return False
    return True


@pytest.mark.parametrize(
    ("schedule", "valid"),
    [
        ("*/15 * * * *", True),
        ("0 3 * * SUN", True),
        ("5,35 1-5/2 1 JAN-MAR 0", True),
        ("@hourly", True),
        ("* * * *", False),
        ("60 * * * *", False),
        ("*/0 * * * *", False),
        ("0 0 32 * *", False),
        ("0 0 * * 8", False),
        ("0 5-1 * * *", False),
    ],
)
def test_cron_validator(schedule: str, valid: bool) -> None:
    assert valid_cron(schedule) is valid


def test_k8s_objects_have_identity() -> None:
    assert k8s_objects()
    for path, doc in k8s_objects():
        where = path.relative_to(K8S)
        assert doc.get("apiVersion") and doc.get("kind"), f"{where}: apiVersion/kind"
        name = doc.get("metadata", {}).get("name", "")
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), f"{where}: name {name!r}"


@pytest.mark.parametrize("version", ["1.29.0", "latest"])
def test_k8s_manifests_match_the_api_schema(version: str) -> None:
    desired = kubernetes_validate.latest_version() if version == "latest" else version
    for path, doc in k8s_objects():
        try:
            kubernetes_validate.validate(doc, desired, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{path.relative_to(K8S)}: {exc}") from exc
    # Negative control: strict validation does reject an unknown field.
    broken = json.loads(json.dumps(k8s_object("Deployment", "lakelog-broker")))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, desired, strict=True)


def kustomization(path: Path) -> dict[str, Any]:
    (doc,) = load_yaml(path)
    assert isinstance(doc, dict)
    return doc


def test_kustomizations_list_every_manifest() -> None:
    root = kustomization(K8S / "kustomization.yaml")
    component_dirs = {p.parent for p in K8S.rglob("kustomization.yaml")} - {K8S}
    listed = {(K8S / r).resolve() for r in root["resources"]}
    for directory in component_dirs:
        component = kustomization(directory / "kustomization.yaml")
        assert component["kind"] == "Component"
        listed |= {(directory / r).resolve() for r in component["resources"]}
    for path in listed:
        assert path.is_file(), f"kustomization lists missing {path}"
    unlisted = {p.resolve() for p in k8s_manifest_files()} - listed
    assert unlisted == {(K8S / "secret.example.yaml").resolve()}, "orphan manifests"
    assert root["namespace"] == k8s_object("Namespace", root["namespace"])["metadata"]["name"]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


@pytest.mark.integration  # runs kubectl kustomize
def test_kustomize_renders_both_maintenance_choices(tmp_path: Path) -> None:
    default = kustomize(K8S)
    assert ("CronJob", "lakelog-maintain") in names(default)
    assert ("Deployment", "lakelog-scheduler") not in names(default)
    for doc in default:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "lakelog", doc["metadata"]["name"]
        template = pod_template(doc)
        for container in template["spec"]["containers"] if template else []:
            assert container["image"].startswith("lakelog:"), "kustomize sets the image tag"
    # The documented switch: enable the scheduler component.
    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy)
    with (copy / "kustomization.yaml").open("a") as f:
        f.write("components:\n  - components/scheduler\n")
    scheduler = kustomize(copy)
    assert ("CronJob", "lakelog-maintain") not in names(scheduler)
    assert ("Deployment", "lakelog-scheduler") in names(scheduler)
    assert names(default) - {("CronJob", "lakelog-maintain")} < names(scheduler)
    for doc in default + scheduler:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def container_ports(template: dict[str, Any]) -> dict[str | int, int]:
    """Port name or number -> container port, over all containers of a pod."""
    ports: dict[str | int, int] = {}
    for container in template["spec"]["containers"]:
        for port in container.get("ports", []):
            ports[port["containerPort"]] = port["containerPort"]
            if "name" in port:
                ports[port["name"]] = port["containerPort"]
    return ports


def test_k8s_selectors_match_pod_labels() -> None:
    for where, doc, template in k8s_workloads():
        if doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet"}:
            selector = doc["spec"]["selector"]["matchLabels"]
            labels = template["metadata"]["labels"]
            assert selector.items() <= labels.items(), f"{where}: selector vs labels"
    broker = k8s_object("Deployment", "lakelog-broker")
    labels = broker["spec"]["template"]["metadata"]["labels"]
    service_selector = k8s_object("Service", "lakelog-broker")["spec"]["selector"]
    pdb = k8s_object("PodDisruptionBudget", "lakelog-broker")
    for kind, selector in (
        ("Service", service_selector),
        ("PDB", pdb["spec"]["selector"]["matchLabels"]),
    ):
        assert selector and selector.items() <= labels.items(), f"{kind} selects no broker"


def test_k8s_broker_deployment() -> None:
    broker = k8s_object("Deployment", "lakelog-broker")
    assert broker["spec"]["replicas"] == 3
    template = broker["spec"]["template"]
    (container,) = template["spec"]["containers"]
    ports = container_ports(template)
    env = container_env(container)
    check_env_names("k8s broker", env)
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz", probe
        assert get["port"] in ports, f"{probe} port {get['port']} is not a container port"
        assert ports[get["port"]] == int(env["LAKELOG_PORT"]), f"{probe} misses the broker port"
    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]
    # LAKELOG_ADVERTISED_URL from the pod IP, through the downward API.
    raw = {e["name"]: e for e in container["env"]}
    url = raw["LAKELOG_ADVERTISED_URL"]["value"]
    refs = re.findall(r"\$\((\w+)\)", url)
    assert refs and raw[refs[0]]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    order = [e["name"] for e in container["env"]]
    assert order.index(refs[0]) < order.index("LAKELOG_ADVERTISED_URL"), "define the IP first"
    advertised = urlsplit(env["LAKELOG_ADVERTISED_URL"])
    assert advertised.hostname == _FIELD_EXAMPLES["status.podIP"]
    assert advertised.port == int(env["LAKELOG_PORT"])
    prometheus = template["metadata"].get("annotations", {})
    assert prometheus.get("prometheus.io/path") == "/metrics"
    assert int(prometheus["prometheus.io/port"]) == int(env["LAKELOG_PORT"])


def test_k8s_service_targets_the_broker_port() -> None:
    service = k8s_object("Service", "lakelog-broker")
    ports = container_ports(k8s_object("Deployment", "lakelog-broker")["spec"]["template"])
    for port in service["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        assert target in ports, f"Service targetPort {target} matches no containerPort"


def test_k8s_maintenance_schedule() -> None:
    cron = k8s_object("CronJob", "lakelog-maintain")
    assert valid_cron(cron["spec"]["schedule"]), cron["spec"]["schedule"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid", "two runs would do the same work"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in {"Never", "OnFailure"}
    assert pod["containers"][0]["args"][0] == "maintain"
    component = K8S / "components" / "scheduler"
    (scheduler,) = load_yaml(component / "scheduler-deployment.yaml")
    assert scheduler["spec"]["replicas"] == 1
    assert scheduler["spec"]["strategy"]["type"] == "Recreate", "never two schedulers at once"
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["args"][0] == "scheduler"
    patch = kustomization(component / "kustomization.yaml")["patches"][0]["patch"]
    assert "$patch: delete" in patch and "lakelog-maintain" in patch


def test_k8s_pods_are_hardened() -> None:
    for where, _, template in k8s_workloads():
        spec = template["spec"]
        assert spec.get("enableServiceLinks") is False, (
            f"{where}: service links inject <SERVICE>_PORT variables that can collide "
            "with LAKELOG_<setting> names"
        )
        pod_security = spec.get("securityContext", {})
        assert pod_security.get("runAsNonRoot") is True, where
        assert pod_security.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert container["resources"]["limits"]["memory"], where
            assert container["image"] == "lakelog", f"{where}: kustomize's images: rewrites it"
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{where}: a read-only root needs a writable /tmp"
            check_env_names(where, container_env(container))


def test_k8s_secret_example_holds_placeholders_only() -> None:
    secret = k8s_object("Secret", "lakelog-s3")
    assert set(secret["stringData"]) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    for key, value in secret["stringData"].items():
        assert value.startswith("REPLACE_"), f"{key}: the example must not hold a credential"
    configmap = k8s_object("ConfigMap", "lakelog-config")["data"]
    assert not set(configmap) & set(secret["stringData"]), "credentials belong in the Secret"
    assert configmap["LAKELOG_ROOT"].startswith("s3://")


# ----------------------------------------------------------------- systemd ---


class CaseSensitiveParser(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr


@dataclass(frozen=True)
class Unit:
    path: Path

    def entries(self) -> list[tuple[str, str, str]]:
        """(section, key, value) in order; systemd repeats keys, which a dict cannot hold."""
        found: list[tuple[str, str, str]] = []
        section = ""
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, sep, value = line.partition("=")
            assert sep, f"{self.path.name}: {line!r} is not key=value"
            found.append((section, key.strip(), value.strip()))
        return found

    def values(self, section: str, key: str) -> list[str]:
        return [v for s, k, v in self.entries() if s == section and k == key]

    def value(self, section: str, key: str) -> str:
        values = self.values(section, key)
        assert values, f"{self.path.name}: [{section}] {key}= missing"
        return values[-1]

    def environment(self) -> dict[str, str]:
        env = read_env_file(SYSTEMD_ENV)
        for item in self.values("Service", "Environment"):
            for assignment in shlex.split(item):
                name, _, value = assignment.partition("=")
                env.setdefault(name, value)
        return env

    def lakelog_argv(self) -> list[str]:
        """ExecStart's arguments with specifiers and ${VAR}s filled in."""
        argv = shlex.split(self.value("Service", "ExecStart"))
        assert argv[0] == SYSTEMD_LAKELOG, f"{self.path.name}: ExecStart runs {argv[0]}"
        env = self.environment()
        return [fill_unit_specifiers(arg, env) for arg in argv[1:]]


def fill_unit_specifiers(text: str, env: dict[str, str]) -> str:
    text = text.replace("%i", "8082").replace("%H", "broker-host.example").replace("%%", "%")

    def variable(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        assert name in env, f"${name} is not set by the unit or {SYSTEMD_ENV.name}"
        return env[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", variable, text)


def systemd_units() -> list[Unit]:
    return [Unit(p) for p in sorted(SYSTEMD.glob("*.service"))]


@pytest.mark.parametrize(
    "path", sorted(SYSTEMD.glob("*.service")) + sorted(SYSTEMD.glob("*.target"))
)
def test_systemd_units_parse_as_ini(path: Path) -> None:
    parser = CaseSensitiveParser(strict=False, interpolation=None, delimiters=("=",))
    parser.read(path, encoding="utf-8")
    assert "Unit" in parser and "Install" in parser
    assert parser["Unit"]["Description"]
    if path.suffix == ".service":
        assert parser["Service"]["ExecStart"]


HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "CapabilityBoundingSet": "",
}


@pytest.mark.parametrize("unit", systemd_units(), ids=lambda u: u.path.name)
def test_systemd_service_restarts_and_is_hardened(unit: Unit) -> None:
    assert unit.value("Service", "Restart") == "on-failure"
    assert unit.value("Service", "User") not in {"root", "0"}
    for key, expected in HARDENING.items():
        assert unit.value("Service", key) == expected, f"{unit.path.name}: {key}"
    files = unit.values("Service", "EnvironmentFile")
    assert "/etc/lakelog/lakelog.env" in files, "the shared settings file is required"
    env = unit.environment()
    check_env_names(unit.path.name, {k: fill_unit_specifiers(v, env) for k, v in env.items()})
    assert unit.value("Install", "WantedBy") == "multi-user.target"


def test_systemd_broker_instance_is_the_port() -> None:
    unit = Unit(SYSTEMD / "lakelog-broker@.service")
    argv = unit.lakelog_argv()
    assert argv[:2] == ["broker", "start"]
    assert argv[argv.index("--port") + 1] == "8082", "ExecStart must pass --port %i"
    env = unit.environment()
    advertised = urlsplit(fill_unit_specifiers(env["LAKELOG_ADVERTISED_URL"], env))
    assert advertised.port == 8082 and advertised.hostname == "broker-host.example"
    assert "%i" in env["LAKELOG_BROKER_ID"], "broker ids must differ between instances"
    shared = read_env_file(SYSTEMD_ENV)
    for name in ("LAKELOG_PORT", "LAKELOG_ADVERTISED_URL", "LAKELOG_BROKER_ID"):
        assert name not in shared, f"{name} in the shared file would override every instance"


def systemd_analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    return tool


def install_units_for_analysis(directory: Path) -> list[Path]:
    """Copies whose ExecStart runs this venv's lakelog (verify wants an executable)."""
    units = []
    for source in sorted(SYSTEMD.glob("*.service")) + sorted(SYSTEMD.glob("*.target")):
        text = source.read_text(encoding="utf-8").replace(
            SYSTEMD_LAKELOG, str(VENV_BIN / "lakelog")
        )
        name = source.name.replace("@.", "@8082.")
        (directory / name).write_text(text, encoding="utf-8")
        units.append(directory / name)
    return units


@pytest.mark.integration  # runs systemd-analyze
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = systemd_analyze()
    units = install_units_for_analysis(tmp_path)
    result = subprocess.run(
        [tool, "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    ours = [line for line in output.splitlines() if "lakelog" in line]
    assert result.returncode == 0 and not ours, output


@pytest.mark.integration  # runs systemd-analyze
def test_systemd_analyze_security(tmp_path: Path) -> None:
    tool = systemd_analyze()
    for unit in install_units_for_analysis(tmp_path):
        if unit.suffix != ".service":
            continue
        result = subprocess.run(
            [tool, "security", "--offline=yes", "--no-pager", str(unit)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        match = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", result.stdout)
        assert match, result.stdout + result.stderr
        assert match[2] in {"PERFECT", "SAFE", "OK"}, f"{unit.name}: exposure {match[1]}"


def test_systemd_env_example_holds_placeholders_only() -> None:
    env = read_env_file(SYSTEMD_ENV)
    assert env["AWS_SECRET_ACCESS_KEY"].startswith("REPLACE_")
    assert env["AWS_ACCESS_KEY_ID"].startswith("REPLACE_")
    check_env_names(SYSTEMD_ENV.name, env)


# ------------------------------------------------------- lakelog commands ---


@dataclass(frozen=True)
class Invocation:
    """One ``lakelog ...`` command line found in a recipe, with the environment it gets."""

    where: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    error: str = ""


def docker_invocations() -> list[Invocation]:
    return [Invocation("docker:CMD", tuple(dockerfile_cmd()), dockerfile_env())]


def compose_invocations() -> list[Invocation]:
    return [
        Invocation(f"compose:{name}", tuple(service["command"]), service_env(service))
        for name, service in compose_model().services.items()
        if uses_lakelog_entrypoint(service)
    ]


def k8s_invocations() -> list[Invocation]:
    return [
        Invocation(
            f"k8s:{where}",
            tuple(expand_k8s_refs(str(arg), env) for arg in container.get("args", [])),
            env,
        )
        for where, container, env in k8s_containers()
        if "command" not in container and container.get("image") == "lakelog"
    ]


def systemd_invocations() -> list[Invocation]:
    found = []
    for unit in systemd_units():
        env = unit.environment()
        filled = {k: fill_unit_specifiers(v, env) for k, v in env.items()}
        found.append(Invocation(f"systemd:{unit.path.name}", tuple(unit.lakelog_argv()), filled))
    return found


def invocations() -> list[Invocation]:
    """Every recipe's command lines; a recipe that cannot be read yields a failing entry."""
    found: list[Invocation] = []
    for kind, collect in (
        ("docker", docker_invocations),
        ("compose", compose_invocations),
        ("k8s", k8s_invocations),
        ("systemd", systemd_invocations),
    ):
        try:
            found.extend(collect())
        except (AssertionError, LookupError, TypeError, ValueError, OSError, yaml.YAMLError) as exc:
            found.append(Invocation(f"{kind}:unreadable", (), error=f"{type(exc).__name__}: {exc}"))
    return found


@pytest.mark.parametrize("invocation", invocations(), ids=lambda i: i.where)
def test_lakelog_command_lines_parse(invocation: Invocation) -> None:
    assert not invocation.error, f"{invocation.where}: {invocation.error}"
    command = invocation.argv[0]
    if command not in cli_commands():
        pytest.fail(f"{invocation.where}: `lakelog {command}` does not exist")
    args = parse_cli(list(invocation.argv))
    assert callable(getattr(args, "run", None)), f"{invocation.where}: not a runnable command"
    check_env_names(invocation.where, invocation.env)


def test_every_recipe_starts_a_broker() -> None:
    found = invocations()
    for kind in ("docker", "compose", "k8s", "systemd"):
        argvs = [i.argv for i in found if i.where.startswith(f"{kind}:")]
        assert ("broker", "start") in [argv[:2] for argv in argvs], f"no broker in {kind}"


def maintenance_invocations() -> list[Invocation]:
    return [i for i in invocations() if i.argv[:1] in {("maintain",), ("scheduler",)}]


@pytest.mark.s3
@pytest.mark.parametrize("invocation", maintenance_invocations(), ids=lambda i: i.where)
def test_maintenance_command_lines_run_against_s3(
    invocation: Invocation,
    make_bucket: Callable[[], str],
    s3_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """The recipe's maintenance command and environment, once, over an empty S3 root.

    Replaced: the S3 endpoint and credentials (moto's), the bucket (a fresh
    one) and the Spark master (local: the recipe's cluster is not here).
    ``scheduler`` gets ``--once`` so that it returns.
    """
    assert invocation.argv[0] in cli_commands(), f"`lakelog {invocation.argv[0]}` does not exist"
    root = f"s3://{make_bucket()}/data"
    env = dict(s3_env)
    env.update({k: v for k, v in invocation.env.items() if k not in AWS_NAMES})
    env.update({"LAKELOG_ROOT": root, "LAKELOG_SPARK_MASTER": "local[1]"})
    argv = list(invocation.argv)
    assert "--root" in argv, f"{invocation.where}: name the root explicitly"
    argv[argv.index("--root") + 1] = root
    argv.append("--once" if argv[0] == "scheduler" else "--no-progress")
    result = subprocess.run(
        [str(VENV_BIN / "lakelog"), *argv],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{shlex.join(argv)}:\n{result.stdout}\n{result.stderr}"
