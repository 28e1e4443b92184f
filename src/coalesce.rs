//! Work submitted concurrently, done together: while one batch runs on a blocking thread,
//! the items that arrive wait, and the next batch takes them all.
//!
//! Used where one call costs nearly what many cost together: a forward pass of the local
//! embedding model reads all its weights (about 40 MB) whatever the number of texts.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// A queue of items waiting for the next batch.
pub(crate) struct Coalescer<T, R> {
    state: Mutex<State<T, R>>,
    /// The most items one batch takes.
    most: usize,
}

struct State<T, R> {
    waiting: Vec<(T, oneshot::Sender<Result<R>>)>,
    /// Whether a thread is draining the queue.
    draining: bool,
}

impl<T: Send + 'static, R: Send + 'static> Coalescer<T, R> {
    /// A queue whose batches take at most `most` items.
    pub fn new(most: usize) -> Arc<Coalescer<T, R>> {
        Arc::new(Coalescer {
            state: Mutex::new(State {
                waiting: Vec::new(),
                draining: false,
            }),
            most: most.max(1),
        })
    }

    /// Queues `item` and waits for its result. If no batch is running, starts a thread that
    /// runs `work` on batches until the queue is empty; `work` returns one result per item,
    /// in order (a missing result is an internal error for its item).
    pub async fn submit<F>(self: &Arc<Self>, item: T, work: F) -> Result<R>
    where
        F: Fn(Vec<T>) -> Vec<Result<R>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut state = self
                .state
                .lock()
                .map_err(|_| Error::internal("a work queue was poisoned by a panic"))?;
            state.waiting.push((item, reply));
            !std::mem::replace(&mut state.draining, true)
        };
        if start {
            let drainer = Drainer {
                queue: Arc::clone(self),
                finished: false,
            };
            // Not awaited: every result comes through its item's channel.
            drop(tokio::task::spawn_blocking(move || drainer.run(work)));
        }
        answer
            .await
            .map_err(|_| Error::internal("a batch stopped before it answered"))?
    }
}

/// Drains a queue on a blocking thread. Dropped before it has drained (its thread never
/// ran, or `work` panicked), it fails the waiting items instead of leaving them waiting for
/// ever, and lets the next item start a new drainer.
struct Drainer<T, R> {
    queue: Arc<Coalescer<T, R>>,
    finished: bool,
}

impl<T, R> Drainer<T, R> {
    fn run<F: Fn(Vec<T>) -> Vec<Result<R>>>(mut self, work: F) {
        loop {
            let batch = {
                let Ok(mut state) = self.queue.state.lock() else {
                    return;
                };
                if state.waiting.is_empty() {
                    state.draining = false;
                    self.finished = true;
                    return;
                }
                let take = state.waiting.len().min(self.queue.most);
                state.waiting.drain(..take).collect::<Vec<_>>()
            };
            let (items, replies): (Vec<T>, Vec<_>) = batch.into_iter().unzip();
            let mut results = work(items).into_iter();
            for reply in replies {
                let result = results
                    .next()
                    .unwrap_or_else(|| Err(Error::internal("a batch returned too few results")));
                // A caller that gave up no longer listens.
                let _ = reply.send(result);
            }
        }
    }
}

impl<T, R> Drop for Drainer<T, R> {
    fn drop(&mut self) {
        if !self.finished {
            if let Ok(mut state) = self.queue.state.lock() {
                state.draining = false;
                state.waiting.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn items_submitted_together_share_batches_and_get_their_own_results() {
        let queue: Arc<Coalescer<u32, u32>> = Coalescer::new(8);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..64u32 {
            let queue = Arc::clone(&queue);
            let sizes = Arc::clone(&sizes);
            tasks.push(tokio::spawn(async move {
                let work = move |items: Vec<u32>| {
                    sizes.lock().unwrap().push(items.len());
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    items.into_iter().map(|x| Ok(x * 10)).collect()
                };
                (i, queue.submit(i, work).await)
            }));
        }
        for t in tasks {
            let (i, result) = t.await.unwrap();
            assert_eq!(result.unwrap(), i * 10);
        }
        let sizes = sizes.lock().unwrap();
        assert_eq!(sizes.iter().sum::<usize>(), 64);
        assert!(sizes.iter().all(|&n| n <= 8), "{sizes:?}");
        assert!(
            sizes.len() < 64,
            "some batches held several items: {sizes:?}"
        );
    }

    #[tokio::test]
    async fn a_panicking_batch_fails_its_items_and_the_queue_goes_on() {
        let queue: Arc<Coalescer<u32, u32>> = Coalescer::new(8);
        let wait = std::time::Duration::from_secs(10);
        let err = tokio::time::timeout(
            wait,
            queue.submit(1, |_items: Vec<u32>| -> Vec<Result<u32>> { panic!("boom") }),
        )
        .await
        .expect("the item waited for ever");
        assert!(matches!(err, Err(Error::Internal { .. })), "{err:?}");
        let ok = tokio::time::timeout(
            wait,
            queue.submit(2, |items: Vec<u32>| items.into_iter().map(Ok).collect()),
        )
        .await
        .expect("the queue did not start again");
        assert_eq!(ok.unwrap(), 2);
        let short = queue.submit(3, |_items: Vec<u32>| Vec::new()).await;
        assert!(matches!(short, Err(Error::Internal { .. })), "{short:?}");
    }
}
