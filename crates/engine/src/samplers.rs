//! Periodic samplers of a run: host resources (the load generator and the target's
//! processes) and the target's exporter. Each writes raw data as it goes.

use super::recorder::Record;
use super::shared::Shared;
use crate::metrics::scrape::Scraper;
use crate::model::rawdata::HostSample;
use crate::sys::hostinfo;
use std::sync::Arc;

pub(super) async fn sample_host(shared: Arc<Shared>, target_pid: Option<u32>) {
    let mut cpu = hostinfo::CpuMeter::default();
    cpu.sample();
    let mut pressure = hostinfo::PressureMeter::default();
    pressure.sample();
    let mut browsers = hostinfo::ProcessGroupMeter::new("chromium", std::process::id());
    let mut light_hosts = hostinfo::ProcessGroupMeter::new("node", std::process::id());
    let cores = hostinfo::host_info().cpus;
    let mut ticker = tokio::time::interval(shared.sampling_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => return,
        }
        let t = shared.rec.now();
        // procfs walks block; keep them off the async workers.
        let result = tokio::task::spawn_blocking(move || {
            let shares = cpu.sample();
            let (total, available) = hostinfo::meminfo();
            let target = target_pid.and_then(hostinfo::process_tree_usage);
            let table = hostinfo::process_table();
            let (all, own) = browsers.sample_in(&table);
            let (_, hosts) = light_hosts.sample_in(&table);
            let sample = HostSample {
                t,
                cpu_busy: shares.map_or(0.0, |s| s.busy),
                cpu_steal: shares.map(|s| s.steal),
                cpu_pressure: pressure.sample(),
                browsers_cpu_s: Some(all.cpu_s),
                browsers_pss_bytes: Some(all.pss_bytes),
                browser_processes: Some(all.processes),
                own_browsers_cpu_s: Some(own.cpu_s),
                own_browsers_pss_bytes: Some(own.pss_bytes),
                own_browser_processes: Some(own.processes),
                light_hosts_cpu_s: Some(hosts.cpu_s),
                light_hosts_pss_bytes: Some(hosts.pss_bytes),
                light_host_processes: Some(hosts.processes),
                cores,
                mem_used_bytes: total.saturating_sub(available),
                mem_total_bytes: total,
                load1: hostinfo::load1(),
                target_cpu_s: target.map(|(c, _)| c),
                target_rss_bytes: target.map(|(_, r)| r),
            };
            (cpu, pressure, (browsers, light_hosts), sample)
        })
        .await;
        let Ok((meter, pressure_meter, (browsers_meter, hosts_meter), sample)) = result else {
            tracing::error!("host sampler stopped");
            return;
        };
        cpu = meter;
        pressure = pressure_meter;
        browsers = browsers_meter;
        light_hosts = hosts_meter;
        shared.metrics.host_cpu_busy_ratio.set(sample.cpu_busy);
        if let Some(c) = sample.target_cpu_s {
            shared.metrics.target_cpu_seconds.set(c);
        }
        if let Some(rss) = sample.target_rss_bytes {
            shared.metrics.target_resident_memory_bytes.set(rss as f64);
        }
        shared.rec.send(Record::Host(sample));
    }
}

pub(super) async fn sample_exporter(shared: Arc<Shared>, scraper: Scraper) {
    let mut ticker = tokio::time::interval(shared.sampling_interval);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => return,
        }
        let (sample, body) = scraper.scrape_with_body(shared.rec.now()).await;
        let m = &shared.metrics;
        m.relay_target(scraper.url(), body.as_deref());
        m.scrape_duration_seconds.set(sample.latency_ms / 1000.0);
        m.scrape_up.set(sample.ok as i64);
        m.scrapes
            .with_label_values(&[if sample.ok { "ok" } else { "error" }])
            .inc();
        match &sample.error {
            Some(err) => {
                // Log a failure once, not at every interval.
                if last_error.as_deref() != Some(err) {
                    tracing::warn!("scraping {}: {err}", scraper.url());
                }
                last_error = Some(err.clone());
            }
            None => {
                last_error = None;
                let mut live = shared.live();
                if live.first_exporter.is_none() {
                    live.first_exporter = Some(sample.clone());
                }
                live.last_exporter = Some(sample.clone());
            }
        }
        shared.rec.send(Record::Exporter(sample));
    }
}
