//! Watches through kube 5: kube-runtime's watcher with its default config, resuming from a
//! resourceVersion, 410 after the history expires, selectors, and closed streams.

mod common;

use std::time::Duration;

use common::{pod, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use muster_fakeapi::FakeApi;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

async fn next<S: futures::Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(WAIT, s.next()).await.expect("an event in time").expect("the stream goes on")
}

fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or_default()
}

#[tokio::test]
async fn the_runtime_watcher_sees_every_change() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.create(&PostParams::default(), &pod("ml", "before")).await.unwrap();
    let mut events = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitApply(p) if name(&p) == "before"));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitDone));

    pods.create(&PostParams::default(), &pod("ml", "new")).await.unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Apply(p) if name(&p) == "new"));
    let patch = json!({"status": {"phase": "Running"}});
    pods.patch_status("new", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let Event::Apply(p) = next(&mut events).await.unwrap() else { panic!("a modification") };
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    pods.delete("new", &DeleteParams::default()).await.unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Delete(p) if name(&p) == "new"));

    let asked: Vec<(String, u16)> = fake.requests().into_iter().map(|r| (r.verb, r.status)).collect();
    assert!(asked.contains(&("list".into(), 200)) && asked.contains(&("watch".into(), 200)), "{asked:?}");

    // Dropped streams: the watcher watches again from where it was and misses nothing.
    fake.faults().close_watches();
    pods.create(&PostParams::default(), &pod("ml", "after-close")).await.unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Apply(p) if name(&p) == "after-close"));

    // Expired history: the re-watch gets 410, and the watcher lists again. (The watcher is lazy:
    // it watches again only when polled, after "hidden" is made and the history forgotten.)
    fake.faults().close_watches();
    pods.create(&PostParams::default(), &pod("ml", "hidden")).await.unwrap();
    fake.faults().expire_history();
    let mut relisted = Vec::new();
    loop {
        match next(&mut events).await {
            Ok(Event::InitDone) => break,
            Ok(Event::InitApply(p)) => relisted.push(name(&p).to_string()),
            Ok(_) => {}
            Err(e) => assert!(e.to_string().contains("410") || e.to_string().contains("Expired"), "{e}"),
        }
    }
    relisted.sort();
    assert_eq!(relisted, ["after-close", "before", "hidden"]);
}

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version() {
    let (_fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let a = pods.create(&PostParams::default(), &pod("ml", "a")).await.unwrap();
    let rv = a.metadata.resource_version.unwrap();
    pods.create(&PostParams::default(), &pod("ml", "b")).await.unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let mut s = pods.watch(&WatchParams::default().timeout(5), &rv).await.unwrap().boxed();
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Added(p) if name(&p) == "b"));
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Deleted(p) if name(&p) == "a"));
}

#[tokio::test]
async fn an_expired_resource_version_gets_410() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let a = pods.create(&PostParams::default(), &pod("ml", "a")).await.unwrap();
    pods.create(&PostParams::default(), &pod("ml", "b")).await.unwrap();
    fake.faults().expire_history();
    let rv = a.metadata.resource_version.unwrap();
    let events: Vec<_> = pods.watch(&WatchParams::default(), &rv).await.unwrap().try_collect().await.unwrap();
    let [WatchEvent::Error(e)] = events.as_slice() else { panic!("one ERROR event, then the end: {events:?}") };
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn selectors_apply_to_watches_and_bookmarks_come() {
    let (_fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    let wp = WatchParams::default().fields("spec.nodeName=").timeout(20);
    let mut s = pods.watch(&wp, "0").await.unwrap().boxed();
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Added(p) if name(&p) == "p"));
    let binding = json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let _: kube::core::Status =
        pods.create_subresource("binding", "p", &PostParams::default(), &binding).await.unwrap();
    let WatchEvent::Deleted(gone) = next(&mut s).await.unwrap() else { panic!("bound: it leaves the selector") };
    assert_eq!(gone.spec.unwrap().node_name, None, "the last state the watch saw");
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Bookmark(_)));
}

#[tokio::test]
async fn the_runtime_watcher_with_streaming_lists() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.create(&PostParams::default(), &pod("ml", "a")).await.unwrap();
    let mut events = watcher::watcher(pods.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitApply(p) if name(&p) == "a"));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitDone), "the initial-events-end bookmark ends it");
    pods.create(&PostParams::default(), &pod("ml", "b")).await.unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Apply(p) if name(&p) == "b"));
    assert!(fake.requests().iter().all(|r| r.verb != "list"), "no list: one watch with sendInitialEvents");
}

#[tokio::test]
async fn a_bounded_history_forgets_old_versions() {
    let (_fake, client) = start(FakeApi::new().history_limit(2)).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let a = pods.create(&PostParams::default(), &pod("ml", "a")).await.unwrap();
    let rv = a.metadata.resource_version.unwrap();
    for n in ["b", "c", "d"] {
        pods.create(&PostParams::default(), &pod("ml", n)).await.unwrap();
    }
    // Kept: the events of c and d; b's is gone, so a watch from a's version cannot resume.
    let events: Vec<_> =
        pods.watch(&WatchParams::default().timeout(3), &rv).await.unwrap().try_collect().await.unwrap();
    assert!(matches!(events.as_slice(), [WatchEvent::Error(e)] if e.code == 410), "{events:?}");
    let recent = (rv.parse::<u64>().unwrap() + 1).to_string();
    let mut s = pods.watch(&WatchParams::default().timeout(5), &recent).await.unwrap().boxed();
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Added(p) if name(&p) == "c"));
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout_and_tests_can_wait_for_state() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let t = std::time::Instant::now();
    let events: Vec<_> =
        pods.watch(&WatchParams::default().timeout(1), "0").await.unwrap().try_collect().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "ended after {:?} with {events:?}", t.elapsed());

    let waiter = fake.clone();
    let bound = tokio::spawn(async move {
        waiter.wait_for(WAIT, |f| f.list("pods").iter().any(|p| p["spec"]["nodeName"] == "n1")).await
    });
    pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    let binding = json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let _: kube::core::Status =
        pods.create_subresource("binding", "p", &PostParams::default(), &binding).await.unwrap();
    assert!(bound.await.unwrap(), "woken by the binding");
    assert!(!fake.wait_for(Duration::from_millis(50), |f| f.list("pods").is_empty()).await, "times out");
}

/// Concurrent writers; a watch from the start replays to exactly the final state, in strictly
/// increasing resourceVersions (what an informer and the scheduler's assume cache rely on).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_replay_to_the_final_state() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let start_rv = fake.resource_version().to_string();
    let mut s = pods.watch(&WatchParams::default().disable_bookmarks().timeout(30), &start_rv).await.unwrap().boxed();
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let pods = pods.clone();
            tokio::spawn(async move {
                for i in 0..30 {
                    let name = format!("w{w}-{}", i % 7);
                    if pods.create(&PostParams::default(), &pod("ml", &name)).await.is_err() {
                        let patch = json!({"metadata": {"labels": {"i": i.to_string()}}});
                        let _ = pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                    }
                    if i % 5 == 4 {
                        let _ = pods.delete(&name, &DeleteParams::default()).await;
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let end = fake.resource_version();
    let mut state = std::collections::BTreeMap::new();
    let mut last = 0u64;
    while last < end {
        let (rv, event) = match next(&mut s).await.unwrap() {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => (p.metadata.resource_version.clone(), Some(p)),
            WatchEvent::Deleted(p) => {
                state.remove(name(&p));
                (p.metadata.resource_version.clone(), None)
            }
            other => panic!("{other:?}"),
        };
        let rv: u64 = rv.unwrap().parse().unwrap();
        assert!(rv > last, "resourceVersions increase: {rv} after {last}");
        last = rv;
        if let Some(p) = event {
            state.insert(name(&p).to_string(), p.metadata.labels.clone());
        }
    }
    let stored: std::collections::BTreeMap<String, _> = fake
        .list("pods")
        .into_iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                serde_json::from_value(p["metadata"]["labels"].clone()).ok(),
            )
        })
        .collect();
    assert_eq!(state, stored);
}
