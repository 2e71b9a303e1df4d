//! Merging a downloaded single-cluster kubeconfig into the user's kubeconfig, the way kubectl
//! does. A kubeconfig holds credentials, so no error here ever quotes a value from a file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use yaml_serde::{Mapping, Value};

const LISTS: [&str; 3] = ["clusters", "users", "contexts"];

/// What the merge did, for the CLI's message.
#[derive(Debug)]
pub struct Merged {
    pub yaml: String,
    pub context: String,
    /// An entry of that name existed and was updated.
    pub replaced: bool,
    pub current_set: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The existing file is refused rather than overwritten: writing it would lose the user's
    /// other clusters. `path` is None when only text was given (see [`KubeconfigError::in_file`]).
    #[error("{}: {reason}; fix or move it aside (it was left unchanged)", shown(.path.as_deref()))]
    Unreadable {
        path: Option<PathBuf>,
        reason: String,
    },
    #[error("the downloaded kubeconfig is not usable: {0}")]
    NotAKubeconfig(String),
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl KubeconfigError {
    /// `merge` only sees text; the caller that read the file names it here.
    pub fn in_file(self, file: &Path) -> Self {
        match self {
            Self::Unreadable { reason, .. } => Self::Unreadable {
                path: Some(file.into()),
                reason,
            },
            other => other,
        }
    }
}

fn shown(path: Option<&Path>) -> String {
    path.map_or("the existing kubeconfig".into(), |p| {
        p.display().to_string()
    })
}

fn seq(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_sequence)
        .map_or(&[], Vec::as_slice)
}

fn name_of(entry: &Value) -> Option<&str> {
    entry.get("name")?.as_str()
}

/// Parses YAML, reporting only the position of a syntax error: yaml_serde's messages can quote content.
fn parse(text: &str) -> Result<Value, String> {
    yaml_serde::from_str(text).map_err(|e| match e.location() {
        Some(at) => format!(
            "not valid YAML (line {}, column {})",
            at.line(),
            at.column()
        ),
        None => "not valid YAML".into(),
    })
}

/// Reads the user's file, checking the structure we rely on; an empty file (or none) is a new one.
fn read_existing(text: Option<&str>) -> Result<Mapping, KubeconfigError> {
    let unreadable = |reason: String| KubeconfigError::Unreadable { path: None, reason };
    let value = match text {
        Some(t) if !t.trim().is_empty() => parse(t).map_err(unreadable)?,
        _ => Value::Null,
    };
    let mut doc = match value {
        Value::Mapping(doc) => doc,
        // A file holding only comments (or `~`) has nothing to keep.
        Value::Null => {
            let mut doc = Mapping::new();
            doc.insert("apiVersion".into(), "v1".into());
            doc.insert("kind".into(), "Config".into());
            for list in LISTS {
                doc.insert(list.into(), Value::Sequence(vec![]));
            }
            doc.insert("preferences".into(), Mapping::new().into());
            doc
        }
        _ => return Err(unreadable("the top level is not a mapping".into())),
    };
    for list in LISTS {
        match doc.get(list) {
            // kubectl writes `clusters: null` for an empty list.
            None | Some(Value::Null) => drop(doc.insert(list.into(), Value::Sequence(vec![]))),
            Some(Value::Sequence(items)) if items.iter().all(Value::is_mapping) => {}
            Some(Value::Sequence(_)) => {
                return Err(unreadable(format!("an entry of `{list}` is not a mapping")));
            }
            Some(_) => return Err(unreadable(format!("`{list}` is not a list"))),
        }
    }
    Ok(doc)
}

/// The single entry of `list` in the download, which must carry a `body` mapping.
fn only_entry(doc: &Mapping, list: &str, body: &str) -> Result<Mapping, KubeconfigError> {
    match seq(doc.get(list)) {
        [Value::Mapping(entry)] if entry.get(body).is_some_and(Value::is_mapping) => {
            Ok(entry.clone())
        }
        [_] => Err(KubeconfigError::NotAKubeconfig(format!(
            "its `{list}` entry has no `{body}` mapping"
        ))),
        _ => Err(KubeconfigError::NotAKubeconfig(format!(
            "it needs exactly one entry in `{list}`"
        ))),
    }
}

/// Replaces the first entry named `name` in place, or appends; later duplicates are dropped
/// because client-go refuses a file with duplicate names. True when one existed.
fn upsert(items: &mut Vec<Value>, name: &str, entry: Mapping) -> bool {
    let mut found = false;
    items.retain_mut(|item| {
        if name_of(item) != Some(name) {
            return true;
        }
        let first = !found;
        found = true;
        if first {
            *item = Value::Mapping(entry.clone());
        }
        first
    });
    if !found {
        items.push(Value::Mapping(entry));
    }
    found
}

/// Merges `downloaded` into `existing` (the current file's text; None or empty/whitespace = no file yet).
/// The context, cluster and user are named `context_name`, `context_name` and `{context_name}-admin`,
/// whatever the download calls them, so that saving twice updates rather than duplicates.
/// Same-named entries are replaced whole (a stale `exec` next to a new token would win), in place;
/// everything else in the file is kept. `current-context` changes only when `set_current`.
pub fn merge(
    existing: Option<&str>,
    downloaded: &str,
    context_name: &str,
    set_current: bool,
) -> Result<Merged, KubeconfigError> {
    let Ok(Value::Mapping(download)) = parse(downloaded) else {
        return Err(KubeconfigError::NotAKubeconfig(
            "it is not a YAML mapping".into(),
        ));
    };
    let user_name = format!("{context_name}-admin");
    let mut cluster = only_entry(&download, "clusters", "cluster")?;
    let mut user = only_entry(&download, "users", "user")?;
    let mut context = only_entry(&download, "contexts", "context")?;
    cluster.insert("name".into(), context_name.into());
    user.insert("name".into(), user_name.as_str().into());
    context.insert("name".into(), context_name.into());
    if let Some(Value::Mapping(body)) = context.get_mut("context") {
        body.insert("cluster".into(), context_name.into());
        body.insert("user".into(), user_name.as_str().into());
    }

    let mut doc = read_existing(existing)?;
    let mut replaced = false;
    for (list, name, entry) in [
        ("clusters", context_name, cluster),
        ("users", user_name.as_str(), user),
        ("contexts", context_name, context),
    ] {
        if let Some(Value::Sequence(items)) = doc.get_mut(list) {
            replaced |= upsert(items, name, entry);
        }
    }
    if set_current {
        doc.insert("current-context".into(), context_name.into());
    }
    // kubectl reads YAML 1.1: written so that it reads every string back as a string.
    let yaml = crate::yaml::to_string(&Value::Mapping(doc));
    Ok(Merged {
        yaml,
        context: context_name.into(),
        replaced,
        current_set: set_current,
    })
}

/// The file kubectl would write: the first non-empty entry of `$KUBECONFIG` (split on ':'), else
/// `<home>/.kube/config`. None when neither is known.
pub fn target_path(
    kubeconfig_env: Option<&std::ffi::OsStr>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    kubeconfig_env
        .and_then(|v| std::env::split_paths(v).find(|p| !p.as_os_str().is_empty()))
        .or_else(|| home.map(|h| h.join(".kube").join("config")))
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> KubeconfigError + '_ {
    move |source| KubeconfigError::Io {
        path: path.into(),
        source,
    }
}

/// Follows symlinks to the file to replace, so that a symlinked ~/.kube/config (dotfile
/// managers) stays a symlink. A missing target is fine: it is about to be created.
fn resolve_symlinks(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = current
                    .parent()
                    .map_or_else(|| link.clone(), |dir| dir.join(&link));
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => return Ok(current),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// A new file next to `target`, owner-only from the start: it receives credentials.
fn create_temp(dir: &Path, target: &Path) -> io::Result<(PathBuf, File)> {
    let base = target
        .file_name()
        .map_or_else(|| "kubeconfig".into(), |n| n.to_string_lossy());
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    for attempt in 0..100 {
        let tmp = dir.join(format!(".{base}.{}.{attempt}.tmp", std::process::id()));
        match options.open(&tmp) {
            Ok(file) => {
                // The umask may have narrowed it further; the owner must still be able to write.
                #[cfg(unix)]
                file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
                return Ok((tmp, file));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

/// Writes `text` to `path` atomically, so that a crash or a full disk never leaves a truncated
/// kubeconfig: a 0600 temporary file in the same directory, fsync, then rename over the file
/// (through symlinks). A missing directory is created with mode 0700.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), KubeconfigError> {
    let target = resolve_symlinks(path).map_err(io_err(path))?;
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir).map_err(io_err(&dir))?;
    let (tmp, mut file) = create_temp(&dir, &target).map_err(io_err(&dir))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &target));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(KubeconfigError::Io {
            path: target,
            source,
        });
    }
    // Makes the rename itself durable; a failure here leaves a complete file either way.
    #[cfg(unix)]
    let _ = File::open(&dir).and_then(|d| d.sync_all());
    Ok(())
}

/// The names of a kubeconfig's contexts: for `kubeconfig show`-style checks and tests.
#[cfg(test)]
pub fn context_names(yaml: &str) -> Result<Vec<String>, KubeconfigError> {
    let doc = read_existing(Some(yaml))?;
    let contexts = seq(doc.get("contexts")).iter().filter_map(name_of);
    Ok(contexts.map(String::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SECRET: &str = "s3cr3t-token-value";

    fn download(cluster: &str, user: &str, server: &str, token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: LS0tLS1CRUdJTi\nusers:\n- name: {user}\n  user:\n    token: \"{token}\"\n\
             contexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: {user}\n\
             current-context: {cluster}\npreferences: {{}}\n"
        )
    }

    fn prod() -> String {
        download(
            "prod-1",
            "prod-1-admin",
            "https://new.example.com:6443",
            "new-token",
        )
    }

    fn parsed(yaml: &str) -> Value {
        yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("output is not YAML: {e}"))
    }

    fn names(doc: &Value, list: &str) -> Vec<String> {
        seq(doc.get(list))
            .iter()
            .filter_map(name_of)
            .map(String::from)
            .collect()
    }

    fn entry<'a>(doc: &'a Value, list: &str, name: &str) -> &'a Value {
        let found = seq(doc.get(list)).iter().find(|e| name_of(e) == Some(name));
        found.unwrap_or_else(|| panic!("no {list} entry named {name}"))
    }

    /// Follows a path of keys, e.g. ["cluster", "server"], to a string.
    fn field<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a str> {
        keys.iter().try_fold(value, |v, k| v.get(*k))?.as_str()
    }

    fn merged(existing: Option<&str>, context: &str, set_current: bool) -> (Merged, Value) {
        let m = merge(existing, &prod(), context, set_current).unwrap_or_else(|e| panic!("{e}"));
        let doc = parsed(&m.yaml);
        (m, doc)
    }

    #[test]
    fn new_file_gets_our_entries_and_current_context_only_when_asked() {
        for existing in [None, Some(""), Some("\n"), Some("  \n# nothing yet\n")] {
            for set_current in [false, true] {
                let (m, doc) = merged(existing, "prod-1", set_current);
                assert_eq!(field(&doc, &["apiVersion"]), Some("v1"));
                assert_eq!(field(&doc, &["kind"]), Some("Config"));
                assert_eq!(
                    doc.get("preferences"),
                    Some(&Value::Mapping(Mapping::new()))
                );
                assert_eq!(names(&doc, "clusters"), ["prod-1"]);
                assert_eq!(names(&doc, "users"), ["prod-1-admin"]);
                assert_eq!(names(&doc, "contexts"), ["prod-1"]);
                let current = field(&doc, &["current-context"]);
                assert_eq!(current, set_current.then_some("prod-1"), "{existing:?}");
                assert_eq!(
                    (m.context.as_str(), m.replaced, m.current_set),
                    ("prod-1", false, set_current)
                );
            }
        }
    }

    const OTHER: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: other
  cluster:
    server: https://other.example.com
    proxy-url: http://proxy:3128
users:
- name: other-user
  user:
    exec: {command: get-token, apiVersion: client.authentication.k8s.io/v1}
contexts:
- name: other
  context: {cluster: other, user: other-user, namespace: dev}
current-context: other
extensions:
- name: vendor
  extension: {colour: blue}
";

    #[test]
    fn unrelated_entries_and_unknown_keys_are_kept_and_ours_appended() {
        let before = parsed(OTHER);
        let (m, doc) = merged(Some(OTHER), "prod-1", false);
        for (list, other, ours) in [
            ("clusters", "other", "prod-1"),
            ("users", "other-user", "prod-1-admin"),
            ("contexts", "other", "prod-1"),
        ] {
            assert_eq!(names(&doc, list), [other, ours]);
            assert_eq!(
                entry(&doc, list, other),
                entry(&before, list, other),
                "{list}"
            );
        }
        assert_eq!(doc.get("extensions"), before.get("extensions"));
        assert_eq!(field(&doc, &["current-context"]), Some("other"));
        assert!(!m.replaced && !m.current_set);
        assert_eq!(
            context_names(&m.yaml).unwrap_or_else(|e| panic!("{e}")),
            ["other", "prod-1"]
        );
    }

    #[test]
    fn same_named_entries_are_replaced_in_place() {
        let old = download(
            "prod-1",
            "prod-1-admin",
            "https://old.example.com",
            "old-token",
        );
        let first = merge(Some(OTHER), &old, "prod-1", false).unwrap_or_else(|e| panic!("{e}"));
        // Put ours first, so that "in place" differs from "appended".
        let mut existing = parsed(&first.yaml);
        for list in LISTS {
            if let Some(Value::Sequence(items)) = existing.get_mut(list) {
                items.reverse();
            }
        }
        let existing = yaml_serde::to_string(&existing).unwrap_or_else(|e| panic!("{e}"));
        let (m, doc) = merged(Some(&existing), "prod-1", true);
        assert_eq!(names(&doc, "clusters"), ["prod-1", "other"]);
        assert_eq!(names(&doc, "users"), ["prod-1-admin", "other-user"]);
        assert_eq!(names(&doc, "contexts"), ["prod-1", "other"]);
        let server = field(entry(&doc, "clusters", "prod-1"), &["cluster", "server"]);
        assert_eq!(server, Some("https://new.example.com:6443"));
        assert_eq!(
            field(entry(&doc, "users", "prod-1-admin"), &["user", "token"]),
            Some("new-token")
        );
        assert_eq!(field(&doc, &["current-context"]), Some("prod-1"));
        assert!(m.replaced && m.current_set);
    }

    #[test]
    fn entries_are_renamed_to_the_context_name() {
        let dl = download("dl-cluster", "dl-user", "https://x.example.com", "t");
        let m = merge(None, &dl, "mine", false).unwrap_or_else(|e| panic!("{e}"));
        let doc = parsed(&m.yaml);
        assert_eq!(names(&doc, "clusters"), ["mine"]);
        assert_eq!(names(&doc, "users"), ["mine-admin"]);
        assert_eq!(names(&doc, "contexts"), ["mine"]);
        let context = entry(&doc, "contexts", "mine");
        assert_eq!(field(context, &["context", "cluster"]), Some("mine"));
        assert_eq!(field(context, &["context", "user"]), Some("mine-admin"));
        assert_eq!(
            field(entry(&doc, "clusters", "mine"), &["cluster", "server"]),
            Some("https://x.example.com")
        );
    }

    #[test]
    fn unreadable_existing_files_are_refused_without_quoting_them() {
        let cases = [
            (
                format!("users:\n- name: u\n  user: {{token: \"{SECRET}\"\n"),
                "line ",
            ),
            (format!("{SECRET}\n"), "top level is not a mapping"),
            (format!("- {SECRET}\n"), "top level is not a mapping"),
            (
                format!("clusters: 5\nusers:\n- name: u\n  user: {{token: {SECRET}}}\n"),
                "`clusters` is not a list",
            ),
            (
                format!("users: [{SECRET}]\n"),
                "an entry of `users` is not a mapping",
            ),
        ];
        for (text, expected) in cases {
            let err = merge(Some(&text), &prod(), "prod-1", true)
                .err()
                .map(|e| e.in_file(Path::new("/home/me/.kube/config")))
                .unwrap_or_else(|| panic!("accepted {text:?}"));
            let message = err.to_string();
            assert!(
                matches!(err, KubeconfigError::Unreadable { .. }),
                "{message}"
            );
            assert!(message.starts_with("/home/me/.kube/config: "), "{message}");
            assert!(message.contains(expected), "{message}");
            assert!(
                !message.contains(SECRET) && !format!("{err:?}").contains(SECRET),
                "{message}"
            );
        }
    }

    #[test]
    fn downloads_without_exactly_one_of_each_are_refused() {
        let full = prod();
        let no_user = full.replace(
            "users:\n- name: prod-1-admin\n  user:\n    token: \"new-token\"\n",
            "",
        );
        let two_clusters = full.replace(
            "clusters:\n",
            "clusters:\n- name: extra\n  cluster: {server: x}\n",
        );
        for text in [no_user.as_str(), &two_clusters, "users: [", "just text", ""] {
            let result = merge(None, text, "prod-1", false);
            assert!(
                matches!(result, Err(KubeconfigError::NotAKubeconfig(_))),
                "{text:?}: {result:?}"
            );
        }
    }

    #[test]
    fn target_path_follows_kubectl() {
        let home = Path::new("/home/me");
        let cases: [(Option<&str>, Option<&Path>, Option<&str>); 6] = [
            (Some("a:b"), Some(home), Some("a")),
            (Some("::b"), Some(home), Some("b")),
            (Some(""), Some(home), Some("/home/me/.kube/config")),
            (None, Some(home), Some("/home/me/.kube/config")),
            (Some("/etc/kc"), None, Some("/etc/kc")),
            (None, None, None),
        ];
        for (env, home, expected) in cases {
            let got = target_path(env.map(std::ffi::OsStr::new), home);
            assert_eq!(got, expected.map(PathBuf::from), "{env:?} {home:?}");
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn write_atomically_creates_private_files_and_replaces_them()
    -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("home/.kube/config");
        write_atomically(&path, "first")?;
        assert_eq!(std::fs::read_to_string(&path)?, "first");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&tmp.path().join("home/.kube")), 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        write_atomically(&path, "second")?;
        assert_eq!(std::fs::read_to_string(&path)?, "second");
        assert_eq!(mode(&path), 0o600);
        let leftovers = std::fs::read_dir(tmp.path().join("home/.kube"))?.count();
        assert_eq!(leftovers, 1, "temporary files left behind");
        Ok(())
    }

    #[test]
    fn write_atomically_keeps_a_symlink_and_replaces_its_target()
    -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let target = tmp.path().join("dotfiles/kubeconfig");
        std::fs::create_dir_all(tmp.path().join("dotfiles"))?;
        std::fs::create_dir_all(tmp.path().join(".kube"))?;
        std::fs::write(&target, "old")?;
        let link = tmp.path().join(".kube/config");
        std::os::unix::fs::symlink("../dotfiles/kubeconfig", &link)?;
        write_atomically(&link, "new")?;
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target)?, "new");
        assert_eq!(mode(&target), 0o600);
        Ok(())
    }
}
