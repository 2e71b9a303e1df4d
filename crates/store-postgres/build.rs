//! Rebuild when a migration changes: `embed_migrations!` reads the folder at compile time,
//! and cargo does not otherwise know about it.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
