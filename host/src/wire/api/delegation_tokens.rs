//! The delegation token APIs (keys 38–41: Create 1–3, Renew 1–2, Expire
//! 1–2, Describe 1–3). kaas issues no delegation tokens, so each is
//! refused as Kafka refuses it without a token secret: on a connection
//! authenticated by SASL or a client certificate,
//! DELEGATION_TOKEN_AUTH_DISABLED; on a PLAINTEXT or one-way TLS one
//! (`User:ANONYMOUS`), DELEGATION_TOKEN_REQUEST_NOT_ALLOWED first, as
//! Kafka's broker checks the channel before the configuration.

use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenResponse,
    ExpireDelegationTokenResponse, RenewDelegationTokenResponse, ResponseKind,
};

use super::str_bytes;
use crate::codes;
use crate::security::{Principal, Session};

/// Why `session` gets no token.
fn refusal(session: &Session) -> i16 {
    if session.principal.name == Principal::ANONYMOUS {
        codes::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    } else {
        codes::DELEGATION_TOKEN_AUTH_DISABLED
    }
}

pub fn create(session: &Session, req: &CreateDelegationTokenRequest) -> ResponseKind {
    let me = &session.principal;
    // The owner: the one asked for (v3), else the requester.
    let (owner_kind, owner_name) = match &req.owner_principal_name {
        Some(n) if !n.is_empty() => (
            req.owner_principal_type
                .as_ref()
                .map_or_else(|| me.kind.clone(), |k| k.to_string()),
            n.to_string(),
        ),
        _ => (me.kind.clone(), me.name.clone()),
    };
    ResponseKind::CreateDelegationToken(
        CreateDelegationTokenResponse::default()
            .with_error_code(refusal(session))
            .with_principal_type(str_bytes(&owner_kind))
            .with_principal_name(str_bytes(&owner_name))
            .with_token_requester_principal_type(str_bytes(&me.kind))
            .with_token_requester_principal_name(str_bytes(&me.name))
            .with_issue_timestamp_ms(-1)
            .with_expiry_timestamp_ms(-1)
            .with_max_timestamp_ms(-1),
    )
}

pub fn renew(session: &Session) -> ResponseKind {
    ResponseKind::RenewDelegationToken(
        RenewDelegationTokenResponse::default()
            .with_error_code(refusal(session))
            .with_expiry_timestamp_ms(-1),
    )
}

pub fn expire(session: &Session) -> ResponseKind {
    ResponseKind::ExpireDelegationToken(
        ExpireDelegationTokenResponse::default()
            .with_error_code(refusal(session))
            .with_expiry_timestamp_ms(-1),
    )
}

pub fn describe(session: &Session) -> ResponseKind {
    ResponseKind::DescribeDelegationToken(
        DescribeDelegationTokenResponse::default().with_error_code(refusal(session)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_channels_are_not_allowed_and_authenticated_ones_find_tokens_disabled() {
        let anon = Session::internal();
        assert_eq!(refusal(&anon), codes::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
        let mut alice = (*anon).clone();
        alice.principal = Principal::user("alice");
        assert_eq!(refusal(&alice), codes::DELEGATION_TOKEN_AUTH_DISABLED);
    }
}
