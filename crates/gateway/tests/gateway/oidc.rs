//! OIDC routes against a real OpenID provider (`oidc-provider` from npm).

use crate::harness::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use chrono::Utc;
use domain::model::auth_server::{AuthServer, AuthServerConfig, ClaimNames, OidcConfig};
use domain::model::secret::Secret;
use domain::ports::secrets::SecretVault;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use uuid::Uuid;

pub(crate) fn provider_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// Installs oidc-provider once (npm); `Err(reason)` when npm cannot. nextest runs each test
/// in a process of its own, so the install is serialised across processes by a file lock, and
/// counts as done only once npm finished (a marker written after it), never because a package
/// file of a half-finished install is already there.
pub(crate) fn ensure_installed() -> Result<(), String> {
    static INSTALL: std::sync::Mutex<Option<Result<(), String>>> = std::sync::Mutex::new(None);
    let mut done = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(result) = done.as_ref() {
        return result.clone();
    }
    let dir = provider_dir();
    let result = install_locked(&dir);
    *done = Some(result.clone());
    result
}

fn install_locked(dir: &std::path::Path) -> Result<(), String> {
    let marker = dir.join("node_modules/.kubesvc-installed");
    let lock = std::fs::File::create(dir.join("node_modules.lock"))
        .map_err(|e| format!("the install lock: {e}"))?;
    lock.lock().map_err(|e| format!("the install lock: {e}"))?;
    if marker.exists() {
        return Ok(());
    }
    let out = std::process::Command::new("npm")
        .args(["install", "--prefix"])
        .arg(dir)
        // From the lockfile: naming the package would rewrite the exact pins.
        .args(["--no-audit", "--no-fund"])
        .output()
        .map_err(|e| format!("npm cannot run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "npm install oidc-provider failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::write(&marker, b"").map_err(|e| format!("the install marker: {e}"))
}

pub(crate) struct Provider {
    child: tokio::process::Child,
    port: u16,
    kid: String,
    key_pem: Vec<u8>,
    _key_file: TempFile,
}

impl Provider {
    pub(crate) fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    /// A client_credentials access token: an RS256 JWT with `aud` the resource and
    /// `client_id` svc.
    pub(crate) async fn access_token(&self) -> String {
        let r: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer()))
            .basic_auth("svc", Some("svc-secret"))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", "read"),
                ("resource", "https://api.test/"),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["access_token"].as_str().expect("access token").to_owned()
    }

    /// A token signed with the provider's own key, with the claims given.
    pub(crate) fn forge(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        let key = EncodingKey::from_rsa_pem(&self.key_pem).expect("provider key");
        jsonwebtoken::encode(&header, claims, &key).expect("sign")
    }
}

/// Starts the OpenID provider (oidc-provider on node) at `port`, or at a free port when `None`.
pub(crate) async fn start_provider(port: Option<u16>, kid: &str, redirect_uris: &str) -> Provider {
    let mut failures = Vec::new();
    // A port found free may be taken before node binds it (another test's outgoing
    // connection gets it as its local port): a fresh one is tried then, unless the caller
    // needs this very port.
    for _ in 0..3 {
        match try_start_provider(port.unwrap_or_else(free_port), kid, redirect_uris).await {
            Ok(provider) => return provider,
            Err(why) => failures.push(why),
        }
    }
    panic!("the OpenID provider did not start: {failures:?}");
}

async fn try_start_provider(port: u16, kid: &str, redirect_uris: &str) -> Result<Provider, String> {
    let key_file = TempFile(std::env::temp_dir().join(format!("oidc-key-{}.pem", Uuid::new_v4())));
    let log = TempFile(std::env::temp_dir().join(format!("oidc-log-{}.txt", Uuid::new_v4())));
    let stderr = std::fs::File::create(&log.0).map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new("node")
        .arg(provider_dir().join("provider.mjs"))
        .current_dir(provider_dir())
        .env("PORT", port.to_string())
        .env("KID", kid)
        .env("KEY_FILE", &key_file.0)
        .env("REDIRECT_URIS", redirect_uris)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("node does not run: {e}"))?;
    let discovery = format!("http://127.0.0.1:{port}/.well-known/openid-configuration");
    let started = std::time::Instant::now();
    // Generous: node's first start on a busy, freshly set-up machine reads every module cold.
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log.0).unwrap_or_default();
            let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            return Err(format!("port {port}: node exited ({status}): {tail}"));
        }
        if reqwest::get(&discovery)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            let key_pem = std::fs::read(&key_file.0).map_err(|e| format!("key file: {e}"))?;
            return Ok(Provider {
                child,
                port,
                kid: kid.into(),
                key_pem,
                _key_file: key_file,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("port {port}: no answer within 60 s"))
}

/// A gateway with these routes and settings, and a provider whose client may redirect to the
/// gateway's /callback. `None` (with the reason printed) when npm cannot install the provider.
pub(crate) async fn provider_with(
    routes: &[RouteSpec],
    settings: &[(&str, &str)],
) -> Option<(Harness, Provider)> {
    if let Err(reason) = ensure_installed() {
        eprintln!("SKIPPED: the OIDC tests need oidc-provider from npm: {reason}");
        return None;
    }
    let h = harness_with(routes, settings).await;
    let redirect = format!("http://{}/callback", h.gateway);
    let provider = start_provider(None, "key-one", &redirect).await;
    Some((h, provider))
}

/// A gateway with /oidc (server sso) and /other (server sso2) of one provider.
pub(crate) async fn setup() -> Option<(Harness, Provider, AuthServer, AuthServer)> {
    let (h, provider) =
        provider_with(&[route("/oidc", "sso"), route("/other", "sso2")], &[]).await?;
    let sso = oidc_server(&h, "sso", &provider);
    let sso2 = oidc_server(&h, "sso2", &provider);
    h.insert_all(&[&sso, &sso2], "/other").await;
    Some((h, provider, sso, sso2))
}

pub(crate) fn oidc_server(h: &Harness, name: &str, provider: &Provider) -> AuthServer {
    h.server(
        name,
        AuthServerConfig::Oidc(OidcConfig {
            issuer_url: provider.issuer(),
            redirect_path: "/callback".into(),
            client_id: "svc".into(),
            client_secret: h.vault().seal(&Secret::new("svc-secret")).expect("seal"),
            authorized_domain: h.gateway.to_string(),
            claims: ClaimNames {
                username_claim: Some("sub".into()),
                email_claim: Some("email".into()),
                role_claim: Some("role".into()),
                group_claim: Some("groups".into()),
            },
        }),
    )
}

pub(crate) async fn call(h: &Harness, token: &str) -> reqwest::Response {
    http()
        .get(h.url("/oidc/data"))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap()
}

pub(crate) fn now() -> i64 {
    Utc::now().timestamp()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_jwts_from_the_provider_are_verified() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    // No token, not a browser: a bare Bearer challenge.
    let r = http().get(h.url("/oidc/data")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(header(&r, "www-authenticate").as_deref(), Some("Bearer"));

    // The provider's own RS256 access token: accepted, claims passed on.
    let token = provider.access_token().await;
    let r = http()
        .get(h.url("/oidc/data"))
        .header("authorization", format!("Bearer {token}"))
        .header("x-auth-role", "admin")
        .send()
        .await
        .unwrap();
    let e = echo_of(r).await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.header("x-auth-user").as_deref(), Some("svc"));
    assert_eq!(e.header("x-auth-role"), None);

    let iss = provider.issuer();
    let good = json!({"iss": iss, "sub": "svc", "aud": "svc", "exp": now() + 600});
    // Control: a token forged with the provider's key and right claims passes, so the
    // refusals below are for the claim each one gets wrong.
    assert_eq!(call(&h, &provider.forge(&good)).await.status(), 200);
    // Expired 30 s ago: within the leeway.
    let mut leeway = good.clone();
    leeway["exp"] = json!(now() - 30);
    assert_eq!(call(&h, &provider.forge(&leeway)).await.status(), 200);

    let mut bad = Vec::new();
    let mut expired = good.clone();
    expired["exp"] = json!(now() - 3600);
    bad.push(("expired", provider.forge(&expired)));
    let mut not_yet = good.clone();
    not_yet["nbf"] = json!(now() + 3600);
    bad.push(("not yet valid", provider.forge(&not_yet)));
    let mut audience = good.clone();
    audience["aud"] = json!("someone-else");
    bad.push(("wrong audience", provider.forge(&audience)));
    let mut issuer = good.clone();
    issuer["iss"] = json!("http://127.0.0.1:1");
    bad.push(("wrong issuer", provider.forge(&issuer)));
    // Tampered: the real token with its payload changed, signature kept.
    let parts: Vec<&str> = token.split('.').collect();
    let mut payload: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[1])
            .unwrap(),
    )
    .unwrap();
    payload["sub"] = json!("root");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string()),
        parts[2]
    );
    bad.push(("tampered", tampered));
    // alg none, unsigned.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": provider.kid})),
        b64(&good)
    );
    bad.push(("alg none", none));
    // HS256 keyed with the provider's public key material.
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some(provider.kid.clone());
    let hs256 =
        jsonwebtoken::encode(&hs, &good, &EncodingKey::from_secret(&provider.key_pem)).unwrap();
    bad.push(("HS256", hs256));
    // Signed by a key the issuer never published.
    bad.push(("garbage", "not.a.jwt".to_owned()));

    for (what, token) in bad {
        let r = call(&h, &token).await;
        assert_eq!(r.status(), 401, "{what}");
        assert_eq!(
            header(&r, "www-authenticate").as_deref(),
            Some("Bearer error=\"invalid_token\""),
            "{what}"
        );
    }
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_signing_key_is_picked_up() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let old = provider.access_token().await;
    assert_eq!(call(&h, &old).await.status(), 200);
    let port = provider.port;
    provider.stop().await;
    let redirect = format!("http://{}/callback", h.gateway);
    let rotated = start_provider(Some(port), "key-two", &redirect).await;
    let new = rotated.access_token().await;
    assert!(new != old);
    // The new kid is unknown: the gateway fetches the JWKS again (at most once a second
    // in this test's settings) and then accepts it.
    let accepted = eventually(Duration::from_secs(10), || async {
        call(&h, &new).await.status() == 200
    })
    .await;
    assert!(accepted, "a token of the rotated key was never accepted");
    // The old key is gone from the JWKS now.
    assert_eq!(call(&h, &old).await.status(), 401);
    rotated.stop().await;
}

/// Follows redirects (GET) until a `Location` satisfies `stop` (returned, not fetched) or
/// a non-redirect answer comes (returned with its URL).
pub(crate) async fn follow(
    client: &reqwest::Client,
    mut response: reqwest::Response,
    stop: impl Fn(&reqwest::Url) -> bool,
) -> Result<reqwest::Url, reqwest::Response> {
    for _ in 0..20 {
        if !response.status().is_redirection() {
            return Err(response);
        }
        let location = header(&response, "location").expect("Location");
        let next = response.url().join(&location).expect("location URL");
        if stop(&next) {
            return Ok(next);
        }
        response = client.get(next).send().await.unwrap();
    }
    panic!("too many redirects");
}

pub(crate) fn query(url: &reqwest::Url, key: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Signs in through the provider's login and consent pages, stopping at the callback.
pub(crate) async fn sign_in(h: &Harness, browser: &reqwest::Client, path: &str) -> reqwest::Url {
    sign_in_from(browser, &h.url(path), h.gateway.port()).await
}

/// Signs in from `start` (a page of some gateway) to the callback on `callback_port`.
pub(crate) async fn sign_in_from(
    browser: &reqwest::Client,
    start: &str,
    callback_port: u16,
) -> reqwest::Url {
    sign_in_as(browser, start, callback_port, "alice").await
}

/// Signs in as `login` from `start` to the callback on `callback_port`. A browser the provider
/// still knows (it signed in there before) is sent back to the callback without its pages.
pub(crate) async fn sign_in_as(
    browser: &reqwest::Client,
    start: &str,
    callback_port: u16,
    login: &str,
) -> reqwest::Url {
    let r = browser
        .get(start)
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    let at_gateway = |u: &reqwest::Url| u.port() == Some(callback_port);
    let login_page = match follow(browser, r, at_gateway).await {
        Ok(callback) => return callback,
        Err(login_page) => login_page,
    };
    assert_eq!(login_page.status(), 200);
    let login_url = login_page.url().clone();
    let r = browser
        .post(login_url)
        .form(&[("prompt", "login"), ("login", login), ("password", "x")])
        .send()
        .await
        .unwrap();
    let consent = match follow(browser, r, at_gateway).await {
        Ok(callback) => return callback,
        Err(consent) => consent,
    };
    let consent_url = consent.url().clone();
    let r = browser
        .post(consent_url)
        .form(&[("prompt", "consent")])
        .send()
        .await
        .unwrap();
    follow(browser, r, at_gateway)
        .await
        .expect("redirect to the callback")
}

/// Signs `browser` in as `login` on `/oidc` (server `sso`); returns a copy of the session
/// cookie it got (`name=value`), as a thief, or a second device, would keep it.
pub(crate) async fn signed_in(h: &Harness, browser: &reqwest::Client, login: &str) -> String {
    let callback = sign_in_as(browser, &h.url("/oidc/page"), h.gateway.port(), login).await;
    let r = browser.get(callback).send().await.unwrap();
    assert_eq!(r.status(), 302, "the callback signs in");
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gateway_session_"))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned()
}

/// A request of `/oidc/api` with this `Cookie` header, as an API client (`Accept: json`) or a
/// browser's navigation (`Accept: text/html`) would send it.
pub(crate) async fn with_session(
    gateway: std::net::SocketAddr,
    cookie: &str,
    accept: &str,
) -> reqwest::Response {
    http()
        .get(format!("http://{gateway}/oidc/api"))
        .header("cookie", cookie)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

pub(crate) fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_code_flow_end_to_end() {
    let Some((h, provider, sso, sso2)) = setup().await else {
        return;
    };
    let b = browser();

    // The redirect to the provider carries the code flow's parameters.
    let r = b
        .get(h.url("/oidc/page?x=1"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    let auth = reqwest::Url::parse(&header(&r, "location").unwrap()).unwrap();
    assert!(auth.as_str().starts_with(&provider.issuer()), "{auth}");
    assert_eq!(query(&auth, "response_type").as_deref(), Some("code"));
    assert_eq!(query(&auth, "client_id").as_deref(), Some("svc"));
    assert_eq!(
        query(&auth, "redirect_uri"),
        Some(format!("http://{}/callback", h.gateway))
    );
    assert!(
        query(&auth, "scope")
            .unwrap()
            .split(' ')
            .any(|s| s == "openid")
    );
    assert_eq!(
        query(&auth, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert!(query(&auth, "state").is_some_and(|s| s.len() >= 32));
    assert!(query(&auth, "nonce").is_some_and(|s| s.len() >= 32));
    assert!(query(&auth, "code_challenge").is_some());

    let callback = sign_in(&h, &b, "/oidc/page?x=1").await;
    assert_eq!(callback.path(), "/callback");
    let code = query(&callback, "code").expect("code");
    let state = query(&callback, "state").expect("state");

    // A wrong state is refused (and does not use up the real one).
    let mut wrong = callback.clone();
    wrong.set_query(Some(&format!("code={code}&state=not-the-state")));
    let r = http().get(wrong).send().await.unwrap();
    assert_eq!(r.status(), 400);

    // The real callback: a session cookie and a redirect back to the page first asked for.
    let r = b.get(callback.clone()).send().await.unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(header(&r, "location").as_deref(), Some("/oidc/page?x=1"));
    let set_cookie = header(&r, "set-cookie").expect("session cookie");
    let cookie_name = format!("gateway_session_{}", sso.id.simple());
    assert!(
        set_cookie.starts_with(&format!("{cookie_name}=")),
        "{set_cookie}"
    );
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Lax"), "{set_cookie}");
    assert!(set_cookie.contains("Path=/"), "{set_cookie}");
    assert!(set_cookie.contains("Max-Age="), "{set_cookie}");
    assert!(
        !set_cookie.contains("Secure"),
        "loopback http: {set_cookie}"
    );
    let cookie_value = set_cookie
        .split(';')
        .next()
        .and_then(|kv| kv.split_once('='))
        .map(|(_, v)| v.to_owned())
        .unwrap();

    // The upstream sees the claims, not the client's own X-Auth-* nor the session cookie.
    let r = b
        .get(h.url("/oidc/page?x=1"))
        .header("accept", "text/html")
        .header("x-auth-user", "mallory")
        .send()
        .await
        .unwrap();
    let e = echo_of(r).await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.body["query"], "x=1");
    assert_eq!(e.header("x-auth-user").as_deref(), Some("alice"));
    assert_eq!(
        e.header("x-auth-email").as_deref(),
        Some("alice@example.com")
    );
    assert_eq!(e.header("x-auth-role").as_deref(), Some("admin"));
    assert_eq!(e.header("x-auth-groups").as_deref(), Some("devs,ops"));
    assert!(
        e.header("cookie")
            .is_none_or(|c| !c.contains("gateway_session_")),
        "{:?}",
        e.header("cookie")
    );

    // The same callback again (replayed state and code): refused.
    let r = http().get(callback.clone()).send().await.unwrap();
    assert_eq!(r.status(), 400);
    // The old code with a fresh login's state: the provider refuses the replayed code.
    let fresh = http()
        .get(h.url("/oidc/else"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    let fresh_auth = reqwest::Url::parse(&header(&fresh, "location").unwrap()).unwrap();
    let fresh_state = query(&fresh_auth, "state").unwrap();
    let fresh_cookie = header(&fresh, "set-cookie").expect("the sign-in's cookie");
    let fresh_cookie = fresh_cookie.split(';').next().unwrap().to_owned();
    assert_ne!(fresh_state, state);
    let mut replay = callback.clone();
    replay.set_query(Some(&format!("code={code}&state={fresh_state}")));
    let r = http()
        .get(replay)
        .header("cookie", &fresh_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "the provider refuses a code used once");

    // The cookie by hand: good on its server, refused tampered or on another server.
    let with_cookie = |path: &str, name: &str, value: &str, accept: &str| {
        http()
            .get(h.url(path))
            .header("cookie", format!("{name}={value}"))
            .header("accept", accept)
            .send()
    };
    let r = with_cookie("/oidc/api", &cookie_name, &cookie_value, "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut tampered = cookie_value.clone().into_bytes();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let r = with_cookie("/oidc/api", &cookie_name, &tampered, "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = with_cookie("/oidc/api", &cookie_name, &tampered, "text/html")
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        302,
        "a browser with a bad cookie signs in again"
    );
    let other_name = format!("gateway_session_{}", sso2.id.simple());
    for name in [&cookie_name, &other_name] {
        let r = with_cookie("/other/api", name, &cookie_value, "application/json")
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            401,
            "sso's session on sso2's route under {name}"
        );
    }
    provider.stop().await;
}

/// The same sign-in once in a real browser: Debian's Chromium driven by playwright-core
/// (tests/oidc/browser.mjs), installed here when missing; skipped, with the reason
/// printed, when it cannot be installed or launched.
mod headless_chromium {
    use super::*;

    const CHROMIUM: &str = "/usr/bin/chromium";

    fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let out = std::process::Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .map_err(|e| format!("{program} cannot run: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            Err(format!(
                "{program} {} failed ({}): {}",
                args.join(" "),
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ))
        }
    }

    /// Chromium from apt (root only; browser downloads by playwright cannot work here)
    /// and playwright-core from the package.json beside the provider.
    fn ensure_browser() -> Result<(), String> {
        if !std::path::Path::new(CHROMIUM).exists() {
            if run("id", &["-u"], &[])?.trim() != "0" {
                return Err(format!("{CHROMIUM} is missing and apt-get needs root"));
            }
            let started = Instant::now();
            let apt = [("DEBIAN_FRONTEND", "noninteractive")];
            run("apt-get", &["update", "-q"], &apt)?;
            run("apt-get", &["install", "-y", "-q", "chromium"], &apt)?;
            eprintln!("installed chromium with apt-get in {:?}", started.elapsed());
        }
        // oidc-provider first: its install is serialised and cached for every test, so
        // no other npm run shares the directory with the one below.
        ensure_installed()?;
        let dir = provider_dir();
        if !dir
            .join("node_modules/playwright-core/package.json")
            .exists()
        {
            let dir = dir.to_str().ok_or("the test directory is not UTF-8")?;
            run(
                "npm",
                &["install", "--prefix", dir, "--no-audit", "--no-fund"],
                &[],
            )?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_browser_code_flow_in_headless_chromium() {
        if let Err(reason) = ensure_browser() {
            eprintln!(
                "SKIPPED: the headless Chromium test needs chromium and playwright-core: {reason}"
            );
            return;
        }
        let Some((h, provider, sso, _)) = setup().await else {
            return;
        };
        let page = h.url("/oidc/page?x=1");
        let run = tokio::process::Command::new("node")
            .arg(provider_dir().join("browser.mjs"))
            .arg(&page)
            .current_dir(provider_dir())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(180), run)
            .await
            .expect("browser.mjs finished within 3 minutes")
            .expect("node runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(2) {
            eprintln!("SKIPPED: headless Chromium cannot be launched here: {stderr}");
            provider.stop().await;
            return;
        }
        assert!(out.status.success(), "browser.mjs: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("browser.mjs output ({e}): {stdout}"));

        // Back on the page first asked for, through the gateway, with the claims upstream.
        assert_eq!(result["url"].as_str(), Some(page.as_str()), "{result}");
        let body: Value = serde_json::from_str(result["body"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("the upstream's answer ({e}): {result}"));
        let e = Echo { status: 200, body };
        assert_eq!(e.body["path"], "/oidc/page", "{:?}", e.body);
        assert_eq!(e.body["query"], "x=1");
        assert!(
            e.header("accept").is_some_and(|a| a.contains("text/html")),
            "Chromium's own Accept: {:?}",
            e.header("accept")
        );
        assert_eq!(e.header("x-auth-user").as_deref(), Some("alice"));
        assert_eq!(
            e.header("x-auth-email").as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(e.header("x-auth-role").as_deref(), Some("admin"));
        assert_eq!(e.header("x-auth-groups").as_deref(), Some("devs,ops"));
        assert!(
            e.header("cookie")
                .is_none_or(|c| !c.contains("gateway_session_")),
            "{:?}",
            e.header("cookie")
        );

        // The session cookie as Chromium stored it, and as the callback set it (playwright
        // reports a cookie without SameSite as Lax, so the header is checked too).
        let name = format!("gateway_session_{}", sso.id.simple());
        let cookie = result["cookies"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name.as_str()))
            .unwrap_or_else(|| panic!("no {name} in {result}"));
        assert_eq!(cookie["httpOnly"], true, "{cookie}");
        assert_eq!(cookie["sameSite"], "Lax", "{cookie}");
        assert_eq!(cookie["secure"], false, "loopback http: {cookie}");
        assert_eq!(cookie["path"], "/", "{cookie}");
        let set_cookie = result["set_cookie"]
            .as_array()
            .and_then(|hs| {
                hs.iter()
                    .filter_map(Value::as_str)
                    .find(|h| h.starts_with(&format!("{name}=")))
            })
            .unwrap_or_else(|| panic!("no Set-Cookie for {name} in {result}"));
        assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
        assert!(set_cookie.contains("SameSite=Lax"), "{set_cookie}");
        provider.stop().await;
    }
}
