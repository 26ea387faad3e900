//! SAM 3's concept model on the reduced, shape-faithful export (tools/setup/setup-sam3.sh makes
//! it with `sam2-export-sam3 --config reduced` from Meta's code, seeded random weights):
//! loading, encoding, phrases, exemplar boxes, the results' conventions, and the refusals.

use std::path::PathBuf;
use std::sync::OnceLock;

use sam2::concept::{Concept, ConceptModel, ConceptModelOptions, Exemplar, SegmentOptions};
use sam2::{Embedding, ImageView, OutputTarget, PixelFormat};

use crate::common;

fn var(name: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: run tools/setup/setup-sam3.sh (the README's test command does)"
            )
        })
}

pub fn models() -> PathBuf {
    var("SAM2_SAM3_MODELS")
}

pub fn options() -> ConceptModelOptions {
    ConceptModelOptions {
        output_target: OutputTarget::Host,
        vocabulary: Some(var("SAM2_SAM3_VOCAB")),
        ..Default::default()
    }
}

/// One model and one encode of the demo image for the tests that only read them.
fn shared() -> &'static (ConceptModel, Embedding) {
    static SHARED: OnceLock<(ConceptModel, Embedding)> = OnceLock::new();
    SHARED.get_or_init(|| {
        common::init_runtime();
        let model = ConceptModel::new(models(), &options()).expect("the reduced export loads");
        let image = common::read_pnm(&common::testdata("demo.ppm"));
        let view =
            ImageView::packed(&image.data, image.width, image.height, PixelFormat::Rgb).unwrap();
        let embedding = model.encode(&view).expect("encodes");
        (model, embedding)
    })
}

#[test]
fn a_phrase_and_boxes_give_instances_with_scores_boxes_and_masks() {
    let (model, embedding) = shared();
    assert_eq!(embedding.family().name(), "sam3");
    assert_eq!(embedding.image_size(), (800, 600));
    let concepts = [
        Concept::text("purple star"),
        Concept {
            text: None,
            exemplars: vec![Exemplar {
                rect: [52.0, 82.0, 327.0, 257.0],
                positive: true,
            }],
        },
    ];
    let out = model
        .segment(embedding, &concepts, &SegmentOptions::default())
        .expect("segments");
    assert_eq!(out.concepts.len(), 2);
    assert_eq!(out.concepts[1].phrase, "visual");
    for c in &out.concepts {
        assert!((0.0..=1.0).contains(&c.presence), "{c:?}");
        assert!(!c.truncated);
    }
    eprintln!(
        "presence {:?}, instances {:?}",
        out.concepts.iter().map(|c| c.presence).collect::<Vec<_>>(),
        out.concepts.iter().map(|c| c.instances).collect::<Vec<_>>()
    );
    let mut last = (usize::MAX, f32::INFINITY);
    for i in &out.instances {
        assert!(i.score > 0.5 && i.score <= 1.0);
        assert_eq!(i.mask.len(), 800 * 600);
        assert_eq!(i.area, i.mask.iter().map(|&v| v as u64).sum::<u64>());
        // Concepts in order, the best first within each.
        if i.concept == last.0 {
            assert!(i.score <= last.1);
        }
        last = (i.concept, i.score);
    }
}
