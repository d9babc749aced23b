//! Record batches with exact fields, written and read through
//! kafka-protocol's codecs, for the probes that produce and fetch.

use anyhow::Context as _;
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One batch to write: its records' keys and values and the producer fields.
#[derive(Debug, Clone)]
pub struct Batch {
    #[allow(clippy::type_complexity)]
    pub records: Vec<(Option<Vec<u8>>, Option<Vec<u8>>)>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub compression: Compression,
    /// The first record's timestamp (each next record's is one more).
    pub timestamp: i64,
}

impl Batch {
    /// `n` records `v0..` without keys, no producer, no compression.
    pub fn values(n: usize) -> Batch {
        Batch {
            records: (0..n)
                .map(|i| (None, Some(format!("v{i}").into_bytes())))
                .collect(),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            compression: Compression::None,
            timestamp: 1_700_000_000_000,
        }
    }

    /// Keyed records.
    pub fn keyed(pairs: &[(&str, Option<&str>)]) -> Batch {
        let mut b = Batch::values(0);
        b.records = pairs
            .iter()
            .map(|(k, v)| {
                (
                    Some(k.as_bytes().to_vec()),
                    v.map(|v| v.as_bytes().to_vec()),
                )
            })
            .collect();
        b
    }

    /// The same records from an idempotent producer at `sequence`.
    pub fn idempotent(mut self, pid: i64, epoch: i16, sequence: i32) -> Batch {
        self.producer_id = pid;
        self.producer_epoch = epoch;
        self.base_sequence = sequence;
        self
    }

    /// The same records in a transaction.
    pub fn transactional(mut self, pid: i64, epoch: i16, sequence: i32) -> Batch {
        self.transactional = true;
        self.idempotent(pid, epoch, sequence)
    }

    pub fn compressed(mut self, c: Compression) -> Batch {
        self.compression = c;
        self
    }

    pub fn at(mut self, timestamp: i64) -> Batch {
        self.timestamp = timestamp;
        self
    }

    /// The batch's bytes (magic 2).
    pub fn encode(&self) -> anyhow::Result<Bytes> {
        let records: Vec<Record> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, (k, v))| Record {
                transactional: self.transactional,
                control: false,
                partition_leader_epoch: -1,
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // Without a producer the batch's base sequence is -1; the
                // codec keeps records in one batch only while offset minus
                // sequence stays constant, so count on from -1.
                sequence: if self.base_sequence < 0 {
                    i as i32 - 1
                } else {
                    self.base_sequence + i as i32
                },
                timestamp: self.timestamp + i as i64,
                key: k.clone().map(Bytes::from),
                value: v.clone().map(Bytes::from),
                headers: IndexMap::new(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .context("encoding a batch")?;
        Ok(buf.freeze())
    }
}

/// Every record of a Fetch answer's record bytes (control records included).
pub fn decode(records: Option<&Bytes>) -> anyhow::Result<Vec<Record>> {
    let Some(bytes) = records else {
        return Ok(Vec::new());
    };
    let mut buf = bytes.clone();
    let mut out = Vec::new();
    // A fetch may end in a partial batch: decode whole batches only.
    while buf.len() >= 12 {
        let size = i32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
        let Ok(size) = usize::try_from(size) else {
            break;
        };
        if buf.len() < 12 + size {
            break;
        }
        let mut one = buf.split_to(12 + size);
        let set = RecordBatchDecoder::decode(&mut one).context("decoding a fetched batch")?;
        out.extend(set.records);
    }
    Ok(out)
}

/// The data records' values as text, in offset order.
pub fn values_of(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| !r.control)
        .map(|r| {
            r.value
                .as_ref()
                .map_or("null".into(), |v| String::from_utf8_lossy(v).into_owned())
        })
        .collect()
}
