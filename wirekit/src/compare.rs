//! Two runs of the kit side by side (kaas, then the reference Apache
//! Kafka), held against the declared differences
//! (compat/kafka/differences.json): every observation that differs must be
//! declared, with its reason, for the reference's major version, and every
//! declaration must still be observed (a stale one fails too, so the file
//! says what is true today).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::Deserialize;

use crate::kit::Outcome;

/// One declared difference.
#[derive(Debug, Clone, Deserialize)]
pub struct Declared {
    /// The probe's id.
    pub probe: String,
    /// The observation keys that differ ("*" = any key of the probe; a key
    /// ending in "*" is a prefix).
    pub keys: Vec<String>,
    /// The reference versions ("3", "4") where kaas differs so.
    pub kafka: Vec<String>,
    /// Why kaas differs: by design (kaas claims 3.7, is ahead of it, or
    /// avoids a Kafka bug), or a kaas gap not fixed yet.
    pub reason: String,
    /// "design", "version" (the reference's version behaves otherwise) or
    /// "gap" (kaas should change; kept honest until it does).
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Declarations {
    pub differences: Vec<Declared>,
}

impl Declarations {
    /// Reads one declarations file, or every `*.json` of a directory
    /// (compat/kafka/differences/: one file per area).
    pub fn load(path: &Path) -> anyhow::Result<Declarations> {
        if !path.is_dir() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            return serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()));
        }
        let mut files: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut all = Declarations::default();
        for f in files {
            all.differences.extend(Declarations::load(&f)?.differences);
        }
        Ok(all)
    }

    fn find(&self, probe: &str, key: &str, version: &str) -> Option<&Declared> {
        self.differences.iter().find(|d| {
            d.probe == probe
                && d.kafka.iter().any(|v| v == version)
                && d.keys.iter().any(|k| key_matches(k, key))
        })
    }
}

fn key_matches(pattern: &str, key: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => pattern == key,
    }
}

/// One observation key's values on both sides (None: not observed there).
#[derive(Debug, Clone)]
pub struct Line {
    pub key: String,
    pub kaas: Option<String>,
    pub kafka: Option<String>,
    /// The reason, when the difference is declared.
    pub declared: Option<String>,
}

/// A probe's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub id: &'static str,
    pub name: &'static str,
    /// The differing lines (empty: the same on both).
    pub lines: Vec<Line>,
    /// Declarations of this probe for this version that were not observed.
    pub stale: Vec<String>,
}

impl Verdict {
    pub fn undeclared(&self) -> usize {
        self.lines.iter().filter(|l| l.declared.is_none()).count()
    }
}

fn with_error(o: &Outcome) -> Vec<(String, String)> {
    let mut seen = o.seen.clone();
    if let Some(e) = &o.error {
        seen.push(("probe error".into(), e.clone()));
    }
    seen
}

/// Compares two runs of the same probes (same order).
pub fn compare(
    kaas: &[Outcome],
    kafka: &[Outcome],
    declared: &Declarations,
    version: &str,
) -> Vec<Verdict> {
    let by_id: BTreeMap<&str, &Outcome> = kafka.iter().map(|o| (o.id, o)).collect();
    let mut out = Vec::new();
    for a in kaas {
        let mut lines = Vec::new();
        let left = with_error(a);
        let right = by_id.get(a.id).map(|b| with_error(b)).unwrap_or_default();
        let mut keys: Vec<&str> = left.iter().map(|(k, _)| k.as_str()).collect();
        for (k, _) in &right {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        for key in keys {
            let l = left.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
            let r = right.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
            if l != r {
                lines.push(Line {
                    key: key.to_owned(),
                    kaas: l,
                    kafka: r,
                    declared: declared.find(a.id, key, version).map(|d| d.reason.clone()),
                });
            }
        }
        let stale = declared
            .differences
            .iter()
            .filter(|d| d.probe == a.id && d.kafka.iter().any(|v| v == version))
            .filter(|d| {
                !lines
                    .iter()
                    .any(|l| d.keys.iter().any(|k| key_matches(k, &l.key)))
            })
            .map(|d| d.keys.join(", "))
            .collect();
        out.push(Verdict {
            id: a.id,
            name: a.name,
            lines,
            stale,
        });
    }
    out
}

/// The side-by-side report: `SAME`, `DECLARED`, `DIFF` (with each differing
/// key as `kaas | kafka`) and `STALE` lines, then a summary.
pub fn report(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    let (mut same, mut declared, mut differ, mut stale) = (0, 0, 0, 0);
    for v in verdicts {
        let undeclared = v.undeclared();
        if v.lines.is_empty() {
            same += 1;
            let _ = writeln!(out, "SAME     {} {}", v.id, v.name);
        } else if undeclared == 0 {
            declared += 1;
            let _ = writeln!(out, "DECLARED {} {}", v.id, v.name);
        } else {
            differ += 1;
            let _ = writeln!(out, "DIFF     {} {}", v.id, v.name);
        }
        for l in &v.lines {
            let mark = if l.declared.is_some() {
                "declared"
            } else {
                "DIFFERS "
            };
            let _ = writeln!(
                out,
                "    {mark} {}: kaas={} | kafka={}",
                l.key,
                l.kaas.as_deref().unwrap_or("(not observed)"),
                l.kafka.as_deref().unwrap_or("(not observed)")
            );
            if let Some(r) = &l.declared {
                let _ = writeln!(out, "             because: {r}");
            }
        }
        for k in &v.stale {
            stale += 1;
            let _ = writeln!(
                out,
                "STALE    {} declared difference ({k}) no longer observed",
                v.id
            );
        }
    }
    let _ = writeln!(
        out,
        "{} probes: {same} same, {declared} with declared differences only, {differ} with undeclared differences, {stale} stale declarations",
        verdicts.len()
    );
    out
}

/// True when nothing undeclared differs and no declaration is stale.
pub fn clean(verdicts: &[Verdict]) -> bool {
    verdicts
        .iter()
        .all(|v| v.undeclared() == 0 && v.stale.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(id: &'static str, seen: &[(&str, &str)]) -> Outcome {
        Outcome {
            id,
            name: "n",
            seen: seen
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            error: None,
            elapsed: Duration::ZERO,
        }
    }

    fn decl(probe: &str, key: &str, version: &str) -> Declarations {
        Declarations {
            differences: vec![Declared {
                probe: probe.into(),
                keys: vec![key.into()],
                kafka: vec![version.into()],
                reason: "r".into(),
                kind: "design".into(),
            }],
        }
    }

    #[test]
    fn an_undeclared_difference_is_not_clean() {
        let v = compare(
            &[outcome("A-1", &[("code", "0")])],
            &[outcome("A-1", &[("code", "3")])],
            &Declarations::default(),
            "4",
        );
        assert_eq!(v[0].undeclared(), 1);
        assert!(!clean(&v));
    }

    #[test]
    fn a_declared_difference_is_clean_only_for_its_version() {
        let kaas = [outcome("A-1", &[("code", "0"), ("n", "1")])];
        let kafka = [outcome("A-1", &[("code", "3"), ("n", "1")])];
        assert!(clean(&compare(
            &kaas,
            &kafka,
            &decl("A-1", "code", "4"),
            "4"
        )));
        assert!(!clean(&compare(
            &kaas,
            &kafka,
            &decl("A-1", "code", "4"),
            "3"
        )));
        assert!(clean(&compare(
            &kaas,
            &kafka,
            &decl("A-1", "co*", "4"),
            "4"
        )));
    }

    #[test]
    fn a_declaration_no_longer_observed_is_stale() {
        let same = [outcome("A-1", &[("code", "0")])];
        let v = compare(&same, &same, &decl("A-1", "code", "4"), "4");
        assert_eq!(v[0].stale.len(), 1);
        assert!(!clean(&v));
    }

    #[test]
    fn a_key_seen_on_one_side_only_differs_and_an_error_is_an_observation() {
        let mut b = outcome("A-1", &[("code", "0")]);
        b.error = Some("boom".into());
        let v = compare(
            &[outcome("A-1", &[("code", "0"), ("extra", "1")])],
            &[b],
            &Declarations::default(),
            "4",
        );
        let keys: Vec<_> = v[0].lines.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["extra", "probe error"]);
    }
}
