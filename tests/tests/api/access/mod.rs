//! Who may do what: authentication through the account platform, organization
//! resolution, and the route × role matrix.

mod authentication;
mod roles;
