//! A closed-loop user: send, wait for the whole response, think, repeat, on one
//! keep-alive connection that it reopens after an error.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender as RecordTx;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Sleep;

use crate::config::Think;
use crate::client::{Conn, Outgoing, Target};
use crate::client::http1::{TagLevel, Prepared, Tag};
use crate::outcome::ErrorClass;
use crate::record::Record;
use crate::flow::hook::HookRunner;
use crate::flow::Flows;
use crate::rng::Rng;

pub(crate) const BATCH_ROWS: usize = 128;
pub(crate) const BATCH_EVERY: Duration = Duration::from_millis(100);
/// After a failed connect a user pauses this long, so a dead target is not hammered
/// in a tight loop that only fills the records file.
pub(crate) const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
pub(crate) const PARKED_POLL: Duration = Duration::from_millis(20);
/// A user that thinks at least this long frees its connection's read buffer meanwhile:
/// one allocation per request is nothing beside a wait this long, and 10,000 users
/// thinking hold 40 MB less.
pub(crate) const SHED_AFTER: Duration = Duration::from_millis(10);

/// What every user reads: the target, the plan's requests and the current step.
pub struct Shared {
    pub target: Target,
    pub run_id: String,
    /// `trace_run_half(run_id)`, for each request's traceparent.
    pub trace_half: u64,
    pub tag: bool,
    pub requests: Vec<Prepared>,
    /// Request indices in the order the weights give, cycled through.
    pub cycle: Vec<u32>,
    pub think: Think,
    pub seed: u64,
    pub timeout: Duration,
    /// The current step and its users, read together: `step << 32 | users`. Two
    /// separate atomics let a user read the users of one step and the index of the
    /// next, and tag a request with the wrong load level.
    pub current: AtomicU64,
    pub next_req_id: AtomicU64,
    /// Requests dropped in flight when the run ended (see [`Unsent`]).
    pub abandoned: Arc<AtomicU64>,
    /// Requests in flight now (the live counters').
    pub in_flight: Arc<AtomicU64>,
    /// Some: users walk these flows (`drive::walk`) instead of the plan's requests.
    pub flows: Option<Flows>,
    pub hook: Option<HookRunner>,
    /// Users each step is tagged and recorded with, when this generator sends a share
    /// of them (see `RunConfig::tag_levels`); empty: its own.
    pub tag_users: Vec<u32>,
}

impl Shared {
    /// The users a request of `step` is tagged with: the run's, or this generator's.
    pub fn tagged_users(&self, step: u32, users: u32) -> u32 {
        self.tag_users.get(step as usize).copied().unwrap_or(users)
    }
}

pub fn pack_step(step: u32, users: u32) -> u64 {
    (u64::from(step) << 32) | u64::from(users)
}

pub fn unpack_step(current: u64) -> (u32, u32) {
    ((current >> 32) as u32, current as u32)
}

pub fn unix_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

pub async fn run_user(
    index: u32,
    shared: Arc<Shared>,
    tx: RecordTx<Vec<Record>>,
    mut done: watch::Receiver<bool>,
) {
    let mut conn: Option<Conn> = None;
    let mut out = Unsent::new(tx, Vec::new(), shared.abandoned.clone(), shared.in_flight.clone());
    let mut last_flush = Instant::now();
    let mut request = Outgoing::default();
    let mut turn = index as usize;
    let mut rng = Rng::stream(shared.seed, u64::from(index));
    // Send times in unix microseconds from the monotonic clock: one clock read at the
    // send and one at the end of each request.
    let (epoch, epoch_us) = (Instant::now(), unix_us(SystemTime::now()));
    // One timer for all the user's requests rather than one registered and removed per
    // request (see `until`).
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    while !*done.borrow() {
        let (step, active) = unpack_step(shared.current.load(Ordering::Acquire));
        if index >= active {
            flush(&out.tx, &mut out.batch, &mut last_flush, Instant::now());
            think(timer.as_mut(), &mut done, PARKED_POLL).await;
            continue;
        }
        let users = shared.tagged_users(step, active);
        let endpoint = shared.cycle[turn % shared.cycle.len()];
        let prepared = &shared.requests[endpoint as usize];
        turn += 1;
        let req_id = shared.next_req_id.fetch_add(1, Ordering::Relaxed);
        let tag = Tag {
            run_id: &shared.run_id,
            trace_half: shared.trace_half,
            level: TagLevel::Users(users),
            req_id,
        };
        shared.target.build(prepared, shared.tag.then_some(&tag), &mut request);
        if conn.as_mut().is_some_and(|c| !c.is_reusable()) {
            conn = None;
        }

        let started = Instant::now();
        let deadline = (started + prepared.timeout).into();
        // Whether the request's time ran out while connecting: connect's own timeout is
        // the same length, so which of the two timers fires first is a matter of chance.
        let mut connecting = false;
        out.begin();
        let outcome = until(timer.as_mut(), deadline, async {
            if conn.is_none() {
                connecting = true;
                // Boxed: its future (~500 bytes) would be held inline by every user
                // for the whole run, to run once.
                conn = Some(Box::pin(shared.target.connect(prepared.timeout)).await?);
                connecting = false;
            }
            shared.target.exchange(conn.as_mut().expect("connected above"), &mut request, prepared).await
        })
        .await
        .unwrap_or(Err(if connecting { ErrorClass::ConnectTimeout } else { ErrorClass::Timeout }));
        out.end();
        let ended = Instant::now();
        let start_us = epoch_us + (started - epoch).as_micros() as i64;
        let latency_us = (ended - started).as_micros() as i64;

        let mut record = Record {
            req_id,
            step,
            users,
            endpoint: endpoint as u16,
            start_us,
            intended_us: start_us,
            latency_us,
            service_us: latency_us,
            status: 0,
            error: None,
            bytes: 0,
            walk: None,
        };
        let mut backoff = Duration::ZERO;
        match outcome {
            Ok(resp) => {
                record.status = resp.status;
                record.bytes = resp.bytes;
                if resp.closing {
                    conn = None;
                }
            }
            Err(class) => {
                record.error = Some(class);
                conn = None;
                if matches!(
                    class,
                    ErrorClass::ConnectRefused
                        | ErrorClass::ConnectError
                        | ErrorClass::ConnectTimeout
                        | ErrorClass::Tls
                ) {
                    backoff = CONNECT_BACKOFF;
                }
            }
        }
        out.batch.push(record);
        if out.batch.len() >= BATCH_ROWS || ended - last_flush >= BATCH_EVERY {
            flush(&out.tx, &mut out.batch, &mut last_flush, ended);
        }
        let wait = shared.think.sample(&mut rng).max(backoff);
        if wait >= SHED_AFTER {
            if let Some(c) = conn.as_mut() {
                c.shed_buffer();
            }
            request.shed();
        }
        if !wait.is_zero() {
            think(timer.as_mut(), &mut done, wait).await;
        }
    }
    flush(&out.tx, &mut out.batch, &mut last_flush, Instant::now());
}

/// Records of requests that ended, not yet sent to the recorder. Sent when dropped too:
/// a task aborted in the middle of a request (an abandoned run) loses that request
/// only, counted in `abandoned`, never the ones it finished before.
pub struct Unsent {
    pub tx: RecordTx<Vec<Record>>,
    pub batch: Vec<Record>,
    /// A request is in flight.
    in_flight: bool,
    abandoned: Arc<AtomicU64>,
    /// The run's count of requests in flight (the live counters').
    sending: Arc<AtomicU64>,
}

impl Unsent {
    pub fn new(
        tx: RecordTx<Vec<Record>>,
        batch: Vec<Record>,
        abandoned: Arc<AtomicU64>,
        sending: Arc<AtomicU64>,
    ) -> Self {
        Self { tx, batch, in_flight: false, abandoned, sending }
    }

    /// A request goes out.
    pub fn begin(&mut self) {
        self.in_flight = true;
        self.sending.fetch_add(1, Ordering::Relaxed);
    }

    /// The request ended (answered, failed or timed out).
    pub fn end(&mut self) {
        if std::mem::take(&mut self.in_flight) {
            self.sending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.batch));
        }
        if self.in_flight {
            self.abandoned.fetch_add(1, Ordering::Relaxed);
            self.sending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Runs `work` until it ends (Some) or `deadline` passes (None). The timer is moved
/// only when it would fire after `deadline`, or when it fires before it (it was set for
/// an earlier request): with a steady timeout it is reset about once per timeout, not
/// once per request.
pub(crate) fn until<F: Future>(mut timer: Pin<&mut Sleep>, deadline: tokio::time::Instant, work: F) -> Until<'_, F> {
    if timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    Until { timer, deadline, work }
}

pin_project_lite::pin_project! {
    /// The future of [`until`]: a struct rather than an `async fn`, which would hold
    /// `work` twice (as its argument and pinned), ~300 bytes more in every user's task.
    pub(crate) struct Until<'a, F> {
        timer: Pin<&'a mut Sleep>,
        deadline: tokio::time::Instant,
        #[pin]
        work: F,
    }
}

impl<F: Future> Future for Until<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.work.poll(cx) {
            return Poll::Ready(Some(out));
        }
        while this.timer.as_mut().poll(cx).is_ready() {
            if this.timer.deadline() >= *this.deadline {
                return Poll::Ready(None);
            }
            this.timer.as_mut().reset(*this.deadline);
        }
        Poll::Pending
    }
}

/// Sends the batch to the recorder. The next batch starts with room for as many rows
/// as this one held: a busy user does not grow its batch row by row, and an idle one
/// (most of 10,000 users thinking) holds no room for rows it will not fill.
pub(crate) fn flush(tx: &RecordTx<Vec<Record>>, batch: &mut Vec<Record>, last_flush: &mut Instant, now: Instant) {
    if !batch.is_empty() {
        let room = batch.len().next_power_of_two().min(BATCH_ROWS);
        let full = std::mem::replace(batch, Vec::with_capacity(room));
        let _ = tx.send(full);
    }
    *last_flush = now;
}

/// Sleeps `wait` on the user's own timer (its requests' timeout), waking at once when
/// the run ends. A second timer, as [`pause`] has, would make each user's task ~170
/// bytes bigger; the request after resets the timer to its deadline.
async fn think(mut timer: Pin<&mut Sleep>, done: &mut watch::Receiver<bool>, wait: Duration) {
    timer.as_mut().reset(tokio::time::Instant::now() + wait);
    tokio::select! {
        _ = timer => {}
        _ = done.changed() => {}
    }
}

/// Sleeps, but wakes at once when the run ends.
pub(crate) async fn pause(done: &mut watch::Receiver<bool>, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = done.changed() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Protocol;

    fn shared() -> Arc<Shared> {
        let addr = "127.0.0.1:9".parse().unwrap();
        Arc::new(Shared {
            target: Target::new(addr, "h".into(), "h", &Protocol::default(), (false, false)).unwrap(),
            run_id: "r".into(),
            trace_half: 0,
            tag: true,
            requests: Vec::new(),
            cycle: vec![0],
            think: Think::Constant(Duration::from_secs(1)),
            seed: 1,
            timeout: Duration::from_secs(1),
            current: AtomicU64::new(0),
            next_req_id: AtomicU64::new(0),
            abandoned: Arc::default(),
            in_flight: Arc::default(),
            flows: None,
            hook: None,
            tag_users: Vec::new(),
        })
    }

    /// A user's task is its future and ~130 bytes of tokio's, in a block aligned to 128
    /// bytes: under 896 bytes the task takes 1 KiB; it took 2 KiB when the connect
    /// future, the request's future (held twice) and an HTTP/2 request were inline.
    #[test]
    fn a_users_future_fits_a_task_of_one_kibibyte() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let (_done_tx, done) = watch::channel(false);
        let user = run_user(0, shared(), tx, done);
        let size = std::mem::size_of_val(&user);
        assert!(size <= 896, "a closed-loop user's future is {size} bytes");
    }
}
