//! Static tokens: stored as SHA-256 digests and compared in constant time.

use domain::model::secret::TokenDigest;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The SHA-256 of `token`, lowercase hex: what is stored for a static token.
pub fn digest(token: &str) -> TokenDigest {
    let hash = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in hash {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    TokenDigest(hex)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `candidate` is the token `stored` is the digest of. The digests are compared in
/// constant time, so the time taken says nothing about how much of one matched.
pub fn token_matches(stored: &TokenDigest, candidate: &str) -> bool {
    let computed = digest(candidate);
    // Lengths are public (64 for every digest); only the contents are compared in constant time.
    stored.0.len() == computed.0.len()
        && bool::from(stored.0.as_bytes().ct_eq(computed.0.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_stable_lowercase_sha256_hex() {
        assert_eq!(
            digest("abc").0,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest("token-1234567890"), digest("token-1234567890"));
        assert_ne!(digest("token-1234567890"), digest("token-1234567891"));
    }

    #[test]
    fn token_matches_only_the_right_token() {
        let stored = digest("static-token-0123456789");
        assert!(token_matches(&stored, "static-token-0123456789"));
        assert!(!token_matches(&stored, "static-token-012345678"));
        assert!(!token_matches(&stored, ""));
        assert!(!token_matches(
            &TokenDigest("short".into()),
            "static-token-0123456789"
        ));
        // A digest stored in upper case is not what this module writes: refused, not guessed.
        assert!(!token_matches(
            &TokenDigest(stored.0.to_uppercase()),
            "static-token-0123456789"
        ));
    }
}
