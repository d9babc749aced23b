//! The precompiled-artifact cache: compiling a component with cranelift
//! takes tens of milliseconds, deserializing a precompiled one a fraction of
//! one. Artifacts are keyed by the engine's compatibility hash (wasmtime
//! version and every setting that changes code) and the wasm's sha256, so a
//! stale artifact is never loaded. Touches only files under its directory.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of `<engine-hash>-<wasm-sha256>.cwasm` files.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    /// Where artifacts live; created on first store.
    dir: PathBuf,
}

/// Feeds `Hash` output into sha256 so the key is stable across processes
/// (std's `DefaultHasher` makes no such promise).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or([0; 8]))
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A stable hex digest of everything that makes precompiled code compatible.
pub fn engine_key(engine: &Engine) -> String {
    let mut h = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    hex::encode(&h.0.finalize()[..12])
}

impl ArtifactCache {
    /// A cache rooted at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ArtifactCache { dir: dir.into() }
    }

    /// The default location: `$KAAS_CACHE_DIR`, else `$XDG_CACHE_HOME/kaas`,
    /// else `~/.cache/kaas`, else the system temp dir.
    pub fn default_location() -> Self {
        let dir = std::env::var_os("KAAS_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kaas")))
            .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/kaas")))
            .unwrap_or_else(|| std::env::temp_dir().join("kaas-cache"));
        ArtifactCache::new(dir)
    }

    fn path_for(&self, engine: &Engine, wasm_sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", engine_key(engine), wasm_sha256))
    }

    /// Loads the component from the cache, or compiles it and stores the
    /// artifact. Returns the component and whether it came from the cache.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> anyhow::Result<(Component, bool)> {
        let path = self.path_for(engine, wasm_sha256);
        if path.is_file() {
            if let Some(component) = deserialize(engine, &path) {
                return Ok((component, true));
            }
            // A corrupt or foreign artifact: drop it and compile afresh.
            let _ = fs::remove_file(&path);
        }
        let artifact = engine
            .precompile_component(wasm)
            .map_err(|e| anyhow::anyhow!("compiling the policy component: {e:#}"))?;
        store_atomically(&self.dir, &path, &artifact)
            .with_context(|| format!("writing the precompiled policy to {}", path.display()))?;
        let component = deserialize(engine, &path)
            .with_context(|| format!("loading the artifact just written to {}", path.display()))?;
        Ok((component, false))
    }
}

/// Deserializes an artifact this cache wrote.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> Option<Component> {
    // SAFETY: the file was produced by `Engine::precompile_component` of an
    // engine with the same compatibility hash (it is in the file name, and
    // wasmtime checks it again in the header), written atomically into a
    // directory only this cache writes. Wasmtime's documented requirement for
    // `deserialize_file` is that the bytes come from a trusted precompile.
    unsafe { Component::deserialize_file(engine, path) }.ok()
}

fn store_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)?;
    Ok(())
}
