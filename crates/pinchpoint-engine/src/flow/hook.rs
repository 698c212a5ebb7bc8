//! A hook changes a flow's request before it is sent: what a plan cannot say (a
//! signature, a computed body). Hooks run one at a time on a thread of their own, so a
//! slow one delays only the users waiting for it, never the engine's other users.

use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::config::flow::Hook;
use crate::config::RequestSpec;

struct Job {
    endpoint: u16,
    vars: Vec<(String, String)>,
    request: RequestSpec,
    reply: oneshot::Sender<Result<RequestSpec, String>>,
}

/// The hook's thread; it ends when the last handle is dropped.
#[derive(Clone)]
pub struct HookRunner {
    tx: mpsc::Sender<Job>,
}

impl HookRunner {
    pub fn start(hook: Arc<dyn Hook>) -> Result<Self, String> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("pinchpoint-hook".into())
            .spawn(move || {
                for mut job in rx {
                    let done = hook.call(job.endpoint, &job.vars, &mut job.request).map(|()| job.request);
                    let _ = job.reply.send(done);
                }
            })
            .map_err(|e| format!("cannot start the hook thread: {e}"))?;
        Ok(Self { tx })
    }

    /// The request as the hook left it.
    pub async fn call(
        &self,
        endpoint: u16,
        vars: Vec<(String, String)>,
        request: RequestSpec,
    ) -> Result<RequestSpec, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Job { endpoint, vars, request, reply })
            .map_err(|_| "the hook thread has ended".to_string())?;
        answer.await.map_err(|_| "the hook thread ended before answering".to_string())?
    }
}
