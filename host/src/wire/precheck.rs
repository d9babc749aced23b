//! A walk over a request body, in exactly the codec's field order, that
//! refuses an array whose declared count cannot fit in the bytes left.
//!
//! Why: kafka-protocol 0.18 calls `Vec::with_capacity(count)` with the
//! count read off the wire before decoding a single element. A 12-byte
//! frame declaring 2^31 topics asks for hundreds of GiB; the allocation
//! fails and Rust aborts the process (allocation failure is not a panic, so
//! `catch_unwind` cannot help). Found by `fuzz/` (target `request_decode`).
//!
//! The walk mirrors the generated decoders of the APIs in
//! [`super::VERSIONS`], field by field and version by version, including the
//! known tagged fields the codec decodes in place. It never refuses what the
//! codec would decode: where it is unsure it errs on the lenient side (no
//! UTF-8 or value checks), and its only extra rule is
//! `count <= remaining / min_element_size`, which every real array meets.
//! After it passes, each `with_capacity` is bounded by the frame size.

use kafka_protocol::messages::ApiKey;

type Walked = Result<(), String>;

struct Walk<'a> {
    b: &'a [u8],
    flexible: bool,
}

impl<'a> Walk<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err(format!("needs {n} bytes, {} left", self.b.len()));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn skip(&mut self, n: usize) -> Walked {
        self.take(n).map(|_| ())
    }

    fn i16(&mut self) -> Result<i16, String> {
        let s = self.take(2)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// The codec's unsigned varint: at most 5 bytes, excess bits dropped.
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = u32::from(self.take(1)?[0]);
            value |= (b & 0x7f) << (i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// A (nullable) string: i16 length, or a compact length + 1.
    fn string(&mut self) -> Walked {
        let len = if self.flexible {
            match self.uvarint()? {
                0 => return Ok(()),
                n => (n - 1) as usize,
            }
        } else {
            match self.i16()? {
                -1 => return Ok(()),
                n if n < 0 => return Err(format!("string length {n}")),
                n => n as usize,
            }
        };
        self.skip(len)
    }

    /// (Nullable) bytes: i32 length, or a compact length + 1.
    fn bytes(&mut self) -> Walked {
        let len = if self.flexible {
            match self.uvarint()? {
                0 => return Ok(()),
                n => (n - 1) as usize,
            }
        } else {
            match self.i32()? {
                -1 => return Ok(()),
                n if n < 0 => return Err(format!("bytes length {n}")),
                n => n as usize,
            }
        };
        self.skip(len)
    }

    /// A (nullable) array whose elements take at least `min` bytes each.
    fn array(&mut self, min: usize, mut each: impl FnMut(&mut Self) -> Walked) -> Walked {
        let n = if self.flexible {
            match self.uvarint()? {
                0 => return Ok(()),
                n => (n - 1) as usize,
            }
        } else {
            match self.i32()? {
                -1 => return Ok(()),
                n if n < 0 => return Err(format!("array length {n}")),
                n => n as usize,
            }
        };
        if n > self.b.len() / min.max(1) {
            return Err(format!(
                "array of {n} elements cannot fit in {} bytes",
                self.b.len()
            ));
        }
        for _ in 0..n {
            each(self)?;
        }
        Ok(())
    }

    /// A flexible struct's tagged fields. `known(self, tag)` walks a tag the
    /// codec decodes in place (ignoring its size, as the codec does) and
    /// returns false for the others, which are skipped by size.
    fn tags(&mut self, mut known: impl FnMut(&mut Self, u32) -> Result<bool, String>) -> Walked {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            if !known(self, tag)? {
                self.skip(size)?;
            }
        }
        Ok(())
    }

    fn no_known_tags(&mut self) -> Walked {
        self.tags(|_, _| Ok(false))
    }
}

/// Walks the body of `api_key` v`version` (everything after the header).
/// Ok means every array count in it is plausible; APIs without arrays
/// always pass.
pub fn check(api_key: ApiKey, version: i16, body: &[u8]) -> Walked {
    let v = version;
    let flexible_from = match api_key {
        ApiKey::Produce => 9,
        ApiKey::Fetch => 12,
        ApiKey::ListOffsets => 6,
        ApiKey::Metadata => 9,
        ApiKey::CreateTopics => 5,
        ApiKey::DeleteTopics => 4,
        ApiKey::DeleteRecords => 2,
        ApiKey::DescribeConfigs => 4,
        // ApiVersions, InitProducerId and anything else: no arrays.
        _ => return Ok(()),
    };
    let flexible = v >= flexible_from;
    let mut w = Walk { b: body, flexible };
    // Smallest wire size of a string, an array and a tag section.
    let (s, a, t) = if flexible { (1, 1, 1) } else { (2, 4, 0) };
    let w = &mut w;
    match api_key {
        ApiKey::Produce => {
            w.string()?; // transactional_id
            w.skip(2 + 4)?; // acks, timeout_ms
            let topic_min = if v >= 13 { 16 } else { s } + a + t;
            w.array(topic_min, |w| {
                if v <= 12 {
                    w.string()?; // name
                } else {
                    w.skip(16)?; // topic_id
                }
                w.array(4 + a + t, |w| {
                    w.skip(4)?; // index
                    w.bytes()?; // records
                    w.no_known_tags()
                })?;
                w.no_known_tags()
            })?;
            w.no_known_tags()
        }
        ApiKey::Fetch => {
            if v <= 14 {
                w.skip(4)?; // replica_id
            }
            w.skip(4 + 4 + 4 + 1)?; // max_wait_ms, min_bytes, max_bytes, isolation_level
            if v >= 7 {
                w.skip(4 + 4)?; // session_id, session_epoch
            }
            let topic_min = if v >= 13 { 16 } else { s } + a + t;
            w.array(topic_min, |w| {
                if v <= 12 {
                    w.string()?; // topic
                }
                if v >= 13 {
                    w.skip(16)?; // topic_id
                }
                w.array(4 + 8 + 4 + t, |w| {
                    w.skip(4)?; // partition
                    if v >= 9 {
                        w.skip(4)?; // current_leader_epoch
                    }
                    w.skip(8)?; // fetch_offset
                    if v >= 12 {
                        w.skip(4)?; // last_fetched_epoch
                    }
                    if v >= 5 {
                        w.skip(8)?; // log_start_offset
                    }
                    w.skip(4)?; // partition_max_bytes
                    w.tags(|w, tag| match tag {
                        0 if v >= 17 => w.skip(16).map(|_| true), // replica_directory_id
                        1 if v >= 18 => w.skip(8).map(|_| true),  // high_watermark
                        0 | 1 => Err(format!("tag {tag} is not valid for v{v}")),
                        _ => Ok(false),
                    })
                })?;
                w.no_known_tags()
            })?;
            if v >= 7 {
                let forgotten_min = if v >= 13 { 16 } else if v <= 12 { s } else { 0 } + a + t;
                w.array(forgotten_min, |w| {
                    if v <= 12 {
                        w.string()?; // topic
                    }
                    if v >= 13 {
                        w.skip(16)?; // topic_id
                    }
                    w.array(4, |w| w.skip(4))?; // partitions
                    w.no_known_tags()
                })?;
            }
            if v >= 11 {
                w.string()?; // rack_id
            }
            w.tags(|w, tag| match tag {
                0 => w.string().map(|_| true), // cluster_id
                1 if v >= 15 => {
                    // replica_state
                    w.skip(4 + 8)?;
                    w.no_known_tags().map(|_| true)
                }
                1 => Err(format!("tag 1 is not valid for v{v}")),
                _ => Ok(false),
            })
        }
        ApiKey::ListOffsets => {
            w.skip(4)?; // replica_id
            if v >= 2 {
                w.skip(1)?; // isolation_level
            }
            w.array(s + a + t, |w| {
                w.string()?; // name
                w.array(4 + 8 + t, |w| {
                    w.skip(4)?; // partition_index
                    if v >= 4 {
                        w.skip(4)?; // current_leader_epoch
                    }
                    w.skip(8)?; // timestamp
                    w.no_known_tags()
                })?;
                w.no_known_tags()
            })?;
            if v >= 10 {
                w.skip(4)?; // timeout_ms
            }
            w.no_known_tags()
        }
        ApiKey::Metadata => {
            let topic_min = if v >= 10 { 16 } else { 0 } + s + t;
            w.array(topic_min, |w| {
                if v >= 10 {
                    w.skip(16)?; // topic_id
                }
                w.string()?; // name
                w.no_known_tags()
            })?;
            // The booleans after the topics hold no arrays.
            Ok(())
        }
        ApiKey::CreateTopics => {
            w.array(s + 4 + 2 + a + a + t, |w| {
                w.string()?; // name
                w.skip(4 + 2)?; // num_partitions, replication_factor
                w.array(4 + a + t, |w| {
                    w.skip(4)?; // partition_index
                    w.array(4, |w| w.skip(4))?; // broker_ids
                    w.no_known_tags()
                })?;
                w.array(s + s + t, |w| {
                    w.string()?; // name
                    w.string()?; // value
                    w.no_known_tags()
                })?;
                w.no_known_tags()
            })?;
            Ok(())
        }
        ApiKey::DeleteTopics => {
            if v >= 6 {
                w.array(s + 16 + t, |w| {
                    w.string()?; // name
                    w.skip(16)?; // topic_id
                    w.no_known_tags()
                })?;
            } else {
                w.array(s, |w| w.string())?; // topic_names
            }
            Ok(())
        }
        ApiKey::DeleteRecords => {
            w.array(s + a + t, |w| {
                w.string()?; // name
                w.array(4 + 8 + t, |w| {
                    w.skip(4 + 8)?; // partition_index, offset
                    w.no_known_tags()
                })?;
                w.no_known_tags()
            })?;
            Ok(())
        }
        ApiKey::DescribeConfigs => {
            w.array(1 + s + a + t, |w| {
                w.skip(1)?; // resource_type
                w.string()?; // resource_name
                w.array(s, |w| w.string())?; // configuration_keys
                w.no_known_tags()
            })?;
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn name(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    /// A request of `key` v`v` with two elements in every array and every
    /// optional field the version has set, so a field the walk misses or adds
    /// shifts what it reads. (The codec refuses to encode a field its
    /// version lacks, hence the version checks.)
    fn sample(key: ApiKey, v: i16) -> RequestKind {
        match key {
            ApiKey::Produce => RequestKind::Produce(
                ProduceRequest::default()
                    .with_transactional_id(Some(name("tx").into()))
                    .with_topic_data(vec![
                        produce_request::TopicProduceData::default()
                            .with_name(name("t").into())
                            .with_partition_data(vec![
                                produce_request::PartitionProduceData::default()
                                    .with_records(Some(bytes::Bytes::from_static(b"abc"))),
                                produce_request::PartitionProduceData::default(),
                            ]),
                        produce_request::TopicProduceData::default(),
                    ]),
            ),
            ApiKey::Fetch => {
                let topic = |t: &'static str| {
                    let f = fetch_request::FetchTopic::default().with_partitions(vec![
                        fetch_request::FetchPartition::default().with_fetch_offset(7),
                        fetch_request::FetchPartition::default(),
                    ]);
                    if v <= 12 { f.with_topic(name(t).into()) } else { f }
                };
                let mut r = FetchRequest::default().with_topics(vec![topic("t"), topic("u")]);
                if v >= 7 {
                    let forgotten = |t: &'static str| {
                        let f = fetch_request::ForgottenTopic::default().with_partitions(vec![1, 2]);
                        if v <= 12 { f.with_topic(name(t).into()) } else { f }
                    };
                    r = r.with_forgotten_topics_data(vec![forgotten("f"), forgotten("g")]);
                }
                if v >= 11 {
                    r = r.with_rack_id(name("r"));
                }
                if v >= 12 {
                    r = r.with_cluster_id(Some(name("c")));
                }
                if v >= 15 {
                    r = r.with_replica_state(
                        fetch_request::ReplicaState::default().with_replica_epoch(3),
                    );
                }
                RequestKind::Fetch(r)
            }
            ApiKey::ListOffsets => RequestKind::ListOffsets(
                ListOffsetsRequest::default().with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(name("t").into())
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default(),
                            list_offsets_request::ListOffsetsPartition::default(),
                        ]),
                    list_offsets_request::ListOffsetsTopic::default(),
                ]),
            ),
            ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default().with_topics(
                Some(vec![
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(name("t").into())),
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(name("u").into())),
                ]),
            )),
            ApiKey::CreateTopics => RequestKind::CreateTopics(
                CreateTopicsRequest::default().with_topics(vec![
                    create_topics_request::CreatableTopic::default()
                        .with_name(name("t").into())
                        .with_assignments(vec![
                            create_topics_request::CreatableReplicaAssignment::default()
                                .with_broker_ids(vec![1.into(), 2.into()]),
                            create_topics_request::CreatableReplicaAssignment::default(),
                        ])
                        .with_configs(vec![
                            create_topics_request::CreatableTopicConfig::default()
                                .with_name(name("k"))
                                .with_value(Some(name("v"))),
                            create_topics_request::CreatableTopicConfig::default(),
                        ]),
                    create_topics_request::CreatableTopic::default(),
                ]),
            ),
            ApiKey::DeleteTopics if v >= 6 => RequestKind::DeleteTopics(
                DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(name("a").into())),
                    delete_topics_request::DeleteTopicState::default(),
                ]),
            ),
            ApiKey::DeleteTopics => RequestKind::DeleteTopics(
                DeleteTopicsRequest::default()
                    .with_topic_names(vec![name("a").into(), name("b").into()]),
            ),
            ApiKey::DeleteRecords => RequestKind::DeleteRecords(
                DeleteRecordsRequest::default().with_topics(vec![
                    delete_records_request::DeleteRecordsTopic::default()
                        .with_name(name("t").into())
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default(),
                            delete_records_request::DeleteRecordsPartition::default(),
                        ]),
                    delete_records_request::DeleteRecordsTopic::default(),
                ]),
            ),
            ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
                DescribeConfigsRequest::default().with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_name(name("t"))
                        .with_configuration_keys(Some(vec![name("a"), name("b")])),
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_configuration_keys(None),
                ]),
            ),
            ApiKey::InitProducerId => {
                RequestKind::InitProducerId(InitProducerIdRequest::default())
            }
            _ => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        }
    }

    /// Bytes the walk leaves unread on purpose: fixed fields after the last
    /// array, which cannot hold one.
    fn unread_tail(key: ApiKey, v: i16) -> usize {
        let tags = |from: i16| usize::from(v >= from);
        match key {
            ApiKey::Metadata => {
                usize::from(v >= 4)
                    + usize::from((8..=10).contains(&v))
                    + usize::from(v >= 8)
                    + tags(9)
            }
            ApiKey::CreateTopics => 4 + 1 + tags(5),
            ApiKey::DeleteTopics => 4 + tags(4),
            ApiKey::DeleteRecords => 4 + tags(2),
            ApiKey::DescribeConfigs => 1 + usize::from(v >= 3) + tags(4),
            _ => 0,
        }
    }

    #[test]
    fn every_supported_version_of_a_real_request_walks_to_where_it_should_end() {
        for &(key, lo, hi) in super::super::VERSIONS {
            if matches!(key, ApiKey::ApiVersions | ApiKey::InitProducerId) {
                continue;
            }
            for v in lo..=hi {
                let mut out = BytesMut::new();
                sample(key, v).encode(&mut out, v).expect("encodes");
                let body = &out[..];
                assert_eq!(check(key, v, body), Ok(()), "{key:?} v{v}");
                // The shortest prefix the walk accepts is where it stopped
                // reading: every byte before it was read in the codec's order.
                let mut end = body.len();
                while end > 0 && check(key, v, &body[..end - 1]).is_ok() {
                    end -= 1;
                }
                assert_eq!(
                    body.len() - end,
                    unread_tail(key, v),
                    "{key:?} v{v}: the walk stopped at byte {end} of {}",
                    body.len()
                );
            }
        }
    }

    #[test]
    fn a_huge_array_count_is_refused_before_the_codec_sees_it() {
        // Metadata v1 declaring 2^31-1 topics in a 4-byte body.
        assert!(check(ApiKey::Metadata, 1, &i32::MAX.to_be_bytes()).is_err());
        // Produce v9 (flexible): null transactional id, acks, timeout, then a
        // compact count of 2^32-2 topics.
        let body = [0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(check(ApiKey::Produce, 9, &body).is_err());
        // A null array is fine.
        assert_eq!(check(ApiKey::Metadata, 1, &(-1i32).to_be_bytes()), Ok(()));
    }
}
