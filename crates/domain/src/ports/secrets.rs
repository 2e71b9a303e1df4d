//! The secrets port: how credentials are protected at rest. Argon2id for passwords, SHA-256
//! for high-entropy tokens, an AEAD under `SECRETS_KEY` for what must be read back.

use async_trait::async_trait;

use crate::model::secret::{PasswordHash, SealedSecret, Secret, TokenDigest};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultError {
    /// The sealed value does not open under this key (tampered, or another key).
    #[error("a sealed secret could not be opened")]
    Unseal,
    #[error("secret protection failed: {0}")]
    Internal(String),
}

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait SecretVault: Send + Sync {
    /// Argon2id; slow by design, so implementations run it off the request threads.
    async fn hash_password(&self, password: &Secret) -> Result<PasswordHash, VaultError>;
    fn digest_token(&self, token: &Secret) -> TokenDigest;
    fn seal(&self, secret: &Secret) -> Result<SealedSecret, VaultError>;
    fn open(&self, sealed: &SealedSecret) -> Result<Secret, VaultError>;
}
