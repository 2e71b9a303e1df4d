//! Reading a secret (a token, a password, a client secret): from a prompt that does not echo,
//! from standard input, or from a named environment variable, never from the command line,
//! where every user of the machine can read it through `ps`.

use std::io::{BufRead, IsTerminal};

use crate::args::SecretFlags;
use crate::error::CliError;

/// Where to read one secret from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    Prompt,
    Stdin,
    Env(String),
}

impl From {
    pub fn of(flags: &SecretFlags) -> From {
        match (&flags.secret_from_env, flags.secret_stdin) {
            (Some(var), _) => From::Env(var.clone()),
            (None, true) => From::Stdin,
            (None, false) => From::Prompt,
        }
    }
}

/// Reads the secret `what` names (`password`, `token`…); an empty one is refused here, before
/// any request.
pub fn read(from: &From, what: &str) -> Result<String, CliError> {
    read_or(from, what, "--secret-stdin or --secret-from-env VAR")
}

/// [`read`], where off a terminal the person is told `instead`: the flags this command has.
pub fn read_or(from: &From, what: &str, instead: &str) -> Result<String, CliError> {
    let secret = match from {
        From::Env(var) => std::env::var(var).map_err(|_| {
            CliError::usage(format!(
                "the environment variable {var} is not set (it should hold the {what})"
            ))
        })?,
        From::Stdin => {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map_err(|e| {
                CliError::Local(format!("reading the {what} from standard input: {e}"))
            })?;
            line.trim_end_matches(['\n', '\r']).to_owned()
        }
        From::Prompt => {
            if !std::io::stdin().is_terminal() {
                return Err(CliError::usage(format!(
                    "no terminal to ask for the {what} on: use {instead}"
                )));
            }
            rpassword::prompt_password(format!("{}: ", crate::output::capitalised(what)))
                .map_err(|e| CliError::Local(format!("reading the {what}: {e}")))?
        }
    };
    if secret.trim().is_empty() {
        return Err(CliError::usage(format!("the {what} is empty")));
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_variable_wins_then_stdin_then_the_prompt() {
        let flags = |stdin, env: Option<&str>| SecretFlags {
            secret_stdin: stdin,
            secret_from_env: env.map(str::to_owned),
        };
        assert_eq!(From::of(&flags(false, Some("PW"))), From::Env("PW".into()));
        assert_eq!(From::of(&flags(true, None)), From::Stdin);
        assert_eq!(From::of(&flags(false, None)), From::Prompt);
    }

    #[test]
    fn an_unset_variable_is_a_usage_error_that_names_it_not_a_value() {
        let e = read(&From::Env("KUBESVC_TEST_UNSET_VARIABLE".into()), "password").err();
        assert_eq!(e.as_ref().map(CliError::exit_code), Some(2));
        assert!(e.is_some_and(|e| e.to_string().contains("KUBESVC_TEST_UNSET_VARIABLE")));
        assert_eq!(crate::output::capitalised("password"), "Password");
    }
}
