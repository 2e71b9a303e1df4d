//! Upgrades: the control plane first, then each pool node by node within its surge settings,
//! resumed from wherever a failure or a crash left it.

use super::*;
use crate::model::upgrade::{SurgeSettings, UpgradeInFlight};

const FROM: &str = "v1.32.4";
const TO: &str = "v1.32.6";

/// A provisioned cluster with pools `a` (count `count`) and `b` (2 nodes), every node Ready
/// on [`FROM`], and an upgrade to [`TO`] just asked for with `surge` on every pool.
fn upgrading(count: u32, surge: SurgeSettings) -> World {
    let mut c = ready_cluster(ClusterPhase::Provisioned);
    c.node_pools = vec![pool("a", count), pool("b", 2)];
    for p in &mut c.node_pools {
        p.surge = surge;
    }
    c.upgrade = Some(UpgradeInFlight {
        from: FROM.into(),
        to: TO.into(),
        automatic: false,
    });
    let mut nodes = Vec::new();
    for p in ["a", "b"] {
        let n = if p == "a" { count } else { 2 };
        for i in 0..n {
            nodes.push(node(
                &format!("prod-1-{p}-old{i:02}"),
                p,
                NodeStatus::Ready,
                i64::from(i),
            ));
        }
    }
    world(ClusterState { nodes, ..state(c) }, FakeCloud::default())
}

/// Every pool stays within `count + max_surge` nodes and keeps `count - max_unavailable`
/// Ready, whatever their version.
fn assert_bounds(w: &World, when: &str) {
    let db = w.store.db();
    let cluster = db.cluster.clone().unwrap();
    for p in cluster.live_pools() {
        let mine: Vec<&Node> = db.nodes.iter().filter(|n| n.pool == p.name).collect();
        let ready = mine
            .iter()
            .filter(|n| n.status == NodeStatus::Ready)
            .count() as u32;
        assert!(
            mine.len() as u32 <= p.count + p.surge.max_surge,
            "{when}: pool {} has {} nodes, above {} + {}",
            p.name,
            mine.len(),
            p.count,
            p.surge.max_surge
        );
        assert!(
            ready >= p.count.saturating_sub(p.surge.max_unavailable),
            "{when}: pool {} has {ready} Ready, below {} - {}",
            p.name,
            p.count,
            p.surge.max_unavailable
        );
    }
}

/// Steps until idle, checking the bounds after every step; the provider steps taken.
fn upgrade_to_the_end(w: &World) {
    for n in 0..400 {
        let progress = w.step();
        assert_bounds(w, &format!("after step {n}"));
        if progress == Ok(Progress::Idle) {
            return;
        }
    }
    panic!("the upgrade never finished");
}

fn assert_finished(w: &World, counts: &[(&str, usize)]) {
    let c = w.cluster();
    assert_eq!(c.version, TO);
    assert_eq!(c.upgrade, None);
    let db = w.store.db();
    for (pool, count) in counts {
        let p = c.pool(pool).unwrap();
        assert_eq!(
            (p.version.as_str(), p.status),
            (TO, PoolStatus::Ready),
            "{pool}"
        );
        let mine: Vec<&Node> = db
            .nodes
            .iter()
            .filter(|n| n.pool.as_str() == *pool)
            .collect();
        assert_eq!(mine.len(), *count, "{pool}");
        assert!(
            mine.iter()
                .all(|n| n.version == TO && n.status == NodeStatus::Ready),
            "{pool}: {mine:?}"
        );
    }
}

#[test]
fn an_upgrade_keeps_every_pools_bounds_at_every_step() {
    let table = [
        (3, 1, 0),
        (3, 2, 0),
        (3, 1, 1),
        (1, 1, 0),
        (5, 3, 2),
        (2, 10, 0),
        (4, 1, 10),
    ];
    for (count, max_surge, max_unavailable) in table {
        let w = upgrading(
            count,
            SurgeSettings {
                max_surge,
                max_unavailable,
            },
        );
        upgrade_to_the_end(&w);
        assert_finished(&w, &[("a", count as usize), ("b", 2)]);
    }
}

#[test]
fn the_control_plane_moves_first_then_one_pool_at_a_time() {
    let w = upgrading(2, SurgeSettings::DEFAULT);
    upgrade_to_the_end(&w);
    let steps = w.cloud.steps.lock().unwrap().clone();
    assert_eq!(steps[0].name(), "upgrade_control_plane");
    // Every node of pool a is replaced before pool b's first.
    let pools: Vec<String> = steps
        .iter()
        .filter_map(|s| match s {
            Step::CreateNode { pool, version, .. } => {
                assert_eq!(version, TO);
                Some(pool.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(pools, ["a", "a", "b", "b"]);
    // The operation was told each step, in words.
    let told = w.progress.lock().unwrap().clone();
    assert_eq!(
        told.first().map(String::as_str),
        Some("The control plane runs v1.32.6; the node pools follow one at a time.")
    );
    assert!(told.contains(&"Node pool a is replacing its nodes by nodes of v1.32.6.".to_owned()));
    assert!(told.contains(&"Node pool a: a new node of v1.32.6 is ready.".to_owned()));
    assert!(
        told.contains(
            &"Node pool b: node prod-1-b-old00 of v1.32.4 was drained and removed.".to_owned()
        ),
        "{told:?}"
    );
    assert_eq!(
        told.last().map(String::as_str),
        Some("Every node pool runs v1.32.6: the upgrade is done.")
    );
}

#[test]
fn with_the_default_settings_a_new_node_is_ready_before_an_old_one_goes() {
    let w = upgrading(3, SurgeSettings::DEFAULT);
    let steps = || w.cloud.step_names();
    upgrade_to_the_end(&w);
    let node_steps: Vec<&str> = steps()
        .into_iter()
        .filter(|s| s.ends_with("_node"))
        .collect();
    // Pool a (3) then pool b (2): create, then delete, each node in turn.
    let expected: Vec<&str> = ["create_node", "delete_node"].repeat(5);
    assert_eq!(node_steps, expected);
}

#[test]
fn a_failure_at_any_step_resumes_where_it_stopped() {
    for failing in ["upgrade_control_plane", "create_node", "delete_node"] {
        for after in 0..6 {
            let w = upgrading(3, SurgeSettings::DEFAULT);
            for _ in 0..after {
                let _ = w.step();
            }
            w.cloud
                .fail
                .lock()
                .unwrap()
                .insert(failing, ProviderError::Transient("timeout".into()));
            for n in 0..3 {
                let _ = w.step();
                assert_bounds(&w, &format!("{failing} failing, step {n}"));
            }
            w.cloud.fail.lock().unwrap().clear();
            upgrade_to_the_end(&w);
            assert_finished(&w, &[("a", 3), ("b", 2)]);
        }
    }
}

#[test]
fn a_node_that_cannot_be_created_leaves_the_old_ones_serving() {
    let w = upgrading(3, SurgeSettings::DEFAULT);
    w.cloud.fail.lock().unwrap().insert(
        "create_node",
        ProviderError::Permanent("no capacity".into()),
    );
    for _ in 0..10 {
        let r = w.step();
        assert_bounds(&w, "create_node refused");
        if let Err(e) = r {
            assert!(
                e.customer_message().contains("creating a node"),
                "{}",
                e.customer_message()
            );
        }
    }
    let db = w.store.db();
    let old_ready = db
        .nodes
        .iter()
        .filter(|n| n.pool.as_str() == "a" && n.version == FROM && n.status == NodeStatus::Ready)
        .count();
    assert_eq!(old_ready, 3);
    assert_eq!(
        db.cluster.as_ref().unwrap().pool("a").unwrap().status,
        PoolStatus::Upgrading
    );
}

#[test]
fn next_work_waits_for_a_provisioned_cluster_and_ends_the_upgrade() {
    let mut s = provisioned();
    s.cluster.upgrade = Some(UpgradeInFlight {
        from: FROM.into(),
        to: TO.into(),
        automatic: true,
    });
    assert_eq!(
        next_work(&s).map(|w| w.name()),
        Some("upgrade_control_plane")
    );
    s.cluster.version = TO.into();
    assert_eq!(next_work(&s).map(|w| w.name()), Some("start_pool_upgrade"));
    s.cluster.node_pools[0].version = TO.into();
    for n in &mut s.nodes {
        n.version = TO.into();
    }
    assert_eq!(next_work(&s), Some(Work::FinishUpgrade));
}

// ---------------------------------------------------------------- automatic upgrades

/// A provisioned cluster on [`FROM`] whose owner asked for automatic upgrades on Thursdays
/// from 02:00 UTC (`at(0)` is Thursday 2026-01-01 00:00).
fn auto_upgrading() -> Cluster {
    let mut c = ready_cluster(ClusterPhase::Provisioned);
    c.auto_upgrade = true;
    c.maintenance_window = crate::model::maintenance_window::MaintenanceWindow {
        day: crate::model::maintenance_window::MaintenanceDay::Thursday,
        start_time: chrono::NaiveTime::from_hms_opt(2, 0, 0).unwrap(),
    };
    c
}

const HOUR: i64 = 3600;

#[test]
fn an_automatic_upgrade_is_due_once_a_window_with_the_newest_patch() {
    use crate::model::catalog::Catalog;
    use crate::model::upgrade::auto_upgrade_due;
    let catalog = Catalog::builtin();
    let zone = catalog.default_zone();
    let window = at(2 * HOUR);
    type Case = (
        &'static str,
        Box<dyn Fn(&mut Cluster)>,
        i64,
        Option<&'static str>,
    );
    let table: [Case; 7] = [
        ("inside the window", Box::new(|_| {}), 3 * HOUR, Some(TO)),
        ("before it opens", Box::new(|_| {}), HOUR, None),
        ("after it closed", Box::new(|_| {}), 6 * HOUR, None),
        (
            "not asked for",
            Box::new(|c| c.auto_upgrade = false),
            3 * HOUR,
            None,
        ),
        (
            "already once in this window",
            Box::new(move |c| c.last_auto_upgrade_window = Some(window)),
            3 * HOUR,
            None,
        ),
        (
            "on the newest patch",
            Box::new(|c| c.version = TO.into()),
            3 * HOUR,
            None,
        ),
        (
            "a pool still scaling",
            Box::new(|c| c.node_pools[0].status = PoolStatus::Scaling),
            3 * HOUR,
            None,
        ),
    ];
    for (what, change, now, due) in table {
        let mut c = auto_upgrading();
        change(&mut c);
        let got = auto_upgrade_due(&c, zone, at(now));
        assert_eq!(got.as_ref().map(|(v, _)| v.as_str()), due, "{what}");
        if let Some((_, start)) = got {
            assert_eq!(start, window, "{what}");
        }
    }
    // A week later the next Thursday's window is another one.
    let mut c = auto_upgrading();
    c.last_auto_upgrade_window = Some(window);
    assert!(auto_upgrade_due(&c, zone, at(7 * 24 * HOUR + 3 * HOUR)).is_some());
}

#[test]
fn the_sweep_starts_the_upgrade_once_as_the_maintenance_policy() {
    let w = world(
        ClusterState {
            nodes: three_ready_nodes(),
            ..state(auto_upgrading())
        },
        FakeCloud::default(),
    );
    let services = crate::service::Services::new(
        w.ports.clone(),
        crate::model::catalog::Catalog::builtin(),
        Default::default(),
    );
    w.ports_clock_to(3 * HOUR);
    assert_eq!(block_on(services.start_automatic_upgrades()), Ok(1));
    let c = w.cluster();
    assert_eq!(
        c.upgrade,
        Some(UpgradeInFlight {
            from: FROM.into(),
            to: TO.into(),
            automatic: true
        })
    );
    assert_eq!(c.last_auto_upgrade_window, Some(at(2 * HOUR)));
    let write = w.store.db().commits.last().cloned().unwrap();
    assert!(write.reconcile);
    let op = write.operation.unwrap();
    assert_eq!(
        (op.kind, op.requested_by.user_id.as_str()),
        (OperationKind::Upgrade, "maintenance-policy")
    );
    // In flight: the next sweep leaves it alone; carried out, it ends on the newest patch.
    assert_eq!(block_on(services.start_automatic_upgrades()), Ok(0));
    upgrade_to_the_end(&w);
    assert_eq!(w.cluster().version, TO);
    assert_eq!(block_on(services.start_automatic_upgrades()), Ok(0));
}
