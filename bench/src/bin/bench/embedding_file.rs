//! Saving and loading an embedding (sam2::embedding_file) against the floors of plain file I/O:
//! the same bytes copied and written, with and without fsync, and read back into a reused or a
//! fresh buffer.

use super::*;

/// [library, memcpy + write + fsync, memcpy + write] for the save; [library, a read into a reused
/// buffer, a read into a fresh one] for the load; the file's length.
pub(crate) struct SaveLoad {
    pub(crate) save: Vec<Option<Stat>>,
    pub(crate) load: Vec<Option<Stat>>,
    pub(crate) file_len: usize,
}

/// The save/load section: the embedding saved to out/bench_embedding.safetensors and loaded back.
pub(crate) fn save_and_load(
    run: &Run,
    encoder: &Encoder,
    embedding: &Embedding,
    embedding_bytes: usize,
) -> Res<SaveLoad> {
    let emb_path = run.out_dir.join("bench_embedding.safetensors");
    let floor_path = run.out_dir.join("bench_floor_write.bin");
    let write_floor = |staging: &mut Vec<u8>, sync: bool| {
        let mut off = 0;
        for t in embedding.tensors() {
            let b = t.host_bytes().expect("host");
            staging[off..off + b.len()].copy_from_slice(b);
            off += b.len();
        }
        let mut f = std::fs::File::create(&floor_path).expect("create");
        f.write_all(staging).expect("write");
        if sync {
            f.sync_all().expect("fsync");
        }
    };
    let save = {
        let mut staging = vec![0u8; embedding_bytes];
        let mut staging2 = vec![0u8; embedding_bytes];
        let mut lib = || timed(|| sam2::embedding_file::save(embedding, &emb_path).expect("save"));
        let mut floor_sync = || timed(|| write_floor(&mut staging, true));
        let mut floor_nosync = || timed(|| write_floor(&mut staging2, false));
        interleaved(
            SETTLE,
            2,
            run.plan.io_runs,
            &mut [&mut lib, &mut floor_sync, &mut floor_nosync],
        )
    };
    let file_len = std::fs::metadata(&emb_path)?.len() as usize;
    let load = {
        let mut read_buf = vec![0u8; file_len];
        let fp = encoder.fingerprint();
        let mut lib = || {
            timed(|| {
                black_box(sam2::embedding_file::load(&emb_path, Some(fp)).expect("load"));
            })
        };
        let mut floor = || {
            timed(|| {
                let mut f = std::fs::File::open(&emb_path).expect("open");
                f.read_exact(&mut read_buf).expect("read");
                black_box(&read_buf);
            })
        };
        // A load needs new memory for what it reads: the same read into a fresh allocation.
        let mut floor_fresh = || {
            timed(|| {
                let mut fresh = vec![0u8; file_len];
                let mut f = std::fs::File::open(&emb_path).expect("open");
                f.read_exact(&mut fresh).expect("read");
                black_box(&fresh);
            })
        };
        interleaved(
            SETTLE,
            2,
            run.plan.io_runs,
            &mut [&mut lib, &mut floor, &mut floor_fresh],
        )
    };
    let _ = std::fs::remove_file(&floor_path);
    Ok(SaveLoad {
        save,
        load,
        file_len,
    })
}
