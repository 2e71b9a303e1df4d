//! The model: the service's objects and their state machines.

/// An enumeration of words: each value with its one spelling, `ALL`, `as_str`, `parse`, and a
/// serialization as the word.
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            /// The value this word names, if any.
            pub fn parse(word: &str) -> Option<Self> {
                match word { $($word => Some($name::$variant),)+ _ => None }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

pub mod approval;
pub mod audit;
pub mod auth_server;
pub mod catalog;
pub mod cluster;
pub mod elastic_ip;
pub mod firewall;
pub mod idempotency;
pub mod identity;
pub mod kubeconfig;
pub mod maintenance_window;
pub mod node;
pub mod node_pool;
pub mod operation;
pub mod secret;
pub mod session;
pub mod upgrade;
