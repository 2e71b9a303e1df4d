//! Secret values and their protected forms. A `Secret` never prints and never serializes, so a
//! secret cannot leak through a log line, a debug dump or a response by accident.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A plaintext secret from a request (password, static token, client secret).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The plaintext, for the one place that needs it (hashing, sealing, comparing).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.chars().count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `…` and the last four characters, for static-token hints.
    pub fn hint(&self) -> String {
        let tail: String = {
            let chars: Vec<char> = self.0.chars().collect();
            chars[chars.len().saturating_sub(4)..].iter().collect()
        };
        format!("…{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

/// An Argon2id password hash in PHC string form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordHash(pub String);

/// A SHA-256 digest of a high-entropy token, hex encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenDigest(pub String);

/// A secret encrypted with an AEAD under the service's `SECRETS_KEY` (nonce and ciphertext,
/// base64 encoded).
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(pub String);

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealedSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints_its_value() {
        let s = Secret::new("hunter2-hunter2-hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn hint_is_an_ellipsis_and_the_last_four_characters() {
        assert_eq!(Secret::new("abcdefghijklmnop1234").hint(), "…1234");
        assert_eq!(Secret::new("ab").hint(), "…ab");
    }
}
