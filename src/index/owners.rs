//! Which keys each owner holds, so that one owner's search needs no read of the store.
//!
//! A memory's owners never change, and each key belongs to one memory, so a key's owners
//! are set once, when it enters the index, and dropped when it leaves. Each owner id has the
//! sorted list of its keys; a key's set of owners is interned (the same few owner sets
//! recur across thousands of memories), and each key names its set with 4 bytes.

use std::collections::HashMap;

use crate::filter::OwnerField;
use crate::record::Owners;
use crate::store::VectorKey;

const FIELDS: [OwnerField; 4] = [
    OwnerField::User,
    OwnerField::Agent,
    OwnerField::App,
    OwnerField::Run,
];

fn field_of(owners: &Owners, field: OwnerField) -> Option<&str> {
    match field {
        OwnerField::User => owners.user_id.as_deref(),
        OwnerField::Agent => owners.agent_id.as_deref(),
        OwnerField::App => owners.app_id.as_deref(),
        OwnerField::Run => owners.run_id.as_deref(),
    }
}

fn slot(field: OwnerField) -> usize {
    match field {
        OwnerField::User => 0,
        OwnerField::Agent => 1,
        OwnerField::App => 2,
        OwnerField::Run => 3,
    }
}

/// The keys of each owner id, and the owners of each key.
#[derive(Debug, Default)]
pub(super) struct OwnerKeys {
    /// `set_of[key]`: 0 for a key not held, else `i + 1` for `sets[i]`.
    set_of: Vec<u32>,
    sets: Vec<Owners>,
    set_ids: HashMap<Owners, u32>,
    /// Per owner field (user, agent, app, run): each id's keys, ascending.
    lists: [HashMap<Box<str>, Vec<VectorKey>>; 4],
}

impl OwnerKeys {
    /// The owners of `key`, if it is held.
    pub(super) fn of(&self, key: VectorKey) -> Option<&Owners> {
        let set = *self.set_of.get(usize::try_from(key).ok()?)?;
        self.sets.get((set as usize).checked_sub(1)?)
    }

    /// Holds `key` under `owners` (moving it, should its owners differ from those held).
    pub(super) fn insert(&mut self, key: VectorKey, owners: &Owners) {
        if self.of(key) == Some(owners) {
            return;
        }
        self.remove(key);
        let Ok(k) = usize::try_from(key) else {
            return;
        };
        let set = match self.set_ids.get(owners) {
            Some(&set) => set,
            None => {
                self.sets.push(owners.clone());
                let set = self.sets.len() as u32;
                self.set_ids.insert(owners.clone(), set);
                set
            }
        };
        if self.set_of.len() <= k {
            self.set_of.resize(k + 1, 0);
        }
        self.set_of[k] = set;
        for field in FIELDS {
            if let Some(id) = field_of(owners, field) {
                let list = self.lists[slot(field)].entry(id.into()).or_default();
                // Keys are issued in ascending order, so this is nearly always a push.
                match list.last() {
                    Some(&last) if last > key => {
                        if let Err(at) = list.binary_search(&key) {
                            list.insert(at, key);
                        }
                    }
                    Some(&last) if last == key => {}
                    _ => list.push(key),
                }
            }
        }
    }

    /// Holds many keys at once, each under one of `sets` (by index), as a saved state
    /// lists them: each owner set's keys are gathered first, then each owner id's list is
    /// made from its sets' keys in one pass. Keys already held are not expected.
    pub(super) fn restore(
        &mut self,
        sets: &[Owners],
        keys: impl Iterator<Item = (VectorKey, u32)>,
    ) {
        let base = self.sets.len() as u32;
        for owners in sets {
            self.sets.push(owners.clone());
            self.set_ids
                .entry(owners.clone())
                .or_insert(self.sets.len() as u32);
        }
        let mut by_set: Vec<Vec<VectorKey>> = vec![Vec::new(); sets.len()];
        for (key, set) in keys {
            let (Ok(k), Some(keys)) = (usize::try_from(key), by_set.get_mut(set as usize)) else {
                continue;
            };
            if self.set_of.len() <= k {
                self.set_of.resize(k + 1, 0);
            }
            self.set_of[k] = base + set + 1;
            keys.push(key);
        }
        let mut touched: Vec<(usize, Box<str>)> = Vec::new();
        for (owners, keys) in sets.iter().zip(&by_set) {
            for field in FIELDS {
                if let Some(id) = field_of(owners, field) {
                    let list = self.lists[slot(field)].entry(id.into()).or_default();
                    let sorted = list
                        .last()
                        .is_none_or(|last| keys.first().is_none_or(|k| k > last));
                    list.extend_from_slice(keys);
                    if !sorted {
                        touched.push((slot(field), id.into()));
                    }
                }
            }
        }
        for (slot, id) in touched {
            if let Some(list) = self.lists[slot].get_mut(&id) {
                list.sort_unstable();
                list.dedup();
            }
        }
    }

    /// Drops `key`, if it is held.
    pub(super) fn remove(&mut self, key: VectorKey) {
        let Some(owners) = self.of(key).cloned() else {
            return;
        };
        for field in FIELDS {
            if let Some(id) = field_of(&owners, field) {
                let lists = &mut self.lists[slot(field)];
                if let Some(list) = lists.get_mut(id) {
                    if let Ok(at) = list.binary_search(&key) {
                        list.remove(at);
                    }
                    if list.is_empty() {
                        lists.remove(id);
                    }
                }
            }
        }
        if let Some(s) = usize::try_from(key)
            .ok()
            .and_then(|k| self.set_of.get_mut(k))
        {
            *s = 0;
        }
    }

    /// The keys held by every one of `pins` (owner field and id), ascending.
    pub(super) fn keys(&self, pins: &[(OwnerField, &str)]) -> Vec<VectorKey> {
        let mut lists: Vec<&[VectorKey]> = pins
            .iter()
            .map(|(field, id)| {
                self.lists[slot(*field)]
                    .get(*id)
                    .map_or(&[][..], Vec::as_slice)
            })
            .collect();
        lists.sort_by_key(|l| l.len());
        let Some((shortest, rest)) = lists.split_first() else {
            return Vec::new();
        };
        shortest
            .iter()
            .copied()
            .filter(|key| rest.iter().all(|l| l.binary_search(key).is_ok()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(user: Option<&str>, agent: Option<&str>) -> Owners {
        Owners {
            user_id: user.map(Into::into),
            agent_id: agent.map(Into::into),
            ..Owners::default()
        }
    }

    #[test]
    fn keys_by_owner_follow_inserts_moves_and_removals() {
        let mut o = OwnerKeys::default();
        let alice = owners(Some("alice"), None);
        let alice_bot = owners(Some("alice"), Some("bot"));
        let bob_bot = owners(Some("bob"), Some("bot"));
        o.insert(5, &alice);
        o.insert(9, &alice_bot);
        o.insert(7, &bob_bot);
        o.insert(3, &alice_bot); // out of order
        o.insert(3, &alice_bot); // twice
        let user = |id| vec![(OwnerField::User, id)];
        assert_eq!(o.keys(&user("alice")), vec![3, 5, 9]);
        assert_eq!(o.keys(&[(OwnerField::Agent, "bot")]), vec![3, 7, 9]);
        assert_eq!(
            o.keys(&[(OwnerField::Agent, "bot"), (OwnerField::User, "alice")]),
            vec![3, 9]
        );
        assert_eq!(o.keys(&user("carol")), Vec::<VectorKey>::new());
        assert_eq!(o.of(7), Some(&bob_bot));
        o.remove(9);
        o.remove(9);
        o.remove(1_000); // never held
        assert_eq!(o.keys(&user("alice")), vec![3, 5]);
        assert_eq!(o.of(9), None);
        // A key held under other owners moves.
        o.insert(5, &bob_bot);
        assert_eq!(o.keys(&user("alice")), vec![3]);
        assert_eq!(o.keys(&user("bob")), vec![5, 7]);
        assert_eq!(o.sets.len(), 3, "owner sets are interned");
        o.remove(3);
        assert!(
            !o.lists[0].contains_key("alice"),
            "an empty list is dropped"
        );
    }

    #[test]
    fn a_restored_state_lists_the_keys_as_inserting_them_would() {
        let sets = [
            owners(Some("alice"), Some("bot")),
            owners(Some("alice"), None),
            owners(Some("bob"), Some("bot")),
        ];
        let keys: Vec<(VectorKey, u32)> =
            vec![(1, 0), (2, 1), (4, 2), (6, 0), (7, 1), (9, 2), (12, 1)];
        let mut restored = OwnerKeys::default();
        restored.restore(&sets, keys.iter().copied());
        let mut inserted = OwnerKeys::default();
        for (key, set) in &keys {
            inserted.insert(*key, &sets[*set as usize]);
        }
        for pins in [
            vec![(OwnerField::User, "alice")],
            vec![(OwnerField::User, "bob")],
            vec![(OwnerField::Agent, "bot")],
            vec![(OwnerField::Agent, "bot"), (OwnerField::User, "alice")],
        ] {
            assert_eq!(restored.keys(&pins), inserted.keys(&pins), "{pins:?}");
        }
        assert_eq!(
            restored.keys(&[(OwnerField::User, "alice")]),
            vec![1, 2, 6, 7, 12]
        );
        for (key, set) in &keys {
            assert_eq!(restored.of(*key), Some(&sets[*set as usize]));
        }
        // A restored key moves and leaves like any other.
        restored.remove(6);
        restored.insert(7, &sets[2]);
        assert_eq!(
            restored.keys(&[(OwnerField::User, "alice")]),
            vec![1, 2, 12]
        );
        assert_eq!(restored.keys(&[(OwnerField::User, "bob")]), vec![4, 7, 9]);
    }
}
