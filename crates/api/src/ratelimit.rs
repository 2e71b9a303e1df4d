//! Fair use: each token may make so many requests a minute, and so many writes, so a script
//! that hammers the API slows down rather than slowing everyone down; and each client address
//! may send so many requests that authenticate as no one (no token, a malformed one, or one the
//! account platform refused), so a flood of made-up tokens is not a flood on the platform.
//!
//! A token's bucket is keyed by a digest of the token as the authentication parses it, never
//! by the header's spelling (`bearer`, `BEARER`, extra spaces: one token, one bucket). The
//! client address is the TCP peer, or behind `TRUSTED_PROXIES` the address they vouch for
//! (the rule the gateway follows too, crate `forwarded`); an IPv6 client is counted by its
//! /64, which one subscriber holds whole. While an address has spent its unauthenticated
//! quota, a token this process has not seen accepted lately is refused before the platform
//! is asked; tokens it has seen accepted pass, so a neighbour behind the same NAT sending
//! garbage does not lock a working client out.
//!
//! Each limit is a GCRA (the token bucket's arithmetic, one instant per key): `q` requests
//! at once, refilled evenly over the minute. State is per process: behind a load balancer
//! that spreads requests over `RATE_LIMIT_REPLICAS` processes, each enforces its share,
//! ⌈q / replicas⌉, so the total stays within `q` (docs/api.md, "Rate limits"). Every answer of
//! the public routes says the policy and what is left, in the IETF `RateLimit-Policy` and
//! `RateLimit` fields; over a limit: 429 `rate_limited` with `Retry-After`. A long-poll counts
//! once, when it arrives, however long it is held.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::net::IpAddr;

use actix_web::dev::ServiceRequest;
use actix_web::http::Method;
use actix_web::http::header::{AUTHORIZATION, HeaderName, HeaderValue, RETRY_AFTER};
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use forwarded::TrustedProxies;
use sha2::{Digest, Sha256};

use crate::problem::{self, PROBLEM_JSON};

/// The window every limit is stated over.
const WINDOW: Duration = Duration::from_secs(60);
/// Keys held before the idle ones are forgotten; past it with none idle (a flood of distinct
/// tokens), all are forgotten: limiting fails open rather than memory growing without bound.
const MAX_KEYS: usize = 100_000;
/// How long a token this process saw accepted passes an address that is over its
/// unauthenticated quota.
const ACCEPTED_FOR: Duration = Duration::from_secs(600);

/// The limits of one process, per minute; 0 switches a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests per token (all methods).
    pub per_token: u32,
    /// Writes (POST, PUT, PATCH, DELETE) per token, counted on top.
    pub writes_per_token: u32,
    /// Requests per client address that authenticate as no one.
    pub unauthenticated_per_address: u32,
    /// Processes sharing the limits behind one load balancer.
    pub replicas: u32,
}

impl Limits {
    /// No limit at all.
    pub const OFF: Limits = Limits {
        per_token: 0,
        writes_per_token: 0,
        unauthenticated_per_address: 0,
        replicas: 1,
    };

    /// This process's share of a limit.
    fn share(&self, q: u32) -> u32 {
        q.div_ceil(self.replicas.max(1))
    }
}

/// One policy: its name in the headers and its quota.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    name: &'static str,
    quota: u32,
}

/// Each policy that applies to a request, with where the request stands in it.
pub type Standings = Vec<(Policy, Standing)>;

/// Where a key stands after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Requests left now.
    pub remaining: u32,
    /// Seconds until the quota is whole again.
    pub reset: u64,
    /// Seconds until a request is allowed again, when this one was refused.
    pub retry_after: Option<u64>,
}

/// The buckets a request may draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Class {
    Token = 0,
    TokenWrites = 1,
    Address = 2,
}

/// A bucket: its class and a digest of whose it is.
type Key = [u8; 17];

/// A digest of a token or an address (never the token itself).
type Digest16 = [u8; 16];

/// The keys' state: for each, the instant its bucket is full again (GCRA's theoretical
/// arrival time).
#[derive(Debug, Default)]
pub struct RateLimiter {
    limits: Option<Limits>,
    trusted: TrustedProxies,
    tat: Mutex<HashMap<Key, Instant>>,
    /// Tokens that authenticated lately, with when they stop counting as such.
    accepted: Mutex<HashMap<Digest16, Instant>>,
}

/// Whose request it is, as far as the limits can tell before authentication.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    /// The digest of the bearer token, when the header holds one.
    token: Option<Digest16>,
    /// The digest of the client address (an IPv6 client's /64).
    address: Digest16,
}

impl RateLimiter {
    /// Whether no limit applies at all (then a request is not even hashed).
    fn is_off(&self) -> bool {
        self.limits.is_none_or(|l| {
            l.per_token == 0 && l.writes_per_token == 0 && l.unauthenticated_per_address == 0
        })
    }

    /// Limits whose client addresses are the TCP peers, or what `trusted` proxies vouch for.
    pub fn new(limits: Limits, trusted: TrustedProxies) -> RateLimiter {
        RateLimiter {
            limits: Some(limits),
            trusted,
            tat: Mutex::new(HashMap::new()),
            accepted: Mutex::new(HashMap::new()),
        }
    }

    /// Where `key`'s bucket of `quota` a minute stands if it takes one more request, and
    /// its next state when it may (taken only once every policy agreed).
    fn peek<K: std::hash::Hash + Eq>(
        map: &HashMap<K, Instant>,
        key: &K,
        quota: u32,
        now: Instant,
    ) -> (Standing, Option<Instant>) {
        let interval = WINDOW / quota.max(1);
        let tat = map.get(key).copied().unwrap_or(now).max(now);
        // The bucket holds `quota`: a request fits while the debt after it stays within the window.
        let debt_after = (tat + interval).saturating_duration_since(now);
        if debt_after > WINDOW {
            let standing = Standing {
                remaining: 0,
                reset: ceil_secs(tat.saturating_duration_since(now)),
                retry_after: Some(ceil_secs(debt_after - WINDOW).max(1)),
            };
            return (standing, None);
        }
        let room = WINDOW - debt_after;
        let standing = Standing {
            remaining: (room.as_nanos() / interval.as_nanos().max(1)) as u32,
            reset: ceil_secs(debt_after),
            retry_after: None,
        };
        (standing, Some(tat + interval))
    }

    /// The policies that apply to a request, with where it stands in each; `Err` with the
    /// standings when one refuses it. Nothing when limiting is off.
    fn check(&self, who: &Requester, write: bool, now: Instant) -> Result<Standings, Standings> {
        let Some(limits) = self.limits else {
            return Ok(Vec::new());
        };
        let mut policies = Vec::new();
        match who.token {
            Some(token) => {
                if limits.per_token > 0 {
                    policies.push((key(Class::Token, &token), TOKEN, limits.per_token));
                }
                if write && limits.writes_per_token > 0 {
                    let k = key(Class::TokenWrites, &token);
                    policies.push((k, TOKEN_WRITES, limits.writes_per_token));
                }
            }
            None if limits.unauthenticated_per_address > 0 => {
                let k = key(Class::Address, &who.address);
                policies.push((k, ADDRESS, limits.unauthenticated_per_address));
            }
            None => {}
        }
        let mut map = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        if !forget_idle(&mut map, now) {
            tracing::warn!(
                keys = map.len(),
                "rate limiter: too many keys, forgetting them all"
            );
            map.clear();
        }
        let mut out = Vec::new();
        let mut next = Vec::new();
        for (k, name, quota) in policies {
            let policy = Policy {
                name,
                quota: limits.share(quota),
            };
            let (standing, tat) = Self::peek(&map, &k, policy.quota, now);
            next.push((k, tat));
            out.push((policy, standing));
        }
        // A token this process has not seen accepted, from an address that has spent its
        // unauthenticated quota, is most likely one more guess: refused before the platform is
        // asked, and counting for nothing.
        if let Some(token) = who.token
            && limits.unauthenticated_per_address > 0
            && !self.was_accepted(&token, now)
        {
            let quota = limits.share(limits.unauthenticated_per_address);
            let (standing, tat) = Self::peek(&map, &key(Class::Address, &who.address), quota, now);
            if tat.is_none() {
                return Err(vec![(
                    Policy {
                        name: ADDRESS,
                        quota,
                    },
                    standing,
                )]);
            }
        }
        // A request one policy refuses takes nothing from the others, which say so.
        if next.iter().any(|(_, tat)| tat.is_none()) {
            for (policy, standing) in &mut out {
                if standing.retry_after.is_none() {
                    standing.remaining = (standing.remaining + 1).min(policy.quota);
                }
            }
            return Err(out);
        }
        for (k, tat) in next {
            if let Some(tat) = tat {
                map.insert(k, tat);
            }
        }
        Ok(out)
    }

    /// Whether `token` authenticated in this process within [`ACCEPTED_FOR`].
    fn was_accepted(&self, token: &Digest16, now: Instant) -> bool {
        let map = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        map.get(token).is_some_and(|until| *until > now)
    }

    /// What authentication said of a request the limits let through: an accepted token is
    /// remembered; a refused one is charged to its address, as a request without a token was
    /// when it arrived.
    fn settle(&self, who: &Requester, outcome: Authentication, now: Instant) {
        let Some(limits) = self.limits else {
            return;
        };
        let Some(token) = who.token else {
            return;
        };
        match outcome {
            Authentication::Accepted => {
                let mut map = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
                if map.len() >= MAX_KEYS {
                    map.retain(|_, until| *until > now);
                    if map.len() >= MAX_KEYS {
                        // Only a cost to a client behind an address that is also over its
                        // unauthenticated quota: it is asked to retry.
                        map.clear();
                    }
                }
                map.insert(token, now + ACCEPTED_FOR);
            }
            Authentication::Refused if limits.unauthenticated_per_address > 0 => {
                let quota = limits.share(limits.unauthenticated_per_address);
                let k = key(Class::Address, &who.address);
                let mut map = self.tat.lock().unwrap_or_else(|e| e.into_inner());
                if let (_, Some(tat)) = Self::peek(&map, &k, quota, now) {
                    map.insert(k, tat);
                }
            }
            Authentication::Refused => {}
        }
    }
}

const TOKEN: &str = "token";
const TOKEN_WRITES: &str = "token-writes";
const ADDRESS: &str = "address";

fn key(class: Class, digest: &Digest16) -> Key {
    let mut k = [0u8; 17];
    k[0] = class as u8;
    k[1..].copy_from_slice(digest);
    k
}

/// What authentication made of a request's token, left on the request for the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication {
    /// The account platform knows the token.
    Accepted,
    /// The token is not one (the platform refused it).
    Refused,
}

/// Notes on the request what authentication made of its token (`Ctx` and the other faces
/// that authenticate call this).
pub fn record(req: &HttpRequest, outcome: Authentication) {
    req.extensions_mut().insert(outcome);
}

/// Each organization's writes per minute (`RATE_LIMIT_WRITES_PER_ORGANIZATION`), for the
/// domain, which counts a write once the caller is authorized for the organization.
#[derive(Debug)]
pub struct OrganizationWrites {
    /// This process's share; 0: unlimited.
    quota: u32,
    tat: Mutex<HashMap<uuid::Uuid, Instant>>,
}

impl OrganizationWrites {
    /// `per_minute` writes shared by `replicas` processes (0: unlimited).
    pub fn new(per_minute: u32, replicas: u32) -> OrganizationWrites {
        OrganizationWrites {
            quota: per_minute.div_ceil(replicas.max(1)),
            tat: Mutex::new(HashMap::new()),
        }
    }
}

impl domain::ports::budget::WriteBudget for OrganizationWrites {
    fn take(&self, organization: uuid::Uuid) -> Result<(), u64> {
        if self.quota == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut map = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        // Only authorized callers reach here, so keys are real organizations: never all
        // forgotten, only the idle ones.
        forget_idle(&mut map, now);
        match RateLimiter::peek(&map, &organization, self.quota, now) {
            (_, Some(tat)) => {
                map.insert(organization, tat);
                Ok(())
            }
            (standing, None) => Err(standing.retry_after.unwrap_or(1)),
        }
    }
}

/// At `MAX_KEYS`, forgets the keys whose bucket is full again (nothing owed); false when the
/// map is still full after that.
fn forget_idle<K>(map: &mut HashMap<K, Instant>, now: Instant) -> bool {
    if map.len() >= MAX_KEYS {
        map.retain(|_, tat| *tat > now);
    }
    map.len() < MAX_KEYS
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Whose request it is: the digest of its bearer token as authentication parses it (so every
/// spelling of one token is one key), and the digest of its client address. A sign-in form
/// carries its token in the body: it counts as a request without one, whatever its headers say.
fn requester(req: &ServiceRequest, scope: Scope, trusted: &TrustedProxies) -> Requester {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let token = match scope {
        Scope::Api => crate::extract::bearer_token(header)
            .ok()
            .map(|t| digest16(&[b"token:", t.expose().as_bytes()])),
        Scope::SignIn => None,
    };
    let forwarded_for: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    let peer = req
        .peer_addr()
        .map(|a| a.ip())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let client = forwarded::resolve(peer, &forwarded_for, trusted).client;
    let address = digest16(&[
        b"address:",
        forwarded::subscriber(client).to_string().as_bytes(),
    ]);
    Requester { token, address }
}

fn digest16(parts: &[&[u8]]) -> Digest16 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    let digest = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// What a limited request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The public API: counted by token, or by address without one.
    Api,
    /// The console's sign-in form, where anyone may try a token: counted by address.
    SignIn,
}

/// The limited requests: the public API (not health, metrics, the document or the console's
/// pages), the assistant's MCP endpoint, and the console's sign-in attempts.
fn scope(method: &Method, path: &str) -> Option<Scope> {
    if path.starts_with("/v1/public/")
        || path == "/v1/public"
        || path == "/v1/catalog"
        || path == MCP_PATH
    {
        Some(Scope::Api)
    } else if method == Method::POST && path == "/console/sign-in" {
        Some(Scope::SignIn)
    } else {
        None
    }
}

/// The assistant's MCP endpoint: every message is a POST, and none changes anything by itself
/// (a change it asks for runs from its person's approval), so none counts as a write.
const MCP_PATH: &str = "/mcp";

fn is_write(method: &Method, path: &str) -> bool {
    path != MCP_PATH
        && matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        )
}

/// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers) for `standings`.
fn headers(standings: &[(Policy, Standing)]) -> Option<(HeaderValue, HeaderValue)> {
    if standings.is_empty() {
        return None;
    }
    let policy: Vec<String> = standings
        .iter()
        .map(|(p, _)| format!("\"{}\";q={};w={}", p.name, p.quota, WINDOW.as_secs()))
        .collect();
    let now: Vec<String> = standings
        .iter()
        .map(|(p, s)| format!("\"{}\";r={};t={}", p.name, s.remaining, s.reset))
        .collect();
    Some((
        HeaderValue::from_str(&policy.join(", ")).ok()?,
        HeaderValue::from_str(&now.join(", ")).ok()?,
    ))
}

/// Adds `RateLimit-Policy` and `RateLimit` for `standings` (nothing when none applied).
pub fn annotate(h: &mut actix_web::http::header::HeaderMap, standings: &[(Policy, Standing)]) {
    if let Some((policy, now)) = headers(standings) {
        h.insert(HeaderName::from_static("ratelimit-policy"), policy);
        h.insert(HeaderName::from_static("ratelimit"), now);
    }
}

/// What the limiter decided for a request.
pub enum Admission {
    /// Let it through; its answer says these standings, and [`Ticket::settle`] tells the
    /// limiter what authentication made of it.
    Pass(Standings, Option<Ticket>),
    /// Refused: this 429 is the answer.
    Refuse(HttpResponse),
}

/// A request let through, to be settled once it was answered.
pub struct Ticket(Requester);

impl Ticket {
    /// Settles the request with what authentication noted on it (nothing: it never got there).
    pub fn settle(self, limiter: &RateLimiter, req: &HttpRequest) {
        let outcome = req.extensions().get::<Authentication>().copied();
        if let Some(outcome) = outcome {
            limiter.settle(&self.0, outcome, Instant::now());
        }
    }
}

/// Counts the request against its limits (the public routes only). Called by
/// `middleware::observe` before the handler, so a refusal has its request id, access log line
/// and metrics, without a middleware layer of its own on every request.
pub fn admit(limiter: &RateLimiter, req: &ServiceRequest, request_id: &str) -> Admission {
    let Some(scope) = scope(req.method(), req.path()).filter(|_| !limiter.is_off()) else {
        return Admission::Pass(Vec::new(), None);
    };
    let who = requester(req, scope, &limiter.trusted);
    let write = is_write(req.method(), req.path());
    match limiter.check(&who, write, Instant::now()) {
        Ok(standings) => Admission::Pass(standings, Some(Ticket(who))),
        Err(standings) => {
            let wait = standings
                .iter()
                .filter_map(|(_, s)| s.retry_after)
                .max()
                .unwrap_or(1);
            let whose = if standings.iter().any(|(p, _)| p.name == ADDRESS) {
                "requests without a valid token from this address"
            } else {
                "requests for this token"
            };
            let body = problem::problem(
                actix_web::http::StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many {whose}: retry in {wait} s"),
                None,
                request_id,
            );
            let mut res = HttpResponse::TooManyRequests()
                .content_type(PROBLEM_JSON)
                .insert_header((RETRY_AFTER, wait.to_string()))
                .body(body.to_json());
            annotate(res.headers_mut(), &standings);
            Admission::Refuse(res)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_token: u32, writes: u32, replicas: u32) -> RateLimiter {
        RateLimiter::new(
            Limits {
                per_token,
                writes_per_token: writes,
                unauthenticated_per_address: 0,
                replicas,
            },
            TrustedProxies::default(),
        )
    }

    /// A request with token `n` from address 0.
    fn tok(n: u8) -> Requester {
        Requester {
            token: Some([n; 16]),
            address: [0; 16],
        }
    }

    #[test]
    fn a_burst_of_the_quota_passes_then_one_more_waits_for_its_share_of_the_minute() {
        let l = limiter(6, 0, 1);
        let now = Instant::now();
        let left: Vec<u32> = (0..6)
            .map(|_| {
                l.check(&tok(1), false, now)
                    .map(|s| s[0].1.remaining)
                    .unwrap_or(99)
            })
            .collect();
        assert_eq!(left, [5, 4, 3, 2, 1, 0]);
        let refused = l.check(&tok(1), false, now).err().map(|s| s[0].1);
        assert_eq!(
            refused.and_then(|s| s.retry_after),
            Some(10),
            "one request per 10 s refills"
        );
        assert!(
            l.check(&tok(2), false, now).is_ok(),
            "another token has its own bucket"
        );
        assert!(
            l.check(&tok(1), false, now + Duration::from_secs(10))
                .is_ok()
        );
        assert!(
            l.check(&tok(1), false, now + Duration::from_secs(10))
                .is_err()
        );
    }

    #[test]
    fn writes_have_their_own_quota_on_top_and_a_refusal_takes_nothing_else() {
        let l = limiter(10, 2, 1);
        let now = Instant::now();
        assert!(l.check(&tok(1), true, now).is_ok());
        assert!(l.check(&tok(1), true, now).is_ok());
        let third = l.check(&tok(1), true, now).err().unwrap_or_default();
        assert_eq!(
            third.iter().map(|(p, _)| p.name).collect::<Vec<_>>(),
            ["token", "token-writes"]
        );
        let reads = l.check(&tok(1), false, now).map(|s| s[0].1.remaining);
        assert_eq!(
            reads.ok(),
            Some(7),
            "two writes and this read counted; the refused write took nothing"
        );
    }

    #[test]
    fn each_replica_enforces_its_share_and_zero_switches_off() {
        let l = limiter(5, 0, 2);
        let now = Instant::now();
        let passed = (0..10)
            .filter(|_| l.check(&tok(1), false, now).is_ok())
            .count();
        assert_eq!(passed, 3, "⌈5 / 2⌉");
        let off = limiter(0, 0, 1);
        assert!((0..1000).all(|_| {
            off.check(&tok(1), true, now)
                .map(|s| s.is_empty())
                .unwrap_or(false)
        }));
    }

    #[test]
    fn an_organization_has_its_share_of_writes() {
        use domain::ports::budget::WriteBudget;
        let org = uuid::Uuid::from_u128(7);
        let writes = OrganizationWrites::new(4, 2);
        assert_eq!(
            (0..3).map(|_| writes.take(org).is_ok()).collect::<Vec<_>>(),
            [true, true, false]
        );
        assert_eq!(writes.take(org), Err(30), "2 a minute: one every 30 s");
        assert!(
            writes.take(uuid::Uuid::from_u128(8)).is_ok(),
            "each organization its own"
        );
        let off = OrganizationWrites::new(0, 1);
        assert!((0..100).all(|_| off.take(org).is_ok()));
    }

    #[test]
    fn refusals_spend_the_address_and_only_accepted_tokens_pass_it_once_spent() {
        let l = RateLimiter::new(
            Limits {
                per_token: 100,
                writes_per_token: 0,
                unauthenticated_per_address: 2,
                replicas: 1,
            },
            TrustedProxies::default(),
        );
        let now = Instant::now();
        let known = tok(1);
        assert!(l.check(&known, false, now).is_ok());
        l.settle(&known, Authentication::Accepted, now);
        // Two guesses, refused by the platform, spend the address's quota.
        for n in [2, 3] {
            assert!(l.check(&tok(n), false, now).is_ok());
            l.settle(&tok(n), Authentication::Refused, now);
        }
        let third = l.check(&tok(4), false, now).err().unwrap_or_default();
        assert_eq!(
            third.iter().map(|(p, _)| p.name).collect::<Vec<_>>(),
            [ADDRESS]
        );
        let anonymous = Requester {
            token: None,
            address: [0; 16],
        };
        assert!(l.check(&anonymous, false, now).is_err());
        assert!(l.check(&known, false, now).is_ok(), "a known token passes");
        let elsewhere = Requester {
            token: Some([5; 16]),
            address: [9; 16],
        };
        assert!(l.check(&elsewhere, false, now).is_ok());
        // Accepted tokens do not spend the address; the quota refills with time.
        assert!(l.check(&tok(4), false, now + WINDOW).is_ok());
    }

    #[test]
    fn the_headers_say_each_policy_and_what_is_left() {
        let l = limiter(60, 6, 1);
        let s = l.check(&tok(1), true, Instant::now()).unwrap_or_default();
        let (policy, now) =
            headers(&s).unwrap_or((HeaderValue::from_static(""), HeaderValue::from_static("")));
        assert_eq!(policy, "\"token\";q=60;w=60, \"token-writes\";q=6;w=60");
        assert_eq!(now, "\"token\";r=59;t=1, \"token-writes\";r=5;t=10");
    }
}
