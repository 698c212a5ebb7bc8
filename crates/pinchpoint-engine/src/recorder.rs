//! The thread that receives request records from the users, folds them into the
//! per-step statistics and streams them to disk.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arrow_io::IpcSink;
use crate::record::Record;
use crate::stats::{Live, StepStats};

const FLUSH_ROWS: usize = 16_384;
const FLUSH_EVERY: Duration = Duration::from_millis(250);
/// While batches come, the recorder takes them this often rather than as each is sent:
/// a receiver blocked on the channel is woken (a futex call and two context switches on
/// the users' core) by every send, thousands a second at full load.
const TAKE_EVERY: Duration = Duration::from_millis(20);

pub struct Recorder {
    pub rx: Receiver<Vec<Record>>,
    /// None: the records are not written, only counted into the statistics.
    pub path: Option<PathBuf>,
    pub steps: Vec<StepStats>,
    pub live: Arc<Live>,
    /// Open loop: a step begun by a change keeps the send lag too.
    pub open_loop: bool,
}

pub struct Recorded {
    pub steps: Vec<StepStats>,
    pub records: u64,
}

impl Recorder {
    /// The statistics of `step`: a step begun by a change (`control.rs`) past the plan's
    /// steps gets its own, as many as the changes a run may take.
    fn step(&mut self, step: u32, users: u32) -> &mut StepStats {
        let at = step as usize;
        while self.steps.len() <= at {
            let next = self.steps.len() as u32;
            self.steps.push(if self.open_loop { StepStats::open(next) } else { StepStats::new(next, users) });
        }
        &mut self.steps[at]
    }

    /// Runs until every sender is dropped. An I/O error on the records file is
    /// returned after the run, but the statistics keep being gathered.
    pub fn run(mut self) -> (Recorded, Result<(), String>) {
        let mut sink = self.path.as_deref().map(|p| IpcSink::create(p).map_err(|e| e.to_string()));
        let mut pending: Vec<Record> = Vec::with_capacity(if sink.is_some() { FLUSH_ROWS } else { 0 });
        let mut last_flush = Instant::now();
        let mut records = 0u64;
        let mut write_error: Option<String> = None;
        loop {
            // Blocks only while no batch comes; then takes every batch sent meanwhile.
            let mut next = self.rx.recv_timeout(FLUSH_EVERY).map_err(|e| match e {
                RecvTimeoutError::Timeout => TryRecvError::Empty,
                RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
            });
            let mut took = false;
            let done = loop {
                match next {
                    Ok(batch) => {
                        took = true;
                        self.live.add(&batch);
                        for r in &batch {
                            self.step(r.step, r.users).add(r);
                        }
                        records += batch.len() as u64;
                        if sink.is_some() {
                            pending.extend_from_slice(&batch);
                        }
                    }
                    Err(TryRecvError::Empty) => break false,
                    Err(TryRecvError::Disconnected) => break true,
                }
                next = self.rx.try_recv();
            };
            if done || pending.len() >= FLUSH_ROWS || last_flush.elapsed() >= FLUSH_EVERY {
                if let Some(Ok(s)) = sink.as_mut() {
                    if let Err(e) = s.write(&pending) {
                        write_error.get_or_insert(e.to_string());
                    }
                }
                pending.clear();
                last_flush = Instant::now();
            }
            if done {
                break;
            }
            if took {
                std::thread::sleep(TAKE_EVERY);
            }
        }
        let result = match sink {
            None => Ok(()),
            Some(Ok(s)) => s.finish().map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e),
        };
        let result = match write_error {
            Some(e) => Err(e),
            None => result,
        };
        let path = self.path.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
        (Recorded { steps: self.steps, records }, result.map_err(|e| format!("{path}: {e}")))
    }
}
