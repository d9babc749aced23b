//! The acks=0 appends of one connection not yet visible (durable): the
//! connection handles no later request other than a Produce before they
//! are, so a Fetch or ListOffsets on it sees them, as Kafka, which answers
//! a connection's requests one after another, shows them.
//!
//! Each entry only waits: the work runs in a task of its own, so entries
//! not polled for a while still make progress.

use std::task::{Context, Poll, Waker};

use crate::wire::handled::Settling;

/// Entries kept before a push waits for the oldest (a connection sending
/// only acks=0 produces holds at most this many).
const MAX_PENDING: usize = 64;

/// The pending entries of one connection.
#[derive(Default)]
pub(super) struct Settlings(Vec<Settling>);

impl std::fmt::Debug for Settlings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Settlings({} pending)", self.0.len())
    }
}

impl Settlings {
    /// Adds `f`, dropping the entries already done; false when one of them
    /// failed (the connection is then closed).
    pub(super) async fn push(&mut self, f: Settling) -> bool {
        let mut ok = self.prune();
        self.0.push(f);
        if self.0.len() > MAX_PENDING {
            let oldest = self.0.remove(0);
            ok &= oldest.await;
        }
        ok
    }

    /// Waits for every entry; false when one failed.
    pub(super) async fn all(&mut self) -> bool {
        let mut ok = true;
        for f in self.0.drain(..) {
            ok &= f.await;
        }
        ok
    }

    /// Drops the entries done; false when one of them failed.
    fn prune(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ok = true;
        self.0.retain_mut(|f| match f.as_mut().poll(&mut cx) {
            Poll::Ready(r) => {
                ok &= r;
                false
            }
            Poll::Pending => true,
        });
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn all_waits_for_every_entry_and_reports_a_failure() {
        let mut s = Settlings::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<bool>();
        assert!(s.push(Box::pin(async { true })).await);
        assert!(
            s.push(Box::pin(async move { rx.await.unwrap_or(false) }))
                .await
        );
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let _ = tx.send(false);
        });
        assert!(!s.all().await);
        assert!(s.all().await, "nothing left");
    }

    #[tokio::test]
    async fn a_failure_done_meanwhile_is_reported_by_the_next_push() {
        let mut s = Settlings::default();
        assert!(s.push(Box::pin(async { false })).await);
        assert!(!s.push(Box::pin(async { true })).await);
        assert!(s.all().await);
    }
}
