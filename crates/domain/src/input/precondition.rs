//! Conditional writes: a change that applies only to the object as its caller last saw it,
//! so that two tools editing one object cannot silently overwrite each other.
//!
//! What "as last seen" means is the caller's adapter's to say (the HTTP API compares entity
//! tags of the object's representation); the rule is the domain's: the condition is checked
//! on the object the change is decided on, inside the same optimistic transaction, so a change
//! that lands in between makes the write fail with `PreconditionFailed` rather than apply.

use crate::error::DomainError;

/// Whether an object is still as the caller last saw it.
pub trait Precondition<T: ?Sized>: Send + Sync {
    fn holds(&self, current: &T) -> bool;
}

/// A write's condition: `None` writes unconditionally.
pub type Expect<'a, T> = Option<&'a dyn Precondition<T>>;

/// `Err(PreconditionFailed)` when there is a condition and `current` does not meet it.
pub fn check<T: ?Sized>(expect: Expect<'_, T>, current: &T) -> Result<(), DomainError> {
    match expect {
        Some(p) if !p.holds(current) => Err(DomainError::PreconditionFailed),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Equals(u32);

    impl Precondition<u32> for Equals {
        fn holds(&self, current: &u32) -> bool {
            *current == self.0
        }
    }

    #[test]
    fn no_condition_always_holds_and_a_condition_is_checked() {
        assert!(check::<u32>(None, &7).is_ok());
        assert!(check(Some(&Equals(7)), &7).is_ok());
        assert!(matches!(
            check(Some(&Equals(6)), &7),
            Err(DomainError::PreconditionFailed)
        ));
    }
}
