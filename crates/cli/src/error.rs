//! What can go wrong, and the exit code each class of failure gives (`kubesvc --help` lists
//! them; docs/cli.md too).

use wire::problem::Problem;

/// A failure of one invocation.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The invocation itself is wrong: a flag, an argument, a missing setting.
    #[error("{0}")]
    Usage(String),
    /// No token, or no endpoint, to call the API with.
    #[error("{0}")]
    NotLoggedIn(String),
    /// The API answered with an error.
    #[error("{}", api_message(*.status, .problem.as_deref()))]
    Api {
        status: u16,
        /// The problem+json body, when the answer had one.
        problem: Option<Box<Problem>>,
        /// From the body, else the `X-Request-Id` header.
        request_id: Option<String>,
    },
    /// Nothing (or nothing readable) came back: connection refused, timed out, not the API.
    #[error("{0}")]
    Network(String),
    /// Something looked up by name is not there (no request answered 404 for it).
    #[error("{0}")]
    NotFound(String),
    /// The change ran and ended badly: a cluster or Elastic IP in `Failed`.
    #[error("{0}")]
    Failed(String),
    /// The person did not confirm a destructive command: nothing was sent.
    #[error("{0}")]
    Declined(String),
    /// Ctrl-C: the message says what was left as it is and how to go on.
    #[error("{0}")]
    Interrupted(String),
    /// A local file (the config, a kubeconfig) or the terminal.
    #[error("{0}")]
    Local(String),
}

/// What a person without an organization is told, in the CLI's words (the API's own answer
/// names its query parameter and header, which a CLI user never types).
pub const NO_ORGANIZATION: &str = "no organization: pass -O ORG (--organization), set \
KUBESVC_ORGANIZATION, or save one with `kubesvc auth login --organization ORG`";

fn api_message(status: u16, problem: Option<&Problem>) -> String {
    match problem {
        Some(p) if p.code == "organization_required" => NO_ORGANIZATION.to_owned(),
        // Several field errors: each gets its own line under this one.
        Some(p) if p.errors.as_ref().is_some_and(|e| e.len() > 1) => {
            format!("the API refused the request ({status} {}):", p.code)
        }
        Some(p) if !p.detail.is_empty() => p.detail.clone(),
        Some(p) => p.title.clone(),
        None => format!("the API answered {status}"),
    }
}

impl CliError {
    /// The process's exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::NotLoggedIn(_) => 3,
            CliError::NotFound(_) => 4,
            CliError::Network(_) => 6,
            CliError::Failed(_) | CliError::Local(_) | CliError::Declined(_) => 1,
            CliError::Interrupted(_) => 130,
            CliError::Api { status, .. } => match status {
                400 | 413 | 415 | 422 => 2,
                401 | 403 => 3,
                404 => 4,
                409 | 412 => 5,
                500..=599 => 6,
                _ => 1,
            },
        }
    }

    /// The lines under the message: each field error, then the request id.
    pub fn details(&self) -> Vec<String> {
        let CliError::Api {
            problem,
            request_id,
            ..
        } = self
        else {
            return Vec::new();
        };
        let mut lines: Vec<String> = problem
            .iter()
            .flat_map(|p| p.errors.iter().flatten())
            .filter(|e| !p_detail_repeats(problem.as_deref(), &e.field, &e.message))
            .map(|e| match e.field.as_str() {
                "" => e.message.clone(),
                field => format!("{field}: {}", e.message),
            })
            .collect();
        lines.extend(self.hint().map(str::to_owned));
        if let Some(id) = request_id {
            lines.push(format!("request id: {id}"));
        }
        lines
    }

    /// What to do next, where the API's answer alone leaves a person guessing.
    fn hint(&self) -> Option<&'static str> {
        match (self, self.code()) {
            (_, Some("last_pool")) => Some(
                "a cluster keeps at least one node pool; to remove them all, delete the cluster \
                 (kubesvc cluster delete CLUSTER)",
            ),
            (CliError::Api { status: 401, .. }, _) => Some(
                "the token was refused (expired, revoked or mistyped): log in again with \
                 `kubesvc auth login`, or check KUBESVC_TOKEN",
            ),
            _ => None,
        }
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage(message.into())
    }

    /// Whether the API answered this status.
    pub fn is_status(&self, wanted: u16) -> bool {
        matches!(self, CliError::Api { status, .. } if *status == wanted)
    }

    /// The problem's `code`, when the API sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            CliError::Api {
                problem: Some(p), ..
            } => Some(p.code.as_str()),
            _ => None,
        }
    }
}

/// A single field error is usually the detail itself (`field: message`): not said twice.
fn p_detail_repeats(problem: Option<&Problem>, field: &str, message: &str) -> bool {
    problem.is_some_and(|p| {
        p.errors.as_ref().is_some_and(|e| e.len() == 1) && p.detail == format!("{field}: {message}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::problem::FieldError;

    fn api(status: u16) -> CliError {
        CliError::Api {
            status,
            problem: None,
            request_id: None,
        }
    }

    #[test]
    fn each_class_of_answer_has_its_exit_code() {
        let table = [
            (400, 2),
            (422, 2),
            (401, 3),
            (403, 3),
            (404, 4),
            (409, 5),
            (412, 5),
            (402, 1),
            (429, 1),
            (500, 6),
            (502, 6),
            (503, 6),
        ];
        for (status, code) in table {
            assert_eq!(api(status).exit_code(), code, "{status}");
        }
        assert_eq!(CliError::usage("x").exit_code(), 2);
        assert_eq!(CliError::NotLoggedIn("x".into()).exit_code(), 3);
        assert_eq!(CliError::Network("x".into()).exit_code(), 6);
        assert_eq!(CliError::Interrupted("x".into()).exit_code(), 130);
    }

    #[test]
    fn a_problem_prints_its_detail_then_each_field_and_the_request_id() {
        let problem = Problem::new(
            422,
            "Unprocessable Entity",
            "validation_failed",
            "2 problems",
            "rid-7",
        )
        .with_errors(vec![
            FieldError {
                field: "name".into(),
                message: "must be a DNS label".into(),
            },
            FieldError {
                field: "node_pools[0].count".into(),
                message: "must be at least 1".into(),
            },
        ]);
        let e = CliError::Api {
            status: 422,
            problem: Some(Box::new(problem)),
            request_id: Some("rid-7".into()),
        };
        assert_eq!(
            e.to_string(),
            "the API refused the request (422 validation_failed):"
        );
        assert_eq!(
            e.details(),
            [
                "name: must be a DNS label",
                "node_pools[0].count: must be at least 1",
                "request id: rid-7"
            ]
        );
    }

    /// The API's words that name what a CLI user never types are said in the CLI's words, and
    /// a refusal that leaves a person guessing says what to do next.
    #[test]
    fn the_api_s_words_become_the_cli_s() {
        let answer = |status: u16, code: &str, detail: &str| CliError::Api {
            status,
            problem: Some(Box::new(Problem::new(status, "t", code, detail, "r"))),
            request_id: None,
        };
        let no_org = answer(
            400,
            "organization_required",
            "pass the `organization` query parameter or the X-Platform-Organization header",
        );
        assert!(no_org.to_string().contains("-O ORG"), "{no_org}");
        assert!(!no_org.to_string().contains("header"), "{no_org}");
        let last = answer(409, "last_pool", "a cluster keeps at least one node pool");
        assert!(
            last.details()
                .iter()
                .any(|l| l.contains("kubesvc cluster delete")),
            "{:?}",
            last.details()
        );
        let refused = answer(401, "unauthorized", "invalid bearer token");
        assert!(
            refused
                .details()
                .iter()
                .any(|l| l.contains("kubesvc auth login")),
            "{:?}",
            refused.details()
        );
        assert_eq!(
            answer(404, "not_found", "x").details(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_single_field_error_that_is_the_detail_is_not_repeated() {
        let problem = Problem::new(
            422,
            "Unprocessable Entity",
            "validation_failed",
            "name: bad",
            "r",
        )
        .with_errors(vec![FieldError {
            field: "name".into(),
            message: "bad".into(),
        }]);
        let e = CliError::Api {
            status: 422,
            problem: Some(Box::new(problem)),
            request_id: Some("r".into()),
        };
        assert_eq!(e.details(), ["request id: r"]);
    }
}
