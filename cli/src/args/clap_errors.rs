//! clap's errors as the command's usage errors: one line, in the project's words where it has
//! them, with clap's suggestion for a mistyped command or option kept.

use clap::error::{ContextKind, ErrorKind};

use super::values::or_list;
use super::Usage;

/// A clap error as one line: the project's wording where it has one (a value parser's message,
/// an unknown command or option), clap's own otherwise, with clap's suggestion kept.
pub(super) fn one_line(error: &clap::Error, command: Option<&str>, commands: &[String]) -> Usage {
    let help = match command {
        Some(c) => format!("sam2 {c} --help"),
        None => "sam2 --help".to_string(),
    };
    let context = |kind| error.get(kind).map(|v| v.to_string());
    let suggestion = context(ContextKind::SuggestedSubcommand)
        .or_else(|| context(ContextKind::SuggestedArg))
        .map(|s| format!("; did you mean {s}?"))
        .unwrap_or_default();
    let invalid = context(ContextKind::InvalidArg).unwrap_or_default();
    // The option's name without clap's `<VALUE>`.
    let option = invalid.split_whitespace().next().unwrap_or_default();
    let text = match error.kind() {
        ErrorKind::ValueValidation => match std::error::Error::source(error) {
            Some(ours) => ours.to_string(),
            None => clap_words(error, &help),
        },
        ErrorKind::MissingSubcommand => {
            let listed: Vec<&str> = commands
                .iter()
                .map(String::as_str)
                .filter(|c| *c != "help" && *c != "completions")
                .collect();
            format!("no command given: sam2 {} ({help})", or_list(&listed))
        }
        ErrorKind::InvalidSubcommand => {
            let given = context(ContextKind::InvalidSubcommand).unwrap_or_default();
            let listed: Vec<&str> = commands
                .iter()
                .map(String::as_str)
                .filter(|c| *c != "help")
                .collect();
            format!(
                "unknown command {given}{suggestion} (expected {}; {help})",
                or_list(&listed)
            )
        }
        ErrorKind::UnknownArgument if invalid.starts_with('-') => {
            let whose = command
                .map(|c| format!(" for sam2 {c}"))
                .unwrap_or_default();
            format!("unknown option {invalid}{whose}{suggestion} ({help})")
        }
        ErrorKind::UnknownArgument => match command {
            Some(c) => format!("sam2 {c}: unexpected argument {invalid}{suggestion} ({help})"),
            None => format!(
                "unknown command {invalid}{suggestion} (expected {}; {help})",
                or_list(&commands.iter().map(String::as_str).collect::<Vec<_>>())
            ),
        },
        ErrorKind::MissingRequiredArgument => {
            let missing = context(ContextKind::InvalidArg).unwrap_or_default();
            let missing = missing.replace(['<', '>'], "").replace("...", "");
            match command {
                Some(c) => format!("sam2 {c} needs {missing} ({help})"),
                None => format!("{missing} is needed ({help})"),
            }
        }
        ErrorKind::InvalidValue if context(ContextKind::InvalidValue).as_deref() == Some("") => {
            format!("{option} needs a value (see {help})")
        }
        _ => clap_words(error, &help),
    };
    Usage(text)
}

/// clap's own message on one line: its lines joined, without its usage and its "for more
/// information" line (the `--help` named at the end says where to look).
fn clap_words(error: &clap::Error, help: &str) -> String {
    let rendered = error.render().to_string();
    let lines: Vec<&str> = rendered
        .lines()
        .map(|l| l.trim())
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .collect();
    format!("{} ({help})", lines.join("; "))
}
