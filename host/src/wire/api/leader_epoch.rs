//! The KIP-320 leader-epoch check, one rule for every request that names
//! a partition's current leader epoch (Fetch v9+, ListOffsets v4+,
//! OffsetForLeaderEpoch v2+): a client whose epoch is older than the
//! partition's talks to a leader it should have left behind
//! (FENCED_LEADER_EPOCH); one whose epoch is newer knows of a leader this
//! broker has not become yet (UNKNOWN_LEADER_EPOCH); -1 (or any negative
//! epoch) means the client gave none. Pure: it reads nothing.

use crate::codes;

/// The error for a request naming `requested` as the current leader epoch
/// of a partition led at `current`; NONE when it may go on.
pub fn check(requested: i32, current: i32) -> i16 {
    if requested < 0 {
        codes::NONE
    } else if requested < current {
        codes::FENCED_LEADER_EPOCH
    } else if requested > current {
        codes::UNKNOWN_LEADER_EPOCH
    } else {
        codes::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_is_fenced_newer_is_unknown_and_none_given_skips_the_check() {
        assert_eq!(check(1, 2), codes::FENCED_LEADER_EPOCH);
        assert_eq!(check(3, 2), codes::UNKNOWN_LEADER_EPOCH);
        assert_eq!(check(2, 2), codes::NONE);
        assert_eq!(check(-1, 2), codes::NONE);
        assert_eq!(check(0, 0), codes::NONE);
    }
}
