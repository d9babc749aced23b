//! The broker's file-descriptor budget.
//!
//! Segment files (the `.log` data files; indexes and snapshots are written
//! and closed) go through one bounded cache shared by every partition
//! (`log::open_files`, `--max-open-segment-files`), and every client
//! connection holds a socket. A broker that runs out of descriptors fails
//! in the middle of whatever it was doing (a topic half created, a
//! connection it cannot accept), so:
//!
//! - at start `kaas broker` raises its soft `RLIMIT_NOFILE` to the hard
//!   limit ([`raise_soft_limit`]): the soft limit is often 1024 while the
//!   hard one allows far more;
//! - the cache's bound is lowered at start to what the limit leaves after
//!   that reserve ([`room`]);
//! - before creating partitions the log checks that the descriptors open
//!   now ([`open_fds`], the entries of `/proc/self/fd`), plus what the
//!   cache may still open (its bound less what it holds: the cache is
//!   charged once, not per partition) and the metadata file, plus a
//!   reserve for client connections and the broker's own files, stay
//!   within the soft limit ([`check`]), and refuses the creation
//!   otherwise. A partition takes no descriptor of its own, so the count
//!   of partitions is bounded by `--max-partitions`, not by this budget.
//!
//! Touches nothing but the process's own limit.

use std::io;

/// Descriptors held for the broker's own files (write-ahead log, state
/// logs, the offsets journal, temporary files of atomic writes, the
/// listeners, the runtime's epoll and wakers) on top of one per allowed
/// connection.
pub const HEADROOM: u64 = 64;

/// The process's `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub soft: u64,
    pub hard: u64,
}

/// The process's current `RLIMIT_NOFILE`.
pub fn limit() -> io::Result<FdLimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct we own and
    // pass by exclusive reference; it keeps no pointer to it.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FdLimit {
        soft: rl.rlim_cur,
        hard: rl.rlim_max,
    })
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the limit
/// before and after (equal when the soft limit already was the hard one).
pub fn raise_soft_limit() -> io::Result<(FdLimit, FdLimit)> {
    let before = limit()?;
    if before.soft >= before.hard {
        return Ok((before, before));
    }
    let rl = libc::rlimit {
        rlim_cur: before.hard,
        rlim_max: before.hard,
    };
    // SAFETY: setrlimit reads the `rlimit` we own for the length of the
    // call and keeps no pointer to it.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((before, limit()?))
}

/// How many descriptors the process has open (the entries of
/// `/proc/self/fd`, less the one the listing itself uses).
pub fn open_fds() -> io::Result<u64> {
    let n = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    Ok(n.saturating_sub(1))
}

/// The reserve for a broker allowing `max_connections` clients.
pub fn reserve_for(max_connections: usize) -> u64 {
    (max_connections as u64).saturating_add(HEADROOM)
}

/// How many descriptors the open-file cache may hold: what the soft limit
/// leaves after those open now, `reserve` (capped at half the limit, as in
/// [`fits`]) and [`HEADROOM`] for the broker's own files, which are opened
/// after the cache is sized; None when they cannot be counted (no `/proc`).
pub fn room_for_cache(reserve: u64) -> Option<u64> {
    let (Ok(l), Ok(open)) = (limit(), open_fds()) else {
        return None;
    };
    Some(cache_room(open, reserve, l.soft))
}

/// [`room_for_cache`] on given figures.
pub fn cache_room(open: u64, reserve: u64, limit: u64) -> u64 {
    limit
        .saturating_sub(open)
        .saturating_sub(reserve.min(limit / 2))
        .saturating_sub(HEADROOM)
}

/// Why new descriptors do not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{wanted} more open files do not fit: {open} are open and {reserve} are kept free \
     for client connections and the broker's own files, of a limit of {limit} (RLIMIT_NOFILE)"
)]
pub struct Shortfall {
    pub wanted: u64,
    pub open: u64,
    pub reserve: u64,
    pub limit: u64,
}

/// Whether `wanted` more descriptors fit under the soft limit with
/// `reserve` of them left free. The reserve is capped at half the limit,
/// so a broker whose limit is below its connection bound can still create
/// some partitions (it cannot serve that many connections in any case).
/// When the open descriptors cannot be counted (no `/proc`), only the
/// partition bounds apply: the answer is yes.
pub fn check(wanted: u64, reserve: u64) -> Result<(), Shortfall> {
    let (Ok(l), Ok(open)) = (limit(), open_fds()) else {
        return Ok(());
    };
    fits(wanted, open, reserve, l.soft)
}

/// [`check`] on given figures.
pub fn fits(wanted: u64, open: u64, reserve: u64, limit: u64) -> Result<(), Shortfall> {
    let reserve = reserve.min(limit / 2);
    if open.saturating_add(wanted).saturating_add(reserve) <= limit {
        Ok(())
    } else {
        Err(Shortfall {
            wanted,
            open,
            reserve,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_fit_only_with_the_reserve_left_free() {
        assert!(fits(2862, 50, 1088, 4000).is_ok());
        let short = fits(2863, 50, 1088, 4000).expect_err("the reserve counts");
        assert_eq!(
            (short.wanted, short.open, short.reserve, short.limit),
            (2863, 50, 1088, 4000)
        );
    }

    #[test]
    fn the_reserve_is_capped_at_half_the_limit() {
        assert!(fits(462, 50, 1088, 1024).is_ok());
        assert_eq!(fits(463, 50, 1088, 1024).map_err(|s| s.reserve), Err(512));
    }

    #[test]
    fn the_cache_gets_what_the_reserve_and_the_headroom_leave() {
        assert_eq!(cache_room(10, 1088, 20_000), 20_000 - 10 - 1088 - 64);
        // A low limit: the reserve is capped at half of it.
        assert_eq!(cache_room(10, 1088, 300), 300 - 10 - 150 - 64);
        assert_eq!(cache_room(10, 1088, 100), 0);
        // Every descriptor the cache may hold then fits the budget, with
        // the broker's own files (up to the headroom) opened meanwhile.
        let room = cache_room(10, 1088, 300);
        assert!(fits(room + 1, 10 + HEADROOM - 1, 1088, 300).is_ok());
    }

    #[test]
    fn open_descriptors_are_counted() {
        let files: Vec<_> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/status").expect("open"))
            .collect();
        assert!(open_fds().expect("count") >= files.len() as u64);
        assert!(limit().expect("limit").soft >= files.len() as u64);
    }
}
