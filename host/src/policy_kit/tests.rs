//! The generator's own tests: what it writes, the names it refuses, that it
//! never overwrites, and the one rewrite of an embedded source. Building the
//! generated crates (both routes) is scripts/test-policy-kit's job.

use super::*;

fn get<'a>(files: &'a [File], path: &str) -> &'a str {
    &files
        .iter()
        .find(|f| f.path == Path::new(path))
        .unwrap_or_else(|| panic!("{path} not generated"))
        .contents
}

fn paths(files: &[File]) -> Vec<String> {
    let mut p: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
    p.sort();
    p
}

#[test]
fn apache37_crate_has_its_files_and_bundles_wit_sdk_and_rules() {
    let files = render("my-policy", Template::Apache37).unwrap();
    assert_eq!(
        paths(&files),
        [
            ".gitignore",
            "Cargo.lock",
            "Cargo.toml",
            "README.md",
            "differences.json",
            "kaas/apache37-rules/Cargo.toml",
            "kaas/apache37-rules/src/lib.rs",
            "kaas/apache37-rules/src/variant.rs",
            "kaas/sdk/Cargo.toml",
            "kaas/sdk/src/lib.rs",
            "rust-toolchain.toml",
            "src/lib.rs",
            "wit/txn-policy.wit",
        ]
    );
    assert_eq!(get(&files, "wit/txn-policy.wit"), embedded::WIT);
    assert_eq!(
        get(&files, "kaas/apache37-rules/src/lib.rs"),
        embedded::RULES_LIB
    );
    let manifest = get(&files, "Cargo.toml");
    assert!(manifest.contains("name = \"my-policy\""), "{manifest}");
    assert!(
        manifest.contains(
            "[package.metadata.component.target]\npath = \"wit\"\nworld = \"txn-policy\""
        )
    );
    assert!(manifest.contains(r#"kaas-apache37-rules = { path = "kaas/apache37-rules" }"#));
    let lib = get(&files, "src/lib.rs");
    assert!(lib.contains(r#"pub const NAME: &str = "my-policy";"#));
    assert!(lib.contains("#[cfg(target_arch = \"wasm32\")]\nkaas_policy_sdk::export_policy!"));
    assert_eq!(
        get(&files, "differences.json"),
        "{\"policy\": \"my-policy\", \"differences\": []}\n"
    );
    let readme = get(&files, "README.md");
    for needle in [
        "cargo build --release --target wasm32-wasip2",
        "cargo component build --release",
        "target/wasm32-wasip2/release/my_policy.wasm",
        "--expect differences.json",
        "kaas policy load",
        "kaas policy inspect",
    ] {
        assert!(readme.contains(needle), "README lacks {needle}");
    }
}

#[test]
fn no_generated_manifest_points_outside_the_crate() {
    for template in [Template::Apache37, Template::Strict, Template::Empty] {
        let files = render("p", template).unwrap();
        for f in files.iter().filter(|f| f.path.ends_with("Cargo.toml")) {
            for line in f.contents.lines().filter(|l| l.contains("path =")) {
                let depth = f.path.components().count() - 1;
                let ups = line.matches("../").count();
                assert!(
                    ups <= depth,
                    "{template}: {} line `{line}` leaves the crate",
                    f.path.display()
                );
            }
        }
    }
}

#[test]
fn sdk_bindings_are_generated_from_the_crates_own_wit() {
    let files = render("p", Template::Empty).unwrap();
    let sdk = get(&files, "kaas/sdk/src/lib.rs");
    assert!(embedded::SDK_LIB.contains(SDK_WIT_PATH_IN_TREE));
    assert!(sdk.contains(SDK_WIT_PATH_GENERATED), "rewrite missing");
    assert!(!sdk.contains("policy-wit\","), "in-tree path left behind");
    // kaas/sdk/../../wit is the crate's wit/.
    assert!(
        files
            .iter()
            .any(|f| f.path == Path::new("wit/txn-policy.wit"))
    );
    // Nothing else of the SDK changed.
    assert_eq!(
        sdk.replace(SDK_WIT_PATH_GENERATED, SDK_WIT_PATH_IN_TREE),
        embedded::SDK_LIB
    );
}

#[test]
fn a_moved_generate_path_fails_generation_instead_of_pointing_into_a_checkout() {
    let err = sdk_lib("wit_bindgen::generate!({ path: \"../wit\", });").unwrap_err();
    assert!(err.to_string().contains("exactly once"), "{err}");
}

#[test]
fn wit_bindgen_is_pinned_exactly_as_in_the_workspace() {
    let files = render("p", Template::Apache37).unwrap();
    let sdk = get(&files, "kaas/sdk/Cargo.toml");
    let pin = wit_bindgen_pin(embedded::WORKSPACE_MANIFEST).unwrap();
    assert!(pin.starts_with("wit-bindgen = { version = \"="), "{pin}");
    assert!(sdk.contains(&pin), "{sdk}");
    assert!(
        wit_bindgen_pin("[workspace.dependencies]\nwit-bindgen = \"0.61\"\n").is_err(),
        "a loose pin must be refused"
    );
}

#[test]
fn strict_template_is_strict_renamed_with_its_declared_differences() {
    let files = render("tight", Template::Strict).unwrap();
    let lib = get(&files, "src/lib.rs");
    assert!(lib.contains(r#"pub const NAME: &str = "tight";"#));
    assert!(!lib.contains(r#""strict";"#));
    assert_eq!(get(&files, "src/rules.rs"), embedded::STRICT_RULES);
    let diffs: serde_json::Value = serde_json::from_str(get(&files, "differences.json")).unwrap();
    let strict: serde_json::Value = serde_json::from_str(embedded::STRICT_DIFFERENCES).unwrap();
    assert_eq!(diffs["policy"], "tight");
    assert_eq!(diffs["differences"], strict["differences"]);
    assert!(!diffs["differences"].as_array().unwrap().is_empty());
}

#[test]
fn empty_template_implements_the_sdk_trait_without_the_rules_crate() {
    let files = render("scratch", Template::Empty).unwrap();
    assert!(
        !files
            .iter()
            .any(|f| f.path.starts_with("kaas/apache37-rules"))
    );
    let manifest = get(&files, "Cargo.toml");
    assert!(!manifest.contains("apache37"), "{manifest}");
    let lib = get(&files, "src/lib.rs");
    assert!(lib.contains("impl Policy for MyPolicy"));
    assert!(get(&files, "README.md").contains("Conformance fails until the rules are written"));
}

#[test]
fn every_placeholder_is_filled() {
    for template in [Template::Apache37, Template::Strict, Template::Empty] {
        for f in render("p", template).unwrap() {
            assert!(
                !f.contents.contains("{{name}}") && !f.contents.contains("{{crate}}"),
                "{template}: {} has a placeholder",
                f.path.display()
            );
        }
    }
    assert!(fill("t", "a {{missing}} b", &[]).is_err());
}

#[test]
fn names_cargo_refuses_are_refused() {
    for bad in [
        "",
        "1policy",
        "-policy",
        "my policy",
        "my.policy",
        "pölicy",
        "fn",
        "self",
        "std",
        "test",
        "kaas-policy-sdk",
        "kaas_apache37_rules",
        "CON",
        &"p".repeat(65),
    ] {
        assert!(validate_name(bad).is_err(), "`{bad}` accepted");
        assert!(render(bad, Template::Apache37).is_err());
    }
    for good in ["p", "my-policy", "capped_v2", "Strict2"] {
        validate_name(good).unwrap_or_else(|e| panic!("`{good}` refused: {e}"));
    }
}

#[test]
fn refuses_a_non_empty_directory_and_leaves_it_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("Cargo.toml"), "mine").unwrap();
    let err = new_policy("p", Template::Apache37, tmp.path()).unwrap_err();
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(fs::read_to_string(dir.join("Cargo.toml")).unwrap(), "mine");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn refuses_a_file_where_the_crate_would_go() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("p"), "x").unwrap();
    let err = new_policy("p", Template::Empty, tmp.path()).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn writes_every_file_into_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("p")).unwrap();
    let dir = new_policy("p", Template::Strict, tmp.path()).unwrap();
    assert_eq!(dir, tmp.path().join("p"));
    for f in render("p", Template::Strict).unwrap() {
        assert_eq!(fs::read_to_string(dir.join(&f.path)).unwrap(), f.contents);
    }
}

#[test]
fn wit_version_comes_from_the_wit_package_line() {
    assert_eq!(
        wit_package_version(embedded::WIT).unwrap(),
        crate::policy::WIT_VERSION
    );
}

/// (name, version, checksum) of each registry package of a Cargo.lock.
fn registry_packages(lock: &str) -> Vec<(String, String, String)> {
    lock.split("[[package]]")
        .filter(|b| b.contains("source = \"registry+"))
        .map(|b| {
            let field = |k: &str| {
                b.lines()
                    .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or_else(|| panic!("no {k} in {b}"))
                    .to_owned()
            };
            (field("name"), field("version"), field("checksum"))
        })
        .collect()
}

#[test]
fn lock_pins_the_workspace_versions_of_wit_bindgen_and_its_dependencies() {
    let workspace = registry_packages(include_str!("../../../Cargo.lock"));
    let template = registry_packages(embedded::CARGO_LOCK);
    assert!(
        template
            .iter()
            .any(|(n, v, _)| n == "wit-bindgen" && v == "0.61.1")
    );
    for p in &template {
        assert!(
            workspace.contains(p),
            "{p:?} is not in the workspace Cargo.lock: regenerate templates/Cargo.lock.in"
        );
    }
}

#[test]
fn lock_places_the_root_package_in_cargo_order() {
    let files = render("my-policy", Template::Apache37).unwrap();
    let lock = get(&files, "Cargo.lock");
    let names: Vec<&str> = lock
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.contains(&"my-policy") && names.contains(&"kaas-apache37-rules"));
    assert!(lock.contains(&format!(
        "name = \"kaas-policy-sdk\"\nversion = \"{}\"",
        env!("CARGO_PKG_VERSION")
    )));
    let empty = render("my-policy", Template::Empty).unwrap();
    assert!(!get(&empty, "Cargo.lock").contains("kaas-apache37-rules"));
    // A name that is also a locked dependency's: cargo writes the lock.
    let files = render("syn", Template::Empty).unwrap();
    assert!(!files.iter().any(|f| f.path == Path::new("Cargo.lock")));
}
