//! Argon2id password hashing and verification, with a decoy verification of equal cost so a
//! login for an unknown user takes as long as one for a known user.

use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use domain::model::secret::{PasswordHash, Secret};
use domain::ports::secrets::VaultError;
use rand::rngs::OsRng;

/// OWASP's recommended Argon2id setting (Password Storage Cheat Sheet): 19 MiB, 2 passes, 1 lane.
const MEMORY_KIB: u32 = 19_456;
const PASSES: u32 = 2;
const LANES: u32 = 1;

fn hasher() -> Result<Argon2<'static>, VaultError> {
    let params = Params::new(MEMORY_KIB, PASSES, LANES, None)
        .map_err(|e| VaultError::Internal(format!("argon2 parameters: {e}")))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// Hashes on the calling thread (tens of milliseconds in release builds): call it from a
/// blocking context; the [`SecretVault`](domain::ports::secrets::SecretVault) method does.
pub fn hash_password_blocking(password: &Secret) -> Result<PasswordHash, VaultError> {
    let salt = SaltString::generate(&mut OsRng);
    let phc = hasher()?
        .hash_password(password.expose().as_bytes(), &salt)
        // The error kinds of password-hash never carry the input.
        .map_err(|e| VaultError::Internal(format!("argon2 hashing: {e}")))?;
    Ok(PasswordHash(phc.to_string()))
}

/// Whether `candidate` is the password `hash` was made from. Slow by design: call it from a
/// blocking context (or use [`verify_password_async`]).
///
/// The parameters come from the PHC string, so hashes made with other costs still verify. An
/// empty candidate never matches, and a stored value that is not a PHC string matches nothing;
/// both still cost a full verification, so timing tells nothing.
pub fn verify_password(hash: &PasswordHash, candidate: &str) -> bool {
    let matched = match argon2::PasswordHash::new(&hash.0) {
        Ok(parsed) => Argon2::default()
            .verify_password(candidate.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => dummy_verify(candidate),
    };
    matched && !candidate.is_empty()
}

/// [`verify_password`] on tokio's blocking pool, for request handlers.
pub async fn verify_password_async(hash: PasswordHash, candidate: Secret) -> bool {
    tokio::task::spawn_blocking(move || verify_password(&hash, candidate.expose()))
        .await
        .unwrap_or(false)
}

/// A fixed Argon2id hash with the same parameters as every new hash. Verification cost depends
/// on the parameters only, so checking a candidate against it costs what a real check costs;
/// being a constant, it costs nothing to prepare (no slow first call that would tell).
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$iR+v0py70/9HJsY9GOQXcA$v8nT9dfZOHD3VqwgYubrC3VssqAKMIcveTqpW4S7eXM";

/// A verification against a decoy hash with the same parameters, for a user that does not
/// exist: it costs what a real one costs and always answers `false`.
pub fn dummy_verify(candidate: &str) -> bool {
    if let Ok(parsed) = argon2::PasswordHash::new(DECOY) {
        // The answer is discarded: the point is to spend the same time.
        let _ = Argon2::default().verify_password(candidate.as_bytes(), &parsed);
    }
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn hash_is_an_argon2id_phc_string_with_owasp_parameters_and_a_random_salt() {
        let a = hash_password_blocking(&Secret::new("pa:ss:word")).unwrap();
        let b = hash_password_blocking(&Secret::new("pa:ss:word")).unwrap();
        assert!(
            a.0.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{}",
            a.0
        );
        assert!(!a.0.contains("pa:ss:word"));
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify_password(&a, "pa:ss:word"));
        assert!(verify_password(&b, "pa:ss:word"));
        assert!(!verify_password(&a, "pa:ss:wore"));
        assert!(!verify_password(&a, ""));
    }

    #[test]
    fn a_stored_value_that_is_not_a_phc_string_matches_nothing() {
        assert!(!verify_password(
            &PasswordHash("plaintext".into()),
            "plaintext"
        ));
        assert!(!verify_password(&PasswordHash(String::new()), ""));
    }

    #[test]
    fn the_decoy_has_the_parameters_of_new_hashes() {
        let fresh = hash_password_blocking(&Secret::new("x")).unwrap();
        let params = |phc: &str| phc.split('$').take(4).collect::<Vec<_>>().join("$");
        assert_eq!(params(DECOY), params(&fresh.0));
        assert!(argon2::PasswordHash::new(DECOY).is_ok());
    }

    #[test]
    fn dummy_verify_never_matches() {
        assert!(!dummy_verify("decoy password for unknown users"));
        assert!(!dummy_verify("anything"));
    }

    #[tokio::test]
    async fn verify_off_thread_agrees_with_verify() {
        let h = hash_password_blocking(&Secret::new("s3cret")).unwrap();
        assert!(verify_password_async(h.clone(), Secret::new("s3cret")).await);
        assert!(!verify_password_async(h, Secret::new("s3cres")).await);
    }
}
