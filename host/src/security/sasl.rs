//! One SASL exchange on the server side: PLAIN (RFC 4616), checked against
//! the user's SCRAM credential, and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
//! RFC 7677) through the `rsasl` crate with credentials from
//! [`super::credentials`]. Channel binding (`-PLUS`) is not offered.
//!
//! The exchange only computes; the connection ([`super::authenticate`])
//! frames tokens, applies deadlines and delays, and decides what a failure
//! closes.

use std::sync::Arc;

use rsasl::callback::{Context, Request, SessionCallback, SessionData};
use rsasl::mechanisms::scram::properties::ScramStoredPassword;
use rsasl::mechname::Mechname;
use rsasl::prelude::{SASLConfig, SASLServer, Session, SessionError};
use rsasl::property::{AuthId, AuthzId};
use rsasl::validate::{Validate, Validation, ValidationError};

use super::credentials::{Credentials, ScramMechanism};
use super::session::Principal;

/// A mechanism kaas speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn parse(s: &str) -> Option<Self> {
        if s == "PLAIN" {
            return Some(Mechanism::Plain);
        }
        ScramMechanism::parse(s).map(Mechanism::Scram)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }
}

/// The longest PLAIN token (authzid, user and password with separators).
const MAX_PLAIN_TOKEN: usize = 1 << 12;

/// What a step ended with.
#[derive(Debug)]
pub enum Outcome {
    /// Send this token and wait for the client's next one.
    Continue(Vec<u8>),
    /// Authenticated; send `reply` (possibly empty) as the last token.
    Authenticated {
        principal: Principal,
        reply: Vec<u8>,
    },
    /// Refused: answer SASL_AUTHENTICATION_FAILED with this message.
    Failed(String),
}

/// The generic refusal: the detail (unknown user, bad proof) is not told
/// to the client, so users cannot be enumerated.
fn invalid(mech: Mechanism) -> Outcome {
    Outcome::Failed(format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mech.name()
    ))
}

/// Mechanisms and credentials, shared by every connection.
#[derive(Debug, Clone)]
pub struct Sasl {
    enabled: Vec<Mechanism>,
    credentials: Arc<Credentials>,
    scram: Arc<SASLConfig>,
}

impl Sasl {
    pub fn new(enabled: Vec<Mechanism>, credentials: Arc<Credentials>) -> anyhow::Result<Self> {
        let scram = SASLConfig::builder()
            .with_defaults()
            .with_callback(Lookup(credentials.clone()))
            .map_err(|e| anyhow::anyhow!("configuring SASL: {e}"))?;
        Ok(Sasl {
            enabled,
            credentials,
            scram,
        })
    }

    /// The enabled mechanisms' names, as SaslHandshake lists them.
    pub fn names(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|m| m.name()).collect()
    }

    pub fn credentials(&self) -> &Arc<Credentials> {
        &self.credentials
    }

    /// Starts an exchange for `mechanism`, if it is enabled.
    pub fn start(&self, mechanism: &str) -> Option<Exchange> {
        let mech = Mechanism::parse(mechanism).filter(|m| self.enabled.contains(m))?;
        let inner = match mech {
            Mechanism::Plain => Inner::Plain,
            Mechanism::Scram(_) => {
                let name = Mechname::parse(mech.name().as_bytes()).ok()?;
                let session = SASLServer::<Authenticated>::new(self.scram.clone())
                    .start_suggested(name)
                    .ok()?;
                Inner::Scram(Box::new(session), 0)
            }
        };
        Some(Exchange {
            mech,
            inner,
            credentials: self.credentials.clone(),
        })
    }
}

enum Inner {
    Plain,
    /// The session and how many client messages it has taken.
    Scram(Box<Session<Authenticated>>, u8),
    Done,
}

/// One client's exchange.
pub struct Exchange {
    mech: Mechanism,
    inner: Inner,
    credentials: Arc<Credentials>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("mech", &self.mech)
            .finish()
    }
}

impl Exchange {
    pub fn mechanism(&self) -> Mechanism {
        self.mech
    }

    /// Feeds the client's next token.
    pub fn step(&mut self, token: &[u8]) -> Outcome {
        match std::mem::replace(&mut self.inner, Inner::Done) {
            Inner::Done => Outcome::Failed("the SASL exchange has already ended".into()),
            Inner::Plain => self.plain(token),
            Inner::Scram(mut s, taken) => {
                if !scram_shape_ok(taken, token) {
                    tracing::debug!(target: "kaas::sasl", "a malformed SCRAM message");
                    return invalid(self.mech);
                }
                let mut out = Vec::new();
                // Backstop: a parser panic on some input we did not
                // foresee fails this exchange, not the connection's task.
                let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    s.step(Some(token), &mut out)
                }));
                let Ok(stepped) = stepped else {
                    tracing::warn!(target: "kaas::sasl", "the SCRAM parser panicked on a client message");
                    return invalid(self.mech);
                };
                match stepped {
                    Ok(state) if state.is_running() => {
                        self.inner = Inner::Scram(s, taken.saturating_add(1));
                        Outcome::Continue(out)
                    }
                    Ok(_) => match s.validation() {
                        Some(Ok(name)) => Outcome::Authenticated {
                            principal: Principal::user(&name),
                            reply: out,
                        },
                        _ => invalid(self.mech),
                    },
                    Err(e) => {
                        tracing::debug!(target: "kaas::sasl", error = %e, "SCRAM exchange failed");
                        invalid(self.mech)
                    }
                }
            }
        }
    }

    fn plain(&mut self, token: &[u8]) -> Outcome {
        if token.len() > MAX_PLAIN_TOKEN {
            return Outcome::Failed("Authentication failed: the PLAIN token is too long".into());
        }
        let mut parts = token.split(|b| *b == 0);
        let (Some(authzid), Some(user), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Outcome::Failed(
                "Authentication failed: a PLAIN token is authzid NUL username NUL password".into(),
            );
        };
        let Ok(user) = std::str::from_utf8(user) else {
            return Outcome::Failed("Authentication failed: the username is not UTF-8".into());
        };
        if user.is_empty() {
            return Outcome::Failed("Authentication failed: username not specified".into());
        }
        if password.is_empty() {
            return Outcome::Failed("Authentication failed: password not specified".into());
        }
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Outcome::Failed(
                "Authentication failed: Client requested an authorization id that is different from username"
                    .into(),
            );
        }
        if self.credentials.verify_password(user, password) {
            Outcome::Authenticated {
                principal: Principal::user(user),
                reply: Vec::new(),
            }
        } else {
            Outcome::Failed("Authentication failed: Invalid username or password".into())
        }
    }
}

/// Whether a SCRAM client message has the attribute shape rsasl's parser
/// indexes without checking (rsasl 2.3.1 slices `[0..2]` of attributes and
/// `[2..]` of the authzid, so `n,,` or a trailing comma would panic it):
/// client-first (`taken` 0) is `gs2-cbind-flag,[a=authzid],n=user,r=nonce[,ext...]`,
/// client-final is `c=...,r=...[,ext...],p=...`, every attribute `x=...`.
fn scram_shape_ok(taken: u8, token: &[u8]) -> bool {
    let attribute = |a: &[u8]| a.len() >= 2 && a.get(1) == Some(&b'=');
    let mut parts = token.split(|b| *b == b',');
    if taken == 0 {
        let (Some(_flag), Some(authzid)) = (parts.next(), parts.next()) else {
            return false;
        };
        (authzid.is_empty() || authzid.starts_with(b"a=")) && parts.all(attribute)
    } else {
        parts.all(attribute)
    }
}

/// rsasl's validation result: the authenticated user name.
struct Authenticated;

impl Validation for Authenticated {
    type Value = Result<String, ()>;
}

/// Gives rsasl the stored credential of the user a client names.
struct Lookup(Arc<Credentials>);

impl SessionCallback for Lookup {
    fn callback(
        &self,
        session_data: &SessionData,
        context: &Context<'_>,
        request: &mut Request<'_>,
    ) -> Result<(), SessionError> {
        let Some(mech) = ScramMechanism::parse(session_data.mechanism().mechanism.as_str()) else {
            return Ok(());
        };
        if let Some(user) = context.get_ref::<AuthId>()
            && let Some(c) = self.0.get(user, mech)
        {
            let iterations = c.iterations;
            request.satisfy::<ScramStoredPassword<'_>>(&ScramStoredPassword::new(
                iterations,
                &c.salt,
                &c.stored_key,
                &c.server_key,
            ))?;
        }
        Ok(())
    }

    fn validate(
        &self,
        _session_data: &SessionData,
        context: &Context<'_>,
        validate: &mut Validate<'_>,
    ) -> Result<(), ValidationError> {
        let user = context.get_ref::<AuthId>().map(str::to_owned);
        let authz = context.get_ref::<AuthzId>().map(str::to_owned);
        validate.with::<Authenticated, _>(|| {
            Ok(match (user, authz) {
                (Some(u), None) => Ok(u),
                (Some(u), Some(a)) if a == u => Ok(u),
                _ => Err(()),
            })
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sasl() -> Sasl {
        let c = Arc::new(Credentials::empty());
        c.set_password("alice", ScramMechanism::Sha512, "alice-secret", 4096)
            .unwrap();
        c.set_password("alice", ScramMechanism::Sha256, "alice-secret", 4096)
            .unwrap();
        Sasl::new(
            vec![
                Mechanism::Plain,
                Mechanism::Scram(ScramMechanism::Sha256),
                Mechanism::Scram(ScramMechanism::Sha512),
            ],
            c,
        )
        .unwrap()
    }

    /// Runs rsasl's own client against the server exchange.
    fn scram_login(s: &Sasl, mech: &str, user: &str, password: &str) -> Outcome {
        use rsasl::prelude::SASLClient;
        let cfg = SASLConfig::with_credentials(None, user.into(), password.into()).unwrap();
        let name = Mechname::parse(mech.as_bytes()).unwrap();
        let mut client = SASLClient::new(cfg).start_suggested(&[name]).unwrap();
        let mut server = s.start(mech).unwrap();
        let mut token = Vec::new();
        client.step(None, &mut token).unwrap();
        loop {
            match server.step(&token) {
                Outcome::Continue(reply) => {
                    token.clear();
                    client.step(Some(&reply), &mut token).unwrap();
                }
                other => return other,
            }
        }
    }

    #[test]
    fn scram_sha_512_and_256_authenticate_with_the_right_password_only() {
        let s = sasl();
        for mech in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
            match scram_login(&s, mech, "alice", "alice-secret") {
                Outcome::Authenticated { principal, reply } => {
                    assert_eq!(principal.to_string(), "User:alice");
                    assert!(
                        reply.starts_with(b"v="),
                        "server-final carries the verifier"
                    );
                }
                other => panic!("{mech}: {other:?}"),
            }
            assert!(matches!(
                scram_login(&s, mech, "alice", "wrong"),
                Outcome::Failed(_)
            ));
        }
    }

    #[test]
    fn an_unknown_scram_user_fails_like_a_wrong_password() {
        let s = sasl();
        let Outcome::Failed(m) = scram_login(&s, "SCRAM-SHA-512", "mallory", "x") else {
            panic!("unknown user authenticated")
        };
        assert!(m.contains("invalid credentials"), "{m}");
    }

    #[test]
    fn plain_checks_the_password_and_the_authzid() {
        let s = sasl();
        let mut ex = s.start("PLAIN").unwrap();
        assert!(matches!(
            ex.step(b"\0alice\0alice-secret"),
            Outcome::Authenticated { .. }
        ));
        let mut ex = s.start("PLAIN").unwrap();
        assert!(matches!(ex.step(b"\0alice\0nope"), Outcome::Failed(_)));
        let mut ex = s.start("PLAIN").unwrap();
        assert!(matches!(
            ex.step(b"bob\0alice\0alice-secret"),
            Outcome::Failed(_)
        ));
        let mut ex = s.start("PLAIN").unwrap();
        assert!(matches!(ex.step(b"garbage"), Outcome::Failed(_)));
        assert!(s.start("GSSAPI").is_none());
        assert!(s.start("SCRAM-SHA-512-PLUS").is_none());
    }

    #[test]
    fn a_malformed_scram_token_fails_cleanly() {
        let s = sasl();
        for token in [
            &b""[..],
            b"p=tls-unique,,n=alice,r=abc",
            b"\xff\xfe",
            b"n,,n=alice",
            b"n,,",
            b"n,,n=alice,r=abc,",
            b"n,a,n=alice,r=abc",
            b"n,,n,r=abc",
            b"n,,n=alice,r",
        ] {
            let mut ex = s.start("SCRAM-SHA-512").unwrap();
            let first = ex.step(token);
            assert!(
                matches!(first, Outcome::Failed(_)),
                "{token:?} gave {first:?}"
            );
        }
    }

    #[test]
    fn a_malformed_scram_final_message_fails_cleanly() {
        let s = sasl();
        for token in [
            &b""[..],
            b"c",
            b"c=biws,r",
            b"c=biws,r=x,p=abc,",
            b"c=biws,r=x,,p=abc",
            b"c=biws,r=clientnonce",
        ] {
            let mut ex = s.start("SCRAM-SHA-512").unwrap();
            assert!(matches!(
                ex.step(b"n,,n=alice,r=clientnonce"),
                Outcome::Continue(_)
            ));
            let last = ex.step(token);
            assert!(
                matches!(last, Outcome::Failed(_)),
                "{token:?} gave {last:?}"
            );
        }
    }
}
