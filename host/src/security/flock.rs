//! Small file helpers for the security stores: an exclusive advisory lock
//! (for read-modify-write of a file other brokers on the shared volume may
//! write too) and an atomic, durable replace.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::Context as _;

/// Holds `flock(LOCK_EX)` on a file until dropped.
#[derive(Debug)]
pub struct Exclusive<'a>(&'a File);

impl<'a> Exclusive<'a> {
    pub fn take(f: &'a File) -> anyhow::Result<Self> {
        // The guard borrows the file, so its descriptor outlives the lock.
        let rc = flock(f, libc::LOCK_EX);
        anyhow::ensure!(rc == 0, "flock: {}", std::io::Error::last_os_error());
        Ok(Exclusive(f))
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let _ = flock(self.0, libc::LOCK_UN);
    }
}

#[allow(unsafe_code)]
fn flock(f: &File, op: libc::c_int) -> libc::c_int {
    // SAFETY: the descriptor is valid while `f` is borrowed.
    unsafe { libc::flock(f.as_raw_fd(), op) }
}

/// Replaces `path` with `bytes`: temp file, fsync, rename, directory fsync.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("path has no directory")?;
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    File::open(dir)?.sync_all()?;
    Ok(())
}
