//! min.insync.replicas at Produce: an acks=all (-1) append is refused
//! before it is written, NOT_ENOUGH_REPLICAS (19), when fewer replicas are
//! in sync than the topic asks for. As in Kafka 3.7 (KAFKA-15583), the
//! requirement is capped at the partition's replica count, so a value above
//! the replication factor asks for every replica, not for the impossible.
//! The handler passes in the partition's replicas and ISR as the cluster
//! seam reports them (on a shared volume: the live replicas); this rule
//! knows nothing of membership.

/// The refusal's message (Kafka's), or None when the append may go on.
pub fn refusal(
    acks: i16,
    min_insync: i32,
    replicas: usize,
    isr: &[i32],
    topic: &str,
    p: i32,
) -> Option<String> {
    if acks != -1 {
        return None;
    }
    let required = usize::try_from(min_insync).unwrap_or(1).min(replicas);
    if isr.len() >= required {
        return None;
    }
    let ids: Vec<String> = isr.iter().map(i32::to_string).collect();
    Some(format!(
        "The size of the current ISR : {} is insufficient to satisfy the min.isr requirement of \
         {required} for partition {topic}-{p}, live replica(s) broker.id are : Set({})",
        isr.len(),
        ids.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_all_below_min_insync_is_refused_with_kafkas_message() {
        assert_eq!(
            refusal(-1, 3, 3, &[1, 3], "t", 0).as_deref(),
            Some(
                "The size of the current ISR : 2 is insufficient to satisfy the min.isr \
                 requirement of 3 for partition t-0, live replica(s) broker.id are : Set(1, 3)"
            )
        );
        assert_eq!(refusal(-1, 2, 3, &[1, 3], "t", 0), None);
        assert_eq!(refusal(-1, 3, 3, &[1, 2, 3], "t", 0), None);
    }

    #[test]
    fn only_acks_all_is_held_to_min_insync() {
        assert_eq!(refusal(1, 3, 3, &[1], "t", 0), None);
        assert_eq!(refusal(0, 3, 3, &[1], "t", 0), None);
    }

    #[test]
    fn min_insync_above_the_replica_count_asks_for_every_replica() {
        assert_eq!(refusal(-1, 2, 1, &[1], "t", 0), None);
        assert!(refusal(-1, 5, 3, &[1, 2], "t", 0).is_some());
        assert_eq!(refusal(-1, 5, 3, &[1, 2, 3], "t", 0), None);
    }
}
