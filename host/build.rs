//! Embeds the apache37 policy component into the `kaas` binary when it has
//! been built (cargo build --release --target wasm32-wasip2 -p
//! kaas-policy-apache37), so a broker needs no policy file to start.
//! Without it the binary still builds; `kaas broker` then requires --policy.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../target"));
    let wasm = target.join("wasm32-wasip2/release/kaas_policy_apache37.wasm");
    println!("cargo:rerun-if-changed={}", wasm.display());
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo::rustc-check-cfg=cfg(kaas_embedded_policy)");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("apache37.wasm");
    if wasm.is_file() && std::fs::copy(&wasm, &out).is_ok() {
        println!("cargo:rustc-cfg=kaas_embedded_policy");
    } else {
        println!("cargo:warning=apache37 policy not built yet; `kaas broker` will need --policy");
        let _ = std::fs::write(&out, b"");
    }
}
