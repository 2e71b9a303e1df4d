//! Fair use of writes: how many changes an organization may make a minute.
//!
//! The rule is the domain's: every change is counted against the organization it changes,
//! after the caller is authorized for it, so nobody outside an organization can spend its
//! budget (and lock its members out). Where the count lives is the adapter's.

/// An organization's write budget.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait WriteBudget: Send + Sync {
    /// Takes one write from the organization's budget; `Err` with the seconds to wait when it
    /// is spent.
    fn take(&self, organization: uuid::Uuid) -> Result<(), u64>;
}

/// No limit: the default, and what internal tools use.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl WriteBudget for Unlimited {
    fn take(&self, _: uuid::Uuid) -> Result<(), u64> {
        Ok(())
    }
}
