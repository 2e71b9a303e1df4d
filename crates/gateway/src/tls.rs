//! TLS termination: the certificates named in the routes file (`[[certificate]]`: the hosts a
//! pair answers for, its PEM chain and key), picked per handshake by the client's SNI. A reload
//! of the routes file reads the files again and swaps them whole; a handshake uses the set in
//! force when it starts, and connections already open keep theirs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, DnsName, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::current::Current;

/// One `[[certificate]]` of the routes file, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSpec {
    /// The names a client's SNI must carry to get this pair (lower case).
    pub hosts: Vec<String>,
    /// Also for a client that names no host, or one no certificate names.
    pub default: bool,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate {index}: cannot read {path}: {reason}")]
    Read {
        index: usize,
        path: String,
        reason: String,
    },
    #[error("certificate {index}: {reason}")]
    Invalid { index: usize, reason: String },
    #[error("two certificates name the host {0}")]
    Duplicate(String),
    #[error("two certificates are marked default")]
    TwoDefaults,
}

/// The certificates in force, by host.
#[derive(Debug, Default)]
pub struct Certificates {
    by_host: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl Certificates {
    /// Reads and checks every pair: the key matches its certificate, the certificate is valid
    /// for each host it is given, no host twice, at most one default.
    pub fn load(specs: &[CertificateSpec]) -> Result<Certificates, TlsError> {
        let provider = provider();
        let mut out = Certificates::default();
        for (index, spec) in specs.iter().enumerate() {
            let invalid = |reason: String| TlsError::Invalid { index, reason };
            let read = |path: &Path| {
                std::fs::read(path).map_err(|e| TlsError::Read {
                    index,
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            };
            let chain = CertificateDer::pem_slice_iter(&read(&spec.cert)?)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("cert: not a PEM certificate chain: {e}")))?;
            if chain.is_empty() {
                return Err(invalid("cert: the file holds no certificate".into()));
            }
            // The key's text is never quoted in an error.
            let key = PrivateKeyDer::from_pem_slice(&read(&spec.key)?)
                .map_err(|_| invalid("key: not a PEM private key".into()))?;
            let signing = provider
                .key_provider
                .load_private_key(key)
                .map_err(|_| invalid("key: not a key this gateway can sign with".into()))?;
            let certified = CertifiedKey::new(chain, signing);
            certified
                .keys_match()
                .map_err(|_| invalid("the key does not belong to the certificate".into()))?;
            let certified = Arc::new(certified);
            let end_entity = webpki::EndEntityCert::try_from(&certified.cert[0])
                .map_err(|e| invalid(format!("cert: {e:?}")))?;
            for host in &spec.hosts {
                let name = DnsName::try_from(host.as_str())
                    .map_err(|_| invalid(format!("hosts: {host} is not a DNS name")))?;
                end_entity
                    .verify_is_valid_for_subject_name(&ServerName::DnsName(name.to_owned()))
                    .map_err(|_| invalid(format!("the certificate is not valid for {host}")))?;
                if out
                    .by_host
                    .insert(host.clone(), certified.clone())
                    .is_some()
                {
                    return Err(TlsError::Duplicate(host.clone()));
                }
            }
            if spec.default {
                if out.default.is_some() {
                    return Err(TlsError::TwoDefaults);
                }
                out.default = Some(certified);
            }
        }
        Ok(out)
    }

    /// The pair for a handshake naming `sni`.
    fn pick(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        sni.and_then(|name| self.by_host.get(&name.to_ascii_lowercase()))
            .or(self.default.as_ref())
            .cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty() && self.default.is_none()
    }
}

/// What a TLS connection was negotiated for: the name the client gave (SNI), and the
/// certificate it was shown for it.
#[derive(Debug)]
pub struct Negotiated {
    sni: Option<String>,
    certificate: Option<Arc<CertifiedKey>>,
}

impl Negotiated {
    /// The connection whose handshake named `sni`, with the certificate in force for it.
    pub fn new(sni: Option<&str>, certificates: &Current<Certificates>) -> Negotiated {
        Negotiated {
            sni: sni.map(|name| name.trim_end_matches('.').to_ascii_lowercase()),
            certificate: certificates.get().pick(sni),
        }
    }

    /// Whether a request for `host` (lower case, no port, as routes compare hosts) belongs on
    /// this connection: the name it was negotiated for, or one its certificate covers. A
    /// client reuses a connection for any host its certificate covers (HTTP/2 coalescing), and
    /// for no other: a request for another is misdirected (RFC 9110 §15.5.20).
    pub fn covers(&self, host: &str) -> bool {
        if self.sni.as_deref() == Some(host) {
            return true;
        }
        let Some(leaf) = self.certificate.as_ref().and_then(|c| c.cert.first()) else {
            return false;
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match (
            webpki::EndEntityCert::try_from(leaf),
            ServerName::try_from(bare),
        ) {
            (Ok(end_entity), Ok(name)) => {
                end_entity.verify_is_valid_for_subject_name(&name).is_ok()
            }
            _ => false,
        }
    }
}

/// rustls asks it for each handshake's certificate.
#[derive(Debug)]
pub struct Resolver(pub Current<Certificates>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No pair for the name: the handshake fails rather than show another host's
        // certificate.
        self.0.get().pick(hello.server_name())
    }
}

/// ring, the provider the rest of the workspace's rustls uses, whatever the process default.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server side of TLS: TLS 1.2 and 1.3, HTTP/2 offered first by ALPN, certificates from
/// `certificates`.
pub fn server_config(certificates: Current<Certificates>) -> Result<rustls::ServerConfig, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver(certificates)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
