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
//!   under `SECRETS_KEY`, as `v2:<key id>:` + base64(nonce || ciphertext).
//!
//! `SECRETS_KEY` rotates: the keys of `SECRETS_KEY_PREVIOUS` still open (and still verify the
//! gateway's cookies), `SECRETS_KEY` seals, and a re-seal moves every value to it
//! ([`Vault::reseal`]). Token digests cannot be recomputed without the tokens, so their key is
//! not derived from whichever key is current: it is a data key, kept in the database sealed
//! under the ring like any other secret ([`Vault::with_digest_key`]). docs/operations.md has
//! the procedure.
//!
//! ChaCha20-Poly1305 rather than AES-256-GCM: both are sound AEADs for this, but
//! ChaCha20-Poly1305 is constant time in plain software on any CPU (AES-GCM is only fast and
//! timing-safe with AES and carry-less multiply instructions), and the RustCrypto crate is pure
//! Rust, so no C toolchain is needed.

mod gate;
mod key;
mod password;
mod ring;
mod seal;
mod token;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use domain::model::secret::{PasswordHash, SealedSecret, Secret, TokenDigest};
use domain::ports::secrets::{SecretVault, VaultError};
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use gate::{Argon2Gate, Busy, Queue};
pub use key::{KEY_SETTING, KeyError};
pub use password::{dummy_verify, hash_password_blocking, verify_password, verify_password_async};
pub use ring::{KeyId, PREVIOUS_SETTING};
pub use seal::SealedBy;
pub use token::legacy_digest;

/// The service's [`SecretVault`]: the key ring of `SECRETS_KEY` (and `SECRETS_KEY_PREVIOUS`) and
/// the token digest key.
///
/// Cloning is cheap (the ring is shared) and shares nothing mutable.
#[derive(Clone)]
pub struct Vault {
    ring: Arc<ring::Ring>,
    token_key: [u8; 32],
}

/// The purpose the token digest key was derived for, before it became a data key: deployments
/// that digested tokens under it keep it.
const TOKEN_DIGEST_PURPOSE: &str = "static token digest v1";

impl Vault {
    /// The vault of one key, the `SECRETS_KEY` setting: base64 (standard or URL-safe, padded or
    /// not) of exactly 32 bytes. The error names the setting and never repeats its value.
    pub fn from_base64_key(encoded: &str) -> Result<Vault, KeyError> {
        Vault::from_keys(encoded, "")
    }

    /// The vault of `current` (which seals) and the keys of `previous` (which still open), as
    /// `SECRETS_KEY` and `SECRETS_KEY_PREVIOUS` give them: commas or white space between keys.
    ///
    /// Its token digest key is derived from `current` until [`Vault::with_digest_key`] gives
    /// it the one the database keeps.
    pub fn from_keys(current: &str, previous: &str) -> Result<Vault, KeyError> {
        let ring = ring::Ring::parse(current, previous)?;
        let token_key = derive(&ring.current().master, TOKEN_DIGEST_PURPOSE);
        Ok(Vault {
            ring: Arc::new(ring),
            token_key,
        })
    }

    /// Whether `SECRETS_KEY_PREVIOUS` listed any key.
    pub fn has_previous_keys(&self) -> bool {
        self.ring.iter().count() > 1
    }

    /// The id of the key that seals (`SECRETS_KEY`).
    pub fn current_key_id(&self) -> KeyId {
        self.ring.current().id
    }

    /// The ids of every key of the ring, the sealing one first.
    pub fn key_ids(&self) -> Vec<KeyId> {
        self.ring.iter().map(|k| k.id).collect()
    }

    /// A 32-byte key for one `purpose`, derived from the sealing key (HMAC-SHA256 of the
    /// purpose under the key, as HKDF's expand step does for one block). Distinct purposes give
    /// independent keys, so a value made for one use never verifies or opens in another.
    pub fn derive_key(&self, purpose: &str) -> [u8; 32] {
        derive(&self.ring.current().master, purpose)
    }

    /// The keys for `purpose` derived from every key of the ring, the sealing one's first:
    /// what was made under an earlier key still verifies until that key leaves the ring.
    pub fn derive_keys(&self, purpose: &str) -> Vec<[u8; 32]> {
        self.ring
            .iter()
            .map(|k| derive(&k.master, purpose))
            .collect()
    }

    /// Which key `sealed` names (`None`: it is not a sealed value).
    pub fn sealed_by(&self, sealed: &SealedSecret) -> Option<SealedBy> {
        seal::sealed_by(sealed)
    }

    /// `sealed` sealed again under the current key, or `None` when it already is.
    pub fn reseal(&self, sealed: &SealedSecret) -> Result<Option<SealedSecret>, VaultError> {
        if seal::sealed_by(sealed) == Some(SealedBy::Key(self.current_key_id())) {
            return Ok(None);
        }
        let plain = seal::open(&self.ring, sealed)?;
        seal::seal(self.ring.current(), &plain).map(Some)
    }

    /// This vault's token digest key, sealed: what the database keeps the first time a
    /// process starts on it, so the key outlives the `SECRETS_KEY` it was derived from.
    pub fn sealed_digest_key(&self) -> Result<SealedSecret, VaultError> {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(self.token_key);
        seal::seal(self.ring.current(), &Secret::new(encoded))
    }

    /// This vault with the token digest key the database keeps (as
    /// [`Vault::sealed_digest_key`] made it, possibly under an earlier key of the ring).
    pub fn with_digest_key(mut self, sealed: &SealedSecret) -> Result<Vault, VaultError> {
        let opened = seal::open(&self.ring, sealed)?;
        self.token_key = key::decode(opened.expose()).map_err(|_| {
            VaultError::Internal("the stored token digest key is not 32 bytes".into())
        })?;
        Ok(self)
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
        f.debug_struct("Vault")
            .field("keys", &self.key_ids())
            .field("key", &"<redacted>")
            .finish()
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
        seal::seal(self.ring.current(), secret)
    }

    fn open(&self, sealed: &SealedSecret) -> Result<Secret, VaultError> {
        seal::open(&self.ring, sealed)
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

    #[test]
    fn a_rotated_vault_opens_old_values_and_reseals_them_under_the_new_key() {
        let old_key = Vault::generate_key();
        let old = Vault::from_base64_key(&old_key).unwrap();
        let sealed = old.seal(&Secret::new("client-secret")).unwrap();
        let new_key = Vault::generate_key();
        let rotated = Vault::from_keys(&new_key, &old_key).unwrap();
        assert!(rotated.has_previous_keys());
        assert_eq!(rotated.key_ids()[1], old.current_key_id());
        assert_eq!(rotated.open(&sealed).unwrap().expose(), "client-secret");
        let moved = rotated.reseal(&sealed).unwrap().unwrap();
        assert_eq!(
            rotated.sealed_by(&moved),
            Some(SealedBy::Key(rotated.current_key_id()))
        );
        assert_eq!(rotated.reseal(&moved).unwrap(), None, "already current");
        // Once the old key leaves the ring, the moved value still opens and the old one not.
        let new_only = Vault::from_keys(&new_key, "").unwrap();
        assert_eq!(new_only.open(&moved).unwrap().expose(), "client-secret");
        assert_eq!(new_only.open(&sealed), Err(VaultError::Unseal));
    }

    #[test]
    fn the_digest_key_outlives_the_key_it_was_derived_from() {
        let old_key = Vault::generate_key();
        let new_key = Vault::generate_key();
        let old = Vault::from_base64_key(&old_key).unwrap();
        let digest = old.digest_token(&Secret::new("static-token-0123456789"));
        let stored = old.sealed_digest_key().unwrap();

        // Rotated: the stored key opens under the ring, and is re-sealed under the new key.
        let rotated = Vault::from_keys(&new_key, &old_key)
            .unwrap()
            .with_digest_key(&stored)
            .unwrap();
        assert!(rotated.token_matches(&digest, "static-token-0123456789"));
        let stored = rotated.reseal(&stored).unwrap().unwrap();

        // The old key removed: tokens digested before the rotation still verify.
        let after = Vault::from_base64_key(&new_key)
            .unwrap()
            .with_digest_key(&stored)
            .unwrap();
        assert!(after.token_matches(&digest, "static-token-0123456789"));
        assert!(!after.token_matches(&digest, "static-token-0123456780"));
        assert_eq!(
            after.digest_token(&Secret::new("static-token-0123456789")),
            digest
        );
        // Without the stored key, a vault of the new key alone digests differently.
        assert!(
            !Vault::from_base64_key(&new_key)
                .unwrap()
                .token_matches(&digest, "static-token-0123456789")
        );
    }

    #[test]
    fn derived_keys_of_the_ring_put_the_sealing_key_first() {
        let old_key = Vault::generate_key();
        let old = Vault::from_base64_key(&old_key).unwrap();
        let rotated = Vault::from_keys(&Vault::generate_key(), &old_key).unwrap();
        let keys = rotated.derive_keys("cookie");
        assert_eq!(
            keys,
            vec![rotated.derive_key("cookie"), old.derive_key("cookie")]
        );
    }
}
