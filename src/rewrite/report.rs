//! The report of what the load-time rewrites did to a model: a list with an entry per rewrite
//! that is on (what it rewrote, by kind, and what it found and left as exported, by reason), the
//! rewrites switched off, and why nothing was tried where nothing was. `sam2 info` prints it,
//! and `Encoder::attention_fusion` and its kind return it. A new rewrite adds no field: it is one
//! more entry.

use super::*;

/// What one rewrite did to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteOutcome {
    pub rewrite: Rewrite,
    /// What it rewrote, by kind, in the order first seen: (kind, count). For attention the kind
    /// is the shape of the core, `[batch dims] S queries × L keys, head dim H`.
    pub done: Vec<(String, usize)>,
    /// What it found and left as exported, by reason: (reason, count).
    pub left: Vec<(String, usize)>,
}

impl RewriteOutcome {
    /// How many times it rewrote the graph.
    pub fn count(&self) -> usize {
        self.done.iter().map(|(_, n)| n).sum()
    }

    /// How many of its finds it left as exported.
    pub fn left_count(&self) -> usize {
        self.left.iter().map(|(_, n)| n).sum()
    }
}

/// What the library did to a model's graph when it loaded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewriteReport {
    /// Each rewrite that was on, in the order they run, with what it did (nothing too); and
    /// attention's, switched off, when the cores it verified served the split projections.
    pub rewrites: Vec<RewriteOutcome>,
    /// The rewrites switched off for this model ([`crate::SessionOptions::rewrites`]).
    pub off: Vec<Rewrite>,
    /// Why nothing was tried at all (optimisation off, a provider without the fused kernel,
    /// weights in external files), if so.
    pub not_tried: Option<String>,
    /// A remark on how the cores were fused (int8 scores asked for and not used, and why).
    pub note: Option<String>,
}

impl RewriteReport {
    /// An empty report for the rewrites `on`: each has its entry, nothing done yet.
    pub(crate) fn new(on: Rewrites) -> Self {
        RewriteReport {
            rewrites: Rewrite::ALL
                .into_iter()
                .filter(|r| on.contains(*r))
                .map(|rewrite| RewriteOutcome {
                    rewrite,
                    done: Vec::new(),
                    left: Vec::new(),
                })
                .collect(),
            off: on.complement().list(),
            not_tried: None,
            note: None,
        }
    }

    /// Nothing tried, for the reason `why`; the rewrites `on` are those that were switched on.
    pub(crate) fn not_tried(why: impl Into<String>, on: Rewrites) -> Self {
        RewriteReport {
            rewrites: Vec::new(),
            off: on.complement().list(),
            not_tried: Some(why.into()),
            note: None,
        }
    }

    /// What `rewrite` did, when it was on and tried.
    pub fn outcome(&self, rewrite: Rewrite) -> Option<&RewriteOutcome> {
        self.rewrites.iter().find(|o| o.rewrite == rewrite)
    }

    /// How many times `rewrite` rewrote the graph (0 when it was off or not tried).
    pub fn count(&self, rewrite: Rewrite) -> usize {
        self.outcome(rewrite).map_or(0, RewriteOutcome::count)
    }

    /// Of those, how many were of a kind that mentions `part` (the split projections' kinds say
    /// which biases moved: "keys without their bias", "values' bias in the output projection").
    pub fn count_of(&self, rewrite: Rewrite, part: &str) -> usize {
        self.outcome(rewrite).map_or(0, |o| {
            o.done
                .iter()
                .filter(|(kind, _)| kind.contains(part))
                .map(|(_, n)| n)
                .sum()
        })
    }

    /// The attention cores fused, by kind.
    pub fn fused(&self) -> &[(String, usize)] {
        self.outcome(Rewrite::Attention)
            .map_or(&[], |o| o.done.as_slice())
    }

    /// The attention-like subgraphs (a softmax of a MatMul) left as exported, by reason.
    pub fn left(&self) -> &[(String, usize)] {
        self.outcome(Rewrite::Attention)
            .map_or(&[], |o| o.left.as_slice())
    }

    /// Number of attention cores fused.
    pub fn fused_count(&self) -> usize {
        self.count(Rewrite::Attention)
    }

    /// How many times each rewrite that is on ran, in the order they run (0: found nothing to
    /// rewrite); the rewrites switched off are in [`RewriteReport::off`].
    pub fn counts(&self) -> Vec<(Rewrite, usize)> {
        let tried = self.not_tried.is_none();
        Rewrite::ALL
            .into_iter()
            .filter(|r| !self.off.contains(r))
            .map(|r| (r, if tried { self.count(r) } else { 0 }))
            .collect()
    }

    fn entry(&mut self, rewrite: Rewrite) -> &mut RewriteOutcome {
        let i = match self.rewrites.iter().position(|o| o.rewrite == rewrite) {
            Some(i) => i,
            None => {
                // In the order the rewrites run, as the entries of those that are on.
                let order = |r: Rewrite| Rewrite::ALL.iter().position(|&a| a == r);
                let i = self
                    .rewrites
                    .iter()
                    .position(|o| order(o.rewrite) > order(rewrite))
                    .unwrap_or(self.rewrites.len());
                self.rewrites.insert(
                    i,
                    RewriteOutcome {
                        rewrite,
                        done: Vec::new(),
                        left: Vec::new(),
                    },
                );
                i
            }
        };
        &mut self.rewrites[i]
    }

    fn bump(list: &mut Vec<(String, usize)>, what: String) {
        match list.iter_mut().find(|(w, _)| *w == what) {
            Some((_, n)) => *n += 1,
            None => list.push((what, 1)),
        }
    }

    /// `rewrite` rewrote one thing of this kind.
    pub(crate) fn done(&mut self, rewrite: Rewrite, kind: impl Into<String>) {
        Self::bump(&mut self.entry(rewrite).done, kind.into());
    }

    /// `rewrite` found one thing and left it as exported, for this reason.
    pub(crate) fn left_as_exported(&mut self, rewrite: Rewrite, why: impl Into<String>) {
        Self::bump(&mut self.entry(rewrite).left, why.into());
    }
}

impl fmt::Display for RewriteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = if self.off.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.off.iter().map(|r| r.name()).collect();
            format!("; switched off: {}", names.join(", "))
        };
        if let Some(why) = &self.not_tried {
            return write!(f, "as exported ({why}){off}");
        }
        // The CPU's other rewrites, after what was fused.
        let mut others = match self.count(Rewrite::ChannelMeans) {
            0 => String::new(),
            1 => "; 1 channel mean as a matrix product".to_string(),
            n => format!("; {n} channel means as matrix products"),
        };
        match self.count(Rewrite::QkvSplit) {
            0 => {}
            1 => others.push_str("; 1 query-key-value projection split by its weights"),
            n => others.push_str(&format!(
                "; {n} query-key-value projections split by their weights"
            )),
        }
        let keys = self.count_of(Rewrite::QkvSplit, qkv_split::KEYS_UNBIASED);
        let values = self.count_of(Rewrite::QkvSplit, qkv_split::VALUES_BIAS_MOVED);
        if keys > 0 || values > 0 {
            others.push_str(&format!(
                " ({keys} without the keys' bias, {values} with the values' bias in the output \
                 projection)"
            ));
        }
        match self.count(Rewrite::DepthwiseBranches) {
            0 => {}
            1 => others.push_str("; 1 sum of depthwise convolution branches merged into one"),
            n => others.push_str(&format!(
                "; {n} sums of depthwise convolution branches merged into one each"
            )),
        }
        others.push_str(&off);
        let (fused, left) = (self.fused(), self.left());
        if fused.is_empty() && left.is_empty() {
            return write!(f, "no attention found{others}");
        }
        let list = |items: &[(String, usize)]| {
            items
                .iter()
                .map(|(what, n)| format!("{n} × {what}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        write!(f, "{} fused", self.fused_count())?;
        if !fused.is_empty() {
            write!(f, " ({})", list(fused))?;
        }
        if !left.is_empty() {
            let n: usize = left.iter().map(|(_, n)| n).sum();
            write!(f, ", {n} left as exported ({})", list(left))?;
        }
        if let Some(note) = &self.note {
            write!(f, "; {note}")?;
        }
        write!(f, "{others}")
    }
}
