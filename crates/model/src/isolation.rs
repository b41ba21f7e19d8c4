//! How browsers ran: as which user, and whether with Chromium's sandbox. The `netns` fleet
//! asks its slot wrapper before the run (its fleet note); Grid nodes count their running
//! browsers that way (`grid/node-load.py`, the node samples' `browsers_by_isolation`), and
//! the report says it from those counts. One type and one wording for both.

use serde::{Deserialize, Serialize};

/// The system user the viewer slots' Chromium wrapper runs browsers as (`browser_exec` in
/// `grid/slot-chromium.sh`): a user of their own.
pub(crate) const BROWSER_USER: &str = "viewerfleet-browser";

/// How browsers ran on one machine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrowserIsolation {
    /// The user the browser process ran as (its real uid's name).
    pub user: String,
    /// With Chromium's sandbox (started without `--no-sandbox`).
    pub sandbox: bool,
}

/// Where the browsers ran, for the reason a sentence gives.
#[derive(Clone, Copy)]
enum Machine {
    Controller,
    Nodes,
}

impl BrowserIsolation {
    /// As the user of their own (`BROWSER_USER`), not the controller's or a node's.
    pub fn own_user(&self) -> bool {
        self.user == BROWSER_USER
    }

    /// As root.
    pub fn root(&self) -> bool {
        self.user == "root"
    }

    /// One sentence for browsers on the controller's machine (the `netns` fleet).
    pub fn sentence(&self) -> String {
        self.told("Browsers", Machine::Controller)
    }

    /// One sentence for the browsers on `nodes` of the `of` nodes that counted theirs.
    pub fn on_nodes(&self, nodes: usize, of: usize) -> String {
        let who = if nodes == of && of == 1 {
            "Browsers on the node".to_string()
        } else if nodes == of {
            format!("Browsers on all {of} nodes")
        } else {
            format!("Browsers on {nodes} of {of} nodes")
        };
        self.told(&who, Machine::Nodes)
    }

    fn told(&self, who: &str, machine: Machine) -> String {
        let user = &self.user;
        let kernel = match machine {
            Machine::Controller => "this kernel does",
            Machine::Nodes => "their kernel does",
        };
        match (self.own_user(), self.sandbox, machine) {
            (true, true, _) => format!("{who} ran as user {user}, of their own, with Chromium's sandbox"),
            (true, false, _) => format!(
                "{who} ran as user {user}, of their own, but without Chromium's sandbox: {kernel} not let that user make a user namespace (kernel.unprivileged_userns_clone, user.max_user_namespaces or an AppArmor restriction), so Chromium ran with --no-sandbox"
            ),
            (false, _, Machine::Controller) => format!(
                "{who} ran as the controller's user ({user}) without Chromium's sandbox: a user of their own needs a controller running as root that can add one (useradd)"
            ),
            (false, sandbox, Machine::Nodes) => format!(
                "{who} ran as {}, not as a user of their own, {}: a user of their own needs the viewer slots' Chromium wrapper (grid/slot-chromium.sh) started as root",
                if self.root() { "root".to_string() } else { format!("user {user}") },
                if sandbox { "with Chromium's sandbox" } else { "and without Chromium's sandbox (--no-sandbox)" },
            ),
        }
    }
}

/// Browsers that ran alike, counted: part of one reading of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationCount {
    #[serde(flatten)]
    pub isolation: BrowserIsolation,
    /// Top-level browser processes (one per browser, its helpers not counted).
    pub browsers: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn way(user: &str, sandbox: bool) -> BrowserIsolation {
        BrowserIsolation {
            user: user.into(),
            sandbox,
        }
    }

    #[test]
    fn the_controllers_browsers_are_told_by_user_and_sandbox() {
        let on = way(BROWSER_USER, true);
        assert!(on.own_user() && !on.root());
        assert_eq!(
            on.sentence(),
            "Browsers ran as user viewerfleet-browser, of their own, with Chromium's sandbox"
        );
        assert!(way(BROWSER_USER, false)
            .sentence()
            .contains("without Chromium's sandbox: this kernel does not let"));
        assert!(way("ann", false)
            .sentence()
            .contains("controller's user (ann)"));
    }

    #[test]
    fn nodes_browsers_are_told_with_how_many_nodes() {
        assert_eq!(
            way(BROWSER_USER, true).on_nodes(3, 3),
            "Browsers on all 3 nodes ran as user viewerfleet-browser, of their own, with \
             Chromium's sandbox"
        );
        assert!(way(BROWSER_USER, true)
            .on_nodes(1, 1)
            .starts_with("Browsers on the node ran"));
        let root = way("root", false).on_nodes(1, 3);
        assert!(
            root.starts_with(
                "Browsers on 1 of 3 nodes ran as root, not as a user of their own, and without \
                 Chromium's sandbox (--no-sandbox)"
            ),
            "{root}"
        );
        assert!(way(BROWSER_USER, false)
            .on_nodes(2, 3)
            .contains("but without Chromium's sandbox: their kernel does not let"));
        assert!(way("selenium", true)
            .on_nodes(2, 2)
            .contains("ran as user selenium, not as a user of their own, with Chromium's sandbox"));
    }

    #[test]
    fn a_count_reads_as_flat_json() {
        let count = IsolationCount {
            isolation: way(BROWSER_USER, true),
            browsers: 4,
        };
        let text = serde_json::to_string(&count).unwrap();
        assert_eq!(
            text,
            r#"{"user":"viewerfleet-browser","sandbox":true,"browsers":4}"#
        );
        assert_eq!(
            serde_json::from_str::<IsolationCount>(&text).unwrap(),
            count
        );
    }
}
