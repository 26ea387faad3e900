//! What the CPU can do, where the library's choices depend on it.

/// Whether this CPU's int8 matrix kernels sum exactly: with VNNI on x86-64 (AVX512-VNNI or
/// AVX-VNNI) and the dot-product instructions on AArch64. Without VNNI, ONNX Runtime's AVX2 and
/// AVX-512 kernels multiply uint8 by int8 into saturating 16-bit pair sums (`VPMADDUBSW`), which
/// full-range keys and queries can overflow; the int8 variant of the encoder has 7-bit weights for
/// that reason, and 7-bit keys moved EdgeTAM's tracked logits by more than dropping a memory
/// frame does (3.6e-2 against 2.7e-2 mean). `Err` says why not.
pub(crate) fn int8_dot_products_exact() -> Result<(), &'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};
        // CPUID leaf 7: AVX512-VNNI is ECX bit 11 of sub-leaf 0, AVX-VNNI EAX bit 4 of sub-leaf
        // 1 (read directly: their names in `is_x86_feature_detected!` are newer than our MSRV);
        // the AVX-512 and AVX2 checks say the OS keeps those registers.
        // SAFETY: CPUID exists on every x86-64 CPU, and leaf 7 and its sub-leaf 1 are read only
        // where the CPU says it has them. (These functions are safe from Rust 1.87 on, unsafe in
        // our MSRV's.)
        #[allow(unused_unsafe)]
        let (avx512_vnni, avx_vnni) = unsafe {
            if __get_cpuid_max(0).0 < 7 {
                (false, false)
            } else {
                let leaf0 = __cpuid_count(7, 0);
                let avx_vnni = leaf0.eax >= 1 && __cpuid_count(7, 1).eax & (1 << 4) != 0;
                (leaf0.ecx & (1 << 11) != 0, avx_vnni)
            }
        };
        if (avx512_vnni && std::arch::is_x86_feature_detected!("avx512f"))
            || (avx_vnni && std::arch::is_x86_feature_detected!("avx2"))
        {
            return Ok(());
        }
        Err("this CPU has no VNNI, and ONNX Runtime's int8 kernels without it can saturate")
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            return Ok(());
        }
        Err("this CPU has no int8 dot-product instructions")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Err("int8 scores are used on x86-64 and AArch64 only")
    }
}
