//! Read tools called over the stateless revision, answered on the request's own task.
//!
//! The SDK serves every stateless message by standing up a whole service for it: a transport,
//! a serve loop on a task of its own, channels both ways, and (because the domain's use cases
//! are futures the compiler cannot prove `Send`) a hop back to the request's task to run the
//! tool. For a read that is most of the cost: `get_cluster` through the SDK ran at less than
//! half the requests per second of the same read through the REST route.
//!
//! So the plainest and commonest message, a 2026-07-28 `tools/call` of a read-only tool, is
//! recognised here and answered directly, with the SDK's own types for the JSON-RPC answer.
//! Recognition is strict, so that anything this path does not fully understand goes to the
//! SDK, which then answers it (or refuses it) exactly as before: every field of the message is
//! known (an unknown one, a progress token, input responses, request state or a log level
//! sends it on), the per-request metadata names 2026-07-28 and carries valid client
//! capabilities, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers agree with
//! the body, no `Mcp-Param-*` header is sent, and the media types are the ones the SDK
//! requires. A test holds the two paths to the same answer.

use actix_web::HttpRequest;
use actix_web::http::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use rmcp::model::{
    CallToolResult, ClientCapabilities, JsonObject, JsonRpcResponse, JsonRpcVersion2_0,
    ProtocolVersion, RequestId,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::tools::{self, Acting, Answer};

/// The revision whose requests carry their own version and capabilities.
const STATELESS: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// A read tool's call, recognised.
pub(crate) struct ReadCall {
    id: RequestId,
    name: String,
    arguments: JsonObject,
}

/// The message, as this path accepts it: every field named, nothing else allowed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    #[allow(dead_code)] // Read for its check: only "2.0" deserializes.
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    method: String,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(rename = "_meta")]
    meta: Meta,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: String,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    #[allow(dead_code)] // Read for its check: the SDK's own type must accept it.
    client_capabilities: ClientCapabilities,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    #[allow(dead_code)] // Allowed, not used: who the client is changes no read.
    client_info: Option<serde_json::Value>,
}

/// The call, when `req` with `body` is a stateless read this path answers; `None` sends the
/// message to the SDK.
pub(crate) fn read_call(req: &HttpRequest, body: &[u8]) -> Option<ReadCall> {
    if req.method() != actix_web::http::Method::POST {
        return None;
    }
    let headers = req.headers();
    if only(headers, "mcp-protocol-version")? != STATELESS.as_str()
        || only(headers, "mcp-method")? != "tools/call"
        || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        || !media_types_accepted(headers)
    {
        return None;
    }
    let message: Message = serde_json::from_slice(body).ok()?;
    if message.method != "tools/call"
        || message.params.meta.protocol_version != STATELESS.as_str()
        || only(headers, "mcp-name")? != message.params.name
        || !tools::reads(&message.params.name)
    {
        return None;
    }
    Some(ReadCall {
        id: message.id,
        name: message.params.name,
        arguments: message.params.arguments.unwrap_or_default(),
    })
}

/// The one value of header `name`, as text; `None` when absent, repeated or not text.
fn only<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name);
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// A JSON body, and an answer the client takes as JSON and as an event stream: what the SDK
/// requires of every POST (it refuses the rest, so those go to it).
fn media_types_accepted(headers: &HeaderMap) -> bool {
    let essence = |v: &str| {
        v.split_once(';')
            .map_or(v, |(e, _)| e)
            .trim()
            .to_ascii_lowercase()
    };
    let json_body =
        only(headers, CONTENT_TYPE.as_str()).is_some_and(|v| essence(v) == "application/json");
    let accepted: Vec<String> = headers
        .get_all(ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(essence)
        .collect();
    json_body
        && accepted.iter().any(|t| t == "application/json")
        && accepted.iter().any(|t| t == "text/event-stream")
}

/// Runs the read and answers it as the SDK would: a JSON-RPC response, as JSON, its result the
/// SDK's own with the structured content written straight from the answer's data (the SDK
/// would read it into a `Value` tree first, and write that). `None` when the tool asked for
/// something a read never does (the caller answers an internal error).
pub(crate) async fn answer(acting: &Acting, call: ReadCall) -> Option<Vec<u8>> {
    let Answer::Done(done) = tools::call(acting, &call.name, call.arguments, false).await? else {
        return None;
    };
    let message = JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id: call.id,
        result: Reply {
            result: &done.result,
            structured_content: &done.data,
        },
    };
    serde_json::to_vec(&message).ok()
}

/// A tool's result as the SDK writes it, its structured content already JSON.
#[derive(Serialize)]
struct Reply<'a> {
    #[serde(flatten)]
    result: &'a CallToolResult,
    #[serde(rename = "structuredContent")]
    structured_content: &'a RawValue,
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;
    use serde_json::{Value, json};

    use super::*;

    const ACCEPTS: &str = "application/json, text/event-stream";

    /// What a case is, the headers sent and the body.
    type Case = (&'static str, Vec<(&'static str, &'static str)>, Value);

    /// `v` without its field `key`.
    fn without(mut v: Value, key: &str) -> Value {
        if let Some(o) = v.as_object_mut() {
            o.remove(key);
        }
        v
    }

    fn body(name: &str, meta: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": name, "arguments": {"cluster": "web"}, "_meta": meta}})
    }

    fn meta() -> Value {
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}})
    }

    fn recognised(headers: &[(&str, &str)], body: &Value) -> Option<String> {
        recognised_as(TestRequest::post(), headers, body.to_string().as_bytes())
    }

    fn recognised_as(
        mut req: TestRequest,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Option<String> {
        req = req.uri("/mcp");
        for &(name, value) in headers {
            req = req.append_header((name, value));
        }
        read_call(&req.to_http_request(), body).map(|c| c.name)
    }

    fn plain(name: &'static str) -> Vec<(&'static str, &'static str)> {
        vec![
            ("Content-Type", "application/json"),
            ("Accept", ACCEPTS),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ]
    }

    #[test]
    fn a_plain_stateless_read_is_answered_here() {
        let got = recognised(&plain("get_cluster"), &body("get_cluster", meta()));
        assert_eq!(got.as_deref(), Some("get_cluster"));
        let mut with_info = meta();
        with_info["io.modelcontextprotocol/clientInfo"] = json!({"name": "c", "version": "1"});
        let got = recognised(&plain("list_nodes"), &body("list_nodes", with_info));
        assert_eq!(got.as_deref(), Some("list_nodes"));
    }

    #[test]
    fn anything_else_goes_to_the_sdk() {
        let with = |key: &str, value: Value| {
            let mut b = body("get_cluster", meta());
            b["params"][key] = value;
            b
        };
        let meta_with = |key: &str, value: Value| {
            let mut m = meta();
            m[key] = value;
            body("get_cluster", m)
        };
        let headers_without = |gone: &str| -> Vec<(&'static str, &'static str)> {
            plain("get_cluster")
                .into_iter()
                .filter(|(n, _)| !n.eq_ignore_ascii_case(gone))
                .collect()
        };
        let headers_with = |extra: (&'static str, &'static str)| {
            let mut h = plain("get_cluster");
            h.push(extra);
            h
        };
        let headers_replacing = |name: &'static str, value: &'static str| {
            let mut h = headers_without(name);
            h.push((name, value));
            h
        };
        let cases: Vec<Case> = vec![
            (
                "a write",
                plain("create_cluster"),
                body("create_cluster", meta()),
            ),
            ("an unknown tool", plain("nope"), body("nope", meta())),
            ("another method", plain("get_cluster"), {
                let mut b = body("get_cluster", meta());
                b["method"] = json!("tools/list");
                b
            }),
            ("the 2025-11-25 framing", plain("get_cluster"), {
                let mut b = body("get_cluster", meta());
                b["params"] = without(b["params"].take(), "_meta");
                b
            }),
            (
                "an older version in the body",
                plain("get_cluster"),
                meta_with(
                    "io.modelcontextprotocol/protocolVersion",
                    json!("2025-11-25"),
                ),
            ),
            (
                "no client capabilities",
                plain("get_cluster"),
                body(
                    "get_cluster",
                    without(meta(), "io.modelcontextprotocol/clientCapabilities"),
                ),
            ),
            (
                "capabilities of the wrong type",
                plain("get_cluster"),
                meta_with("io.modelcontextprotocol/clientCapabilities", json!("all")),
            ),
            (
                "a progress token",
                plain("get_cluster"),
                meta_with("progressToken", json!(1)),
            ),
            (
                "a log level",
                plain("get_cluster"),
                meta_with("io.modelcontextprotocol/logLevel", json!("debug")),
            ),
            (
                "input responses",
                plain("get_cluster"),
                with("inputResponses", json!({})),
            ),
            (
                "request state",
                plain("get_cluster"),
                with("requestState", json!("x")),
            ),
            (
                "a field of its own",
                plain("get_cluster"),
                with("extra", json!(1)),
            ),
            ("a JSON-RPC 1.0 message", plain("get_cluster"), {
                let mut b = body("get_cluster", meta());
                b["jsonrpc"] = json!("1.0");
                b
            }),
            (
                "no version header",
                headers_without("MCP-Protocol-Version"),
                body("get_cluster", meta()),
            ),
            (
                "an older version header",
                headers_replacing("MCP-Protocol-Version", "2025-11-25"),
                body("get_cluster", meta()),
            ),
            (
                "no Mcp-Method",
                headers_without("Mcp-Method"),
                body("get_cluster", meta()),
            ),
            (
                "Mcp-Name of another tool",
                plain("list_nodes"),
                body("get_cluster", meta()),
            ),
            (
                "Mcp-Name twice",
                headers_with(("Mcp-Name", "get_cluster")),
                body("get_cluster", meta()),
            ),
            (
                "an Mcp-Param header",
                headers_with(("Mcp-Param-Cluster", "web")),
                body("get_cluster", meta()),
            ),
            (
                "a text body",
                headers_replacing("Content-Type", "text/plain"),
                body("get_cluster", meta()),
            ),
            (
                "JSON answers only",
                headers_replacing("Accept", "application/json"),
                body("get_cluster", meta()),
            ),
        ];
        for (case, headers, body) in cases {
            assert_eq!(recognised(&headers, &body), None, "{case}");
        }
        let h = plain("get_cluster");
        let b = body("get_cluster", meta()).to_string();
        assert_eq!(
            recognised_as(TestRequest::post(), &h, b"{\"jsonrpc\":"),
            None,
            "not JSON"
        );
        assert_eq!(
            recognised_as(TestRequest::get(), &h, b.as_bytes()),
            None,
            "a GET"
        );
    }
}
