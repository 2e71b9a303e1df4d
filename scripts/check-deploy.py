"""Checks the rendered manifests of deploy/ against what the binaries read.

Usage: check-deploy.py RENDERED.yaml CONFIGURATION.md GATEWAY.md [MORE_RENDERED.yaml ...]

Every setting a ConfigMap or a container env names (an UPPER_CASE key) must be one the
project documents (docs/configuration.md for the server, docs/gateway.md for the gateway), so
a renamed or misspelt setting fails here rather than being ignored by a pod. Every Deployment
must have readiness and liveness probes, resource requests and a memory limit, and run as
non-root with a read-only root filesystem.

A CloudNativePG Cluster (deploy/postgres/) has no schema among Kubernetes' own, so its fields
are checked here: each one under `spec` must be a field of the operator's v1 Cluster (a
misspelt one would be ignored by the operator), and the settings automatic failover without
losing an acknowledged write depends on must hold: at least three instances, quorum
synchronous replication with required durability, failover at once, one instance per node.
"""

import re
import sys

import yaml

rendered, configuration, gateway = sys.argv[1:4]
more_rendered = sys.argv[4:]
documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", open(configuration).read()))
documented |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", open(gateway).read()))
problems = []
docs = [d for f in [rendered, *more_rendered] for d in yaml.safe_load_all(open(f)) if d]

# The fields of CloudNativePG's postgresql.cnpg.io/v1 Cluster spec, as its 1.27 CRD has them.
CNPG_CLUSTER_FIELDS = {
    "affinity", "backup", "bootstrap", "certificates", "description", "enablePDB",
    "enableSuperuserAccess", "env", "envFrom", "ephemeralVolumeSource",
    "ephemeralVolumesSizeLimit", "externalClusters", "failoverDelay", "imageCatalogRef",
    "imageName", "imagePullPolicy", "imagePullSecrets", "inheritedMetadata", "instances",
    "livenessProbeTimeout", "logLevel", "managed", "maxSyncReplicas", "minSyncReplicas",
    "monitoring", "nodeMaintenanceWindow", "plugins", "postgresGID", "postgresUID", "postgresql",
    "primaryUpdateMethod", "primaryUpdateStrategy", "priorityClassName", "probes",
    "projectedVolumeTemplate", "replica", "replicationSlots", "resources", "schedulerName",
    "seccompProfile", "serviceAccountTemplate", "smartShutdownTimeout", "startDelay", "stopDelay",
    "storage", "superuserSecret", "switchoverDelay", "tablespaces", "topologySpreadConstraints",
    "walStorage",
}
CNPG_POSTGRESQL_FIELDS = {
    "enableAlterSystem", "extensions", "ldap", "parameters", "pg_hba", "pg_ident",
    "promotionTimeout", "shared_preload_libraries", "syncReplicaElectionConstraint", "synchronous",
}
CNPG_SYNCHRONOUS_FIELDS = {
    "dataDurability", "maxStandbyNamesFromCluster", "method", "number", "standbyNamesPost",
    "standbyNamesPre",
}
CNPG_AFFINITY_FIELDS = {
    "additionalPodAffinity", "additionalPodAntiAffinity", "enablePodAntiAffinity", "nodeAffinity",
    "nodeSelector", "podAntiAffinityType", "tolerations", "topologyKey",
}


def check_cnpg_cluster(where, spec):
    def known(fields, got, path):
        for key in sorted(set(got) - fields):
            problems.append(f"{where}: {path}{key} is not a field of CloudNativePG's Cluster")

    known(CNPG_CLUSTER_FIELDS, spec, "spec.")
    postgresql = spec.get("postgresql", {})
    known(CNPG_POSTGRESQL_FIELDS, postgresql, "spec.postgresql.")
    sync = postgresql.get("synchronous", {})
    known(CNPG_SYNCHRONOUS_FIELDS, sync, "spec.postgresql.synchronous.")
    affinity = spec.get("affinity", {})
    known(CNPG_AFFINITY_FIELDS, affinity, "spec.affinity.")
    if spec.get("instances", 1) < 3:
        problems.append(f"{where}: fewer than 3 instances (a primary and two standbys)")
    if sync.get("method") not in ("any", "first") or sync.get("number", 0) < 1:
        problems.append(f"{where}: no synchronous replication (spec.postgresql.synchronous)")
    if sync.get("dataDurability", "required") != "required":
        problems.append(f"{where}: synchronous replication must be required, not preferred")
    if spec.get("failoverDelay", 0) != 0:
        problems.append(f"{where}: failoverDelay delays the failover")
    if not affinity.get("enablePodAntiAffinity", True) or affinity.get("podAntiAffinityType") != "required":
        problems.append(f"{where}: instances may share a node (podAntiAffinityType: required)")
    if "memory" not in spec.get("resources", {}).get("limits", {}):
        problems.append(f"{where}: needs requests and a memory limit")



def setting(name, where):
    if re.fullmatch(r"[A-Z][A-Z0-9_]+", name) and name not in documented:
        problems.append(f"{where}: {name} is not a documented setting")


for d in docs:
    kind, name = d["kind"], d["metadata"]["name"]
    if kind == "Cluster" and d["apiVersion"] == "postgresql.cnpg.io/v1":
        check_cnpg_cluster(f"Cluster {name}", d["spec"])
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
