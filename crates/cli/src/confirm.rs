//! The question a destructive command asks before it runs, as doctl and gh ask it: on a
//! terminal it says what goes and what follows, and waits for the name (for what holds other
//! things: a cluster, an auth server) or for `y`; `--yes` skips it; off a terminal, without
//! `--yes`, the command refuses (exit 2) rather than destroy something nobody confirmed.

use std::io::{BufRead, IsTerminal, Write};

use crate::args::YesFlag;
use crate::error::CliError;

/// What the person answers to go on.
pub enum Answer<'a> {
    /// The object's name, typed again.
    Name(&'a str),
    /// `y` or `yes`.
    Yes,
}

/// One destructive action about to run.
pub struct Question<'a> {
    /// What runs, as a command line says it: "delete cluster prod-1".
    pub action: String,
    /// What follows from it, in a sentence.
    pub consequence: &'a str,
    pub answer: Answer<'a>,
}

impl Question<'_> {
    /// Asks on the terminal unless `--yes` was given; `Ok` means go on.
    pub fn ask(&self, flag: YesFlag) -> Result<(), CliError> {
        if flag.yes {
            return Ok(());
        }
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(CliError::usage(format!(
                "refusing to {} without confirmation: there is no terminal to ask on; pass --yes \
                 (-y) to do it without asking",
                self.action
            )));
        }
        let mut err = std::io::stderr().lock();
        let prompt = match self.answer {
            Answer::Name(name) => format!("Type {name} to confirm: "),
            Answer::Yes => format!("{}? [y/N] ", crate::output::capitalised(&self.action)),
        };
        // A failed write to the terminal only loses the question's words; the answer decides.
        let _ = write!(err, "{}\n{prompt}", self.consequence);
        let _ = err.flush();
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError::Local(format!("reading the answer: {e}")))?;
        if self.accepts(line.trim()) {
            Ok(())
        } else {
            Err(CliError::Declined(format!(
                "not confirmed: did not {}",
                self.action
            )))
        }
    }

    fn accepts(&self, typed: &str) -> bool {
        match self.answer {
            Answer::Name(name) => typed == name,
            Answer::Yes => matches!(typed.to_ascii_lowercase().as_str(), "y" | "yes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_name_or_a_yes_goes_on() {
        let named = Question {
            action: "delete cluster prod-1".into(),
            consequence: "",
            answer: Answer::Name("prod-1"),
        };
        let table = [
            ("prod-1", true),
            ("prod-1 ", false),
            ("prod", false),
            ("y", false),
            ("", false),
        ];
        for (typed, goes) in table {
            assert_eq!(named.accepts(typed), goes, "{typed:?}");
        }
        let yes_no = Question {
            answer: Answer::Yes,
            ..named
        };
        for (typed, goes) in [
            ("y", true),
            ("YES", true),
            ("", false),
            ("n", false),
            ("yep", false),
        ] {
            assert_eq!(yes_no.accepts(typed), goes, "{typed:?}");
        }
    }

    #[test]
    fn yes_skips_the_question_even_off_a_terminal() {
        let q = Question {
            action: "delete node x".into(),
            consequence: "",
            answer: Answer::Yes,
        };
        assert!(q.ask(YesFlag { yes: true }).is_ok());
    }
}
