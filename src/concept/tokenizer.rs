//! SAM 3's text tokenizer: CLIP's byte-pair encoding as Meta's `SimpleTokenizer` applies it (its
//! cleaning in [`super::clean`]), framed into the 32 tokens SAM 3's text encoder takes: the
//! start token, the phrase's tokens, the end token, then zeros. A phrase longer than that is cut
//! to 30 tokens and the end token put last, as Meta's tokenizer does, and the cut is reported.
//!
//! The vocabulary is the user's (`bpe_simple_vocab_16e6.txt.gz` beside an export: samexporter's
//! wheel carries it): its first line is a header, the next 48,894 lines the merges in rank
//! order. The ids: the 256 byte symbols, the same with `</w>`, one per merge, then the start
//! (49406) and end (49407) tokens.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Tokens SAM 3's text encoder takes.
pub const CONTEXT_LENGTH: usize = 32;
/// Merges CLIP's vocabulary uses (`49152 - 256 - 2`).
const MERGES: usize = 48_894;
/// The start token's id.
pub const START: u32 = 49_406;
/// The end token's id.
pub const END: u32 = 49_407;
/// The largest vocabulary file read (the real one is 1.36 MB compressed, 3.4 MB plain).
const MAX_VOCABULARY_BYTES: u64 = 64 << 20;
/// Phrases whose splitting is remembered (a host asks for the same few phrases again).
const CACHE_ENTRIES: usize = 4096;

/// A phrase as SAM 3's text encoder takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    /// [`CONTEXT_LENGTH`] ids: start, the phrase's, end, then 0.
    pub ids: [i64; CONTEXT_LENGTH],
    /// How many of `ids` are the phrase's, start and end included (the rest is padding).
    pub len: usize,
    /// The phrase's own tokens before framing; more than `CONTEXT_LENGTH - 2` means it was cut.
    pub phrase_tokens: usize,
}

impl Tokens {
    /// Whether the phrase was longer than the text encoder takes, and was cut.
    pub fn truncated(&self) -> bool {
        self.phrase_tokens > CONTEXT_LENGTH - 2
    }
}

/// CLIP's byte-pair encoder with SAM 3's framing.
pub struct Tokenizer {
    /// Each merge's pair of symbol ids → (its rank, the merged symbol's id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Each byte's symbol id (the same symbol ending a word is 256 more).
    byte_ids: [u32; 256],
    /// Phrases already split, and their tokens.
    cache: Mutex<HashMap<String, Vec<u32>>>,
}

/// Whether CLIP's byte table keeps byte `b` as the character of the same number.
fn printable(b: u8) -> bool {
    (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b)
}

/// CLIP's reversible byte → character table (printable Latin-1 stays, the rest moves to 256 and
/// above), and each byte's id: the printable bytes first, then the others, each in byte order
/// (so id 0 is '!').
fn byte_symbols() -> ([char; 256], [u32; 256]) {
    let mut chars = ['\0'; 256];
    let mut ids = [0u32; 256];
    let mut moved = 256u32;
    for b in 0..=255u8 {
        chars[b as usize] = if printable(b) {
            char::from(b)
        } else {
            moved += 1;
            char::from_u32(moved - 1).expect("below U+0200")
        };
    }
    let order = (0..=255u8)
        .filter(|&b| printable(b))
        .chain((0..=255u8).filter(|&b| !printable(b)));
    for (id, b) in order.enumerate() {
        ids[b as usize] = id as u32;
    }
    (chars, ids)
}

impl Tokenizer {
    /// Reads a vocabulary file: gzip-compressed (as CLIP and SAM 3 ship it) or plain text.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = crate::files::open_regular(path, "a BPE vocabulary")?;
        let mut raw = Vec::new();
        file.take(MAX_VOCABULARY_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if raw.len() as u64 > MAX_VOCABULARY_BYTES {
            return Err(Error::model(path, "is over 64 MiB: not a BPE vocabulary"));
        }
        let text = if raw.starts_with(&[0x1f, 0x8b]) {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(raw.as_slice())
                .take(MAX_VOCABULARY_BYTES + 1)
                .read_to_end(&mut text)
                .map_err(|e| Error::model(path, format!("is not a readable gzip file ({e})")))?;
            if text.len() as u64 > MAX_VOCABULARY_BYTES {
                return Err(Error::model(
                    path,
                    "inflates past 64 MiB: not a BPE vocabulary",
                ));
            }
            text
        } else {
            raw
        };
        let text = String::from_utf8(text)
            .map_err(|_| Error::model(path, "is not UTF-8 text: not a BPE vocabulary"))?;
        Self::from_vocabulary(&text).map_err(|reason| Error::model(path, reason))
    }

    /// Reads the vocabulary's text: a header line, then one merge (`a b`) per line.
    pub fn from_vocabulary(text: &str) -> std::result::Result<Self, String> {
        let (chars, byte_ids) = byte_symbols();
        let lines: Vec<&str> = text.split('\n').skip(1).take(MERGES).collect();
        if lines.len() < MERGES {
            return Err(format!(
                "holds {} merges where CLIP's vocabulary has {MERGES}",
                lines.len()
            ));
        }
        let mut pairs = Vec::with_capacity(MERGES);
        for (rank, line) in lines.iter().enumerate() {
            let pair = line
                .split_once(' ')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains(' '))
                .ok_or_else(|| format!("line {} is not a merge (two symbols)", rank + 2))?;
            pairs.push(pair);
        }
        // A symbol's id, as Meta's encoder dictionary gives it: a byte's, or the last merge that
        // makes that symbol (a later entry of the same text replaces an earlier one).
        let mut ids: HashMap<String, u32> = HashMap::with_capacity(2 * 256 + MERGES);
        for b in 0..256 {
            ids.insert(chars[b].to_string(), byte_ids[b]);
            ids.insert(format!("{}</w>", chars[b]), 256 + byte_ids[b]);
        }
        for (rank, (first, second)) in pairs.iter().enumerate() {
            ids.insert(format!("{first}{second}"), 512 + rank as u32);
        }
        // Each merge's pair of ids → its rank (the last, where a pair is listed twice) and the
        // merged symbol's id.
        let mut merges = HashMap::with_capacity(MERGES);
        for (rank, (first, second)) in pairs.iter().enumerate() {
            let id = |s: &str| {
                ids.get(s).copied().ok_or_else(|| {
                    format!(
                        "line {}: the symbol {} is made by no merge",
                        rank + 2,
                        crate::text::printable(s)
                    )
                })
            };
            let pair = (id(first)?, id(second)?);
            merges.insert(pair, (rank as u32, ids[&format!("{first}{second}")]));
        }
        Ok(Tokenizer {
            merges,
            byte_ids,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The phrase's tokens, cleaned and split as Meta's tokenizer does, without the framing.
    pub fn encode(&self, phrase: &str) -> Vec<u32> {
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(phrase).cloned()) {
            return hit;
        }
        let text = super::clean::clean(phrase);
        let mut out = Vec::new();
        for piece in pieces(&text) {
            match piece {
                Piece::Start => out.push(START),
                Piece::End => out.push(END),
                Piece::Text(word) => self.bpe(word.as_bytes(), &mut out),
            }
        }
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(phrase.to_string(), out.clone());
        }
        out
    }

    /// The phrase framed for the text encoder: start, its tokens (cut to fit), end, zeros.
    pub fn tokens(&self, phrase: &str) -> Tokens {
        let phrase_ids = self.encode(phrase);
        let mut ids = [0i64; CONTEXT_LENGTH];
        ids[0] = START as i64;
        let kept = phrase_ids.len().min(CONTEXT_LENGTH - 2);
        for (slot, &id) in ids[1..].iter_mut().zip(&phrase_ids[..kept]) {
            *slot = id as i64;
        }
        ids[kept + 1] = END as i64;
        Tokens {
            ids,
            len: kept + 2,
            phrase_tokens: phrase_ids.len(),
        }
    }

    /// One word's byte-pair encoding: its bytes as symbols (the last one ending the word), then
    /// the pair of lowest rank merged everywhere, again, until no pair is a merge.
    fn bpe(&self, word: &[u8], out: &mut Vec<u32>) {
        let mut symbols: Vec<u32> = word.iter().map(|&b| self.byte_ids[b as usize]).collect();
        if let Some(last) = symbols.last_mut() {
            *last += 256;
        }
        loop {
            let best = symbols
                .windows(2)
                .filter_map(|p| {
                    self.merges
                        .get(&(p[0], p[1]))
                        .map(|&(rank, _)| (rank, (p[0], p[1])))
                })
                .min();
            let Some((_, pair)) = best else { break };
            let merged = self.merges[&pair].1;
            let mut next = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && (symbols[i], symbols[i + 1]) == pair {
                    next.push(merged);
                    i += 2;
                } else {
                    next.push(symbols[i]);
                    i += 1;
                }
            }
            symbols = next;
        }
        out.extend(symbols);
    }
}

/// A piece of cleaned text the encoder splits apart before merging.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Start,
    End,
    Text(&'a str),
}

/// CLIP's pre-tokenizer: the special tokens' names, English contractions, runs of letters, single
/// digits, and runs of other non-space characters (Meta's pattern, case-insensitive).
fn pieces(text: &str) -> Vec<Piece<'_>> {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let pattern = PATTERN.get_or_init(|| {
        regex::Regex::new(
            r"(?i)<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+",
        )
        .expect("a valid pattern")
    });
    pattern
        .find_iter(text)
        .map(|m| match m.as_str() {
            s if s.eq_ignore_ascii_case("<start_of_text>") => Piece::Start,
            s if s.eq_ignore_ascii_case("<end_of_text>") => Piece::End,
            s => Piece::Text(s),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_clips() {
        let (chars, ids) = byte_symbols();
        assert_eq!(chars[b'!' as usize], '!');
        assert_eq!(chars[b' ' as usize], 'Ġ');
        assert_eq!(chars[0], 'Ā');
        assert_eq!(chars[0xad], 'Ń');
        assert_eq!(ids[b'!' as usize], 0);
        assert_eq!(ids[b'a' as usize], 64);
        assert_eq!(ids[0], 188);
    }

    #[test]
    fn text_is_split_as_clip_splits_it() {
        let texts: Vec<String> = pieces("it's 12 dogs!! <end_of_text>")
            .into_iter()
            .map(|p| format!("{p:?}"))
            .collect();
        assert_eq!(
            texts,
            [
                "Text(\"it\")",
                "Text(\"'s\")",
                "Text(\"1\")",
                "Text(\"2\")",
                "Text(\"dogs\")",
                "Text(\"!!\")",
                "End"
            ]
        );
    }
}
