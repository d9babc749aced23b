//! The coordinator's clock: a background task that runs every group's due
//! deadlines (session expiry, the end of a join phase, members that never
//! synced, expired MEMBER_ID_REQUIRED ids) and offset retention.
//!
//! It sleeps (tokio time) until the earliest deadline of any group, at most
//! a second, and an operation that creates an earlier deadline wakes it.
//! It holds the coordinator weakly, so it ends when the broker is dropped,
//! and it ends when its shard is closed or abandoned.

use std::sync::{Arc, Weak};

use tokio::sync::Notify;

use super::coordinator::Inner;

pub(super) async fn run(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = match inner.upgrade() {
            Some(i) if !i.is_closed() => i.tick(),
            _ => return,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(next)) => {}
            _ = notified => {}
        }
    }
}
