"""The assistant's MCP endpoint, driven by the official MCP Python SDK over streamable HTTP.

Run by `make test` (scripts/test.sh, step mcp) with KUBESVC_URL set to a `server --dev`.
Both protocol revisions are spoken: 2026-07-28 (the SDK's default: `server/discover`, a URL
elicitation as an input-required result) and the 2025-11-25 `initialize` handshake (the
approval URL in a tool error). Approvals are decided through the API's approval routes, as the
same account, which run the same use cases as the console's page.
"""

import asyncio
import os
import re
import sys
import traceback
import uuid

import httpx2
import jsonschema
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

URL = os.environ["KUBESVC_URL"].rstrip("/")
# The development platform's demo tokens.
SUPER_ADMIN = "dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d"
MEMBER = "dev-only-token-acme-member-3e8b2a1c9d7f4e6a8b0c2d4e"
OTHER_ORGS_SUPER_ADMIN = "dev-only-token-initech-super-admin-2f6d8b0a4c9e1b3d5f7a"

READS = {
    "get_catalog",
    "list_clusters",
    "get_cluster",
    "list_node_pools",
    "list_nodes",
    "list_elastic_ips",
    "list_firewall_rules",
    "list_operations",
    "list_upgrades",
}
WRITES = {
    "create_cluster",
    "add_node_pool",
    "scale_node_pool",
    "delete_node_pool",
    "delete_node",
    "delete_cluster",
    "upgrade_cluster",
}
NETWORK_CHANGES = [
    "create_elastic_ip",
    "allocate_elastic_ip",
    "release_elastic_ip",
    "create_firewall_rule",
    "delete_firewall_rule",
]


def api(method: str, path: str, token: str, body=None) -> httpx2.Response:
    with httpx2.Client(base_url=URL, timeout=30) as c:
        return c.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})


def connect(token: str, *, mode: str = "auto", elicitation=None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(
        streamable_http_client(f"{URL}/mcp", http_client=http),
        mode=mode,
        elicitation_callback=elicitation,
    )


def create_body(name: str) -> dict:
    return {"name": name, "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 2}]}


def clusters_named(name: str) -> list:
    r = api("GET", "/v1/public/clusters?organization=acme&size=100", SUPER_ADMIN)
    assert r.status_code == 200, r.text
    return [c for c in r.json()["items"] if c["name"] == name]


def approval_id(url: str) -> str:
    m = re.fullmatch(re.escape(URL) + r"/console/approvals/([0-9a-f-]{36})", url)
    assert m, f"not an approval page: {url}"
    return m.group(1)


def my_approvals(token: str) -> list:
    r = api("GET", "/v1/public/approvals", token)
    assert r.status_code == 200, r.text
    return r.json()["items"]


# ---- the checks ---------------------------------------------------------------------------


async def a_refused_token_is_401_with_the_resource_metadata() -> None:
    async with httpx2.AsyncClient(timeout=30) as c:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, {"Authorization": "Bearer not-a-token-the-platform-knows"}):
            r = await c.post(
                f"{URL}/mcp",
                json=body,
                headers={"Accept": "application/json, text/event-stream", **headers},
            )
            assert r.status_code == 401, r.text
            challenge = r.headers.get("www-authenticate", "")
            assert challenge == (
                f'Bearer resource_metadata="{URL}/.well-known/oauth-protected-resource"'
            ), challenge
        doc = (await c.get(f"{URL}/.well-known/oauth-protected-resource")).json()
        assert doc["resource"] == f"{URL}/mcp", doc
        assert doc["bearer_methods_supported"] == ["header"], doc
    # The SDK's client fails to connect with it, too.
    try:
        async with connect("not-a-token-the-platform-knows") as client:
            await client.list_tools()
        raise AssertionError("a refused token connected")
    except AssertionError:
        raise
    except Exception:
        pass


async def the_tool_list_says_what_each_tool_is() -> None:
    for mode in ("auto", "legacy"):
        async with connect(SUPER_ADMIN, mode=mode) as client:
            if mode == "auto":
                assert client.protocol_version == "2026-07-28", client.protocol_version
            else:
                assert client.protocol_version == "2025-11-25", client.protocol_version
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert names == READS | WRITES, names
            for t in tools:
                jsonschema.Draft202012Validator.check_schema(t.input_schema)
                assert t.output_schema is not None, t.name
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                a = t.annotations
                assert a is not None, t.name
                assert a.read_only_hint is (t.name in READS), t.name
                assert a.destructive_hint is t.name.startswith("delete_"), t.name
                if t.name in READS:
                    assert a.idempotent_hint is True, t.name
                assert "elastic_ip" not in t.name or t.name in READS, t.name
                assert "firewall" not in t.name or t.name in READS, t.name
            for name in NETWORK_CHANGES:
                try:
                    await client.call_tool(name, {"cluster": "x"})
                    raise AssertionError(f"{name} answered")
                except MCPError:
                    pass


async def every_read_answers_its_structured_content() -> None:
    name = f"mcp-read-{uuid.uuid4().hex[:8]}"
    body = {"organization": "acme", **create_body(name)}
    r = api("POST", "/v1/public/clusters", SUPER_ADMIN, body)
    assert r.status_code == 201, r.text
    cluster = r.json()
    async with connect(MEMBER) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}

        async def read(tool: str, args: dict) -> dict:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result)
            assert result.structured_content is not None, tool
            jsonschema.validate(result.structured_content, tools[tool].output_schema)
            assert result.content and result.content[0].text, tool
            # Customer-written text stays in the structured content.
            assert name not in result.content[0].text, (tool, result.content[0].text)
            return result.structured_content

        catalog = await read("get_catalog", {})
        assert catalog["zone"], catalog
        listed = await read("list_clusters", {"organization": "acme", "size": 100})
        assert any(c["id"] == cluster["id"] for c in listed["items"]), listed
        by_name = await read("get_cluster", {"cluster": name})
        by_id = await read("get_cluster", {"organization": "acme", "cluster": cluster["id"]})
        assert by_name["id"] == by_id["id"] == cluster["id"]
        pools = await read("list_node_pools", {"cluster": name})
        assert [p["name"] for p in pools["items"]] == ["default"], pools
        await read("list_nodes", {"cluster": name})
        await read("list_elastic_ips", {"cluster": name})
        await read("list_firewall_rules", {"cluster": name})
        ops = await read("list_operations", {"cluster": name})
        assert ops["total"] >= 1, ops
        missing = await client.call_tool("get_cluster", {"cluster": "no-such-cluster"})
        assert missing.is_error and missing.structured_content["code"] == "not_found", missing


async def a_create_waits_for_the_person_then_runs_once() -> None:
    name = f"mcp-create-{uuid.uuid4().hex[:8]}"
    seen = []

    async def the_person_approves(context, params) -> types.ElicitResult:
        assert params.mode == "url", params
        ident = approval_id(params.url)
        seen.append(ident)
        if len(seen) == 1:
            # Somebody else, super_admin of another organization, learns nothing of it.
            for method, path in (
                ("GET", f"/v1/public/approvals/{ident}"),
                ("POST", f"/v1/public/approvals/{ident}/approve"),
                ("POST", f"/v1/public/approvals/{ident}/decline"),
            ):
                r = api(method, path, OTHER_ORGS_SUPER_ADMIN)
                assert r.status_code in (403, 404), (method, path, r.status_code, r.text)
            assert clusters_named(name) == [], "the change ran before it was approved"
            first = api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN)
            assert first.status_code == 200, first.text
            assert first.json()["outcome"]["result"] == "done", first.text
            assert first.json()["outcome"]["resource"] == "cluster", first.text
            # A second approval answers the same and runs nothing again.
            second = api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN)
            assert second.status_code == 200, second.text
            assert second.json()["outcome"] == first.json()["outcome"]
        return types.ElicitResult(action="accept")

    async with connect(SUPER_ADMIN, elicitation=the_person_approves) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("create_cluster", {"organization": "acme", **create_body(name)})
        assert not result.is_error, result
        made = result.structured_content["cluster"]
        assert made["name"] == name, made
        assert result.structured_content["approval"]["status"] == "approved"
        assert len(seen) == 1, seen
        # The client asks again: the same cluster, and still one of it.
        again = await client.call_tool("create_cluster", {"organization": "acme", **create_body(name)})
        assert again.structured_content["cluster"]["id"] == made["id"], again
    found = clusters_named(name)
    assert [c["id"] for c in found] == [made["id"]], found
    assert len(seen) == 1


async def a_client_without_url_elicitation_is_told_the_url() -> None:
    name = f"mcp-legacy-{uuid.uuid4().hex[:8]}"
    async with connect(SUPER_ADMIN, mode="legacy") as client:
        asked = await client.call_tool("create_cluster", create_body(name))
        assert asked.is_error, asked
        content = asked.structured_content
        assert content["code"] == "approval_required", content
        ident = approval_id(content["url"])
        assert content["url"] in asked.content[0].text
        # Asked again before the person decided: the same approval, nothing more recorded.
        before = len(my_approvals(SUPER_ADMIN))
        again = await client.call_tool("create_cluster", create_body(name))
        assert approval_id(again.structured_content["url"]) == ident
        assert len(my_approvals(SUPER_ADMIN)) == before
        r = api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN)
        assert r.status_code == 200, r.text
        done = await client.call_tool("create_cluster", create_body(name))
        assert not done.is_error, done
        made = done.structured_content["cluster"]
        assert made["name"] == name and made["organization_slug"] == "acme", made
    assert [c["id"] for c in clusters_named(name)] == [made["id"]]


def leaves(group: BaseExceptionGroup) -> list:
    """The messages of the errors a task group gathered, however deeply nested."""
    found = []
    for e in group.exceptions:
        found.extend(leaves(e) if isinstance(e, BaseExceptionGroup) else [str(e)])
    return found


def through_the_cli(token: str, mode: str) -> Client:
    """`kubesvc mcp` as a desktop assistant starts it: the token in the environment (as the
    saved context would give it), in no argument."""
    params = StdioServerParameters(
        command=os.environ["KUBESVC_CLI_BIN"],
        args=["mcp"],
        env={"KUBESVC_URL": URL, "KUBESVC_TOKEN": token, "KUBESVC_ORGANIZATION": "acme",
             "KUBESVC_CONFIG": os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kubesvc-mcp-{uuid.uuid4().hex}.toml")},
    )
    return Client(params, mode=mode)


async def the_cli_serves_the_same_tools_over_stdio() -> None:
    for mode in ("auto", "legacy"):
        name = f"mcp-stdio-{uuid.uuid4().hex[:8]}"
        async with through_the_cli(SUPER_ADMIN, mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == READS | WRITES, (mode, names)
            catalog = await client.call_tool("get_catalog", {})
            assert not catalog.is_error and catalog.structured_content["zone"], catalog
            # A change through stdio is asked of the person like any other, and runs once.
            asked = await client.call_tool("create_cluster", create_body(name))
            assert asked.is_error and asked.structured_content["code"] == "approval_required", asked
            ident = approval_id(asked.structured_content["url"])
            r = api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN)
            assert r.status_code == 200, r.text
            done = await client.call_tool("create_cluster", create_body(name))
            assert not done.is_error, done
            assert done.structured_content["cluster"]["name"] == name, done
        assert len(clusters_named(name)) == 1
    # A token the platform refuses: every request is an error in the protocol's words.
    refused = []
    try:
        async with through_the_cli("not-a-token-the-platform-knows", "legacy") as client:
            await client.list_tools()
    except* MCPError as group:
        refused = leaves(group)
    assert refused, "a refused token listed tools"
    assert all("invalid bearer token" in e and "not-a-token" not in e for e in refused), refused


async def a_page_the_person_turns_down_in_the_client_is_told_as_its_url() -> None:
    name = f"mcp-turned-down-{uuid.uuid4().hex[:8]}"
    asked = []

    async def the_person_will_not_open_it(context, params) -> types.ElicitResult:
        asked.append(params.url)
        return types.ElicitResult(action="decline")

    async with connect(SUPER_ADMIN, elicitation=the_person_will_not_open_it) as client:
        result = await client.call_tool("create_cluster", {"organization": "acme", **create_body(name)})
        assert result.is_error, result
        assert result.structured_content["code"] == "approval_required", result.structured_content
        assert result.structured_content["url"] == asked[0], (result.structured_content, asked)
        assert len(asked) == 1, asked
    # The approval waits for the person; nothing ran.
    assert clusters_named(name) == []
    status = api("GET", f"/v1/public/approvals/{approval_id(asked[0])}", SUPER_ADMIN).json()["status"]
    assert status == "pending", status


async def a_declined_change_never_runs() -> None:
    name = f"mcp-decline-{uuid.uuid4().hex[:8]}"
    r = api("POST", "/v1/public/clusters", SUPER_ADMIN, {"organization": "acme", **create_body(name)})
    assert r.status_code == 201, r.text
    cluster = r.json()
    async with connect(SUPER_ADMIN, mode="legacy") as client:
        asked = await client.call_tool("delete_cluster", {"cluster": name})
        assert asked.structured_content["code"] == "approval_required", asked
        ident = approval_id(asked.structured_content["url"])
        r = api("POST", f"/v1/public/approvals/{ident}/decline", SUPER_ADMIN)
        assert r.status_code == 200 and r.json()["status"] == "declined", r.text
        # Approving it after it was declined runs nothing.
        r = api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN)
        assert r.status_code == 409, r.text
        after = await client.call_tool("delete_cluster", {"cluster": name})
        assert after.is_error and after.structured_content["code"] == "approval_declined", after
    r = api("GET", f"/v1/public/clusters/{cluster['id']}", SUPER_ADMIN)
    assert r.status_code == 200 and r.json()["phase"] != "Deleting", r.text


async def a_scaling_runs_once_approved() -> None:
    name = f"mcp-scale-{uuid.uuid4().hex[:8]}"
    r = api("POST", "/v1/public/clusters", SUPER_ADMIN, {"organization": "acme", **create_body(name)})
    assert r.status_code == 201, r.text
    args = {"cluster": name, "pool": "default", "count": 3}
    async with connect(SUPER_ADMIN, mode="legacy") as client:
        asked = await client.call_tool("scale_node_pool", args)
        assert asked.structured_content["code"] == "approval_required", asked
        summary = asked.structured_content["approval"]["summary"]
        assert "from 2 nodes to 3 nodes" in summary, summary
        ident = approval_id(asked.structured_content["url"])
        assert api("POST", f"/v1/public/approvals/{ident}/approve", SUPER_ADMIN).status_code == 200
        done = await client.call_tool("scale_node_pool", args)
        assert not done.is_error, done
        assert done.structured_content["node_pool"]["count"] == 3, done.structured_content


async def a_member_is_refused_at_once_and_nothing_is_recorded() -> None:
    before = len(my_approvals(MEMBER))
    async with connect(MEMBER) as client:
        result = await client.call_tool(
            "create_cluster", {"organization": "acme", **create_body(f"mcp-member-{uuid.uuid4().hex[:8]}")}
        )
        assert result.is_error, result
        assert result.structured_content["code"] == "forbidden", result.structured_content
        assert "super_admin" in result.content[0].text, result.content[0].text
    assert len(my_approvals(MEMBER)) == before


async def a_bad_body_has_the_apis_field_messages_and_records_nothing() -> None:
    body = {
        "organization": "acme",
        "name": "Not A Label",
        "node_pools": [{"size": "kube.c5.large", "count": "three"}],
    }
    rest = api("POST", "/v1/public/clusters", SUPER_ADMIN, body)
    assert rest.status_code == 422, rest.text
    before = len(my_approvals(SUPER_ADMIN))
    async with connect(SUPER_ADMIN) as client:
        result = await client.call_tool("create_cluster", body)
        assert result.is_error, result
        assert result.structured_content["code"] == rest.json()["code"] == "validation_failed"
        assert result.structured_content["errors"] == rest.json()["errors"], (
            result.structured_content,
            rest.json(),
        )
        body["node_pools"][0]["count"] = 2
        rest = api("POST", "/v1/public/clusters", SUPER_ADMIN, body)
        result = await client.call_tool("create_cluster", body)
        assert result.structured_content["errors"] == rest.json()["errors"]
        assert any(e["field"] == "name" for e in rest.json()["errors"]), rest.text
    assert len(my_approvals(SUPER_ADMIN)) == before


CHECKS = [
    a_refused_token_is_401_with_the_resource_metadata,
    the_tool_list_says_what_each_tool_is,
    every_read_answers_its_structured_content,
    a_create_waits_for_the_person_then_runs_once,
    a_client_without_url_elicitation_is_told_the_url,
    a_page_the_person_turns_down_in_the_client_is_told_as_its_url,
    a_declined_change_never_runs,
    a_scaling_runs_once_approved,
    a_member_is_refused_at_once_and_nothing_is_recorded,
    the_cli_serves_the_same_tools_over_stdio,
    a_bad_body_has_the_apis_field_messages_and_records_nothing,
]


def main() -> int:
    passed = failed = 0
    for check in CHECKS:
        try:
            asyncio.run(check())
            passed += 1
            print(f"  ok   {check.__name__}", flush=True)
        except Exception:
            failed += 1
            print(f"  FAIL {check.__name__}", flush=True)
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
