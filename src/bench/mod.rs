//! Measuring viewerfleet itself: a fast WebDriver stub so the controller's own cost per
//! session is visible (see BENCHMARKS.md).

pub mod webdriver_stub;
