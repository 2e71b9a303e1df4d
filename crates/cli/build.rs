//! Writes the man page from the same clap definitions the binary parses, so the two cannot
//! differ; `kubesvc man` prints it.

#[allow(dead_code)]
#[path = "src/args.rs"]
mod args;

// The domain's limits (one file without imports): the help text names the same rules the
// server applies.
#[allow(dead_code)]
#[path = "../domain/src/rules.rs"]
mod rules;

fn main() -> std::io::Result<()> {
    println!("cargo::rerun-if-changed=src/args.rs");
    println!("cargo::rerun-if-changed=../domain/src/rules.rs");
    let out =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| {
            std::io::Error::other("OUT_DIR is not set: build.rs runs under cargo")
        })?);
    let command = <args::Cli as clap::CommandFactory>::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    std::fs::write(out.join("kubesvc.1"), page)
}
