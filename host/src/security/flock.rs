//! An exclusive advisory lock for the security stores' read-modify-write
//! of a file other brokers on the shared volume may write too.

use std::fs::File;
use std::os::fd::AsRawFd;

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
