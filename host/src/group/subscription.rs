//! The topics a consumer-protocol member subscribes to, read from its
//! JoinGroup metadata (ConsumerProtocolSubscription). Only the v0 prefix
//! every version shares is read (version, then the topic array), as Kafka
//! does, so future versions parse too.
//!
//! Written by hand rather than with kafka-protocol's decoder: that decoder
//! reserves capacity for the array count read off the wire, and a client's
//! metadata could declare 2^31 topics and abort the process.

use std::collections::BTreeSet;

/// The subscribed topics, or None if the metadata is not a consumer
/// subscription.
pub fn topics(metadata: &[u8]) -> Option<BTreeSet<String>> {
    let mut b = metadata;
    let version = i16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?);
    if count < 0 {
        return None;
    }
    let mut out = BTreeSet::new();
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
        if len < 0 {
            return None;
        }
        let s = take(&mut b, len as usize)?;
        out.insert(String::from_utf8(s.to_vec()).ok()?);
    }
    Some(out)
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn reads_the_topics_of_every_subscription_version() {
        for v in 0..=3i16 {
            let sub = ConsumerProtocolSubscription::default().with_topics(vec![
                StrBytes::from_static_str("b"),
                StrBytes::from_static_str("a"),
            ]);
            let mut buf = bytes::BytesMut::new();
            buf.extend_from_slice(&v.to_be_bytes());
            sub.encode(&mut buf, v).expect("encodes");
            let got = topics(&buf).expect("parses");
            assert_eq!(got.into_iter().collect::<Vec<_>>(), vec!["a", "b"]);
        }
    }

    #[test]
    fn a_huge_declared_count_or_garbage_is_none_not_an_allocation() {
        let mut b = vec![0, 0];
        b.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(topics(&b), None);
        assert_eq!(topics(b"x"), None);
        assert_eq!(topics(&[0xff, 0xff, 0, 0, 0, 0]), None);
    }
}
