//! Creating, growing and deleting topics on this broker's disk: planned
//! against the limits first, then all or nothing (a creation that fails
//! leaves no directory behind).

use crate::log::*;

impl LogManager {
    /// Checks a topic creation (name, partition count, configs, limits)
    /// without creating anything; returns the description to agree on.
    pub fn plan_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
        existing: usize,
    ) -> Result<TopicMeta, CreateError> {
        if !valid_topic_name(name) {
            return Err(CreateError::InvalidName(name.into()));
        }
        if !(1..=10_000).contains(&partitions) {
            return Err(CreateError::InvalidPartitions(partitions));
        }
        parse_configs(&self.defaults(), overrides).map_err(CreateError::InvalidConfig)?;
        let count = partitions as usize;
        if existing.saturating_add(count) > self.limits.max_partitions {
            return Err(CreateError::PartitionLimit {
                requested: count,
                existing,
                max: self.limits.max_partitions,
            });
        }
        Ok(TopicMeta::new(
            name,
            partitions,
            hex::encode(new_topic_id(name)),
            overrides.clone(),
        ))
    }

    /// Creates a topic (validate_only checks without creating). Refused
    /// when its partitions would take the broker past
    /// [`TopicLimits::max_partitions`] or its files past the open-file
    /// budget. All or nothing: if any partition or the metadata file cannot
    /// be created, what was created is removed before the error returns.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, CreateError> {
        if !valid_topic_name(name) {
            return Err(CreateError::InvalidName(name.into()));
        }
        if !(1..=10_000).contains(&partitions) {
            return Err(CreateError::InvalidPartitions(partitions));
        }
        let count = partitions as usize;
        let config =
            parse_configs(&self.defaults(), &overrides).map_err(CreateError::InvalidConfig)?;
        // The checks and the reservation happen under `creating`; the
        // partitions are made without any lock the produce and fetch paths
        // take (creating thousands of them takes seconds).
        let mut creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let (exists, existing) = {
            let topics = self.topics.read().unwrap_or_else(|p| p.into_inner());
            (
                topics.contains_key(name) || creating.contains_key(name),
                topics
                    .values()
                    .map(|t| usize::try_from(t.partition_count).unwrap_or(0))
                    .sum::<usize>()
                    + creating.values().sum::<usize>(),
            )
        };
        if exists {
            return Err(CreateError::Exists(name.into()));
        }
        if existing.saturating_add(count) > self.limits.max_partitions {
            return Err(CreateError::PartitionLimit {
                requested: count,
                existing,
                max: self.limits.max_partitions,
            });
        }
        // Partitions take no descriptor of their own: their files go
        // through the open-file cache, charged once at its bound. A new
        // partition's file may take one more place in it until it is full,
        // and the metadata file is open while it is written.
        let cache_room = self.files.max().saturating_sub(self.files.open_count());
        let wanted = count.min(cache_room) as u64;
        crate::fd_budget::check(wanted.saturating_add(1), self.limits.fd_reserve)?;
        let id = new_topic_id(name);
        if validate_only {
            return Ok(Arc::new(Topic::new(
                name,
                id,
                partitions,
                config,
                overrides,
                Vec::new(),
                Vec::new(),
            )));
        }
        creating.insert(name.into(), count);
        drop(creating);
        let _reserved = Reserved(self, name);
        let ps = self.create_partitions(name, id, count, &config)?;
        let meta = TopicMeta::new(name, partitions, hex::encode(id), overrides.clone());
        let meta_path = self.root.join("__topics").join(format!("{name}.json"));
        let written = serde_json::to_vec_pretty(&meta)
            .map_err(io::Error::other)
            .and_then(|bytes| atomic_file::write_atomically(&meta_path, &bytes));
        if let Err(e) = written {
            let _ = fs::remove_file(meta_path.with_extension("tmp"));
            self.remove_partition_dirs(name, count);
            return Err(e.into());
        }
        let open = ps.into_iter().map(Some).collect();
        let t = Arc::new(Topic::new(
            name,
            id,
            partitions,
            config,
            overrides,
            open,
            Vec::new(),
        ));
        self.topics_write().insert(name.into(), t.clone());
        Ok(t)
    }

    /// Creates partitions `0..count` of a new topic; on a failure removes
    /// the directories of those already made (and of the one that failed)
    /// and returns the error.
    fn create_partitions(
        &self,
        name: &str,
        id: [u8; 16],
        count: usize,
        config: &LogConfig,
    ) -> io::Result<Vec<Arc<Partition>>> {
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let mut ps = Vec::with_capacity(count);
        for p in 0..count {
            let created = i32::try_from(p)
                .map_err(io::Error::other)
                .and_then(|index| {
                    // A directory of that name is a leftover of a creation
                    // a crash interrupted (the topic has no metadata): its
                    // old files must not come back as this topic's data.
                    let dir = self.root.join(Partition::dir_name(name, index));
                    if dir.exists() {
                        fs::remove_dir_all(&dir)?;
                    }
                    if fault_in_creation(p, count) {
                        return Err(io::Error::other("fault injection: create-partition"));
                    }
                    let at = At {
                        files: &self.files,
                        root: &self.root,
                        topic: name,
                        id: index,
                        config: config.clone(),
                        immediate_hw: immediate,
                    };
                    Partition::open(at, Opening::Create)
                });
            match created {
                Ok(mut part) => {
                    if let Some(w) = self.wal() {
                        part = part.with_wal(w, id);
                    }
                    ps.push(Arc::new(part));
                }
                Err(e) => {
                    drop(ps);
                    self.remove_partition_dirs(name, p + 1);
                    tracing::warn!(topic = name, partition = p, error = %e, "creating a partition failed; the topic's partitions created so far were removed");
                    return Err(e);
                }
            }
        }
        Ok(ps)
    }

    /// Removes the directories of partitions `0..count` of `name`, where
    /// they exist (the undo of a failed creation; failures are logged).
    fn remove_partition_dirs(&self, name: &str, count: usize) {
        for p in 0..count {
            let Ok(p) = i32::try_from(p) else { break };
            let dir = self.root.join(Partition::dir_name(name, p));
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::error!(dir = %dir.display(), error = %e, "removing a partition of a failed creation failed")
                }
            }
        }
    }

    /// Single-node mode: grows topic `name` to `count` partitions (the
    /// caller checked the count and the limits). The new partitions are
    /// created before the metadata file names them, so a crash between
    /// leaves directories the next creation of that name removes.
    pub fn add_partitions(&self, name: &str, count: i32) -> io::Result<()> {
        let _one = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let t = self
            .topic(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no topic {name}")))?;
        if count <= t.partition_count {
            return Ok(());
        }
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let mut open: Vec<Option<Arc<Partition>>> =
            (0..t.partition_count).map(|i| t.partition(i)).collect();
        for i in t.partition_count..count {
            let dir = self.root.join(Partition::dir_name(name, i));
            if dir.exists() {
                fs::remove_dir_all(&dir)?;
            }
            let at = At {
                files: &self.files,
                root: &self.root,
                topic: name,
                id: i,
                config: t.config.clone(),
                immediate_hw: immediate,
            };
            let mut part = Partition::open(at, Opening::Create)?;
            if let Some(w) = self.wal() {
                part = part.with_wal(w, t.id);
            }
            open.push(Some(Arc::new(part)));
        }
        let meta = TopicMeta::new(name, count, hex::encode(t.id), t.overrides.clone());
        let bytes = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
        atomic_file::write_atomically(
            &self.root.join("__topics").join(format!("{name}.json")),
            &bytes,
        )?;
        let grown = Topic::new(
            name,
            t.id,
            count,
            t.config.clone(),
            t.overrides.clone(),
            open,
            t.refusals.clone(),
        );
        self.topics_write().insert(name.into(), Arc::new(grown));
        Ok(())
    }

    /// Deletes a topic and its data; false if it did not exist.
    pub fn delete_topic(&self, name: &str) -> io::Result<bool> {
        // While its directories go, the name stays reserved: a topic of
        // the same name created meanwhile would lose its own directories.
        let t = {
            let mut creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
            let removed = self.topics_write().remove(name);
            if removed.is_some() {
                creating.insert(name.into(), 0);
            }
            removed
        };
        let Some(t) = t else {
            return Ok(false);
        };
        let _reserved = Reserved(self, name);
        fs::remove_file(self.root.join("__topics").join(format!("{name}.json")))?;
        for p in &t.open_partitions() {
            p.destroy()?;
        }
        Ok(true)
    }
}

/// Test-only: with the `fault-injection` feature and
/// `KAAS_FAULT=create-partition`, the creation of the middle partition of
/// the first topic created with more than one partition fails, once.
pub(in crate::log) fn fault_in_creation(p: usize, count: usize) -> bool {
    count > 1 && p == count / 2 && crate::fault::once("create-partition")
}
