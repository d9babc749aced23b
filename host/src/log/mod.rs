//! The log: topics, their partitions, and durability.
//!
//! [`LogManager`] owns the data directory: one directory per partition
//! (`<topic>-<n>/`, see [`partition`]) and one metadata file per topic
//! (`__topics/<topic>.json`: partition count, topic id, configs). It opens
//! everything at start (recovering partitions that were not closed
//! cleanly, in parallel), creates and deletes topics, and closes cleanly.
//! It knows nothing of coordinators or framing.

pub mod batch;
pub mod partition;
pub mod producer;
pub mod segment;
pub mod sync;
pub mod zero_tail;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

pub use partition::{LogConfig, Partition};
pub use sync::{FsyncMode, GroupCommit};

/// A topic and its partitions.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    /// 16 bytes, stable for the topic's life (Metadata v10+).
    pub id: [u8; 16],
    pub partitions: Vec<Arc<Partition>>,
    pub config: LogConfig,
    /// The configs as given (DescribeConfigs shows them as dynamic).
    pub overrides: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TopicMeta {
    name: String,
    partitions: i32,
    id: String,
    configs: BTreeMap<String, String>,
}

/// Why a topic could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("topic {0} already exists")]
    Exists(String),
    #[error("invalid topic name {0:?}")]
    InvalidName(String),
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("storage: {0}")]
    Io(#[from] io::Error),
}

/// Kafka's topic-name rule: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Applies topic config overrides to the broker defaults.
pub fn parse_configs(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, String> {
    let mut c = defaults.clone();
    for (k, v) in overrides {
        let num = |v: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("{k}={v} is not a number"))
        };
        match k.as_str() {
            "segment.bytes" => {
                let n = num(v)?;
                if n < 1024 {
                    return Err(format!("segment.bytes={n} is below 1024"));
                }
                c.segment_bytes = n as u64;
            }
            "max.message.bytes" => {
                let n = num(v)?;
                if n < 0 {
                    return Err(format!("max.message.bytes={n}"));
                }
                c.max_message_bytes = n as usize;
            }
            "retention.ms" => c.retention_ms = num(v)?,
            "retention.bytes" => c.retention_bytes = num(v)?,
            "cleanup.policy" => {
                if v != "delete" {
                    return Err(format!("cleanup.policy={v} is not supported (only delete)"));
                }
                c.cleanup_policy = v.clone();
            }
            // Accepted and reported back, without effect on this broker.
            "min.insync.replicas"
            | "compression.type"
            | "message.timestamp.type"
            | "unclean.leader.election.enable" => {}
            other => return Err(format!("unknown topic config {other}")),
        }
    }
    Ok(c)
}

/// Every topic of the data directory.
#[derive(Debug)]
pub struct LogManager {
    root: PathBuf,
    defaults: LogConfig,
    group_commit: Arc<GroupCommit>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
}

impl LogManager {
    /// Opens (or initialises) the data directory and every topic in it.
    pub fn open(
        root: &Path,
        defaults: LogConfig,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<Self> {
        fs::create_dir_all(root.join("__topics"))?;
        let mut metas = Vec::new();
        for e in fs::read_dir(root.join("__topics"))? {
            let path = e?.path();
            if path.extension().is_some_and(|x| x == "json") {
                let meta: TopicMeta = serde_json::from_slice(&fs::read(&path)?).map_err(|err| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {err}", path.display()),
                    )
                })?;
                metas.push(meta);
            }
        }
        let immediate = group_commit.mode() != FsyncMode::Always;
        let jobs: Vec<(usize, i32)> = metas
            .iter()
            .enumerate()
            .flat_map(|(t, m)| (0..m.partitions).map(move |p| (t, p)))
            .collect();
        let opened: Vec<io::Result<(usize, Partition)>> = parallel_map(&jobs, |&(t, p)| {
            let m = &metas[t];
            let config = parse_configs(&defaults, &m.configs).map_err(io::Error::other)?;
            let dir = root.join(Partition::dir_name(&m.name, p));
            let part = if dir.exists() {
                Partition::open(root, &m.name, p, config, immediate)?
            } else {
                Partition::create(root, &m.name, p, config, immediate)?
            };
            Ok((t, part))
        });
        let mut parts: Vec<Vec<Arc<Partition>>> = metas.iter().map(|_| Vec::new()).collect();
        for r in opened {
            let (t, p) = r?;
            parts[t].push(Arc::new(p));
        }
        let mut topics = BTreeMap::new();
        for (m, mut ps) in metas.into_iter().zip(parts) {
            ps.sort_by_key(|p| p.id);
            let config = parse_configs(&defaults, &m.configs).map_err(io::Error::other)?;
            let id = parse_id(&m.id);
            topics.insert(
                m.name.clone(),
                Arc::new(Topic {
                    name: m.name,
                    id,
                    partitions: ps,
                    config,
                    overrides: m.configs,
                }),
            );
        }
        Ok(LogManager {
            root: root.to_path_buf(),
            defaults,
            group_commit,
            topics: RwLock::new(topics),
        })
    }

    pub fn group_commit(&self) -> &Arc<GroupCommit> {
        &self.group_commit
    }

    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub fn partition(&self, topic: &str, id: i32) -> Option<Arc<Partition>> {
        let t = self.topic(topic)?;
        usize::try_from(id)
            .ok()
            .and_then(|i| t.partitions.get(i).cloned())
    }

    /// Creates a topic (validate_only checks without creating).
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
        let config =
            parse_configs(&self.defaults, &overrides).map_err(CreateError::InvalidConfig)?;
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        if topics.contains_key(name) {
            return Err(CreateError::Exists(name.into()));
        }
        let id = new_topic_id(name);
        let topic = if validate_only {
            Arc::new(Topic {
                name: name.into(),
                id,
                partitions: Vec::new(),
                config,
                overrides,
            })
        } else {
            let immediate = self.group_commit.mode() != FsyncMode::Always;
            let mut ps = Vec::with_capacity(partitions as usize);
            for p in 0..partitions {
                ps.push(Arc::new(Partition::create(
                    &self.root,
                    name,
                    p,
                    config.clone(),
                    immediate,
                )?));
            }
            let meta = TopicMeta {
                name: name.into(),
                partitions,
                id: hex::encode(id),
                configs: overrides.clone(),
            };
            let bytes = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
            partition::write_atomically(
                &self.root.join("__topics").join(format!("{name}.json")),
                &bytes,
            )?;
            let t = Arc::new(Topic {
                name: name.into(),
                id,
                partitions: ps,
                config,
                overrides,
            });
            topics.insert(name.into(), t.clone());
            t
        };
        Ok(topic)
    }

    /// Deletes a topic and its data; false if it did not exist.
    pub fn delete_topic(&self, name: &str) -> io::Result<bool> {
        let Some(t) = self
            .topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
        else {
            return Ok(false);
        };
        fs::remove_file(self.root.join("__topics").join(format!("{name}.json")))?;
        for p in &t.partitions {
            p.destroy()?;
        }
        Ok(true)
    }

    /// Runs retention over every partition.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        let mut n = 0;
        for t in self.topics() {
            for p in &t.partitions {
                match p.apply_retention(now_ms) {
                    Ok(k) => n += k,
                    Err(e) => {
                        tracing::error!(topic = %t.name, partition = p.id, error = %e, "retention failed")
                    }
                }
            }
        }
        n
    }

    /// Clean shutdown of every partition.
    pub fn close(&self) -> io::Result<()> {
        for t in self.topics() {
            for p in &t.partitions {
                p.close()?;
            }
        }
        Ok(())
    }
}

/// Runs `f` over `items` on up to 8 threads, keeping order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn new_topic_id(name: &str) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = Sha256::digest(format!("{name}/{nanos}/{}", std::process::id()));
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    id
}

fn parse_id(s: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(b) = hex::decode(s)
        && b.len() == 16
    {
        id.copy_from_slice(&b);
    }
    id
}
