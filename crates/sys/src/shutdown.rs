//! Ctrl-C, SIGTERM, SIGHUP and SIGQUIT: one cancellation token for the whole process, so
//! every task winds down through its normal cleanup path instead of the process dying with
//! resources held. SIGHUP (a closed terminal, a dropped SSH session) and SIGQUIT (Ctrl-\)
//! are handled as SIGTERM is, and exit as it does (143).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The process-wide stop signal. Cloning is cheap; all clones see the same state.
#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    signal: Arc<AtomicI32>,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts listening for SIGINT, SIGTERM, SIGHUP and SIGQUIT; the first one cancels the
    /// token. Later ones only log that cleanup is under way.
    pub fn listen_for_signals(&self) -> anyhow::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut quit = signal(SignalKind::quit())?;
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let number = tokio::select! {
                    _ = interrupt.recv() => libc::SIGINT,
                    _ = terminate.recv() => libc::SIGTERM,
                    _ = hangup.recv() => libc::SIGHUP,
                    _ = quit.recv() => libc::SIGQUIT,
                };
                if this.token.is_cancelled() {
                    tracing::warn!(
                        "still cleaning up; please wait for browsers and namespaces to be released"
                    );
                } else {
                    tracing::warn!(
                        "{} received: stopping viewers and releasing everything",
                        signal_name(number)
                    );
                    this.signal.store(number, Ordering::SeqCst);
                    this.token.cancel();
                }
            }
        });
        Ok(())
    }

    /// Requests a stop from inside the program (e.g. a fatal error in one task).
    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The signal that stopped us, if it was a signal.
    pub fn signal(&self) -> Option<&'static str> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            n => Some(signal_name(n)),
        }
    }

    /// How a command stopped by signal exits (`exit_code` as a category).
    pub fn exit(&self) -> crate::model::exit::Exit {
        crate::model::exit::Exit::Interrupted {
            sigterm: self.terminated(),
        }
    }

    /// Stopped by SIGTERM or one handled as it is (SIGHUP, SIGQUIT).
    fn terminated(&self) -> bool {
        matches!(self.signal(), Some("SIGTERM" | "SIGHUP" | "SIGQUIT"))
    }

    /// The exit code for a stop by signal: 143 after SIGTERM (SIGHUP, SIGQUIT), 130 after
    /// Ctrl-C (or an internal stop), as shells report a process killed by SIGTERM or SIGINT.
    pub fn exit_code(&self) -> u8 {
        if self.terminated() {
            crate::model::exit::Exit::SIGTERM
        } else {
            crate::model::exit::Exit::SIGINT
        }
    }

    pub async fn wait(&self) {
        self.token.cancelled().await
    }

    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

fn signal_name(number: i32) -> &'static str {
    match number {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        _ => "signal",
    }
}
