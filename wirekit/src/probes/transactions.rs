//! Transactions over the wire (spec §1, §2 and §3.3–3.6): InitProducerId's
//! front end, the transactional id's bumps, fencing of an ongoing
//! transaction, AddPartitionsToTxn (v3 and the brokers' v4 verify-only),
//! AddOffsetsToTxn and TxnOffsetCommit, EndTxn in each state, the timeout
//! reaper, the partition side (verification, LSO, aborted ranges, control
//! records, zombies) and the admin views (ListTransactions,
//! DescribeTransactions, DescribeProducers, FindCoordinator). Producer ids
//! are observed relative to the probe's own (P / other / -1), epochs
//! relative to the first one where the broker assigns them.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest, GroupId,
    ListTransactionsRequest, OffsetFetchRequest, ProducerId, TransactionalId,
    TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::ctx::{Ctx, s, topic};
use crate::kit::Probe;
use crate::records::{Batch, decode, values_of};

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "IP-01" => idempotent_init_gives_a_new_pid_at_epoch_0,
        "IP-02" => idempotent_init_ignores_a_claim,
        "IP-04" => idempotent_half_claim_is_invalid_request,
        "IP-05" => empty_transactional_id_is_invalid_request,
        "IP-06" => transaction_timeout_bounds,
        "IT-01" => absent_id_noclaim_starts_at_epoch_0,
        "IT-02" => absent_id_accepts_any_claim,
        "IT-05" => claim_bump_after_commit_retried_is_not_bumped_twice,
        "IT-07" => future_epoch_claim_is_fenced_and_changes_nothing,
        "IT-08" => unrelated_pid_claim_is_fenced,
        "IT-09" => stale_claim_v3_answers_invalid_producer_epoch,
        "IT-10" => noclaim_after_abort_bumps,
        "IT-11" => init_after_commit_waits_for_the_markers,
        "IT-12" => init_after_abort_waits_for_the_markers,
        "IF-02" => fence_aborts_every_partition_and_retry_bumps_twice,
        "IF-06" => same_holder_claim_mid_ongoing_fences,
        "IF-07" => same_holder_claim_retry_after_fence_is_fenced,
        "IF-08" => foreign_claim_mid_ongoing_is_fenced_without_abort,
        "IF-09" => zombie_produce_after_fence_is_invalid_epoch,
        "IF-10" => zombie_coordinator_calls_after_fence,
        "IF-11" => zombie_produce_to_a_new_partition_after_fence,
        "AP-01" => add_partitions_on_empty_starts_ongoing,
        "AP-02" => add_partitions_again_is_none,
        "AP-03" => add_partitions_grows_the_set,
        "AP-04" => add_partitions_after_commit_starts_anew,
        "AP-05" => add_partitions_after_commit_waits_for_the_markers,
        "AP-06" => add_partitions_with_another_epoch_is_fenced,
        "AP-07" => add_partitions_with_unknown_id_or_pid,
        "AP-08" => add_partitions_with_an_unknown_topic,
        "AP-09" => verify_only_v4_from_a_client,
        "AP-10" => verify_only_v4_after_abort,
        "AO-01" => add_offsets_adds_the_offsets_partition,
        "AO-02" => txn_offset_commit_without_add_offsets,
        "AO-03" => txn_offset_commit_with_an_unknown_member,
        "AO-04" => txn_offsets_visible_only_after_commit,
        "ET-01" => commit_makes_records_visible_to_read_committed,
        "ET-02" => abort_hides_records_from_read_committed,
        "ET-03" => commit_retried_after_commit_is_none,
        "ET-04" => abort_after_commit_is_invalid_txn_state,
        "ET-05" => end_txn_after_abort,
        "ET-07" => end_txn_on_empty_is_invalid_txn_state,
        "ET-08" => end_txn_with_another_epoch_is_fenced,
        "ET-09" => end_txn_with_unknown_id_or_pid,
        "ET-10" => end_txn_with_empty_id,
        "TR-01" => reaper_aborts_a_timed_out_transaction,
        "TR-02" => commit_after_the_reaper_is_fenced,
        "TR-03" => init_after_the_reaper_bumps_twice,
        "PS-10" => non_transactional_batch_while_open_is_invalid_txn_state,
        "PS-11" => transactional_batch_without_add_partitions,
        "PS-13" => client_markers_with_a_stale_epoch,
        "PS-14" => open_transaction_pins_the_lso,
        "PS-15" => aborted_range_in_read_committed_fetch,
        "PS-16" => client_control_batch_is_invalid_record,
        "PS-17" => abort_marker_fences_the_zombie_on_the_partition,
        "TX-01" => find_coordinator_for_a_transactional_id,
        "TX-02" => list_transactions_states,
        "TX-03" => describe_transactions_views,
        "TX-04" => describe_producers_of_an_open_transaction,
        "TX-05" => transactional_produce_needs_a_transactional_id,
        "TX-06" => client_abort_marker_at_a_higher_epoch_fences,
        "TX-07" => internal_topics_cannot_be_added,
        "TX-08" => transactional_batch_at_a_future_epoch,
        "TX-09" => interleaved_transactions_and_the_lso,
        "TX-10" => fencing_an_offsets_only_transaction,
        "TX-11" => empty_transaction_still_writes_markers,
        "TX-12" => add_partitions_v4_from_a_client,
        "TX-13" => timeout_clock_starts_at_the_first_add,
    ]
}

// ---------------------------------------------------------------- helpers

/// A producer id relative to the probe's own `base`.
fn rp(pid: i64, base: i64) -> &'static str {
    match pid {
        -1 => "-1",
        p if p == base => "P",
        _ => "other",
    }
}

/// An InitProducerId answer relative to `base` (epoch as answered).
fn rel(got: (i16, i64, i16), base: i64) -> String {
    format!("error={} pid={} epoch={}", got.0, rp(got.1, base), got.2)
}

/// InitProducerId v4 of `t` with a 60 s timeout and `claim`.
async fn init_claim(
    c: &mut Ctx,
    t: &str,
    claim: (i64, i16),
    version: i16,
) -> anyhow::Result<(i16, i64, i16)> {
    c.init_producer_with(Some(t), 60_000, claim, version).await
}

/// A transactional id's first producer: (pid, epoch); fails the probe on an error.
async fn init(c: &mut Ctx, t: &str) -> anyhow::Result<(i64, i16)> {
    let (code, pid, epoch) = init_claim(c, t, (-1, -1), 4).await?;
    ensure!(code == 0, "InitProducerId {t}: error {code}");
    Ok((pid, epoch))
}

/// AddPartitionsToTxn v0..=3 of `parts`: each partition's error as `topic-index` in order.
async fn add_v(
    c: &mut Ctx,
    t: &str,
    pid: i64,
    epoch: i16,
    parts: &[(&str, i32)],
    version: i16,
) -> anyhow::Result<Vec<(String, i32, i16)>> {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(t)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics_of(parts));
    let r = c.call(&req, version).await?;
    let mut out = Vec::new();
    for tr in r.results_by_topic_v3_and_below {
        for p in tr.results_by_partition {
            out.push((
                tr.name.0.to_string(),
                p.partition_index,
                p.partition_error_code,
            ));
        }
    }
    out.sort();
    Ok(out)
}

fn topics_of(parts: &[(&str, i32)]) -> Vec<AddPartitionsToTxnTopic> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (tp, i) in parts {
        match topics.iter_mut().find(|x| x.name.0.as_str() == *tp) {
            Some(x) => x.partitions.push(*i),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(topic(tp))
                    .with_partitions(vec![*i]),
            ),
        }
    }
    topics
}

/// The single error of an AddPartitionsToTxn v3 of partition 0 of `tp`.
async fn add1(
    c: &mut Ctx,
    t: &str,
    pid: i64,
    epoch: i16,
    tp: &str,
    version: i16,
) -> anyhow::Result<i16> {
    let r = add_v(c, t, pid, epoch, &[(tp, 0)], version).await?;
    r.first()
        .map(|x| x.2)
        .context("AddPartitionsToTxn answered no partition")
}

/// EndTxn at `version`: its error.
async fn end_v(
    c: &mut Ctx,
    t: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    version: i16,
) -> anyhow::Result<i16> {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(t)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    Ok(c.call(&req, version).await?.error_code)
}

/// A transactional batch of `n` values `{tag}0..` at `seq` to partition `p`.
async fn produce_txn(
    c: &mut Ctx,
    t: &str,
    tp: &str,
    p: i32,
    (pid, epoch, seq): (i64, i16, i32),
    n: usize,
    tag: &str,
) -> anyhow::Result<(i16, i64)> {
    let mut b = Batch::values(n).transactional(pid, epoch, seq);
    for (i, r) in b.records.iter_mut().enumerate() {
        r.1 = Some(format!("{tag}{i}").into_bytes());
    }
    let r = c
        .produce_with(tp, p, Some(b.encode()?), -1, Some(t), 9)
        .await?;
    Ok((r.error_code, r.base_offset))
}

/// Init, add partition 0 of `tp`, write `n` records `{tag}i` at sequence 0:
/// an open transaction (pid, epoch).
async fn open(c: &mut Ctx, t: &str, tp: &str, n: usize, tag: &str) -> anyhow::Result<(i64, i16)> {
    let (pid, epoch) = init(c, t).await?;
    let code = add1(c, t, pid, epoch, tp, 3).await?;
    ensure!(code == 0, "AddPartitionsToTxn: error {code}");
    let (code, _) = produce_txn(c, t, tp, 0, (pid, epoch, 0), n, tag).await?;
    ensure!(code == 0, "transactional Produce: error {code}");
    Ok((pid, epoch))
}

/// DescribeTransactions v0 of one id: (error, state, pid, epoch, timeout, partitions as `topic-index`).
async fn describe(
    c: &mut Ctx,
    t: &str,
) -> anyhow::Result<(i16, String, i64, i16, i32, Vec<String>)> {
    let req =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(s(t))]);
    let r = c.call(&req, 0).await?;
    let x = r
        .transaction_states
        .into_iter()
        .next()
        .context("DescribeTransactions answered no id")?;
    let mut parts = Vec::new();
    for td in &x.topics {
        for p in &td.partitions {
            parts.push(format!("{}-{p}", td.topic.0));
        }
    }
    parts.sort();
    Ok((
        x.error_code,
        x.transaction_state.to_string(),
        x.producer_id.0,
        x.producer_epoch,
        x.transaction_timeout_ms,
        parts,
    ))
}

/// Polls DescribeTransactions until `t` is in `state`: its epoch then.
async fn wait_state(c: &mut Ctx, t: &str, state: &str, within: Duration) -> anyhow::Result<i16> {
    let t = t.to_owned();
    let want = state.to_owned();
    c.wait_until(within, &format!("{t} in {state}"), async |c| {
        let d = describe(c, &t).await?;
        Ok((d.0 == 0 && d.1 == want).then_some(d.3))
    })
    .await
}

/// Ends the transaction and waits for its Complete state and for its
/// marker on partition 0 of `tp`.
async fn finish(
    c: &mut Ctx,
    t: &str,
    tp: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> anyhow::Result<i16> {
    let code = end_v(c, t, pid, epoch, commit, 3).await?;
    if code == 0 {
        let state = if commit {
            "CompleteCommit"
        } else {
            "CompleteAbort"
        };
        wait_state(c, t, state, Duration::from_secs(10)).await?;
        wait_marker(c, tp, 0, pid).await?;
    }
    Ok(code)
}

/// Waits until the last record of partition `p` of `tp` is a marker of
/// `pid` (a transaction's Complete state may be visible a moment before
/// its markers are readable).
async fn wait_marker(c: &mut Ctx, tp: &str, p: i32, pid: i64) -> anyhow::Result<()> {
    let tp = tp.to_owned();
    c.wait_until(Duration::from_secs(10), "the marker", async |c| {
        let (_, recs, _, _) = read_p(c, &tp, p, 0, 0).await?;
        let last = recs.last();
        Ok(last
            .is_some_and(|r| r.control && r.producer_id == pid)
            .then_some(()))
    })
    .await
}

/// The fetched records of partition 0 as `value` for data and `COMMIT`/`ABORT`
/// for control records, read_uncommitted (0) or read_committed (1), with the
/// high watermark and LSO. A Fetch may answer fewer batches than its bound
/// allows: reads on from the last record until the records reach the bound
/// (HW, or LSO for read_committed).
async fn read(
    c: &mut Ctx,
    tp: &str,
    from: i64,
    isolation: i8,
) -> anyhow::Result<(Vec<String>, Vec<Record>, i64, i64)> {
    read_p(c, tp, 0, from, isolation).await
}

/// `read` of partition `part`.
async fn read_p(
    c: &mut Ctx,
    tp: &str,
    part: i32,
    from: i64,
    isolation: i8,
) -> anyhow::Result<(Vec<String>, Vec<Record>, i64, i64)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut recs: Vec<Record> = Vec::new();
    let mut pos = from;
    let (hw, lso) = loop {
        let p = c.fetch(tp, part, pos, isolation).await?;
        // Kafka's high watermark may trail an append it has acknowledged
        // (a marker, a batch) for a moment: a fetch from the end we read up
        // to is then out of range until it catches up; ask again.
        if p.error_code == 1 && pos > from && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        ensure!(p.error_code == 0, "Fetch: error {}", p.error_code);
        let got = decode(p.records.as_ref())?;
        pos = got.last().map_or(pos, |r| r.offset + 1);
        recs.extend(got.into_iter().filter(|r| r.offset >= from));
        let bound = if isolation == 1 {
            p.last_stable_offset
        } else {
            p.high_watermark
        };
        if pos >= bound {
            break (p.high_watermark, p.last_stable_offset);
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "a fetch up to its bound: not reached within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let shown = recs
        .iter()
        .map(|r| {
            if r.control {
                match r.key.as_ref().map(|k| k.as_ref()) {
                    Some([_, _, 0, 0]) => "ABORT".to_owned(),
                    Some([_, _, 0, 1]) => "COMMIT".to_owned(),
                    _ => "control?".to_owned(),
                }
            } else {
                values_of(std::slice::from_ref(r)).join("")
            }
        })
        .collect();
    Ok((shown, recs, hw, lso))
}

/// Creates `tp` with `n` partitions and waits until each answers a Fetch
/// (a partition listed with a leader in Metadata may still answer
/// NOT_LEADER_OR_FOLLOWER for a moment).
async fn mk(c: &mut Ctx, tp: &str, n: i32) -> anyhow::Result<()> {
    c.create_topic(tp, n, &[]).await?;
    let tp = tp.to_owned();
    for p in 0..n {
        c.wait_until(
            Duration::from_secs(10),
            "the partition's leader",
            async |c| Ok((c.fetch(&tp, p, 0, 0).await?.error_code == 0).then_some(())),
        )
        .await?;
    }
    Ok(())
}

/// Fences the ongoing transaction of `t` with a noclaim InitProducerId and
/// waits until its abort completes and its markers are on partitions
/// `0..n` of `tp`: (the init's error, the abort's epoch).
async fn fence(c: &mut Ctx, t: &str, tp: &str, n: i32) -> anyhow::Result<(i16, i16)> {
    let r = init_claim(c, t, (-1, -1), 4).await?;
    let epoch = wait_state(c, t, "CompleteAbort", Duration::from_secs(10)).await?;
    let pid = describe(c, t).await?.2;
    for p in 0..n {
        wait_marker(c, tp, p, pid).await?;
    }
    Ok((r.0, epoch))
}

// ------------------------------------------------------ InitProducerId

async fn idempotent_init_gives_a_new_pid_at_epoch_0(c: &mut Ctx) -> anyhow::Result<()> {
    let a = c.init_producer(None).await?;
    c.see(
        "first",
        format!("error={} epoch={} pid>=0 {}", a.0, a.2, a.1 >= 0),
    );
    let b = c.init_producer(None).await?;
    c.see("second", rel(b, a.1));
    let v0 = c.init_producer_with(None, 60_000, (-1, -1), 0).await?;
    c.see("v0", rel(v0, a.1));
    let r = c.init_producer_with(None, i32::MAX, (-1, -1), 4).await?;
    c.see("timeout Int.MAX (not validated)", rel(r, a.1));
    Ok(())
}

async fn idempotent_init_ignores_a_claim(c: &mut Ctx) -> anyhow::Result<()> {
    let (pid, _) = c.idempotent_producer().await?;
    let r = c.init_producer_with(None, 60_000, (pid, 5), 4).await?;
    c.see("claim (P,5) v4", rel(r, pid));
    let r = c.init_producer_with(None, 60_000, (pid, 0), 3).await?;
    c.see("claim (P,0) v3", rel(r, pid));
    Ok(())
}

async fn idempotent_half_claim_is_invalid_request(c: &mut Ctx) -> anyhow::Result<()> {
    let (pid, _) = c.idempotent_producer().await?;
    let r = c.init_producer_with(None, 60_000, (-1, 3), 3).await?;
    c.see("claim (-1,3) v3", rel(r, pid));
    let r = c.init_producer_with(None, 60_000, (pid, -1), 4).await?;
    c.see("claim (P,-1) v4", rel(r, pid));
    let r = c.init_producer_with(None, 60_000, (-5, 3), 4).await?;
    c.see("claim (-5,3) v4 (other negatives count as set)", r.0 == 0);
    Ok(())
}

async fn empty_transactional_id_is_invalid_request(c: &mut Ctx) -> anyhow::Result<()> {
    for v in [0i16, 2, 4] {
        let r = c.init_producer_with(Some(""), 60_000, (-1, -1), v).await?;
        c.see(
            format!("txn id \"\" v{v}"),
            format!("error={} pid={} epoch={}", r.0, r.1, r.2),
        );
    }
    Ok(())
}

async fn transaction_timeout_bounds(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    for ms in [0, -1, 900_001, i32::MAX, 900_000, 1] {
        let r = c.init_producer_with(Some(&t), ms, (-1, -1), 4).await?;
        c.see(
            format!("timeout {ms}"),
            format!("error={} epoch={}", r.0, r.2),
        );
    }
    let r = c
        .init_producer_with(Some(&c.name("t0")), 0, (-1, -1), 0)
        .await?;
    c.see(
        "timeout 0 v0",
        format!("error={} pid={} epoch={}", r.0, r.1, r.2),
    );
    Ok(())
}

async fn absent_id_noclaim_starts_at_epoch_0(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let d = describe(c, &t).await?;
    c.see("describe before", format!("error={} state={}", d.0, d.1));
    let r = init_claim(c, &t, (-1, -1), 4).await?;
    c.see(
        "init",
        format!("error={} epoch={} pid>=0 {}", r.0, r.2, r.1 >= 0),
    );
    let d = describe(c, &t).await?;
    c.see(
        "describe after",
        format!(
            "error={} state={} pid={} epoch={} timeout={} partitions={:?}",
            d.0,
            d.1,
            rp(d.2, r.1),
            d.3,
            d.4,
            d.5
        ),
    );
    Ok(())
}

async fn absent_id_accepts_any_claim(c: &mut Ctx) -> anyhow::Result<()> {
    let (other, _) = c.idempotent_producer().await?;
    let t = c.name("t");
    let r = init_claim(c, &t, (other, 7), 4).await?;
    c.see("claim (R,7) on an absent id", rel(r, other));
    let t2 = c.name("t2");
    let r = init_claim(c, &t2, (123_456_789, 30_000), 3).await?;
    c.see(
        "claim (garbage,30000) v3",
        format!("error={} epoch={}", r.0, r.2),
    );
    Ok(())
}

async fn claim_bump_after_commit_retried_is_not_bumped_twice(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let code = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit", code);
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("claim (P,e)", rel((r.0, r.1, r.2 - e), pid));
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("claim (P,e) again", rel((r.0, r.1, r.2 - e), pid));
    let code = add1(c, &t, pid, e + 1, &tp, 3).await?;
    c.see("AddPartitions at e+1", code);
    let code = add1(c, &t, pid, e + 2, &tp, 3).await?;
    c.see("AddPartitions at e+2", code);
    Ok(())
}

async fn future_epoch_claim_is_fenced_and_changes_nothing(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (pid, e) = init(c, &t).await?;
    let r = init_claim(c, &t, (pid, e + 9), 4).await?;
    c.see("claim (P,e+9) v4", rel(r, pid));
    let r = init_claim(c, &t, (pid, e + 9), 3).await?;
    c.see("claim (P,e+9) v3", rel(r, pid));
    let d = describe(c, &t).await?;
    c.see("epoch after", d.3 - e);
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("claim (P,e) still bumps", rel((r.0, r.1, r.2 - e), pid));
    Ok(())
}

async fn unrelated_pid_claim_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (pid, e) = init(c, &t).await?;
    let (other, oe) = init(c, &c.name("u")).await?;
    let r = init_claim(c, &t, (other, oe), 4).await?;
    c.see("claim (R,0)", rel(r, pid));
    let r = init_claim(c, &t, (other, e), 3).await?;
    c.see("claim (R,0) v3", rel(r, pid));
    let d = describe(c, &t).await?;
    c.see("after", format!("pid={} epoch={}", rp(d.2, pid), d.3 - e));
    Ok(())
}

async fn stale_claim_v3_answers_invalid_producer_epoch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (pid, e) = init(c, &t).await?;
    init(c, &t).await?;
    let r = init_claim(c, &t, (pid, e), 3).await?;
    c.see("stale claim v3", rel(r, pid));
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("stale claim v4", rel(r, pid));
    let d = describe(c, &t).await?;
    c.see("epoch after", d.3 - e);
    Ok(())
}

async fn noclaim_after_abort_bumps(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let code = finish(c, &t, &tp, pid, e, false).await?;
    c.see("abort", code);
    let r = init_claim(c, &t, (-1, -1), 4).await?;
    c.see("noclaim", rel((r.0, r.1, r.2 - e), pid));
    let d = describe(c, &t).await?;
    c.see("state", format!("{} partitions={}", d.1, d.5.len()));
    Ok(())
}

async fn init_after_commit_waits_for_the_markers(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let code = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit", code);
    // Right after EndTxn the markers may still be in flight (51); either
    // way the id ends up bumped exactly once.
    let r = c
        .wait_until(
            Duration::from_secs(10),
            "the init after the commit",
            async |c| {
                let r = init_claim(c, &t, (pid, e), 4).await?;
                Ok((r.0 != 51).then_some(r))
            },
        )
        .await?;
    c.see(
        "claim (P,e) once the markers are written",
        rel((r.0, r.1, r.2 - e), pid),
    );
    Ok(())
}

async fn init_after_abort_waits_for_the_markers(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let got = end_v(c, &t, pid, e, false, 3).await?;
    c.see("abort", got);
    // While PrepareAbort's markers are in flight 51, then the bump.
    let r = c
        .wait_until(
            Duration::from_secs(10),
            "the init after the abort",
            async |c| {
                let r = init_claim(c, &t, (-1, -1), 4).await?;
                Ok((r.0 != 51).then_some(r))
            },
        )
        .await?;
    c.see(
        "noclaim once the markers are written",
        rel((r.0, r.1, r.2 - e), pid),
    );
    wait_marker(c, &tp, 0, pid).await?;
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("log", format!("{vals:?}"));
    Ok(())
}

// -------------------------------------------------------------- fencing

async fn fence_aborts_every_partition_and_retry_bumps_twice(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = init(c, &t).await?;
    let r = add_v(c, &t, pid, e, &[(&tp, 0), (&tp, 1)], 3).await?;
    ensure!(r.iter().all(|x| x.2 == 0), "AddPartitionsToTxn: {r:?}");
    for p in 0..2 {
        let (code, _) = produce_txn(c, &t, &tp, p, (pid, e, 0), 2, "a").await?;
        ensure!(code == 0, "Produce: error {code}");
    }
    let (code, ae) = fence(c, &t, &tp, 2).await?;
    c.see("fencing init", code);
    c.see("abort epoch", ae - e);
    for p in 0..2 {
        let (_, recs, hw, _) = read_p(c, &tp, p, 0, 0).await?;
        let ctl: Vec<_> = recs
            .iter()
            .filter(|r| r.control)
            .map(|r| {
                format!(
                    "pid={} epoch={}",
                    rp(r.producer_id, pid),
                    r.producer_epoch - e
                )
            })
            .collect();
        c.see(format!("partition {p} control records"), format!("{ctl:?}"));
        c.see(format!("partition {p} hw"), hw);
    }
    let r = init_claim(c, &t, (-1, -1), 4).await?;
    c.see("retry", rel((r.0, r.1, r.2 - e), pid));
    Ok(())
}

async fn same_holder_claim_mid_ongoing_fences(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("claim (P,e) mid-Ongoing", rel(r, pid));
    let ae = wait_state(c, &t, "CompleteAbort", Duration::from_secs(10)).await?;
    c.see("abort epoch", ae - e);
    Ok(())
}

async fn same_holder_claim_retry_after_fence_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let r = init_claim(c, &t, (pid, e), 4).await?;
    ensure!(r.0 == 51, "claim mid-Ongoing: error {}", r.0);
    wait_state(c, &t, "CompleteAbort", Duration::from_secs(10)).await?;
    let r = init_claim(c, &t, (pid, e), 4).await?;
    c.see("claim (P,e) retry", rel(r, pid));
    let r = init_claim(c, &t, (pid, e + 1), 4).await?;
    c.see("claim (P,e+1)", rel((r.0, r.1, r.2 - e), pid));
    Ok(())
}

async fn foreign_claim_mid_ongoing_is_fenced_without_abort(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (other, _) = c.idempotent_producer().await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let r = init_claim(c, &t, (other, 2), 4).await?;
    c.see("claim (R,2) mid-Ongoing", rel(r, pid));
    let d = describe(c, &t).await?;
    c.see("state after", format!("{} epoch={}", d.1, d.3 - e));
    let code = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit still", code);
    Ok(())
}

async fn zombie_produce_after_fence_is_invalid_epoch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    fence(c, &t, &tp, 1).await?;
    let (_, ne) = init(c, &t).await?;
    c.see("new epoch", ne - e);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "z").await?;
    c.see("zombie Produce (P,e) seq 1", code);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 0), 1, "z").await?;
    c.see("zombie Produce (P,e) seq 0", code);
    let b = Batch::values(1).idempotent(pid, e, 1).encode()?;
    let r = c.produce(&tp, 0, b, 9).await?;
    c.see("zombie idempotent Produce (P,e)", r.error_code);
    Ok(())
}

async fn zombie_coordinator_calls_after_fence(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    fence(c, &t, &tp, 1).await?;
    init(c, &t).await?;
    for v in [1i16, 3] {
        let code = add1(c, &t, pid, e, &tp, v).await?;
        c.see(format!("zombie AddPartitions v{v}"), code);
    }
    for v in [1i16, 3] {
        let code = end_v(c, &t, pid, e, true, v).await?;
        c.see(format!("zombie EndTxn v{v}"), code);
    }
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(&t)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(e)
        .with_group_id(GroupId(s(&c.name("g"))));
    for v in [1i16, 3] {
        let code = c.call(&req, v).await?.error_code;
        c.see(format!("zombie AddOffsets v{v}"), code);
    }
    Ok(())
}

async fn zombie_produce_to_a_new_partition_after_fence(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    fence(c, &t, &tp, 1).await?;
    init(c, &t).await?;
    let (code, _) = produce_txn(c, &t, &tp, 1, (pid, e, 0), 1, "z").await?;
    c.see("zombie Produce to a partition never added", code);
    let hw = c.fetch(&tp, 1, 0, 0).await?.high_watermark;
    c.see("that partition's hw", hw);
    Ok(())
}

// ---------------------------------------------------- AddPartitionsToTxn

async fn add_partitions_on_empty_starts_ongoing(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    let code = add1(c, &t, pid, e, &tp, 3).await?;
    c.see("add", code);
    let d = describe(c, &t).await?;
    c.see(
        "state",
        format!("{} epoch={} partitions={}", d.1, d.3 - e, d.5.len()),
    );
    c.see("partition listed", d.5 == vec![format!("{tp}-0")]);
    Ok(())
}

async fn add_partitions_again_is_none(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = init(c, &t).await?;
    let r = add_v(c, &t, pid, e, &[(&tp, 0), (&tp, 1)], 3).await?;
    c.see(
        "add both",
        format!("{:?}", r.iter().map(|x| x.2).collect::<Vec<_>>()),
    );
    let r = add_v(c, &t, pid, e, &[(&tp, 1)], 3).await?;
    c.see(
        "add one again",
        format!("{:?}", r.iter().map(|x| x.2).collect::<Vec<_>>()),
    );
    let r = add_v(c, &t, pid, e, &[(&tp, 1)], 0).await?;
    c.see(
        "add one again v0",
        format!("{:?}", r.iter().map(|x| x.2).collect::<Vec<_>>()),
    );
    let d = describe(c, &t).await?;
    c.see("partitions", d.5.len());
    Ok(())
}

async fn add_partitions_grows_the_set(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let tp2 = c.name("tp2");
    mk(c, &tp, 1).await?;
    mk(c, &tp2, 3).await?;
    let (pid, e) = init(c, &t).await?;
    let got = add1(c, &t, pid, e, &tp, 3).await?;
    c.see("add t0", got);
    let r = add_v(c, &t, pid, e, &[(&tp2, 2), (&tp2, 0)], 3).await?;
    c.see(
        "add t2 partitions",
        format!("{:?}", r.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>()),
    );
    let d = describe(c, &t).await?;
    let short: Vec<_> =
        d.5.iter()
            .map(|p| p.replace(&tp2, "T2").replace(&tp, "T0"))
            .collect();
    c.see("partitions", format!("{short:?}"));
    Ok(())
}

async fn add_partitions_after_commit_starts_anew(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    finish(c, &t, &tp, pid, e, true).await?;
    let d = describe(c, &t).await?;
    c.see("after commit", format!("{} partitions={}", d.1, d.5.len()));
    let code = add1(c, &t, pid, e, &tp, 3).await?;
    c.see("add after commit", code);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "b").await?;
    c.see("produce in the next transaction", code);
    let d = describe(c, &t).await?;
    c.see(
        "state",
        format!("{} epoch={} partitions={}", d.1, d.3 - e, d.5.len()),
    );
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit", got);
    let (vals, _, _, _) = read(c, &tp, 0, 1).await?;
    c.see("read_committed", format!("{vals:?}"));
    Ok(())
}

async fn add_partitions_after_commit_waits_for_the_markers(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit", got);
    // While markers are in flight 51, afterwards NONE: poll to the NONE.
    let code = c
        .wait_until(
            Duration::from_secs(10),
            "the add after the commit",
            async |c| {
                let code = add1(c, &t, pid, e, &tp, 3).await?;
                Ok((code != 51).then_some(code))
            },
        )
        .await?;
    c.see("add once the markers are written", code);
    let d = describe(c, &t).await?;
    c.see("state", d.1);
    Ok(())
}

async fn add_partitions_with_another_epoch_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    let (pid2, e2) = init(c, &t).await?;
    ensure!(pid2 == pid && e2 == e + 1, "second init did not bump");
    let got = add1(c, &t, pid, e2, &tp, 3).await?;
    c.see("add ongoing", got);
    for v in [1i16, 2, 3] {
        let got = add1(c, &t, pid, e, &tp, v).await?;
        c.see(format!("epoch e-1 v{v}"), got);
        let got = add1(c, &t, pid, e2 + 1, &tp, v).await?;
        c.see(format!("epoch e+1 v{v}"), got);
    }
    let d = describe(c, &t).await?;
    c.see("state after", format!("{} epoch={}", d.1, d.3 - e));
    Ok(())
}

async fn add_partitions_with_unknown_id_or_pid(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (other, _) = c.idempotent_producer().await?;
    let got = add1(c, &c.name("absent"), other, 0, &tp, 3).await?;
    c.see("absent id", got);
    let (pid, e) = init(c, &t).await?;
    ensure!(pid != other, "pids collide");
    let got = add1(c, &t, other, e, &tp, 3).await?;
    c.see("another pid", got);
    let got = add1(c, &t, other, e, &tp, 0).await?;
    c.see("another pid v0", got);
    let d = describe(c, &t).await?;
    c.see("state after", d.1);
    Ok(())
}

async fn add_partitions_with_an_unknown_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let unknown = c.name("unknown");
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    let r = add_v(c, &t, pid, e, &[(&tp, 0), (&unknown, 0)], 3).await?;
    for (name, p, code) in &r {
        let which = if *name == tp { "t0" } else { "unknown" };
        c.see(format!("{which}-{p}"), code);
    }
    let r = add_v(c, &t, pid, e, &[(&tp, 0), (&tp, 7)], 3).await?;
    c.see(
        "t0-0 with t0-7",
        format!("{:?}", r.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>()),
    );
    let d = describe(c, &t).await?;
    c.see("state after", format!("{} partitions={}", d.1, d.5.len()));
    Ok(())
}

/// AddPartitionsToTxn v4 VerifyOnly of one transaction: (top error, per partition `index=error`).
async fn verify_only(
    c: &mut Ctx,
    t: &str,
    pid: i64,
    epoch: i16,
    parts: &[(&str, i32)],
) -> anyhow::Result<(i16, Vec<String>)> {
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s(t)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(topics_of(parts)),
    ]);
    let r = c.call(&req, 4).await?;
    let mut out = Vec::new();
    for tr in &r.results_by_transaction {
        for x in &tr.topic_results {
            for p in &x.results_by_partition {
                out.push(format!("{}={}", p.partition_index, p.partition_error_code));
            }
        }
    }
    out.sort();
    Ok((r.error_code, out))
}

async fn verify_only_v4_from_a_client(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = init(c, &t).await?;
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let r = verify_only(c, &t, pid, e, &[(&tp, 0), (&tp, 1)]).await?;
    c.see("verify {0,1}", format!("top={} {:?}", r.0, r.1));
    let r = verify_only(c, &t, pid, e + 1, &[(&tp, 0)]).await?;
    c.see("verify at e+1", format!("top={} {:?}", r.0, r.1));
    let d = describe(c, &t).await?;
    c.see("partitions after", d.5.len());
    Ok(())
}

async fn verify_only_v4_after_abort(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    finish(c, &t, &tp, pid, e, false).await?;
    let r = verify_only(c, &t, pid, e, &[(&tp, 0)]).await?;
    c.see("verify after abort", format!("top={} {:?}", r.0, r.1));
    let r = verify_only(c, &c.name("absent"), pid, e, &[(&tp, 0)]).await?;
    c.see("verify an absent id", format!("top={} {:?}", r.0, r.1));
    Ok(())
}

// ------------------------------------------- AddOffsetsToTxn / TxnOffsetCommit

async fn add_offsets(c: &mut Ctx, t: &str, pid: i64, epoch: i16, g: &str) -> anyhow::Result<i16> {
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(t)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s(g)));
    Ok(c.call(&req, 3).await?.error_code)
}

/// TxnOffsetCommit v3 of partition 0 of `tp` at `offset`: the partition's error.
async fn txn_commit(
    c: &mut Ctx,
    t: &str,
    (pid, epoch): (i64, i16),
    g: &str,
    tp: &str,
    offset: i64,
    member: (i32, &str),
) -> anyhow::Result<i16> {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(t)))
        .with_group_id(GroupId(s(g)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(member.0)
        .with_member_id(s(member.1))
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(topic(tp))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    let r = c.call(&req, 3).await?;
    r.topics
        .first()
        .and_then(|x| x.partitions.first())
        .map(|p| p.error_code)
        .context("TxnOffsetCommit answered no partition")
}

/// OffsetFetch v7 of partition 0 of `tp`: (top error, partition error, offset).
async fn offset_fetch(
    c: &mut Ctx,
    g: &str,
    tp: &str,
    stable: bool,
) -> anyhow::Result<(i16, i16, i64)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(g)))
        .with_require_stable(stable)
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(topic(tp))
                .with_partition_indexes(vec![0]),
        ]));
    let r = c.call(&req, 7).await?;
    let p = r.topics.first().and_then(|x| x.partitions.first());
    Ok((
        r.error_code,
        p.map_or(-100, |p| p.error_code),
        p.map_or(-100, |p| p.committed_offset),
    ))
}

async fn add_offsets_adds_the_offsets_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let g = c.name("g");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let got = add_offsets(c, &t, pid, e, &g).await?;
    c.see("AddOffsets", got);
    let got = add_offsets(c, &t, pid, e, &g).await?;
    c.see("AddOffsets again", got);
    let d = describe(c, &t).await?;
    let offsets =
        d.5.iter()
            .filter(|p| p.starts_with("__consumer_offsets-"))
            .count();
    c.see(
        "partitions",
        format!("total={} offsets-partitions={offsets}", d.5.len()),
    );
    let (pid2, e2) = init(c, &c.name("t2")).await?;
    let got = add_offsets(c, &c.name("t2"), pid2, e2, &g).await?;
    c.see("AddOffsets on Empty", got);
    let d = describe(c, &c.name("t2")).await?;
    c.see("state after AddOffsets on Empty", d.1);
    let got = add_offsets(c, &t, pid2, e, &g).await?;
    c.see("AddOffsets with another pid", got);
    let got = add_offsets(c, &t, pid, e + 1, &g).await?;
    c.see("AddOffsets with epoch e+1", got);
    Ok(())
}

async fn txn_offset_commit_without_add_offsets(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let g = c.name("g");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let code = txn_commit(c, &t, (pid, e), &g, &tp, 5, (-1, "")).await?;
    c.see("TxnOffsetCommit without AddOffsets", code);
    let (pid2, e2) = init(c, &c.name("t2")).await?;
    let code = txn_commit(c, &c.name("t2"), (pid2, e2), &g, &tp, 5, (-1, "")).await?;
    c.see("TxnOffsetCommit on Empty", code);
    Ok(())
}

async fn txn_offset_commit_with_an_unknown_member(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let g = c.name("g");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    ensure!(
        add_offsets(c, &t, pid, e, &g).await? == 0,
        "AddOffsetsToTxn refused"
    );
    let code = txn_commit(c, &t, (pid, e), &g, &tp, 5, (3, "ghost")).await?;
    c.see("generation 3, member ghost", code);
    let code = txn_commit(c, &t, (pid, e), &g, &tp, 5, (3, "")).await?;
    c.see("generation 3, no member", code);
    let code = txn_commit(c, &t, (pid, e), &g, &tp, 5, (-1, "")).await?;
    c.see("generation -1, no member", code);
    let code = txn_commit(c, &t, (pid, e - 1), &g, &tp, 5, (-1, "")).await?;
    c.see("stale producer epoch", code);
    Ok(())
}

async fn txn_offsets_visible_only_after_commit(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let g = c.name("g");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    ensure!(
        add_offsets(c, &t, pid, e, &g).await? == 0,
        "AddOffsetsToTxn refused"
    );
    let code = txn_commit(c, &t, (pid, e), &g, &tp, 5, (-1, "")).await?;
    c.see("TxnOffsetCommit", code);
    let r = offset_fetch(c, &g, &tp, false).await?;
    c.see("before commit", format!("{r:?}"));
    let r = offset_fetch(c, &g, &tp, true).await?;
    c.see("before commit, require_stable", format!("{r:?}"));
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("EndTxn commit", got);
    let r = c
        .wait_until(Duration::from_secs(10), "the committed offset", async |c| {
            let r = offset_fetch(c, &g, &tp, true).await?;
            Ok((r.2 == 5).then_some(r))
        })
        .await?;
    c.see("after the marker", format!("{r:?}"));
    wait_state(c, &t, "CompleteCommit", Duration::from_secs(10)).await?;
    // A second transaction that aborts leaves the offset alone.
    ensure!(
        add_offsets(c, &t, pid, e, &g).await? == 0,
        "AddOffsetsToTxn refused"
    );
    let got = txn_commit(c, &t, (pid, e), &g, &tp, 9, (-1, "")).await?;
    c.see("TxnOffsetCommit 9", got);
    finish(c, &t, &tp, pid, e, false).await?;
    let r = offset_fetch(c, &g, &tp, true).await?;
    c.see("after an aborted 9", format!("{r:?}"));
    Ok(())
}

// ---------------------------------------------------------------- EndTxn

async fn commit_makes_records_visible_to_read_committed(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 3, "a").await?;
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see(
        "read_committed before",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit", got);
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see(
        "read_committed after",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    let (vals, recs, _, _) = read(c, &tp, 0, 0).await?;
    c.see("read_uncommitted after", format!("{vals:?}"));
    let ctl = recs
        .iter()
        .find(|r| r.control)
        .context("no control record")?;
    c.see(
        "marker",
        format!(
            "offset={} pid={} epoch={} transactional={} value-len={}",
            ctl.offset,
            rp(ctl.producer_id, pid),
            ctl.producer_epoch - e,
            ctl.transactional,
            ctl.value.as_ref().map_or(0, |v| v.len())
        ),
    );
    Ok(())
}

async fn abort_hides_records_from_read_committed(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 3, "a").await?;
    let got = finish(c, &t, &tp, pid, e, false).await?;
    c.see("abort", got);
    read(c, &tp, 0, 1).await?;
    let p = c.fetch(&tp, 0, 0, 1).await?;
    let recs = decode(p.records.as_ref())?;
    c.see(
        "read_committed hw lso",
        format!("{} {}", p.high_watermark, p.last_stable_offset),
    );
    c.see(
        "read_committed data batches delivered",
        values_of(&recs).len(),
    );
    let aborted: Vec<_> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| format!("pid={} first={}", rp(a.producer_id.0, pid), a.first_offset))
        .collect();
    c.see("aborted_transactions", format!("{aborted:?}"));
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("read_uncommitted", format!("{vals:?}"));
    let p = c.fetch(&tp, 0, 0, 0).await?;
    c.see(
        "read_uncommitted aborted_transactions null",
        p.aborted_transactions.is_none(),
    );
    Ok(())
}

async fn commit_retried_after_commit_is_none(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit", got);
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit again", got);
    let got = end_v(c, &t, pid, e, true, 0).await?;
    c.see("commit again v0", got);
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("one marker only", format!("{vals:?}"));
    Ok(())
}

async fn abort_after_commit_is_invalid_txn_state(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    finish(c, &t, &tp, pid, e, true).await?;
    let got = end_v(c, &t, pid, e, false, 3).await?;
    c.see("abort after commit", got);
    let d = describe(c, &t).await?;
    c.see("state", d.1);
    Ok(())
}

async fn end_txn_after_abort(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    finish(c, &t, &tp, pid, e, false).await?;
    let got = end_v(c, &t, pid, e, false, 3).await?;
    c.see("abort again", got);
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit after abort", got);
    let d = describe(c, &t).await?;
    c.see("state", d.1);
    Ok(())
}

async fn end_txn_on_empty_is_invalid_txn_state(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (pid, e) = init(c, &t).await?;
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit on Empty", got);
    let got = end_v(c, &t, pid, e, false, 3).await?;
    c.see("abort on Empty", got);
    let got = end_v(c, &t, pid, e, false, 0).await?;
    c.see("abort on Empty v0", got);
    Ok(())
}

async fn end_txn_with_another_epoch_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    init(c, &t).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    for v in [1i16, 2, 3] {
        let got = end_v(c, &t, pid, e - 1, true, v).await?;
        c.see(format!("epoch e-1 v{v}"), got);
        let got = end_v(c, &t, pid, e + 1, false, v).await?;
        c.see(format!("epoch e+1 v{v}"), got);
    }
    let d = describe(c, &t).await?;
    c.see("state after", d.1);
    Ok(())
}

async fn end_txn_with_unknown_id_or_pid(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (other, _) = c.idempotent_producer().await?;
    let got = end_v(c, &c.name("absent"), other, 0, true, 3).await?;
    c.see("absent id", got);
    let (_, e) = open(c, &t, &tp, 1, "a").await?;
    let got = end_v(c, &t, other, e, true, 3).await?;
    c.see("another pid", got);
    let d = describe(c, &t).await?;
    c.see("state after", d.1);
    Ok(())
}

async fn end_txn_with_empty_id(c: &mut Ctx) -> anyhow::Result<()> {
    for v in [0i16, 3] {
        let got = end_v(c, "", 1, 0, true, v).await?;
        c.see(format!("txn id \"\" v{v}"), got);
    }
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("")))
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_group_id(GroupId(s(&c.name("g"))));
    let got = c.call(&req, 3).await?.error_code;
    c.see("AddOffsets txn id \"\"", got);
    Ok(())
}

// ---------------------------------------------------------------- reaper

/// A transaction with a 1 s timeout left open until the reaper aborts it:
/// (pid, epoch, the abort's epoch).
async fn reaped(c: &mut Ctx, t: &str, tp: &str) -> anyhow::Result<(i64, i16, i16)> {
    mk(c, tp, 1).await?;
    let (code, pid, e) = c.init_producer_with(Some(t), 1000, (-1, -1), 4).await?;
    ensure!(code == 0, "InitProducerId: error {code}");
    ensure!(
        add1(c, t, pid, e, tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let (code, _) = produce_txn(c, t, tp, 0, (pid, e, 0), 2, "a").await?;
    ensure!(code == 0, "Produce: error {code}");
    let ae = wait_state(c, t, "CompleteAbort", Duration::from_secs(20)).await?;
    wait_marker(c, tp, 0, pid).await?;
    Ok((pid, e, ae))
}

async fn reaper_aborts_a_timed_out_transaction(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    let (pid, e, ae) = reaped(c, &t, &tp).await?;
    c.see("abort epoch", ae - e);
    let (vals, recs, hw, lso) = read(c, &tp, 0, 0).await?;
    c.see("read_uncommitted", format!("{vals:?} hw={hw} lso={lso}"));
    let ctl: Vec<_> = recs
        .iter()
        .filter(|r| r.control)
        .map(|r| {
            format!(
                "pid={} epoch={}",
                rp(r.producer_id, pid),
                r.producer_epoch - e
            )
        })
        .collect();
    c.see("marker", format!("{ctl:?}"));
    let (vals, _, _, _) = read(c, &tp, 0, 1).await?;
    c.see("read_committed", format!("{vals:?}"));
    Ok(())
}

async fn commit_after_the_reaper_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    let (pid, e, _) = reaped(c, &t, &tp).await?;
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("EndTxn commit v3", got);
    let got = end_v(c, &t, pid, e, true, 1).await?;
    c.see("EndTxn commit v1", got);
    let got = add1(c, &t, pid, e, &tp, 3).await?;
    c.see("AddPartitions v3", got);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 2), 1, "z").await?;
    c.see("Produce at the old epoch", code);
    Ok(())
}

async fn init_after_the_reaper_bumps_twice(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    let (pid, e, _) = reaped(c, &t, &tp).await?;
    let r = init_claim(c, &t, (-1, -1), 4).await?;
    c.see("noclaim", rel((r.0, r.1, r.2 - e), pid));
    let d = describe(c, &t).await?;
    c.see("state", format!("{} timeout={}", d.1, d.4));
    Ok(())
}

// -------------------------------------------------------- partition side

async fn non_transactional_batch_while_open_is_invalid_txn_state(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let b = Batch::values(1).idempotent(pid, e, 1).encode()?;
    let r = c.produce(&tp, 0, b, 9).await?;
    c.see("idempotent batch from P while open", r.error_code);
    let b = Batch::values(1).idempotent(pid, e, 1).encode()?;
    let r = c.produce_with(&tp, 0, Some(b), -1, Some(&t), 9).await?;
    c.see("same with the transactional id", r.error_code);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "b").await?;
    c.see("transactional seq 1 still", code);
    Ok(())
}

async fn transactional_batch_without_add_partitions(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = init(c, &t).await?;
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 0), 1, "a").await?;
    c.see("Empty: transactional batch", code);
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let (code, _) = produce_txn(c, &t, &tp, 1, (pid, e, 0), 1, "a").await?;
    c.see("Ongoing: batch to a partition not added", code);
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 0), 1, "a").await?;
    c.see("Ongoing: batch to the added partition", code);
    let hw = c.fetch(&tp, 1, 0, 0).await?.high_watermark;
    c.see("partition 1 hw", hw);
    Ok(())
}

async fn write_markers(
    c: &mut Ctx,
    tp: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> anyhow::Result<i16> {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(topic(tp))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let r = c.call(&req, 1).await?;
    Ok(r.markers
        .first()
        .and_then(|m| m.topics.first())
        .and_then(|x| x.partitions.first())
        .map_or(-100, |p| p.error_code))
}

async fn client_markers_with_a_stale_epoch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    init(c, &t).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let code = write_markers(c, &tp, pid, e - 1, false, 0).await?;
    c.see("client WriteTxnMarkers at epoch e-1", code);
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("log after", format!("{vals:?}"));
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit still", got);
    // The partition now knows the coordinator's epoch from that marker:
    // one from a lower coordinator epoch is refused.
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "b").await?;
    ensure!(code == 0, "Produce: error {code}");
    let code = write_markers(c, &tp, pid, e, false, -1).await?;
    c.see("client WriteTxnMarkers from coordinator epoch -1", code);
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("second commit", got);
    let (vals, _, _, _) = read(c, &tp, 0, 1).await?;
    c.see("read_committed", format!("{vals:?}"));
    Ok(())
}

async fn open_transaction_pins_the_lso(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    for i in 0..2 {
        let b = Batch::values(2).encode()?;
        let r = c.produce(&tp, 0, b, 9).await?;
        ensure!(r.error_code == 0, "plain Produce {i} refused: {r:?}");
    }
    let (pid, e) = init(c, &t).await?;
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let (code, base) = produce_txn(c, &t, &tp, 0, (pid, e, 0), 2, "x").await?;
    c.see("txn batch", format!("error={code} base={base}"));
    let b = Batch::values(3).encode()?;
    let got = c.produce(&tp, 0, b, 9).await?.error_code;
    c.see("plain after", got);
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see("read_committed", format!("{vals:?} hw={hw} lso={lso}"));
    let (vals, _, hw, lso) = read(c, &tp, 4, 1).await?;
    c.see(
        "read_committed from the txn's start",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("read_uncommitted", format!("{vals:?}"));
    finish(c, &t, &tp, pid, e, true).await?;
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see(
        "read_committed after commit",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    Ok(())
}

async fn aborted_range_in_read_committed_fetch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    ensure!(
        c.produce(&tp, 0, Batch::values(2).encode()?, 9)
            .await?
            .error_code
            == 0,
        "plain Produce refused"
    );
    let (pid, e) = open(c, &t, &tp, 2, "x").await?;
    ensure!(
        c.produce(&tp, 0, Batch::values(1).encode()?, 9)
            .await?
            .error_code
            == 0,
        "plain Produce refused"
    );
    finish(c, &t, &tp, pid, e, false).await?;
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 2), 1, "y").await?;
    ensure!(code == 0, "second transaction's Produce: error {code}");
    finish(c, &t, &tp, pid, e, true).await?;
    read(c, &tp, 0, 1).await?;
    for from in [0i64, 2, 5, 6] {
        let p = c.fetch(&tp, 0, from, 1).await?;
        let aborted: Vec<_> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| format!("pid={} first={}", rp(a.producer_id.0, pid), a.first_offset))
            .collect();
        c.see(format!("from {from} aborted"), format!("{aborted:?}"));
        c.see(
            format!("from {from} hw lso"),
            format!("{} {}", p.high_watermark, p.last_stable_offset),
        );
    }
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("read_uncommitted", format!("{vals:?}"));
    Ok(())
}

/// A control batch (one COMMIT record) as a client could write it.
fn control_batch(pid: i64, epoch: i16) -> anyhow::Result<Bytes> {
    let rec = Record {
        transactional: true,
        control: true,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(&[0, 0, 0, 1])),
        value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
        headers: IndexMap::new(),
        delete_horizon: false,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        std::iter::once(&rec),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .context("encoding a control batch")?;
    Ok(buf.freeze())
}

async fn client_control_batch_is_invalid_record(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let b = control_batch(pid, e)?;
    let r = c
        .produce_with(&tp, 0, Some(b.clone()), -1, Some(&t), 9)
        .await?;
    c.see("control batch in the transaction", r.error_code);
    let r = c.produce(&tp, 0, control_batch(-1, -1)?, 9).await?;
    c.see("control batch without a producer", r.error_code);
    let (vals, _, _, _) = read(c, &tp, 0, 0).await?;
    c.see("log", format!("{vals:?}"));
    Ok(())
}

async fn abort_marker_fences_the_zombie_on_the_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let (_, ae) = fence(c, &t, &tp, 1).await?;
    c.see("abort epoch", ae - e);
    let r = c
        .call(
            &DescribeProducersRequest::default().with_topics(vec![
                TopicRequest::default()
                    .with_name(topic(&tp))
                    .with_partition_indexes(vec![0]),
            ]),
            0,
        )
        .await?;
    let ps: Vec<_> = r
        .topics
        .iter()
        .flat_map(|x| x.partitions.iter())
        .flat_map(|p| p.active_producers.iter())
        .map(|s| {
            format!(
                "pid={} epoch={} txn-start={}",
                rp(s.producer_id.0, pid),
                s.producer_epoch - i32::from(e),
                s.current_txn_start_offset
            )
        })
        .collect();
    c.see("partition producer state", format!("{ps:?}"));
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "z").await?;
    c.see("zombie at e", code);
    Ok(())
}

// ----------------------------------------------------------- admin views

async fn find_coordinator_for_a_transactional_id(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (host, port) = c
        .addr
        .rsplit_once(':')
        .context("bootstrap without a port")?;
    let (host, port) = (host.to_owned(), port.parse::<i32>()?);
    let keys = [t.clone(), c.name("u")];
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(keys.iter().map(|k| s(k)).collect());
    let r = c.call(&req, 4).await?;
    for (i, x) in r.coordinators.iter().enumerate() {
        let bootstrap = x.host.as_str() == host && x.port == port;
        let echoed = keys.get(i).is_some_and(|k| x.key.as_str() == k);
        c.see(
            format!("v4 key {i}"),
            format!(
                "error={} bootstrap={bootstrap} key-echoed={echoed}",
                x.error_code
            ),
        );
    }
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(s(&t));
    for v in [1i16, 3] {
        let r = c.call(&req, v).await?;
        c.see(
            format!("v{v}"),
            format!(
                "error={} bootstrap={}",
                r.error_code,
                r.host.as_str() == host && r.port == port
            ),
        );
    }
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(s(""));
    let r = c.call(&req, 3).await?;
    c.see("v3 empty key", r.error_code);
    Ok(())
}

async fn list_transactions_states(c: &mut Ctx) -> anyhow::Result<()> {
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (te, to, tc) = (c.name("empty"), c.name("ongoing"), c.name("committed"));
    init(c, &te).await?;
    let (pid_o, _) = open(c, &to, &tp, 1, "a").await?;
    let (pid_c, ec) = open(c, &tc, &tp, 1, "b").await?;
    finish(c, &tc, &tp, pid_c, ec, true).await?;
    let r = c.call(&ListTransactionsRequest::default(), 0).await?;
    c.see("error", r.error_code);
    for (name, id, pid) in [
        ("empty", &te, -2),
        ("ongoing", &to, pid_o),
        ("committed", &tc, pid_c),
    ] {
        let x = r
            .transaction_states
            .iter()
            .find(|x| x.transactional_id.0.as_str() == id.as_str());
        c.see(
            name.to_string(),
            x.map_or("absent".to_owned(), |x| {
                format!(
                    "{} pid-matches={}",
                    x.transaction_state,
                    pid == -2 || x.producer_id.0 == pid
                )
            }),
        );
    }
    let req = ListTransactionsRequest::default().with_state_filters(vec![s("Ongoing"), s("Bogus")]);
    let r = c.call(&req, 0).await?;
    c.see(
        "filter Ongoing: unknown filters",
        format!(
            "{:?}",
            r.unknown_state_filters
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
        ),
    );
    let mine: Vec<_> = r
        .transaction_states
        .iter()
        .filter(|x| {
            [&te, &to, &tc]
                .iter()
                .any(|id| id.as_str() == x.transactional_id.0.as_str())
        })
        .map(|x| x.transaction_state.to_string())
        .collect();
    c.see("filter Ongoing: mine", format!("{mine:?}"));
    let req = ListTransactionsRequest::default().with_producer_id_filters(vec![ProducerId(pid_c)]);
    let r = c.call(&req, 0).await?;
    let mine: Vec<_> = r
        .transaction_states
        .iter()
        .map(|x| x.transactional_id.0.as_str() == tc.as_str())
        .collect();
    c.see("filter by pid", format!("{mine:?}"));
    Ok(())
}

async fn describe_transactions_views(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let absent = c.name("absent");
    let d = describe(c, &absent).await?;
    c.see("absent", format!("error={} state={:?}", d.0, d.1));
    let (code, pid, e) = c.init_producer_with(Some(&t), 12_345, (-1, -1), 4).await?;
    ensure!(code == 0, "InitProducerId: error {code}");
    let d = describe(c, &t).await?;
    c.see(
        "empty",
        format!(
            "error={} state={} pid={} epoch={} timeout={} parts={:?}",
            d.0,
            d.1,
            rp(d.2, pid),
            d.3 - e,
            d.4,
            d.5
        ),
    );
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let req =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(s(&t))]);
    let r = c.call(&req, 0).await?;
    let x = &r.transaction_states[0];
    c.see(
        "ongoing",
        format!(
            "{} start-set={} topics={}",
            x.transaction_state,
            x.transaction_start_time_ms > 0,
            x.topics.len()
        ),
    );
    finish(c, &t, &tp, pid, e, false).await?;
    let r = c.call(&req, 0).await?;
    let x = &r.transaction_states[0];
    c.see(
        "aborted",
        format!(
            "{} start-set={} topics={}",
            x.transaction_state,
            x.transaction_start_time_ms > 0,
            x.topics.len()
        ),
    );
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(s(&t)), TransactionalId(s(&absent))]);
    let r = c.call(&req, 0).await?;
    c.see(
        "two ids",
        format!(
            "{:?}",
            r.transaction_states
                .iter()
                .map(|x| x.error_code)
                .collect::<Vec<_>>()
        ),
    );
    Ok(())
}

async fn describe_producers_of_an_open_transaction(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    ensure!(
        c.produce(&tp, 0, Batch::values(1).encode()?, 9)
            .await?
            .error_code
            == 0,
        "plain Produce refused"
    );
    let (pid, e) = open(c, &t, &tp, 3, "a").await?;
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(topic(&tp))
            .with_partition_indexes(vec![0, 9]),
    ]);
    let show = |r: &kafka_protocol::messages::DescribeProducersResponse| -> Vec<String> {
        r.topics
            .iter()
            .flat_map(|x| x.partitions.iter())
            .map(|p| {
                let ps: Vec<_> = p
                    .active_producers
                    .iter()
                    .map(|s| {
                        format!(
                            "pid={} epoch={} last-seq={} coord-epoch>=-1 {} txn-start={}",
                            rp(s.producer_id.0, pid),
                            s.producer_epoch - i32::from(e),
                            s.last_sequence,
                            s.coordinator_epoch >= -1,
                            s.current_txn_start_offset
                        )
                    })
                    .collect();
                format!("p{} error={} {ps:?}", p.partition_index, p.error_code)
            })
            .collect()
    };
    let r = c.call(&req, 0).await?;
    c.see("open", format!("{:?}", show(&r)));
    finish(c, &t, &tp, pid, e, true).await?;
    let r = c.call(&req, 0).await?;
    c.see("committed", format!("{:?}", show(&r)));
    Ok(())
}

/// A fresh transactional id with partition 0 of `tp` added: (pid, epoch).
async fn added(c: &mut Ctx, t: &str, tp: &str) -> anyhow::Result<(i64, i16)> {
    let (pid, e) = init(c, t).await?;
    let code = add1(c, t, pid, e, tp, 3).await?;
    ensure!(code == 0, "AddPartitionsToTxn: error {code}");
    Ok((pid, e))
}

async fn transactional_produce_needs_a_transactional_id(c: &mut Ctx) -> anyhow::Result<()> {
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let t = c.name("t1");
    let (pid, e) = added(c, &t, &tp).await?;
    let b = Batch::values(1).transactional(pid, e, 0).encode()?;
    let r = c.produce_with(&tp, 0, Some(b), -1, None, 9).await?;
    c.see("transactional batch, null transactional id", r.error_code);
    let t = c.name("t2");
    let (pid, e) = added(c, &t, &tp).await?;
    let b = Batch::values(1).transactional(pid, e, 0).encode()?;
    let r = c
        .produce_with(&tp, 0, Some(b), -1, Some(&c.name("other")), 9)
        .await?;
    c.see(
        "transactional batch, an unknown transactional id",
        r.error_code,
    );
    let t = c.name("t3");
    let (pid, e) = added(c, &t, &tp).await?;
    let b = Batch::values(1).transactional(pid, e, -1).encode()?;
    let r = c.produce_with(&tp, 0, Some(b), -1, Some(&t), 9).await?;
    c.see("transactional batch, sequence -1", r.error_code);
    let b = Batch::values(1).transactional(pid, e, 0).encode()?;
    let r = c.produce_with(&tp, 0, Some(b), -1, Some(&t), 9).await?;
    c.see("then sequence 0", r.error_code);
    let t = c.name("t4");
    let (pid, e) = added(c, &t, &tp).await?;
    let b = Batch::values(1).transactional(pid, e, 0).encode()?;
    let r = c.produce_with(&tp, 0, Some(b), 1, Some(&t), 9).await?;
    c.see("transactional batch, acks 1", r.error_code);
    let hw = c.fetch(&tp, 0, 0, 0).await?.high_watermark;
    c.see("hw", hw);
    Ok(())
}

async fn client_abort_marker_at_a_higher_epoch_fences(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 1).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    // The coordinator's epoch as the partition last saw it: none yet.
    let code = write_markers(c, &tp, pid, e + 1, false, 0).await?;
    c.see("client ABORT marker at e+1", code);
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see("read_committed", format!("{vals:?} hw={hw} lso={lso}"));
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e, 1), 1, "z").await?;
    c.see("Produce at e", code);
    let d = describe(c, &t).await?;
    c.see("coordinator state", format!("{} epoch={}", d.1, d.3 - e));
    let got = end_v(c, &t, pid, e, false, 3).await?;
    c.see("EndTxn abort at e", got);
    Ok(())
}

async fn internal_topics_cannot_be_added(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    let g = c.name("g");
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    // Makes sure __consumer_offsets exists on every broker.
    ensure!(
        add_offsets(c, &t, pid, e, &g).await? == 0,
        "AddOffsetsToTxn refused"
    );
    let r = add_v(c, &t, pid, e, &[("__consumer_offsets", 0), (&tp, 0)], 3).await?;
    let shown: Vec<_> = r
        .iter()
        .map(|(n, p, code)| format!("{}-{p}={code}", if *n == tp { "t0" } else { n.as_str() }))
        .collect();
    c.see("add __consumer_offsets-0 with t0-0", format!("{shown:?}"));
    let d = describe(c, &t).await?;
    let has_t0 = d.5.iter().any(|x| x.starts_with(tp.as_str()));
    c.see("t0 added", has_t0);
    Ok(())
}

async fn transactional_batch_at_a_future_epoch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    mk(c, &tp, 2).await?;
    let (pid, e) = open(c, &t, &tp, 1, "a").await?;
    let (code, _) = produce_txn(c, &t, &tp, 0, (pid, e + 1, 0), 1, "f").await?;
    c.see("open partition: batch at e+1 seq 0", code);
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let r = add_v(c, &t, pid, e, &[(&tp, 1)], 3).await?;
    ensure!(
        r.iter().all(|x| x.2 == 0),
        "AddPartitionsToTxn of partition 1: {r:?}"
    );
    let (code, _) = produce_txn(c, &t, &tp, 1, (pid, e + 1, 0), 1, "f").await?;
    c.see("added partition without data: batch at e+1 seq 0", code);
    let got = end_v(c, &t, pid, e, true, 3).await?;
    c.see("commit at e", got);
    Ok(())
}

async fn interleaved_transactions_and_the_lso(c: &mut Ctx) -> anyhow::Result<()> {
    let (ta, tb, tp) = (c.name("ta"), c.name("tb"), c.name("tp"));
    mk(c, &tp, 1).await?;
    let (pa, ea) = open(c, &ta, &tp, 2, "a").await?;
    let (pb, eb) = open(c, &tb, &tp, 2, "b").await?;
    let (code, _) = produce_txn(c, &ta, &tp, 0, (pa, ea, 2), 1, "A").await?;
    ensure!(code == 0, "Produce: error {code}");
    let got = finish(c, &tb, &tp, pb, eb, true).await?;
    c.see("commit b", got);
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see(
        "read_committed with a open",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    let got = finish(c, &ta, &tp, pa, ea, false).await?;
    c.see("abort a", got);
    let (vals, _, hw, lso) = read(c, &tp, 0, 1).await?;
    c.see(
        "read_committed after",
        format!("{vals:?} hw={hw} lso={lso}"),
    );
    let p = c.fetch(&tp, 0, 0, 1).await?;
    let aborted: Vec<_> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| format!("pid={} first={}", rp(a.producer_id.0, pa), a.first_offset))
        .collect();
    c.see("aborted_transactions", format!("{aborted:?}"));
    Ok(())
}

async fn fencing_an_offsets_only_transaction(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp, g) = (c.name("t"), c.name("tp"), c.name("g"));
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    let got = add_offsets(c, &t, pid, e, &g).await?;
    c.see("AddOffsets on Empty", got);
    let got = txn_commit(c, &t, (pid, e), &g, &tp, 7, (-1, "")).await?;
    c.see("TxnOffsetCommit", got);
    let r = init_claim(c, &t, (-1, -1), 4).await?;
    c.see("fencing init", rel(r, pid));
    let ae = wait_state(c, &t, "CompleteAbort", Duration::from_secs(10)).await?;
    c.see("abort epoch", ae - e);
    // The abort marker reaches the offsets partition when the abort
    // completes; until then the pending offset is unstable (88).
    let r = c
        .wait_until(Duration::from_secs(10), "a stable offset", async |c| {
            let r = offset_fetch(c, &g, &tp, true).await?;
            Ok((r.1 != 88).then_some(r))
        })
        .await?;
    c.see("offset after the abort", format!("{r:?}"));
    let got = txn_commit(c, &t, (pid, e), &g, &tp, 8, (-1, "")).await?;
    c.see("zombie TxnOffsetCommit", got);
    Ok(())
}

async fn empty_transaction_still_writes_markers(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    ensure!(
        add1(c, &t, pid, e, &tp, 3).await? == 0,
        "AddPartitionsToTxn refused"
    );
    let got = finish(c, &t, &tp, pid, e, true).await?;
    c.see("commit without data", got);
    let (vals, recs, hw, lso) = read(c, &tp, 0, 0).await?;
    c.see("log", format!("{vals:?} hw={hw} lso={lso}"));
    let m: Vec<_> = recs
        .iter()
        .map(|r| {
            format!(
                "pid={} epoch={}",
                rp(r.producer_id, pid),
                r.producer_epoch - e
            )
        })
        .collect();
    c.see("marker producer", format!("{m:?}"));
    Ok(())
}

async fn add_partitions_v4_from_a_client(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    mk(c, &tp, 1).await?;
    let (pid, e) = init(c, &t).await?;
    let absent = c.name("absent");
    let one = |id: &str, pid: i64| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(e)
            .with_verify_only(false)
            .with_topics(topics_of(&[(&tp, 0)]))
    };
    let req = AddPartitionsToTxnRequest::default()
        .with_transactions(vec![one(&t, pid), one(&absent, pid)]);
    let r = c.call(&req, 4).await?;
    let mut per: Vec<_> = r
        .results_by_transaction
        .iter()
        .map(|x| {
            let codes: Vec<_> = x
                .topic_results
                .iter()
                .flat_map(|y| {
                    y.results_by_partition
                        .iter()
                        .map(|p| p.partition_error_code)
                })
                .collect();
            let who = if x.transactional_id.0.as_str() == t {
                "t"
            } else {
                "absent"
            };
            format!("{who}={codes:?}")
        })
        .collect();
    per.sort();
    c.see(
        "v4 add (not verify-only)",
        format!("top={} {per:?}", r.error_code),
    );
    let d = describe(c, &t).await?;
    c.see("state after", format!("{} partitions={}", d.1, d.5.len()));
    Ok(())
}

async fn timeout_clock_starts_at_the_first_add(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, tp) = (c.name("t"), c.name("tp"));
    mk(c, &tp, 1).await?;
    let (code, pid, e) = c.init_producer_with(Some(&t), 1000, (-1, -1), 4).await?;
    ensure!(code == 0, "InitProducerId: error {code}");
    // Time itself is what this probe is about: longer than the timeout in
    // Empty, where no transaction runs and nothing expires.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let d = describe(c, &t).await?;
    c.see("after 2.5 s in Empty", format!("{} epoch={}", d.1, d.3 - e));
    let got = add1(c, &t, pid, e, &tp, 3).await?;
    c.see("add", got);
    let d = describe(c, &t).await?;
    c.see("right after the add", d.1);
    let ae = wait_state(c, &t, "CompleteAbort", Duration::from_secs(20)).await?;
    c.see("then aborted at epoch", ae - e);
    Ok(())
}
