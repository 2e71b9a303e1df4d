//! The secrets adapter: how the service protects credentials at rest.
//!
//! - Passwords: Argon2id (OWASP parameters: 19 MiB, 2 passes, 1 lane) as PHC strings, hashed on
//!   tokio's blocking pool because it is slow by design, at most one run per core at a time
//!   ([`Argon2Gate`]).
//! - Static tokens: HMAC-SHA256 under a key derived from `SECRETS_KEY`. A fast digest lets the
//!   gateway check one per request; the key means a stolen database is not enough to test
//!   guesses of a short token offline.
//! - Keys for other uses (the gateway's cookies) are derived from `SECRETS_KEY` by purpose
//!   ([`Vault::derive_key`]), so no two uses ever share a key.
//! - What must be read back (the OIDC client secret, a cluster's bearer token): ChaCha20-Poly1305
//!   under `SECRETS_KEY`, as `v1:` + base64(nonce || ciphertext).
//!
//! ChaCha20-Poly1305 rather than AES-256-GCM: both are sound AEADs for this, but
//! ChaCha20-Poly1305 is constant time in plain software on any CPU (AES-GCM is only fast and
//! timing-safe with AES and carry-less multiply instructions), and the RustCrypto crate is pure
//! Rust, so no C toolchain is needed.

mod gate;
mod key;
mod password;
mod seal;
mod token;

use std::fmt;

use async_trait::async_trait;
use chacha20poly1305::ChaCha20Poly1305;
use domain::model::secret::{PasswordHash, SealedSecret, Secret, TokenDigest};
use domain::ports::secrets::{SecretVault, VaultError};
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use gate::{Argon2Gate, Busy, Queue};
pub use key::{KEY_SETTING, KeyError};
pub use password::{dummy_verify, hash_password_blocking, verify_password, verify_password_async};
pub use token::legacy_digest;

/// The service's [`SecretVault`]: holds the AEAD key derived from `SECRETS_KEY`.
///
/// Cloning is cheap enough (the key schedule is a 32-byte key) and shares nothing mutable.
#[derive(Clone)]
pub struct Vault {
    cipher: ChaCha20Poly1305,
    master: [u8; 32],
    token_key: [u8; 32],
}

impl Vault {
    /// Builds the vault from the `SECRETS_KEY` setting: base64 (standard or URL-safe, padded or
    /// not) of exactly 32 bytes. The error names the setting and never repeats its value.
    pub fn from_base64_key(encoded: &str) -> Result<Vault, KeyError> {
        let key = key::decode(encoded)?;
        Ok(Vault {
            cipher: seal::cipher(&key),
            master: key,
            token_key: derive(&key, "static token digest v1"),
        })
    }

    /// A 32-byte key for one `purpose`, derived from `SECRETS_KEY` (HMAC-SHA256 of the purpose
    /// under the key, as HKDF's expand step does for one block). Distinct purposes give
    /// independent keys, so a value made for one use never verifies or opens in another.
    pub fn derive_key(&self, purpose: &str) -> [u8; 32] {
        derive(&self.master, purpose)
    }

    /// Whether `candidate` is the static token `stored` is the digest of (constant time).
    pub fn token_matches(&self, stored: &TokenDigest, candidate: &str) -> bool {
        token::matches(&self.token_key, stored, candidate)
    }

    /// A new random key, base64 of 32 bytes from the OS generator: for development mode, which
    /// generates one and says so (never for production, where a restart would orphan every
    /// sealed secret).
    pub fn generate_key() -> String {
        key::generate()
    }
}

fn derive(master: &[u8; 32], purpose: &str) -> [u8; 32] {
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(master) {
        Ok(mac) => mac,
        // HMAC takes keys of any length.
        Err(_) => return [0u8; 32],
    };
    mac.update(b"kubesvc key derivation\0");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vault").field("key", &"<redacted>").finish()
    }
}

#[async_trait]
impl SecretVault for Vault {
    async fn hash_password(&self, password: &Secret) -> Result<PasswordHash, VaultError> {
        let password = password.clone();
        // An administrator's request waits its turn rather than failing.
        Argon2Gate::global()
            .run(Queue::Wait, move || hash_password_blocking(&password))
            .await
            .ok()
            .flatten()
            .ok_or_else(|| {
                VaultError::Internal("the password hashing task did not finish".into())
            })?
    }

    fn digest_token(&self, token: &Secret) -> TokenDigest {
        token::keyed_digest(&self.token_key, token.expose())
    }

    fn seal(&self, secret: &Secret) -> Result<SealedSecret, VaultError> {
        seal::seal(&self.cipher, secret)
    }

    fn open(&self, sealed: &SealedSecret) -> Result<Secret, VaultError> {
        seal::open(&self.cipher, sealed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn vault() -> Vault {
        Vault::from_base64_key(&Vault::generate_key()).unwrap()
    }

    #[test]
    fn debug_of_the_vault_never_shows_the_key() {
        let encoded = Vault::generate_key();
        let v = Vault::from_base64_key(&encoded).unwrap();
        let shown = format!("{v:?} {v:#?}");
        assert!(shown.contains("redacted"));
        assert!(!shown.contains(&encoded));
    }

    #[test]
    fn generated_keys_are_32_bytes_and_differ() {
        use base64::Engine;
        let a = Vault::generate_key();
        let b = Vault::generate_key();
        assert_ne!(a, b);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&a)
            .unwrap();
        assert_eq!(bytes.len(), 32);
    }

    #[tokio::test]
    async fn hash_password_through_the_port_gives_a_verifiable_argon2id_phc_string() {
        let v = vault();
        let hash = v
            .hash_password(&Secret::new("correct horse battery"))
            .await
            .unwrap();
        assert!(
            hash.0.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{}",
            hash.0
        );
        assert!(verify_password(&hash, "correct horse battery"));
        assert!(!verify_password(&hash, "correct horse battery "));
    }

    #[test]
    fn port_seal_and_open_roundtrip() {
        let v = vault();
        let sealed = v.seal(&Secret::new("client-secret-1")).unwrap();
        assert_eq!(v.open(&sealed).unwrap().expose(), "client-secret-1");
    }

    #[test]
    fn token_digests_through_the_port_are_keyed_and_verify() {
        let v = vault();
        let d = v.digest_token(&Secret::new("static-token-0123456789"));
        assert!(d.0.starts_with("k1:"), "{}", d.0);
        assert!(v.token_matches(&d, "static-token-0123456789"));
        assert!(!vault().token_matches(&d, "static-token-0123456789"));
        assert!(v.token_matches(
            &legacy_digest("old-token-0123456789"),
            "old-token-0123456789"
        ));
    }

    #[test]
    fn derived_keys_differ_by_purpose_and_by_master_key() {
        let v = vault();
        assert_ne!(v.derive_key("a"), v.derive_key("b"));
        assert_eq!(v.derive_key("a"), v.derive_key("a"));
        assert_ne!(v.derive_key("a"), vault().derive_key("a"));
    }
}
