//! What the soaks measure of this process's memory: resident memory, glibc's heap, and ONNX
//! Runtime's shared CPU arena. Used by tests/soak.rs and tests/video_soak.rs.

use sam2::Predictor;

/// Resident set size of this process, in bytes.
pub fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Bytes the C heap has handed out and not had back (glibc's `mallinfo2`: `malloc` in use,
/// mapped blocks included), and bytes it holds from the system (in use or free).
pub fn heap() -> (u64, u64) {
    // SAFETY: mallinfo2 has no preconditions; it only reads the allocator's counters.
    let info = unsafe { libc::mallinfo2() };
    (
        (info.uordblks + info.hblkhd) as u64,
        (info.arena + info.hblkhd) as u64,
    )
}

/// Bytes ONNX Runtime's shared CPU arena holds from the system, and how many times it grew. The
/// arena is shared by every session of the process (src/runtime.rs); any predictor reads its
/// statistics. `SAM2_SOAK_SHOW_STATS` prints them all.
pub fn arena(predictor: &Predictor) -> (u64, u64) {
    let stats = predictor.arena_stats();
    if std::env::var_os("SAM2_SOAK_SHOW_STATS").is_some() {
        println!("{stats:?}");
    }
    let get = |key: &str| {
        stats
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    (get("TotalAllocated"), get("NumArenaExtensions"))
}
