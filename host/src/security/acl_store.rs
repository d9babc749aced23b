//! Where ACLs live between restarts: single-node mode
//! keeps them in one file of the data directory, rewritten whole (temp
//! file, fsync, rename, directory fsync) on each change; cluster mode keeps
//! one etcd key per ACL under the cluster's `acls/` prefix, which every
//! broker reads at start and then follows with a watch of its own.
//!
//! Records carry Kafka's wire codes; a record read back is checked as a
//! CreateAcls creation is. This module touches only that file and those
//! keys; what the ACLs mean is [`super::acl_index`]'s business.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::acl::AclBinding;
use super::acl_filter::{AclFields, new_binding};
use crate::cluster::etcd::{Etcd, EtcdError, MAX_TXN_OPS};
use crate::ratelimit::Backoff;

/// The ACL file, relative to the data directory.
pub const FILE: &str = "__security/acls.json";

/// The file's format version.
const VERSION: u32 = 1;

/// One ACL at rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclRecord {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

impl AclRecord {
    pub fn of(b: &AclBinding) -> Self {
        AclRecord {
            resource_type: b.resource_type.code(),
            resource_name: b.resource_name.clone(),
            pattern_type: b.pattern_type.code(),
            principal: b.principal.to_string(),
            host: b.host.clone(),
            operation: b.operation.code(),
            permission: b.permission.code(),
        }
    }

    /// The ACL, or why the record is not a valid one.
    pub fn binding(&self) -> Result<AclBinding, String> {
        new_binding(AclFields {
            resource_type: self.resource_type,
            resource_name: Some(&self.resource_name),
            pattern_type: self.pattern_type,
            principal: Some(&self.principal),
            host: Some(&self.host),
            operation: self.operation,
            permission: self.permission,
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct AclFile {
    version: u32,
    acls: Vec<AclRecord>,
}

fn invalid(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("ACL file {} is corrupt: {why}", path.display()),
    )
}

/// The ACL file of a data directory.
pub fn file_path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The ACLs in `path` (none if it does not exist). A file that does not
/// parse, or holds an invalid ACL, is an error: the broker must not start
/// with fewer ACLs than were created.
pub fn load_file(path: &Path) -> io::Result<Vec<AclBinding>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("reading ACL file {}: {e}", path.display()),
            ));
        }
    };
    let file: AclFile = serde_json::from_slice(&bytes).map_err(|e| invalid(path, e))?;
    if file.version != VERSION {
        return Err(invalid(
            path,
            format!("version {} (this broker reads {VERSION})", file.version),
        ));
    }
    file.acls
        .iter()
        .map(|r| {
            r.binding()
                .map_err(|e| invalid(path, format!("{r:?}: {e}")))
        })
        .collect()
}

/// Replaces `path` with `acls`, durably.
pub fn save_file<'a>(path: &Path, acls: impl Iterator<Item = &'a AclBinding>) -> io::Result<()> {
    let ctx = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} ACL file {}: {e}", path.display()))
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| ctx("creating the directory of", e))?;
        if let Some(parent) = dir.parent() {
            crate::log::sync::sync_dir(parent).map_err(|e| ctx("syncing the directory of", e))?;
        }
    }
    let file = AclFile {
        version: VERSION,
        acls: acls.map(AclRecord::of).collect(),
    };
    let bytes =
        serde_json::to_vec_pretty(&file).map_err(|e| ctx("encoding", io::Error::other(e)))?;
    crate::log::atomic_file::write_atomically(path, &bytes).map_err(|e| ctx("writing", e))?;
    crate::log::sync::sync_dir(dir).map_err(|e| ctx("syncing the directory of", e))
}

/// The etcd key of an ACL: a digest of its record, so the same ACL always
/// has the same key and any name (with `/` or not) fits.
pub fn etcd_key(etcd: &Etcd, b: &AclBinding) -> String {
    let digest = Sha256::digest(record_bytes(b));
    let hex: String = digest.iter().map(|x| format!("{x:02x}")).collect();
    etcd.keys.acl(&hex)
}

fn record_bytes(b: &AclBinding) -> Vec<u8> {
    // A record of strings and integers always serializes.
    serde_json::to_vec(&AclRecord::of(b)).unwrap_or_default()
}

fn decode(key: &[u8], value: &[u8]) -> Result<AclBinding, String> {
    serde_json::from_slice::<AclRecord>(value)
        .map_err(|e| e.to_string())
        .and_then(|r| r.binding())
        .map_err(|e| format!("ACL record {}: {e}", String::from_utf8_lossy(key)))
}

/// The ACLs in etcd by key, and the revision they were read at. An
/// unreadable record is skipped with an error logged (it was not written
/// by a broker).
pub async fn load_etcd(etcd: &Etcd) -> Result<(HashMap<Vec<u8>, AclBinding>, i64), EtcdError> {
    let (kvs, revision) = etcd.get_prefix(&etcd.keys.acls_prefix()).await?;
    let mut by_key = HashMap::with_capacity(kvs.len());
    for (k, v) in kvs {
        match decode(&k, &v) {
            Ok(b) => {
                by_key.insert(k, b);
            }
            Err(e) => tracing::error!(error = %e, "unreadable ACL record in etcd; ignored"),
        }
    }
    Ok((by_key, revision))
}

/// Writes `created` and removes `deleted`, in transactions of at most
/// [`MAX_TXN_OPS`] keys each.
pub async fn write_etcd(
    etcd: &Etcd,
    created: &[AclBinding],
    deleted: &[AclBinding],
) -> Result<(), EtcdError> {
    for chunk in created.chunks(MAX_TXN_OPS) {
        let puts = chunk
            .iter()
            .map(|b| (etcd_key(etcd, b), record_bytes(b)))
            .collect();
        etcd.put_and_delete(puts, Vec::new()).await?;
    }
    for chunk in deleted.chunks(MAX_TXN_OPS) {
        let keys = chunk.iter().map(|b| etcd_key(etcd, b)).collect();
        etcd.put_and_delete(Vec::new(), keys).await?;
    }
    Ok(())
}

/// A change another broker (or this one) made, as the watch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// The full set, after a reload.
    Reset(Vec<AclBinding>),
    Put(AclBinding),
    Remove(AclBinding),
}

static UNWATCHED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();

/// The wait before the ACLs are read again after their watch failed.
const RELOAD: Backoff = Backoff::fixed(Duration::from_millis(200));

/// Follows the ACL keys from revision `start` (the first not in `by_key`)
/// for ever, handing every change to `apply`. Any failure (etcd away, a
/// compacted revision) reloads everything and watches again.
pub async fn follow(
    etcd: Arc<Etcd>,
    mut by_key: HashMap<Vec<u8>, AclBinding>,
    mut start: i64,
    apply: impl Fn(Update),
) {
    let mut reload = RELOAD;
    loop {
        let e = watch(&etcd, &mut by_key, start, &apply).await;
        if let Some(suppressed) = UNWATCHED.allow() {
            tracing::warn!(error = %e, suppressed, "ACL watch failed; reloading the ACLs from etcd");
        }
        tokio::time::sleep(reload.failed()).await;
        match load_etcd(&etcd).await {
            Ok((all, revision)) => {
                apply(Update::Reset(all.values().cloned().collect()));
                by_key = all;
                start = revision + 1;
            }
            Err(e) => {
                if let Some(suppressed) = UNWATCHED.allow() {
                    tracing::warn!(error = %e, suppressed, "cannot reload the ACLs from etcd; retrying");
                }
            }
        }
    }
}

/// Watches until something fails; returns what.
async fn watch(
    etcd: &Etcd,
    by_key: &mut HashMap<Vec<u8>, AclBinding>,
    start: i64,
    apply: &impl Fn(Update),
) -> EtcdError {
    let ended = |why: &str| EtcdError::Record {
        key: etcd.keys.acls_prefix(),
        error: why.into(),
    };
    let mut stream = match etcd.watch_prefix(&etcd.keys.acls_prefix(), start).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return ended("watch ended"),
            Err(e) => return e.into(),
        };
        if resp.canceled() {
            return ended("watch canceled");
        }
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            let key = kv.key().to_vec();
            match ev.event_type() {
                etcd_client::EventType::Put => match decode(&key, kv.value()) {
                    Ok(b) => {
                        if let Some(old) = by_key.insert(key, b.clone())
                            && old != b
                        {
                            apply(Update::Remove(old));
                        }
                        apply(Update::Put(b));
                    }
                    Err(e) => tracing::error!(error = %e, "unreadable ACL record in etcd; ignored"),
                },
                etcd_client::EventType::Delete => {
                    if let Some(old) = by_key.remove(&key) {
                        apply(Update::Remove(old));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{Operation, PatternType, Permission, ResourceType};
    use crate::security::session::Principal;

    fn acl(name: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Group,
            resource_name: name.into(),
            pattern_type: PatternType::Prefixed,
            principal: Principal::user("alice"),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn the_file_round_trips_and_a_missing_file_is_no_acls() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_path(dir.path());
        assert!(load_file(&path).unwrap().is_empty());
        let acls = vec![acl("a/b"), acl("c")];
        save_file(&path, acls.iter()).unwrap();
        assert_eq!(load_file(&path).unwrap(), acls);
        save_file(&path, acls[1..].iter()).unwrap();
        assert_eq!(load_file(&path).unwrap(), acls[1..]);
        assert!(!path.with_extension("tmp").exists());
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_path(dir.path());
        save_file(&path, [acl("a")].iter()).unwrap();
        std::fs::write(&path, b"{\"version\":1,\"acls\":[{").unwrap();
        let e = load_file(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("acls.json"), "{e}");
        std::fs::write(
            &path,
            br#"{"version":1,"acls":[{"resource_type":2,"resource_name":"t","pattern_type":3,"principal":"nobody","host":"*","operation":3,"permission":3}]}"#,
        )
        .unwrap();
        assert!(
            load_file(&path)
                .unwrap_err()
                .to_string()
                .contains("principal")
        );
    }
}
