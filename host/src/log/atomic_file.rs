//! Small files replaced whole: written to a temporary file, fsynced, then
//! renamed over the old one, so a crash leaves the old or the new file and
//! never half of one. A leaf used by the partition's snapshots and epochs.

use std::path::Path;
use std::{fs, io};

/// Writes a small file via temp file, fsync and rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let f = fs::File::create(&tmp)?;
        io::Write::write_all(&mut &f, bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}
