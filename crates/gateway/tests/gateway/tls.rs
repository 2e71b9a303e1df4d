//! The TLS listener: certificates from the routes file picked by SNI, HTTP/2 by ALPN, the
//! upstream told the client came over https, and certificates replaced on disk taken up by new
//! handshakes while open connections keep theirs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// A test CA, and the certificates it signs.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate signed by the test CA: its files' text and its DER (what a client sees).
struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
}

impl TestCa {
    fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "gateway test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestCa { issuer }
    }

    fn leaf(&self, hosts: &[&str]) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A client that trusts this CA only and sends `host` to `addr` (so SNI names it).
    fn client(&self, host: &str, addr: SocketAddr) -> reqwest::Client {
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(self.issuer.pem().as_bytes()).unwrap(),
            )
            .resolve(host, addr)
            .tls_info(true)
            .build()
            .unwrap()
    }
}

/// Writes a leaf's files (replacing, as a renewal would: beside, then renamed over).
fn install(leaf: &Leaf, cert: &Path, key: &Path) {
    for (path, text) in [(cert, &leaf.cert_pem), (key, &leaf.key_pem)] {
        let next = path.with_extension("next");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, path).unwrap();
    }
}

/// The certificate the server showed on the connection that carried `r`.
fn peer_certificate(r: &reqwest::Response) -> Option<Vec<u8>> {
    r.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
}

struct Files {
    dir: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = std::env::temp_dir().join(format!("gateway-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn get(client: &reqwest::Client, url: &str) -> reqwest::Result<reqwest::Response> {
    client.get(url).bearer_auth(TOKEN).send().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_picked_by_sni_served_over_h2_and_renewed_in_place() {
    let ca = TestCa::new();
    let files = Files::new();
    let (a_cert, a_key) = (files.path("a.crt"), files.path("a.key"));
    let (b_cert, b_key) = (files.path("b.crt"), files.path("b.key"));
    let a = ca.leaf(&["a.test"]);
    let b = ca.leaf(&["b.test"]);
    install(&a, &a_cert, &a_key);
    install(&b, &b_cert, &b_key);
    let certificates = format!(
        "\n[[certificate]]\nhosts = [\"a.test\"]\ncert = {a_cert:?}\nkey = {a_key:?}\n\n\
         [[certificate]]\nhosts = [\"b.test\"]\ncert = {b_cert:?}\nkey = {b_key:?}\n"
    );
    let h = harness_with_text(
        &[route("/api", "machines")],
        &certificates,
        &[
            ("GATEWAY_TLS_BIND_ADDR", "127.0.0.1:0"),
            ("GATEWAY_ADMIN_BIND_ADDR", "127.0.0.1:0"),
        ],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/api").await;
    let tls = h.tls.expect("the TLS listener");
    let url = |host: &str| format!("https://{host}:{}/api/x", tls.port());

    // Each name gets its own certificate, over HTTP/2; the upstream hears https.
    let to_a = ca.client("a.test", tls);
    let r = get(&to_a, &url("a.test")).await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(peer_certificate(&r), Some(a.der.clone()));
    let echo = echo_of(r).await;
    assert_eq!(echo.status, 200);
    assert_eq!(echo.body["headers"]["x-forwarded-proto"], "https");
    let r = get(&ca.client("b.test", tls), &url("b.test"))
        .await
        .unwrap();
    assert_eq!(peer_certificate(&r), Some(b.der.clone()));

    // curl, as people check a TLS endpoint: it verifies against the CA and negotiates h2.
    let ca_file = files.path("ca.pem");
    std::fs::write(&ca_file, ca.issuer.pem()).unwrap();
    match std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--http2", "--cacert"])
        .arg(&ca_file)
        .args(["--resolve", &format!("a.test:{}:127.0.0.1", tls.port())])
        .args(["-H", &format!("authorization: Bearer {TOKEN}")])
        .args(["-o", "/dev/null", "-w", "%{http_version} %{http_code}"])
        .arg(url("a.test"))
        .output()
    {
        Ok(out) => assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "2 200",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("SKIPPED the curl check: {e}"),
    }

    // A name no certificate carries: no handshake, rather than another host's certificate.
    assert!(
        get(&ca.client("c.test", tls), &url("c.test"))
            .await
            .is_err()
    );

    // a.test renewed on disk: new handshakes get the new one; the open connection keeps going.
    let renewed = ca.leaf(&["a.test"]);
    install(&renewed, &a_cert, &a_key);
    let took = eventually(Duration::from_secs(10), || async {
        let r = get(&ca.client("a.test", tls), &url("a.test")).await;
        r.is_ok_and(|r| peer_certificate(&r) == Some(renewed.der.clone()))
    })
    .await;
    assert!(took, "the renewed certificate was never served");
    let r = get(&to_a, &url("a.test")).await.unwrap();
    assert_eq!(r.status(), 200, "the open connection was dropped");
    assert_eq!(peer_certificate(&r), Some(a.der.clone()));

    // A broken key file is refused whole: the last good certificate stays.
    let before = routes_refusals(&h).await.expect("the admin listener");
    std::fs::write(&a_key, "not a key").unwrap();
    let refused = eventually(Duration::from_secs(10), || async {
        routes_refusals(&h).await > Some(before)
    })
    .await;
    assert!(refused, "the broken key was never refused");
    let r = get(&ca.client("a.test", tls), &url("a.test"))
        .await
        .unwrap();
    assert_eq!(peer_certificate(&r), Some(renewed.der.clone()));
}

/// A TLS connection to `addr` naming `sni`, offering `alpn`, trusting the test CA only.
async fn tls_connect(
    ca: &TestCa,
    addr: SocketAddr,
    sni: &str,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca.issuer.pem().as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

/// A connection is for the names its certificate covers. One negotiated for `a.test` (whose
/// certificate covers it alone) that then asks for `b.test` (another route's host, with a
/// certificate of its own) is answered 421 Misdirected Request, over HTTP/1.1 and over HTTP/2
/// (where a browser reuses a connection for every host its certificate covers, and only
/// those): the request is not routed. A certificate that covers both lets either through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_host_the_connections_certificate_does_not_cover_is_421() {
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ca = TestCa::new();
    let files = Files::new();
    let mut certificates = String::new();
    for (name, hosts) in [
        ("a", &["a.test"][..]),
        ("b", &["b.test"]),
        ("cd", &["c.test", "d.test"]),
    ] {
        let (cert, key) = (
            files.path(&format!("{name}.crt")),
            files.path(&format!("{name}.key")),
        );
        install(&ca.leaf(hosts), &cert, &key);
        let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
        certificates.push_str(&format!(
            "\n[[certificate]]\nhosts = [{}]\ncert = {cert:?}\nkey = {key:?}\n",
            hosts.join(", ")
        ));
    }
    let h = harness_with_text(
        &[route("/api", "machines")],
        &certificates,
        &[("GATEWAY_TLS_BIND_ADDR", "127.0.0.1:0")],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/api").await;
    let tls = h.tls.expect("the TLS listener");

    // HTTP/1.1: the connection's name, then another's, then one its certificate covers.
    for (sni, host, status) in [
        ("a.test", "a.test", 200),
        ("a.test", "b.test", 421),
        ("a.test", "B.TEST:8443", 421),
        ("b.test", "a.test", 421),
        ("c.test", "d.test", 200),
    ] {
        let before = h.upstream_hits();
        let mut stream = tls_connect(&ca, tls, sni, b"http/1.1").await;
        let request = format!(
            "GET /api/x HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let r = raw_answer(&String::from_utf8_lossy(&answer));
        assert_eq!(r.status, status, "{sni} then {host}: {r:?}");
        if status == 421 {
            assert_eq!(r.header("content-type"), Some("application/problem+json"));
            assert_eq!(h.upstream_hits(), before, "{sni} then {host} was forwarded");
        }
    }

    // HTTP/2: one connection, requests for several hosts, as a browser coalescing them.
    let stream = tls_connect(&ca, tls, "a.test", b"h2").await;
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    for (host, status) in [("a.test", 200), ("b.test", 421), ("a.test", 200)] {
        let request = hyper::Request::get(format!("https://{host}:{}/api/x", tls.port()))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(
            response.status().as_u16(),
            status,
            "h2 on a.test, then {host}"
        );
        let _ = response.into_body().collect().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_listener_without_a_good_certificate_does_not_start() {
    let ca = TestCa::new();
    let files = Files::new();
    let (cert, key) = (files.path("a.crt"), files.path("a.key"));
    install(&ca.leaf(&["other.test"]), &cert, &key);
    let route = "[[route]]\npath_prefix = \"/\"\nupstream = \"http://127.0.0.1:9\"\n\
                 organization = \"acme\"\nenvironment = \"production\"\nauth_server = \"x\"\n";
    for (certificates, refusal) in [
        (
            format!("[[certificate]]\nhosts = [\"a.test\"]\ncert = {cert:?}\nkey = {key:?}\n"),
            "not valid for a.test",
        ),
        (
            format!("[[certificate]]\nhosts = [\"other.test\"]\ncert = {cert:?}\nkey = {cert:?}\n"),
            "not a PEM private key",
        ),
        (String::new(), "names no [[certificate]]"),
    ] {
        let routes = files.path("routes.toml");
        std::fs::write(&routes, format!("{route}\n{certificates}")).unwrap();
        let settings = gateway::Settings::from_lookup(|name| {
            Some(match name {
                // Never reached: the routes and certificates are read first.
                "DATABASE_URL" => "postgres://127.0.0.1:1/none".into(),
                "SECRETS_KEY" => secrets::Vault::generate_key(),
                "GATEWAY_ROUTES_FILE" => routes.display().to_string(),
                "GATEWAY_TLS_BIND_ADDR" => "127.0.0.1:0".into(),
                _ => return None,
            })
        })
        .unwrap();
        let error = gateway::start(settings)
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains(refusal), "{refusal}: {error}");
        assert!(
            !error.contains("PRIVATE KEY"),
            "the key is never quoted: {error}"
        );
    }
}
