//! The operating system as every layer needs it, one place each: the stop signal
//! (Ctrl-C/SIGTERM), child processes that end with the controller and are terminated the
//! same way everywhere, facts about this host and its processes, CPU cgroups, and TLS as a
//! client with the system's roots, and the jittered waits between retries.

pub mod backoff;
pub mod cgroup;
pub mod hostinfo;
pub mod net;
pub mod process;
pub mod shutdown;
pub mod tls;

use viewerfleet_model as model;
