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
/// ran), it fails the waiting items instead of leaving them waiting for ever, and lets the
/// next item start a new drainer.
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
            // A batch that panics fails its own items, and the queue goes on with the next:
            // items that arrived meanwhile are not lost with it.
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(items)));
            let panicked = done.is_err();
            let mut results = done.unwrap_or_default().into_iter();
            for reply in replies {
                let result = results.next().unwrap_or_else(|| {
                    Err(Error::internal(if panicked {
                        "a batch panicked"
                    } else {
                        "a batch returned too few results"
                    }))
                });
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
        // One kind of work, as every caller of a queue gives: it fails on item 1, and item
        // 3 gets no result. (A running batch goes on with the work its first item gave.)
        let work = |items: Vec<u32>| -> Vec<Result<u32>> {
            if items.contains(&1) {
                panic!("boom");
            }
            items.into_iter().filter(|&x| x != 3).map(Ok).collect()
        };
        let err = tokio::time::timeout(wait, queue.submit(1, work))
            .await
            .expect("the item waited for ever");
        assert!(matches!(err, Err(Error::Internal { .. })), "{err:?}");
        let ok = tokio::time::timeout(wait, queue.submit(2, work))
            .await
            .expect("the queue did not start again");
        assert_eq!(ok.unwrap(), 2);
        let short = queue.submit(3, work).await;
        assert!(matches!(short, Err(Error::Internal { .. })), "{short:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_item_queued_while_a_batch_panics_is_still_done() {
        let queue: Arc<Coalescer<u32, u32>> = Coalescer::new(1);
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let work = move |held: Arc<Mutex<std::sync::mpsc::Receiver<()>>>| {
            move |items: Vec<u32>| -> Vec<Result<u32>> {
                if items == [1] {
                    let _ = held.lock().unwrap().recv();
                    panic!("boom");
                }
                items.into_iter().map(Ok).collect()
            }
        };
        let first = {
            let (queue, work) = (Arc::clone(&queue), work(Arc::clone(&held)));
            tokio::spawn(async move { queue.submit(1, work).await })
        };
        // Item 1's batch is running (its thread waits), item 2 queues behind it.
        while !queue.state.lock().unwrap().draining {
            tokio::task::yield_now().await;
        }
        let second = {
            let (queue, work) = (Arc::clone(&queue), work(Arc::clone(&held)));
            tokio::spawn(async move { queue.submit(2, work).await })
        };
        while queue.state.lock().unwrap().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        let wait = std::time::Duration::from_secs(10);
        let first = tokio::time::timeout(wait, first).await.unwrap().unwrap();
        assert!(matches!(first, Err(Error::Internal { .. })), "{first:?}");
        let second = tokio::time::timeout(wait, second).await.unwrap().unwrap();
        assert_eq!(second.unwrap(), 2);
    }
}
