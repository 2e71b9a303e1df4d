//! The key ring: `SECRETS_KEY` seals, the keys of `SECRETS_KEY_PREVIOUS` still open what they
//! sealed. Each key is known by an id derived from it (never the key), written beside every
//! value it seals, so opening picks the one key that can open a value instead of trying them
//! all, and an operator can count what is still sealed under a key before removing it.

use chacha20poly1305::ChaCha20Poly1305;

use crate::key::{self, KeyError};
use crate::seal;

/// The setting that lists the keys still accepted for opening.
pub const PREVIOUS_SETTING: &str = "SECRETS_KEY_PREVIOUS";

/// A key's public name: the first 4 bytes of an HMAC of a fixed label under the key, in hex.
/// It identifies the key among a handful without saying anything about it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId([u8; 4]);

impl KeyId {
    fn of(key: &[u8; 32]) -> KeyId {
        let d = crate::derive(key, "key id");
        KeyId([d[0], d[1], d[2], d[3]])
    }

    /// The id as written in sealed values: 8 lowercase hex digits.
    pub fn parse(text: &str) -> Option<KeyId> {
        if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut id = [0u8; 4];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(KeyId(id))
    }
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Debug for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// One key of the ring, ready to use.
pub(crate) struct RingKey {
    pub id: KeyId,
    pub cipher: ChaCha20Poly1305,
    pub master: [u8; 32],
}

impl RingKey {
    fn new(master: [u8; 32]) -> RingKey {
        RingKey {
            id: KeyId::of(&master),
            cipher: seal::cipher(&master),
            master,
        }
    }
}

/// The keys, the sealing one first.
pub(crate) struct Ring(Vec<RingKey>);

impl Ring {
    /// The ring of `current` and the keys listed in `previous` (separated by commas or white
    /// space; empty for none). A key listed twice, or the current key listed again, is refused:
    /// it is always a mistake in the settings.
    pub fn parse(current: &str, previous: &str) -> Result<Ring, KeyError> {
        let mut keys = vec![RingKey::new(key::decode(current)?)];
        let listed = previous
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|k| !k.is_empty());
        for (i, encoded) in listed.enumerate() {
            let master =
                key::decode(encoded).map_err(|_| KeyError::Previous { position: i + 1 })?;
            let k = RingKey::new(master);
            if keys.iter().any(|have| have.id == k.id) {
                return Err(KeyError::Repeated { position: i + 1 });
            }
            keys.push(k);
        }
        Ok(Ring(keys))
    }

    pub fn current(&self) -> &RingKey {
        // `parse` always puts the current key first.
        &self.0[0]
    }

    pub fn get(&self, id: KeyId) -> Option<&RingKey> {
        self.0.iter().find(|k| k.id == id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RingKey> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::Vault;

    #[test]
    fn key_ids_are_eight_hex_digits_stable_and_distinct() {
        let a = Vault::generate_key();
        let b = Vault::generate_key();
        let ring = Ring::parse(&a, &b).unwrap();
        let ids: Vec<String> = ring.iter().map(|k| k.id.to_string()).collect();
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1]);
        assert!(ids.iter().all(|i| i.len() == 8), "{ids:?}");
        assert_eq!(
            Ring::parse(&a, "").unwrap().current().id.to_string(),
            ids[0]
        );
        assert_eq!(
            KeyId::parse(&ids[1]).map(|k| k.to_string()),
            Some(ids[1].clone())
        );
        for bad in ["", "0123456", "0123456g", "012345678", "ab\u{e9}cdef"] {
            assert_eq!(KeyId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn previous_keys_may_be_separated_by_commas_or_white_space() {
        let (a, b, c) = (
            Vault::generate_key(),
            Vault::generate_key(),
            Vault::generate_key(),
        );
        for previous in [
            format!("{b},{c}"),
            format!(" {b}\n{c} "),
            format!("{b}, {c},"),
        ] {
            assert_eq!(Ring::parse(&a, &previous).unwrap().iter().count(), 3);
        }
    }

    #[test]
    fn a_bad_or_repeated_previous_key_is_refused_by_position_without_its_value() {
        let a = Vault::generate_key();
        let b = Vault::generate_key();
        let err = Ring::parse(&a, &format!("{b},not-a-key-value"))
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("SECRETS_KEY_PREVIOUS") && msg.contains("key 2"),
            "{msg}"
        );
        assert!(!msg.contains("not-a-key-value"), "{msg}");
        let err = Ring::parse(&a, &a).err().unwrap();
        assert_eq!(err, KeyError::Repeated { position: 1 });
        assert!(!err.to_string().contains(&a));
        let err = Ring::parse(&a, &format!("{b} {b}")).err().unwrap();
        assert_eq!(err, KeyError::Repeated { position: 2 });
    }
}
