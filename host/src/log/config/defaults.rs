//! The defaults a topic's configs start from, and changing them while the
//! broker runs: the static ones (`kaas broker --override
//! log.retention.ms=...`, fixed at start) with the cluster-wide dynamic
//! layer over them (AlterConfigs on the default broker resource, in Kafka's
//! broker names, see [`super::broker_defaults`]). A change of the dynamic
//! layer is validated as a topic config is, made durable (single-node mode:
//! `<data dir>/__configs/broker-default.json`; cluster mode: etcd, through
//! `cluster::admin`) and handed to every open partition of every topic that
//! does not override the config, from its next append, roll, retention
//! check or cleaning pass.

use super::broker_defaults::{self, Layer};
use crate::log::*;

const DIR: &str = "__configs";
const FILE: &str = "broker-default.json";

/// The defaults layers and what they make.
#[derive(Debug)]
pub(in crate::log) struct Defaults {
    /// From the flags: static broker settings over the built-in defaults.
    base: LogConfig,
    /// The cluster-wide dynamic defaults, by broker name.
    dynamic: Layer,
    /// `dynamic` over `base`: what a topic without overrides has.
    pub(in crate::log) effective: LogConfig,
}

/// The log settings `layer` gives over `base`.
fn layered(base: &LogConfig, layer: &Layer) -> Result<LogConfig, String> {
    parse_configs(base, &broker_defaults::as_topic_configs(layer)?)
}

/// `layer` without the entries that no longer validate (a layer stored by
/// an earlier build), each logged.
fn valid_part(base: &LogConfig, layer: &Layer) -> Layer {
    crate::log::topics::topic::valid_entries(
        layer,
        |l| layered(base, l),
        |k, v, error| {
            tracing::warn!(config = %k, value = %v, %error,
                "a dynamic broker default is no longer valid; it is ignored");
        },
    )
}

impl Defaults {
    /// No dynamic layer.
    pub(in crate::log) fn new(base: LogConfig) -> Self {
        Defaults {
            effective: base.clone(),
            base,
            dynamic: Layer::new(),
        }
    }

    /// Single-node mode: with the dynamic layer stored under `root`, if any.
    pub(in crate::log) fn stored(root: &Path, base: LogConfig) -> Self {
        let path = root.join(DIR).join(FILE);
        let layer = match fs::read(&path) {
            Ok(b) => serde_json::from_slice::<Layer>(&b).unwrap_or_else(|error| {
                tracing::warn!(path = %path.display(), %error,
                    "the dynamic broker defaults do not parse; none apply");
                Layer::new()
            }),
            Err(_) => Layer::new(),
        };
        let mut d = Defaults::new(base);
        d.dynamic = valid_part(&d.base, &layer);
        d.effective = layered(&d.base, &d.dynamic).unwrap_or_else(|_| d.base.clone());
        d
    }
}

impl LogManager {
    /// The cluster-wide dynamic defaults in force, by broker name.
    pub fn dynamic_defaults(&self) -> Layer {
        self.defaults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .dynamic
            .clone()
    }

    /// Checks a new dynamic layer as Kafka checks one: every name a
    /// broker-level topic default that may change at run time, every value
    /// valid for the topic config it sets. Kafka's message on refusal.
    pub fn check_dynamic_defaults(&self, layer: &Layer) -> Result<(), String> {
        let fixed: Vec<&str> = layer
            .keys()
            .map(String::as_str)
            .filter(|k| broker_defaults::topic_config_of(k).is_some())
            .filter(|k| !broker_defaults::dynamic(k))
            .collect();
        if !fixed.is_empty() {
            return Err(format!(
                "Cannot update these configs dynamically: Set({})",
                fixed.join(", ")
            ));
        }
        let base = self
            .defaults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .base
            .clone();
        layered(&base, layer).map(|_| ())
    }

    /// Single-node mode: replaces the dynamic layer with `layer` (checked
    /// first: InvalidInput with Kafka's message), durably, and applies it.
    pub fn set_dynamic_defaults(&self, layer: Layer) -> io::Result<()> {
        self.check_dynamic_defaults(&layer)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let _one = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.root.join(DIR);
        fs::create_dir_all(&dir)?;
        let bytes = serde_json::to_vec_pretty(&layer).map_err(io::Error::other)?;
        atomic_file::write_atomically(&dir.join(FILE), &bytes)?;
        self.use_dynamic_defaults(&layer);
        Ok(())
    }

    /// Makes `layer` the dynamic defaults (cluster mode: etcd's record, as
    /// agreed) and hands every topic the settings that follow; entries that
    /// do not validate are ignored (logged). False when nothing changed.
    pub fn apply_dynamic_defaults(&self, layer: &Layer) -> bool {
        let _one = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        self.use_dynamic_defaults(layer)
    }

    /// [`Self::apply_dynamic_defaults`] under the `creating` lock.
    fn use_dynamic_defaults(&self, layer: &Layer) -> bool {
        let effective = {
            let mut d = self.defaults.write().unwrap_or_else(|p| p.into_inner());
            let kept = valid_part(&d.base, layer);
            if kept == d.dynamic {
                return false;
            }
            d.effective = layered(&d.base, &kept).unwrap_or_else(|_| d.base.clone());
            d.dynamic = kept;
            d.effective.clone()
        };
        let topics: Vec<Arc<Topic>> = self
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for t in topics {
            let config = parse_stored_configs(&t.name, &effective, &t.overrides);
            self.reconfigure(&t, config, t.overrides.clone());
        }
        tracing::info!(defaults = ?layer, "dynamic broker defaults applied");
        true
    }
}
