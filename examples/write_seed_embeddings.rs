//! Writes real embedding files (tiny models, both encoder families) into a directory: the seed
//! corpus of the embedding-file fuzz target (scripts/fuzz.sh).

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: write_seed_embeddings DIR"),
    );
    std::fs::create_dir_all(&dir).unwrap();
    sam2::runtime::init(None).unwrap();
    let models = std::env::var("SAM2_MODELS").unwrap_or_else(|_| "models".into());
    let pixels: Vec<u8> = (0..64 * 48 * 3).map(|i| (i * 37 % 251) as u8).collect();
    let image = sam2::ImageView::packed(&pixels, 64, 48, sam2::PixelFormat::Rgb).unwrap();
    for pair in ["tiny_a", "tiny_c", "tiny_a_fp16"] {
        let encoder =
            sam2::Encoder::new(format!("{models}/{pair}_encoder.onnx"), &Default::default())
                .unwrap();
        let embedding = encoder.encode(&image).unwrap();
        let path = dir.join(format!("{pair}.sam2"));
        sam2::embedding_file::save(&embedding, &path).unwrap();
        println!("{}", path.display());
    }
}
