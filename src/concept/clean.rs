//! The cleaning SAM 3's tokenizer applies to a phrase before it splits it: Meta's `_clean_lower`
//! (`ftfy.fix_text`, HTML entities decoded twice, whitespace collapsed, lower case), written
//! again in Rust. Of ftfy's fixes, those that change everyday text are here (curly quotes,
//! Latin ligatures, fullwidth forms, C1 controls read as Windows-1252, terminal escapes, control
//! characters, line breaks, NFC); its repair of mojibake (`cafÃ©` → `café`) is not, and HTML
//! entities are decoded for the numeric forms and the common names only (docs/sam3.md).

use unicode_normalization::UnicodeNormalization;

/// `text` as Meta's tokenizer sees it after cleaning.
pub(crate) fn clean(text: &str) -> String {
    // ftfy decodes HTML entities itself unless the text looks like HTML (holds a '<'), then
    // Meta's cleaning decodes them twice more.
    let mut text = fix_text(text);
    for _ in 0..2 {
        text = unescape_html(&text);
    }
    let collapsed: Vec<&str> = text.split(is_space).filter(|s| !s.is_empty()).collect();
    collapsed.join(" ").to_lowercase()
}

/// Python's `str.isspace`, which `\s` and `strip` follow: Unicode white space and the four
/// information separators.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The part of `ftfy.fix_text` (ftfy 6, default settings) that this tokenizer reproduces.
fn fix_text(text: &str) -> String {
    let mut text = if text.contains('<') {
        text.to_string()
    } else {
        unescape_html(text)
    };
    text = remove_terminal_escapes(&text);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // C1 controls are almost always Windows-1252 bytes read as Latin-1.
            '\u{80}'..='\u{9f}' => out.push(windows_1252(c)),
            '\u{2bc}' | '\u{2018}'..='\u{201b}' => out.push('\''),
            '\u{201c}'..='\u{201f}' => out.push('"'),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push('\n');
            }
            '\u{2028}' | '\u{2029}' => out.push('\n'),
            '\u{3000}' => out.push(' '),
            // Fullwidth and halfwidth forms: as NFKC writes them.
            '\u{ff01}'..='\u{ffef}' => out.extend(std::iter::once(c).nfkc()),
            c if control(c) => {}
            c => match ligature(c) {
                Some(s) => out.push_str(s),
                None => out.push(c),
            },
        }
    }
    out.nfc().collect()
}

/// ftfy's control characters, removed.
fn control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}' | '\u{e}'..='\u{1f}' | '\u{7f}'
        | '\u{206a}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffc}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e007f}')
}

/// The Latin ligatures ftfy spells out.
fn ligature(c: char) -> Option<&'static str> {
    Some(match c {
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'ŉ' => "ʼn",
        'Ǆ' => "DŽ",
        'ǅ' => "Dž",
        'ǆ' => "dž",
        'Ǉ' => "LJ",
        'ǈ' => "Lj",
        'ǉ' => "lj",
        'Ǌ' => "NJ",
        'ǋ' => "Nj",
        'ǌ' => "nj",
        'Ǳ' => "DZ",
        'ǲ' => "Dz",
        'ǳ' => "dz",
        'ﬀ' => "ff",
        'ﬁ' => "fi",
        'ﬂ' => "fl",
        'ﬃ' => "ffi",
        'ﬄ' => "ffl",
        'ﬅ' => "ſt",
        'ﬆ' => "st",
        _ => return None,
    })
}

/// A C1 control character as the Windows-1252 character of the same byte (itself where that
/// byte is undefined there).
fn windows_1252(c: char) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    HIGH[c as usize - 0x80]
}

/// Removes ANSI terminal escapes (`ESC [ digits;… letter`).
fn remove_terminal_escapes(text: &str) -> String {
    if !text.contains('\u{1b}') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let params = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(tail.len());
        match tail[params..].chars().next() {
            Some(c) if c.is_ascii_alphabetic() => rest = &tail[params + 1..],
            _ => {
                out.push_str("\u{1b}[");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Named entities decoded, with their `;` (and, for the legacy ones HTML lets go without it,
/// also without).
const ENTITIES: [(&str, char, bool); 32] = [
    ("amp", '&', true),
    ("lt", '<', true),
    ("gt", '>', true),
    ("quot", '"', true),
    ("apos", '\'', false),
    ("nbsp", '\u{a0}', true),
    ("copy", '©', true),
    ("reg", '®', true),
    ("trade", '™', false),
    ("hellip", '…', false),
    ("mdash", '—', false),
    ("ndash", '–', false),
    ("lsquo", '‘', false),
    ("rsquo", '’', false),
    ("ldquo", '“', false),
    ("rdquo", '”', false),
    ("euro", '€', false),
    ("pound", '£', true),
    ("yen", '¥', true),
    ("cent", '¢', true),
    ("deg", '°', true),
    ("times", '×', true),
    ("divide", '÷', true),
    ("laquo", '«', true),
    ("raquo", '»', true),
    ("middot", '·', true),
    ("bull", '•', false),
    ("eacute", 'é', true),
    ("egrave", 'è', true),
    ("agrave", 'à', true),
    ("uuml", 'ü', true),
    ("ouml", 'ö', true),
];

/// Python's `html.unescape` for numeric references and the names in [`ENTITIES`].
fn unescape_html(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        match entity(tail) {
            Some((decoded, used)) => {
                out.push_str(&decoded);
                rest = &tail[used..];
            }
            None => {
                out.push('&');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The entity at the start of `tail` (after its '&'): what it decodes to and its length.
fn entity(tail: &str) -> Option<(String, usize)> {
    if let Some(num) = tail.strip_prefix('#') {
        let (digits, radix, skip) = match num.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16, 2),
            None => (num, 10, 1),
        };
        let len = digits
            .find(|c: char| !c.is_digit(radix))
            .unwrap_or(digits.len());
        if len == 0 {
            return None;
        }
        let semicolon = digits[len..].starts_with(';') as usize;
        let code = u32::from_str_radix(&digits[..len], radix).unwrap_or(u32::MAX);
        return Some((numeric(code), skip + len + semicolon));
    }
    for (name, c, legacy) in ENTITIES {
        if let Some(after) = tail.strip_prefix(name) {
            if after.starts_with(';') {
                return Some((c.to_string(), name.len() + 1));
            }
            if legacy {
                return Some((c.to_string(), name.len()));
            }
        }
    }
    None
}

/// A numeric character reference as HTML5 decodes it.
fn numeric(code: u32) -> String {
    match code {
        0x80..=0x9f => windows_1252(char::from_u32(code).expect("C1")).to_string(),
        0 | 0xd800..=0xdfff => '\u{fffd}'.to_string(),
        c if c > 0x10ffff => '\u{fffd}'.to_string(),
        // Python drops the noncharacters and most controls HTML forbids.
        0x1..=0x8 | 0xb | 0xe..=0x1f | 0x7f | 0xfdd0..=0xfdef => String::new(),
        c if c & 0xfffe == 0xfffe => String::new(),
        c => char::from_u32(c).map(String::from).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyday_text_is_cleaned_as_metas_tokenizer_cleans_it() {
        assert_eq!(clean("  A  Yellow\tSchool\nBUS "), "a yellow school bus");
        assert_eq!(clean("café &amp; dog"), "café & dog");
        assert_eq!(clean("&amp;amp;amp;"), "&");
        assert_eq!(clean("<b>&amp;amp;amp;</b>"), "<b>&amp;</b>");
        assert_eq!(clean("“quoted” ‘and’"), "\"quoted\" 'and'");
        assert_eq!(clean("ﬁsh"), "fish");
        assert_eq!(clean("ＡＢＣ１２３"), "abc123");
        assert_eq!(clean("e\u{301}"), "é");
        assert_eq!(clean("\u{1b}[31mred\u{1b}[0m"), "red");
        assert_eq!(clean("a\u{0}b\u{feff}"), "ab");
        assert_eq!(clean("&#39;&#x41;&#65"), "'aa");
        assert_eq!(clean(""), "");
    }
}
