//! DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key
//! 51), KIP-554: list users' SCRAM mechanisms and iteration counts (never
//! salts or keys), and add or remove credentials at run time. The client
//! derives the salted password; the broker stores only salt, StoredKey,
//! ServerKey and iterations ([`crate::security::credentials`]). Changes
//! apply to new authentications; sessions already open continue.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::acl::CLUSTER_NAME;
use crate::security::credentials::{CredentialError, ScramMechanism};
use crate::security::{Operation, ResourceType, Session};
use crate::wire::handled::Handled;

/// Most users one request may name.
const MAX_USERS_PER_REQUEST: usize = 1000;
/// Longest salt accepted.
const MAX_SALT: usize = 1024;

pub fn describe(
    broker: &Arc<Broker>,
    session: &Session,
    req: DescribeUserScramCredentialsRequest,
) -> ResponseKind {
    let api = kafka_protocol::messages::ApiKey::DescribeUserScramCredentials;
    if !broker.authz.authorize(
        session,
        api,
        Operation::Describe,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return ResponseKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let all = broker.sasl.credentials().describe();
    let info = |mechs: &Vec<(ScramMechanism, u32)>| {
        mechs
            .iter()
            .map(|(m, i)| {
                CredentialInfo::default()
                    .with_mechanism(m.code())
                    .with_iterations(*i as i32)
            })
            .collect::<Vec<_>>()
    };
    let results = match req.users.filter(|u| !u.is_empty()) {
        None => all
            .iter()
            .map(|(u, m)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(str_bytes(u))
                    .with_credential_infos(info(m))
            })
            .collect(),
        Some(users) => {
            let mut count: BTreeMap<String, usize> = BTreeMap::new();
            for u in &users {
                *count.entry(u.name.to_string()).or_default() += 1;
            }
            count
                .iter()
                .take(MAX_USERS_PER_REQUEST)
                .map(|(u, n)| {
                    let r = DescribeUserScramCredentialsResult::default().with_user(str_bytes(u));
                    if *n > 1 {
                        r.with_error_code(codes::DUPLICATE_RESOURCE).with_error_message(Some(str_bytes(
                            &format!("Cannot describe SCRAM credentials for the same user twice in a single request: {u}"),
                        )))
                    } else {
                        match all.get(u) {
                            Some(m) => r.with_credential_infos(info(m)),
                            None => r.with_error_code(codes::RESOURCE_NOT_FOUND).with_error_message(
                                Some(str_bytes(&format!(
                                    "Attempt to describe a user credential that does not exist: {u}"
                                ))),
                            ),
                        }
                    }
                })
                .collect()
        }
    };
    ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default().with_results(results),
    )
}

enum Change {
    Delete(ScramMechanism),
    Upsert(
        ScramMechanism,
        crate::security::credentials::ScramCredential,
    ),
}

pub fn alter(
    broker: &Arc<Broker>,
    session: &Session,
    req: AlterUserScramCredentialsRequest,
) -> Handled {
    let api = kafka_protocol::messages::ApiKey::AlterUserScramCredentials;
    let allowed = broker.authz.authorize(
        session,
        api,
        Operation::Alter,
        ResourceType::Cluster,
        CLUSTER_NAME,
    );
    // Per user: how often named, and the change or the error.
    let mut named: BTreeMap<String, usize> = BTreeMap::new();
    for n in req
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(req.upsertions.iter().map(|u| &u.name))
    {
        *named.entry(n.to_string()).or_default() += 1;
    }
    let mut errors: BTreeMap<String, (i16, String)> = BTreeMap::new();
    let mut changes: Vec<(String, Change)> = Vec::new();
    let too_many = named.len() > MAX_USERS_PER_REQUEST;
    let check = |name: &str, mech: i8| -> Result<ScramMechanism, (i16, String)> {
        if !allowed {
            return Err((
                codes::CLUSTER_AUTHORIZATION_FAILED,
                "Cluster authorization failed.".into(),
            ));
        }
        if too_many {
            return Err((
                codes::INVALID_REQUEST,
                format!("at most {MAX_USERS_PER_REQUEST} users per request"),
            ));
        }
        if named.get(name).copied().unwrap_or(0) > 1 {
            return Err((
                codes::DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request".into(),
            ));
        }
        if name.is_empty() {
            return Err((
                codes::UNACCEPTABLE_CREDENTIAL,
                "Username must not be empty".into(),
            ));
        }
        ScramMechanism::from_code(mech).ok_or_else(|| {
            (
                codes::UNSUPPORTED_SASL_MECHANISM,
                format!("Unknown SCRAM mechanism {mech}"),
            )
        })
    };
    for d in &req.deletions {
        let name = d.name.to_string();
        match check(&name, d.mechanism) {
            Ok(m) => changes.push((name, Change::Delete(m))),
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    for u in &req.upsertions {
        let name = u.name.to_string();
        let m = match check(&name, u.mechanism) {
            Ok(m) => m,
            Err(e) => {
                errors.insert(name, e);
                continue;
            }
        };
        let expected = match m {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        };
        if u.salted_password.len() != expected || u.salt.is_empty() || u.salt.len() > MAX_SALT {
            errors.insert(name, (codes::UNACCEPTABLE_CREDENTIAL, format!("a {} credential needs a salt of 1 to {MAX_SALT} bytes and a {expected}-byte salted password", m.name())));
            continue;
        }
        let Ok(iterations) = u32::try_from(u.iterations) else {
            errors.insert(
                name,
                (codes::UNACCEPTABLE_CREDENTIAL, "Too few iterations".into()),
            );
            continue;
        };
        changes.push((
            name,
            Change::Upsert(m, m.credential(&u.salt, &u.salted_password, iterations)),
        ));
    }
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let store = broker.sasl.credentials().clone();
        let applied = tokio::task::spawn_blocking(move || {
            changes
                .into_iter()
                .map(|(name, c)| {
                    let r = match c {
                        Change::Delete(m) => store.delete(&name, m),
                        Change::Upsert(m, cred) => store.upsert(&name, m, cred),
                    };
                    (name, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (name, r) in applied {
            let e = match r {
                Ok(()) => continue,
                Err(CredentialError::NotFound) => (
                    codes::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist".to_owned(),
                ),
                Err(
                    e @ (CredentialError::TooFewIterations(_)
                    | CredentialError::TooManyIterations(_)
                    | CredentialError::EmptyName),
                ) => (codes::UNACCEPTABLE_CREDENTIAL, e.to_string()),
                Err(e) => {
                    tracing::warn!(user = %name, error = %e, "storing a SCRAM credential failed");
                    (
                        codes::UNKNOWN_SERVER_ERROR,
                        "storing the credential failed".to_owned(),
                    )
                }
            };
            errors.insert(name, e);
        }
        let mut results: Vec<AlterUserScramCredentialsResult> = Vec::new();
        for name in named.keys() {
            let r = AlterUserScramCredentialsResult::default().with_user(str_bytes(name));
            results.push(match errors.get(name) {
                Some((code, msg)) => r
                    .with_error_code(*code)
                    .with_error_message(Some(str_bytes(msg))),
                None => r,
            });
        }
        ResponseKind::AlterUserScramCredentials(
            AlterUserScramCredentialsResponse::default().with_results(results),
        )
    }))
}
