//! Cluster mode's side of the log manager: a log on the shared volume with
//! nothing open, the write-ahead log directory of each lease, the topic
//! list kept in step with the cluster view, and partitions taken over,
//! released and abandoned as leadership moves.

use super::*;

impl LogManager {
    /// Cluster mode: a log on the shared data directory with no partition
    /// open; the control loop opens those this broker leads
    /// ([`Self::take_over`]) once [`Self::use_wal_dir`] gave it a
    /// write-ahead log of its own.
    pub fn open_clustered(
        root: &Path,
        defaults: LogConfig,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<Self> {
        fs::create_dir_all(root.join(CLUSTER_WAL_DIR))?;
        Ok(LogManager {
            root: root.to_path_buf(),
            defaults: RwLock::new(defaults::Defaults::new(defaults)),
            group_commit,
            topics: RwLock::new(BTreeMap::new()),
            wal: RwLock::new(None),
            clustered: true,
            abandoned: Default::default(),
            abandoned_at_rotation: Default::default(),
            limits: TopicLimits::default(),
            creating: Mutex::new(BTreeMap::new()),
            topics_version: Default::default(),
            files: open_files::OpenFiles::new(open_files::DEFAULT_MAX_OPEN),
        })
    }

    /// Whether partitions open only while this broker leads them.
    pub fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Cluster mode: appends from now on are framed into a new write-ahead
    /// log in `<data dir>/__cluster/wal/<name>/` (one per lease: the old
    /// one stays, untouched, for whoever takes over what it covers).
    pub fn use_wal_dir(&self, name: &str) -> io::Result<()> {
        if self.group_commit.mode() != FsyncMode::Always {
            return Ok(());
        }
        let dir = self.root.join(CLUSTER_WAL_DIR).join(name);
        fs::create_dir_all(&dir)?;
        let w = wal::Wal::create(&dir, 0, Vec::new())?;
        *self.wal.write().unwrap_or_else(|p| p.into_inner()) = Some(w);
        Ok(())
    }

    /// The directory of write-ahead log `name` (see [`Self::use_wal_dir`]).
    pub fn cluster_wal_dir(&self, name: &str) -> PathBuf {
        self.root.join(CLUSTER_WAL_DIR).join(name)
    }

    /// Cluster mode: makes the topic list `metas` (etcd's). New topics
    /// come with no partition open; a grown or reconfigured one keeps its
    /// open partitions (which take the new configs);
    /// a topic gone (or re-created under a new id) has its open partitions
    /// destroyed. Returns the partitions of deleted topics that were open.
    pub fn sync_topics(&self, metas: &BTreeMap<String, TopicMeta>) -> usize {
        let mut dropped = Vec::new();
        let defaults = self.defaults();
        {
            let mut topics = self.topics_write();
            topics.retain(|name, t| {
                let keep = metas
                    .get(name)
                    .is_some_and(|m| parse_id(&m.id) == t.id && m.partitions >= t.partition_count);
                if !keep {
                    dropped.push(t.clone());
                }
                keep
            });
            for (name, m) in metas {
                let current = topics.get(name).map(|t| (t.partition_count, &t.overrides));
                if current == Some((m.partitions, &m.configs)) {
                    continue;
                }
                let config = parse_stored_configs(name, &defaults, &m.configs);
                let open: Vec<Option<Arc<Partition>>> = topics
                    .get(name)
                    .map(|t| {
                        t.slots
                            .iter()
                            .map(|s| s.write().unwrap_or_else(|p| p.into_inner()).take())
                            .collect()
                    })
                    .unwrap_or_default();
                // A config change (AlterConfigs agreed in etcd) reaches the
                // partitions this broker has open.
                for p in open.iter().flatten() {
                    p.set_config(config.clone());
                }
                let refused = topics
                    .get(name)
                    .map(|t| t.refusals.clone())
                    .unwrap_or_default();
                let t = Topic::new(
                    name,
                    parse_id(&m.id),
                    m.partitions,
                    config,
                    m.configs.clone(),
                    open,
                    refused,
                );
                topics.insert(name.clone(), Arc::new(t));
            }
        }
        let mut n = 0;
        for t in dropped {
            // A topic re-created under the same name keeps going under the new
            // entry; only one whose name is gone loses its files.
            let gone = !metas.contains_key(&t.name);
            for i in 0..t.partition_count {
                if let Some(p) = t.take(i) {
                    n += 1;
                    let r = if gone { p.destroy() } else { p.close() };
                    if let Err(e) = r {
                        tracing::error!(topic = %t.name, partition = i, error = %e, "closing a partition of a deleted topic failed");
                    }
                }
            }
        }
        n
    }

    /// Cluster mode: opens partition `p` of `topic` as its leader at
    /// `epoch`, taking back first what the write-ahead logs in `replay`
    /// (directory names, oldest first) hold for it. Writes go through
    /// `gate`.
    pub fn take_over(
        &self,
        topic: &str,
        p: i32,
        epoch: i32,
        replay: &[String],
        gate: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> io::Result<Arc<Partition>> {
        let t = self
            .topic(topic)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no topic {topic}")))?;
        if p < 0 || p >= t.partition_count {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no partition {topic}-{p}"),
            ));
        }
        let mut batches = Vec::new();
        for name in replay {
            let dir = self.cluster_wal_dir(name);
            if dir.exists() {
                batches.extend(wal::frames_for(&dir, (t.id, p))?);
            }
        }
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let at = At {
            files: &self.files,
            root: &self.root,
            topic,
            id: p,
            config: t.config.clone(),
            immediate_hw: immediate,
        };
        let mut part = Partition::open(at, Opening::TakeOver(&batches))?
            .with_gate(gate)
            .with_refusals(t.refusals(p));
        if let Some(w) = self.wal() {
            part = part.with_wal(w, t.id);
        }
        part.become_leader(epoch)?;
        let part = Arc::new(part);
        if !t.put(p, part.clone()) {
            return Err(io::Error::other("partition slot vanished"));
        }
        Ok(part)
    }

    /// Cluster mode: a client batch for partition `p` of `topic`, which is
    /// not held here, was refused as not leader; remembered for when this
    /// broker leads it again ([`refusals`]).
    pub fn refused_unheld(&self, topic: &str, p: i32, batch: &[u8]) {
        if let Some(h) = batch::parse_header(batch) {
            self.refused_unheld_header(topic, p, &h);
        }
    }

    /// [`Self::refused_unheld`] for a batch whose header `h` the caller
    /// parsed.
    pub fn refused_unheld_header(&self, topic: &str, p: i32, h: &batch::BatchHeader) {
        if let Some(t) = self.topic(topic)
            && (0..t.partition_count).contains(&p)
        {
            t.refusals(p).refused(h, None);
        }
    }

    /// Cluster mode: closes a partition this broker gives up.
    pub fn release(&self, topic: &str, p: i32) {
        if let Some(part) = self.topic(topic).and_then(|t| t.take(p))
            && let Err(e) = part.close()
        {
            tracing::error!(topic, partition = p, error = %e, "closing a partition handed over failed");
        }
    }

    /// Cluster mode: drops a partition without writing anything more (the
    /// lease is lost: another broker may own its files already).
    pub fn abandon(&self, topic: &str, p: i32) {
        if let Some(part) = self.topic(topic).and_then(|t| t.take(p)) {
            self.abandoned
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            part.abandon();
        }
    }
}
