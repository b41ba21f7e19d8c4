//! Browsers shared by several viewers (`viewers.per_browser` > 1). Viewer tasks stay one
//! per viewer; the viewers of one browser (`index / per_browser`) meet here. The first to
//! arrive opens the browser's slot and creates its session (with the fleet's retries and
//! a start permit), the others wait for it and join; each holds a reference, and the last
//! to leave deletes the session and releases the slot. A browser found dead (its BiDi
//! socket closed, or it no longer answers) is marked lost once, with the words every one
//! of its viewers records; a viewer that starts a new life after that gets a new browser.

use super::shared::Shared;
use super::viewer_task::{create_with_retries, Created, NotStarted, ViewerEvents};
use crate::model::rawdata::ViewerEventKind;
use crate::model::scenario::{BrowserPlan, Plan, ViewerPlan};
use crate::viewer::{SharedBrowser, Viewer, ViewerSlot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The run's shared browsers, by browser index.
pub(super) struct Browsers {
    plans: HashMap<u32, BrowserPlan>,
    current: HashMap<u32, tokio::sync::Mutex<Option<Arc<Entry>>>>,
}

/// One browser and the viewers attached to it.
pub(super) struct Entry {
    pub index: u32,
    pub browser: Arc<SharedBrowser>,
    pub slot: ViewerSlot,
    /// Its planned viewers, e.g. `8–11`.
    range: String,
    users: Mutex<u32>,
    lost: Mutex<Option<String>>,
}

impl Entry {
    /// Marks the browser lost (the first caller's words stay) and returns the reason its
    /// viewers record: which browser, how many viewers it held, what happened.
    pub(crate) fn mark_lost(&self, detail: &str) -> String {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        lost.get_or_insert_with(|| {
            let held = *self.users.lock().unwrap_or_else(|e| e.into_inner());
            format!(
                "browser {} lost with the {held} viewer(s) it held (viewers {}, session {}, {}): {detail}",
                self.index,
                self.range,
                self.browser.session_id.as_deref().unwrap_or("unknown"),
                self.slot.node,
            )
        })
        .clone()
    }

    fn is_lost(&self) -> bool {
        self.browser.is_gone()
            || self
                .lost
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
    }
}

/// Why a viewer could not join its browser.
pub(super) enum JoinError {
    /// The run ended while waiting or creating, at this stage.
    RunEnded(NotStarted),
    /// No slot, or the session was refused; recorded as the viewer's failure.
    Failed(String, Option<ViewerSlot>),
    /// The run ended while its browser was being created; already recorded.
    Recorded,
}

impl Browsers {
    pub fn new(plan: &Plan) -> Self {
        let plans: HashMap<u32, BrowserPlan> = plan
            .browser_plans()
            .into_iter()
            .map(|b| (b.index, b))
            .collect();
        let current = plans
            .keys()
            .map(|i| (*i, tokio::sync::Mutex::new(None)))
            .collect();
        Self { plans, current }
    }

    /// Joins the viewer's browser, creating it if it has none (or only a lost one).
    pub async fn join(
        &self,
        vp: &ViewerPlan,
        shared: &Arc<Shared>,
        events: &ViewerEvents,
    ) -> Result<Arc<Entry>, JoinError> {
        let (Some(group), Some(plan)) =
            (self.current.get(&vp.browser), self.plans.get(&vp.browser))
        else {
            return Err(JoinError::Failed(
                format!("viewer {} has no browser in the plan", vp.index),
                None,
            ));
        };
        let mut current = tokio::select! {
            biased;
            _ = shared.run_end.cancelled() => {
                return Err(JoinError::RunEnded(NotStarted::WaitingForBrowser))
            }
            c = group.lock() => c,
        };
        if let Some(entry) = current.as_ref().filter(|e| !e.is_lost()) {
            *entry.users.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            return Ok(entry.clone());
        }
        let entry = Arc::new(create(plan, shared, events).await?);
        *entry.users.lock().unwrap_or_else(|e| e.into_inner()) = 1;
        *current = Some(entry.clone());
        Ok(entry)
    }

    /// Leaves the browser, closing the viewer's tab; the last viewer to leave deletes the
    /// session instead (which closes every tab) and releases the slot.
    pub async fn leave(&self, entry: &Arc<Entry>, viewer: Option<Viewer>, shared: &Shared) {
        let Some(group) = self.current.get(&entry.index) else {
            return;
        };
        let mut current = group.lock().await;
        let left = {
            let mut users = entry.users.lock().unwrap_or_else(|e| e.into_inner());
            *users = users.saturating_sub(1);
            *users
        };
        if left > 0 {
            drop(current);
            if let Some(viewer) = viewer {
                viewer.close().await;
            }
            return;
        }
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, entry)) {
            *current = None;
        }
        // Under the group's lock: a viewer arriving now waits for the slot to be free.
        entry.browser.close().await;
        if let Some(id) = &entry.browser.session_id {
            shared.fleet.session_closed(id);
        }
        shared.fleet.close_viewer(&entry.slot).await;
    }
}

/// Opens the browser's slot and creates its session, with a start permit and the fleet's
/// retries; records the slot's placement.
async fn create(
    plan: &BrowserPlan,
    shared: &Arc<Shared>,
    events: &ViewerEvents,
) -> Result<Entry, JoinError> {
    let _permit = tokio::select! {
        biased;
        _ = shared.run_end.cancelled() => return Err(JoinError::RunEnded(NotStarted::WaitingToAsk)),
        p = shared.starts.acquire() => p.ok(),
    };
    let mut slot = shared
        .fleet
        .open_browser(plan)
        .await
        .map_err(|err| JoinError::Failed(format!("no slot: {err:#}"), None))?;
    let began = Instant::now();
    let created = create_with_retries(
        || SharedBrowser::create(&slot, shared.timeouts.clone(), &shared.browser),
        shared,
        &shared.fleet.start_policy(),
        events,
    )
    .await;
    let browser = match created {
        Created::Ok(browser) => browser,
        Created::RunEnded(late) => {
            if let Some(late) = late {
                late.close().await;
            }
            shared.fleet.close_viewer(&slot).await;
            return Err(JoinError::Recorded);
        }
        Created::Failed(reason) => {
            shared.fleet.close_viewer(&slot).await;
            return Err(JoinError::Failed(reason, Some(slot)));
        }
    };
    shared
        .metrics
        .session_create_seconds
        .observe(began.elapsed().as_secs_f64());
    if let Some(id) = &browser.session_id {
        shared.fleet.session_placed(&mut slot, id).await;
    }
    tracing::debug!(
        "browser {} for viewers {} on {}",
        plan.index,
        plan.viewer_range(),
        slot.node
    );
    Ok(Entry {
        index: plan.index,
        browser,
        slot,
        range: plan.viewer_range(),
        users: Mutex::new(0),
        lost: Mutex::new(None),
    })
}

/// A join failure as the viewer's raw events tell it.
pub(super) fn record_failure(events: &ViewerEvents, err: JoinError) {
    match err {
        JoinError::RunEnded(stage) => events.not_started(stage, None),
        JoinError::Recorded => {}
        JoinError::Failed(reason, slot) => {
            events.emit(ViewerEventKind::Failed, Some(reason), slot.as_ref())
        }
    }
}
