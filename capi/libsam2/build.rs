// Gives libsam2.so its SONAME, `libsam2.so.<abi>`, so programs that link it record the ABI they
// were built against. The ABI number follows the crate's semver compatibility: `0.MINOR` while the
// version is 0.x (a 0.x minor release may break the ABI), `MAJOR` from 1.0 on. The file cargo
// writes keeps the plain name `libsam2.so` (what `DllImport("sam2")` looks for); the install
// script (scripts/install.sh) lays out the versioned names. The header is not generated here (a
// test regenerates and compares it).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("set by cargo");
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("set by cargo");
        let abi = if major == "0" {
            format!("0.{minor}")
        } else {
            major
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsam2.so.{abi}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
