//! Binding a client listener with the accept backlog the operator chose
//! (`socket.listen.backlog.size`, KIP-764).
//!
//! Why: `TcpListener::bind` listens with a fixed backlog (128 in mio), so
//! the kernel drops the SYNs of a connect burst larger than that (10,000
//! clients reconnecting after a restart) and those clients retry only after
//! a second. Kafka makes the backlog a setting with a default of 50; so
//! does kaas. The kernel caps it at `net.core.somaxconn`.
//!
//! Touches only the socket it makes.

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Kafka's default `socket.listen.backlog.size`.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 50;

/// Binds `addr` (`HOST:PORT`, resolved; the first address that binds wins)
/// with address reuse, as `TcpListener::bind` does, and listens with
/// `backlog` (at least 1) connections queued before they are accepted.
pub async fn bind_listener(addr: &str, backlog: u32) -> io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        match bind_one(a, backlog) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr} resolves to no address"),
        )
    }))
}

fn bind_one(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog.max(1))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Linux queues `backlog + 1` handshaken connections on a listener that
    /// accepts none; the next SYN is dropped, so that connect does not
    /// complete. With the fixed backlog of 128 it would.
    #[tokio::test]
    async fn connects_beyond_the_backlog_wait_until_the_broker_accepts() {
        let backlog = 2;
        let l = bind_listener("127.0.0.1:0", backlog).await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let mut queued = Vec::new();
        for _ in 0..=backlog {
            queued.push(
                tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
                    .await
                    .expect("a connect within the backlog completes")
                    .expect("connect"),
            );
        }
        let over = tokio::spawn(tokio::net::TcpStream::connect(addr));
        // The kernel retries a dropped SYN after 1 s; half of that is
        // enough to see that the handshake did not complete.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !over.is_finished(),
            "a connect beyond a backlog of {backlog} completed without an accept"
        );
        // Accepting makes room: the waiting connect completes on its retry.
        let _first = l.accept().await.expect("accept");
        let _second = l.accept().await.expect("accept");
        tokio::time::timeout(Duration::from_secs(10), over)
            .await
            .expect("the waiting connect completes once there is room")
            .expect("join")
            .expect("connect");
    }
}
