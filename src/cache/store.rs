//! What the cache keeps: embeddings by key, least recently used first out, within a byte budget
//! per memory (host, device).

use std::collections::HashMap;
use std::sync::Arc;

use super::{CacheOptions, CacheStats};
use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::fingerprint::Fingerprint;
use crate::image::ImageView;

/// Identity of an embedding: the pixels, the model, and the memory the encoder writes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pixels: u128,
    fingerprint: Fingerprint,
    allocator: String,
    device_id: i32,
}

impl Key {
    pub(super) fn of(encoder: &Encoder, image: &ImageView<'_>) -> Key {
        let location = encoder.output_location();
        Key {
            pixels: pixel_hash(image),
            fingerprint: encoder.fingerprint(),
            allocator: location.allocator,
            device_id: location.device_id,
        }
    }
}

/// An image's key: the first 128 bits of the BLAKE3 hash of its visible pixels (row padding
/// excluded), its size and pixel format. Cryptographic, so that two different pictures with one
/// key cannot be made (an unkeyed XXH3 key could: a cached or tracked frame was then taken for
/// another); at 1080p it costs a few milliseconds against an encode of a second or more.
pub fn pixel_hash(image: &ImageView<'_>) -> u128 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(image.width as u64).to_le_bytes());
    hasher.update(&(image.height as u64).to_le_bytes());
    hasher.update(&[image.format as u8]);
    let row_bytes = image.width * image.format.channels();
    if image.stride == row_bytes {
        hasher.update(&image.data[..row_bytes * image.height]);
    } else {
        for row in 0..image.height {
            let start = row * image.stride;
            hasher.update(&image.data[start..start + row_bytes]);
        }
    }
    let digest = hasher.finalize();
    u128::from_le_bytes(digest.as_bytes()[..16].try_into().expect("16 bytes"))
}

struct Entry {
    embedding: Arc<Embedding>,
    bytes: usize,
    device: bool,
    last_used: u64,
}

/// The kept embeddings and the bytes they hold in each memory.
#[derive(Default)]
pub(super) struct Store {
    entries: HashMap<Key, Entry>,
    clock: u64,
    host_bytes: usize,
    device_bytes: usize,
}

impl Store {
    pub(super) fn lookup(&mut self, key: &Key) -> Option<Arc<Embedding>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|entry| {
            entry.last_used = clock;
            Arc::clone(&entry.embedding)
        })
    }

    pub(super) fn contains(&self, key: &Key) -> bool {
        self.entries.contains_key(key)
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes kept in host memory and in device memory.
    pub(super) fn bytes(&self) -> (usize, usize) {
        (self.host_bytes, self.device_bytes)
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.host_bytes = 0;
        self.device_bytes = 0;
    }

    fn used(&mut self, device: bool) -> &mut usize {
        if device {
            &mut self.device_bytes
        } else {
            &mut self.host_bytes
        }
    }

    /// Keeps an embedding, dropping the least recently used ones of its memory to fit the
    /// budget; counts evictions and rejections in `stats`.
    pub(super) fn insert(
        &mut self,
        key: Key,
        embedding: Arc<Embedding>,
        options: &CacheOptions,
        stats: &mut CacheStats,
    ) {
        if let Some(old) = self.entries.remove(&key) {
            *self.used(old.device) -= old.bytes;
        }
        let bytes: usize = embedding.tensors().iter().map(|t| t.byte_len()).sum();
        let device = !embedding.is_serializable();
        let budget = if device {
            options.device_budget
        } else {
            options.host_budget
        };
        if bytes > budget {
            stats.rejected += 1;
            return;
        }
        while *self.used(device) + bytes > budget {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| e.device == device)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(oldest) = oldest else { break };
            let entry = self.entries.remove(&oldest).expect("key just found");
            *self.used(device) -= entry.bytes;
            stats.evictions += 1;
        }
        self.clock += 1;
        *self.used(device) += bytes;
        self.entries.insert(
            key,
            Entry {
                embedding,
                bytes,
                device,
                last_used: self.clock,
            },
        );
    }
}
