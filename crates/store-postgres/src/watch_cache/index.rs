//! `OrgIndex`: the live clusters of one organization in list order, so a page is a slice and
//! its total a length: no count and no OFFSET per request, whatever page is asked for.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use domain::ports::storage::PageRequest;
use uuid::Uuid;

/// The list order: creation time, then id.
pub(crate) type ListKey = (DateTime<Utc>, Uuid);

/// An organization's live clusters, every zone and each zone apart, kept sorted.
#[derive(Debug, Default)]
pub(crate) struct OrgIndex {
    all: Vec<ListKey>,
    zones: HashMap<String, Vec<ListKey>>,
    members: HashMap<Uuid, (DateTime<Utc>, String)>,
}

impl OrgIndex {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Adds a live cluster; nothing when it is already there (its key never changes).
    pub fn insert(&mut self, id: Uuid, created_at: DateTime<Utc>, zone: &str) {
        if self.members.contains_key(&id) {
            return;
        }
        let key = (created_at, id);
        insert_sorted(&mut self.all, key);
        insert_sorted(self.zones.entry(zone.to_owned()).or_default(), key);
        self.members.insert(id, (created_at, zone.to_owned()));
    }

    /// Removes a cluster that is no longer live (or not of this organization); nothing when absent.
    pub fn remove(&mut self, id: Uuid) {
        let Some((created_at, zone)) = self.members.remove(&id) else {
            return;
        };
        let key = (created_at, id);
        remove_sorted(&mut self.all, &key);
        if let Some(keys) = self.zones.get_mut(&zone) {
            remove_sorted(keys, &key);
            if keys.is_empty() {
                self.zones.remove(&zone);
            }
        }
    }

    /// The ids on one page, in list order, and how many there are in all.
    pub fn page(&self, zone: Option<&str>, page: PageRequest) -> (Vec<Uuid>, u64) {
        let keys: &[ListKey] = match zone {
            None => &self.all,
            Some(z) => self.zones.get(z).map_or(&[], Vec::as_slice),
        };
        let start = usize::try_from(page.offset()).unwrap_or(usize::MAX);
        let ids = keys
            .iter()
            .skip(start)
            .take(page.size as usize)
            .map(|&(_, id)| id)
            .collect();
        (ids, keys.len() as u64)
    }
}

fn insert_sorted(keys: &mut Vec<ListKey>, key: ListKey) {
    if let Err(at) = keys.binary_search(&key) {
        keys.insert(at, key);
    }
}

fn remove_sorted(keys: &mut Vec<ListKey>, key: &ListKey) {
    if let Ok(at) = keys.binary_search(key) {
        keys.remove(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + second, 0).unwrap_or_default()
    }

    fn page(page: u32, size: u32) -> PageRequest {
        PageRequest { page, size }
    }

    #[test]
    fn pages_follow_creation_time_then_id_in_every_zone_and_each_zone() {
        let mut index = OrgIndex::default();
        let ids: Vec<Uuid> = (1..=5).map(Uuid::from_u128).collect();
        // Inserted out of order; ids 2 and 3 share a creation time.
        index.insert(ids[4], at(5), "zone-b");
        index.insert(ids[2], at(2), "zone-a");
        index.insert(ids[0], at(1), "zone-a");
        index.insert(ids[1], at(2), "zone-b");
        index.insert(ids[3], at(4), "zone-a");
        index.insert(ids[3], at(4), "zone-a");

        assert_eq!(index.page(None, page(1, 2)), (vec![ids[0], ids[1]], 5));
        assert_eq!(index.page(None, page(3, 2)), (vec![ids[4]], 5));
        assert_eq!(index.page(None, page(4, 2)), (vec![], 5));
        assert_eq!(
            index.page(Some("zone-a"), page(1, 10)),
            (vec![ids[0], ids[2], ids[3]], 3)
        );
        assert_eq!(index.page(Some("zone-c"), page(1, 10)), (vec![], 0));

        index.remove(ids[1]);
        index.remove(ids[1]);
        index.remove(ids[4]);
        assert_eq!(index.page(Some("zone-b"), page(1, 10)), (vec![], 0));
        assert_eq!(
            index.page(None, page(1, 10)),
            (vec![ids[0], ids[2], ids[3]], 3)
        );
        assert_eq!(index.len(), 3);
    }
}
