//! Prometheus: a parser for the text exposition format (scraped exporters), the scraper
//! that turns one scrape into an `ExporterSample`, and the controller's own metrics.

pub mod controller;
pub mod prom_text;
pub mod scrape;
