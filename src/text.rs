//! Text from a file shown to a person: a model's metadata reaches terminals, logs and error
//! messages through the library's reports, so what it says is escaped and cut here, once, for
//! every surface (the C ABI's messages, .NET's exceptions, the command's output).

/// Characters a value shows at most before it is cut.
pub(crate) const SHOWN_CHARS: usize = 200;

/// `s` safe to print: control characters (escape sequences, BEL, newlines, C1 controls) and the
/// Unicode controls that reorder or hide text (bidirectional overrides and isolates, zero-width
/// marks) written as `\u{…}` escapes, and anything past [`SHOWN_CHARS`] characters cut with a note
/// of how much was left out.
pub(crate) fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4 * SHOWN_CHARS));
    for (shown, (i, c)) in s.char_indices().enumerate() {
        if shown == SHOWN_CHARS {
            let left = s[i..].chars().count();
            out.push_str(&format!("… ({left} more characters)"));
            break;
        }
        let hidden = matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
        );
        if c.is_control() || hidden {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_values_cut() {
        assert_eq!(printable("a.onnx sha256:00"), "a.onnx sha256:00");
        assert_eq!(
            printable("x\u{1b}[2J\u{7}\nprecision: fp32\r"),
            "x\\u{1b}[2J\\u{7}\\u{a}precision: fp32\\u{d}"
        );
        assert_eq!(printable("é中\u{202e}txt"), "é中\\u{202e}txt");
        let long = "y".repeat(100_000);
        let shown = printable(&long);
        assert!(shown.starts_with(&"y".repeat(SHOWN_CHARS)));
        assert!(shown.ends_with("… (99800 more characters)"), "{shown}");
        assert!(shown.len() < 300);
    }
}
