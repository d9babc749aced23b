//! What the coordinator answers, independent of wire versions: the
//! JoinGroup and SyncGroup results (immediate or awaited), group summaries
//! for DescribeGroups and ListGroups. The wire handlers turn these into
//! version-correct responses.

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::codes;

/// An answer now, or one a long poll awaits (the group completes it).
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOutcome {
    pub error: i16,
    pub member_id: String,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    /// Every member with its metadata: for the leader only.
    pub members: Vec<JoinedMember>,
    /// KIP-814: the leader must not assign (a static leader rejoining a
    /// Stable group it would not change).
    pub skip_assignment: bool,
}

impl JoinOutcome {
    /// An error answer for `member_id`.
    pub fn error(member_id: &str, error: i16) -> Self {
        JoinOutcome {
            error,
            member_id: member_id.to_string(),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// A SyncGroup result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    pub fn error(error: i16) -> Self {
        SyncOutcome {
            error,
            protocol_type: None,
            protocol: None,
            assignment: Bytes::new(),
        }
    }
}

/// A member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSummary {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Metadata for the group's protocol (empty unless the group is Stable).
    pub metadata: Bytes,
    /// Empty unless the group is Stable.
    pub assignment: Bytes,
}

/// A group in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub state: &'static str,
    pub protocol_type: String,
    /// The selected protocol when Stable, else "".
    pub protocol: String,
    pub members: Vec<MemberSummary>,
}

impl GroupSummary {
    /// How Kafka describes a group it does not know.
    pub fn dead() -> Self {
        GroupSummary {
            state: "Dead",
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        }
    }
}

/// A group in ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOverview {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    /// "classic" or "consumer" (ListGroups v5).
    pub group_type: &'static str,
}

/// Awaits a long-poll answer; a dropped sender (the broker shutting down)
/// becomes COORDINATOR_NOT_AVAILABLE so the client looks again.
pub async fn join_answer(rx: oneshot::Receiver<JoinOutcome>, member_id: String) -> JoinOutcome {
    rx.await
        .unwrap_or_else(|_| JoinOutcome::error(&member_id, codes::COORDINATOR_NOT_AVAILABLE))
}

/// As [`join_answer`], for SyncGroup.
pub async fn sync_answer(rx: oneshot::Receiver<SyncOutcome>) -> SyncOutcome {
    rx.await
        .unwrap_or_else(|_| SyncOutcome::error(codes::COORDINATOR_NOT_AVAILABLE))
}
