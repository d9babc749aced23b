//! The protocol features a policy finalizes (ABI 3.0's `protocol-features`,
//! e.g. `transaction.version`), checked once at load. A client picks its
//! transaction protocol from the finalized `transaction.version` that
//! ApiVersions reports, so the features travel with the policy: the host
//! advertises the deciding policy's (`wire::api::api_versions`). Pure data:
//! it touches nothing.

use super::types::ProtocolFeature;

/// A feature level (ApiVersions' int16), not an error code.
pub type Level = i16;

/// The `transaction.version` levels this host can serve: 0 (Kafka 3.x
/// transactions) to 2 (KIP-890 part 2).
pub const TRANSACTION_VERSION_MAX: Level = 2;

/// The highest `transaction.version` the broker serves on the wire today.
/// Version 2 needs Produce v12, EndTxn v5 and TxnOffsetCommit v5 with the
/// partition leader's implicit add, which this build does not speak yet: a
/// Kafka 4 client that saw version 2 finalized would send them. So a broker
/// refuses to run a policy that finalizes more ([`serveable`]); conformance
/// runs any level the policy ABI can express.
pub const WIRE_TRANSACTION_VERSION: Level = 0;

/// Whether a broker may let a policy with `features` decide: refused, in
/// words, when it finalizes a `transaction.version` the wire does not serve.
pub fn serveable(features: &[ProtocolFeature]) -> Result<(), String> {
    let tv = transaction_version(features);
    if tv > WIRE_TRANSACTION_VERSION {
        return Err(format!(
            "it finalizes transaction.version {tv}, which this kaas decides (kaas conformance \
             runs it) but does not serve on the wire yet (Produce v12, EndTxn v5, TxnOffsetCommit \
             v5, the implicit add): a Kafka 4 client would use them; the broker serves \
             transaction.version {WIRE_TRANSACTION_VERSION}"
        ));
    }
    Ok(())
}

/// Features whose levels the host, not the policy, decides (it refuses a
/// policy that declares them).
const HOST_FEATURES: &[&str] = &["group.version", "metadata.version", "kraft.version"];

/// Why a policy's declared features are refused, in words.
pub fn check(features: &[ProtocolFeature]) -> Result<(), String> {
    for (i, f) in features.iter().enumerate() {
        if f.name.is_empty() {
            return Err("a protocol feature has an empty name".into());
        }
        if features[..i].iter().any(|g| g.name == f.name) {
            return Err(format!("protocol feature {} is declared twice", f.name));
        }
        if HOST_FEATURES.contains(&f.name.as_str()) {
            return Err(format!(
                "protocol feature {} is the broker's, not a policy's",
                f.name
            ));
        }
        if !(0 <= f.min_version
            && f.min_version <= f.finalized_level
            && f.finalized_level <= f.max_version)
        {
            return Err(format!(
                "protocol feature {}: finalized level {} outside its supported {}..={} (or below 0)",
                f.name, f.finalized_level, f.min_version, f.max_version
            ));
        }
        if f.name == "transaction.version" && f.max_version > TRANSACTION_VERSION_MAX {
            return Err(format!(
                "transaction.version {} is beyond what this kaas serves (0..={TRANSACTION_VERSION_MAX})",
                f.max_version
            ));
        }
    }
    Ok(())
}

/// The finalized `transaction.version` of `features` (0 when not declared).
pub fn transaction_version(features: &[ProtocolFeature]) -> Level {
    features
        .iter()
        .find(|f| f.name == "transaction.version")
        .map_or(0, |f| f.finalized_level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(min: i16, max: i16, level: i16) -> ProtocolFeature {
        ProtocolFeature {
            name: "transaction.version".into(),
            min_version: min,
            max_version: max,
            finalized_level: level,
        }
    }

    #[test]
    fn a_policy_may_finalize_transaction_version_up_to_what_the_host_serves() {
        assert_eq!(check(&[tv(0, 0, 0)]), Ok(()));
        assert_eq!(check(&[tv(0, 2, 2)]), Ok(()));
        assert_eq!(transaction_version(&[tv(0, 2, 2)]), 2);
        assert_eq!(transaction_version(&[]), 0);
        for bad in [tv(0, 3, 3), tv(0, 1, 2), tv(1, 2, 0), tv(-1, 2, 0)] {
            assert!(check(std::slice::from_ref(&bad)).is_err(), "{bad:?}");
        }
        assert!(check(&[tv(0, 2, 2), tv(0, 2, 2)]).is_err());
        let group = ProtocolFeature {
            name: "group.version".into(),
            ..tv(0, 1, 1)
        };
        assert!(check(&[group]).unwrap_err().contains("broker's"));
    }

    #[test]
    fn a_broker_serves_no_transaction_version_beyond_its_wire() {
        assert_eq!(serveable(&[tv(0, 0, 0)]), Ok(()));
        assert_eq!(serveable(&[]), Ok(()));
        // Supported up to 2 but finalized at 0 is served as 0.
        assert_eq!(serveable(&[tv(0, 2, 0)]), Ok(()));
        let refused = serveable(&[tv(0, 2, 2)]).unwrap_err();
        assert!(refused.contains("transaction.version 2"), "{refused}");
    }
}
