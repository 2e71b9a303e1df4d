//! The routes file (`GATEWAY_ROUTES_FILE`): which path prefixes go where, behind which auth server.

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum RoutesError {
    #[error("cannot read the routes file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("the routes file is not valid TOML of [[route]] tables: {0}")]
    Parse(String),
    #[error("route {index}: {reason}")]
    Invalid { index: usize, reason: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutesFile {
    #[serde(default)]
    route: Vec<RouteConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteConfig {
    path_prefix: String,
    upstream: String,
    organization: String,
    environment: String,
    auth_server: String,
}

/// One protected prefix.
#[derive(Debug, Clone)]
pub struct Route {
    /// Its index in the file: the rate limit counts per route.
    pub index: usize,
    /// Without a trailing slash (except the root prefix `/`).
    pub path_prefix: String,
    /// `scheme://host[:port]`, plus a base path if given, without a trailing slash.
    pub upstream: String,
    /// An organization's slug or id.
    pub organization: String,
    pub environment: String,
    pub auth_server: String,
}

impl Route {
    /// Whether the prefix is a whole-segment prefix of `path`.
    pub fn matches(&self, path: &str) -> bool {
        if self.path_prefix == "/" {
            return path.starts_with('/');
        }
        match path.strip_prefix(self.path_prefix.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }
}

/// Every route, longest prefix first.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Route>,
}

impl Routes {
    pub fn load(path: &std::path::Path) -> Result<Routes, RoutesError> {
        let text = std::fs::read_to_string(path).map_err(|e| RoutesError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Routes::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Routes, RoutesError> {
        let file: RoutesFile =
            toml::from_str(text).map_err(|e| RoutesError::Parse(e.message().to_owned()))?;
        let mut routes = Vec::with_capacity(file.route.len());
        for (index, r) in file.route.into_iter().enumerate() {
            let invalid = |reason: &str| RoutesError::Invalid {
                index,
                reason: reason.to_owned(),
            };
            if !r.path_prefix.starts_with('/') {
                return Err(invalid("path_prefix must start with /"));
            }
            let upstream = url::Url::parse(&r.upstream)
                .map_err(|_| invalid("upstream must be an absolute http(s) URL"))?;
            if !matches!(upstream.scheme(), "http" | "https") || upstream.host().is_none() {
                return Err(invalid("upstream must be an absolute http(s) URL"));
            }
            if upstream.query().is_some() || upstream.fragment().is_some() {
                return Err(invalid("upstream takes no query or fragment"));
            }
            for (field, value) in [
                ("organization", &r.organization),
                ("environment", &r.environment),
                ("auth_server", &r.auth_server),
            ] {
                if value.trim().is_empty() {
                    return Err(invalid(&format!("{field} must not be empty")));
                }
            }
            let trimmed = r.path_prefix.trim_end_matches('/');
            routes.push(Route {
                index,
                path_prefix: if trimmed.is_empty() {
                    "/".into()
                } else {
                    trimmed.into()
                },
                upstream: upstream.as_str().trim_end_matches('/').to_owned(),
                organization: r.organization,
                environment: r.environment,
                auth_server: r.auth_server,
            });
        }
        // Stable: among equal prefixes the first in the file wins.
        routes.sort_by_key(|r| std::cmp::Reverse(r.path_prefix.len()));
        Ok(Routes { routes })
    }

    /// The route of the longest prefix matching `path`.
    pub fn find(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(path))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[route]]
path_prefix = "/app"
upstream = "http://127.0.0.1:9000"
organization = "acme"
environment = "production"
auth_server = "a"

[[route]]
path_prefix = "/app/admin/"
upstream = "http://127.0.0.1:9001/"
organization = "acme"
environment = "production"
auth_server = "b"
"#;

    #[test]
    fn whole_segment_longest_prefix_wins() {
        let routes = Routes::parse(FILE).ok().unwrap_or_default();
        let server = |p: &str| routes.find(p).map(|r| r.auth_server.clone());
        assert_eq!(server("/app"), Some("a".into()));
        assert_eq!(server("/app/x"), Some("a".into()));
        assert_eq!(server("/apple"), None);
        assert_eq!(server("/app/admin"), Some("b".into()));
        assert_eq!(server("/app/admin/users"), Some("b".into()));
        assert_eq!(server("/app/administrator"), Some("a".into()));
        assert_eq!(server("/other"), None);
        assert_eq!(
            routes.find("/app/admin").map(|r| r.upstream.as_str()),
            Some("http://127.0.0.1:9001")
        );
    }

    #[test]
    fn bad_routes_are_refused() {
        assert!(Routes::parse("[[route]]\npath_prefix = \"x\"").is_err());
        let bad = FILE.replace("http://127.0.0.1:9000", "ftp://h");
        assert!(Routes::parse(&bad).is_err());
        assert!(Routes::parse(&format!("{FILE}\nextra = 1")).is_err());
    }
}
