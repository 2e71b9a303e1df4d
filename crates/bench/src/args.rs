//! `--name value` command-line flags of bench-longpoll and bench-oidc-issuer (they are run by
//! kubesvc-bench, not by people, so a small parser is enough).

use std::collections::HashMap;
use std::str::FromStr;

use anyhow::{Context, anyhow, bail};

#[derive(Debug, Default)]
pub struct Args(HashMap<String, String>);

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut map = HashMap::new();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let Some(name) = flag.strip_prefix("--") else {
                bail!("unexpected argument {flag}");
            };
            let value = it.next().with_context(|| format!("{flag} needs a value"))?;
            map.insert(name.to_owned(), value);
        }
        Ok(Args(map))
    }

    pub fn from_env() -> anyhow::Result<Self> {
        Self::parse(std::env::args().skip(1))
    }

    pub fn required(&self, name: &str) -> anyhow::Result<String> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| anyhow!("--{name} is required"))
    }

    pub fn optional(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    /// `--name` parsed, or `default` when absent.
    pub fn or<T: FromStr>(&self, name: &str, default: T) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| anyhow!("--{name} {v}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::expect_used, reason = "test code: a failure should be loud")]

    use super::*;

    #[test]
    fn flags_with_values() {
        let a = Args::parse(["--count", "5", "--url", "http://x"].map(String::from)).expect("ok");
        assert_eq!(a.or("count", 1u32).expect("int"), 5);
        assert_eq!(a.or("missing", 7u32).expect("default"), 7);
        assert_eq!(a.required("url").expect("set"), "http://x");
        assert!(a.required("token").is_err());
        assert!(Args::parse(["--count"].map(String::from)).is_err());
        assert!(Args::parse(["count"].map(String::from)).is_err());
    }
}
