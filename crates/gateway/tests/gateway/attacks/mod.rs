//! The attacks the gateway is built to withstand, each sent as an attacker would send it (raw
//! sockets where a client library would normalise the request first), with the answer the
//! gateway gives. docs/gateway.md, "Security model", says what each one guarantees.

mod admin;
mod answers;
mod connections;
mod headers;
mod limits;
mod sessions;
mod sign_out;
mod signin;
mod ssrf;
mod traversal;
mod tunnels;
mod upstream_limits;
