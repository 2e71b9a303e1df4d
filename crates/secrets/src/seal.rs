//! Sealing: ChaCha20-Poly1305 with a fresh random 96-bit nonce per seal, `v1:` + base64.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use domain::model::secret::{SealedSecret, Secret};
use domain::ports::secrets::VaultError;
use rand::RngCore;
use rand::rngs::OsRng;

/// The format tag: a later key or algorithm gets `v2:` and old values still open.
const PREFIX: &str = "v1:";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Binds ciphertexts to this use and format, so bytes sealed by anything else never open here.
const AAD: &[u8] = b"secrets-vault:v1";

pub(crate) fn cipher(key: &[u8; 32]) -> ChaCha20Poly1305 {
    ChaCha20Poly1305::new(Key::from_slice(key))
}

pub(crate) fn seal(cipher: &ChaCha20Poly1305, secret: &Secret) -> Result<SealedSecret, VaultError> {
    // Random nonces are safe for far more than 2^32 seals per key at a negligible collision
    // chance; this service seals a handful of values per auth server or cluster.
    let mut nonce = [0u8; NONCE_LEN];
    OsRng.fill_bytes(&mut nonce);
    let ciphertext = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: secret.expose().as_bytes(),
                aad: AAD,
            },
        )
        .map_err(|_| VaultError::Internal("sealing failed".into()))?;
    let mut out = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    Ok(SealedSecret(format!("{PREFIX}{}", STANDARD.encode(out))))
}

pub(crate) fn open(cipher: &ChaCha20Poly1305, sealed: &SealedSecret) -> Result<Secret, VaultError> {
    let encoded = sealed.0.strip_prefix(PREFIX).ok_or(VaultError::Unseal)?;
    let bytes = STANDARD.decode(encoded).map_err(|_| VaultError::Unseal)?;
    if bytes.len() < NONCE_LEN + TAG_LEN {
        return Err(VaultError::Unseal);
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
    let plain = cipher
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad: AAD,
            },
        )
        .map_err(|_| VaultError::Unseal)?;
    String::from_utf8(plain)
        .map(Secret::new)
        .map_err(|_| VaultError::Unseal)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::Vault;
    use domain::ports::secrets::SecretVault;

    fn vault() -> Vault {
        Vault::from_base64_key(&Vault::generate_key()).unwrap()
    }

    #[test]
    fn seal_then_open_gives_the_secret_back() {
        let v = vault();
        for plain in ["", "s", "oidc-client-secret-Ωmega", &"x".repeat(10_000)] {
            let sealed = v.seal(&Secret::new(plain)).unwrap();
            assert!(sealed.0.starts_with("v1:"));
            assert!(plain.len() < 3 || !sealed.0.contains(plain));
            assert_eq!(v.open(&sealed).unwrap().expose(), plain);
        }
    }

    #[test]
    fn two_seals_of_one_secret_differ() {
        let v = vault();
        let a = v.seal(&Secret::new("same")).unwrap();
        let b = v.seal(&Secret::new("same")).unwrap();
        assert_ne!(a, b);
        assert_eq!(v.open(&a).unwrap(), v.open(&b).unwrap());
    }

    #[test]
    fn any_tampering_is_detected() {
        let v = vault();
        let sealed = v.seal(&Secret::new("client-secret")).unwrap();
        let raw = STANDARD
            .decode(sealed.0.strip_prefix(PREFIX).unwrap())
            .unwrap();
        // Flip one bit at every position: nonce, ciphertext and tag alike.
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x01;
            let tampered = SealedSecret(format!("{PREFIX}{}", STANDARD.encode(&bad)));
            assert_eq!(v.open(&tampered), Err(VaultError::Unseal), "byte {i}");
        }
        let truncated = SealedSecret(format!(
            "{PREFIX}{}",
            STANDARD.encode(&raw[..raw.len() - 1])
        ));
        assert_eq!(v.open(&truncated), Err(VaultError::Unseal));
        for junk in ["", "v1:", "v1:!!!", "v2:AAAA", &sealed.0[3..]] {
            assert_eq!(
                v.open(&SealedSecret(junk.into())),
                Err(VaultError::Unseal),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn another_key_cannot_open() {
        let sealed = vault().seal(&Secret::new("client-secret")).unwrap();
        assert_eq!(vault().open(&sealed), Err(VaultError::Unseal));
    }
}
