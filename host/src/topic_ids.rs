//! Topics by id, for the requests that name a topic by its id alone
//! (Fetch v13+, Metadata v10+, DeleteTopics v6+): a map from id to name,
//! rebuilt only when the log's topic map has changed
//! ([`LogManager::topics_version`]), so a lookup costs a hash probe and a
//! name lookup instead of a scan of every topic per request.
//!
//! The map holds names, not topics: a deleted topic is not kept alive by
//! it (nor its partitions' files), and an id that no longer matches the
//! topic now under that name (deleted and created again) finds nothing.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::log::{LogManager, Topic};

/// The id → name map and the topic-map version it was built from.
#[derive(Debug, Default)]
pub struct TopicIds {
    built: RwLock<Option<Built>>,
}

#[derive(Debug)]
struct Built {
    version: u64,
    names: Arc<HashMap<[u8; 16], Arc<str>>>,
}

impl TopicIds {
    /// The topic with this id, if the log has one.
    pub fn topic(&self, logs: &LogManager, id: &[u8; 16]) -> Option<Arc<Topic>> {
        let name = self.names(logs).get(id).cloned()?;
        logs.topic(&name).filter(|t| t.id == *id)
    }

    /// The map for the log's topics now. The version is read before the
    /// topics, so a map is never labelled newer than what it holds; a
    /// change after that moves the version and the next lookup rebuilds.
    fn names(&self, logs: &LogManager) -> Arc<HashMap<[u8; 16], Arc<str>>> {
        let version = logs.topics_version();
        if let Some(b) = self
            .built
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            && b.version == version
        {
            return b.names.clone();
        }
        let names: Arc<HashMap<_, _>> = Arc::new(
            logs.topics()
                .iter()
                .map(|t| (t.id, Arc::from(t.name.as_str())))
                .collect(),
        );
        let mut built = self.built.write().unwrap_or_else(|p| p.into_inner());
        // A concurrent rebuild may have stored a newer map meanwhile.
        if built.as_ref().is_none_or(|b| b.version < version) {
            *built = Some(Built {
                version,
                names: names.clone(),
            });
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{FsyncMode, GroupCommit, LogConfig};

    fn open(dir: &std::path::Path) -> LogManager {
        LogManager::open(
            dir,
            LogConfig::default(),
            GroupCommit::new(FsyncMode::Never),
        )
        .expect("open")
    }

    #[test]
    fn a_topic_is_found_by_its_id_across_creations_and_deletions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = open(dir.path());
        let ids = TopicIds::default();
        let a = logs
            .create_topic("a", 1, Default::default(), false)
            .expect("create a");
        assert_eq!(
            ids.topic(&logs, &a.id).map(|t| t.name.clone()),
            Some("a".into())
        );
        assert!(ids.topic(&logs, &[7; 16]).is_none(), "an unknown id");

        // A topic created after the map was built is found (the map is rebuilt).
        let b = logs
            .create_topic("b", 2, Default::default(), false)
            .expect("create b");
        assert_eq!(
            ids.topic(&logs, &b.id).map(|t| t.name.clone()),
            Some("b".into())
        );
        assert_eq!(
            ids.topic(&logs, &a.id).map(|t| t.name.clone()),
            Some("a".into())
        );

        // Deleted: its id names nothing, and the map does not keep it alive.
        let old_id = a.id;
        logs.delete_topic("a").expect("delete a");
        assert!(ids.topic(&logs, &old_id).is_none(), "a deleted topic's id");
        let weak = Arc::downgrade(&a);
        drop(a);
        assert!(weak.upgrade().is_none(), "nothing keeps the deleted topic");

        // Created again under the same name: found by its new id, not the old.
        let a2 = logs
            .create_topic("a", 1, Default::default(), false)
            .expect("create a again");
        assert_ne!(a2.id, old_id);
        assert_eq!(ids.topic(&logs, &a2.id).map(|t| t.id), Some(a2.id));
        assert!(ids.topic(&logs, &old_id).is_none(), "the old id");
    }
}
