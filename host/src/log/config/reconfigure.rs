//! Changing a topic's configs while it runs (AlterConfigs and
//! IncrementalAlterConfigs): the new overrides are validated as a creation
//! validates them, made durable in the topic's metadata record, and the
//! resulting log settings handed to every partition of the topic open here,
//! which apply them from their next append, roll, retention check or
//! cleaning pass. Cluster mode agrees the record in etcd
//! (`cluster::admin`) and each broker applies it through
//! [`LogManager::sync_topics`].

use crate::log::*;

impl LogManager {
    /// The log settings `overrides` give on this broker's defaults, or
    /// Kafka's message for the first config refused.
    pub fn check_configs(&self, overrides: &BTreeMap<String, String>) -> Result<LogConfig, String> {
        parse_configs(&self.defaults(), overrides)
    }

    /// Single-node mode: replaces topic `name`'s overrides with
    /// `overrides` (validated first), durably, and applies them to its
    /// partitions. NotFound for an unknown topic, InvalidInput (with
    /// Kafka's message) for a refused config.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        overrides: BTreeMap<String, String>,
    ) -> io::Result<()> {
        let _one = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let t = self
            .topic(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no topic {name}")))?;
        let config = self
            .check_configs(&overrides)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let meta = TopicMeta::new(
            name,
            t.partition_count,
            hex::encode(t.id),
            overrides.clone(),
        );
        let bytes = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
        atomic_file::write_atomically(
            &self.root.join("__topics").join(format!("{name}.json")),
            &bytes,
        )?;
        self.reconfigure(&t, config, overrides);
        Ok(())
    }

    /// Puts `t` back under new settings: a new topic entry with the same
    /// partitions, each told the new settings.
    pub(in crate::log) fn reconfigure(
        &self,
        t: &Topic,
        config: LogConfig,
        overrides: BTreeMap<String, String>,
    ) {
        let open: Vec<Option<Arc<Partition>>> =
            (0..t.partition_count).map(|i| t.partition(i)).collect();
        for p in open.iter().flatten() {
            p.set_config(config.clone());
        }
        let changed = Topic::new(
            &t.name,
            t.id,
            t.partition_count,
            config,
            overrides,
            open,
            t.refusals.clone(),
        );
        self.topics_write()
            .insert(t.name.clone(), Arc::new(changed));
    }
}
