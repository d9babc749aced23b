//! What the broker says of itself: ApiVersions (each API's advertised
//! range, and the features it finalizes), and the answer to a version it
//! does not support.

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};

use crate::ctx::{Ctx, s};
use crate::kit::Probe;

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "AV-01" => api_versions_ranges,
        "AV-02" => finalized_features,
        "AV-03" => api_versions_v0_and_v3_agree,
    ]
}

async fn api_versions_ranges(c: &mut Ctx) -> anyhow::Result<()> {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(s("kaas-wirekit"))
        .with_client_software_version(s("1"));
    let r = c.call(&req, 3).await?;
    c.see("error", r.error_code);
    let mut keys: Vec<_> = r.api_keys.iter().collect();
    keys.sort_by_key(|k| k.api_key);
    for k in keys {
        let name = ApiKey::try_from(k.api_key)
            .map_or_else(|_| format!("key {}", k.api_key), |a| format!("{a:?}"));
        c.see(
            format!("{name} ({})", k.api_key),
            format!("{}..={}", k.min_version, k.max_version),
        );
    }
    Ok(())
}

async fn finalized_features(c: &mut Ctx) -> anyhow::Result<()> {
    let r = c.call(&ApiVersionsRequest::default(), 3).await?;
    let mut f: Vec<_> = r
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    f.sort();
    for (name, level) in f {
        if name == "metadata.version" {
            continue; // a KRaft detail kaas does not have
        }
        c.see(format!("finalized {name}"), level);
    }
    c.see("features epoch >= 0", r.finalized_features_epoch >= 0);
    Ok(())
}

async fn api_versions_v0_and_v3_agree(c: &mut Ctx) -> anyhow::Result<()> {
    let v0 = c.call(&ApiVersionsRequest::default(), 0).await?;
    let v3 = c.call(&ApiVersionsRequest::default(), 3).await?;
    c.see("v0 error", v0.error_code);
    let same = v0.api_keys.len() == v3.api_keys.len()
        && v0.api_keys.iter().all(|a| {
            v3.api_keys.iter().any(|b| {
                a.api_key == b.api_key
                    && a.min_version == b.min_version
                    && a.max_version == b.max_version
            })
        });
    c.see("v0 and v3 list the same ranges", same);
    Ok(())
}
