//! What a probe works with: a connection to the broker, names of its own,
//! the observation log, and the requests most probes need (topics, produce,
//! fetch, producer ids) with exact wire versions. Observations must be
//! what any correct broker answers the same way: error codes, counts,
//! offsets relative to the probe's own writes, equalities ("same producer
//! id"), never a raw producer id, node id, timestamp or error message.

use std::fmt::Display;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, FindCoordinatorRequest, InitProducerIdRequest,
    MetadataRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::client::Client;

/// A wire string.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A wire topic name.
pub fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

/// One probe's view of one broker.
#[derive(Debug)]
pub struct Ctx {
    /// The bootstrap address (host:port).
    pub addr: String,
    /// The probe's connection.
    pub client: Client,
    prefix: String,
    seen: Vec<(String, String)>,
}

impl Ctx {
    pub(crate) async fn new(addr: &str, run: u128, probe: &str) -> anyhow::Result<Ctx> {
        Ok(Ctx {
            addr: addr.to_owned(),
            client: Client::connect(addr).await?,
            prefix: format!("wk{run}-{}", probe.to_ascii_lowercase()),
            seen: Vec::new(),
        })
    }

    pub(crate) fn into_seen(self) -> Vec<(String, String)> {
        self.seen
    }

    /// A name (topic, group, transactional id) no other probe or run uses.
    pub fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }

    /// Records an observation; keys should be unique within a probe.
    pub fn see(&mut self, key: impl Into<String>, value: impl Display) {
        self.seen.push((key.into(), value.to_string()));
    }

    /// A second connection to the same broker.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        Client::connect(&self.addr).await
    }

    /// Replaces the probe's connection (after one the broker closed).
    pub async fn reconnect(&mut self) -> anyhow::Result<()> {
        self.client = Client::connect(&self.addr).await?;
        Ok(())
    }

    /// Sends a request on the probe's connection and decodes its response.
    pub async fn call<R: Request>(&mut self, req: &R, version: i16) -> anyhow::Result<R::Response> {
        self.client.call(req, version).await
    }

    /// Creates a topic (CreateTopics v5) and waits until its partitions
    /// have leaders; fails the probe when the broker refuses.
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let code = self.try_create_topic(name, partitions, configs).await?;
        ensure!(code == 0, "creating topic {name}: error {code}");
        self.wait_for_leaders(name, partitions).await
    }

    /// Creates a topic like `create_topic`, then waits until every
    /// partition's leader serves it (ListOffsets v1 answers NONE): a Kafka
    /// broker may list a leader in Metadata a moment before its replica
    /// accepts Produce and Fetch (NOT_LEADER_OR_FOLLOWER meanwhile).
    pub async fn create_ready_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        self.create_topic(name, partitions, configs).await?;
        let req = kafka_protocol::messages::ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![
                kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic(name))
                    .with_partitions(
                        (0..partitions)
                            .map(|p| {
                                kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(-1)
                            })
                            .collect(),
                    ),
            ]);
        self.wait_until(
            Duration::from_secs(30),
            "the topic's partitions served",
            async |c| {
                let r = c.call(&req, 1).await?;
                let ok = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .filter(|p| p.error_code == 0)
                    .count();
                Ok((ok == partitions as usize).then_some(()))
            },
        )
        .await
    }

    /// CreateTopics v5 of one topic; its error code.
    pub async fn try_create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> anyhow::Result<i16> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic(name))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)
                    .with_configs(
                        configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(s(k))
                                    .with_value(Some(s(v)))
                            })
                            .collect(),
                    ),
            ]);
        let r = self.call(&req, 5).await?;
        Ok(r.topics.first().map_or(-1, |t| t.error_code))
    }

    /// Polls Metadata until every partition of `name` has a leader.
    pub async fn wait_for_leaders(&mut self, name: &str, partitions: i32) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let req = MetadataRequest::default()
                .with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(topic(name))),
                ]))
                .with_allow_auto_topic_creation(false);
            let r = self.call(&req, 9).await?;
            let ready = r.topics.first().is_some_and(|t| {
                t.error_code == 0
                    && t.partitions.len() == partitions as usize
                    && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
            });
            if ready {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "topic {name} has no leaders after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Produce of one batch (acks -1) at `version`: the partition's response.
    pub async fn produce(
        &mut self,
        topic_name: &str,
        partition: i32,
        batch: Bytes,
        version: i16,
    ) -> anyhow::Result<PartitionProduceResponse> {
        self.produce_with(topic_name, partition, Some(batch), -1, None, version)
            .await
    }

    /// Produce with every knob: records (None = null), acks, transactional id.
    pub async fn produce_with(
        &mut self,
        topic_name: &str,
        partition: i32,
        records: Option<Bytes>,
        acks: i16,
        transactional_id: Option<&str>,
        version: i16,
    ) -> anyhow::Result<PartitionProduceResponse> {
        let req = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(10_000)
            .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic(topic_name))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(records),
                    ]),
            ]);
        let r = self.call(&req, version).await?;
        r.responses
            .into_iter()
            .next()
            .and_then(|t| t.partition_responses.into_iter().next())
            .context("Produce answered no partition")
    }

    /// Fetch v12 of one partition from `offset` (no wait), read_uncommitted
    /// (isolation 0) or read_committed (1).
    pub async fn fetch(
        &mut self,
        topic_name: &str,
        partition: i32,
        offset: i64,
        isolation: i8,
    ) -> anyhow::Result<PartitionData> {
        self.fetch_with(topic_name, partition, offset, isolation, 1 << 20, 12)
            .await
    }

    /// Fetch with a partition byte limit and version (4..=12: by name).
    pub async fn fetch_with(
        &mut self,
        topic_name: &str,
        partition: i32,
        offset: i64,
        isolation: i8,
        partition_max_bytes: i32,
        version: i16,
    ) -> anyhow::Result<PartitionData> {
        let req = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(64 << 20)
            .with_isolation_level(isolation)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic(topic_name))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(partition_max_bytes),
                    ]),
            ]);
        let r = self.call(&req, version).await?;
        r.responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .context("Fetch answered no partition")
    }

    /// InitProducerId v4 (timeout 60 s, no claim): (error, producer id, epoch).
    pub async fn init_producer(
        &mut self,
        transactional_id: Option<&str>,
    ) -> anyhow::Result<(i16, i64, i16)> {
        self.init_producer_with(transactional_id, 60_000, (-1, -1), 4)
            .await
    }

    /// InitProducerId with every knob.
    pub async fn init_producer_with(
        &mut self,
        transactional_id: Option<&str>,
        timeout_ms: i32,
        claim: (i64, i16),
        version: i16,
    ) -> anyhow::Result<(i16, i64, i16)> {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(claim.0))
            .with_producer_epoch(claim.1);
        let r = self.call(&req, version).await?;
        Ok((r.error_code, r.producer_id.0, r.producer_epoch))
    }

    /// An idempotent producer id: (id, epoch); fails the probe on an error.
    pub async fn idempotent_producer(&mut self) -> anyhow::Result<(i64, i16)> {
        let (code, pid, epoch) = self.init_producer(None).await?;
        ensure!(code == 0, "InitProducerId (idempotent): error {code}");
        Ok((pid, epoch))
    }

    /// Polls `f` every 20 ms until it returns Some, for at most `within`.
    pub async fn wait_until<T>(
        &mut self,
        within: Duration,
        what: &str,
        mut f: impl AsyncFnMut(&mut Ctx) -> anyhow::Result<Option<T>>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = f(self).await? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                bail!("{what}: not reached within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Before the first probe: waits until the broker's group and transaction
/// coordinators answer (a fresh Apache Kafka creates its internal topics on
/// first use), as a client would by asking again.
pub(crate) async fn prepare(addr: &str) -> anyhow::Result<()> {
    let mut c = Client::connect(addr).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    for key_type in [0i8, 1] {
        loop {
            let req = FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![s("wirekit-prepare")]);
            let r = c.call(&req, 4).await?;
            let code = r.coordinators.first().map_or(-1, |x| x.error_code);
            if code == 0 {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "the coordinator (type {key_type}) still answers {code} after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // The transaction coordinator loads its partition after FindCoordinator
    // answers: an InitProducerId may still be refused for a while.
    loop {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s("wirekit-prepare"))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = c.call(&req, 4).await?;
        if r.error_code == 0 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "InitProducerId still answers {} after 60 s",
            r.error_code
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
