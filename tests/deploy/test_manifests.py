"""Render every Kustomize base and overlay and check what a pod needs to run safely.

``kubectl kustomize`` renders offline; ``kubectl annotate --local -o json`` turns the
rendered YAML into JSON without a cluster. The checks are a small schema of our own: the
security context of every pod and container, probes on the HTTP services, the volumes
behind every mount, and the secret files handed over as mode 0600.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

DEPLOY = Path(__file__).parents[2] / "deploy"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed (apt-get install kubectl) to render deploy/"
)

TREES = sorted(str(p.parent.relative_to(DEPLOY)) for p in DEPLOY.glob("*/*/kustomization.yaml"))
WORKLOADS = {"Deployment", "StatefulSet"}
HTTP_ROUTES = {"challenge": "/health", "relay": "/healthz"}
UID = 65532


def render(tree: str) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    yaml_text = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / tree)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    json_text = subprocess.run(
        [KUBECTL, "annotate", "--local", "-f", "-", "-o", "json", "hypertrain/rendered=1"],
        input=yaml_text,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    decoder, objects, at = json.JSONDecoder(), [], 0
    while at < len(json_text):
        if json_text[at].isspace():
            at += 1
            continue
        obj, at = decoder.raw_decode(json_text, at)
        objects.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return objects


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in WORKLOADS]


def component(workload: dict[str, Any]) -> str:
    return str(workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"])


def test_every_base_and_overlay_is_found() -> None:
    assert {"base/challenge", "base/relay", "base/auditor", "base/referee"} <= set(TREES)
    assert {"overlays/production", "overlays/relay-eu-west", "overlays/relay-us-east"} <= set(TREES)


@pytest.fixture(scope="module", params=TREES)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    objects = render(request.param)
    assert workloads(objects), f"{request.param} renders no workload"
    return objects


def test_pods_run_as_65532_with_a_restricted_security_context(
    rendered: list[dict[str, Any]],
) -> None:
    for workload in workloads(rendered):
        pod = workload["spec"]["template"]["spec"]
        name = workload["metadata"]["name"]
        ctx = pod["securityContext"]
        assert ctx["runAsNonRoot"] is True, name
        assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["fsGroup"]) == (UID, UID, UID), name
        assert ctx["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod.get("initContainers", []) + pod["containers"]:
            where = f"{name}/{container['name']}"
            c = container["securityContext"]
            assert c["readOnlyRootFilesystem"] is True, where
            assert c["allowPrivilegeEscalation"] is False, where
            assert c["capabilities"]["drop"] == ["ALL"], where
            assert c.get("privileged", False) is False, where
            assert "memory" in container["resources"]["limits"], where
            assert container["image"].split("/")[-1].split(":")[0] in {
                "hypertrain-server",
                "hypertrain-gpu",
            }, where


def test_http_services_probe_their_health_route(rendered: list[dict[str, Any]]) -> None:
    for workload in workloads(rendered):
        route = HTTP_ROUTES.get(component(workload))
        if route is None:
            continue
        container = workload["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for probe in ("readinessProbe", "livenessProbe"):
            get = container[probe]["httpGet"]
            assert get["path"] == route, (workload["metadata"]["name"], probe)
            assert get["port"] in ports, (workload["metadata"]["name"], probe)


def test_every_mount_has_a_volume_and_state_lives_on_data(
    rendered: list[dict[str, Any]],
) -> None:
    for workload in workloads(rendered):
        spec = workload["spec"]
        pod = spec["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
        for container in pod.get("initContainers", []) + pod["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes or mount["name"] in claims, mount
        main = pod["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        assert "/data" in mounts, workload["metadata"]["name"]
        if component(workload) in {"challenge", "relay"}:
            # Persistent state: a claim per replica, never an emptyDir.
            assert mounts["/data"] in claims, workload["metadata"]["name"]
            assert spec["replicas"] == 1


def test_secrets_reach_the_process_as_files_of_mode_0600(
    rendered: list[dict[str, Any]],
) -> None:
    for workload in workloads(rendered):
        pod = workload["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        secret_volumes = {n for n, v in volumes.items() if "secret" in v}
        if not secret_volumes:
            continue
        name = workload["metadata"]["name"]
        for n in secret_volumes:
            assert volumes[n]["secret"]["defaultMode"] == 0o400, (name, n)
        # The process never mounts a Secret volume itself (fsGroup makes it group-readable,
        # which the service refuses): an init container copies the files as mode 0600
        # into a memory-backed volume.
        main = pod["containers"][0]
        assert not {m["name"] for m in main["volumeMounts"]} & secret_volumes, name
        (init,) = [c for c in pod["initContainers"] if c["name"] == "secrets"]
        assert "install -m 0600" in " ".join(init["command"]), name
        handed = {m["name"] for m in init["volumeMounts"] if not m.get("readOnly")}
        (target,) = handed
        assert volumes[target]["emptyDir"]["medium"] == "Memory", name
        secret_dir = next(m["mountPath"] for m in main["volumeMounts"] if m["name"] == target)
        # Every *_FILE setting and --*-file flag points into the handed-over directory.
        files = [e["value"] for e in main.get("env", []) if e["name"].endswith("_FILE")]
        files += [a.split("=", 1)[1] for a in main.get("args", []) if "-file=" in a]
        assert files, name
        for path in files:
            assert path.startswith(secret_dir + "/"), (name, path)


def test_challenge_settings_name_documented_variables() -> None:
    (challenge,) = [
        w for w in workloads(render("overlays/production")) if component(w) == "challenge"
    ]
    names = {e["name"] for e in challenge["spec"]["template"]["spec"]["containers"][0]["env"]}
    operator = (DEPLOY.parent / "docs" / "operator.md").read_text(encoding="utf-8")
    for name in names:
        assert f"`{name}`" in operator, f"{name} is not documented in docs/operator.md"


def test_regional_relays_forward_to_their_upstream() -> None:
    for region in ("eu-west", "us-east"):
        objects = render(f"overlays/relay-{region}")
        (relay,) = workloads(objects)
        pod = relay["spec"]["template"]["spec"]
        assert relay["metadata"]["name"] == f"hypertrain-relay-{region}"
        assert "--upstream=$(RELAY_UPSTREAM)" in pod["containers"][0]["args"]
        (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
        assert config["data"]["RELAY_UPSTREAM"].startswith("https://")
        assert (
            pod["containers"][0]["envFrom"][0]["configMapRef"]["name"]
            == (config["metadata"]["name"])
        )
        (service,) = [o for o in objects if o["kind"] == "Service"]
        assert service["spec"]["selector"]["app.kubernetes.io/instance"] == f"relay-{region}"
        assert relay["spec"]["serviceName"] == service["metadata"]["name"]
        assert pod["nodeSelector"]["topology.kubernetes.io/region"] == region


def test_every_variable_in_args_is_defined(rendered: list[dict[str, Any]]) -> None:
    # Kubernetes leaves an undefined $(NAME) in args as literal text: catch it here.
    configs = {
        o["metadata"]["name"]: o.get("data", {}) for o in rendered if o["kind"] == "ConfigMap"
    }
    for workload in workloads(rendered):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            defined = {e["name"] for e in container.get("env", [])}
            for source in container.get("envFrom", []):
                defined |= set(configs[source["configMapRef"]["name"]])
            used = set(re.findall(r"\$\(([A-Z0-9_]+)\)", " ".join(container.get("args", []))))
            assert used <= defined, (workload["metadata"]["name"], used - defined)
