//! Tenant classes: the small number every policy decision carries so a
//! policy can apply per-tenant rules (ABI 3.0's `tenant-class`) without
//! seeing the transactional.id. The operator maps transactional.id prefixes
//! to classes (`--tenant-class PREFIX=N`); the longest matching prefix wins,
//! and an id no prefix matches is class 0. Pure data: it touches nothing.

use std::fmt;

/// The configured prefixes, longest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantClasses {
    prefixes: Vec<(String, u8)>,
}

/// Why a `--tenant-class` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTenantClass(String);

impl fmt::Display for BadTenantClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadTenantClass {}

impl TenantClasses {
    /// From `PREFIX=N` values (N in 0..=255). A prefix given twice is refused.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Self, BadTenantClass> {
        let mut prefixes: Vec<(String, u8)> = Vec::new();
        for spec in specs {
            let spec = spec.as_ref();
            let Some((prefix, class)) = spec.rsplit_once('=') else {
                return Err(BadTenantClass(format!(
                    "--tenant-class {spec:?}: expected PREFIX=CLASS (CLASS 0-255)"
                )));
            };
            let class: u8 = class.trim().parse().map_err(|_| {
                BadTenantClass(format!(
                    "--tenant-class {spec:?}: the class {class:?} is not a number from 0 to 255"
                ))
            })?;
            if prefixes.iter().any(|(p, _)| p == prefix) {
                return Err(BadTenantClass(format!(
                    "--tenant-class: the prefix {prefix:?} is given twice"
                )));
            }
            prefixes.push((prefix.to_owned(), class));
        }
        prefixes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(TenantClasses { prefixes })
    }

    /// Whether no prefix is configured (every id is class 0).
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The class of `transactional_id`: the longest configured prefix's, or 0.
    pub fn class_of(&self, transactional_id: &str) -> u8 {
        self.prefixes
            .iter()
            .find(|(p, _)| transactional_id.starts_with(p.as_str()))
            .map_or(0, |(_, c)| *c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_prefix_names_the_class() {
        let t = TenantClasses::parse(&["batch-=1", "batch-nightly-=2", "=7"]).expect("parse");
        assert_eq!(t.class_of("batch-nightly-42"), 2);
        assert_eq!(t.class_of("batch-1"), 1);
        // The empty prefix matches every id: a default class.
        assert_eq!(t.class_of("orders"), 7);
        let none = TenantClasses::default();
        assert_eq!(none.class_of("anything"), 0);
    }

    #[test]
    fn malformed_or_repeated_specs_are_refused_with_the_flag_named() {
        for bad in ["nothing", "a=256", "a=-1", "a=x"] {
            let e = TenantClasses::parse(&[bad]).expect_err(bad);
            assert!(e.to_string().contains("--tenant-class"), "{e}");
        }
        let e = TenantClasses::parse(&["a=1", "a=2"]).expect_err("twice");
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
