//! The HTML reports in a real headless Chromium (through chromedriver): they load from
//! file:// without a single console error, hold their SVG plots with drawn content, fetch
//! nothing, and print to PDF. A control page with one forbidden external image proves the
//! console check does catch errors.

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use url::{ParseError, Url};
use viewerfleet::fleet::chromedriver::ChromeDriver;
use viewerfleet::model::scenario::fleet::{DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use viewerfleet::report;

use crate::support::fixtures as fixture_support;
use fixture_support::copy_of;

/// `POST /session/{id}/se/log`: the browser's console log since the last call.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &Url, session: Option<&str>) -> Result<Url, ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }
    fn method_and_body(&self, _url: &Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// `POST /session/{id}/goog/cdp/execute`.
#[derive(Debug)]
struct Cdp(&'static str, Value);

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(&self, base: &Url, session: Option<&str>) -> Result<Url, ParseError> {
        base.join(&format!(
            "session/{}/goog/cdp/execute",
            session.unwrap_or_default()
        ))
    }
    fn method_and_body(&self, _url: &Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"cmd": self.0, "params": self.1}).to_string()),
        )
    }
}

/// What a page showed.
#[derive(Debug)]
struct PageCheck {
    severe: Vec<String>,
    plots: Vec<Value>,
    resources: u64,
    scripts: u64,
    pdf_bytes: usize,
    /// Pairs of texts of one plot whose drawn boxes (turned with their text) intersect.
    overlaps: Vec<String>,
    /// Texts that reach outside their plot.
    clipped: Vec<String>,
    /// How far the page is wider than the window (px): 0 when nothing widens it.
    page_overflow: f64,
}

/// Every plot's texts as the browser drew them: each text's box turned with it (its bounding
/// box mapped through its transform to the screen), tested pairwise for intersection by the
/// separating-axis test, and against its plot's edges.
const LAYOUT_CHECK: &str = "
  const corners = t => { const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const axes = p => p.map((q, i) => { const r = p[(i + 1) % p.length]; return [q[1] - r[1], r[0] - q[0]]; });
  const span = (p, a) => { const v = p.map(q => q[0] * a[0] + q[1] * a[1]); return [Math.min(...v), Math.max(...v)]; };
  const hit = (p, q) => [...axes(p), ...axes(q)].every(a => {
    const n = Math.hypot(a[0], a[1]) || 1, [p0, p1] = span(p, a), [q0, q1] = span(q, a);
    return Math.min(p1, q1) - Math.max(p0, q0) > 0.5 * n; });
  const overlaps = [], clipped = [];
  for (const s of document.querySelectorAll('svg.plot')) {
    const name = (s.querySelector('title') || {}).textContent || '';
    const box = s.getBoundingClientRect();
    const texts = [...s.querySelectorAll('text')].filter(t => t.getBBox().width > 0)
      .map(t => ({ label: t.childNodes[t.childNodes.length - 1].textContent, poly: corners(t) }));
    texts.forEach((a, i) => {
      if (a.poly.some(([x, y]) => x < box.left - 1 || x > box.right + 1 || y < box.top - 1 || y > box.bottom + 1))
        clipped.push(name + ': ' + a.label);
      texts.slice(i + 1).forEach(b => { if (hit(a.poly, b.poly)) overlaps.push(name + ': ' + a.label + ' / ' + b.label); });
    });
  }
  return { overlaps, clipped,
           page_overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth };
";

async fn open_and_check(client: &Client, file: &Path) -> anyhow::Result<PageCheck> {
    // Drop whatever an earlier page logged.
    client.issue_cmd(BrowserLog).await?;
    client
        .goto(Url::from_file_path(file).unwrap().as_str())
        .await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = client.execute("return document.readyState", vec![]).await?;
        if state == "complete" {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "page never finished loading: {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let facts = client
        .execute(
            "return {
               plots: [...document.querySelectorAll('svg.plot')].map(s => {
                 const r = s.getBoundingClientRect();
                 return { title: (s.querySelector('title') || {}).textContent || '',
                          width: r.width, height: r.height,
                          marks: s.querySelectorAll('path, rect').length - 1 };
               }),
               resources: performance.getEntriesByType('resource').length,
               scripts: document.scripts.length,
             }",
            vec![],
        )
        .await?;
    let layout = client.execute(LAYOUT_CHECK, vec![]).await?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let pdf = client
        .issue_cmd(Cdp("Page.printToPDF", json!({"printBackground": true})))
        .await?;
    let pdf_bytes = pdf["data"].as_str().map_or(0, str::len);
    let log = client.issue_cmd(BrowserLog).await?;
    let severe = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].to_string())
        .collect();
    Ok(PageCheck {
        severe,
        plots: facts["plots"].as_array().cloned().unwrap_or_default(),
        resources: facts["resources"].as_u64().unwrap_or(u64::MAX),
        scripts: facts["scripts"].as_u64().unwrap_or(u64::MAX),
        pdf_bytes,
        overlaps: strings(&layout["overlaps"]),
        clipped: strings(&layout["clipped"]),
        page_overflow: layout["page_overflow"].as_f64().unwrap_or(f64::MAX),
    })
}

async fn check_pages(driver: &ChromeDriver, pages: &[PathBuf]) -> anyhow::Result<Vec<PageCheck>> {
    let profile = tempfile::tempdir()?;
    let caps = json!({
        "browserName": "chrome",
        "goog:loggingPrefs": {"browser": "ALL"},
        "goog:chromeOptions": {
            "binary": DEFAULT_CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--window-size=1400,900",
                     format!("--user-data-dir={}", profile.path().display())],
        },
    });
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(caps.as_object().unwrap().clone());
    let client = tokio::time::timeout(Duration::from_secs(60), builder.connect(&driver.url()))
        .await
        .map_err(|_| anyhow::anyhow!("no browser session within 60 s"))??;
    let mut out = Vec::new();
    let mut result = Ok(());
    for page in pages {
        match open_and_check(&client, page).await {
            Ok(check) => out.push(check),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    // Release the browser whatever happened above.
    let _ = client.close().await;
    result.map(|_| out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_reports_open_in_chromium_without_errors_and_hold_their_plots() {
    let (tmp, run) = copy_of("run-steady");
    report::write_report(&run).unwrap();
    let cmp_dir = tmp.path().join("cmp");
    let cmp = report::compare::compare_dirs(std::slice::from_ref(&run), false);
    report::render::write_compare(&cmp, &cmp_dir).unwrap();
    // Control: the same report with one external image, which the page's policy forbids.
    let control = tmp.path().join("control.html");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    std::fs::write(
        &control,
        html.replacen(
            "<h1>",
            "<img src=\"http://127.0.0.1:9/forbidden.png\" alt=\"\"><h1>",
            1,
        ),
    )
    .unwrap();

    let driver = ChromeDriver::start(Path::new(DEFAULT_CHROMEDRIVER))
        .await
        .expect("chromedriver (apt-get install -y chromium-driver)");
    let pages = [
        run.join("report.html"),
        cmp_dir.join("compare.html"),
        control,
    ];
    let result = check_pages(&driver, &pages).await;
    driver.shutdown().await;
    let checks = result.unwrap();

    let (report_page, compare_page, control_page) = (&checks[0], &checks[1], &checks[2]);
    for page in [report_page, compare_page] {
        assert!(
            page.overlaps.is_empty(),
            "texts overlap: {:#?}",
            page.overlaps
        );
        assert!(
            page.clipped.is_empty(),
            "texts cut off: {:#?}",
            page.clipped
        );
    }
    assert!(
        report_page.severe.is_empty(),
        "console errors: {:?}",
        report_page.severe
    );
    assert!(
        compare_page.severe.is_empty(),
        "console errors: {:?}",
        compare_page.severe
    );
    assert!(
        !control_page.severe.is_empty(),
        "the console check must catch the forbidden image"
    );
    for check in [report_page, compare_page] {
        assert_eq!(check.resources, 0, "the report fetched something");
        assert_eq!(check.scripts, 0);
        assert!(
            check.pdf_bytes > 10_000,
            "printing gave {} bytes",
            check.pdf_bytes
        );
        for plot in &check.plots {
            assert!(plot["width"].as_f64().unwrap() > 100.0, "{plot}");
            assert!(plot["height"].as_f64().unwrap() > 100.0, "{plot}");
            assert!(plot["marks"].as_u64().unwrap() >= 1, "empty plot: {plot}");
        }
    }
    let titles: Vec<&str> = report_page
        .plots
        .iter()
        .filter_map(|p| p["title"].as_str())
        .collect();
    for want in [
        "HTTP vs P2P, exporter",
        "HTTP vs P2P, players",
        "Viewers watching",
        "Host CPU busy",
        "Downloaded per viewer",
        "Time to first frame",
        "Stalls per minute",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(want)),
            "no plot {want:?} in {titles:?}"
        );
    }
    assert!(compare_page.plots.len() >= 3, "{:?}", compare_page.plots);
}

/// The comparison page a donor reads, of a demo's ten runs with long names: no two texts of a
/// plot overlap, none is cut off at a plot's edge, the page is no wider than the window (the
/// table scrolls in its own box), percentage axes stop at 100%, and no negative "P2P
/// undelivered" figure is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_comparison_of_ten_runs_reads_at_a_glance() {
    let names = [
        "live-normal@http-only-1",
        "live-normal@tc-1",
        "live-high@http-only-1",
        "live-high@tc-1",
        "live-high-half-p2p-off@http-only-1",
        "live-high-half-p2p-off@tc-1",
        "vod@http-only-1",
        "vod@tc-1",
        "live-normal@http-only-2",
        "live-normal@http-only-3",
    ];
    let holder = tempfile::tempdir().unwrap();
    let mut copies = Vec::new();
    let mut runs = Vec::new();
    for name in names {
        let (tmp, run) = copy_of("run-steady");
        let dir = holder.path().join(name);
        std::fs::rename(&run, &dir).unwrap();
        copies.push(tmp);
        runs.push(dir);
    }
    let cmp_dir = holder.path().join("cmp");
    let cmp = report::compare::compare_dirs(&runs, false);
    report::render::write_compare(&cmp, &cmp_dir).unwrap();
    let page = cmp_dir.join("compare.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("−0.") && !html.contains(">-0."),
        "a negative figure is printed"
    );

    let driver = ChromeDriver::start(Path::new(DEFAULT_CHROMEDRIVER))
        .await
        .expect("chromedriver (apt-get install -y chromium-driver)");
    let checks = check_pages(&driver, &[page]).await;
    driver.shutdown().await;
    let check = &checks.expect("the page opens")[0];
    assert!(check.plots.len() >= 3, "{:?}", check.plots);
    assert!(
        check.overlaps.is_empty(),
        "texts overlap: {:#?}",
        check.overlaps
    );
    assert!(
        check.clipped.is_empty(),
        "texts cut off: {:#?}",
        check.clipped
    );
    assert!(
        check.page_overflow <= 0.0,
        "the page is {} px wider than the window",
        check.page_overflow
    );
}
