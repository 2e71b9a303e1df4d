//! A cached cluster as one allocation: a compact binary encoding of the `Cluster` with its
//! pools, decoded into a fresh `Cluster` on every hit.
//!
//! Why: an `Arc<Cluster>` with three pools is some thirty allocations (every `String`, every
//! `Vec`, the maps), about 1.8 KB of heap; a million-cluster fleet does not fit in the memory a
//! server has. Encoded, the same cluster is one slice of about 140 bytes. A hit decodes it,
//! which allocates the same owned strings a clone of the `Arc`'d value did, plus the reading
//! of the bytes (docs/performance.md has what that costs).
//!
//! The encoding, field by field in the order of [`encode`]:
//! - integers are LEB128 varints (signed ones zigzagged first), so small numbers take a byte;
//! - words that repeat across the fleet (zones, versions, control-plane options, machine
//!   sizes, organization slugs, pool names, label keys and values, the public hostname
//!   suffix) are numbers into a [`Vocabulary`] the cache shares; other text is inline;
//! - enums are their position in the type's `ALL` list;
//! - a time is its whole seconds after a base (the cluster's creation for every other time of
//!   the cluster) and its sub-second part, in microseconds when it is whole microseconds
//!   (what the database keeps);
//! - the public hostname and the API endpoint, when they are what the provisioning derives from
//!   the name and id, are a word (the suffix) or a flag.
//!
//! Nothing outside this module reads the bytes, and they never outlive the process, so the
//! layout may change freely.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use chrono::{DateTime, NaiveTime, Timelike, Utc};
use domain::model::cluster::{
    Cluster, ClusterPhase, ControlPlaneFirewall, Exposure, ExposureChange, ExposureChangeStatus,
    NetworkMode, Registration, RegistrationReason, SubStatus, public_hostname,
};
use domain::model::firewall::IpCidr;
use domain::model::maintenance_window::{MaintenanceDay, MaintenanceWindow};
use domain::model::node_pool::{NodePool, PoolStatus, Taint, TaintEffect};
use domain::model::upgrade::{SurgeSettings, UpgradeInFlight};
use domain::names::DnsLabel;
use uuid::Uuid;

/// Words kept at most: past it, new words are written inline. Bounds the vocabulary near
/// 8 MB whatever the fleet writes in its labels.
const MAX_WORDS: usize = 1 << 16;
/// Longer text is unlikely to repeat: written inline.
const MAX_WORD_LEN: usize = 64;

/// The words shared by the cached clusters. Only ever grows (up to [`MAX_WORDS`]), so a
/// number, once given, means the same word for the life of the process, across epochs.
#[derive(Debug, Default)]
pub(crate) struct Vocabulary {
    words: RwLock<Words>,
}

#[derive(Debug, Default)]
struct Words {
    list: Vec<Arc<str>>,
    numbers: HashMap<Arc<str>, u32>,
}

impl Vocabulary {
    /// The word's number, given now if it has none and there is room.
    fn number(&self, word: &str) -> Option<u32> {
        if word.len() > MAX_WORD_LEN {
            return None;
        }
        if let Some(&n) = self
            .words
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .numbers
            .get(word)
        {
            return Some(n);
        }
        let mut words = self.words.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(&n) = words.numbers.get(word) {
            return Some(n);
        }
        if words.list.len() >= MAX_WORDS {
            return None;
        }
        let n = u32::try_from(words.list.len()).ok()?;
        let word: Arc<str> = Arc::from(word);
        words.list.push(word.clone());
        words.numbers.insert(word, n);
        Some(n)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.words
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .list
            .len()
    }
}

/// The cluster as the cache keeps it. Its id is not in it: the cache's map holds it.
pub(crate) fn encode(c: &Cluster, vocabulary: &Vocabulary) -> Arc<[u8]> {
    let mut w = Writer {
        out: Vec::with_capacity(192),
        vocabulary,
    };
    let base = c.created_at.timestamp();
    w.out.extend_from_slice(c.organization_id.as_bytes());
    w.word(&c.organization_slug);
    w.text(c.name.as_str());
    w.optional_text(c.description.as_deref());
    w.len(c.tags.len());
    for tag in &c.tags {
        w.word(tag.as_str());
    }
    w.word(&c.zone);
    w.word(&c.version);
    w.word(&c.control_plane_option_id);
    w.position(&Exposure::ALL, c.exposure);
    w.position(&NetworkMode::ALL, c.network_mode);
    w.position(&ClusterPhase::ALL, c.phase);
    w.optional_text(c.failure_reason.as_deref());
    let derived_prefix = public_hostname(c.name.as_str(), c.id, "");
    match c.public_hostname.as_deref() {
        None => w.byte(0),
        Some(host) => match host.strip_prefix(derived_prefix.as_str()) {
            Some(suffix) => {
                w.byte(2);
                w.word(suffix);
            }
            None => {
                w.byte(1);
                w.text(host);
            }
        },
    }
    match (c.api_endpoint.as_deref(), c.public_hostname.as_deref()) {
        (None, _) => w.byte(0),
        (Some(url), Some(host)) if url == public_api_url(host) => w.byte(2),
        (Some(url), _) => {
            w.byte(1);
            w.text(url);
        }
    }
    w.registration(c.hub_registration);
    w.registration(c.default_environment);
    match c.exposure_change {
        None => w.byte(0),
        Some(change) => {
            w.byte(1);
            w.position(&Exposure::ALL, change.to);
            w.position(&ExposureChangeStatus::ALL, change.status);
        }
    }
    match &c.upgrade {
        None => w.byte(0),
        Some(u) => {
            w.byte(1);
            w.word(&u.from);
            w.word(&u.to);
            w.byte(u8::from(u.automatic));
        }
    }
    w.position(MaintenanceDay::ALL, c.maintenance_window.day);
    let start = c.maintenance_window.start_time;
    w.unsigned(u64::from(start.num_seconds_from_midnight()));
    w.unsigned(u64::from(start.nanosecond()));
    w.byte(u8::from(c.auto_upgrade));
    w.optional_time(c.last_auto_upgrade_window, base);
    w.firewall(&c.control_plane_firewall);
    match &c.control_plane_firewall_change {
        None => w.byte(0),
        Some(f) => {
            w.byte(1);
            w.firewall(f);
        }
    }
    w.time(c.created_at, 0);
    w.time(c.updated_at, base);
    w.signed(c.revision);
    w.optional_time(c.deleted_at, base);
    w.len(c.node_pools.len());
    for p in &c.node_pools {
        w.word(p.name.as_str());
        w.word(&p.size);
        w.unsigned(u64::from(p.count));
        w.byte(u8::from(p.auto_scale));
        w.unsigned(u64::from(p.min_nodes));
        w.unsigned(p.max_nodes.map_or(0, |m| u64::from(m) + 1));
        w.pairs(&p.labels);
        w.len(p.taints.len());
        for t in &p.taints {
            w.word(&t.key);
            w.word(&t.value);
            w.position(TaintEffect::ALL, t.effect);
        }
        w.pairs(&p.tags);
        w.unsigned(u64::from(p.root_volume_size_gib));
        w.word(&p.version);
        w.unsigned(u64::from(p.surge.max_surge));
        w.unsigned(u64::from(p.surge.max_unavailable));
        w.position(&PoolStatus::ALL, p.status);
        w.time(p.created_at, base);
        w.time(p.updated_at, base);
    }
    Arc::from(w.out)
}

/// The cluster `id` that [`encode`] wrote; `None` only if the bytes are not its output.
pub(crate) fn decode(id: Uuid, bytes: &[u8], vocabulary: &Vocabulary) -> Option<Cluster> {
    let words = vocabulary
        .words
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    let mut r = Reader {
        bytes,
        words: &words.list,
    };
    let organization_id = Uuid::from_bytes(r.take(16)?.try_into().ok()?);
    let organization_slug = r.word()?;
    let name = DnsLabel::from_trusted(r.text()?);
    let description = r.optional_text()?;
    let tags = (0..r.len()?)
        .map(|_| r.word().map(DnsLabel::from_trusted))
        .collect::<Option<Vec<_>>>()?;
    let zone = r.word()?;
    let version = r.word()?;
    let control_plane_option_id = r.word()?;
    let exposure = r.at(&Exposure::ALL)?;
    let network_mode = r.at(&NetworkMode::ALL)?;
    let phase = r.at(&ClusterPhase::ALL)?;
    let failure_reason = r.optional_text()?;
    let public_hostname = match r.byte()? {
        0 => None,
        1 => Some(r.text()?),
        2 => Some(public_hostname(name.as_str(), id, r.word_ref()?)),
        _ => return None,
    };
    let api_endpoint = match r.byte()? {
        0 => None,
        1 => Some(r.text()?),
        2 => Some(public_api_url(public_hostname.as_deref()?)),
        _ => return None,
    };
    let hub_registration = r.registration()?;
    let default_environment = r.registration()?;
    let exposure_change = match r.byte()? {
        0 => None,
        1 => Some(ExposureChange {
            to: r.at(&Exposure::ALL)?,
            status: r.at(&ExposureChangeStatus::ALL)?,
        }),
        _ => return None,
    };
    let upgrade = match r.byte()? {
        0 => None,
        1 => Some(UpgradeInFlight {
            from: r.word()?,
            to: r.word()?,
            automatic: r.flag()?,
        }),
        _ => return None,
    };
    let day = r.at(MaintenanceDay::ALL)?;
    let start_time = NaiveTime::from_num_seconds_from_midnight_opt(r.small()?, r.small()?)?;
    let auto_upgrade = r.flag()?;
    let last_auto_upgrade_window = r.optional_relative()?;
    let control_plane_firewall = r.firewall()?;
    let control_plane_firewall_change = match r.byte()? {
        0 => None,
        1 => Some(r.firewall()?),
        _ => return None,
    };
    let created_at = r.time(0)?;
    let base = created_at.timestamp();
    let last_auto_upgrade_window = match last_auto_upgrade_window {
        Some(relative) => Some(relative.at(base)?),
        None => None,
    };
    let updated_at = r.time_after(created_at)?;
    let revision = r.signed()?;
    let deleted_at = match r.optional_relative()? {
        Some(relative) => Some(relative.at(base)?),
        None => None,
    };
    let pools = r.len()?;
    let mut node_pools = Vec::with_capacity(pools);
    for _ in 0..pools {
        node_pools.push(NodePool {
            name: DnsLabel::from_trusted(r.word()?),
            size: r.word()?,
            count: r.small()?,
            auto_scale: r.flag()?,
            min_nodes: r.small()?,
            max_nodes: match r.unsigned()? {
                0 => None,
                m => Some(u32::try_from(m - 1).ok()?),
            },
            labels: r.pairs()?,
            taints: (0..r.len()?)
                .map(|_| {
                    Some(Taint {
                        key: r.word()?,
                        value: r.word()?,
                        effect: r.at(TaintEffect::ALL)?,
                    })
                })
                .collect::<Option<Vec<_>>>()?,
            tags: r.pairs()?,
            root_volume_size_gib: r.small()?,
            version: r.word()?,
            surge: SurgeSettings {
                max_surge: r.small()?,
                max_unavailable: r.small()?,
            },
            status: r.at(&PoolStatus::ALL)?,
            created_at: r.time_after(created_at)?,
            updated_at: r.time_after(created_at)?,
        });
    }
    if !r.bytes.is_empty() {
        return None;
    }
    Some(Cluster {
        id,
        organization_id,
        organization_slug,
        name,
        description,
        tags,
        zone,
        version,
        control_plane_option_id,
        exposure,
        network_mode,
        phase,
        failure_reason,
        public_hostname,
        api_endpoint,
        node_pools,
        hub_registration,
        default_environment,
        exposure_change,
        upgrade,
        maintenance_window: MaintenanceWindow { day, start_time },
        auto_upgrade,
        last_auto_upgrade_window,
        control_plane_firewall,
        control_plane_firewall_change,
        created_at,
        updated_at,
        revision,
        deleted_at,
    })
}

/// The API endpoint the provisioning gives a cluster with a public hostname.
fn public_api_url(host: &str) -> String {
    format!("https://{host}:6443")
}

struct Writer<'a> {
    out: Vec<u8>,
    vocabulary: &'a Vocabulary,
}

impl Writer<'_> {
    fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    fn unsigned(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn signed(&mut self, v: i64) {
        self.unsigned(((v << 1) ^ (v >> 63)) as u64);
    }

    fn len(&mut self, n: usize) {
        self.unsigned(n as u64);
    }

    fn text(&mut self, s: &str) {
        self.len(s.len());
        self.out.extend_from_slice(s.as_bytes());
    }

    fn optional_text(&mut self, s: Option<&str>) {
        match s {
            None => self.byte(0),
            Some(s) => {
                self.byte(1);
                self.text(s);
            }
        }
    }

    /// Its number in the vocabulary plus one; 0 and the text when it has none.
    fn word(&mut self, s: &str) {
        match self.vocabulary.number(s) {
            Some(n) => self.unsigned(u64::from(n) + 1),
            None => {
                self.byte(0);
                self.text(s);
            }
        }
    }

    fn position<T: PartialEq + Copy>(&mut self, all: &[T], v: T) {
        // Every value is in its type's list; an enum of more than 255 values is not used here.
        let at = all.iter().position(|a| *a == v).unwrap_or(usize::MAX);
        self.byte(u8::try_from(at).unwrap_or(u8::MAX));
    }

    fn registration(&mut self, r: Registration) {
        self.position(&SubStatus::ALL, r.status);
        match r.reason {
            None => self.byte(0),
            Some(reason) => {
                let at = RegistrationReason::ALL
                    .iter()
                    .position(|a| *a == reason)
                    .map_or(u8::MAX, |at| u8::try_from(at + 1).unwrap_or(u8::MAX));
                self.byte(at);
            }
        }
    }

    /// Seconds after `base`, then the sub-second part: microseconds (shifted, low bit 0) when
    /// whole, else nanoseconds (low bit 1).
    fn time(&mut self, t: DateTime<Utc>, base: i64) {
        self.signed(t.timestamp().wrapping_sub(base));
        let nanos = u64::from(t.timestamp_subsec_nanos());
        if nanos % 1000 == 0 {
            self.unsigned((nanos / 1000) << 1);
        } else {
            self.unsigned((nanos << 1) | 1);
        }
    }

    fn optional_time(&mut self, t: Option<DateTime<Utc>>, base: i64) {
        match t {
            None => self.byte(0),
            Some(t) => {
                self.byte(1);
                self.time(t, base);
            }
        }
    }

    fn firewall(&mut self, f: &ControlPlaneFirewall) {
        self.byte(u8::from(f.enabled));
        self.len(f.allowed_addresses.len());
        for cidr in &f.allowed_addresses {
            self.text(&cidr.to_string());
        }
    }

    fn pairs(&mut self, map: &BTreeMap<String, String>) {
        self.len(map.len());
        for (k, v) in map {
            self.word(k);
            self.word(v);
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    words: &'a [Arc<str>],
}

/// A time read before its base is known (the cluster's creation comes later).
struct Relative {
    seconds: i64,
    nanos: u32,
}

impl Relative {
    fn at(self, base: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.seconds.wrapping_add(base), self.nanos)
    }
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    fn flag(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    fn unsigned(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.unsigned()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn small(&mut self) -> Option<u32> {
        u32::try_from(self.unsigned()?).ok()
    }

    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.unsigned()?).ok()?;
        // A length past the bytes left is not ours; refusing it keeps allocations bounded.
        (n <= self.bytes.len()).then_some(n)
    }

    fn text_ref(&mut self) -> Option<&'a str> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn text(&mut self) -> Option<String> {
        self.text_ref().map(str::to_owned)
    }

    fn optional_text(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.text()?)),
            _ => None,
        }
    }

    fn word_ref(&mut self) -> Option<&'a str> {
        match self.unsigned()? {
            0 => self.text_ref(),
            n => {
                let words: &'a [Arc<str>] = self.words;
                words.get(usize::try_from(n - 1).ok()?).map(AsRef::as_ref)
            }
        }
    }

    fn word(&mut self) -> Option<String> {
        self.word_ref().map(str::to_owned)
    }

    fn at<T: Copy>(&mut self, all: &[T]) -> Option<T> {
        all.get(usize::from(self.byte()?)).copied()
    }

    fn registration(&mut self) -> Option<Registration> {
        let status = self.at(&SubStatus::ALL)?;
        let reason = match self.byte()? {
            0 => None,
            n => Some(*RegistrationReason::ALL.get(usize::from(n) - 1)?),
        };
        Some(Registration { status, reason })
    }

    fn relative(&mut self) -> Option<Relative> {
        let seconds = self.signed()?;
        let code = self.unsigned()?;
        let nanos = if code & 1 == 0 {
            (code >> 1).checked_mul(1000)?
        } else {
            code >> 1
        };
        Some(Relative {
            seconds,
            nanos: u32::try_from(nanos).ok()?,
        })
    }

    fn time(&mut self, base: i64) -> Option<DateTime<Utc>> {
        self.relative()?.at(base)
    }

    /// A time written with `base`'s seconds as its base. Most are `base` itself (a cluster's
    /// pools are made, and often last changed, with it): those are not computed again from
    /// the calendar, which is most of what decoding a time costs.
    fn time_after(&mut self, base: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let relative = self.relative()?;
        if relative.seconds == 0 && relative.nanos == base.timestamp_subsec_nanos() {
            return Some(base);
        }
        relative.at(base.timestamp())
    }

    /// An optional time, before its base is known: `Some(None)` when absent.
    fn optional_relative(&mut self) -> Option<Option<Relative>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.relative()?)),
            _ => None,
        }
    }

    fn firewall(&mut self) -> Option<ControlPlaneFirewall> {
        let enabled = self.flag()?;
        let allowed_addresses = (0..self.len()?)
            .map(|_| IpCidr::parse(self.text_ref()?).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(ControlPlaneFirewall {
            enabled,
            allowed_addresses,
        })
    }

    fn pairs(&mut self) -> Option<BTreeMap<String, String>> {
        (0..self.len()?)
            .map(|_| Some((self.word()?, self.word()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use domain::testing::{ORG_A, at, cluster, pool};

    use super::*;

    fn round_trip(c: &Cluster, vocabulary: &Vocabulary) -> Option<Cluster> {
        decode(c.id, &encode(c, vocabulary), vocabulary)
    }

    fn cidr(s: &str) -> IpCidr {
        IpCidr::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn label(s: &str) -> DnsLabel {
        DnsLabel::from_trusted(s.into())
    }

    /// Every field set, every `Option` `Some`, every collection non-empty, times off whole
    /// seconds (and one off whole microseconds), the last variant of every enum.
    fn full() -> Cluster {
        let created = at(1_000) + chrono::Duration::microseconds(123_456);
        let mut pool_a = pool("workers", 7);
        pool_a.size = "kube.m5.xlarge".into();
        pool_a.auto_scale = true;
        pool_a.min_nodes = 2;
        pool_a.max_nodes = Some(40);
        pool_a.labels = BTreeMap::from([
            ("team".into(), "payments".into()),
            ("example.com/tier".into(), String::new()),
        ]);
        pool_a.taints = vec![
            Taint {
                key: "dedicated".into(),
                value: "gpu".into(),
                effect: TaintEffect::NoExecute,
            },
            Taint {
                key: "spot".into(),
                value: String::new(),
                effect: TaintEffect::PreferNoSchedule,
            },
        ];
        pool_a.tags = BTreeMap::from([("cost-center".into(), "x".repeat(MAX_WORD_LEN + 1))]);
        pool_a.root_volume_size_gib = 4_000_000_000;
        pool_a.version = "v1.33.1".into();
        pool_a.surge = SurgeSettings {
            max_surge: 3,
            max_unavailable: 2,
        };
        pool_a.status = PoolStatus::Deleting;
        pool_a.created_at = created - chrono::Duration::days(30);
        pool_a.updated_at = created + chrono::Duration::nanoseconds(1_000_000_001);
        let mut c = cluster(ORG_A, ClusterPhase::Deleting);
        let name = "a-very-long-cluster-name-that-is-cut-when-it-becomes-the-hostname-x";
        c.name = label(name);
        c.public_hostname = Some(public_hostname(name, c.id, ".k8s.example.com"));
        c.api_endpoint = c.public_hostname.as_deref().map(public_api_url);
        Cluster {
            description: Some("ünïcode description, with\nnewlines".into()),
            tags: vec![label("prod"), label("eu")],
            zone: "zone-2".into(),
            version: "v1.33.1".into(),
            control_plane_option_id: "cp-ha".into(),
            exposure: Exposure::Public,
            network_mode: NetworkMode::Internet,
            failure_reason: Some("quota".into()),
            node_pools: vec![pool("default", 3), pool_a],
            hub_registration: Registration {
                status: SubStatus::Failed,
                reason: Some(RegistrationReason::PlatformInstallFailed),
            },
            default_environment: Registration {
                status: SubStatus::Ready,
                reason: Some(RegistrationReason::QuotaExceeded),
            },
            exposure_change: Some(ExposureChange {
                to: Exposure::Private,
                status: ExposureChangeStatus::InProgress,
            }),
            upgrade: Some(UpgradeInFlight {
                from: "v1.32.4".into(),
                to: "v1.33.1".into(),
                automatic: true,
            }),
            maintenance_window: MaintenanceWindow {
                day: MaintenanceDay::Sunday,
                start_time: NaiveTime::from_hms_opt(23, 45, 0).unwrap_or(NaiveTime::MIN),
            },
            auto_upgrade: true,
            last_auto_upgrade_window: Some(created - chrono::Duration::hours(5)),
            control_plane_firewall: ControlPlaneFirewall {
                enabled: true,
                allowed_addresses: vec![cidr("203.0.113.0/24"), cidr("2001:db8::/32")],
            },
            control_plane_firewall_change: Some(ControlPlaneFirewall {
                enabled: false,
                allowed_addresses: vec![cidr("0.0.0.0/0")],
            }),
            created_at: created,
            updated_at: created + chrono::Duration::seconds(86_400),
            revision: i64::MAX,
            deleted_at: Some(created + chrono::Duration::nanoseconds(7)),
            ..c
        }
    }

    #[test]
    fn every_field_survives_encoding_with_every_option_set_and_unset() {
        let vocabulary = Vocabulary::default();
        let full = full();
        let bare = cluster(ORG_A, ClusterPhase::Pending);
        let mut cases = vec![full.clone(), bare.clone()];
        // Each optional part of the full cluster unset on its own, and on the bare one set
        // on its own.
        let unsets: Vec<fn(&mut Cluster)> = vec![
            |c| c.description = None,
            |c| c.failure_reason = None,
            |c| c.public_hostname = None,
            |c| c.api_endpoint = None,
            |c| c.exposure_change = None,
            |c| c.upgrade = None,
            |c| c.last_auto_upgrade_window = None,
            |c| c.control_plane_firewall_change = None,
            |c| c.deleted_at = None,
            |c| c.hub_registration.reason = None,
            |c| c.node_pools.clear(),
            |c| c.tags.clear(),
            |c| c.node_pools[1].max_nodes = None,
            |c| c.node_pools[1].max_nodes = Some(0),
            // Not what the provisioning derives: kept as text.
            |c| c.public_hostname = Some("elsewhere.example.net".into()),
            |c| c.api_endpoint = Some("https://10.0.0.1:6443".into()),
            |c| c.revision = i64::MIN,
            |c| c.created_at = DateTime::<Utc>::MIN_UTC,
            |c| c.created_at = DateTime::<Utc>::MAX_UTC,
        ];
        for unset in &unsets {
            let mut c = full.clone();
            unset(&mut c);
            cases.push(c);
        }
        let sets: Vec<fn(&mut Cluster)> = vec![
            |c| c.description = Some(String::new()),
            |c| c.failure_reason = Some("x".into()),
            |c| c.public_hostname = Some(public_hostname("prod-1", c.id, "")),
            |c| c.deleted_at = Some(c.created_at - chrono::Duration::seconds(1)),
            |c| c.last_auto_upgrade_window = Some(c.created_at),
            |c| c.control_plane_firewall_change = Some(ControlPlaneFirewall::default()),
        ];
        for set in &sets {
            let mut c = bare.clone();
            set(&mut c);
            cases.push(c);
        }
        for (n, c) in cases.iter().enumerate() {
            assert_eq!(round_trip(c, &vocabulary).as_ref(), Some(c), "case {n}");
        }
    }

    #[test]
    fn the_full_cluster_and_every_enum_value_round_trip() {
        let vocabulary = Vocabulary::default();
        let mut c = full();
        for phase in ClusterPhase::ALL {
            for exposure in Exposure::ALL {
                for network_mode in NetworkMode::ALL {
                    c.phase = phase;
                    c.exposure = exposure;
                    c.network_mode = network_mode;
                    assert_eq!(round_trip(&c, &vocabulary).as_ref(), Some(&c));
                }
            }
        }
        for status in SubStatus::ALL {
            for reason in RegistrationReason::ALL.map(Some).into_iter().chain([None]) {
                c.default_environment = Registration { status, reason };
                assert_eq!(round_trip(&c, &vocabulary).as_ref(), Some(&c));
            }
        }
        for &day in MaintenanceDay::ALL {
            c.maintenance_window.day = day;
            assert_eq!(round_trip(&c, &vocabulary).as_ref(), Some(&c));
        }
        for status in PoolStatus::ALL {
            for &effect in TaintEffect::ALL {
                c.node_pools[1].status = status;
                c.node_pools[1].taints[0].effect = effect;
                assert_eq!(round_trip(&c, &vocabulary).as_ref(), Some(&c));
            }
        }
    }

    #[test]
    fn a_seeded_cluster_is_small_and_shares_its_words() {
        let vocabulary = Vocabulary::default();
        // As `make bench` seeds them.
        let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
        c.name = label("bench-12345");
        c.description = Some("seeded by make bench".into());
        c.api_endpoint = None;
        c.node_pools = vec![pool("pool-1", 1), pool("pool-2", 1), pool("pool-3", 1)];
        let first = encode(&c, &vocabulary);
        let words = vocabulary.len();
        c.id = Uuid::from_u128(99);
        let second = encode(&c, &vocabulary);
        // The second cluster adds no word; both stay far below the 1.8 KB of an Arc'd value.
        assert_eq!(vocabulary.len(), words);
        assert!(second.len() < 160, "{} bytes", second.len());
        assert_eq!(decode(c.id, &second, &vocabulary), Some(c));
        assert_eq!(first.len(), second.len());
    }

    #[test]
    fn bytes_that_are_not_an_encoding_are_refused() {
        let vocabulary = Vocabulary::default();
        let c = full();
        let bytes = encode(&c, &vocabulary);
        assert_eq!(decode(c.id, &bytes[..bytes.len() - 1], &vocabulary), None);
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(decode(c.id, &longer, &vocabulary), None);
        assert_eq!(decode(c.id, &[], &vocabulary), None);
        // Words numbered by another vocabulary are not there.
        assert_eq!(decode(c.id, &bytes, &Vocabulary::default()), None);
    }
}
