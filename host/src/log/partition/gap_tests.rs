//! Cluster mode: once a partition refused a producer's batch as not leader
//! (not written), no later batch of that producer may be appended or answered
//! out of order before the refused one comes again: either would show the
//! client a sequence gap the broker made, and librdkafka answers that with an
//! epoch bump that re-sends possibly written batches as new ones (duplicates).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::open::shorthand::*;
use super::*;
use crate::log::batch::data_batch;

const PID: i64 = 42;

fn batch(epoch: i16, seq: i32) -> Vec<u8> {
    data_batch(
        &[(None, format!("v-{epoch}-{seq}").as_bytes())],
        1000 + i64::from(seq),
        Some((PID, epoch, seq)),
        false,
    )
}

/// A gated partition with `written` batches of the producer (epoch 0,
/// sequences 0..written) and the switch of its gate.
fn gated(dir: &Path, written: i32) -> (Partition, Arc<AtomicBool>) {
    let open = Arc::new(AtomicBool::new(true));
    let gate = open.clone();
    let p = create(dir, "t", 0, LogConfig::default(), true)
        .expect("create")
        .with_gate(Arc::new(move || gate.load(Ordering::SeqCst)));
    for seq in 0..written {
        p.append(batch(0, seq))
            .expect("append while the gate is open");
    }
    (p, open)
}

fn not_leader(r: &Result<Appended, AppendError>) -> bool {
    matches!(r, Err(AppendError::NotLeader))
}

#[test]
fn a_batch_behind_one_the_closed_gate_refused_is_refused_as_not_leader_not_out_of_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let (p, open) = gated(dir.path(), 5);
    open.store(false, Ordering::SeqCst);
    assert!(not_leader(&p.append(batch(0, 5))));
    let behind = p.append(batch(0, 6));
    assert!(
        not_leader(&behind),
        "the pipelined batch after a refused one: NOT_LEADER, got {behind:?}"
    );
    assert_eq!(p.log_end_offset(), 5);
}

#[test]
fn a_reopened_gate_holds_back_the_batches_behind_a_refused_one_until_it_comes_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let (p, open) = gated(dir.path(), 5);
    open.store(false, Ordering::SeqCst);
    assert!(not_leader(&p.append(batch(0, 5))));
    // A late keep-alive answer reopens the gate mid-pipeline.
    open.store(true, Ordering::SeqCst);
    for seq in 6..9 {
        let behind = p.append(batch(0, seq));
        assert!(
            not_leader(&behind),
            "seq {seq} behind the refused 5: NOT_LEADER, got {behind:?}"
        );
    }
    assert_eq!(
        p.log_end_offset(),
        5,
        "nothing past the refused batch was written"
    );
    // The client drains and re-sends from the refused batch on.
    for seq in 5..9 {
        let a = p
            .append(batch(0, seq))
            .expect("the re-sent batches are appended");
        assert_eq!((a.duplicate, a.base_offset), (false, i64::from(seq)));
    }
}

#[test]
fn without_producer_state_a_batch_behind_a_refused_one_is_not_appended() {
    let dir = tempfile::tempdir().expect("tmp");
    let (p, open) = gated(dir.path(), 0);
    open.store(false, Ordering::SeqCst);
    assert!(not_leader(&p.append(batch(0, 0))));
    open.store(true, Ordering::SeqCst);
    // With no state any sequence would be accepted (KIP-360): a gap.
    assert!(not_leader(&p.append(batch(0, 1))));
    assert_eq!(p.log_end_offset(), 0);
    p.append(batch(0, 0)).expect("the refused batch again");
    p.append(batch(0, 1)).expect("then the one behind it");
    assert_eq!(p.log_end_offset(), 2);
}

#[test]
fn a_refusal_holds_back_neither_a_new_epoch_nor_a_retried_duplicate() {
    let dir = tempfile::tempdir().expect("tmp");
    let (p, open) = gated(dir.path(), 5);
    open.store(false, Ordering::SeqCst);
    assert!(not_leader(&p.append(batch(0, 5))));
    open.store(true, Ordering::SeqCst);
    let dup = p.append(batch(0, 4)).expect("a retry of a written batch");
    assert_eq!((dup.duplicate, dup.base_offset), (true, 4));
    let bumped = p.append(batch(1, 0)).expect("the producer's next epoch");
    assert_eq!((bumped.duplicate, bumped.base_offset), (false, 5));
}

#[test]
fn a_producer_state_error_behind_a_closed_gate_is_not_leader() {
    let dir = tempfile::tempdir().expect("tmp");
    let (p, open) = gated(dir.path(), 5);
    open.store(false, Ordering::SeqCst);
    // A stale epoch or a gap would be this broker's to judge only while it
    // leads; once it does not, NOT_LEADER comes first (as in Kafka).
    assert!(not_leader(&p.append(batch(0, 9))));
    open.store(true, Ordering::SeqCst);
    assert!(matches!(
        p.append(batch(0, 9)),
        Err(AppendError::Producer(ProducerError::OutOfOrder))
    ));
}
