//! Stub (issue 15 item 3): replaced by the partition leader's marker writer.

use std::sync::Arc;

use crate::broker::Broker;
use crate::policy::TopicPartition;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerSet {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
}

pub async fn write_here(_broker: &Arc<Broker>, set: &MarkerSet) -> Vec<(TopicPartition, i16)> {
    set.partitions.iter().map(|tp| (tp.clone(), -1)).collect()
}
