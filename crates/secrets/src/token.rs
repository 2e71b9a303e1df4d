//! Static tokens: stored as an HMAC-SHA256 under a key derived from `SECRETS_KEY` (`k1:` + hex),
//! compared in constant time. Keyed, so a copy of the database alone does not let anyone test
//! guesses offline: a static token may be as short as 16 characters, too little entropy to
//! rest on an unkeyed digest. Digests written before the key was used (plain SHA-256 hex, no
//! prefix) still verify.

use domain::model::secret::TokenDigest;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const KEYED_PREFIX: &str = "k1:";

/// A 32-byte digest in lowercase hex, on the stack (every request with a token compares one).
fn hex(bytes: &[u8; 32]) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, byte) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(byte >> 4)];
        out[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
    }
    out
}

/// The HMAC-SHA256 of `token` under `key`, hex.
fn keyed_hex(key: &[u8; 32], token: &str) -> Option<[u8; 64]> {
    // HMAC takes keys of any length: the error is unreachable, and then nothing matches.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).ok()?;
    mac.update(token.as_bytes());
    Some(hex(&mac.finalize().into_bytes().into()))
}

/// `k1:` and the HMAC-SHA256 of `token` under `key`, lowercase hex.
pub(crate) fn keyed_digest(key: &[u8; 32], token: &str) -> TokenDigest {
    match keyed_hex(key, token) {
        Some(h) => TokenDigest(format!("{KEYED_PREFIX}{}", String::from_utf8_lossy(&h))),
        None => TokenDigest(String::new()),
    }
}

/// The unkeyed SHA-256 hex digest of earlier versions: verified, never written any more.
pub fn legacy_digest(token: &str) -> TokenDigest {
    TokenDigest(String::from_utf8_lossy(&legacy_hex(token)).into_owned())
}

fn legacy_hex(token: &str) -> [u8; 64] {
    hex(&Sha256::digest(token.as_bytes()).into())
}

/// Whether `candidate` is the token `stored` was made from. The digests are compared in
/// constant time, so the time taken says nothing about how much of one matched.
pub(crate) fn matches(key: &[u8; 32], stored: &TokenDigest, candidate: &str) -> bool {
    let (stored, computed) = match stored.0.strip_prefix(KEYED_PREFIX) {
        Some(keyed) => match keyed_hex(key, candidate) {
            Some(computed) => (keyed, computed),
            None => return false,
        },
        None => (stored.0.as_str(), legacy_hex(candidate)),
    };
    // Lengths are public (fixed per format); only the contents are compared in constant time.
    stored.len() == computed.len() && bool::from(stored.as_bytes().ct_eq(&computed[..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7u8; 32];

    #[test]
    fn the_keyed_digest_depends_on_the_key_and_the_token() {
        let a = keyed_digest(&KEY, "token-1234567890");
        assert!(a.0.starts_with("k1:") && a.0.len() == 3 + 64, "{}", a.0);
        assert_eq!(a, keyed_digest(&KEY, "token-1234567890"));
        assert_ne!(a, keyed_digest(&KEY, "token-1234567891"));
        assert_ne!(a, keyed_digest(&[8u8; 32], "token-1234567890"));
        assert!(!a.0.contains("token"));
    }

    #[test]
    fn only_the_right_token_matches_in_either_format() {
        let keyed = keyed_digest(&KEY, "static-token-0123456789");
        let legacy = legacy_digest("static-token-0123456789");
        assert_eq!(legacy.0.len(), 64);
        for stored in [&keyed, &legacy] {
            assert!(matches(&KEY, stored, "static-token-0123456789"));
            assert!(!matches(&KEY, stored, "static-token-012345678"));
            assert!(!matches(&KEY, stored, ""));
        }
        // Another key: the keyed digest no longer matches (the legacy one never had a key).
        assert!(!matches(&[9u8; 32], &keyed, "static-token-0123456789"));
        assert!(!matches(
            &KEY,
            &TokenDigest("short".into()),
            "static-token-0123456789"
        ));
        // Upper case is not what this module writes: refused, not guessed.
        assert!(!matches(
            &KEY,
            &TokenDigest(keyed.0.to_uppercase()),
            "static-token-0123456789"
        ));
    }

    #[test]
    fn the_legacy_digest_is_plain_sha256_hex() {
        assert_eq!(
            legacy_digest("abc").0,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
