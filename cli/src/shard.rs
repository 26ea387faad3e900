//! Which part of a batch this process does: `--shard I/N`, else the index a scheduler gives (a
//! Slurm job array, a Kubernetes Indexed Job), else all of it.
//!
//! An input belongs to shard `fnv1a64(key) mod N`, where the key is the input's path relative to
//! the folder (`/`-separated) or its line in the list file: the same input lands in the same
//! shard on every machine and whatever else the folder holds, so inputs added between two runs
//! never move an input from one shard to another.

use std::fmt;

/// Shard `index` of `count` (0 ≤ index < count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The variable a Kubernetes Indexed Job's manifest sets to its `completions` (Kubernetes gives
/// the pod its index, `JOB_COMPLETION_INDEX`, but not the count).
pub const COUNT_VARIABLE: &str = "SAM2_SHARD_COUNT";

impl Shard {
    /// `I/N` as `--shard` takes it.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let expected = || {
            format!(
                "--shard {text}: expected I/N, shard I (counted from 0) of N, such as 0/4 … 3/4"
            )
        };
        let (i, n) = text.split_once('/').ok_or_else(expected)?;
        let (Ok(index), Ok(count)) = (i.trim().parse::<u64>(), n.trim().parse::<u64>()) else {
            return Err(expected());
        };
        if count == 0 {
            return Err(format!(
                "--shard {text}: N is the number of shards, 1 or more"
            ));
        }
        if index >= count {
            return Err(format!(
                "--shard {text}: shards are counted from 0, so I is 0 to {} with N = {count}",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether the input whose key is `key` is this shard's.
    pub fn takes(&self, key: &[u8]) -> bool {
        fnv1a64(key) % self.count == self.index
    }

    /// The shard a scheduler names in the environment (`var` reads a variable): a Slurm job
    /// array's task (`SLURM_ARRAY_TASK_ID` less `SLURM_ARRAY_TASK_MIN`, over its step, of
    /// `SLURM_ARRAY_TASK_COUNT`), else a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` of
    /// `SAM2_SHARD_COUNT`; `None` when neither is set. A value that does not make a shard is an
    /// error naming the variable.
    pub fn from_environment(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        let number = |name: &str| -> Result<Option<u64>, String> {
            match var(name) {
                None => Ok(None),
                Some(text) => text
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| format!("{name}={text}: expected a whole number, 0 or more")),
            }
        };
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let needed = |name: &str| -> Result<u64, String> {
                number(name)?.ok_or_else(|| {
                    format!(
                        "SLURM_ARRAY_TASK_ID is set but {name} is not (Slurm sets both in a job \
                         array); or give --shard I/N"
                    )
                })
            };
            let count = needed("SLURM_ARRAY_TASK_COUNT")?;
            let min = needed("SLURM_ARRAY_TASK_MIN")?;
            let max = needed("SLURM_ARRAY_TASK_MAX")?;
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            // Only a range (0-15, 1-64, 0-30:2) maps tasks onto shards one to one; a list such
            // as 1,5,9 could leave shards no task runs.
            let a_range = count >= 1
                && max >= min
                && (max - min) % step == 0
                && (max - min) / step + 1 == count;
            if !a_range || id < min || (id - min) % step != 0 {
                return Err(format!(
                    "the Slurm array (tasks {min} to {max}, step {step}, {count} in all, this one \
                     {id}) is not a range of task ids; submit it as --array=0-{} or give --shard \
                     I/N",
                    count.saturating_sub(1)
                ));
            }
            return Ok(Some(Shard {
                index: (id - min) / step,
                count,
            }));
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = number(COUNT_VARIABLE)?.ok_or_else(|| {
                format!(
                    "JOB_COMPLETION_INDEX is set but {COUNT_VARIABLE} is not: set it to the Job's \
                     completions in the manifest, or give --shard I/N"
                )
            })?;
            if count == 0 || index >= count {
                return Err(format!(
                    "JOB_COMPLETION_INDEX={index} with {COUNT_VARIABLE}={count}: the index must \
                     be below the count (the Job's completions)"
                ));
            }
            return Ok(Some(Shard { index, count }));
        }
        if let Some(count) = number(COUNT_VARIABLE)? {
            return Err(format!(
                "{COUNT_VARIABLE}={count} is set but JOB_COMPLETION_INDEX is not (an Indexed Job \
                 sets it); give --shard I/N outside one"
            ));
        }
        Ok(None)
    }
}

/// 64-bit FNV-1a: small, fixed by its definition, the same on every machine.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_values_parse_or_say_what_is_expected() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        for (bad, says) in [
            ("3/3", "I is 0 to 2"),
            ("1/0", "1 or more"),
            ("x/3", "expected I/N"),
            ("2", "expected I/N"),
            ("-1/3", "expected I/N"),
        ] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn every_key_is_in_exactly_one_shard() {
        for count in 1..6 {
            for key in ["a.png", "sub/b.jpg", "c"] {
                let owners = (0..count)
                    .filter(|&index| Shard { index, count }.takes(key.as_bytes()))
                    .count();
                assert_eq!(owners, 1, "{key} of {count}");
            }
        }
    }

    #[test]
    fn slurm_arrays_are_counted_from_their_first_task() {
        let slurm = |id, min, max, count, step: Option<&'static str>| {
            let mut pairs = vec![
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_MIN", min),
                ("SLURM_ARRAY_TASK_MAX", max),
                ("SLURM_ARRAY_TASK_COUNT", count),
            ];
            if let Some(s) = step {
                pairs.push(("SLURM_ARRAY_TASK_STEP", s));
            }
            let result = Shard::from_environment(&env(&pairs));
            result
        };
        let shard = |index, count| Ok(Some(Shard { index, count }));
        assert_eq!(slurm("0", "0", "2", "3", None), shard(0, 3));
        assert_eq!(slurm("3", "1", "3", "3", None), shard(2, 3));
        assert_eq!(slurm("14", "10", "16", "4", Some("2")), shard(2, 4));
        let e = slurm("5", "1", "9", "3", None).unwrap_err();
        assert!(e.contains("not a range") && e.contains("--shard"), "{e}");
        let e = slurm("x", "1", "9", "3", None).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_ID=x"), "{e}");
        let e = Shard::from_environment(&env(&[("SLURM_ARRAY_TASK_ID", "1")])).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_COUNT"), "{e}");
    }

    #[test]
    fn an_indexed_job_needs_its_count_from_the_manifest() {
        let k8s = |pairs: &[(&str, &str)]| Shard::from_environment(&env(pairs));
        assert_eq!(
            k8s(&[("JOB_COMPLETION_INDEX", "4"), (COUNT_VARIABLE, "5")]),
            Ok(Some(Shard { index: 4, count: 5 }))
        );
        let e = k8s(&[("JOB_COMPLETION_INDEX", "4")]).unwrap_err();
        assert!(e.contains(COUNT_VARIABLE), "{e}");
        let e = k8s(&[("JOB_COMPLETION_INDEX", "5"), (COUNT_VARIABLE, "5")]).unwrap_err();
        assert!(e.contains("below the count"), "{e}");
        assert_eq!(k8s(&[]), Ok(None));
    }
}
