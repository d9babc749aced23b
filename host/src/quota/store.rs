//! Where the quota table lives. Single node: `<data dir>/__configs/
//! client-quotas.json`, beside the dynamic broker defaults, replaced whole
//! (temporary file, fsync, rename, directory fsync), read at start; a file
//! that does not parse stops the broker rather than run without quotas.
//! Cluster mode: the same JSON under etcd's `config/client-quotas` key,
//! replaced by compare-and-swap and followed by every broker's reconcile
//! loop (`cluster::etcd`, `cluster::reconcile`), as the broker defaults are.

use std::io;
use std::path::{Path, PathBuf};

use super::QuotaTable;

const DIR: &str = "__configs";
const FILE: &str = "client-quotas.json";

/// The file of the single-node table.
pub fn file_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR).join(FILE)
}

/// The table in `path` (empty if there is none).
pub fn load(path: &Path) -> io::Result<QuotaTable> {
    match std::fs::read(path) {
        Ok(bytes) => decode(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("client quota file {}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(QuotaTable::default()),
        Err(e) => Err(e),
    }
}

/// Replaces `path` with `table`, durably.
pub fn save(path: &Path, table: &QuotaTable) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    crate::log::atomic_file::write_atomically(path, &encode(table))?;
    crate::log::sync::sync_dir(dir)
}

/// The stored (file and etcd) form.
pub fn encode(table: &QuotaTable) -> Vec<u8> {
    serde_json::to_vec_pretty(table).unwrap_or_default()
}

pub fn decode(bytes: &[u8]) -> Result<QuotaTable, serde_json::Error> {
    serde_json::from_slice(bytes)
}

#[cfg(test)]
mod tests {
    use super::super::entity::{Entity, Name};
    use super::*;

    #[test]
    fn a_saved_table_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_path(dir.path());
        assert!(load(&path).unwrap().is_empty());
        let mut t = QuotaTable::default();
        t.apply(
            &Entity {
                user: Some(Name::Default),
                client_id: Some(Name::Named("c".into())),
            },
            &[("consumer_byte_rate".into(), Some(1024.0))],
        );
        save(&path, &t).unwrap();
        assert_eq!(load(&path).unwrap(), t);
        std::fs::write(&path, b"{").unwrap();
        assert!(load(&path).is_err());
    }
}
