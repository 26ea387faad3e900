//! The value parsers: each refuses a value in the project's words, naming the option and what it
//! expects (clap puts that message on the one line of the usage error).

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use sam2::device::{MismatchPolicy, Provider};
use sam2::models::{Rewrite, Rewrites};

use super::Directions;
use crate::video_file::At;

/// Any path, as given (an empty one is the command's or the library's to refuse, as before).
pub(super) fn path(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

/// `-o OUT`: a path, not an empty one.
pub(super) fn output(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err(
            "-o needs a path, not an empty one (a prefix such as out/photo, or a \
                    directory)"
                .into(),
        );
    }
    Ok(PathBuf::from(text))
}

pub(super) fn numbers(
    text: &str,
    option: &str,
    count: std::ops::RangeInclusive<usize>,
) -> Result<Vec<f32>, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if !count.contains(&parts.len()) {
        let shape = if option == "--point" {
            "X,Y or X,Y,neg"
        } else {
            "X1,Y1,X2,Y2"
        };
        return Err(format!(
            "{option} {text}: expected {shape} comma-separated values"
        ));
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i == 2 && option == "--point" {
                return match *p {
                    "pos" | "+" | "1" => Ok(1.0),
                    "neg" | "-" | "0" => Ok(0.0),
                    _ => Err(format!(
                        "--point {text}: the third value is pos or neg, not {p}"
                    )),
                };
            }
            match p.parse::<f32>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(format!("{option} {text}: {p} is not a number")),
            }
        })
        .collect()
}

/// `--point X,Y[,neg]`: a click.
pub(super) fn point(text: &str) -> Result<sam2::Point, String> {
    let v = numbers(text, "--point", 2..=3)?;
    Ok(sam2::Point {
        x: v[0],
        y: v[1],
        positive: v.get(2) != Some(&0.0),
    })
}

/// `--box X1,Y1,X2,Y2`: four numbers. Whether they make a box is the library's rule
/// (`validate_prompts`: X2 ≥ X1, Y2 ≥ Y1, inside the image), refused as bad input (exit 3).
pub(super) fn box_value(text: &str) -> Result<[f32; 4], String> {
    let v = numbers(text, "--box", 4..=4)?;
    Ok([v[0], v[1], v[2], v[3]])
}

/// `--exemplar X1,Y1,X2,Y2[,neg]`: a SAM 3 exemplar box, positive unless `neg`. Whether it makes
/// a box inside the image is the library's rule (`validate_concepts`), refused as bad input.
pub(super) fn exemplar(text: &str) -> Result<sam2::concept::Exemplar, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let positive = match parts.get(4) {
        None | Some(&"pos") | Some(&"+") | Some(&"1") => true,
        Some(&"neg") | Some(&"-") | Some(&"0") => false,
        Some(other) => {
            return Err(format!(
                "--exemplar {text}: the fifth value is pos or neg, not {other}"
            ))
        }
    };
    if !(4..=5).contains(&parts.len()) {
        return Err(format!(
            "--exemplar {text}: expected X1,Y1,X2,Y2 or X1,Y1,X2,Y2,neg comma-separated values"
        ));
    }
    let v = numbers(&parts[..4].join(","), "--exemplar", 4..=4)?;
    Ok(sam2::concept::Exemplar {
        rect: [v[0], v[1], v[2], v[3]],
        positive,
    })
}

/// `--nms box|mask[:IOU]`: suppression of overlapping instances (IOU 0.7 unless given).
pub(super) fn nms(text: &str) -> Result<sam2::concept::Nms, String> {
    let (kind, iou) = match text.split_once(':') {
        Some((kind, iou)) => match iou.parse::<f32>() {
            Ok(v) if v > 0.0 && v <= 1.0 => (kind, v),
            _ => {
                return Err(format!(
                    "--nms {text}: the overlap after ':' is a number above 0, at most 1"
                ))
            }
        },
        None => (text, 0.7),
    };
    match kind {
        "box" | "boxes" => Ok(sam2::concept::Nms::Boxes(iou)),
        "mask" | "masks" => Ok(sam2::concept::Nms::Masks(iou)),
        "none" => Ok(sam2::concept::Nms::None),
        _ => Err(format!(
            "--nms {text}: expected box, mask or none, optionally with :IOU (box:0.5)"
        )),
    }
}

/// A whole number in `min..=max` for `option`.
pub(super) fn whole(
    option: &'static str,
    min: u32,
    max: u32,
) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
    move |text| match text.parse::<u32>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "{option} {text}: expected a whole number from {min} to {max}"
        )),
    }
}

/// A number in `[0, 1]` for `option`.
pub(super) fn fraction(
    option: &'static str,
) -> impl Fn(&str) -> Result<f32, String> + Clone + Send + Sync + 'static {
    move |text| match text.parse::<f32>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{option} {text}: expected a number from 0 to 1")),
    }
}

pub(super) fn tolerance(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "--tolerance {text}: expected a number of pixels, 0 or more"
        )),
    }
}

pub(super) fn max_pixels(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(format!(
            "--max-pixels {text}: expected a whole number of pixels, 1 or more"
        )),
    }
}

/// `a, b or c`.
pub(super) fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// One of a few names, each a value: the names are the help's and the completions' possible
/// values, and anything else is refused in the project's words.
#[derive(Clone)]
pub(super) struct Choices<T> {
    option: &'static str,
    names: Vec<&'static str>,
    parse: fn(&str) -> Option<T>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Choices<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let Choices {
            option,
            names,
            parse,
        } = self.clone();
        let pick = move |text: &str| {
            parse(text).ok_or_else(|| format!("{option} {text}: expected {}", or_list(&names)))
        };
        pick.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().map(|n| PossibleValue::new(*n))))
    }
}

/// `--device`: the core's provider table names them and parses them.
pub(super) fn providers() -> Choices<Provider> {
    Choices {
        option: "--device",
        names: Provider::ALL.iter().map(|p| p.info().short).collect(),
        parse: Provider::parse,
    }
}

pub(super) fn policies() -> Choices<MismatchPolicy> {
    Choices {
        option: "--on-mismatch",
        names: vec!["fallback", "fail"],
        parse: |text| match text {
            "fallback" => Some(MismatchPolicy::Fallback),
            "fail" => Some(MismatchPolicy::Fail),
            _ => None,
        },
    }
}

pub(super) fn directions() -> Choices<Directions> {
    Choices {
        option: "--direction",
        names: vec!["forward", "backward", "both"],
        parse: |text| match text {
            "forward" => Some(Directions::Forward),
            "backward" => Some(Directions::Backward),
            "both" => Some(Directions::Both),
            _ => None,
        },
    }
}

/// `--no-rewrite NAME[,NAME…]`: the rewrites named (the core's names, or `all`) taken away.
pub(super) fn without_rewrites(mut on: Rewrites, text: &str) -> Result<Rewrites, String> {
    for name in text.split(',') {
        match (name, Rewrite::parse(name)) {
            ("all", _) => on = Rewrites::NONE,
            (_, Some(r)) => on = on.without(r),
            (_, None) => {
                let names: Vec<&str> = Rewrite::ALL.iter().map(|r| r.name()).collect();
                return Err(format!(
                    "--no-rewrite {text}: `{name}` is no rewrite (expected all, {})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(on)
}

/// `--no-rewrite`'s value, checked here and applied (in the order given) after parsing.
pub(super) fn rewrite_names(text: &str) -> Result<String, String> {
    without_rewrites(Rewrites::ALL, text).map(|_| text.to_string())
}

pub(super) fn no_rewrite_help() -> String {
    let names: Vec<&str> = Rewrite::ALL.iter().map(|r| r.name()).collect();
    format!(
        "Load without these of the library's graph rewrites: all, {} (sam2 info says which ran)",
        names.join(", ")
    )
}

/// A position in a video for `option`: a frame number or a time (`crate::video_file::At`).
pub(super) fn position(
    option: &'static str,
) -> impl Fn(&str) -> Result<At, String> + Clone + Send + Sync + 'static {
    move |text| match At::parse(text) {
        Some(At::Frame(n)) if n > i32::MAX as u64 => Err(format!(
            "{option} {text}: expected a frame number up to {} or a time",
            i32::MAX
        )),
        Some(at) => Ok(at),
        None => Err(format!(
            "{option} {text}: expected a frame number (120) or a time (4.5s, 1:02.5, 0:01:02.5)"
        )),
    }
}
