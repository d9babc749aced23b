//! The producer-id allocator: hands out ids from blocks reserved durably, so
//! no id is ever handed out twice, across crashes. The file holds the end of
//! the last reserved block; a restart continues from there (the unused rest
//! of a block is skipped, never reused).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Ids reserved per durable write.
pub const BLOCK: i64 = 1000;

/// A durable block allocator.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    path: PathBuf,
    /// (next id to hand out, end of the reserved block, exclusive)
    state: Mutex<(i64, i64)>,
}

impl ProducerIdAllocator {
    pub fn open(path: &Path) -> io::Result<Self> {
        let end = match std::fs::read_to_string(path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdAllocator {
            path: path.to_path_buf(),
            state: Mutex::new((end, end)),
        })
    }

    /// Hands out a fresh id. Concurrent callers never get the same one; an
    /// id that ends up unused is simply skipped (ids are plentiful).
    pub fn allocate(&self) -> io::Result<i64> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.0 >= st.1 {
            let end = st.1 + BLOCK;
            crate::log::partition::write_atomically(&self.path, end.to_string().as_bytes())?;
            st.1 = end;
        }
        let id = st.0;
        st.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_handed_out_twice_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ids");
        let a = ProducerIdAllocator::open(&path).expect("open");
        let first = a.allocate().expect("allocate");
        let second = a.allocate().expect("allocate");
        assert_eq!(second, first + 1);
        drop(a);
        let b = ProducerIdAllocator::open(&path).expect("reopen");
        let third = b.allocate().expect("allocate");
        assert!(third > second, "{third} after restart must exceed {second}");
        assert_eq!(third, BLOCK);
    }
}
