//! A value every request reads and a background task replaces whole: the auth servers'
//! snapshot, the routes. A request keeps the `Arc` it took for its whole life, so it never
//! sees half of one version and half of the next.

use std::sync::{Arc, PoisonError, RwLock};

#[derive(Debug)]
pub struct Current<T> {
    value: Arc<RwLock<Arc<T>>>,
}

impl<T> Clone for Current<T> {
    fn clone(&self) -> Self {
        Current {
            value: self.value.clone(),
        }
    }
}

impl<T: Default> Default for Current<T> {
    fn default() -> Self {
        Current::new(T::default())
    }
}

impl<T> Current<T> {
    pub fn new(value: T) -> Current<T> {
        Current {
            value: Arc::new(RwLock::new(Arc::new(value))),
        }
    }

    /// The version in force now.
    pub fn get(&self) -> Arc<T> {
        self.value
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `value` in force for every request that starts from now on.
    pub fn set(&self, value: T) {
        *self.value.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(value);
    }
}
