//! Prometheus: a parser for the text exposition format (scraped exporters), the scraper
//! that turns one scrape into an `ExporterSample`, the controller's own metrics, and the
//! relay of the target's exporter through them.

pub mod controller;
pub mod prom_text;
pub(crate) mod relay;
pub mod scrape;
