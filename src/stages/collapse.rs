//! Stage *collapse*: documents grouped by identical fingerprint at the fingerprint's owner, so a group
//! of thousands of exact copies costs linear work until its pairs are listed.

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::error::Result;
use crate::exchange::{all_gather, owner, shuffle};
use crate::spill::columns::Columns;
use crate::spill::SpillFile;
use crate::stages::rank::Signatures;

/// Documents grouped by identical fingerprint: `fps[g]` is shared by `ids[starts[g]..starts[g + 1]]`,
/// ids sorted, so the first is the group's representative. Ids are anything ordered: strings in tests,
/// the documents' global ranks in a run.
#[derive(Clone, Debug)]
pub struct Groups<T = String> {
    /// Distinct fingerprints, ascending.
    pub fps: Vec<u64>,
    /// Offsets into `ids`, one more than `fps` (4 bytes a distinct fingerprint: a worker holds
    /// fewer than 4G documents, as its ids' arena says).
    pub starts: Vec<u32>,
    /// Member ids, group by group.
    pub ids: Vec<T>,
}

impl<T: Ord> Groups<T> {
    /// Groups `(simhash, id)` records.
    pub fn build(mut records: Vec<(u64, T)>) -> Groups<T> {
        records.sort_unstable();
        let mut g = Groups {
            fps: Vec::new(),
            starts: Vec::new(),
            ids: Vec::with_capacity(records.len()),
        };
        for (fp, id) in records {
            if g.fps.last() != Some(&fp) {
                g.fps.push(fp);
                g.starts.push(Self::offset(g.ids.len()));
            }
            g.ids.push(id);
        }
        g.starts.push(Self::offset(g.ids.len()));
        g
    }

    /// An offset into `ids`.
    fn offset(at: usize) -> u32 {
        u32::try_from(at).expect("under 4G documents per worker")
    }

    /// Number of distinct fingerprints.
    pub fn len(&self) -> usize {
        self.fps.len()
    }

    /// True if there are no documents.
    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }

    /// Members of group `g`.
    pub fn members(&self, g: usize) -> &[T] {
        let end =
            *(self.starts.get(g + 1)).expect("the members are read back before they are read");
        &self.ids[self.starts[g] as usize..end as usize]
    }

    /// Calls `f(members, item)` for every item, where `members` belong to the group whose fingerprint
    /// is `key(item)` (empty if absent). Items are sorted by key and matched by one linear merge with
    /// the groups, not a binary search each: the lookups of millions of pairs stay sequential. The
    /// items' room is given back as they are taken (what `f` makes of them grows meanwhile).
    pub fn join<I>(&self, mut items: Vec<I>, key: impl Fn(&I) -> u64, mut f: impl FnMut(&[T], I)) {
        items.sort_unstable_by_key(&key);
        let mut g = 0;
        for item in crate::exchange::draining(items) {
            let k = key(&item);
            while g < self.fps.len() && self.fps[g] < k {
                g += 1;
            }
            let members = if self.fps.get(g) == Some(&k) {
                self.members(g)
            } else {
                &[]
            };
            f(members, item);
        }
    }
}

/// The members of a worker's groups and where each group's start, in a spill file while the band
/// rounds run: they read the groups' keys only ([`Groups::spill_members`]).
pub struct SpilledMembers {
    file: SpillFile,
    starts: usize,
    ids: usize,
}

impl Groups<u64> {
    /// Bytes the members and the groups' starts take.
    pub fn members_bytes(&self) -> u64 {
        (4 * self.starts.len() + 8 * self.ids.len()) as u64
    }

    /// Writes the members and the groups' starts to `file` and frees them (the keys stay); they
    /// are read back by [`SpilledMembers::load`] before anything reads a group's members.
    pub fn spill_members(&mut self, mut file: SpillFile) -> Result<SpilledMembers> {
        file.append_packed(&self.starts)?;
        file.append(&self.ids)?;
        file.flush()?;
        let (starts, ids) = (self.starts.len(), self.ids.len());
        (self.starts, self.ids) = (Vec::new(), Vec::new());
        Ok(SpilledMembers { file, starts, ids })
    }
}

impl SpilledMembers {
    /// Bytes in the spill file.
    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// Reads the members and starts back into `groups` (the spill file is removed).
    pub fn load(self, groups: &mut Groups<u64>) -> Result<()> {
        let (starts, at) = self.file.read_packed(0, self.starts)?;
        let mut ids = Vec::new();
        self.file.read(at, self.ids, &mut ids)?;
        (groups.starts, groups.ids) = (starts, ids);
        Ok(())
    }
}

/// Global facts about the collapsed fingerprints, identical on every worker.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct GroupStats {
    /// Distinct fingerprints.
    pub distinct: u64,
    /// Fingerprints shared by two or more documents.
    pub groups: u64,
    /// Documents in those groups.
    pub docs_in_groups: u64,
    /// Size of the largest group.
    pub largest: u64,
}

impl<T: Ord> Groups<T> {
    /// This worker's share of the statistics.
    fn stats(&self) -> GroupStats {
        let mut s = GroupStats {
            distinct: self.len() as u64,
            ..Default::default()
        };
        for g in 0..self.len() {
            let m = self.members(g).len() as u64;
            if m >= 2 {
                s.groups += 1;
                s.docs_in_groups += m;
                s.largest = s.largest.max(m);
            }
        }
        s
    }
}

/// Sends every `(simhash, rank)` to the simhash's owner and groups them there; returns this
/// worker's groups and the statistics over all workers.
pub fn collapse(worker: &mut Worker, keyed: Vec<(u64, u64)>) -> (Groups<u64>, GroupStats) {
    let peers = worker.peers();
    let groups = Groups::build(shuffle(worker, keyed, move |(fp, _)| owner(*fp, peers)));
    let total = all_gather(worker, groups.stats())
        .iter()
        .fold(GroupStats::default(), |a, s| GroupStats {
            distinct: a.distinct + s.distinct,
            groups: a.groups + s.groups,
            docs_in_groups: a.docs_in_groups + s.docs_in_groups,
            largest: a.largest.max(s.largest),
        });
    (groups, total)
}

/// Where [`signatures`] puts the rows of a worker's groups, in the order of `groups.fps`.
pub trait RowSink {
    /// Appends rows (values of consecutive groups, row after row).
    fn push(&mut self, rows: &[u32]) -> Result<()>;

    /// Every row pushed.
    fn seal(&mut self) -> Result<()> {
        Ok(())
    }
}

impl RowSink for Vec<u32> {
    fn push(&mut self, rows: &[u32]) -> Result<()> {
        self.extend_from_slice(rows);
        Ok(())
    }
}

impl RowSink for Columns {
    fn push(&mut self, rows: &[u32]) -> Result<()> {
        Columns::push(self, rows)
    }

    fn seal(&mut self) -> Result<()> {
        Columns::seal(self)
    }
}

/// The MinHash signatures of this worker's `groups`, pushed `into` in the order of `groups.fps`,
/// from every worker's `(key, signature)` of its distinct keys (every worker calls it together,
/// with the same `ranges`). A signature travels once per worker that holds its key, not once per
/// document, in `ranges` rounds of ascending key ranges: a worker holds about `1 / ranges` of
/// its received signatures at a time (and copies of one range of those it sends, read in one run
/// when they are spilled). A signature that cannot be read or a sink that cannot be written is
/// the error, after every round.
pub fn signatures<S: RowSink>(
    worker: &mut Worker,
    groups: &Groups<u64>,
    local: Signatures,
    ranges: usize,
    mut into: S,
) -> Result<S> {
    let peers = worker.peers();
    let (mut from, mut g, mut error) = (0, 0, None);
    let mut block: Vec<u32> = Vec::new();
    for r in 0..ranges {
        let to = from + local.count_below(from, range_end(r, ranges));
        let sent = local.copies(from, to).unwrap_or_else(|e| {
            error.get_or_insert(e);
            Vec::new()
        });
        from = to;
        let mut mine = shuffle(worker, sent, move |(key, _)| owner(*key, peers));
        mine.sort_unstable_by_key(|(key, _)| *key);
        mine.dedup_by_key(|(key, _)| *key);
        block.clear();
        for (key, values) in mine {
            if groups.fps.get(g) == Some(&key) {
                block.extend_from_slice(&values);
                g += 1;
            }
        }
        if error.is_none() {
            error = into.push(&block).err();
        }
    }
    debug_assert_eq!(g, groups.len(), "every group's signature arrived");
    match error.or_else(|| into.seal().err()) {
        Some(e) => Err(e),
        None => Ok(into),
    }
}

/// The first key past range `r` of `ranges` equal ranges of the 64-bit keys (none for the last).
fn range_end(r: usize, ranges: usize) -> Option<u64> {
    let end = (r as u128 + 1) * (1u128 << 64) / ranges as u128;
    u64::try_from(end).ok().filter(|_| r + 1 < ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_collect_identical_fingerprints() {
        let g: Groups = Groups::build(vec![(5, "b".into()), (3, "x".into()), (5, "a".into())]);
        assert_eq!(g.fps, vec![3, 5]);
        assert_eq!(g.members(1), ["a", "b"]);
        let mut seen = Vec::new();
        g.join(
            vec![4u64, 5, 3],
            |&k| k,
            |members, k| seen.push((k, members.to_vec())),
        );
        let want: Vec<(u64, Vec<String>)> = vec![
            (3, vec!["x".into()]),
            (4, vec![]),
            (5, vec!["a".into(), "b".into()]),
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn spilled_members_load_as_they_were_and_only_the_keys_stay_meanwhile() {
        use crate::spill::{Scratch, SpillMode};
        // Past a spill block of starts (128 Ki) and of members (64 Ki), groups of one to three.
        let records = (0..(3u64 << 16) + 5).map(|r| (r / 2 + r % 3 * 7919, r));
        let mut g: Groups<u64> = Groups::build(records.collect());
        let want = g.clone();
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let file = scratch.file("groups-w0", 0, "members").unwrap();
        let spilled = g.spill_members(file).unwrap();
        assert_eq!(
            spilled.bytes(),
            8 * (want.starts.len().div_ceil(2) + want.ids.len()) as u64
        );
        assert_eq!(g.fps, want.fps);
        assert!(g.starts.is_empty() && g.ids.is_empty());
        spilled.load(&mut g).unwrap();
        assert_eq!((g.starts, g.ids), (want.starts, want.ids));
    }
}
