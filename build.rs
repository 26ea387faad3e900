// Gives libsam2.so its SONAME, so hosts that link it record `libsam2.so` and `DllImport("sam2")`
// finds it. The header is not generated here (a test regenerates and compares it).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsam2.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
