//! The assistant's MCP endpoint at its HTTP edges: a refused token is the API's 401 with the
//! challenge that names the protected-resource metadata (RFC 9728), that document names the
//! account platform, and a `tools/call` made over plain HTTP answers as the tools say. The
//! protocol as a real client speaks it is checked by the official MCP SDK (tests/mcp/check.py).

use reqwest::Method;
use serde_json::{Value, json};

use blackbox::*;

const MCP: &str = "/mcp";
const ACCEPT: &str = "application/json, text/event-stream";

/// A JSON-RPC request to `/mcp` over the 2025-11-25 handshake's framing (no session).
async fn rpc(app: &TestApp, token: Option<&str>, body: &Value) -> Answer {
    app.send(
        app.request(Method::POST, MCP, token)
            .header("Accept", ACCEPT)
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(body),
    )
    .await
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn mcp_a_refused_token_is_401_naming_the_resource_metadata() {
    let app = TestApp::spawn_api_only(&[]).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    for token in [None, Some("not-a-token-the-platform-knows")] {
        let a = rpc(&app, token, &list).await;
        assert_eq!(a.status, 401, "{}", a.text());
        // The API's own problem, with the challenge an MCP client follows to sign in.
        assert_eq!(a.problem_code(), "unauthorized");
        assert_eq!(
            a.header("www-authenticate"),
            Some(format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
                app.url
            ))
        );
    }
}

#[tokio::test]
async fn mcp_the_resource_metadata_names_the_account_platform() {
    let app = TestApp::spawn_api_only(&[]).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let a = app.send(app.request(Method::GET, path, None)).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text());
        let doc = a.json();
        assert_eq!(doc["resource"], format!("{}/mcp", app.url), "{doc}");
        assert_eq!(
            doc["authorization_servers"],
            json!([app.platform.url().trim_end_matches('/')]),
            "{doc}"
        );
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    // A public address set is the one named.
    let app = TestApp::spawn_api_only(&[
        ("PUBLIC_URL", "https://kubesvc.example.com/"),
        ("AUTHORIZATION_SERVER_URL", "https://accounts.example.com"),
    ])
    .await;
    let doc = app
        .send(app.request(Method::GET, "/.well-known/oauth-protected-resource", None))
        .await
        .json();
    assert_eq!(doc["resource"], "https://kubesvc.example.com/mcp");
    assert_eq!(
        doc["authorization_servers"],
        json!(["https://accounts.example.com"])
    );
}

#[tokio::test]
async fn mcp_a_tool_call_over_http_reads_and_asks_for_approval() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("mcp-http-1").await;

    // A read: the cluster, by name, in the structured content; the text names no customer text.
    let a = rpc(
        &app,
        Some(TOKEN_ACME_MEMBER),
        &call("get_cluster", json!({"cluster": "mcp-http-1"})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let result = &a.json()["result"];
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["id"], c["id"], "{result}");
    assert!(
        !result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("mcp-http-1")
    );

    // The organization: the argument, else the X-Platform-Organization header, else the
    // preferred one (globex, for this account, a member of acme too), as the API reads it.
    let list = call("list_clusters", json!({}));
    let ids = |a: &Answer| -> Vec<Value> {
        a.json()["result"]["structuredContent"]["items"]
            .as_array()
            .map(|items| items.iter().map(|c| c["id"].clone()).collect())
            .unwrap_or_default()
    };
    let preferred = rpc(&app, Some(TOKEN_TWO_ORGS), &list).await;
    assert!(!ids(&preferred).contains(&c["id"]), "{}", preferred.text());
    let headed = app
        .send(
            app.request(Method::POST, MCP, Some(TOKEN_TWO_ORGS))
                .header("Accept", ACCEPT)
                .header("MCP-Protocol-Version", "2025-11-25")
                .header("X-Platform-Organization", "acme")
                .json(&list),
        )
        .await;
    assert!(ids(&headed).contains(&c["id"]), "{}", headed.text());
    let named = rpc(
        &app,
        Some(TOKEN_TWO_ORGS),
        &call("list_clusters", json!({"organization": "acme"})),
    )
    .await;
    assert!(ids(&named).contains(&c["id"]), "{}", named.text());

    // A change by a super_admin: an approval, its URL told in a tool error (this client never
    // said it opens URLs), and nothing run.
    let a = rpc(
        &app,
        Some(TOKEN_ACME_SUPER_ADMIN),
        &call("delete_cluster", json!({"cluster": "mcp-http-1"})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let result = &a.json()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["code"], "approval_required");
    let url = result["structuredContent"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = url.rsplit('/').next().unwrap().to_owned();
    assert_eq!(url, format!("{}/console/approvals/{id}", app.url));
    let cluster = app
        .get(&format!("{CLUSTERS}/{}", id_of(&c)), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_ne!(cluster.json()["phase"], "Deleting");

    // The same person approves through the API; the assistant's retry answers what it did.
    let approved = app
        .post(
            &format!("/v1/public/approvals/{id}/approve"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    let a = rpc(
        &app,
        Some(TOKEN_ACME_SUPER_ADMIN),
        &call("delete_cluster", json!({"cluster": "mcp-http-1"})),
    )
    .await;
    let result = &a.json()["result"];
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["approval"]["status"],
        "approved"
    );
    assert_eq!(
        result["structuredContent"]["cluster"]["phase"], "Deleting",
        "{result}"
    );

    // The trail: the assistant asked (the approval's event, through the assistant), and the
    // deletion ran through the assistant from that approval, as the person who approved it.
    let trail = app
        .get(
            &format!(
                "/v1/public/audit-events?organization=acme&cluster_id={}",
                id_of(&c)
            ),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!(trail.status, 200, "{}", trail.text());
    let events = trail.json()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let event = |resource: &str, action: &str| {
        events
            .iter()
            .find(|e| e["resource"] == resource && e["action"] == action)
            .cloned()
            .unwrap_or_else(|| panic!("no {resource} {action} in {events:?}"))
    };
    let asked = event("approval", "requested");
    assert_eq!(asked["via"], "assistant", "{asked}");
    let deletion = event("cluster", "deletion_started");
    assert_eq!(deletion["via"], "assistant", "{deletion}");
    assert_eq!(deletion["approval_id"], json!(id), "{deletion}");

    // No tool changes a firewall rule: the name is no tool's.
    let a = rpc(
        &app,
        Some(TOKEN_ACME_SUPER_ADMIN),
        &call("create_firewall_rule", json!({})),
    )
    .await;
    assert!(a.json()["error"]["code"].is_i64(), "{}", a.text());
}

/// The assistant reads where a cluster may go and asks for an upgrade; a refused version is
/// refused before anyone is asked, and an approved one runs as the person who approved it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_an_upgrade_is_read_then_asked_for_and_runs_once_approved() {
    let app = TestApp::spawn().await;
    let c = app.provisioned_cluster("mcp-upgrade-1").await;
    let read = rpc(
        &app,
        Some(TOKEN_ACME_MEMBER),
        &call("list_upgrades", json!({"cluster": "mcp-upgrade-1"})),
    )
    .await;
    let result = &read.json()["result"];
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["current_version"], "v1.32.4");
    let offered = result["structuredContent"]["available_versions"].to_string();
    assert!(offered.contains("v1.32.6"), "{offered}");

    // A downgrade is refused with the API's code; nobody is asked.
    let down = rpc(
        &app,
        Some(TOKEN_ACME_SUPER_ADMIN),
        &call(
            "upgrade_cluster",
            json!({"cluster": "mcp-upgrade-1", "version": "v1.31.9"}),
        ),
    )
    .await;
    let refused = &down.json()["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["code"], "upgrade_not_allowed",
        "{refused}"
    );

    let ask = call(
        "upgrade_cluster",
        json!({"cluster": "mcp-upgrade-1", "version": "v1.32.6"}),
    );
    let asked = rpc(&app, Some(TOKEN_ACME_SUPER_ADMIN), &ask).await;
    let result = &asked.json()["result"];
    assert_eq!(
        result["structuredContent"]["code"], "approval_required",
        "{result}"
    );
    let url = result["structuredContent"]["url"]
        .as_str()
        .unwrap_or_default();
    let id = url.rsplit('/').next().unwrap_or_default().to_owned();
    let path = format!("{CLUSTERS}/{}", id_of(&c));
    assert!(app.get(&path, TOKEN_ACME_MEMBER).await.json()["upgrade"].is_null());
    let approved = app
        .post(
            &format!("/v1/public/approvals/{id}/approve"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    let done = app
        .wait_for(&path, std::time::Duration::from_secs(120), |c| {
            c["upgrade"].is_null() && c["version"] == "v1.32.6"
        })
        .await;
    assert_eq!(done["node_pools"][0]["version"], "v1.32.6");
    // The retry answers what it did, and starts nothing more.
    let again = rpc(&app, Some(TOKEN_ACME_SUPER_ADMIN), &ask).await;
    let result = &again.json()["result"];
    assert_eq!(
        result["structuredContent"]["approval"]["status"], "approved",
        "{result}"
    );
    let ops = app
        .get(&format!("{path}/operations?size=100"), TOKEN_ACME_MEMBER)
        .await
        .json();
    let upgrades = ops["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == "upgrade")
        .count();
    assert_eq!(upgrades, 1, "{ops}");
}

/// A `tools/call` in the 2026-07-28 revision's framing: the version and capabilities in the
/// message's `_meta` (with `extra` added to it), and the headers that name the call. The
/// request id is the caller's, so two answers can be compared whole.
async fn stateless(
    app: &TestApp,
    token: &str,
    name: &str,
    arguments: Value,
    extra: Value,
) -> Answer {
    let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), extra.as_object()) {
        m.extend(extra.clone());
    }
    let body = json!({"jsonrpc": "2.0", "id": "r-1", "method": "tools/call",
                      "params": {"name": name, "arguments": arguments, "_meta": meta}});
    app.send(
        app.request(Method::POST, MCP, Some(token))
            .header("Accept", ACCEPT)
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", name)
            .header("X-Request-Id", format!("stateless-{name}"))
            .json(&body),
    )
    .await
}

/// A plain stateless read is answered without the SDK's per-request service; one with a
/// progress token still goes through the SDK. Both answer the same, byte for byte once
/// parsed: reads that find, reads that are refused, and arguments that are wrong.
#[tokio::test]
async fn mcp_a_stateless_read_answers_as_the_sdk_does() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("mcp-direct-1").await;
    let cases = [
        ("get_cluster", json!({"cluster": "mcp-direct-1"})),
        ("get_cluster", json!({"cluster": id_of(&c)})),
        ("get_cluster", json!({"cluster": "no-such-cluster"})),
        ("get_cluster", json!({"cluster": 5})),
        ("list_clusters", json!({"organization": "acme", "size": 2})),
        ("list_clusters", json!({"organization": "initech"})),
        ("list_node_pools", json!({"cluster": "mcp-direct-1"})),
        ("get_catalog", json!({})),
        ("list_operations", json!({"cluster": "mcp-direct-1"})),
    ];
    for (name, arguments) in cases {
        let direct = stateless(&app, TOKEN_ACME_MEMBER, name, arguments.clone(), json!({})).await;
        let sdk = stateless(
            &app,
            TOKEN_ACME_MEMBER,
            name,
            arguments.clone(),
            json!({"progressToken": "p-1"}),
        )
        .await;
        assert_eq!(direct.status, 200, "{name} {arguments}: {}", direct.text());
        assert_eq!(direct.status, sdk.status, "{name} {arguments}");
        assert_eq!(
            direct.header("content-type"),
            sdk.header("content-type"),
            "{name} {arguments}"
        );
        assert_eq!(direct.json(), sdk.json(), "{name} {arguments}");
        assert_eq!(direct.json()["id"], "r-1");
    }
}

fn id_of(c: &Value) -> String {
    c["id"].as_str().unwrap_or_default().to_owned()
}
