//! Rows of the table, and how they are printed.

use super::*;

#[derive(Clone)]
pub(crate) struct Row {
    pub(crate) id: &'static str,
    pub(crate) name: String,
    pub(crate) unit: &'static str,
    pub(crate) library: Option<Stat>,
    pub(crate) peer: Option<Stat>,
    pub(crate) floor: Option<Stat>,
    pub(crate) goal: String,
    pub(crate) met: Option<bool>,
    pub(crate) note: String,
}

impl Row {
    pub(crate) fn new(id: &'static str, name: impl Into<String>, unit: &'static str) -> Self {
        Row {
            id,
            name: name.into(),
            unit,
            library: None,
            peer: None,
            floor: None,
            goal: String::new(),
            met: None,
            note: String::new(),
        }
    }
    pub(crate) fn lib_over_floor(&self) -> Option<f64> {
        Some(self.library.as_ref()?.median / self.floor.as_ref()?.median)
    }
    pub(crate) fn peer_over_lib(&self) -> Option<f64> {
        Some(self.peer.as_ref()?.median / self.library.as_ref()?.median)
    }
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "measurement": self.name,
            "unit": self.unit,
            "library": stat_json(&self.library),
            "peer": stat_json(&self.peer),
            "floor": stat_json(&self.floor),
            "library_over_floor": self.lib_over_floor(),
            "peer_over_library": self.peer_over_lib(),
            "goal": self.goal,
            "met": self.met,
            "note": self.note,
        })
    }
}

pub(crate) fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

pub(crate) fn fmt_cell(s: &Option<Stat>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.n <= 1 || (s.min == s.max) => fmt_num(s.median),
        Some(s) => format!(
            "{} [{}–{}]",
            fmt_num(s.median),
            fmt_num(s.min),
            fmt_num(s.max)
        ),
    }
}

pub(crate) fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.3}×"))
}

pub(crate) fn print_table(rows: &[Row]) {
    let headers = [
        "measurement",
        "unit",
        "library",
        "peer",
        "floor",
        "lib/floor",
        "peer/lib",
        "goal",
        "met?",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.unit.to_string(),
                fmt_cell(&r.library),
                fmt_cell(&r.peer),
                fmt_cell(&r.floor),
                fmt_ratio(r.lib_over_floor()),
                fmt_ratio(r.peer_over_lib()),
                if r.goal.is_empty() {
                    "—".into()
                } else {
                    r.goal.clone()
                },
                match r.met {
                    Some(true) => "met".into(),
                    Some(false) => "NOT MET".into(),
                    None => "—".into(),
                },
            ]
        })
        .collect();
    let mut width = headers.map(|h| h.chars().count());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c.iter()) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(width.iter()).enumerate() {
            let pad = w - cell.chars().count();
            if i == 0 || i == 1 || i == 7 {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(&headers.map(String::from));
    println!(
        "{}",
        "-".repeat(width.iter().sum::<usize>() + 2 * width.len())
    );
    for c in &cells {
        line(c);
    }
}
