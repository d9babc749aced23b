//! Logging in as a named principal over a SASL_PLAINTEXT listener,
//! and the admin requests the security tests share: users created
//! with `kaas user set`, ACLs created with CreateAcls.

use std::path::Path;
use std::process::Command;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{Client, Process};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// `kaas user set` of a SCRAM-SHA-256 credential (before the broker starts).
pub fn add_user(dir: &Path, name: &str, password: &str) {
    let status = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["user", "set", "--data-dir"])
        .arg(dir)
        .args([
            "--mechanism",
            "SCRAM-SHA-256",
            "--name",
            name,
            "--password",
            password,
        ])
        .status()
        .expect("run kaas user set");
    assert!(status.success(), "kaas user set {name}");
}

/// A broker whose only listener is SASL_PLAINTEXT, `User:admin` a super user.
pub fn spawn_sasl(dir: &Path) -> Process {
    Process::spawn(
        dir,
        &[
            "--listener",
            "CLIENT=SASL_PLAINTEXT://127.0.0.1:0",
            "--super-user",
            "User:admin",
        ],
    )
}

/// SaslHandshake v1 ("PLAIN"), then SaslAuthenticate v2 with
/// `\0user\0password`: asserts both succeed.
pub async fn login_plain(c: &mut Client, user: &str, password: &str) {
    let hs = c
        .call(
            &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
            1,
        )
        .await;
    assert_eq!(hs.error_code, 0, "SaslHandshake PLAIN: {:?}", hs.mechanisms);
    let mut auth = vec![0u8];
    auth.extend_from_slice(user.as_bytes());
    auth.push(0);
    auth.extend_from_slice(password.as_bytes());
    let r = c
        .call(
            &SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from(auth)),
            2,
        )
        .await;
    assert_eq!(
        r.error_code, 0,
        "PLAIN login of {user}: {:?}",
        r.error_message
    );
}

/// A connection logged in as `user` (password: the user name twice).
pub async fn connect_as(addr: &str, user: &str) -> Client {
    let mut c = Client::connect(addr).await;
    login_plain(&mut c, user, &format!("{user}{user}")).await;
    c
}

/// CreateAcls v3 of literal ALLOW ACLs (resource type code, name,
/// principal, operation code) from any host; asserts each was created.
pub async fn create_acls(c: &mut Client, acls: &[(i8, &str, &str, i8)]) {
    let creations = acls
        .iter()
        .map(|&(rt, name, principal, op)| {
            AclCreation::default()
                .with_resource_type(rt)
                .with_resource_name(s(name))
                .with_resource_pattern_type(3)
                .with_principal(s(principal))
                .with_host(s("*"))
                .with_operation(op)
                .with_permission_type(3)
        })
        .collect();
    let r = c
        .call(&CreateAclsRequest::default().with_creations(creations), 3)
        .await;
    for x in &r.results {
        assert_eq!(x.error_code, 0, "CreateAcls: {:?}", x.error_message);
    }
}

/// Resource type codes.
pub const TOPIC: i8 = 2;
pub const GROUP: i8 = 3;
pub const CLUSTER: i8 = 4;
pub const TRANSACTIONAL_ID: i8 = 5;
/// Operation codes.
pub const READ: i8 = 3;
pub const WRITE: i8 = 4;
pub const DESCRIBE: i8 = 8;
