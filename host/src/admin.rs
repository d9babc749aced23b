//! The broker's admin endpoint (`--admin-listen`, off by default) and its
//! client (`kaas policy load`): hot swap of the transaction policy over a
//! minimal HTTP/1.1 exchange.
//!
//! Protection: the endpoint binds loopback addresses only ([`bind`] refuses
//! anything else), so only processes on the broker's host reach it; with
//! `--admin-token-file` every request must also carry
//! `Authorization: Bearer <token>` (compared in constant time), which keeps
//! other local users out. Requests are bounded: the head to
//! [`MAX_HEAD_BYTES`] within [`HEAD_TIMEOUT`], the body to
//! [`crate::swap::MAX_POLICY_BYTES`] (checked on Content-Length before a
//! byte of it is read) within [`BODY_TIMEOUT`]; one request per connection.
//!
//! Routes: `POST /policy` (body: the component's bytes) vets and swaps it
//! ([`crate::swap::Swapper::offer`]): 200 with `swapped: OLD -> NEW`, 422
//! with `refused: REASON`. `GET /policy`: the current policy's identity.
//! This module parses and answers; the vetting is the swapper's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::swap::{MAX_POLICY_BYTES, Swapper, full_identity};

/// Most bytes of a request line plus headers.
pub const MAX_HEAD_BYTES: usize = 8 << 10;
/// How long the head may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the client waits for the broker's answer (vetting compiles).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// Most bytes of an answer the client reads.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Binds the admin endpoint on `addr`, which must resolve to loopback
/// addresses only.
pub async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("resolving --admin-listen {addr}"))?
        .collect();
    anyhow::ensure!(
        !resolved.is_empty(),
        "--admin-listen {addr} resolves to nothing"
    );
    if let Some(open) = resolved.iter().find(|a| !a.ip().is_loopback()) {
        anyhow::bail!(
            "--admin-listen {addr}: refusing to bind the admin endpoint on {open}, which is not a \
             loopback address (it swaps the transaction policy; bind 127.0.0.1 or [::1])"
        );
    }
    let l = TcpListener::bind(resolved.as_slice())
        .await
        .with_context(|| format!("binding the admin endpoint on {addr}"))?;
    let local = l.local_addr()?;
    anyhow::ensure!(
        local.ip().is_loopback(),
        "the admin endpoint bound {local}, not a loopback address"
    );
    Ok(l)
}

/// Reads a bearer token: the file's first line, trimmed, not empty.
pub fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the admin token file {}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    anyhow::ensure!(
        !token.is_empty(),
        "the admin token file {} holds no token",
        path.display()
    );
    Ok(token)
}

/// Serves the admin endpoint until the listener fails.
pub async fn serve(listener: TcpListener, swapper: Arc<Swapper>, token: Option<Arc<str>>) {
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            return;
        };
        let swapper = swapper.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let (status, body) = match handle(sock, &swapper, token.as_deref()).await {
                Ok(()) => return,
                Err(e) => e,
            };
            tracing::debug!(%peer, status, %body, "admin request not served");
        });
    }
}

/// An answer that ends the exchange: status and body.
type Answered = (u16, String);

/// One request; the answer is written here. Err carries what was answered
/// when the request was refused (for the debug log).
async fn handle(
    mut sock: TcpStream,
    swapper: &Arc<Swapper>,
    token: Option<&str>,
) -> Result<(), Answered> {
    let outcome = serve_one(&mut sock, swapper, token).await;
    let (status, body) = match &outcome {
        Ok(a) | Err(a) => a.clone(),
    };
    let _ = tokio::time::timeout(HEAD_TIMEOUT, respond(&mut sock, status, &body)).await;
    // A request refused on its head leaves its body unread; closing then
    // would reset the connection and the client could lose the answer. So
    // the write side is shut and what the client still sends is read and
    // dropped, bounded in bytes and time.
    let _ = sock.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut (&mut sock).take(LINGER_BYTES), &mut sink).await;
    })
    .await;
    outcome.map(|_| ())
}

/// How long a refused request's unread body is drained before closing.
const LINGER: Duration = Duration::from_secs(2);
/// Most bytes drained (a refused body is at most this large anyway).
const LINGER_BYTES: u64 = MAX_POLICY_BYTES as u64 + MAX_HEAD_BYTES as u64;

async fn serve_one(
    sock: &mut TcpStream,
    swapper: &Arc<Swapper>,
    token: Option<&str>,
) -> Result<Answered, Answered> {
    let (head, rest) = tokio::time::timeout(HEAD_TIMEOUT, read_head(sock))
        .await
        .map_err(|_| (408, "the request head did not arrive in time".to_string()))??;
    let req = parse_head(&head)?;
    if let Some(expected) = token {
        let given = req
            .authorization
            .as_deref()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => {}
            Some(_) => return Err((403, "wrong admin token".into())),
            None => {
                return Err((
                    401,
                    "this endpoint needs Authorization: Bearer <token>".into(),
                ));
            }
        }
    }
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/policy") => Ok((200, full_identity(swapper.slot().current().identity()))),
        ("POST", "/policy") => {
            let len = req
                .content_length
                .ok_or((411, "POST /policy needs a Content-Length".to_string()))?;
            if len > MAX_POLICY_BYTES {
                return Err((
                    413,
                    format!("the component is {len} bytes, over the {MAX_POLICY_BYTES}-byte limit"),
                ));
            }
            let body = tokio::time::timeout(BODY_TIMEOUT, read_body(sock, rest, len))
                .await
                .map_err(|_| (408, "the request body did not arrive in time".to_string()))?
                .map_err(|e| (400, format!("reading the body: {e}")))?;
            // Vetting compiles: off the async workers.
            let sw = swapper.clone();
            let result = tokio::task::spawn_blocking(move || sw.offer(&body, "admin endpoint"))
                .await
                .map_err(|e| (500, format!("the swap task failed: {e}")))?;
            match result {
                Ok(done) => Ok((
                    200,
                    format!(
                        "swapped: {} -> {}",
                        full_identity(&done.old),
                        full_identity(&done.new)
                    ),
                )),
                Err(refused) => Err((422, format!("refused: {refused}"))),
            }
        }
        (_, "/policy") => Err((405, "use GET or POST on /policy".into())),
        _ => Err((
            404,
            "unknown path (the admin endpoint serves /policy)".into(),
        )),
    }
}

/// The parts of a request head this endpoint uses.
#[derive(Debug)]
struct Head {
    method: String,
    path: String,
    content_length: Option<usize>,
    authorization: Option<String>,
}

/// Reads until the blank line ending the head; returns the head and any
/// body bytes read with it.
async fn read_head<R: AsyncRead + Unpin>(sock: &mut R) -> Result<(Vec<u8>, Vec<u8>), Answered> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err((
                431,
                format!("the request head is over {MAX_HEAD_BYTES} bytes"),
            ));
        }
        let n = sock
            .read(&mut chunk)
            .await
            .map_err(|e| (400, format!("reading the request: {e}")))?;
        if n == 0 {
            return Err((400, "the connection closed mid-request".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn parse_head(head: &[u8]) -> Result<Head, Answered> {
    let text = std::str::from_utf8(head).map_err(|_| (400, "the head is not UTF-8".to_string()))?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(path), Some(version)) = (first.next(), first.next(), first.next())
    else {
        return Err((400, "a malformed request line".into()));
    };
    if !version.starts_with("HTTP/1.") {
        return Err((505, "HTTP/1.x only".into()));
    }
    let mut h = Head {
        method: method.to_owned(),
        path: path.to_owned(),
        content_length: None,
        authorization: None,
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err((400, format!("a malformed header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            h.content_length = Some(
                value
                    .parse()
                    .map_err(|_| (400, format!("Content-Length {value:?} is not a number")))?,
            );
        } else if name.eq_ignore_ascii_case("authorization") {
            h.authorization = Some(value.to_owned());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err((
                411,
                "chunked bodies are not accepted; send Content-Length".into(),
            ));
        }
    }
    Ok(h)
}

async fn read_body<R: AsyncRead + Unpin>(
    sock: &mut R,
    mut already: Vec<u8>,
    len: usize,
) -> std::io::Result<Vec<u8>> {
    if already.len() > len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "more bytes than Content-Length",
        ));
    }
    let have = already.len();
    already.resize(len, 0);
    sock.read_exact(&mut already[have..]).await?;
    Ok(already)
}

async fn respond<W: AsyncWrite + Unpin>(
    sock: &mut W,
    status: u16,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let body = format!("{body}\n");
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.flush().await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The client side (`kaas policy load`, `kaas policy current`): sends one
/// request to the admin endpoint at `addr`; returns the status and the body.
pub async fn request(
    addr: &str,
    method: &str,
    token: Option<&str>,
    body: &[u8],
) -> anyhow::Result<(u16, String)> {
    let mut sock = tokio::time::timeout(HEAD_TIMEOUT, TcpStream::connect(addr))
        .await
        .with_context(|| format!("connecting to the admin endpoint {addr}: timed out"))?
        .with_context(|| format!("connecting to the admin endpoint {addr}"))?;
    let mut head = format!(
        "{method} /policy HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    // The broker may refuse on the head alone (token, size) and close.
    let _ = sock.write_all(body).await;
    let mut answer = Vec::new();
    tokio::time::timeout(
        ANSWER_TIMEOUT,
        (&mut sock)
            .take(MAX_ANSWER_BYTES as u64)
            .read_to_end(&mut answer),
    )
    .await
    .context("the admin endpoint did not answer in time")?
    .context("reading the admin endpoint's answer")?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("the admin endpoint's answer has no HTTP head")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .context("the admin endpoint's answer has no status")?;
    Ok((status, body.trim_end().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_parsing_finds_length_and_token() {
        let h = parse_head(
            b"POST /policy HTTP/1.1\r\ncontent-length: 12\r\nAuthorization: Bearer abc\r\n\r\n",
        )
        .expect("parses");
        assert_eq!((h.method.as_str(), h.path.as_str()), ("POST", "/policy"));
        assert_eq!(h.content_length, Some(12));
        assert_eq!(h.authorization.as_deref(), Some("Bearer abc"));
    }

    #[test]
    fn chunked_bodies_and_bad_lengths_are_refused() {
        let chunked = parse_head(b"POST /policy HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(chunked.expect_err("refused").0, 411);
        let bad = parse_head(b"POST /policy HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
        assert_eq!(bad.expect_err("refused").0, 400);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }

    #[tokio::test]
    async fn a_non_loopback_address_is_refused() {
        let e = bind("0.0.0.0:0").await.expect_err("refused");
        assert!(format!("{e:#}").contains("not a loopback address"), "{e:#}");
        let l = bind("127.0.0.1:0").await.expect("loopback binds");
        assert!(l.local_addr().expect("addr").ip().is_loopback());
    }
}
