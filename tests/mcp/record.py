"""Records a session with /mcp for docs/assistant.md: every HTTP exchange the official MCP
Python SDK makes, printed as it went (the token shortened). Run it against `server --dev`:

    KUBESVC_URL=http://127.0.0.1:8080 python tests/mcp/record.py
"""

import asyncio
import json
import os
import uuid

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = os.environ["KUBESVC_URL"].rstrip("/")
TOKEN = "dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d"


def shown(body: bytes, limit: int = 1400) -> str:
    try:
        text = json.dumps(json.loads(body), indent=1)
    except ValueError:
        text = body.decode(errors="replace")
    return text if len(text) <= limit else text[:limit] + "\n… (cut)"


async def on_request(request: httpx2.Request) -> None:
    print(f"\n> {request.method} {request.url.path}")
    for name in ("mcp-protocol-version", "mcp-method", "mcp-name"):
        if name in request.headers:
            print(f"> {name}: {request.headers[name]}")
    print("> authorization: Bearer dev-only-token-acme-super-admin-…")
    if request.content:
        print(shown(request.content))


async def on_response(response: httpx2.Response) -> None:
    await response.aread()
    print(f"< {response.status_code} {response.headers.get('content-type', '')}")
    if response.content:
        print(shown(response.content))


async def main() -> None:
    name = f"web-{uuid.uuid4().hex[:4]}"

    async def person_approves(context, params) -> types.ElicitResult:
        ident = params.url.rsplit("/", 1)[1]
        print(f"\n[the client shows its person {params.url}; they approve it there]")
        with httpx2.Client(timeout=30) as c:
            r = c.post(
                f"{URL}/v1/public/approvals/{ident}/approve",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            print(f"[approved: {r.status_code}, outcome {r.json()['outcome']}]")
        return types.ElicitResult(action="accept")

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
        event_hooks={"request": [on_request], "response": [on_response]},
    )
    async with Client(
        streamable_http_client(f"{URL}/mcp", http_client=http),
        elicitation_callback=person_approves,
    ) as client:
        await client.call_tool("list_clusters", {"organization": "acme"})
        body = {
            "organization": "acme",
            "name": name,
            "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 2}],
        }
        await client.call_tool("create_cluster", body)


if __name__ == "__main__":
    asyncio.run(main())
