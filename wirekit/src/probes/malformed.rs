//! Malformed and unusual requests on the wire: frames too short, size
//! prefixes negative or huge, unknown API keys and versions, bodies cut
//! short or followed by garbage, nulls and lengths a schema forbids, and
//! the framing contract (correlation ids echoed exactly, pipelined requests
//! answered in order, SaslHandshake on a plain listener). Each answer is
//! observed as "closed" (the broker closed the connection), "silent"
//! (nothing within 3 s) or what the answer says; the probe reconnects after.

use std::time::Duration;

use anyhow::Context as _;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsResponse, CreateTopicsResponse, MetadataResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::Decodable;

use crate::client::FrameRead;
use crate::ctx::{Ctx, s};
use crate::kit::Probe;

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "MF-01" => frame_shorter_than_a_header,
        "MF-02" => zero_length_frame,
        "MF-03" => negative_size_prefix,
        "MF-04" => huge_size_prefix,
        "MF-05" => unknown_api_key,
        "MF-06" => api_versions_at_an_unsupported_version_lists_the_ranges,
        "MF-07" => metadata_at_an_unsupported_version,
        "MF-08" => truncated_body,
        "MF-09" => trailing_bytes_after_a_valid_body,
        "MF-10" => null_topic_name_in_create_topics,
        "MF-11" => negative_array_length_other_than_minus_one,
        "MF-12" => string_length_beyond_the_frame,
        "MF-13" => correlation_ids_echoed_exactly,
        "MF-14" => pipelined_requests_answered_in_order,
        "MF-15" => sasl_handshake_on_a_plain_listener,
        "MF-16" => null_client_id_is_accepted,
    ]
}

const WAIT: Duration = Duration::from_secs(3);

/// A request header v1 (v2 with `flexible`: an empty tagged-field section).
fn header(key: i16, version: i16, correlation: i32, flexible: bool) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i16(key);
    b.put_i16(version);
    b.put_i32(correlation);
    let id = b"wirekit";
    b.put_i16(id.len() as i16);
    b.put_slice(id);
    if flexible {
        b.put_u8(0);
    }
    b
}

/// A non-flexible string.
fn put_str(b: &mut BytesMut, v: &str) {
    b.put_i16(v.len() as i16);
    b.put_slice(v.as_bytes());
}

/// Metadata v1 of the given topics (None: all): header and body.
fn metadata_v1(correlation: i32, topics: Option<&[&str]>) -> BytesMut {
    let mut b = header(3, 1, correlation, false);
    match topics {
        None => b.put_i32(-1),
        Some(ts) => {
            b.put_i32(ts.len() as i32);
            for t in ts {
                put_str(&mut b, t);
            }
        }
    }
    b
}

/// What came back for a request sent with `correlation`: "closed",
/// "silent", or "answered" with whether the correlation id was echoed and
/// what `body` makes of the rest (a response header v0 is assumed).
async fn outcome(
    c: &mut Ctx,
    correlation: i32,
    body: impl Fn(Bytes) -> String,
) -> anyhow::Result<String> {
    let got = c.client.read_frame_within(WAIT).await;
    let out = match got {
        FrameRead::Closed => "closed".to_owned(),
        FrameRead::Silent => "silent".to_owned(),
        FrameRead::Frame(mut f) => {
            if f.remaining() < 4 {
                "answered a frame shorter than a header".to_owned()
            } else {
                let id = f.get_i32();
                format!(
                    "answered (correlation echoed {}) {}",
                    id == correlation,
                    body(f)
                )
            }
        }
    };
    Ok(out)
}

/// No reading of the answer's body.
fn nothing(_: Bytes) -> String {
    String::new()
}

/// Sends one frame and observes what comes back; reconnects when silent
/// too, so the next step starts on a clean connection.
async fn send_and_see(
    c: &mut Ctx,
    what: &str,
    frame: &[u8],
    correlation: i32,
    body: impl Fn(Bytes) -> String,
) -> anyhow::Result<()> {
    let out = match c.client.send_raw(frame).await {
        Err(_) => "closed".to_owned(),
        Ok(()) => outcome(c, correlation, body).await?,
    };
    c.see(what, out.trim_end());
    c.reconnect().await?;
    Ok(())
}

/// After a malformed request: does a fresh connection still work?
async fn still_serves(c: &mut Ctx) -> anyhow::Result<()> {
    c.reconnect().await?;
    let f = header(18, 0, 7, false);
    c.client.send_raw(&f).await?;
    let ok = matches!(c.client.read_frame_within(WAIT).await, FrameRead::Frame(_));
    c.see("a new connection is served", ok);
    Ok(())
}

fn metadata_v1_body(f: Bytes) -> String {
    let mut f = f;
    match MetadataResponse::decode(&mut f, 1) {
        // Several topics: the broker read the request as "all topics".
        Ok(r) if r.topics.len() > 1 => "all topics".to_owned(),
        Ok(r) => format!(
            "topics={:?}",
            r.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
        ),
        Err(_) => "undecodable".to_owned(),
    }
}

async fn frame_shorter_than_a_header(c: &mut Ctx) -> anyhow::Result<()> {
    send_and_see(c, "2-byte frame", &[0, 18], 0, nothing).await?;
    send_and_see(c, "7-byte frame", &[0, 18, 0, 0, 0, 0, 1], 1, nothing).await?;
    still_serves(c).await
}

async fn zero_length_frame(c: &mut Ctx) -> anyhow::Result<()> {
    send_and_see(c, "0-byte frame", &[], 0, nothing).await?;
    still_serves(c).await
}

async fn negative_size_prefix(c: &mut Ctx) -> anyhow::Result<()> {
    let out = match c
        .client
        .write_unframed(&[0xff, 0xff, 0xff, 0xfe, 0, 18, 0, 0])
        .await
    {
        Err(_) => "closed".to_owned(),
        Ok(()) => outcome(c, 0, nothing).await?,
    };
    c.see("size -2", out.trim_end());
    still_serves(c).await
}

async fn huge_size_prefix(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = vec![0x7f, 0xff, 0xff, 0xff];
    f.extend_from_slice(&header(18, 0, 1, false));
    let out = match c.client.write_unframed(&f).await {
        Err(_) => "closed".to_owned(),
        Ok(()) => outcome(c, 1, nothing).await?,
    };
    c.see("size 2^31-1", out.trim_end());
    still_serves(c).await
}

async fn unknown_api_key(c: &mut Ctx) -> anyhow::Result<()> {
    send_and_see(c, "key 9999 v0", &header(9999, 0, 5, false), 5, nothing).await?;
    send_and_see(c, "key -1 v0", &header(-1, 0, 6, false), 6, nothing).await?;
    still_serves(c).await
}

async fn api_versions_at_an_unsupported_version_lists_the_ranges(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let body = |mut f: Bytes| match ApiVersionsResponse::decode(&mut f, 0) {
        Ok(r) => {
            let av = r.api_keys.iter().find(|k| k.api_key == 18);
            format!(
                "error={} keys listed={} ApiVersions range listed={}",
                r.error_code,
                !r.api_keys.is_empty(),
                av.is_some_and(|k| k.min_version == 0 && k.max_version >= 3)
            )
        }
        Err(_) => "undecodable as v0".to_owned(),
    };
    // v99 with a flexible header and no body, as a newer client sends it.
    send_and_see(c, "v99", &header(18, 99, 11, true), 11, body).await?;
    // v4.. with a v3 body (client software name and version).
    let mut f = header(18, 127, 12, true);
    f.put_u8(8);
    f.put_slice(b"wirekit");
    f.put_u8(2);
    f.put_slice(b"1");
    f.put_u8(0);
    send_and_see(c, "v127 with a v3 body", &f, 12, body).await?;
    Ok(())
}

async fn metadata_at_an_unsupported_version(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = header(3, 99, 21, true);
    f.put_u8(1); // compact array: no topics
    f.put_u8(0); // allow auto creation false
    f.put_u8(0); // tagged fields
    send_and_see(c, "Metadata v99", &f, 21, nothing).await?;
    let mut f = header(3, -1, 22, false);
    f.put_i32(0);
    send_and_see(c, "Metadata v-1", &f, 22, nothing).await?;
    still_serves(c).await
}

async fn truncated_body(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let full = metadata_v1(31, Some(&[&t]));
    let cut = &full[..full.len() - 3];
    send_and_see(
        c,
        "Metadata v1 cut 3 bytes short",
        cut,
        31,
        metadata_v1_body,
    )
    .await?;
    let mut f = header(19, 4, 32, false);
    f.put_i32(1);
    put_str(&mut f, &t);
    // num_partitions and the rest missing
    send_and_see(c, "CreateTopics v4 cut after the name", &f, 32, nothing).await?;
    let (code, _) = {
        let req = kafka_protocol::messages::MetadataRequest::default()
            .with_topics(Some(vec![
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(crate::ctx::topic(&t))),
            ]))
            .with_allow_auto_topic_creation(false);
        let r = c.call(&req, 9).await?;
        (r.topics.first().map_or(-1, |x| x.error_code), ())
    };
    c.see("topic not created", code);
    Ok(())
}

async fn trailing_bytes_after_a_valid_body(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = metadata_v1(41, Some(&[]));
    f.put_slice(b"garbage");
    send_and_see(c, "Metadata v1 + 7 bytes", &f, 41, metadata_v1_body).await?;
    let mut f = header(18, 0, 42, false);
    f.put_slice(b"garbage");
    send_and_see(c, "ApiVersions v0 + 7 bytes", &f, 42, |mut b| {
        ApiVersionsResponse::decode(&mut b, 0).map_or("undecodable".to_owned(), |r| {
            format!("error={}", r.error_code)
        })
    })
    .await?;
    still_serves(c).await
}

async fn null_topic_name_in_create_topics(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = header(19, 4, 51, false);
    f.put_i32(1);
    f.put_i16(-1); // null name
    f.put_i32(1); // partitions
    f.put_i16(1); // replication factor
    f.put_i32(0); // assignments
    f.put_i32(0); // configs
    f.put_i32(10_000); // timeout
    f.put_u8(0); // validate_only
    send_and_see(c, "CreateTopics v4 null name", &f, 51, |mut b| {
        CreateTopicsResponse::decode(&mut b, 4).map_or("undecodable".to_owned(), |r| {
            format!(
                "codes={:?}",
                r.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
            )
        })
    })
    .await?;
    still_serves(c).await
}

async fn negative_array_length_other_than_minus_one(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = header(3, 1, 61, false);
    f.put_i32(-2);
    send_and_see(c, "Metadata v1 topics -2", &f, 61, metadata_v1_body).await?;
    let mut f = header(3, 1, 62, false);
    f.put_i32(-1);
    let all = |b: Bytes| {
        let mut b = b;
        MetadataResponse::decode(&mut b, 1).map_or("undecodable".to_owned(), |r| {
            format!("brokers={}", r.brokers.len())
        })
    };
    send_and_see(c, "Metadata v1 topics -1 (all)", &f, 62, all).await?;
    let mut f = header(3, 1, 63, false);
    f.put_i32(1_000_000);
    send_and_see(
        c,
        "Metadata v1 topics 10^6 with none sent",
        &f,
        63,
        metadata_v1_body,
    )
    .await?;
    still_serves(c).await
}

async fn string_length_beyond_the_frame(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = header(3, 1, 71, false);
    f.put_i32(1);
    f.put_i16(1000);
    f.put_slice(b"abc");
    send_and_see(
        c,
        "topic name of 1000 with 3 sent",
        &f,
        71,
        metadata_v1_body,
    )
    .await?;
    let mut f = header(3, 1, 72, false);
    f.put_i32(1);
    f.put_i16(-5);
    send_and_see(c, "topic name length -5", &f, 72, metadata_v1_body).await?;
    let mut f = BytesMut::new();
    f.put_i16(18);
    f.put_i16(0);
    f.put_i32(73);
    f.put_i16(50); // client id longer than the frame
    f.put_slice(b"ab");
    send_and_see(c, "client id of 50 with 2 sent", &f, 73, nothing).await?;
    still_serves(c).await
}

async fn correlation_ids_echoed_exactly(c: &mut Ctx) -> anyhow::Result<()> {
    for id in [0, -7, i32::MAX, i32::MIN, 0x0102_0304] {
        c.client.send_raw(&header(18, 0, id, false)).await?;
        let echoed = match c.client.read_frame_within(WAIT).await {
            FrameRead::Frame(mut f) if f.remaining() >= 4 => (f.get_i32() == id).to_string(),
            FrameRead::Frame(_) => "short".to_owned(),
            FrameRead::Closed => "closed".to_owned(),
            FrameRead::Silent => "silent".to_owned(),
        };
        c.see(format!("id {id} echoed"), echoed);
    }
    // The same id twice in a row is answered twice.
    c.client.send_raw(&header(18, 0, 5, false)).await?;
    c.client.send_raw(&header(18, 0, 5, false)).await?;
    let mut n = 0;
    for _ in 0..2 {
        if let FrameRead::Frame(mut f) = c.client.read_frame_within(WAIT).await
            && f.remaining() >= 4
            && f.get_i32() == 5
        {
            n += 1;
        }
    }
    c.see("duplicate id answers", n);
    Ok(())
}

async fn pipelined_requests_answered_in_order(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut all = Vec::new();
    let n = 40;
    for i in 0..n {
        let f = match i % 3 {
            0 => header(18, 0, 1000 + i, false),
            1 => metadata_v1(1000 + i, Some(&[&t])),
            _ => metadata_v1(1000 + i, Some(&[])),
        };
        all.extend_from_slice(&(f.len() as i32).to_be_bytes());
        all.extend_from_slice(&f);
    }
    c.client.write_unframed(&all).await?;
    let mut ids = Vec::new();
    let mut metadata_ok = true;
    for i in 0..n {
        match c.client.read_frame_within(WAIT).await {
            FrameRead::Frame(mut f) => {
                ids.push(f.get_i32());
                if i % 3 == 1 {
                    let r = MetadataResponse::decode(&mut f, 1).context("Metadata v1 answer")?;
                    metadata_ok &= r.topics.first().is_some_and(|x| x.error_code == 0);
                }
            }
            other => {
                c.see("stopped", format!("{other:?}"));
                break;
            }
        }
    }
    c.see("answers", ids.len());
    c.see(
        "in order",
        ids.iter().enumerate().all(|(i, id)| *id == 1000 + i as i32),
    );
    c.see("metadata answers name the topic", metadata_ok);
    Ok(())
}

async fn sasl_handshake_on_a_plain_listener(c: &mut Ctx) -> anyhow::Result<()> {
    for (what, mech, version) in [
        ("v1 NOPE", "NOPE", 1),
        ("v1 PLAIN", "PLAIN", 1),
        ("v0 NOPE", "NOPE", 0),
    ] {
        let req = SaslHandshakeRequest::default().with_mechanism(s(mech));
        match c.client.call(&req, version).await {
            Ok(r) => {
                let mut m: Vec<_> = r.mechanisms.iter().map(|x| x.to_string()).collect();
                m.sort();
                c.see(what, format!("error={} mechanisms={m:?}", r.error_code));
            }
            Err(_) => {
                c.see(what, "closed");
                c.reconnect().await?;
            }
        }
        // Whatever the answer, the connection goes on serving?
        c.client.send_raw(&header(18, 0, 99, false)).await?;
        let served = matches!(c.client.read_frame_within(WAIT).await, FrameRead::Frame(_));
        c.see(format!("{what}: served after"), served);
        c.reconnect().await?;
    }
    Ok(())
}

async fn null_client_id_is_accepted(c: &mut Ctx) -> anyhow::Result<()> {
    let mut f = BytesMut::new();
    f.put_i16(18);
    f.put_i16(0);
    f.put_i32(81);
    f.put_i16(-1);
    send_and_see(c, "ApiVersions v0, null client id", &f, 81, |mut b| {
        ApiVersionsResponse::decode(&mut b, 0).map_or("undecodable".to_owned(), |r| {
            format!("error={}", r.error_code)
        })
    })
    .await?;
    let mut f = BytesMut::new();
    f.put_i16(3);
    f.put_i16(1);
    f.put_i32(82);
    f.put_i16(0); // empty client id
    f.put_i32(0);
    send_and_see(c, "Metadata v1, empty client id", &f, 82, metadata_v1_body).await?;
    Ok(())
}
