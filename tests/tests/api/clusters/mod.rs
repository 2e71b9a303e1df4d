//! Clusters: create, read, change, follow, and the limits of a create body.

mod changes;
mod create;
mod limits;
mod progress;
mod reads;
