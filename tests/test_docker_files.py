"""docker/: the compose files parse and hold the properties docker/README.md promises — ports on
127.0.0.1 only, ClickHouse healthchecks that wait for the init SQL's table, dpch starting only
once ClickHouse is healthy, the slim image target, no password written in any compose file or
config template (they come from the env file) — and the config renderer and requirements script
the image runs work. The cluster deployment (docker/cluster) is checked as a whole: its compose file
against the Compose Specification's schema, and its ClickHouse, Keeper, proxy and gateway configs
against each other (three Keeper nodes, two shards of two replicas, two gateways behind the proxy,
dpch's ON CLUSTER DDL on the cluster the servers define). No Docker engine is needed (none runs
here): these are static checks plus the two scripts run as programs."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from dpch.server.config import ServerConfig

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
CLUSTER = DOCKER / "cluster"
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


def _is_gateway(service: dict) -> bool:
    """A service that runs `dpch serve` (its entrypoint or command)."""
    argv = [*(service.get("entrypoint") or []), *(service.get("command") or [])]
    return any(a == "dpch" and b == "serve" for a, b in zip(argv, argv[1:], strict=False))


def gateways(doc: dict) -> list[str]:
    return [name for name, service in doc.get("services", {}).items() if _is_gateway(service)]


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
    if not gateways(doc):
        return [*found, "no dpch service"]
    for gateway in gateways(doc):
        dpch = services[gateway]
        depends = dpch.get("depends_on") or {}
        for name, service in services.items():
            if _is_clickhouse(service) and name in depends and depends[name].get("condition") != "service_healthy":
                found.append(f"{gateway}: starts before {name} is healthy")
        if not any(_is_clickhouse(services[n]) for n in depends if n in services):
            found.append(f"{gateway}: depends on no ClickHouse service")
        if (dpch.get("build") or {}).get("target") != "slim":
            found.append(f"{gateway}: not the slim image")
        if "env_file" not in dpch:
            found.append(f"{gateway}: no env_file for its config's passwords")
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
    assert problems({"services": {}}, base) == ["no dpch service"]


def _waits_for(service: dict) -> set[str]:
    return {n for n, d in (service.get("depends_on") or {}).items() if d.get("condition") == "service_healthy"}


def test_cluster_services_start_in_order():
    """Keeper first; the replicas once Keeper is healthy; ch-s1r1, whose init inserts into both shards,
    after the other replicas; the gateways once every replica is (ON CLUSTER DDL waits for every host);
    the proxy once both gateways answer /ping."""
    doc = compose(CLUSTER / "compose.yml")
    services = doc["services"]
    keepers, replicas = _keepers(doc), _replicas(doc)
    for name in replicas:
        assert set(keepers) <= _waits_for(services[name]), name
    assert set(replicas) - {"ch-s1r1"} <= _waits_for(services["ch-s1r1"])
    assert "INSERT INTO default.visits" in (CLUSTER / "init-sample.sql").read_text()
    assert [n for n in replicas if any("init-sample" in v for v in services[n]["volumes"])] == ["ch-s1r1"]
    assert "SELECT count() FROM default.visits'" in _healthcheck_text(services["ch-s1r1"])  # all rows, both shards
    for name in gateways(doc):
        assert set(replicas) <= _waits_for(services[name]), name
    assert _waits_for(services["proxy"]) == set(gateways(doc))


def _service_environment(service: dict) -> dict[str, str]:
    environment = service.get("environment") or {}
    pairs = environment.items() if isinstance(environment, dict) else (e.split("=", 1) for e in environment)
    return {k: str(v) for k, v in pairs}


@pytest.mark.parametrize("path", sorted(DOCKER.glob("*/server.toml")), ids=lambda p: p.parent.name)
def test_config_templates_hold_no_password(path):
    data = tomllib.loads(path.read_text())
    for name, user in data["users"].items():
        assert _VAR.fullmatch(user["password"]), f"[users.{name}] password is written in {path}"
    dsn = urlsplit(data["server"]["dsn"])
    assert dsn.password == "${CLICKHOUSE_PASSWORD}" and dsn.username == "${CLICKHOUSE_USER}"
    used = set(_VAR.findall(repr(data)))  # in values (comments are not rendered)
    doc = compose(path.parent / "compose.yml")
    for gateway in gateways(doc):  # each gateway gets the env file and its own `environment`
        known = set(env_example()) | set(_service_environment(doc["services"][gateway]))
        assert used <= known, f"{sorted(used - known)} missing from .env.example and {gateway}'s environment"
        assert not any("PASSWORD" in k for k in _service_environment(doc["services"][gateway]))


def test_cluster_xml_reads_the_password_from_the_environment():
    text = (CLUSTER / "cluster.xml").read_text()
    assert not re.search(r"<password>[^<]+</password>", text)
    assert text.count('<password from_env="CLICKHOUSE_PASSWORD"/>') == 4  # one per replica
    for path in CLUSTER.glob("*.xml"):
        assert not re.search(r"<password>[^<]+</password>", path.read_text()), path


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
    doc = compose(DOCKER / name / "compose.yml")
    env.update(_service_environment(doc["services"][gateways(doc)[0]]))  # the first gateway's own variables
    result = _render(DOCKER / name / "server.toml", out, env)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    data = tomllib.loads(out.read_text())
    dsn = urlsplit(data["server"]["dsn"])
    assert unquote(dsn.password) == env["CLICKHOUSE_PASSWORD"] and dsn.username == "dpch"
    assert dsn.hostname == {"single": "clickhouse", "cluster": "ch-s1r1"}[name] and dsn.port == 8123
    config = ServerConfig.from_mapping(data)
    assert config.cluster == {"single": None, "cluster": "dpch_cluster"}[name]
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
    assert {"pyproject.toml", "README.md", "dpch", "docker/requirements.py"} <= set(sources)
    for source in [*sources, "dpch/__init__.py", "dpch/fixtures/tables.py"]:
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
    broken["services"][gateways(broken)[0]]["depends_on"] = {"ch-s1r1": {"condition": "service_ready"}}
    assert list(validator.iter_errors(broken)), "negative control: a wrong condition must be refused"


# -- the cluster deployment (docker/cluster): every config agrees with the others -------------------------

KEEPER_CONFIG = "/etc/clickhouse-keeper/keeper_config.xml"
SERVER_CONFIG_D = "/etc/clickhouse-server/config.d/"


def _keepers(doc: dict) -> list[str]:
    return [n for n, s in doc["services"].items() if str(s.get("image", "")).startswith("clickhouse/clickhouse-keeper")]


def _replicas(doc: dict) -> list[str]:
    return [n for n, s in doc["services"].items() if _is_clickhouse(s)]


def _proxies(doc: dict) -> list[str]:
    return [n for n, s in doc["services"].items() if str(s.get("image", "")).startswith("nginx:")]


def _mounts(service: dict, base: Path) -> list[tuple[Path, str]]:
    """(host file, container path) of each bind mount of a file next to the compose file."""
    found = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found.append((base / source, target))
    return found


def _from_env(element: ET.Element | None, environment: dict[str, str]) -> str | None:
    """An element's value as ClickHouse reads it: its text, or the variable its from_env names."""
    if element is None:
        return None
    if "from_env" in element.attrib:
        return environment.get(element.attrib["from_env"])
    return (element.text or "").strip()


@dataclass
class Layout:
    """docker/cluster as deployed: the compose file and, per service, the configs it mounts, parsed."""
    doc: dict
    server_xml: dict[str, list[ET.Element]]  # replica -> the roots of its config.d files
    keeper_xml: dict[str, ET.Element]  # keeper -> its keeper_config.xml
    nginx: dict[str, str]  # proxy -> nginx.conf's text
    gateway_config: dict[str, ServerConfig]  # gateway -> its rendered server.toml
    init_sql: dict[str, str]  # replica -> its init SQL, concatenated

    @property
    def services(self) -> dict:
        return self.doc["services"]

    def find(self, replica: str, path: str) -> ET.Element | None:
        for root in self.server_xml[replica]:
            found = root.find(path)
            if found is not None:
                return found
        return None


def _render_template(template: Path, env: dict[str, str]) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_config", DOCKER / "render_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render(tomllib.loads(template.read_text()), env)


def cluster_layout(base: Path = CLUSTER) -> Layout:
    doc = compose(base / "compose.yml")
    services = doc["services"]
    layout = Layout(doc, {}, {}, {}, {}, {})
    for name in _replicas(doc):
        mounts = _mounts(services[name], base)
        layout.server_xml[name] = [ET.parse(src).getroot() for src, dst in mounts
                                   if dst.startswith(SERVER_CONFIG_D) and dst.endswith(".xml")]
        layout.init_sql[name] = "\n".join(src.read_text() for src, dst in sorted(mounts, key=lambda m: m[1])
                                          if dst.startswith("/docker-entrypoint-initdb.d/"))
    for name in _keepers(doc):
        for src, dst in _mounts(services[name], base):
            if dst == KEEPER_CONFIG:
                layout.keeper_xml[name] = ET.parse(src).getroot()
    for name in _proxies(doc):
        for src, dst in _mounts(services[name], base):
            if dst == "/etc/nginx/nginx.conf":
                layout.nginx[name] = src.read_text()
    for name in gateways(doc):
        env = {**env_example(), **_service_environment(services[name])}
        templates = [src for src, dst in _mounts(services[name], base) if dst == "/etc/dpch/server.toml"]
        layout.gateway_config[name] = ServerConfig.from_mapping(_render_template(templates[0], env))
    return layout


def _cluster(layout: Layout, replica: str, name: str) -> list[list[tuple[str, str]]]:
    """The shards of cluster ``name`` in a replica's remote_servers: [[(host, port), ...], ...]."""
    cluster = layout.find(replica, f"remote_servers/{name}")
    if cluster is None:
        return []
    return [[((r.findtext("host") or "").strip(), (r.findtext("port") or "").strip()) for r in shard.findall("replica")]
            for shard in cluster.findall("shard")]


def _upstreams(conf: str) -> dict[str, list[str]]:
    blocks = re.findall(r"upstream\s+(\w+)\s*\{([^}]*)\}", conf)
    return {name: re.findall(r"^\s*server\s+([^\s;]+)", body, re.MULTILINE) for name, body in blocks}


def cluster_problems(layout: Layout) -> list[str]:
    """Everything in the cluster deployment that does not fit together (README: docker/cluster)."""
    found: list[str] = []
    services, doc = layout.services, layout.doc
    keepers, replicas, gateway_names = _keepers(doc), _replicas(doc), gateways(doc)
    if len(keepers) != 3:
        found.append(f"{len(keepers)} Keeper services, not 3")

    # Keeper: one ensemble naming every Keeper service, each node knowing its own id
    tcp_ports = set()
    for name in keepers:
        root = layout.keeper_xml.get(name)
        if root is None:
            found.append(f"{name}: no keeper_config.xml mounted")
            continue
        env = _service_environment(services[name])
        raft = {(_from_env(s.find("id"), env), _from_env(s.find("hostname"), env))
                for s in root.findall("keeper_server/raft_configuration/server")}
        hosts = sorted(h for _, h in raft)
        if hosts != sorted(keepers) or len({i for i, _ in raft}) != len(raft):
            found.append(f"{name}: raft_configuration names {hosts}, not the Keeper services {sorted(keepers)}")
        own = _from_env(root.find("keeper_server/server_id"), env)
        if (own, services[name].get("hostname", name)) not in raft:
            found.append(f"{name}: server_id {own} is not its own id in raft_configuration")
        tcp_ports.add(_from_env(root.find("keeper_server/tcp_port"), env))

    # ClickHouse: every replica names the Keeper ensemble, one cluster, and its own place in it
    defined = [c.tag for c in (layout.find(replicas[0], "remote_servers") or [])] if replicas else []
    if len(defined) != 1:
        found.append(f"remote_servers defines {defined}, not one cluster")
    cluster_name = defined[0] if defined else None
    places: dict[str, tuple[str, str]] = {}
    shards = _cluster(layout, replicas[0], cluster_name) if replicas and cluster_name else []
    for index, shard in enumerate(shards, 1):
        for host, _ in shard:
            places[host] = (str(index), host)
    if [len(s) for s in shards] != [2, 2]:
        found.append(f"cluster {cluster_name}: shards of {[len(s) for s in shards]} replicas, not 2 x 2")
    if sorted(places) != sorted(replicas) or any(port != "9000" for s in shards for _, port in s):
        found.append(f"cluster {cluster_name}: replicas {sorted(places)} are not the ClickHouse services "
                     f"{sorted(replicas)} on port 9000")
    seen_macros: dict[tuple[str, str], str] = {}
    for name in replicas:
        nodes = sorted(((n.findtext("host") or "").strip(), (n.findtext("port") or "").strip())
                       for n in (layout.find(name, "zookeeper") or ET.Element("zookeeper")).findall("node"))
        if nodes != sorted((k, p) for k in keepers for p in tcp_ports):
            found.append(f"{name}: zookeeper nodes {nodes} are not the Keeper services on their tcp_port")
        if not (layout.find(name, "keeper_map_path_prefix") is not None
                and (layout.find(name, "keeper_map_path_prefix").text or "").strip()):
            found.append(f"{name}: no keeper_map_path_prefix (KeeperMap, so dpch's admission, is disabled)")
        if _cluster(layout, name, cluster_name) != shards:
            found.append(f"{name}: its remote_servers differ from {replicas[0]}'s")
        cluster = layout.find(name, f"remote_servers/{cluster_name}")
        if cluster is not None and any((s.findtext("internal_replication") or "").strip() != "true"
                                       for s in cluster.findall("shard")):
            found.append(f"{name}: a shard without internal_replication (a Distributed INSERT would write twice)")
        macros = (layout.find(name, "macros/shard"), layout.find(name, "macros/replica"))
        pair = tuple((m.text or "").strip() if m is not None else "" for m in macros)
        if pair in seen_macros:
            found.append(f"{name}: macros {pair} are also {seen_macros[pair]}'s")
        seen_macros[pair] = name
        if pair != places.get(name):
            found.append(f"{name}: macros (shard, replica) = {pair}, but it is {places.get(name)} in {cluster_name}")
        if _from_env(layout.find(name, "interserver_http_host"), {}) != services[name].get("hostname", name):
            found.append(f"{name}: interserver_http_host is not its host name (the other replica fetches from it)")
        if f"Distributed({cluster_name}," not in layout.init_sql[name]:
            found.append(f"{name}: its init SQL's Distributed table is not over {cluster_name}")

    # gateways: on the cluster, each on a ClickHouse replica, every one on the same shard
    if len(gateway_names) != 2:
        found.append(f"{len(gateway_names)} gateways, not 2")
    gateway_shards = set()
    for name in gateway_names:
        config = layout.gateway_config[name]
        dsn = urlsplit(config.dsn or "")
        if config.cluster != cluster_name:
            found.append(f"{name}: cluster {config.cluster!r} is not the servers' cluster")
        if dsn.hostname not in replicas or (dsn.port or 8123) != 8123:
            found.append(f"{name}: its dsn's host {dsn.hostname}:{dsn.port} is not a ClickHouse service's HTTP port")
        gateway_shards.add(places.get(dsn.hostname, ("?",))[0])
        if config.admission != "keeper":
            found.append(f"{name}: admission is {config.admission!r}, not keeper")
        if services[name].get("ports"):
            found.append(f"{name}: publishes a port (analysts reach the gateways through the proxy only)")
    if len(gateway_shards) > 1:
        found.append(f"the gateways use shards {sorted(gateway_shards)}: dpch's ledger is replicated within a shard")

    # the proxy: round robin over exactly the gateways
    if len(layout.nginx) != 1:
        found.append(f"{len(layout.nginx)} proxies with an nginx.conf, not 1")
    for name, conf in layout.nginx.items():
        upstreams = _upstreams(conf)
        passes = re.findall(r"proxy_pass\s+http://(\w+)\s*;", conf)
        targets = sorted(s for u in passes for s in upstreams.get(u, []))
        expected = sorted(f"{g}:{layout.gateway_config[g].port}" for g in gateway_names)
        if targets != expected:
            found.append(f"{name}: proxies to {targets}, not the gateways {expected}")
        if re.search(r"^\s*(hash|ip_hash|least_conn|random|sticky)\b", conf, re.MULTILINE):
            found.append(f"{name}: not round robin")
        if re.search(r"proxy_next_upstream\s[^;]*(timeout|non_idempotent)", conf):
            found.append(f"{name}: resends a query that may have been admitted (timeout or non_idempotent)")
        listen = re.findall(r"^\s*listen\s+(\d+)", conf, re.MULTILINE)
        published = [str(p).rsplit(":", 1)[-1] for p in services[name].get("ports", [])]
        if not published or set(published) != set(listen):
            found.append(f"{name}: publishes {published} but listens on {listen}")
    return found


def test_every_xml_config_parses():
    paths = sorted(DOCKER.rglob("*.xml"))
    assert len(paths) >= 6  # cluster.xml, keeper.xml, four node-*.xml
    for path in paths:
        ET.parse(path)


def test_the_cluster_deployment_fits_together():
    layout = cluster_layout()
    assert cluster_problems(layout) == []
    assert sorted(_keepers(layout.doc)) == ["keeper1", "keeper2", "keeper3"]
    assert sorted(gateways(layout.doc)) == ["dpch1", "dpch2"] and _proxies(layout.doc) == ["proxy"]
    assert _cluster(layout, "ch-s2r2", "dpch_cluster") == [[("ch-s1r1", "9000"), ("ch-s1r2", "9000")],
                                                          [("ch-s2r1", "9000"), ("ch-s2r2", "9000")]]


def _mutated(change) -> list[str]:
    layout = cluster_layout()
    change(layout)
    return cluster_problems(layout)


def _first(layout: Layout, replica: str, path: str) -> ET.Element:
    element = layout.find(replica, path)
    assert element is not None, (replica, path)
    return element


def test_the_cluster_checks_catch_each_mistake():
    """Negative control: each mistake made once is reported."""
    def drop_keeper_node(layout):
        zk = _first(layout, "ch-s1r2", "zookeeper")
        zk.remove(zk.findall("node")[2])

    def swap_macros(layout):
        _first(layout, "ch-s2r1", "macros/shard").text = "1"
        _first(layout, "ch-s2r1", "macros/replica").text = "ch-s1r1"

    def wrong_raft_host(layout):
        layout.keeper_xml["keeper2"].findall("keeper_server/raft_configuration/server")[2].find("hostname").text = "kp3"

    def same_server_id(layout):
        layout.services["keeper3"]["environment"]["KEEPER_SERVER_ID"] = "1"

    def third_replica(layout):
        cluster = _first(layout, "ch-s1r1", "remote_servers/dpch_cluster")
        cluster.find("shard").append(ET.fromstring("<replica><host>ch-s9</host><port>9000</port></replica>"))

    def no_internal_replication(layout):
        _first(layout, "ch-s2r2", "remote_servers/dpch_cluster/shard/internal_replication").text = "false"

    def no_prefix(layout):
        for root in layout.server_xml["ch-s1r1"]:
            for element in root.findall("keeper_map_path_prefix"):
                root.remove(element)

    def other_cluster(layout):
        layout.gateway_config["dpch2"] = replace(layout.gateway_config["dpch2"], cluster="other_cluster")

    def gateway_on_shard_2(layout):
        config = layout.gateway_config["dpch2"]
        layout.gateway_config["dpch2"] = replace(config, dsn=config.dsn.replace("ch-s1r2", "ch-s2r1"))

    def gateway_on_keeper(layout):
        config = layout.gateway_config["dpch1"]
        layout.gateway_config["dpch1"] = replace(config, dsn=config.dsn.replace("ch-s1r1", "keeper1"))

    def owner_admission(layout):
        layout.gateway_config["dpch1"] = replace(layout.gateway_config["dpch1"], admission="auto")

    def one_upstream(layout):
        layout.nginx["proxy"] = layout.nginx["proxy"].replace("server dpch2:8123", "server ch-s1r1:8123")

    def sticky(layout):
        layout.nginx["proxy"] = layout.nginx["proxy"].replace("keepalive 16;", "ip_hash;\n    keepalive 16;")

    def retry_on_timeout(layout):
        layout.nginx["proxy"] = layout.nginx["proxy"].replace("proxy_next_upstream error;",
                                                              "proxy_next_upstream error timeout;")

    def gateway_published(layout):
        layout.services["dpch1"]["ports"] = ["127.0.0.1:8124:8123"]

    cases = {
        drop_keeper_node: "ch-s1r2: zookeeper nodes",
        swap_macros: "ch-s2r1: macros (shard, replica) = ('1', 'ch-s1r1')",
        wrong_raft_host: "keeper2: raft_configuration names",
        same_server_id: "keeper3: server_id 1 is not its own id",
        third_replica: "not 2 x 2",
        no_internal_replication: "ch-s2r2: a shard without internal_replication",
        no_prefix: "ch-s1r1: no keeper_map_path_prefix",
        other_cluster: "dpch2: cluster 'other_cluster' is not the servers' cluster",
        gateway_on_shard_2: "the gateways use shards ['1', '2']",
        gateway_on_keeper: "dpch1: its dsn's host keeper1",
        owner_admission: "dpch1: admission is 'auto'",
        one_upstream: "proxy: proxies to ['ch-s1r1:8123', 'dpch1:8123']",
        sticky: "proxy: not round robin",
        retry_on_timeout: "proxy: resends a query",
        gateway_published: "dpch1: publishes a port",
    }
    for change, expected in cases.items():
        found = _mutated(change)
        assert any(expected in p for p in found), (change.__name__, found)
    layout = cluster_layout()
    _first(layout, "ch-s1r2", "macros/replica").text = "ch-s1r1"  # two replicas, one (shard, replica)
    assert any("macros ('1', 'ch-s1r1') are also ch-s1r1's" in p for p in cluster_problems(layout))


def test_dpch_creates_its_tables_on_the_cluster_the_servers_define(store_dsn, database, monkeypatch):
    """dpch's own DDL, as a gateway with this config sends it (tests/store/test_cluster_ddl.py checks the
    statements with ClickHouse's parser): ON CLUSTER the cluster in remote_servers, replicated engines
    whose {shard}/{replica} macros every replica defines, KeeperMap tables the servers allow."""
    from dpch.accounting.budget import BudgetStore
    from dpch.accounting.ledger import Ledger
    from dpch.accounting.locks import LockStore
    from dpch.errors import AdmissionUnavailable
    from dpch.store.engine import Engine
    from dpch.store.keeper import VersionedMap

    layout = cluster_layout()
    config = layout.gateway_config["dpch1"]
    engine = Engine(store_dsn, database=database)  # records dpch's cluster DDL instead of sending it
    statements: list[str] = []
    real = engine.command

    def command(sql: str, parameters=None) -> None:
        if "ON CLUSTER" in sql:
            statements.append(sql)
        else:
            real(sql, parameters)

    monkeypatch.setattr(engine, "command", command)
    engine.cluster = config.cluster  # a chdb store refuses a cluster in its constructor: set it as a server's
    try:
        Ledger(engine)
        BudgetStore(engine)
        LockStore(engine)
        with pytest.raises(AdmissionUnavailable):  # the KeeperMap table was only recorded, not created
            VersionedMap(engine, "dpch_admission")
    finally:
        engine.cluster = None
        engine.close()
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert len(creates) == 4, statements
    clusters = {m for s in statements for m in re.findall(r"ON CLUSTER `?(\w+)`?", s)}
    assert clusters == {config.cluster}, statements
    for replica in _replicas(layout.doc):  # the cluster dpch names is the one every server defines
        assert _cluster(layout, replica, config.cluster), replica
    macros = {m for s in creates for m in re.findall(r"\{(\w+)\}", s)}
    assert macros == {"shard", "replica"}, creates
    for replica in _replicas(layout.doc):
        for macro in macros:
            assert layout.find(replica, f"macros/{macro}") is not None, (replica, macro)
    assert sum("ReplicatedMergeTree(" in s for s in creates) == 3
    assert sum("KeeperMap(" in s for s in creates) == 1
    assert all(layout.find(r, "keeper_map_path_prefix") is not None for r in _replicas(layout.doc))
