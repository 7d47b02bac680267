//! Every scenario of `tests/scenarios` (the inputs `muster plan` is tested on) loads into the
//! fake: what `plan` reads, the fake serves.

use std::path::{Path, PathBuf};

use muster_fakeapi::{FakeApi, manifests};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap_or_default();
    let named: Vec<PathBuf> = expected
        .lines()
        .filter_map(|l| l.strip_prefix("inputs:"))
        .flat_map(|i| i.split_whitespace().map(|p| dir.join(p)).collect::<Vec<_>>())
        .collect();
    if named.is_empty() { vec![dir.to_path_buf()] } else { named }
}

#[tokio::test]
async fn every_scenario_that_loads_is_served() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut served = 0;
    let mut failures = Vec::new();
    for dir in dirs {
        let Ok(objects) = manifests::load(&inputs(&dir)) else { continue };
        let pods = objects.iter().filter(|o| o["kind"] == "Pod").count();
        match FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap()).await {
            Ok(fake) => {
                assert!(fake.list("pods").len() >= pods, "{}", dir.display());
                served += 1;
                fake.shutdown().await;
            }
            Err(e) => failures.push(format!("{}: {e}", dir.display())),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(served >= 20, "only {served} scenarios loaded");
}
