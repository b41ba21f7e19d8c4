//! Prometheus: a parser for the text exposition format (scraped exporters) and the
//! controller's own metrics.
