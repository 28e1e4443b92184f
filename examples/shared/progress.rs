//! One progress bar for every long task memlane reports on (see `memlane::progress`).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use memlane::progress::{Progress, Task};

/// A progress callback that draws each task in turn on one bar (on standard error, and
/// only when it is a terminal).
pub fn progress_bar() -> impl Fn(Progress) + Send + Sync + 'static {
    let bar = ProgressBar::new(0);
    let current: Mutex<Option<Task>> = Mutex::new(None);
    move |p: Progress| {
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        if *current != Some(p.task) {
            *current = Some(p.task);
            let counts = match p.task.unit() {
                "bytes" => "{bytes}/{total_bytes}".to_owned(),
                unit => format!("{{pos}}/{{len}} {unit}"),
            };
            let template = format!("{{msg:>18}} [{{bar:32}}] {counts} {{elapsed}}");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.reset();
            bar.set_message(p.task.to_string());
        }
        bar.set_length(p.total);
        bar.set_position(p.done);
        if p.done == p.total {
            bar.finish();
        }
    }
}
