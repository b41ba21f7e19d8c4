//! Teardown on every exit path. Provisioning runs in its own task; whatever ends it — an
//! error, a panic, Ctrl-C or SIGTERM — the run's resources are deleted by label before the
//! caller sees the outcome. Only success leaves them (to the fleet's `shutdown` or `down`).
//! When the teardown itself cannot finish, its error (naming what is left and what to run)
//! is what the caller gets, and the run's reaper (if any) is told to take over; after a
//! complete teardown it is told the run is done.

use super::api::HcloudApi;
use super::provision;
use super::reaper::ReaperLink;
use super::CloudError;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long provisioning may take to notice a cancellation (finish in-flight creates, so
/// teardown sees every server) before it is aborted.
const GRACE: Duration = Duration::from_secs(60);

/// Runs `work`, which creates resources labelled with `run_id`, and deletes them all unless it
/// succeeds. A panic inside `work` becomes [`CloudError::Panicked`] after the teardown.
pub async fn teardown_unless_ok<T, F>(
    api: &HcloudApi,
    run_id: &str,
    cancel: &CancellationToken,
    reaper: Option<&ReaperLink>,
    work: F,
) -> Result<T, CloudError>
where
    F: Future<Output = Result<T, CloudError>> + Send + 'static,
    T: Send + 'static,
{
    let mut task = tokio::spawn(work);
    let joined = tokio::select! {
        r = &mut task => r,
        _ = cancel.cancelled() => match tokio::time::timeout(GRACE, &mut task).await {
            Ok(r) => r,
            Err(_) => {
                task.abort();
                let _ = (&mut task).await;
                Ok(Err(CloudError::Cancelled))
            }
        },
    };
    let error = match joined {
        Ok(Ok(value)) if !cancel.is_cancelled() => return Ok(value),
        Ok(Ok(_)) => CloudError::Cancelled,
        Ok(Err(e)) => e,
        Err(join) if join.is_panic() => {
            let payload = join.into_panic();
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            CloudError::Panicked(text)
        }
        Err(_) => CloudError::Cancelled,
    };
    tracing::warn!("{error}; deleting every resource of run {run_id}");
    match provision::teardown(api, run_id).await {
        Ok(deleted) => {
            tracing::info!("deleted {} of run {run_id}", deleted.summary());
            if let Some(r) = reaper {
                r.done();
            }
            Err(error)
        }
        // What is still billing matters more than why provisioning stopped (logged above).
        Err(e @ CloudError::TeardownIncomplete { .. }) => {
            tracing::error!("TEARDOWN FAILED: {e}");
            if let Some(r) = reaper {
                r.take_over();
            }
            Err(e)
        }
        Err(e) => {
            if let Some(r) = reaper {
                r.take_over();
            }
            tracing::error!(
                "TEARDOWN FAILED for run {run_id}: {e}. Run `viewerfleet down {run_id}` or delete the servers labelled {}={run_id} in the Hetzner Console",
                provision::LABEL_RUN
            );
            Err(error)
        }
    }
}
