"""A short lifecycle through a client generated from the live OpenAPI document.

Run by `make test` (scripts/test.sh, step client) with the generated package `kubesvc_client`
on PYTHONPATH and KUBESVC_URL set to a `server --dev`. Every call is a generated function and
every answer a generated model: if the document says something the server does not do, a call
raises or an isinstance check fails here.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import uuid

from kubesvc_client import AuthenticatedClient
from kubesvc_client.api.clusters import (
    cluster_state,
    create_cluster,
    delete_cluster,
    get_cluster,
    kubeconfig,
    list_upgrades,
    upgrade_cluster,
)
from kubesvc_client.api.gateway_auth_servers import create_auth_server, get_auth_server
from kubesvc_client.models import (
    BasicAuthServerView,
    BasicConfigRequest,
    BasicCredentialRequest,
    Cluster,
    ClusterPhase,
    ClusterState,
    ClusterUpgrades,
    CreateBasicAuthServerRequest,
    CreateBasicAuthServerRequestType,
    CreateClusterRequest,
    CreateOidcAuthServerRequest,
    CreateOidcAuthServerRequestType,
    CreateTokenAuthServerRequest,
    CreateTokenAuthServerRequestType,
    KubeconfigFormat,
    NodePoolRequest,
    OidcAuthServerView,
    OidcConfigRequest,
    Problem,
    TokenAuthServerView,
    TokenConfigRequest,
    UpgradeRequest,
)

URL = os.environ["KUBESVC_URL"]
# The development platform's demo tokens: acme's super_admin and a plain member of acme.
SUPER_ADMIN = "dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d"
MEMBER = "dev-only-token-acme-member-3e8b2a1c9d7f4e6a8b0c2d4e"


def client(token: str) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=URL, token=token, raise_on_unexpected_status=True)


def step(what: str) -> None:
    print(f"  - {what}", flush=True)


def expect(condition: bool, message: str) -> None:
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def kubectl_accepts(yaml: str) -> None:
    if shutil.which("kubectl") is None:
        print("    (kubectl is not on the PATH: the kubeconfig is not checked by it)")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(yaml)
        f.flush()
        checked = subprocess.run(
            ["kubectl", "--kubeconfig", f.name, "config", "view", "--minify", "-o", "json"],
            capture_output=True,
            text=True,
        )
        expect(checked.returncode == 0, f"kubectl refused it: {checked.stderr}")


def main() -> None:
    admin = client(SUPER_ADMIN)
    name = f"py-{uuid.uuid4().hex[:8]}"

    step("create a cluster")
    created = create_cluster.sync_detailed(
        client=admin,
        body=CreateClusterRequest(
            organization="acme",
            name=name,
            node_pools=[NodePoolRequest(size="kube.c5.large", count=2)],
        ),
        idempotency_key=f"lifecycle-{name}",
    )
    expect(created.status_code == 201, f"create: {created.status_code} {created.content!r}")
    cluster = created.parsed
    expect(isinstance(cluster, Cluster), f"create answered {cluster!r}")

    step("wait on the state long-poll until it is Provisioned")
    version = 0
    for _ in range(60):
        state = cluster_state.sync(cluster.id, client=admin, since=version, timeout_seconds=5)
        expect(isinstance(state, ClusterState), f"state answered {state!r}")
        version = state.version
        if state.phase == ClusterPhase.PROVISIONED:
            break
    expect(state.phase == ClusterPhase.PROVISIONED, f"never Provisioned: {state.phase}")

    step("the kubeconfig in the default format (YAML), checked by kubectl")
    answer = kubeconfig.sync_detailed(cluster.id, client=admin)
    expect(answer.status_code == 200, f"kubeconfig: {answer.status_code}")
    expect(answer.headers["content-type"].startswith("application/yaml"), str(answer.headers))
    yaml = answer.parsed
    expect(isinstance(yaml, str) and "kind: Config" in yaml, f"kubeconfig: {yaml!r}")
    kubectl_accepts(yaml)
    as_json = kubeconfig.sync_detailed(cluster.id, client=admin, format_=KubeconfigFormat.JSON)
    expect(as_json.headers["content-type"].startswith("application/json"), "format=json")

    step("list the versions it can move to, upgrade, and follow the state long-poll to the end")
    options = list_upgrades.sync(cluster.id, client=admin)
    expect(isinstance(options, ClusterUpgrades), f"upgrades answered {options!r}")
    offered = [v.id for v in options.available_versions]
    expect("v1.32.6" in offered, f"offered: {offered}")
    started = upgrade_cluster.sync_detailed(
        cluster.id,
        client=admin,
        body=UpgradeRequest(version="v1.32.6"),
        idempotency_key=f"upgrade-{name}",
    )
    expect(started.status_code == 202, f"upgrade: {started.status_code} {started.content!r}")
    expect(isinstance(started.parsed, Cluster), f"upgrade answered {started.parsed!r}")
    expect(started.parsed.upgrade.to == "v1.32.6", f"upgrade: {started.parsed.upgrade!r}")
    for _ in range(60):
        state = cluster_state.sync(cluster.id, client=admin, since=version, timeout_seconds=5)
        version = state.version
        now = get_cluster.sync(cluster.id, client=admin)
        if now.upgrade is None:
            break
    expect(now.upgrade is None and now.version == "v1.32.6", f"never upgraded: {now.version}")
    expect(all(p.version == "v1.32.6" for p in now.node_pools), "every pool on the new version")

    step("an auth server of each type, with typed config")
    bodies = [
        (
            CreateOidcAuthServerRequest(
                organization="acme",
                name=f"{name}-sso",
                environment="production",
                type_=CreateOidcAuthServerRequestType.OIDC,
                config=OidcConfigRequest(
                    issuer_url="https://login.example.com",
                    redirect_path="/oauth/callback",
                    client_id="gateway",
                    client_secret="a-client-secret",
                    authorized_domain="app.example.com",
                    username_claim="sub",
                ),
            ),
            OidcAuthServerView,
        ),
        (
            CreateBasicAuthServerRequest(
                organization="acme",
                name=f"{name}-staff",
                environment="production",
                type_=CreateBasicAuthServerRequestType.BASIC,
                config=BasicConfigRequest(
                    credentials=[BasicCredentialRequest(username="alice", password="correct horse")]
                ),
            ),
            BasicAuthServerView,
        ),
        (
            CreateTokenAuthServerRequest(
                organization="acme",
                name=f"{name}-machines",
                environment="production",
                type_=CreateTokenAuthServerRequestType.TOKEN,
                config=TokenConfigRequest(tokens=["s3cr3t-static-token-0123456789"]),
            ),
            TokenAuthServerView,
        ),
    ]
    for body, view in bodies:
        made = create_auth_server.sync(client=admin, body=body)
        expect(isinstance(made, view), f"{body.type_}: {made!r}")
        again = get_auth_server.sync(made.id, client=admin)
        expect(isinstance(again, view), f"{body.type_} read back: {again!r}")
        config = again.to_dict()["config"]
        expect("client_secret" not in config and "password" not in str(config), f"{config}")
        if isinstance(again, OidcAuthServerView):
            expect(again.config.client_secret_set is True, "client_secret_set")

    step("a 422 and a 403 come back as typed problems")
    invalid = create_cluster.sync(
        client=admin,
        body=CreateClusterRequest(
            organization="acme",
            name="Not_A_DNS_Label",
            node_pools=[NodePoolRequest(size="kube.c5.large", count=1)],
        ),
    )
    expect(isinstance(invalid, Problem) and invalid.status == 422, f"422: {invalid!r}")
    expect(any(e.field == "name" for e in invalid.errors), f"the field named: {invalid.errors!r}")
    forbidden = create_cluster.sync(
        client=client(MEMBER),
        body=CreateClusterRequest(
            organization="acme",
            name=f"{name}-2",
            node_pools=[NodePoolRequest(size="kube.c5.large", count=1)],
        ),
    )
    expect(isinstance(forbidden, Problem) and forbidden.status == 403, f"403: {forbidden!r}")
    expect(forbidden.code == "forbidden", forbidden.code)

    step("delete the cluster")
    gone = delete_cluster.sync_detailed(cluster.id, client=admin)
    expect(gone.status_code == 202, f"delete: {gone.status_code}")
    print("the generated client drove the lifecycle")


if __name__ == "__main__":
    main()
