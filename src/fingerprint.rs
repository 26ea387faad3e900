//! Model identity: a content hash of the encoder file, carried by every embedding it makes, so a
//! predictor can refuse an embedding made by another model.

use std::fmt;

/// 64-bit content hash of a model file, printed as `sam2fp1-<16 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u64);

const PRIME_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME_3: u64 = 0x1656_67B1_9E37_79F9;

#[inline]
fn round(acc: u64, word: u64) -> u64 {
    acc.wrapping_add(word.wrapping_mul(PRIME_2))
        .rotate_left(31)
        .wrapping_mul(PRIME_1)
}

#[inline]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(PRIME_2);
    h ^= h >> 29;
    h = h.wrapping_mul(PRIME_3);
    h ^ (h >> 32)
}

impl Fingerprint {
    /// Hashes bytes with four independent lanes (fast enough for a 100 MB model in tens of ms).
    pub fn of_bytes(bytes: &[u8]) -> Self {
        let mut lanes = [
            PRIME_1.wrapping_add(PRIME_2),
            PRIME_2,
            0,
            0u64.wrapping_sub(PRIME_1),
        ];
        let mut chunks = bytes.chunks_exact(32);
        for chunk in &mut chunks {
            for (i, lane) in lanes.iter_mut().enumerate() {
                let word = u64::from_le_bytes(chunk[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                *lane = round(*lane, word);
            }
        }
        let mut h = lanes[0]
            .rotate_left(1)
            .wrapping_add(lanes[1].rotate_left(7))
            .wrapping_add(lanes[2].rotate_left(12))
            .wrapping_add(lanes[3].rotate_left(18));
        h = h.wrapping_add(bytes.len() as u64);
        for byte in chunks.remainder() {
            h = (h ^ (*byte as u64).wrapping_mul(PRIME_3))
                .rotate_left(11)
                .wrapping_mul(PRIME_1);
        }
        Fingerprint(avalanche(h))
    }

    /// Parses the printed form.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("sam2fp1-")?;
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok().map(Fingerprint)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sam2fp1-{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differs_on_any_change_and_round_trips() {
        let a: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut b = a.clone();
        b[500] ^= 1;
        assert_ne!(Fingerprint::of_bytes(&a), Fingerprint::of_bytes(&b));
        assert_ne!(Fingerprint::of_bytes(&a[..999]), Fingerprint::of_bytes(&a));
        let fp = Fingerprint::of_bytes(&a);
        assert_eq!(Fingerprint::parse(&fp.to_string()), Some(fp));
        assert_eq!(Fingerprint::parse("sam2fp1-xyz"), None);
    }
}
