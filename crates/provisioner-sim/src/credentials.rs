//! What a new control plane hands out: its own self-signed X.509 CA and an admin bearer token.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::model::kubeconfig::ClusterCredentials;
use domain::model::secret::Secret;
use rand::RngCore;
use rand::rngs::OsRng;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use time::{Duration, OffsetDateTime};

/// Ten years and a day: never less than ten calendar years, whatever the leap days.
const VALIDITY_DAYS: i64 = 3653;

/// A fresh CA (ECDSA P-256, CN `kubernetes-ca <cluster name>`, valid ten years) and a random
/// 32-byte bearer token, base64url. The CA's private key is dropped: nothing in the simulation
/// signs with it, and a kubeconfig needs only the certificate.
pub(crate) fn issue(cluster_name: &str) -> Result<ClusterCredentials, rcgen::Error> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("kubernetes-ca {cluster_name}"));
    dn.push(DnType::OrganizationName, "provisioner-sim");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = OffsetDateTime::now_utc();
    // A few minutes back, so a client whose clock runs slightly behind accepts it at once.
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(VALIDITY_DAYS);
    let mut serial = [0u8; 16];
    OsRng.fill_bytes(&mut serial);
    // Serial numbers are positive integers (RFC 5280 §4.1.2.2).
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));

    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(ClusterCredentials {
        ca_certificate_pem: cert.pem(),
        token: Secret::new(new_token()),
    })
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::process::{Command, Stdio};

    use super::*;

    /// `openssl x509 -noout -text` on the PEM: its exit status and what it printed.
    fn openssl_text(pem: &str) -> String {
        let mut child = Command::new("openssl")
            .args(["x509", "-noout", "-text"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openssl must be on the PATH for this test");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(pem.as_bytes())
            .expect("write PEM");
        let out = child.wait_with_output().expect("openssl ran");
        assert!(
            out.status.success(),
            "openssl x509 refused the PEM: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    #[test]
    fn the_ca_pem_parses_with_openssl_and_is_a_ten_year_ca() {
        let creds = issue("prod-1").unwrap();
        assert!(
            creds
                .ca_certificate_pem
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        let text = openssl_text(&creds.ca_certificate_pem);
        assert!(
            text.contains("CN=kubernetes-ca prod-1") || text.contains("CN = kubernetes-ca prod-1"),
            "{text}"
        );
        assert!(text.contains("CA:TRUE"), "{text}");
        assert!(text.contains("Certificate Sign"), "{text}");
        let year = OffsetDateTime::now_utc().year();
        let after = text
            .lines()
            .find(|l| l.contains("Not After"))
            .expect("a Not After line");
        assert!(
            after.contains(&format!(" {} GMT", year + 10))
                || after.contains(&format!(" {} GMT", year + 11)),
            "{after}"
        );
    }

    #[test]
    fn each_issue_gives_its_own_ca_and_token() {
        let a = issue("a").unwrap();
        let b = issue("a").unwrap();
        assert_ne!(a.ca_certificate_pem, b.ca_certificate_pem);
        assert_ne!(a.token, b.token);
        assert_eq!(
            a.token.expose().len(),
            43,
            "32 bytes, base64url without padding"
        );
        assert!(
            a.token
                .expose()
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }
}
