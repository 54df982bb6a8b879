"""docker/: the compose files parse and hold the properties docker/README.md promises — ports on
127.0.0.1 only, ClickHouse healthchecks that wait for the init SQL's table, dpch starting only
once ClickHouse is healthy, the slim image target, no password written in any compose file or
config template (they come from the env file) — and the config renderer and requirements script
the image runs work. No Docker engine is needed (none runs here): these are static checks plus
the two scripts run as programs."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from dpch.server.config import ServerConfig

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
COMPOSE_FILES = sorted(DOCKER.glob("*/compose.yml"))
ENV_EXAMPLE = DOCKER / ".env.example"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def compose(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def env_example() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def _is_clickhouse(service: dict) -> bool:
    return str(service.get("image", "")).startswith("clickhouse/clickhouse-server")


def _healthcheck_text(service: dict) -> str:
    test = (service.get("healthcheck") or {}).get("test", [])
    return " ".join(test) if isinstance(test, list) else str(test)


def _init_tables(service: dict, base: Path) -> set[str]:
    """The tables the service's init SQL creates (db.table)."""
    tables: set[str] = set()
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if target.startswith("/docker-entrypoint-initdb.d/"):
            tables |= set(re.findall(r"CREATE TABLE\s+([\w.]+)", (base / source).read_text(), re.IGNORECASE))
    return tables


def problems(doc: dict, base: Path) -> list[str]:
    """Everything in one compose document that breaks a promise of docker/README.md."""
    found = []
    services = doc.get("services", {})
    for name, service in services.items():
        for port in service.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                found.append(f"{name}: port {port} is not bound to 127.0.0.1")
        environment = service.get("environment") or {}
        items = environment.items() if isinstance(environment, dict) else (e.split("=", 1) for e in environment)
        for key, value in items:
            if "PASSWORD" in key.upper() and not str(value).startswith("${"):
                found.append(f"{name}: {key} is written in the compose file")
        health = _healthcheck_text(service)
        if re.search(r"--password\s+(?![\"']?\$\$)", health):
            found.append(f"{name}: the healthcheck writes a password")
        if _is_clickhouse(service):
            if not health:
                found.append(f"{name}: no healthcheck")
            tables = _init_tables(service, base)
            if not any(t in health for t in tables) or " -q " not in f" {health} ":
                found.append(f"{name}: the healthcheck does not query a table of its init SQL ({sorted(tables)})")
            if "env_file" not in service:
                found.append(f"{name}: no env_file for CLICKHOUSE_USER/CLICKHOUSE_PASSWORD")
    dpch = services.get("dpch")
    if dpch is None:
        return [*found, "no dpch service"]
    depends = dpch.get("depends_on") or {}
    for name, service in services.items():
        if _is_clickhouse(service) and name in depends and depends[name].get("condition") != "service_healthy":
            found.append(f"dpch: starts before {name} is healthy")
    if not any(_is_clickhouse(services[n]) for n in depends if n in services):
        found.append("dpch: depends on no ClickHouse service")
    if (dpch.get("build") or {}).get("target") != "slim":
        found.append("dpch: not the slim image")
    if "env_file" not in dpch:
        found.append("dpch: no env_file for its config's passwords")
    return found


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.parent.name)
def test_compose_files_keep_their_promises(path):
    assert problems(compose(path), path.parent) == []


def test_both_compose_files_are_checked():
    assert [p.parent.name for p in COMPOSE_FILES] == ["cluster", "single"]


def test_the_checks_catch_broken_compose_files():
    """Negative control: each property broken once is reported."""
    base = DOCKER / "single"
    doc = compose(base / "compose.yml")
    doc["services"]["dpch"]["ports"] = ["8123:8123"]
    doc["services"]["clickhouse"]["environment"]["CLICKHOUSE_PASSWORD"] = "secret"
    doc["services"]["clickhouse"]["healthcheck"]["test"] = ["CMD", "clickhouse-client", "--password", "secret",
                                                            "-q", "SELECT 1"]
    doc["services"]["dpch"]["depends_on"]["clickhouse"]["condition"] = "service_started"
    del doc["services"]["dpch"]["build"]["target"]
    found = problems(doc, base)
    assert any("not bound to 127.0.0.1" in p for p in found), found
    assert any("CLICKHOUSE_PASSWORD is written" in p for p in found), found
    assert any("healthcheck writes a password" in p for p in found), found
    assert any("does not query a table of its init SQL" in p for p in found), found
    assert any("starts before clickhouse is healthy" in p for p in found), found
    assert any("not the slim image" in p for p in found), found


def test_cluster_shards_start_in_order():
    services = compose(DOCKER / "cluster" / "compose.yml")["services"]
    assert services["ch1"]["depends_on"]["ch2"]["condition"] == "service_healthy"  # ch1's init writes to ch2
    assert "visits_local" in _healthcheck_text(services["ch2"]) and "default.visits" in _healthcheck_text(
        services["ch1"])


@pytest.mark.parametrize("path", sorted(DOCKER.glob("*/server.toml")), ids=lambda p: p.parent.name)
def test_config_templates_hold_no_password(path):
    data = tomllib.loads(path.read_text())
    for name, user in data["users"].items():
        assert _VAR.fullmatch(user["password"]), f"[users.{name}] password is written in {path}"
    dsn = urlsplit(data["server"]["dsn"])
    assert dsn.password == "${CLICKHOUSE_PASSWORD}" and dsn.username == "${CLICKHOUSE_USER}"
    used = set(_VAR.findall(repr(data)))  # in values (comments are not rendered)
    assert used <= set(env_example()), f"{sorted(used - set(env_example()))} missing from .env.example"


def test_cluster_xml_reads_the_password_from_the_environment():
    text = (DOCKER / "cluster" / "cluster.xml").read_text()
    assert not re.search(r"<password>[^<]+</password>", text)
    assert text.count('<password from_env="CLICKHOUSE_PASSWORD"/>') == 2


def test_no_old_demo_secret_is_left_anywhere_in_docker():
    for path in DOCKER.rglob("*"):
        if path.is_file() and path.suffix in (".yml", ".toml", ".xml", ".sql", ""):
            assert "-secret" not in path.read_text(errors="replace"), path


def _render(template: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DOCKER / "render_config.py"), str(template), str(out), "--"],
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", ["single", "cluster"])
def test_rendered_config_is_what_dpch_serve_reads(tmp_path, name):
    env = env_example()
    env["CLICKHOUSE_PASSWORD"] = 'p@ss:w/rd "quoted" \\ back'  # URL and TOML metacharacters
    env["DPCH_ANA_PASSWORD"] = 'ana "pw" \\'
    out = tmp_path / "server.toml"
    result = _render(DOCKER / name / "server.toml", out, env)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    data = tomllib.loads(out.read_text())
    dsn = urlsplit(data["server"]["dsn"])
    assert unquote(dsn.password) == env["CLICKHOUSE_PASSWORD"] and dsn.username == "dpch"
    assert dsn.hostname == {"single": "clickhouse", "cluster": "ch1"}[name] and dsn.port == 8123
    config = ServerConfig.from_mapping(data)
    ana = config.users["ana"]
    assert ana.password_sha256 == hashlib.sha256(env["DPCH_ANA_PASSWORD"].encode()).hexdigest()
    assert ana.check(env["DPCH_ANA_PASSWORD"]) and not ana.check("change-me-ana")
    assert config.users["grafana"].analyst == "dashboards" and ana.budget is not None and ana.budget.epsilon == 3.0
    assert config.users["superset"].budget is not None and config.users["superset"].budget.epsilon == 10.0
    assert config.port == 8123


def test_a_missing_variable_stops_the_container_naming_it_only(tmp_path):
    env = env_example()
    del env["DPCH_GRAFANA_PASSWORD"]
    result = _render(DOCKER / "single" / "server.toml", tmp_path / "s.toml", env)
    assert result.returncode == 1 and "DPCH_GRAFANA_PASSWORD" in result.stderr
    assert not (tmp_path / "s.toml").exists()
    assert all(value not in result.stderr for value in env.values() if len(value) > 4)


def _requirements(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, str(DOCKER / "requirements.py"), "--pyproject", str(ROOT / "pyproject.toml"),
                          *args], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def test_slim_image_requirements_are_pyprojects_without_chdb():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    slim = _requirements("--without-chdb", "--extra", "sqlalchemy")
    assert not any("chdb" in r for r in slim), slim
    name = re.compile(r"^[A-Za-z0-9_.-]+")
    assert [name.match(r)[0] for r in slim[:len(deps)]] == [name.match(d)[0] for d in deps]
    assert any(r.startswith("sqlalchemy") for r in slim)
    only = _requirements("--only-chdb")
    assert only == [d for d in deps if "[chdb]" in d] and len(only) == 1
    assert any("chdb" in d for d in _requirements())  # negative control: the full list has it


def test_dockerfile_has_a_slim_and_a_full_target():
    text = (DOCKER / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)\s+AS\s+(\w+)", text, re.MULTILINE)
    assert stages == [("python:3.11-slim", "slim"), ("slim", "full")]
    slim_part = text.split("AS full")[0]
    assert "--without-chdb" in slim_part and "--only-chdb" not in slim_part and "--no-deps" in slim_part


def _ignored(path: str, patterns: list[str]) -> bool:
    verdict = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").rstrip("/")
        hit = any(fnmatch.fnmatch(part, pat.removeprefix("**/")) if pat.startswith("**/") else False
                  for part in _prefixes(path)) or any(fnmatch.fnmatch(p, pat) for p in _prefixes(path))
        if hit:
            verdict = not negate
    return verdict


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)] + parts


def test_dockerignore_keeps_secrets_stores_and_vcs_out_but_not_what_the_image_copies():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".git/config", ".venv/bin/python", "dpch-data/store/x.bin", "docker/.env", "tests/conftest.py",
                 "dpch/__pycache__/x.pyc"):
        assert _ignored(path, patterns), path
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (DOCKER / "Dockerfile").read_text(), re.MULTILINE)
    sources = [s for line in copied for s in line.split()]
    assert {"pyproject.toml", "README.md", "dpch", "sql_fixtures", "docker/requirements.py"} <= set(sources)
    for source in [*sources, "dpch/__init__.py", "sql_fixtures/tables.py"]:
        assert not _ignored(source, patterns), source


#: the Compose Specification's JSON schema, vendored from github.com/compose-spec/compose-spec
#: (schema/compose-spec.json at commit 170098ba07d9f53c383a41bfd4c5166b0a4529a6, Apache-2.0), so the
#: check runs on every machine without a network; $DPCH_COMPOSE_SCHEMA names another copy to check against
COMPOSE_SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec.json"


def test_compose_files_match_the_compose_specification_schema():
    """What `docker compose config` would check first, without a Docker engine: every compose file is
    valid against the Compose Specification's schema (negative control: a wrong condition is refused)."""
    import json
    import os

    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (pyproject's test extra)")
    schema = json.loads(Path(os.environ.get("DPCH_COMPOSE_SCHEMA") or COMPOSE_SCHEMA).read_text())
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)
    for compose_file in COMPOSE_FILES:
        assert [e.message for e in validator.iter_errors(compose(compose_file))] == [], compose_file
    broken = compose(COMPOSE_FILES[0])
    broken["services"]["dpch"]["depends_on"] = {"ch1": {"condition": "service_ready"}}
    assert list(validator.iter_errors(broken)), "negative control: a wrong condition must be refused"
