//! Heap held per closed-loop user: runs `USERS` users (think time `THINK_MS`) against a
//! server on 127.0.0.1:`PORT` for `SECONDS`, counting every allocation by size, and
//! prints halfway through the live bytes per user and the sizes held once or more per
//! user (what each user keeps while it thinks).
//!
//!     cargo run --release -p pinchpoint-engine --example alloc_per_user -- PORT USERS THINK_MS SECONDS

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pinchpoint_engine::{Live, RequestSpec, RunConfig, Step, Think};

/// Sizes counted one by one up to this; larger ones together.
const EXACT: usize = 1 << 16;

struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static BY_SIZE: [AtomicI64; EXACT + 1] = [const { AtomicI64::new(0) }; EXACT + 1];

fn count(size: usize, n: i64) {
    LIVE_BYTES.fetch_add(n * size as i64, Ordering::Relaxed);
    BY_SIZE[size.min(EXACT)].fetch_add(n, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).map(|a| a.parse().expect("a number")).unwrap_or(default)
}

fn main() {
    let port = arg(1, 8080) as u16;
    let users = arg(2, 1000) as u32;
    let think = Duration::from_millis(arg(3, 1000));
    let seconds = arg(4, 6);
    let dir = std::env::temp_dir().join(format!("alloc-per-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let config = RunConfig {
        run_id: "alloc".into(),
        host: "127.0.0.1".into(),
        port,
        requests: vec![RequestSpec::get("/")],
        steps: vec![Step::hold(users, Duration::from_secs(seconds))],
        think: Think::Constant(think),
        open: None,
        seed: 1,
        timeout: Duration::from_secs(10),
        records_path: Some(dir.join("requests.arrows")),
        threads: 1,
        tag: true,
        protocol: Default::default(),
        flows: Vec::new(),
        hook: None,
        req_id_base: 0,
        start_at_us: None,
        tag_levels: Vec::new(),
    };
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let sampler = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds) / 2);
        let live = LIVE_BYTES.load(Ordering::Relaxed) - before;
        let held: Vec<(usize, i64)> = (0..=EXACT)
            .map(|s| (s, BY_SIZE[s].load(Ordering::Relaxed)))
            .filter(|&(_, n)| n >= i64::from(users) / 2)
            .collect();
        (live, held)
    });
    let summary = pinchpoint_engine::run(&config, Arc::new(AtomicBool::new(false)), Arc::new(Live::default())).expect("run");
    let (live, held) = sampler.join().expect("sampler");
    let _ = std::fs::remove_dir_all(&dir);
    println!("{users} users, think {think:?}: {} requests, {} errors", summary.records, summary.steps[0].errors.iter().sum::<u64>());
    println!("live heap halfway: {live} B, {:.0} B per user", live as f64 / f64::from(users));
    println!("{:>8} {:>9} {:>10} {:>10}", "size", "live", "per user", "B/user");
    for (size, n) in held {
        let shown = if size == EXACT { format!(">={EXACT}") } else { size.to_string() };
        let per = n as f64 / f64::from(users);
        println!("{shown:>8} {n:>9} {per:>10.2} {:>10.0}", per * size as f64);
    }
}
