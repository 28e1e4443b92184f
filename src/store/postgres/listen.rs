//! Commit notifications: every commit notifies the project's channel (delivered when it
//! commits); one connection per store listens and wakes the engine's event streams, so a
//! change made on another host arrives at once instead of at the next poll.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::{select, Either};
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

/// How long the listener waits before reconnecting after losing its connection.
const RECONNECT: Duration = Duration::from_millis(500);

/// The channel a project's commits notify (an identifier, quoted where SQL needs one).
pub(super) fn channel(project: &str) -> String {
    format!("memlane_{project}")
}

/// Listens on `channel` until `closing` is notified or the signal is dropped, waking
/// `signal` for every notification, and once after each (re)connection (notifications
/// sent while it was away are lost; a reader re-reads the log).
pub(super) async fn listen(
    config: tokio_postgres::Config,
    channel: String,
    signal: Weak<Notify>,
    closing: Arc<Notify>,
) {
    loop {
        let closed = closing.notified();
        let mut closed = std::pin::pin!(closed);
        closed.as_mut().enable();
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let wake = signal.clone();
            let messages = async move {
                while let Some(message) =
                    futures_util::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    match message {
                        Ok(AsyncMessage::Notification(_)) => match wake.upgrade() {
                            Some(signal) => signal.notify_waiters(),
                            None => return,
                        },
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            };
            let mut messages = std::pin::pin!(messages);
            let statement = format!("LISTEN \"{channel}\"");
            let listening = client.batch_execute(&statement);
            // The connection must be driven while LISTEN runs.
            let listened = match select(std::pin::pin!(listening), messages.as_mut()).await {
                Either::Left((result, _)) => result.is_ok(),
                Either::Right(_) => false,
            };
            if listened {
                match signal.upgrade() {
                    Some(s) => s.notify_waiters(),
                    None => return,
                }
                if let Either::Right(_) = select(messages, closed.as_mut()).await {
                    return;
                }
            }
            drop(client);
        }
        if signal.strong_count() == 0 {
            return;
        }
        if let Either::Right(_) = select(
            std::pin::pin!(tokio::time::sleep(RECONNECT)),
            closed.as_mut(),
        )
        .await
        {
            return;
        }
    }
}
