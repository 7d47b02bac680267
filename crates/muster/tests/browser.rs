//! The HTML reports as a person sees them: each is opened in headless Chromium (Debian's
//! `chromium`; `.ci/run` installs it when missing), which must log no console message, render
//! every plot with data, and leave a screenshot under `target/` (`CARGO_TARGET_TMPDIR`) for the
//! CI artifacts. A page with a script error checks that the console check itself can fail.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn chromium() -> &'static str {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return name;
        }
    }
    panic!("headless Chromium is needed for this test: apt-get install chromium (.ci/run installs it)");
}

/// Loads `page` in headless Chromium: the DOM it rendered, and the console messages it logged.
fn open(page: &Path, screenshot: Option<&Path>) -> (String, Vec<String>) {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut cmd = Command::new(chromium());
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--log-level=0"]);
    // A profile of its own per call: tests run in parallel and Chromium locks its profile.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = std::env::temp_dir().join(format!("muster-chromium-{}-{n}", std::process::id()));
    cmd.arg("--window-size=800,2600").arg(format!("--user-data-dir={}", profile.display()));
    match screenshot {
        Some(path) => cmd.arg(format!("--screenshot={}", path.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(&url).output().expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let console =
        String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(String::from).collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every figure's SVG holds a line with points (`<path d="M...L...">`); with `changing`, a line
/// whose height changes (not a flat line at zero), in every figure.
fn assert_every_plot_has_data(dom: &str, figures: usize, changing: bool) {
    let svgs: Vec<&str> = dom.split("<svg").skip(1).map(|s| s.split("</svg>").next().unwrap()).collect();
    assert_eq!(svgs.len(), figures, "figures rendered");
    for (i, svg) in svgs.iter().enumerate() {
        let lines: Vec<&str> = svg.split("<path d=\"").skip(1).filter_map(|p| p.split('"').next()).collect();
        assert!(lines.iter().any(|d| d.contains('L')), "figure {i} has no line with data");
        assert!(!changing || lines.iter().any(|d| heights(d) > 1), "figure {i} has only flat lines: {lines:?}");
    }
}

/// How many different heights a path's points have.
fn heights(d: &str) -> usize {
    let ys: std::collections::BTreeSet<&str> =
        d.split(['M', 'L']).filter_map(|p| p.trim().split_once(',')).map(|(_, y)| y).collect();
    ys.len()
}

fn render(args: &[&str], name: &str) -> PathBuf {
    let path = artifacts().join(format!("{name}.html"));
    let mut all = args.to_vec();
    let out = path.to_str().unwrap();
    all.extend(["-o", "html", "--out", out]);
    let o = common::muster(&all);
    assert!(o.status.success(), "{}", common::stderr(&o));
    path
}

#[test]
fn the_sim_reports_render_in_headless_chromium_without_console_messages() {
    // The preemption trace moves every figure: a gang, a preemption, devices freed and taken.
    let report = render(
        &["sim", "tests/sim/preemption/cluster.yaml", "--trace", "tests/sim/preemption/trace.yaml"],
        "sim-report",
    );
    let comparison = render(
        &[
            "sim",
            "tests/sim/packing-least/cluster.yaml",
            "--trace",
            "tests/sim/packing-least/trace.yaml",
            "--compare",
            "most-allocated",
        ],
        "sim-compare",
    );
    let endpoint = render(
        &["sim", "tests/sim/scale-to-zero/cluster.yaml", "--trace", "tests/sim/scale-to-zero/trace.yaml"],
        "sim-scale-to-zero",
    );
    // The report: allocation, pending pods, wait CDF, gang wait CDF, free and stranded devices,
    // largest free block, preemptions and evictions, GPU-hours lost. The comparison: the same but
    // the gang wait (no gang in that trace); nothing is preempted there, so some lines are flat.
    let racks = render(&["sim", "tests/sim/racks/cluster.yaml", "--trace", "tests/sim/racks/trace.yaml"], "sim-racks");
    // The endpoint's: no gang either, and the replicas serving. The racks': a gang, and the
    // largest gang placeable in one rack.
    let pages = [(&report, 8, true), (&comparison, 7, false), (&endpoint, 8, false), (&racks, 9, false)];
    for (page, figures, changing) in pages {
        let (dom, console) = open(page, None);
        assert!(console.is_empty(), "{}: console messages: {console:#?}", page.display());
        assert!(dom.contains("<h1>muster sim:"), "{dom}");
        assert_every_plot_has_data(&dom, figures, changing);
        let png = page.with_extension("png");
        open(page, Some(&png));
        let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{}: screenshot of {size} bytes", png.display());
    }
}

#[test]
fn the_console_check_catches_a_script_error() {
    let page = artifacts().join("script-error.html");
    std::fs::write(&page, "<!DOCTYPE html><html><body><script>notDefined();</script></body></html>").unwrap();
    let (_, console) = open(&page, None);
    assert!(console.iter().any(|l| l.contains("notDefined is not defined")), "{console:#?}");
}
