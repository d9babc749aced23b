//! Loading vector suites: one or more directories of `*.json` vector files
//! (or single files), merged into one case list. Touches only the files it
//! is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::vectors::{Case, VectorFile};

/// Reads every `*.json` file under `dir` (sorted by name) into one case list.
pub fn load_suite(dir: &Path) -> anyhow::Result<Vec<Case>> {
    load_suites(&[dir.to_owned()])
}

/// Reads the cases of every suite in `paths`, in order: a directory
/// contributes its `*.json` files sorted by name, a file itself. A case id
/// may appear only once over all of them; a duplicate is an error naming
/// both files.
pub fn load_suites(paths: &[PathBuf]) -> anyhow::Result<Vec<Case>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading the conformance suite {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                bail!("the conformance suite {} has no *.json files", p.display());
            }
            files.extend(in_dir);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            bail!(
                "the conformance suite {} is neither a directory nor a file",
                p.display()
            );
        }
    }
    for (i, f) in files.iter().enumerate() {
        if files[..i].contains(f) {
            bail!("{} is part of more than one suite", f.display());
        }
    }
    let mut cases = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let file: VectorFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", f.display()))?;
        for c in file.cases {
            if let Some(first) = seen.get(&c.id) {
                if *first == f {
                    bail!("case id {} appears twice in {}", c.id, f.display());
                }
                bail!(
                    "case id {} appears in both {} and {}",
                    c.id,
                    first.display(),
                    f.display()
                );
            }
            seen.insert(c.id.clone(), f.clone());
            cases.push(c);
        }
    }
    Ok(cases)
}
