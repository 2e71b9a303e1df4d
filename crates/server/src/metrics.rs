//! The adapters' series on `/metrics`, as collectors of the API's registry: the database
//! pool, the account platform's client and the provisioning queue. Counters are read from the
//! adapters' own atomics at each scrape; the queue depth is a query, read just before.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use store_postgres::{CachedStore, PgStore};

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// A counter family with one label; the encoder adds the `_total` suffix.
fn counters(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&'static str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, n) in values {
        ConstCounter::new(*n).encode(family.encode_family(&[(label, *value)])?)?;
    }
    Ok(())
}

fn to_i64(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// `cluster_cache_reads_total{result="hit"|"miss"|"bypass"}` and `cluster_cache_entries`: how
/// the watch cache answers cluster reads (a bypass is a read it could not vouch for); and
/// `change_feed_heartbeat_age_seconds`, how far behind the database this process may be: the
/// alert on a change feed that stopped following the database reads it.
pub struct CacheMetrics(pub CachedStore);

impl std::fmt::Debug for CacheMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheMetrics")
    }
}

impl Collector for CacheMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.stats();
        counters(
            &mut encoder,
            "cluster_cache_reads",
            "Cluster reads that may be cached, by how they were answered.",
            "result",
            &[("hit", s.hits), ("miss", s.misses), ("bypass", s.bypasses)],
        )?;
        gauge(
            &mut encoder,
            "cluster_cache_entries",
            "Clusters the watch cache holds.",
            to_i64(s.entries),
        )?;
        ConstGauge::new(self.0.feed_heartbeat_age().as_secs_f64()).encode(
            encoder.encode_descriptor(
                "change_feed_heartbeat_age_seconds",
                "Seconds since the change feed last proved it had applied every committed change (once a second while it listens).",
                None,
                MetricType::Gauge,
            )?,
        )
    }
}

/// `db_pool_connections{state="open"|"idle"}`.
pub struct PoolMetrics(pub PgStore);

impl std::fmt::Debug for PoolMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PoolMetrics")
    }
}

impl Collector for PoolMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (open, idle) = self.0.pool_state();
        let mut family = encoder.encode_descriptor(
            "db_pool_connections",
            "Database connections open, and idle.",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in [("open", open), ("idle", idle)] {
            ConstGauge::new(i64::from(n)).encode(family.encode_family(&[("state", state)])?)?;
        }
        Ok(())
    }
}

/// `account_platform_calls_total{endpoint}`, `_cache_hits_total`, `_failures_total`.
#[derive(Debug)]
pub struct PlatformMetrics(pub Arc<account_platform::PlatformMetrics>);

impl Collector for PlatformMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.snapshot();
        counters(
            &mut encoder,
            "account_platform_calls",
            "Calls to the account platform.",
            "endpoint",
            &[("me", s.me_calls), ("organizations", s.org_calls)],
        )?;
        ConstCounter::new(self.0.cache_hits()).encode(encoder.encode_descriptor(
            "account_platform_cache_hits",
            "Answers served from the caches.",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(s.failures).encode(encoder.encode_descriptor(
            "account_platform_failures",
            "Calls that failed.",
            None,
            MetricType::Counter,
        )?)
    }
}

/// The provisioning workers of this process and the queue they share with every process.
pub struct QueueMetrics {
    reader: reconciler::MetricsReader,
    last: Mutex<reconciler::ReconcilerMetrics>,
}

impl QueueMetrics {
    pub fn new(reader: reconciler::MetricsReader) -> Arc<Self> {
        Arc::new(QueueMetrics {
            reader,
            last: Mutex::new(reconciler::ReconcilerMetrics::default()),
        })
    }
}

impl std::fmt::Debug for QueueMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueueMetrics")
    }
}

#[async_trait]
impl api::MetricsRefresh for QueueMetrics {
    async fn refresh(&self) {
        let read = self.reader.read().await;
        if let Ok(mut last) = self.last.lock() {
            *last = read;
        }
    }
}

impl Collector for QueueMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = self.last.lock().map(|m| *m).unwrap_or_default();
        if let Some(depth) = m.queue_depth {
            gauge(
                &mut encoder,
                "provisioning_queue_depth",
                "Operations not yet done, across every process.",
                to_i64(depth),
            )?;
        }
        gauge(
            &mut encoder,
            "provisioning_workers_busy",
            "Workers of this process holding a lease.",
            to_i64(m.busy_workers),
        )?;
        ConstCounter::new(m.steps).encode(encoder.encode_descriptor(
            "provisioning_steps",
            "Reconcile steps done by this process.",
            None,
            MetricType::Counter,
        )?)?;
        counters(
            &mut encoder,
            "provisioning_operations",
            "Operations by outcome in this process.",
            "outcome",
            &[
                ("claimed", m.operations_claimed),
                ("finished", m.operations_finished),
                ("retried", m.operations_retried),
                ("failed", m.operations_failed),
                ("requeued", m.operations_requeued),
            ],
        )
    }
}
