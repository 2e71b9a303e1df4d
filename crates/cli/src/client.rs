//! Talking to the API: one request with its token, organization and Idempotency-Key, retried
//! with backoff where a retry cannot do the work twice, and its error answer read as the
//! problem+json the API writes.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use wire::problem::Problem;

use crate::error::CliError;

/// Attempts of one request in all, the first included.
const ATTEMPTS: u32 = 5;
/// The first pause between attempts; doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest pause, whatever a Retry-After asks.
const LONGEST_BACKOFF: Duration = Duration::from_secs(30);

/// The API at one base URL, as one caller.
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    organization: Option<String>,
    verbose: u8,
    /// How long one request may take, its retries included.
    budget: Duration,
    /// Retries are said on stderr (off while a shell completes a word: the line is the shell's).
    say_retries: bool,
}

/// One request to make.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Value>,
    pub idempotency_key: Option<String>,
    /// The server does this write once however often it is sent, without a key (deciding an
    /// approval: a second approval answers the first one's outcome).
    pub idempotent: bool,
}

impl Call {
    pub fn get(path: impl Into<String>) -> Call {
        Call::new(Method::GET, path)
    }

    pub fn new(method: Method, path: impl Into<String>) -> Call {
        Call {
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            idempotency_key: None,
            idempotent: false,
        }
    }

    pub fn query(mut self, name: &'static str, value: impl ToString) -> Call {
        self.query.push((name, value.to_string()));
        self
    }

    pub fn body(mut self, body: Value) -> Call {
        self.body = Some(body);
        self
    }

    /// Marks a write the server does once however often it is sent, so it may be retried.
    pub fn idempotent(mut self) -> Call {
        self.idempotent = true;
        self
    }

    pub fn key(mut self, key: Option<&str>) -> Call {
        self.idempotency_key = key.map(str::to_owned);
        self
    }

    /// Whether sending it twice does the work once: a safe or idempotent method, or a write
    /// the server deduplicates by its Idempotency-Key.
    fn retry_is_safe(&self) -> bool {
        self.idempotency_key.is_some()
            || self.idempotent
            || matches!(
                self.method,
                Method::GET | Method::HEAD | Method::PUT | Method::DELETE
            )
    }
}

/// A successful answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (every success of the API but the plain kubeconfig is JSON).
    pub fn json(&self) -> Result<Value, CliError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| CliError::Network(format!("the API's answer is not JSON: {e}")))
    }

    /// The body as one of the API's shapes.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, CliError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            CliError::Network(format!(
                "the API's answer does not have the expected shape ({e}); is the server newer than this kubesvc?"
            ))
        })
    }

    /// `Retry-After` in seconds, when given as a number.
    pub fn retry_after(&self) -> Option<Duration> {
        retry_after(&self.headers)
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// What one attempt came to.
enum Attempt {
    Done(Answer),
    /// A failure a later attempt may not meet; the pause the server asked for, if any.
    Retry(CliError, Option<Duration>),
    Fail(CliError),
}

impl Api {
    pub fn new(
        base: &str,
        token: &str,
        organization: Option<&str>,
        verbose: u8,
        budget: Duration,
    ) -> Result<Api, CliError> {
        let url = parse_url(base)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(CliError::usage(format!(
                "{base:?}: the URL must be http or https"
            )));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("kubesvc/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            // A redirect would carry the token to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| CliError::Local(format!("the HTTP client cannot start: {e}")))?;
        Ok(Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            organization: organization.map(str::to_owned),
            verbose,
            budget,
            say_retries: true,
        })
    }

    /// The same API, retrying without a word on stderr.
    pub fn quiet(mut self) -> Api {
        self.say_retries = false;
        self
    }

    pub fn organization(&self) -> Option<&str> {
        self.organization.as_deref()
    }

    /// The organization a create body must name.
    pub fn required_organization(&self) -> Result<&str, CliError> {
        self.organization()
            .ok_or_else(|| CliError::usage(crate::error::NO_ORGANIZATION))
    }

    /// Sends `call`, retrying 429, 502, 503 and 504 answers (after their Retry-After) and
    /// network failures where [`Call::retry_is_safe`]; a connection never made is retried
    /// for any call, since nothing reached the server.
    pub async fn send(&self, call: &Call) -> Result<Answer, CliError> {
        self.send_within(call, self.budget).await
    }

    /// [`Api::send`] with its own time budget (a long-poll holds longer than a request).
    pub async fn send_within(&self, call: &Call, budget: Duration) -> Result<Answer, CliError> {
        let deadline = Instant::now() + budget;
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.attempt(call, left).await {
                Attempt::Done(answer) => return Ok(answer),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(e, asked) => {
                    let pause = asked.unwrap_or(backoff).min(LONGEST_BACKOFF);
                    if attempt >= ATTEMPTS || Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    // Said (on stderr): a silent pause of seconds reads as a hang.
                    if self.say_retries {
                        eprintln!(
                            "{}; retrying in {:.1}s (attempt {} of {ATTEMPTS}, Ctrl-C to stop)",
                            crate::output::printable(&e.to_string()),
                            pause.as_secs_f64(),
                            attempt + 1
                        );
                    }
                    if self.verbose > 0 {
                        eprintln!("  the request: {} {}", call.method, call.path);
                    }
                    tokio::time::sleep(pause).await;
                    backoff = backoff.saturating_mul(2);
                    attempt += 1;
                }
            }
        }
    }

    /// Posts `body` as it is to `path` once, with the token, the organization and `headers`:
    /// for a protocol whose own client decides on retries (the assistant's, `kubesvc mcp`).
    /// Any status is an answer; only a request that got none is an error.
    pub async fn relay(
        &self,
        path: &str,
        body: Vec<u8>,
        headers: &[(&'static str, String)],
    ) -> Result<Answer, CliError> {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .timeout(self.budget)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .body(body);
        if let Some(org) = &self.organization {
            request = request.header("X-Platform-Organization", org);
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CliError::Network(describe(&e, &self.base)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| CliError::Network(describe(&e, &self.base)))?
            .to_vec();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends `call` and reads the answer as `T`.
    pub async fn json<T: DeserializeOwned>(&self, call: &Call) -> Result<T, CliError> {
        self.send(call).await?.parse()
    }

    async fn attempt(&self, call: &Call, left: Duration) -> Attempt {
        let mut request = self
            .http
            .request(call.method.clone(), format!("{}{}", self.base, call.path))
            .bearer_auth(&self.token)
            .timeout(left.max(Duration::from_millis(1)));
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        if let Some(org) = &self.organization {
            request = request.header("X-Platform-Organization", org);
        }
        if let Some(key) = &call.idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        if self.verbose > 0 {
            let key = call
                .idempotency_key
                .as_deref()
                .map(|k| format!(" (Idempotency-Key: {k})"))
                .unwrap_or_default();
            eprintln!("> {} {}{key}", call.method, call.path);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let error = CliError::Network(describe(&e, &self.base));
                // Not connected: the request never left, so any call may go again.
                return if e.is_connect() || call.retry_is_safe() {
                    Attempt::Retry(error, None)
                } else {
                    Attempt::Fail(error)
                };
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let body = match response.bytes().await {
            Ok(b) => b.to_vec(),
            Err(e) => {
                let error = CliError::Network(describe(&e, &self.base));
                return if call.retry_is_safe() {
                    Attempt::Retry(error, None)
                } else {
                    Attempt::Fail(error)
                };
            }
        };
        let request_id = header(&headers, "x-request-id");
        if self.verbose > 0 {
            let replay = if header(&headers, "idempotency-replay").is_some() {
                " (replayed)"
            } else {
                ""
            };
            eprintln!(
                "< {}{replay} request id {}",
                status.as_u16(),
                request_id.as_deref().unwrap_or("-")
            );
        }
        if status.is_success() || status.is_redirection() {
            return Attempt::Done(Answer {
                status,
                headers,
                body,
            });
        }
        let problem: Option<Box<Problem>> =
            serde_json::from_slice::<Problem>(&body).ok().map(Box::new);
        let error = CliError::Api {
            status: status.as_u16(),
            request_id: problem
                .as_ref()
                .map(|p| p.request_id.clone())
                .filter(|id| !id.is_empty())
                .or(request_id),
            problem,
        };
        let transient = matches!(status.as_u16(), 429 | 502 | 503 | 504);
        if transient && call.retry_is_safe() {
            Attempt::Retry(error, retry_after(&headers))
        } else {
            Attempt::Fail(error)
        }
    }
}

/// The API's base URL; one typed without its scheme (`127.0.0.1:8080`, `api.example.com`) is
/// told which to add rather than that it is "relative".
pub fn parse_url(base: &str) -> Result<reqwest::Url, CliError> {
    let scheme_hint = || {
        CliError::usage(format!(
            "{base:?} has no scheme: write http://{base} (a local server) or https://{base}"
        ))
    };
    match reqwest::Url::parse(base) {
        Err(url::ParseError::RelativeUrlWithoutBase) => Err(scheme_hint()),
        // `localhost:8080` parses as the scheme `localhost`.
        Ok(url) if !matches!(url.scheme(), "http" | "https") && url.cannot_be_a_base() => {
            Err(scheme_hint())
        }
        Ok(url) => Ok(url),
        Err(e) => Err(CliError::usage(format!("{base:?} is not a URL: {e}"))),
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(str::to_owned)
}

/// A transport failure in words, without reqwest's chain of causes repeated.
fn describe(e: &reqwest::Error, base: &str) -> String {
    if e.is_timeout() {
        format!("{base}: no answer in time")
    } else if e.is_connect() {
        format!("{base}: cannot connect (is the URL right and the server up?)")
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        format!("{base}: {text}")
    }
}

/// A fresh Idempotency-Key for one invocation.
pub fn fresh_key() -> String {
    format!("kubesvc-{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_that_cannot_do_the_work_twice_are_retried() {
        let table = [
            (Method::GET, None, true),
            (Method::DELETE, None, true),
            (Method::POST, None, false),
            (Method::PATCH, None, false),
            (Method::POST, Some("k"), true),
            (Method::PATCH, Some("k"), true),
        ];
        for (method, key, safe) in table {
            let call = Call::new(method.clone(), "/x").key(key);
            assert_eq!(call.retry_is_safe(), safe, "{method} {key:?}");
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("5"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(5)));
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn a_url_without_its_scheme_is_told_which_to_add() {
        for typed in ["127.0.0.1:8080", "localhost:8080", "api.example.com"] {
            let said = parse_url(typed)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(said.contains(&format!("http://{typed}")), "{typed}: {said}");
        }
        assert!(parse_url("https://api.example.com").is_ok());
    }

    #[test]
    fn fresh_keys_differ() {
        assert_ne!(fresh_key(), fresh_key());
    }
}
