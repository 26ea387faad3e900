//! SAM 3's tokenizer against Meta's own (`SimpleTokenizer` of sam3 0.1.4, run on a corpus of
//! phrases by tools/references/sam3_tokens.py: accents, emoji, CJK and other scripts,
//! punctuation, case, whitespace, HTML entities, empty and over-long phrases), with CLIP's
//! vocabulary from samexporter's wheel (tools/setup/setup-sam3.sh sets both variables).

use std::path::PathBuf;

use sam2::concept::tokenizer::{Tokenizer, CONTEXT_LENGTH, END, START};
use serde_json::Value;

fn var(name: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: run tools/setup/setup-sam3.sh (the README's test command does)"
            )
        })
}

fn tokenizer() -> Tokenizer {
    Tokenizer::from_file(var("SAM2_SAM3_VOCAB")).expect("CLIP's vocabulary reads")
}

fn reference() -> Vec<Value> {
    let text = std::fs::read_to_string(var("SAM2_SAM3_TOKENS")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["context_length"], CONTEXT_LENGTH);
    json["cases"].as_array().unwrap().clone()
}

/// Every phrase of the corpus gets Meta's token ids, framed and padded as Meta's, and a phrase
/// longer than 30 tokens is cut as Meta cuts it and reported as cut.
#[test]
fn token_ids_are_metas_on_the_corpus() {
    let tokenizer = tokenizer();
    let cases = reference();
    assert!(cases.len() >= 80);
    let mut differ = Vec::new();
    let mut truncated = 0;
    for case in &cases {
        let phrase = case["phrase"].as_str().unwrap();
        let want: Vec<i64> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let encoded: Vec<u32> = case["encoded"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let got = tokenizer.tokens(phrase);
        if got.ids.to_vec() != want || tokenizer.encode(phrase) != encoded {
            differ.push(format!(
                "{phrase:?}: Meta {encoded:?}, ours {:?}",
                tokenizer.encode(phrase)
            ));
            continue;
        }
        assert_eq!(
            got.truncated(),
            encoded.len() > CONTEXT_LENGTH - 2,
            "{phrase:?}"
        );
        truncated += got.truncated() as usize;
        assert_eq!(got.ids[0], START as i64);
        assert_eq!(got.ids[got.len - 1], END as i64);
    }
    assert!(
        differ.is_empty(),
        "{} phrases differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert!(truncated >= 2, "the corpus has over-long phrases");
}

/// The golden ids of a few phrases, written out, so that a change to the reference is seen.
#[test]
fn a_few_phrases_have_the_ids_clip_gives_them() {
    let tokenizer = tokenizer();
    assert_eq!(
        tokenizer.encode("a yellow school bus"),
        [320, 4481, 1228, 2840]
    );
    assert_eq!(tokenizer.encode("Cat"), [2368]);
    let empty = tokenizer.tokens("");
    assert_eq!(empty.len, 2);
    assert_eq!(&empty.ids[..3], &[START as i64, END as i64, 0]);
}

/// A vocabulary that is not CLIP's is refused with a message saying why, not a panic.
#[test]
fn a_foreign_vocabulary_is_refused() {
    let dir = std::env::temp_dir().join(format!("sam2-concept-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        ("empty.txt", b"", "merges where CLIP's vocabulary has"),
        (
            "short.txt",
            b"header\na b\n",
            "merges where CLIP's vocabulary has",
        ),
        (
            "gz.txt.gz",
            &[0x1f, 0x8b, 0, 1, 2, 3],
            "not a readable gzip file",
        ),
        ("binary.txt", &[0xff, 0xfe, 0x00], "not UTF-8"),
    ];
    for (name, bytes, says) in cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = Tokenizer::from_file(&path)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains(says), "{name}: {err}");
    }
    let garbled: String = std::iter::once("header".to_string())
        .chain((0..48_894).map(|i| format!("q{i} z")))
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.join("garbled.txt");
    std::fs::write(&path, garbled).unwrap();
    let err = Tokenizer::from_file(&path)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("made by no merge"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
