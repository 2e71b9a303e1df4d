//! Clusters: create, read, change, follow, and the limits of a create body.

mod cache;
mod changes;
mod control_plane_firewall;
mod create;
mod credentials;
mod limits;
mod progress;
mod reads;
mod upgrades;
