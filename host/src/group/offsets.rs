//! Committed offsets as OffsetFetch serves them: per group, per (topic,
//! partition), and only once durable. The journal's live state also holds
//! commits still waiting for their fsync; an entry moves here when its
//! write is durable and is still the latest for its key.

use std::collections::{BTreeMap, HashMap};

use super::journal::{Live, OffsetKey};
use super::record::Committed;

/// Durable committed offsets.
#[derive(Debug, Default)]
pub struct Offsets {
    groups: HashMap<String, BTreeMap<OffsetKey, Committed>>,
}

impl Offsets {
    /// Everything a replayed journal holds (all of it is on disk).
    pub fn from_live(live: &Live) -> Offsets {
        let groups = live
            .groups
            .iter()
            .filter(|(_, g)| !g.offsets.is_empty())
            .map(|(name, g)| {
                (
                    name.clone(),
                    g.offsets
                        .iter()
                        .map(|(k, (_, c))| (k.clone(), c.clone()))
                        .collect(),
                )
            })
            .collect();
        Offsets { groups }
    }

    pub fn group(&self, group: &str) -> Option<&BTreeMap<OffsetKey, Committed>> {
        self.groups.get(group)
    }

    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.groups
            .get(group)
            .and_then(|g| g.get(&(topic.to_string(), partition)))
    }

    pub fn has_offsets(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|g| !g.is_empty())
    }

    pub fn insert(&mut self, group: &str, key: OffsetKey, committed: Committed) {
        self.groups
            .entry(group.to_string())
            .or_default()
            .insert(key, committed);
    }

    pub fn remove(&mut self, group: &str, key: &OffsetKey) {
        if let Some(g) = self.groups.get_mut(group) {
            g.remove(key);
            if g.is_empty() {
                self.groups.remove(group);
            }
        }
    }

    pub fn remove_group(&mut self, group: &str) {
        self.groups.remove(group);
    }

    /// Drops every group's offsets of `topic`.
    pub fn remove_topic(&mut self, topic: &str) {
        for g in self.groups.values_mut() {
            g.retain(|(t, _), _| t != topic);
        }
        self.groups.retain(|_, g| !g.is_empty());
    }

    /// Names of groups with offsets.
    pub fn group_names(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }
}
