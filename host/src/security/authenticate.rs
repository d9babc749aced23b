//! The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL
//! listener (Kafka's SaslServerAuthenticator, KIP-152 and KIP-368), sans
//! I/O: the server's reader hands it every frame before dispatch and does
//! what it says.
//!
//! Before authentication only ApiVersions, SaslHandshake and
//! SaslAuthenticate are served; anything else closes the connection
//! without an answer (a SaslAuthenticate before the handshake is answered
//! ILLEGAL_SASL_STATE first). Handshake v0 means the tokens that follow are
//! raw size-prefixed frames without a request header; v1 carries them in
//! SaslAuthenticate. A failed authentication is answered after
//! `connection.failed.authentication.delay.ms` and closes the connection.
//! With `connections.max.reauth.ms` > 0 the final SaslAuthenticate (v1+)
//! tells the client the session's lifetime; a request after it ends closes
//! the connection, unless it is the SaslHandshake of a re-authentication,
//! which must use the same mechanism and yield the same principal.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};

use super::sasl::{Exchange, Mechanism, Outcome, Sasl};
use super::session::Session;
use crate::codes;
use crate::metrics::Metrics;
use crate::names::str_bytes;
use crate::wire::handled::{Handled, Request};

/// What the reader does with a frame.
#[derive(Debug)]
pub enum Verdict {
    /// Dispatch it with the (possibly new) session.
    Dispatch,
    /// Send this answer instead of dispatching.
    Answer(Handled),
    /// Send this answer, then close the connection.
    AnswerAndClose(Handled),
    /// Close without an answer.
    Close(&'static str),
    /// Close without an answer after this delay (a failed v0 exchange).
    CloseAfter(Duration),
}

enum State {
    /// Before the handshake.
    Initial,
    Exchanging {
        exchange: Exchange,
        /// SaslHandshake v0: tokens are raw frames.
        raw: bool,
    },
    Authenticated {
        mechanism: Mechanism,
        /// When the session ends (connections.max.reauth.ms).
        expires: Option<Instant>,
        /// Exchanging again on this connection (KIP-368).
        again: Option<(Exchange, bool)>,
    },
    Failed,
}

/// One connection's SASL authenticator.
pub struct Authenticator {
    sasl: Sasl,
    state: State,
    delay: Duration,
    reauth: Duration,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authenticator")
    }
}

impl Authenticator {
    /// An authenticator checking against `sasl`'s mechanisms and
    /// credentials, timed by `config`, counting into `metrics`.
    pub fn new(sasl: &Sasl, config: &super::SecurityConfig, metrics: Arc<Metrics>) -> Self {
        Authenticator {
            sasl: sasl.clone(),
            state: State::Initial,
            delay: config.failed_authentication_delay,
            reauth: config.connections_max_reauth,
            metrics,
        }
    }

    /// Whether requests other than the SASL exchange may be served.
    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated { .. })
    }

    /// The next frame is a raw token (after SaslHandshake v0).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Exchanging { raw: true, .. })
    }

    /// Ends the exchange as failed: counted and audited.
    fn record_failure(&mut self, why: &str) {
        self.state = State::Failed;
        self.metrics
            .sasl_authentication_failed
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(target: "kaas::audit", reason = why, "SASL authentication failed");
    }

    /// Answers `answer` after the failure delay, then closes.
    fn failed(&mut self, answer: ResponseKind, why: &str) -> Verdict {
        self.record_failure(why);
        let delay = self.delay;
        Verdict::AnswerAndClose(Handled::Later(Box::pin(async move {
            tokio::time::sleep(delay).await;
            answer
        })))
    }

    /// The exchange refused the client's credentials.
    fn refused(&mut self, message: &str) -> Verdict {
        let answer = authenticate(
            codes::SASL_AUTHENTICATION_FAILED,
            Some(message),
            Vec::new(),
            0,
        );
        self.failed(answer, message)
    }

    fn failed_raw(&mut self, why: &str) -> Verdict {
        self.record_failure(why);
        // Handshake v0 has no error frame: close after the delay.
        Verdict::CloseAfter(self.delay)
    }

    fn lifetime_ms(&self) -> i64 {
        self.reauth.as_millis() as i64
    }

    /// A raw token (after SaslHandshake v0).
    pub fn raw_token(&mut self, token: &[u8], session: &mut Arc<Session>) -> Verdict {
        let State::Exchanging { mut exchange, .. } =
            std::mem::replace(&mut self.state, State::Failed)
        else {
            return Verdict::Close("a raw SASL token outside a v0 exchange");
        };
        match exchange.step(token) {
            Outcome::Continue(reply) => {
                self.state = State::Exchanging {
                    exchange,
                    raw: true,
                };
                Verdict::Answer(Handled::Raw(reply))
            }
            Outcome::Authenticated { principal, reply } => {
                self.succeed(exchange.mechanism(), principal, session);
                Verdict::Answer(Handled::Raw(reply))
            }
            Outcome::Failed(m) => self.failed_raw(&m),
        }
    }

    fn succeed(
        &mut self,
        mechanism: Mechanism,
        principal: super::Principal,
        session: &mut Arc<Session>,
    ) {
        self.metrics
            .sasl_authentication_succeeded
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(target: "kaas::sasl", %principal, mechanism = mechanism.name(), "authenticated");
        let mut s = (**session).clone();
        s.principal = principal;
        *session = Arc::new(s);
        // A client that cannot re-authenticate (v0 framing) still has its
        // session end: it reconnects.
        let expires = (!self.reauth.is_zero()).then(|| Instant::now() + self.reauth);
        self.state = State::Authenticated {
            mechanism,
            expires,
            again: None,
        };
    }

    /// A request frame (already decoded).
    pub fn request(&mut self, req: &Request, session: &mut Arc<Session>) -> Verdict {
        let version = req.version;
        match (&mut self.state, &req.body) {
            (State::Failed, _) => Verdict::Close("authentication failed"),
            // Authenticated: everything is dispatched, except the
            // re-authentication exchange and requests after expiry.
            (
                State::Authenticated {
                    mechanism,
                    expires,
                    again,
                },
                body,
            ) => {
                let (mechanism, expires) = (*mechanism, *expires);
                match body {
                    Some(RequestKind::SaslHandshake(h)) if !self.reauth.is_zero() => {
                        let name = h.mechanism.to_string();
                        if name != mechanism.name() {
                            let answer = handshake(&self.sasl, codes::ILLEGAL_SASL_STATE);
                            return self.failed(answer, "re-authentication changed the mechanism");
                        }
                        match self.sasl.start(&name) {
                            Some(ex) => {
                                *again = Some((ex, version >= 1));
                                Verdict::Answer(Handled::Now(handshake(&self.sasl, codes::NONE)))
                            }
                            None => Verdict::Close("mechanism disabled during the session"),
                        }
                    }
                    Some(RequestKind::SaslAuthenticate(a)) if again.is_some() => {
                        let Some((mut ex, _)) = again.take() else {
                            return Verdict::Close("no re-authentication in progress");
                        };
                        match ex.step(&a.auth_bytes) {
                            Outcome::Continue(reply) => {
                                *again = Some((ex, true));
                                Verdict::Answer(Handled::Now(authenticate(
                                    codes::NONE,
                                    None,
                                    reply,
                                    0,
                                )))
                            }
                            Outcome::Authenticated { principal, reply } => {
                                if principal != session.principal {
                                    let answer = authenticate(
                                        codes::SASL_AUTHENTICATION_FAILED,
                                        Some("Cannot change principals during re-authentication"),
                                        Vec::new(),
                                        0,
                                    );
                                    return self
                                        .failed(answer, "re-authentication changed the principal");
                                }
                                self.succeed(mechanism, principal, session);
                                Verdict::Answer(Handled::Now(authenticate(
                                    codes::NONE,
                                    None,
                                    reply,
                                    self.lifetime_ms(),
                                )))
                            }
                            Outcome::Failed(m) => self.refused(&m),
                        }
                    }
                    _ => {
                        // A re-authentication begun (its SaslHandshake)
                        // but not finished does not extend the session.
                        if expires.is_some_and(|e| Instant::now() >= e) {
                            self.metrics
                                .sasl_sessions_expired
                                .fetch_add(1, Ordering::Relaxed);
                            return Verdict::Close(
                                "the SASL session expired (connections.max.reauth.ms)",
                            );
                        }
                        Verdict::Dispatch
                    }
                }
            }
            (State::Initial, Some(RequestKind::ApiVersions(_)) | None) => Verdict::Dispatch,
            (State::Initial, Some(RequestKind::SaslHandshake(h))) => {
                let name = h.mechanism.to_string();
                match self.sasl.start(&name) {
                    Some(exchange) => {
                        self.state = State::Exchanging {
                            exchange,
                            raw: version == 0,
                        };
                        Verdict::Answer(Handled::Now(handshake(&self.sasl, codes::NONE)))
                    }
                    None => {
                        let answer = handshake(&self.sasl, codes::UNSUPPORTED_SASL_MECHANISM);
                        self.failed(answer, "unsupported SASL mechanism")
                    }
                }
            }
            (State::Initial, Some(RequestKind::SaslAuthenticate(_))) => {
                let answer = authenticate(
                    codes::ILLEGAL_SASL_STATE,
                    Some("SaslAuthenticate before SaslHandshake"),
                    Vec::new(),
                    0,
                );
                self.failed(answer, "SaslAuthenticate before SaslHandshake")
            }
            (State::Initial, Some(_)) => {
                self.state = State::Failed;
                Verdict::Close("a request before SASL authentication")
            }
            (State::Exchanging { raw: false, .. }, Some(RequestKind::SaslAuthenticate(a))) => {
                let State::Exchanging { mut exchange, .. } =
                    std::mem::replace(&mut self.state, State::Failed)
                else {
                    return Verdict::Close("SASL state");
                };
                match exchange.step(&a.auth_bytes) {
                    Outcome::Continue(reply) => {
                        self.state = State::Exchanging {
                            exchange,
                            raw: false,
                        };
                        Verdict::Answer(Handled::Now(authenticate(codes::NONE, None, reply, 0)))
                    }
                    Outcome::Authenticated { principal, reply } => {
                        self.succeed(exchange.mechanism(), principal, session);
                        let lifetime = if version >= 1 { self.lifetime_ms() } else { 0 };
                        Verdict::Answer(Handled::Now(authenticate(
                            codes::NONE,
                            None,
                            reply,
                            lifetime,
                        )))
                    }
                    Outcome::Failed(m) => self.refused(&m),
                }
            }
            (State::Exchanging { .. }, _) => {
                self.state = State::Failed;
                Verdict::Close("a request other than SaslAuthenticate during the SASL exchange")
            }
        }
    }
}

fn handshake(sasl: &Sasl, error: i16) -> ResponseKind {
    ResponseKind::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(error)
            .with_mechanisms(sasl.names().into_iter().map(str_bytes).collect()),
    )
}

fn authenticate(
    error: i16,
    message: Option<&str>,
    reply: Vec<u8>,
    lifetime_ms: i64,
) -> ResponseKind {
    ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(error)
            .with_error_message(message.map(str_bytes))
            .with_auth_bytes(reply.into())
            .with_session_lifetime_ms(lifetime_ms),
    )
}
