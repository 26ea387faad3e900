use super::values::or_list;
use super::*;
use crate::video_file::At;

fn parse_args(args: &[&str]) -> Result<Invocation, Usage> {
    parse(args.iter().map(|a| a.to_string()).collect())
}

fn track_of(args: &[&str]) -> Track {
    match parse_args(args) {
        Ok(Invocation {
            command: Command::Track(t),
            ..
        }) => t,
        Ok(_) => panic!("not track"),
        Err(Usage(text)) => panic!("{text}"),
    }
}

fn refused(args: &[&str]) -> String {
    match parse_args(args) {
        Err(Usage(text)) => text,
        Ok(_) => panic!("{args:?} accepted"),
    }
}

#[test]
fn clap_verifies_the_command_line_definition() {
    command().debug_assert();
}

#[test]
fn track_prompts_follow_the_order_of_object_and_frame() {
    let t = track_of(&[
        "track",
        "clip",
        "--model",
        "m",
        "--point",
        "1,2",
        "--point",
        "3,4,neg",
        "--object",
        "2",
        "--box",
        "5,6,7,8",
        "--object",
        "1",
        "--frame=8",
        "-p",
        "9,10",
        "-o",
        "out",
    ]);
    let point = |x, y, positive| sam2::Point { x, y, positive };
    assert_eq!(
        t.prompts,
        [
            TrackPrompt {
                object_id: 1,
                frame: At::Frame(0),
                points: vec![point(1.0, 2.0, true), point(3.0, 4.0, false)],
                bbox: None
            },
            TrackPrompt {
                object_id: 2,
                frame: At::Frame(0),
                points: vec![],
                bbox: Some([5.0, 6.0, 7.0, 8.0])
            },
            TrackPrompt {
                object_id: 1,
                frame: At::Frame(8),
                points: vec![point(9.0, 10.0, true)],
                bbox: None
            },
        ]
    );
    assert_eq!(t.frames, [PathBuf::from("clip")]);
    assert!(
        refused(&["track", "c", "-m", "m", "--box", "1,2,3,4", "--box", "1,2,3,4", "-o", "o"])
            .contains("--box given twice for object 1 on frame 0")
    );
}

#[test]
fn values_are_refused_in_the_projects_words_on_one_line() {
    let segment = ["segment", "i.png", "-m", "m", "-o", "o"];
    let with = |extra: &[&str]| {
        let mut args = segment.to_vec();
        args.extend_from_slice(extra);
        refused(&args)
    };
    assert_eq!(
        with(&["--point", "12"]),
        "--point 12: expected X,Y or X,Y,neg comma-separated values"
    );
    assert_eq!(
        with(&["--device", "tpu"]),
        format!("--device tpu: expected {}", {
            let names: Vec<&str> = Provider::ALL.iter().map(|p| p.info().short).collect();
            or_list(&names)
        })
    );
    assert!(with(&["--no-rewrite", "bogus"]).contains("`bogus` is no rewrite"));
    assert_eq!(
        with(&["--point", "1,1", "--box", "1,1,2,2", "-b", "1,1,2,2"]),
        "--box given twice: one box per object"
    );
    assert_eq!(
        with(&["--point", "1,2", "--color"]),
        "unknown option --color for sam2 segment (sam2 segment --help)"
    );
    assert!(with(&["--point", "1,2", "--multimsk"]).contains("did you mean --multimask?"));
    assert!(with(&["--point", "1,2", "--model"]).contains("--model needs a value"));
    assert!(refused(&["segmnt"]).contains("did you mean segment?"));
    assert!(refused(&[]).starts_with("no command given"));
    for text in [with(&["--point"]), refused(&["completions", "tcsh"])] {
        assert_eq!(text.lines().count(), 1, "{text}");
    }
}

#[test]
fn negative_numbers_and_repeated_options_keep_their_meaning() {
    match parse_args(&[
        "segment", "i.png", "-m", "a", "-m", "b", "--point", "-5,3", "-o", "o", "--quiet",
    ]) {
        Ok(Invocation {
            command: Command::Segment(s),
            quiet: true,
        }) => {
            assert_eq!(s.models.model, Some(PathBuf::from("b")));
            assert_eq!((s.points[0].x, s.points[0].y), (-5.0, 3.0));
        }
        _ => panic!("not parsed"),
    }
}
