//! `SECRETS_KEY`: parsing and generating the 32-byte AEAD key without ever echoing it.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use rand::RngCore;
use rand::rngs::OsRng;

use crate::ring::PREVIOUS_SETTING;

/// The setting the key comes from, named in every [`KeyError`].
pub const KEY_SETTING: &str = "SECRETS_KEY";

const KEY_LEN: usize = 32;

/// Why `SECRETS_KEY` was refused. The messages name the setting and say how to make a good one;
/// none contains the value given, which may be a real key set in the wrong form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{KEY_SETTING} is empty; set it to the base64 of 32 random bytes (e.g. `openssl rand -base64 32`)"
    )]
    Empty,
    #[error(
        "{KEY_SETTING} is not valid base64; set it to the base64 of 32 random bytes (e.g. `openssl rand -base64 32`)"
    )]
    NotBase64,
    #[error(
        "{KEY_SETTING} decodes to {0} bytes but must be exactly 32; set it to the base64 of 32 random bytes (e.g. `openssl rand -base64 32`)"
    )]
    WrongLength(usize),
    #[error(
        "{PREVIOUS_SETTING}: key {position} is not the base64 of 32 bytes; list earlier values of {KEY_SETTING}, separated by commas"
    )]
    Previous { position: usize },
    #[error(
        "{PREVIOUS_SETTING}: key {position} is {KEY_SETTING} or an earlier key of the list again; list each key once"
    )]
    Repeated { position: usize },
}

pub(crate) fn decode(encoded: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let trimmed = encoded.trim();
    if trimmed.is_empty() {
        return Err(KeyError::Empty);
    }
    // Operators paste keys from many tools; accept either alphabet, padded or not.
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(trimmed).ok())
        .ok_or(KeyError::NotBase64)?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| KeyError::WrongLength(bytes.len()))
}

pub(crate) fn generate() -> String {
    let mut key = [0u8; KEY_LEN];
    OsRng.fill_bytes(&mut key);
    STANDARD.encode(key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::Vault;

    #[test]
    fn a_31_byte_key_is_rejected_naming_the_setting_not_the_value() {
        let short = STANDARD.encode([7u8; 31]);
        let err = Vault::from_base64_key(&short).unwrap_err();
        assert_eq!(err, KeyError::WrongLength(31));
        let msg = err.to_string();
        assert!(msg.contains("SECRETS_KEY"), "{msg}");
        assert!(!msg.contains(&short), "{msg}");
        assert!(!format!("{err:?}").contains(&short));
    }

    #[test]
    fn a_33_byte_key_is_rejected() {
        let long = STANDARD.encode([7u8; 33]);
        assert_eq!(
            Vault::from_base64_key(&long).unwrap_err(),
            KeyError::WrongLength(33)
        );
    }

    #[test]
    fn a_non_base64_key_is_rejected_naming_the_setting_not_the_value() {
        let bad = "this-is-not*base64!!my-secret-value";
        let err = Vault::from_base64_key(bad).unwrap_err();
        assert_eq!(err, KeyError::NotBase64);
        let msg = err.to_string();
        assert!(msg.contains("SECRETS_KEY"), "{msg}");
        assert!(!msg.contains("my-secret-value"), "{msg}");
    }

    #[test]
    fn an_empty_key_is_rejected() {
        assert_eq!(Vault::from_base64_key("  ").unwrap_err(), KeyError::Empty);
    }

    #[test]
    fn either_base64_alphabet_and_surrounding_whitespace_are_accepted() {
        let raw = [0xfbu8; 32];
        for encoded in [
            STANDARD.encode(raw),
            URL_SAFE_NO_PAD.encode(raw),
            format!("{}\n", STANDARD.encode(raw)),
        ] {
            assert_eq!(decode(&encoded).unwrap(), raw);
        }
    }
}
