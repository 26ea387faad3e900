//! Allocation counting: a counting global allocator (Rust side), a process-wide malloc counter
//! when tools/bench/bench_alloc_count.c is preloaded, and page faults; and the section they
//! measure, what one predict allocates.

use super::*;

pub(crate) struct CountingAlloc;
pub(crate) static RUST_BYTES: AtomicU64 = AtomicU64::new(0);
pub(crate) static RUST_CALLS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        RUST_BYTES.fetch_add(layout.size() as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        RUST_BYTES.fetch_add(layout.size() as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        RUST_BYTES.fetch_add(new_size as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
pub(crate) static GLOBAL: CountingAlloc = CountingAlloc;

/// The process-wide counter of tools/bench/bench_alloc_count.c, when it is preloaded.
pub(crate) struct ProcessCounter {
    pub(crate) bytes: unsafe extern "C" fn() -> u64,
    pub(crate) calls: unsafe extern "C" fn() -> u64,
}

pub(crate) fn process_counter() -> Option<ProcessCounter> {
    // SAFETY: dlsym on the global scope; the symbols, when present, have exactly these signatures.
    unsafe {
        let b = libc::dlsym(libc::RTLD_DEFAULT, c"bench_alloc_bytes".as_ptr());
        let c = libc::dlsym(libc::RTLD_DEFAULT, c"bench_alloc_calls".as_ptr());
        if b.is_null() || c.is_null() {
            return None;
        }
        Some(ProcessCounter {
            bytes: std::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn() -> u64>(b),
            calls: std::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn() -> u64>(c),
        })
    }
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Counts {
    pub(crate) rust_bytes: u64,
    pub(crate) rust_calls: u64,
    pub(crate) proc_bytes: u64,
    pub(crate) proc_calls: u64,
    pub(crate) minflt: u64,
}

pub(crate) fn minor_faults() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init().ru_minflt as u64
    }
}

pub(crate) fn counts(pc: &Option<ProcessCounter>) -> Counts {
    let (proc_bytes, proc_calls) = match pc {
        // SAFETY: plain reads of the shim's counters.
        Some(p) => unsafe { ((p.bytes)(), (p.calls)()) },
        None => (0, 0),
    };
    Counts {
        rust_bytes: RUST_BYTES.load(Relaxed),
        rust_calls: RUST_CALLS.load(Relaxed),
        proc_bytes,
        proc_calls,
        minflt: minor_faults(),
    }
}

pub(crate) fn delta(a: Counts, b: Counts) -> Counts {
    Counts {
        rust_bytes: b.rust_bytes - a.rust_bytes,
        rust_calls: b.rust_calls - a.rust_calls,
        proc_bytes: b.proc_bytes - a.proc_bytes,
        proc_calls: b.proc_calls - a.proc_calls,
        minflt: b.minflt - a.minflt,
    }
}

/// Median of each counter over `runs` calls of `f` (after one warm-up call).
pub(crate) fn count_per_call(
    pc: &Option<ProcessCounter>,
    runs: usize,
    mut f: impl FnMut(),
) -> Counts {
    f();
    let mut all = Vec::new();
    for _ in 0..runs {
        let a = counts(pc);
        f();
        all.push(delta(a, counts(pc)));
    }
    let med = |sel: fn(&Counts) -> u64| {
        let mut v: Vec<u64> = all.iter().map(sel).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    Counts {
        rust_bytes: med(|c| c.rust_bytes),
        rust_calls: med(|c| c.rust_calls),
        proc_bytes: med(|c| c.proc_bytes),
        proc_calls: med(|c| c.proc_calls),
        minflt: med(|c| c.minflt),
    }
}

/// The counts of one predict in the library, one decoder run of ONNX Runtime alone, and the
/// control: one copy of the embedding, which the counter must see.
pub(crate) struct Allocations {
    pub(crate) per_predict: Counts,
    pub(crate) per_plain: Counts,
    pub(crate) per_copy: Counts,
}

/// Zero copies of the embedding per predict, shown rather than assumed: the heap bytes requested
/// during a predict, against ONNX Runtime alone's decoder run and the control copy. Drops the plain
/// decoder session, which no later section runs.
pub(crate) fn allocations_per_predict(
    run: &mut Run,
    predictor: &Predictor,
    embedding: &Embedding,
    prompts: &[Prompt],
    feed: &DecoderFeed,
    plain: RefCell<Session>,
    embedding_bytes: usize,
) -> Allocations {
    let per_predict = count_per_call(&run.pc, run.plan.counts, || {
        black_box(
            predictor
                .predict(embedding, prompts, PredictOptions::default())
                .expect("predict"),
        );
    });
    let per_plain = count_per_call(&run.pc, run.plan.counts, || {
        feed.run(&mut plain.borrow_mut())
    });
    let per_copy = count_per_call(&run.pc, 3.min(run.plan.counts), || {
        black_box(embedding.copy_to_host().expect("copy"));
    });
    let counts_json = |c: &Counts| {
        json!({"rust_bytes": c.rust_bytes, "rust_calls": c.rust_calls,
               "process_bytes": if run.pc.is_some() { json!(c.proc_bytes) } else { Value::Null },
               "process_calls": if run.pc.is_some() { json!(c.proc_calls) } else { Value::Null },
               "minor_page_faults": c.minflt})
    };
    run.extra.insert(
        "allocations".into(),
        json!({"embedding_bytes": embedding_bytes, "process_wide_counter": run.pc.is_some(),
               "library_predict": counts_json(&per_predict),
               "ort_alone_decoder_run": counts_json(&per_plain),
               "control_copy_to_host": counts_json(&per_copy)}),
    );
    drop(plain);
    Allocations {
        per_predict,
        per_plain,
        per_copy,
    }
}
