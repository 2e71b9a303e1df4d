"""Checks the rendered manifests of deploy/ against what the binaries read.

Usage: check-deploy.py RENDERED.yaml CONFIGURATION.md GATEWAY.md

Every setting a ConfigMap or a container env names (an UPPER_CASE key) must be one the
project documents (docs/configuration.md for the server, docs/gateway.md for the gateway), so
a renamed or misspelt setting fails here rather than being ignored by a pod. Every Deployment
must have readiness and liveness probes, resource requests and a memory limit, and run as
non-root with a read-only root filesystem.
"""

import re
import sys

import yaml

rendered, configuration, gateway = sys.argv[1:4]
documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", open(configuration).read()))
documented |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", open(gateway).read()))
problems = []
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]


def setting(name, where):
    if re.fullmatch(r"[A-Z][A-Z0-9_]+", name) and name not in documented:
        problems.append(f"{where}: {name} is not a documented setting")


for d in docs:
    kind, name = d["kind"], d["metadata"]["name"]
    if kind == "ConfigMap":
        for key in d.get("data", {}):
            setting(key, f"ConfigMap {name}")
    if kind in ("Deployment", "Job"):
        spec = d["spec"]["template"]["spec"]
        if not spec.get("securityContext", {}).get("runAsNonRoot"):
            problems.append(f"{kind} {name}: not runAsNonRoot")
        for c in spec["containers"]:
            where = f"{kind} {name}/{c['name']}"
            for e in c.get("env", []):
                setting(e["name"], where)
            res = c.get("resources", {})
            if not res.get("requests") or "memory" not in res.get("limits", {}):
                problems.append(f"{where}: needs requests and a memory limit")
            sc = c.get("securityContext", {})
            if not sc.get("readOnlyRootFilesystem") or sc.get("allowPrivilegeEscalation", True):
                problems.append(f"{where}: needs a read-only root and no privilege escalation")
            if kind == "Deployment":
                for probe in ("readinessProbe", "livenessProbe"):
                    if probe not in c:
                        problems.append(f"{where}: no {probe}")

for p in problems:
    print(f"deploy: {p}")
print(f"deploy: {len(docs)} objects checked, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
