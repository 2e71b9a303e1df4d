//! `kubesvc mcp`: the assistant's endpoint for a desktop assistant that starts its tools as a
//! program speaking MCP on standard input and output. Each message read is posted as it is to
//! the server's `/mcp` with the saved context's token and organization, and each answer
//! written back as one line: the tools are defined once, on the server, and the token never
//! appears in the program's arguments, its output or its log.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use crate::client::Api;
use crate::error::CliError;

/// The longest message taken from standard input; a longer line is answered with an error.
const MESSAGE_MAX: usize = 1024 * 1024;

/// JSON-RPC's code for a message that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// The server could not be asked, or refused the request before the protocol (401, 502…).
const SERVER_ERROR: i64 = -32000;

pub async fn serve(api: Api) -> Result<(), CliError> {
    let api = Arc::new(api);
    // The protocol revision the `initialize` handshake agreed on, sent with each later request
    // as the streamable HTTP transport asks (the 2026 revision names it in every message).
    let version: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (lines, mut written) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = written.recv().await {
            if out.write_all(line.as_bytes()).await.is_err()
                || out.write_all(b"\n").await.is_err()
                || out.flush().await.is_err()
            {
                break;
            }
        }
    });
    let mut input = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    let mut calls = tokio::task::JoinSet::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MESSAGE_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| CliError::Local(format!("reading standard input: {e}")))?;
        if read == 0 {
            break;
        }
        if line.len() > MESSAGE_MAX && !line.ends_with(b"\n") {
            let _ = lines.send(error_line(
                &Value::Null,
                PARSE_ERROR,
                "the message is too long",
            ));
            // Skip the rest of the overlong line.
            let mut rest = Vec::new();
            let _ = input.read_until(b'\n', &mut rest).await;
            continue;
        }
        let text = String::from_utf8_lossy(&line).trim().to_owned();
        if text.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => {
                let _ = lines.send(error_line(
                    &Value::Null,
                    PARSE_ERROR,
                    "the message is not JSON",
                ));
                continue;
            }
        };
        let (api, version, lines) = (api.clone(), version.clone(), lines.clone());
        // Each request in its own task: a client may send a ping while a call is answered.
        calls.spawn(async move {
            for answer in relay(&api, &version, message, text).await {
                let _ = lines.send(answer);
            }
        });
    }
    // Standard input closed: the answers still owed are written, then the program ends.
    while calls.join_next().await.is_some() {}
    drop(lines);
    let _ = writer.await;
    Ok(())
}

/// One message to the server; the lines to write back (none for a notification).
async fn relay(
    api: &Api,
    version: &Mutex<Option<String>>,
    message: Value,
    text: String,
) -> Vec<String> {
    let id = message.get("id").cloned();
    let method = message["method"].as_str().map(str::to_owned);
    let mut headers: Vec<(&'static str, String)> = Vec::new();
    if let Some(m) = &method {
        headers.push(("Mcp-Method", m.clone()));
        // The tool or resource a call names, as the 2026 transport repeats it in a header.
        if let Some(name) = message["params"]["name"]
            .as_str()
            .or(message["params"]["uri"].as_str())
            .filter(|n| n.bytes().all(|b| b.is_ascii_graphic()))
        {
            headers.push(("Mcp-Name", name.to_owned()));
        }
    }
    if method.as_deref() != Some("initialize")
        && let Some(v) = version.lock().await.clone()
    {
        headers.push(("MCP-Protocol-Version", v));
    }
    let answer = match api.relay("/mcp", text.into_bytes(), &headers).await {
        Ok(a) => a,
        Err(e) => {
            return id
                .map(|id| error_line(&id, SERVER_ERROR, &e.to_string()))
                .into_iter()
                .collect();
        }
    };
    let status = answer.status.as_u16();
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    if !answer.status.is_success() {
        // Refused before the protocol: the problem's words, never its headers (no token).
        let detail = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|p| p["detail"].as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("the server answered {status}"));
        eprintln!("kubesvc mcp: {}", crate::output::printable(&detail));
        return id
            .map(|id| error_line(&id, SERVER_ERROR, &detail))
            .into_iter()
            .collect();
    }
    let event_stream = answer
        .headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let messages: Vec<String> = if event_stream {
        // Each event's data is one message.
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
            .collect()
    } else if body.trim().is_empty() {
        Vec::new()
    } else {
        vec![body.trim().to_owned()]
    };
    let mut lines = Vec::new();
    for m in messages {
        // One message a line: compacted, whatever spacing the server chose.
        let Ok(value) = serde_json::from_str::<Value>(&m) else {
            continue;
        };
        if method.as_deref() == Some("initialize")
            && let Some(v) = value["result"]["protocolVersion"].as_str()
        {
            *version.lock().await = Some(v.to_owned());
        }
        lines.push(value.to_string());
    }
    lines
}

fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}
