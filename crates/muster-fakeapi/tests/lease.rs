//! kube-lease-manager 0.13.1 (server-side apply and strategic merge patches on a Lease) against
//! the fake: one leader at a time, and a failover when the leader lets go.

mod common;

use std::time::Duration;

use common::start;
use kube_lease_manager::LeaseManagerBuilder;
use muster_fakeapi::FakeApi;

async fn manager(client: kube::Client, identity: &str) -> tokio::sync::watch::Receiver<bool> {
    let m = LeaseManagerBuilder::new(client, "muster")
        .with_namespace("default")
        .with_identity(identity)
        .with_duration(3)
        .with_grace(1)
        .build()
        .await
        .expect("a lease manager");
    m.watch().await.0
}

async fn becomes_leader(rx: &mut tokio::sync::watch::Receiver<bool>) {
    tokio::time::timeout(Duration::from_secs(15), rx.wait_for(|leader| *leader))
        .await
        .expect("leadership in time")
        .expect("the manager runs");
}

#[tokio::test]
async fn one_leader_then_a_failover() {
    let (fake, client) = start(FakeApi::new()).await;
    let mut a = manager(client.clone(), "a").await;
    becomes_leader(&mut a).await;
    let mut b = manager(client, "b").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!*b.borrow_and_update(), "b waits while a holds the lease");
    let lease = fake.get("coordination.k8s.io/v1", "leases", Some("default"), "muster").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "a");

    drop(a); // a's manager releases the lease when its receiver goes
    becomes_leader(&mut b).await;
    let lease = fake.get("coordination.k8s.io/v1", "leases", Some("default"), "muster").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    let patches = fake.requests().iter().filter(|r| r.resource == "leases" && r.verb == "patch").count();
    assert!(patches >= 2, "apply and strategic patches were used");
}
