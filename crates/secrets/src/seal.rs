//! Sealing: ChaCha20-Poly1305 with a fresh random 96-bit nonce per seal, written as
//! `v2:<key id>:` + base64(nonce || ciphertext). Values of the first format, `v1:` + base64
//! without a key id, still open: under whichever key of the ring they were sealed with.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use domain::model::secret::{SealedSecret, Secret};
use domain::ports::secrets::VaultError;
use rand::RngCore;
use rand::rngs::OsRng;

use crate::ring::{KeyId, Ring, RingKey};

const V1: &str = "v1:";
const V2: &str = "v2:";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Binds first-format ciphertexts to this use, so bytes sealed by anything else never open here.
const AAD_V1: &[u8] = b"secrets-vault:v1";
/// The same for the second format, which also binds the key id: a value relabelled with
/// another key's id does not open.
const AAD_V2: &[u8] = b"secrets-vault:v2:";

/// Which key sealed a value, as far as its text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedBy {
    /// The first format, which names no key.
    Unnamed,
    Key(KeyId),
}

pub(crate) fn cipher(key: &[u8; 32]) -> ChaCha20Poly1305 {
    ChaCha20Poly1305::new(Key::from_slice(key))
}

pub(crate) fn seal(key: &RingKey, secret: &Secret) -> Result<SealedSecret, VaultError> {
    // Random nonces are safe for far more than 2^32 seals per key at a negligible collision
    // chance; this service seals a handful of values per auth server or cluster.
    let mut nonce = [0u8; NONCE_LEN];
    OsRng.fill_bytes(&mut nonce);
    let id = key.id.to_string();
    let aad = [AAD_V2, id.as_bytes()].concat();
    let ciphertext = key
        .cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: secret.expose().as_bytes(),
                aad: &aad,
            },
        )
        .map_err(|_| VaultError::Internal("sealing failed".into()))?;
    let mut out = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    Ok(SealedSecret(format!("{V2}{id}:{}", STANDARD.encode(out))))
}

/// Which key a sealed value names (`None`: not a sealed value at all).
pub(crate) fn sealed_by(sealed: &SealedSecret) -> Option<SealedBy> {
    if sealed.0.starts_with(V1) {
        return Some(SealedBy::Unnamed);
    }
    let (id, _) = sealed.0.strip_prefix(V2)?.split_once(':')?;
    KeyId::parse(id).map(SealedBy::Key)
}

pub(crate) fn open(ring: &Ring, sealed: &SealedSecret) -> Result<Secret, VaultError> {
    if let Some(encoded) = sealed.0.strip_prefix(V1) {
        let bytes = decode(encoded)?;
        // The first format names no key: the current key first, then the older ones.
        return ring
            .iter()
            .find_map(|k| decrypt(&k.cipher, &bytes, AAD_V1).ok())
            .ok_or(VaultError::Unseal);
    }
    let rest = sealed.0.strip_prefix(V2).ok_or(VaultError::Unseal)?;
    let (id_text, encoded) = rest.split_once(':').ok_or(VaultError::Unseal)?;
    let id = KeyId::parse(id_text).ok_or(VaultError::Unseal)?;
    let key = ring.get(id).ok_or(VaultError::Unseal)?;
    let aad = [AAD_V2, id_text.as_bytes()].concat();
    decrypt(&key.cipher, &decode(encoded)?, &aad)
}

fn decode(encoded: &str) -> Result<Vec<u8>, VaultError> {
    let bytes = STANDARD.decode(encoded).map_err(|_| VaultError::Unseal)?;
    if bytes.len() < NONCE_LEN + TAG_LEN {
        return Err(VaultError::Unseal);
    }
    Ok(bytes)
}

fn decrypt(cipher: &ChaCha20Poly1305, bytes: &[u8], aad: &[u8]) -> Result<Secret, VaultError> {
    let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
    let plain = cipher
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| VaultError::Unseal)?;
    String::from_utf8(plain)
        .map(Secret::new)
        .map_err(|_| VaultError::Unseal)
}

/// A first-format value, as earlier releases sealed: for the tests that prove those still open.
#[cfg(test)]
pub(crate) fn seal_v1(key: &RingKey, secret: &Secret) -> SealedSecret {
    let nonce = [7u8; NONCE_LEN];
    let ciphertext = key
        .cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: secret.expose().as_bytes(),
                aad: AAD_V1,
            },
        )
        .unwrap_or_default();
    SealedSecret(format!(
        "{V1}{}",
        STANDARD.encode([&nonce[..], &ciphertext].concat())
    ))
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
        let id = v.current_key_id().to_string();
        for plain in [
            "",
            "s",
            "oidc-client-secret-\u{3a9}mega",
            &"x".repeat(10_000),
        ] {
            let sealed = v.seal(&Secret::new(plain)).unwrap();
            assert!(sealed.0.starts_with(&format!("v2:{id}:")), "{}", sealed.0);
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
        let (label, encoded) = sealed.0.rsplit_once(':').unwrap();
        let raw = STANDARD.decode(encoded).unwrap();
        // Flip one bit at every position: nonce, ciphertext and tag alike.
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x01;
            let tampered = SealedSecret(format!("{label}:{}", STANDARD.encode(&bad)));
            assert_eq!(v.open(&tampered), Err(VaultError::Unseal), "byte {i}");
        }
        let truncated = SealedSecret(format!(
            "{label}:{}",
            STANDARD.encode(&raw[..raw.len() - 1])
        ));
        assert_eq!(v.open(&truncated), Err(VaultError::Unseal));
        for junk in [
            "",
            "v1:",
            "v1:!!!",
            "v2:",
            "v2:AAAA",
            "v3:AAAA",
            &sealed.0[3..],
        ] {
            assert_eq!(
                v.open(&SealedSecret(junk.into())),
                Err(VaultError::Unseal),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn a_value_relabelled_with_another_keys_id_does_not_open() {
        let old = Vault::generate_key();
        let new = Vault::generate_key();
        let ring = Vault::from_keys(&new, &old).unwrap();
        let under_old = Vault::from_base64_key(&old).unwrap();
        let sealed = under_old.seal(&Secret::new("client-secret")).unwrap();
        assert_eq!(ring.open(&sealed).unwrap().expose(), "client-secret");
        let relabelled = sealed.0.replacen(
            &under_old.current_key_id().to_string(),
            &ring.current_key_id().to_string(),
            1,
        );
        assert_eq!(
            ring.open(&SealedSecret(relabelled)),
            Err(VaultError::Unseal)
        );
    }

    #[test]
    fn another_key_cannot_open() {
        let sealed = vault().seal(&Secret::new("client-secret")).unwrap();
        assert_eq!(vault().open(&sealed), Err(VaultError::Unseal));
    }

    #[test]
    fn first_format_values_open_under_any_key_of_the_ring() {
        let old = Vault::generate_key();
        let under_old = Vault::from_base64_key(&old).unwrap();
        let v1 = seal_v1(
            under_old.ring.current(),
            &Secret::new("from-an-earlier-release"),
        );
        assert_eq!(
            under_old.open(&v1).unwrap().expose(),
            "from-an-earlier-release"
        );
        let rotated = Vault::from_keys(&Vault::generate_key(), &old).unwrap();
        assert_eq!(
            rotated.open(&v1).unwrap().expose(),
            "from-an-earlier-release"
        );
        assert_eq!(vault().open(&v1), Err(VaultError::Unseal));
    }
}
