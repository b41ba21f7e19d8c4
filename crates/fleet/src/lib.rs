//! Where viewers run and what they watch: the parts a run is made of (a browser and its
//! viewers, the target platform, network namespaces, metrics, Selenium Grid, Hetzner
//! Cloud) and the fleets built on them (`fleet`: local, netns, grid, hcloud).

pub mod cloud;
pub mod fleet;
pub mod grid;
pub mod metrics;
pub mod netns;
pub mod target;
pub mod viewer;

use viewerfleet_model as model;
use viewerfleet_stun as stun;
use viewerfleet_sys as sys;
