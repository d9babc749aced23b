//! `kaas policy new`: writes a policy crate that builds outside this
//! repository, with plain cargo (`--target wasm32-wasip2`) and with
//! `cargo component build`.
//!
//! Why it exists: the SDK and the apache37 rules are not published anywhere,
//! so an author outside this tree had to point path dependencies into a kaas
//! checkout. The kaas binary carries instead the in-tree files themselves
//! (`policy-wit/txn-policy.wit`, `policies/sdk`, `policies/apache37/rules`,
//! `policies/strict`; `include_str!`, so there is one source of truth) and
//! writes them into the new crate: `wit/` (where component tooling looks for
//! the WIT package) and `kaas/sdk`, `kaas/apache37-rules` (path sub-crates
//! inside the generated crate). The only edit to an embedded source is the
//! SDK's `generate!` path, which must point at the crate's own `wit/`.
//!
//! This module touches only the directory it is asked to create; it never
//! overwrites a file.

use std::fmt;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};

/// Where a new policy crate starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Template {
    /// A `Variant` of the bundled apache37 rules that overrides nothing.
    Apache37,
    /// kaas's `strict` policy (apache37 with fail-closed refusals).
    Strict,
    /// The SDK's `Policy` trait with a fail-closed placeholder per call.
    Empty,
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Template::Apache37 => "apache37",
            Template::Strict => "strict",
            Template::Empty => "empty",
        })
    }
}

/// The in-tree files the generated crates are made of.
mod embedded {
    pub const WIT: &str = include_str!("../../../policy-wit/txn-policy.wit");
    pub const SDK_LIB: &str = include_str!("../../../policies/sdk/src/lib.rs");
    pub const RULES_LIB: &str = include_str!("../../../policies/apache37/rules/src/lib.rs");
    pub const RULES_VARIANT: &str = include_str!("../../../policies/apache37/rules/src/variant.rs");
    pub const STRICT_LIB: &str = include_str!("../../../policies/strict/src/lib.rs");
    pub const STRICT_RULES: &str = include_str!("../../../policies/strict/src/rules.rs");
    pub const STRICT_DIFFERENCES: &str = include_str!("../../../policies/strict/differences.json");
    /// For the wit-bindgen pin (`[workspace.dependencies]`).
    pub const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");
    pub const TOOLCHAIN: &str = include_str!("../../../rust-toolchain.toml");

    pub const CARGO_TOML: &str = include_str!("templates/Cargo.toml.in");
    pub const SDK_CARGO_TOML: &str = include_str!("templates/sdk.Cargo.toml.in");
    pub const RULES_CARGO_TOML: &str = include_str!("templates/rules.Cargo.toml.in");
    pub const README: &str = include_str!("templates/README.md.in");
    pub const GITIGNORE: &str = include_str!("templates/gitignore");
    /// The generated crates' Cargo.lock without their root package: the
    /// workspace's versions of wit-bindgen and its dependencies (a test
    /// checks they match the workspace's Cargo.lock). To regenerate after a
    /// dependency bump: copy the workspace Cargo.lock into a generated
    /// apache37 crate, run `cargo metadata --format-version 1` there (cargo
    /// trims the lock to the crate's graph and keeps the versions), drop the
    /// root package's block and write `{{kaas_version}}` as the two kaas
    /// crates' version.
    pub const CARGO_LOCK: &str = include_str!("templates/Cargo.lock.in");
    pub const APACHE37_LIB: &str = include_str!("templates/apache37.lib.rs");
    pub const EMPTY_LIB: &str = include_str!("templates/empty.lib.rs");
}

/// The SDK's `generate!` path in the tree, and what it becomes in a
/// generated crate (`kaas/sdk` -> the crate's `wit/`).
const SDK_WIT_PATH_IN_TREE: &str = r#"path: "../../policy-wit","#;
const SDK_WIT_PATH_GENERATED: &str = r#"path: "../../wit","#;

/// One file of a generated crate, relative to the crate's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: PathBuf,
    pub contents: String,
}

/// Creates `parent/name` (which must not exist or be an empty directory) and
/// writes the crate into it. Returns the crate's directory.
pub fn new_policy(name: &str, template: Template, parent: &Path) -> anyhow::Result<PathBuf> {
    let files = render(name, template)?;
    let dir = parent.join(name);
    write_crate(&dir, &files)?;
    Ok(dir)
}

/// The files of a new crate named `name` from `template`.
pub fn render(name: &str, template: Template) -> anyhow::Result<Vec<File>> {
    validate_name(name)?;
    let crate_name = name.replace('-', "_");
    let kaas_version = env!("CARGO_PKG_VERSION");
    let wit_version = wit_package_version(embedded::WIT)?;
    let wit_major = wit_version.split('.').next().unwrap_or_default().to_owned();
    let with_rules = template != Template::Empty;

    let mut dependencies = String::from(r#"kaas-policy-sdk = { path = "kaas/sdk" }"#);
    let mut members = String::from(r#""kaas/sdk""#);
    if with_rules {
        dependencies.push_str("\nkaas-apache37-rules = { path = \"kaas/apache37-rules\" }");
        members.push_str(r#", "kaas/apache37-rules""#);
    }
    let (intro, layout_rows, conformance) = match template {
        Template::Apache37 => (
            "It starts as Apache Kafka 3.7's rules with no change: a `Variant` of the bundled \
             `kaas-apache37-rules` that overrides nothing; `src/lib.rs` shows how to override \
             one decision.",
            "",
            "As generated it decides exactly as apache37, so conformance passes with no declared \
             difference. Declare in `differences.json` each step you change on purpose.",
        ),
        Template::Strict => (
            "It starts as kaas's `strict` policy: apache37's rules with fail-closed refusals in \
             front of InitProducerId (`src/rules.rs`).",
            "| `src/rules.rs` | strict's refusals in front of apache37's InitProducerId, with tests |\n",
            "`differences.json` declares strict's differences (kaas's \
             `policies/strict/differences.json`), so conformance with `--expect` passes; without \
             it the steps strict answers differently fail.",
        ),
        Template::Empty => (
            "It implements the SDK's `Policy` trait from scratch: every decision is a legal, \
             fail-closed placeholder (refuse with UNKNOWN_SERVER_ERROR, write nothing) until you \
             write the rules.",
            "",
            "Conformance fails until the rules are written: every placeholder answers \
             UNKNOWN_SERVER_ERROR.",
        ),
    };
    let rules_row = if with_rules {
        "| `kaas/apache37-rules` | Apache Kafka 3.7's rules and the `Variant` trait |\n"
    } else {
        ""
    };
    let vars: &[(&str, &str)] = &[
        ("name", name),
        ("crate", &crate_name),
        ("template", &template.to_string()),
        ("kaas_version", kaas_version),
        ("wit_version", &wit_version),
        ("wit_major", &wit_major),
        (
            "wit_bindgen",
            &wit_bindgen_pin(embedded::WORKSPACE_MANIFEST)?,
        ),
        ("dependencies", &dependencies),
        ("members", &members),
        ("intro", intro),
        ("layout_rows", layout_rows),
        ("rules_row", rules_row),
        ("conformance", conformance),
    ];
    let fill = |what: &str, template: &str| fill(what, template, vars);

    let mut files = vec![
        file("Cargo.toml", fill("Cargo.toml", embedded::CARGO_TOML)?),
        file("README.md", fill("README.md", embedded::README)?),
        file(".gitignore", embedded::GITIGNORE.to_owned()),
        file("rust-toolchain.toml", embedded::TOOLCHAIN.to_owned()),
        file("wit/txn-policy.wit", embedded::WIT.to_owned()),
        file(
            "kaas/sdk/Cargo.toml",
            fill("kaas/sdk/Cargo.toml", embedded::SDK_CARGO_TOML)?,
        ),
        file("kaas/sdk/src/lib.rs", sdk_lib(embedded::SDK_LIB)?),
    ];
    if let Some(lock) = cargo_lock(name, with_rules)? {
        files.push(file("Cargo.lock", fill("Cargo.lock", &lock)?));
    }
    if with_rules {
        files.extend([
            file(
                "kaas/apache37-rules/Cargo.toml",
                fill("kaas/apache37-rules/Cargo.toml", embedded::RULES_CARGO_TOML)?,
            ),
            file(
                "kaas/apache37-rules/src/lib.rs",
                embedded::RULES_LIB.to_owned(),
            ),
            file(
                "kaas/apache37-rules/src/variant.rs",
                embedded::RULES_VARIANT.to_owned(),
            ),
        ]);
    }
    let no_differences = format!("{{\"policy\": \"{name}\", \"differences\": []}}\n");
    match template {
        Template::Apache37 => files.extend([
            file("src/lib.rs", fill("src/lib.rs", embedded::APACHE37_LIB)?),
            file("differences.json", no_differences),
        ]),
        Template::Empty => files.extend([
            file("src/lib.rs", fill("src/lib.rs", embedded::EMPTY_LIB)?),
            file("differences.json", no_differences),
        ]),
        Template::Strict => files.extend([
            file("src/lib.rs", strict_lib(embedded::STRICT_LIB, name)?),
            file("src/rules.rs", embedded::STRICT_RULES.to_owned()),
            file(
                "differences.json",
                replace_once(
                    "policies/strict/differences.json",
                    embedded::STRICT_DIFFERENCES,
                    r#"{"policy": "strict","#,
                    &format!(r#"{{"policy": "{name}","#),
                )?,
            ),
        ]),
    }
    Ok(files)
}

fn file(path: &str, contents: String) -> File {
    File {
        path: PathBuf::from(path),
        contents,
    }
}

/// Replaces every `{{key}}` of `template`; a placeholder without a value is
/// an error (a template and this module out of step).
fn fill(what: &str, template: &str, vars: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut out = template.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(at) = out.find("{{") {
        let rest = &out[at..];
        let end = rest.find("}}").map_or(rest.len(), |e| e + 2);
        bail!("template {what}: no value for {}", &rest[..end]);
    }
    Ok(out)
}

/// `from` must occur exactly once in `src` (so a change to the embedded file
/// that moves or duplicates it fails loudly instead of generating a crate
/// that points back into a checkout).
fn replace_once(what: &str, src: &str, from: &str, to: &str) -> anyhow::Result<String> {
    let n = src.matches(from).count();
    ensure!(
        n == 1,
        "{what}: expected `{from}` exactly once, found it {n} times"
    );
    Ok(src.replacen(from, to, 1))
}

/// The SDK's source with its bindings generated from the crate's own `wit/`.
fn sdk_lib(src: &str) -> anyhow::Result<String> {
    replace_once(
        "policies/sdk/src/lib.rs",
        src,
        SDK_WIT_PATH_IN_TREE,
        SDK_WIT_PATH_GENERATED,
    )
}

/// strict's `lib.rs`, reporting `name` from `describe()`.
fn strict_lib(src: &str, name: &str) -> anyhow::Result<String> {
    let renamed = replace_once(
        "policies/strict/src/lib.rs",
        src,
        r#"pub const NAME: &str = "strict";"#,
        &format!(r#"pub const NAME: &str = "{name}";"#),
    )?;
    Ok(format!(
        "// Generated by `kaas policy new --from strict`: kaas's strict policy, renamed.\n{renamed}"
    ))
}

/// The crate's Cargo.lock: the template's packages plus the root package, in
/// cargo's order (by name), so `cargo build --locked` accepts it as is.
/// None when `name` is also the name of a locked dependency (cargo would
/// then qualify dependency entries); cargo writes the lock itself then.
fn cargo_lock(name: &str, with_rules: bool) -> anyhow::Result<Option<String>> {
    let template = embedded::CARGO_LOCK;
    let first = template
        .find("[[package]]")
        .context("Cargo.lock.in: no [[package]]")?;
    let (header, body) = template.split_at(first);
    let mut blocks: Vec<String> = body
        .split("\n\n")
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty())
        .collect();
    let block_name = |b: &str| -> String {
        b.lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_default()
            .to_owned()
    };
    if blocks.iter().any(|b| block_name(b) == name) {
        return Ok(None);
    }
    if !with_rules {
        blocks.retain(|b| block_name(b) != "kaas-apache37-rules");
    }
    let deps = if with_rules {
        " \"kaas-apache37-rules\",\n \"kaas-policy-sdk\",\n"
    } else {
        " \"kaas-policy-sdk\",\n"
    };
    blocks.push(format!(
        "[[package]]\nname = \"{name}\"\nversion = \"0.1.0\"\ndependencies = [\n{deps}]"
    ));
    // Stable: same-name blocks keep the template's (version) order.
    blocks.sort_by_key(|b| block_name(b));
    Ok(Some(format!("{header}{}\n", blocks.join("\n\n"))))
}

/// The workspace's `wit-bindgen = ...` dependency line, as a `[dependencies]`
/// line for the generated SDK crate (same exact pin).
fn wit_bindgen_pin(manifest: &str) -> anyhow::Result<String> {
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("wit-bindgen ="))
        .context("Cargo.toml: no wit-bindgen line in [workspace.dependencies]")?;
    ensure!(
        line.contains("version = \"="),
        "Cargo.toml: wit-bindgen is not pinned exactly: {line}"
    );
    Ok(line.trim().to_owned())
}

/// `package kaas:txn-policy@X.Y.Z;` -> `X.Y.Z`.
fn wit_package_version(wit: &str) -> anyhow::Result<String> {
    wit.lines()
        .find_map(|l| l.trim().strip_prefix("package kaas:txn-policy@"))
        .and_then(|v| v.strip_suffix(';'))
        .map(str::to_owned)
        .context("policy-wit/txn-policy.wit: no `package kaas:txn-policy@X.Y.Z;` line")
}

/// Rust keywords (2024 edition, strict and reserved): cargo refuses them as
/// package names because the crate could not be named in code.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names cargo or the generated crate cannot use: the standard crates, the
/// test harness, the bundled sub-crates, and Windows device names.
const RESERVED: &[&str] = &[
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "kaas_policy_sdk",
    "kaas_apache37_rules",
    "con",
    "prn",
    "aux",
    "nul",
    "com1",
    "com2",
    "com3",
    "com4",
    "com5",
    "com6",
    "com7",
    "com8",
    "com9",
    "lpt1",
    "lpt2",
    "lpt3",
    "lpt4",
    "lpt5",
    "lpt6",
    "lpt7",
    "lpt8",
    "lpt9",
];

/// A cargo package name that is also a directory name: 1–64 ASCII letters,
/// digits, `-` or `_`, starting with a letter, not a keyword or reserved.
pub fn validate_name(name: &str) -> anyhow::Result<()> {
    ensure!(!name.is_empty(), "the policy name is empty");
    ensure!(
        name.len() <= 64,
        "`{name}` is longer than 64 characters (crates.io's limit)"
    );
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        bail!(
            "`{name}` is not a cargo package name: `{bad}` is not allowed (use letters, digits, `-`, `_`)"
        );
    }
    ensure!(
        name.starts_with(|c: char| c.is_ascii_alphabetic()),
        "`{name}` is not a cargo package name: it must start with a letter"
    );
    let crate_name = name.replace('-', "_").to_ascii_lowercase();
    ensure!(
        !KEYWORDS.contains(&crate_name.as_str()),
        "`{name}` is a Rust keyword; cargo refuses it as a package name"
    );
    ensure!(
        !RESERVED.contains(&crate_name.as_str()),
        "`{name}` is reserved (a standard crate, the test harness, a crate bundled into every \
         policy, or a Windows device name)"
    );
    Ok(())
}

/// Writes `files` under `dir`, which must be absent or an empty directory.
/// Files are created with `create_new`, so nothing is ever overwritten.
pub fn write_crate(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            ensure!(
                entries.next().is_none(),
                "{} is not empty; refusing to write a policy crate into it",
                dir.display()
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if dir.exists() && !dir.is_dir() => {
            bail!("{} exists and is not a directory ({e})", dir.display())
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    }
    for f in files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        out.write_all(f.contents.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
