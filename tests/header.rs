//! The committed header must be exactly what cbindgen generates from the source.
//! `SAM2_BLESS=1 cargo test --test header` rewrites it.

use std::path::PathBuf;

fn generate() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&root)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

#[test]
fn committed_header_matches_the_source() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include/sam2.h");
    let fresh = generate();
    if std::env::var_os("SAM2_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "include/sam2.h is stale (first difference at line {}); regenerate it with \
             `SAM2_BLESS=1 cargo test --test header` and commit it",
            first + 1
        );
    }
}

#[test]
fn version_macros_match_the_crate_version() {
    let header =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include/sam2.h"))
            .unwrap();
    let version: Vec<&str> = env!("CARGO_PKG_VERSION").split('.').collect();
    for (name, value) in ["MAJOR", "MINOR", "PATCH"].iter().zip(version) {
        let line = format!("#define SAM2_VERSION_{name} {value}");
        assert!(
            header.contains(&line),
            "header lacks `{line}`: update src/ffi/runtime.rs"
        );
    }
}
