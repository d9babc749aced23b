//! The rejoin contract (the seed's shell suite): KIP-360 claims on
//! InitProducerId v3 and v4, half-set and stale claims, the retry of a
//! bump, CONCURRENT_TRANSACTIONS while an ongoing transaction is fenced and
//! aborted, and fencing of the old epoch afterwards. Spec §1 (IP, IT, IF)
//! and §2.4 (ET). Producer ids are observed relative to the first answer.

use std::time::Duration;

use anyhow::ensure;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, ProducerId, TransactionalId,
};

use crate::ctx::{Ctx, s, topic};
use crate::kit::Probe;

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "IP-03" => half_set_claims_are_invalid_request,
        "IT-03" => first_init_and_noclaim_bumps,
        "IT-04" => current_claim_bumps_and_its_retry_is_stable,
        "IT-06" => stale_claims_are_fenced,
        "IF-01" => rejoin_mid_ongoing_answers_concurrent_then_fences,
        "ET-06" => concurrent_transactions_while_markers_complete,
    ]
}

/// An InitProducerId answer with its producer id relative to `base`.
fn rel(got: (i16, i64, i16), base: i64) -> String {
    let pid = match got.1 {
        -1 => "-1".to_owned(),
        p if p == base => "P".to_owned(),
        _ => "other".to_owned(),
    };
    format!("error={} pid={pid} epoch={}", got.0, got.2)
}

async fn init(
    c: &mut Ctx,
    t: &str,
    claim: (i64, i16),
    version: i16,
) -> anyhow::Result<(i16, i64, i16)> {
    c.init_producer_with(Some(t), 60_000, claim, version).await
}

/// AddPartitionsToTxn v3 of partition 0 of `tp`: the partition's error.
pub async fn add(c: &mut Ctx, txn: &str, pid: i64, epoch: i16, tp: &str) -> anyhow::Result<i16> {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(topic(tp))
                .with_partitions(vec![0]),
        ]);
    let r = c.call(&req, 3).await?;
    r.results_by_topic_v3_and_below
        .first()
        .and_then(|t| t.results_by_partition.first())
        .map(|p| p.partition_error_code)
        .ok_or_else(|| anyhow::anyhow!("AddPartitionsToTxn answered no partition"))
}

/// EndTxn v3: its error.
pub async fn end(
    c: &mut Ctx,
    txn: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> anyhow::Result<i16> {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    Ok(c.call(&req, 3).await?.error_code)
}

async fn half_set_claims_are_invalid_request(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let r = init(c, &t, (1000, -1), 4).await?;
    c.see(
        "claim (1000,-1)",
        format!("error={} pid={} epoch={}", r.0, r.1, r.2),
    );
    let r = init(c, &t, (-1, 3), 4).await?;
    c.see("claim (-1,3)", r.0);
    let r = c.init_producer_with(None, 60_000, (-1, 3), 4).await?;
    c.see("idempotent claim (-1,3)", r.0);
    Ok(())
}

async fn first_init_and_noclaim_bumps(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let first = init(c, &t, (-1, -1), 4).await?;
    c.see("first", format!("error={} epoch={}", first.0, first.2));
    let r = init(c, &t, (-1, -1), 4).await?;
    c.see("noclaim v4", rel(r, first.1));
    let r = init(c, &t, (-1, -1), 2).await?;
    c.see("noclaim v2", rel(r, first.1));
    Ok(())
}

async fn current_claim_bumps_and_its_retry_is_stable(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (_, pid, _) = init(c, &t, (-1, -1), 4).await?;
    let r = init(c, &t, (pid, 0), 4).await?;
    c.see("claim (P,0)", rel(r, pid));
    let r = init(c, &t, (pid, 0), 4).await?;
    c.see("retry claim (P,0)", rel(r, pid));
    let r = init(c, &t, (pid, 1), 3).await?;
    c.see("claim (P,1) v3", rel(r, pid));
    Ok(())
}

async fn stale_claims_are_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let (_, pid, _) = init(c, &t, (-1, -1), 4).await?;
    init(c, &t, (-1, -1), 4).await?;
    init(c, &t, (-1, -1), 4).await?;
    let r = init(c, &t, (pid, 0), 4).await?;
    c.see("stale claim v4", rel(r, pid));
    let r = init(c, &t, (pid, 0), 3).await?;
    c.see("stale claim v3", rel(r, pid));
    let r = init(c, &t, (pid, 9), 4).await?;
    c.see("future epoch", rel(r, pid));
    let r = init(c, &t, (pid + 7_777_777, 2), 4).await?;
    c.see("unrelated pid", rel(r, pid));
    Ok(())
}

async fn rejoin_mid_ongoing_answers_concurrent_then_fences(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    c.create_topic(&tp, 1, &[]).await?;
    let (_, pid, epoch) = init(c, &t, (-1, -1), 4).await?;
    let code = add(c, &t, pid, epoch, &tp).await?;
    ensure!(code == 0, "AddPartitionsToTxn: error {code}");
    let r = init(c, &t, (-1, -1), 4).await?;
    c.see("rejoin mid-Ongoing", rel(r, pid));
    let next = c
        .wait_until(Duration::from_secs(10), "the fence's abort", async |c| {
            let r = init(c, &t, (-1, -1), 4).await?;
            Ok((r.0 != 51).then_some(r))
        })
        .await?;
    c.see(
        "retry after the abort",
        rel((next.0, next.1, next.2 - epoch), pid),
    );
    let code = add(c, &t, pid, epoch, &tp).await?;
    c.see("old epoch AddPartitionsToTxn", code);
    let code = end(c, &t, pid, epoch, true).await?;
    c.see("old epoch EndTxn", code);
    let code = end(c, &t, pid, next.2, true).await?;
    c.see("EndTxn on Empty", code);
    Ok(())
}

async fn concurrent_transactions_while_markers_complete(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let tp = c.name("tp");
    c.create_topic(&tp, 1, &[]).await?;
    let (_, pid, epoch) = init(c, &t, (-1, -1), 4).await?;
    let code = add(c, &t, pid, epoch, &tp).await?;
    ensure!(code == 0, "AddPartitionsToTxn: error {code}");
    let code = end(c, &t, pid, epoch, true).await?;
    c.see("EndTxn COMMIT", code);
    // Until the markers land the entry is PrepareCommit: 51, then NONE (a retry).
    let last = c
        .wait_until(
            Duration::from_secs(10),
            "the commit's completion",
            async |c| {
                let code = end(c, &t, pid, epoch, true).await?;
                Ok((code != 51).then_some(code))
            },
        )
        .await?;
    c.see("EndTxn COMMIT retried until not 51", last);
    Ok(())
}
