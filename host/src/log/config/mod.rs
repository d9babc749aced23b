//! Topic configs: what each one is, where its value comes from, and
//! changing them while the broker runs.
//!
//! - [`topic_config`]: Kafka 3.7's topic-level configs: names, types, defaults, validators, support.
//! - [`broker_defaults`]: the broker-level defaults of topic configs under Kafka's broker names.
//! - [`defaults`]: the defaults a topic starts from, and changing the dynamic layer.
//! - [`reconfigure`]: changing one topic's configs while it runs (AlterConfigs).
//! - [`config_docs`]: one line of documentation per topic config (DescribeConfigs).

pub mod broker_defaults;
pub mod config_docs;
pub(super) mod defaults;
mod reconfigure;
pub mod topic_config;
