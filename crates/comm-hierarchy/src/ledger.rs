//! The traffic ledger: every message a rank sends, counted by (src, dst, link class, phase),
//! plus one record per collective call so the cost model can rebuild its rounds.
//!
//! Counting rules:
//! - The **sender** records each message, once, when it hands the message to the transport.
//!   Merging the snapshots of all ranks therefore counts every message exactly once.
//! - A rank's message to itself (`send[rank]` of an all-to-all, the root's own part of a
//!   gather or scatter) never leaves the rank and is **not** counted.
//! - Counts are the bytes each collective really moved on the backend: an all-reduce of
//!   `n` bytes over `P` ranks moves `2 (P - 1)` chunks of about `n / P` bytes per rank. Empty
//!   messages (a barrier, an empty all-to-all part) count as messages of 0 bytes.
//! - The bookkeeping traffic of [`crate::Communicator::gather_ledger`] is not recorded.
//!
//! `Communicator::ledger_mark` and `ledger_since` give one step's delta without copying the
//! history.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::topology::LinkClass;

/// Which communicator call produced a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    AllToAll,
    AllReduce,
    Broadcast,
    Gather,
    Scatter,
    Barrier,
    /// A single [`crate::Communicator::send`].
    PointToPoint,
}

/// Bytes of one message of a collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PairBytes {
    pub src: usize,
    pub dst: usize,
    pub bytes: u64,
}

/// One communicator call as seen by the ranks whose snapshots were merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveRecord {
    /// Collective sequence number, equal on every rank for the same call; `None` for
    /// point-to-point sends, which only their sender records.
    pub seq: Option<u64>,
    pub kind: CollectiveKind,
    pub phase: String,
    /// The logical payload: the buffer reduced (all-reduce) or broadcast, the bytes a rank
    /// handed to other ranks otherwise; the maximum over the merged ranks.
    pub payload_bytes: u64,
    /// Every message the call sent between distinct ranks, sorted by (src, dst).
    pub sends: Vec<PairBytes>,
}

/// Messages and bytes from `src` to `dst` under one phase label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficEntry {
    pub phase: String,
    pub src: usize,
    pub dst: usize,
    pub link: LinkClass,
    pub bytes: u64,
    pub messages: u64,
}

/// Sums of bytes and messages by link class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub bytes_intra: u64,
    pub bytes_inter: u64,
    pub messages_intra: u64,
    pub messages_inter: u64,
}

impl Totals {
    /// Bytes over both link classes.
    pub fn bytes(&self) -> u64 {
        self.bytes_intra + self.bytes_inter
    }

    /// Messages over both link classes.
    pub fn messages(&self) -> u64 {
        self.messages_intra + self.messages_inter
    }

    fn add(&mut self, link: LinkClass, bytes: u64, messages: u64) {
        match link {
            LinkClass::Intra => {
                self.bytes_intra += bytes;
                self.messages_intra += messages;
            }
            LinkClass::Inter => {
                self.bytes_inter += bytes;
                self.messages_inter += messages;
            }
        }
    }
}

/// Why snapshots could not be combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("both ledger snapshots contain rank {rank}: merging would count its traffic twice")]
    OverlappingRanks { rank: usize },
    #[error("ledger snapshots cover different ranks ({later:?} vs {earlier:?})")]
    DifferentRanks { later: Vec<usize>, earlier: Vec<usize> },
    #[error("the earlier ledger snapshot is not a prefix of the later one ({detail})")]
    NotAPrefix { detail: String },
}

/// An immutable copy of one or more ranks' ledgers, serialisable for reports and for
/// gathering across processes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerSnapshot {
    ranks: Vec<usize>,
    traffic: Vec<TrafficEntry>,
    collectives: Vec<CollectiveRecord>,
}

impl LedgerSnapshot {
    /// Ranks whose traffic this snapshot holds, ascending.
    pub fn ranks(&self) -> &[usize] {
        &self.ranks
    }

    /// Traffic per (phase, src, dst), sorted.
    pub fn traffic(&self) -> &[TrafficEntry] {
        &self.traffic
    }

    /// Collective records: numbered collectives by sequence number, then point-to-point sends
    /// (a single rank's snapshot keeps its call order instead).
    pub fn collectives(&self) -> &[CollectiveRecord] {
        &self.collectives
    }

    /// Totals over all phases.
    pub fn totals(&self) -> Totals {
        self.totals_where(|_| true)
    }

    /// Totals of one phase label.
    pub fn phase_totals(&self, phase: &str) -> Totals {
        self.totals_where(|e| e.phase == phase)
    }

    /// The phase labels that carried traffic.
    pub fn phases(&self) -> BTreeSet<&str> {
        self.traffic.iter().map(|e| e.phase.as_str()).collect()
    }

    /// Bytes sent from `src` to `dst` over all phases.
    pub fn bytes_between(&self, src: usize, dst: usize) -> u64 {
        self.traffic.iter().filter(|e| e.src == src && e.dst == dst).map(|e| e.bytes).sum()
    }

    fn totals_where(&self, keep: impl Fn(&TrafficEntry) -> bool) -> Totals {
        let mut totals = Totals::default();
        for e in self.traffic.iter().filter(|e| keep(e)) {
            totals.add(e.link, e.bytes, e.messages);
        }
        totals
    }

    /// Adds another snapshot's ranks. Fails if a rank is in both (its traffic would count twice).
    pub fn merge(&mut self, other: &LedgerSnapshot) -> Result<(), LedgerError> {
        let mut ranks: BTreeSet<usize> = self.ranks.iter().copied().collect();
        for &rank in &other.ranks {
            if !ranks.insert(rank) {
                return Err(LedgerError::OverlappingRanks { rank });
            }
        }
        self.ranks = ranks.into_iter().collect();

        let mut traffic: BTreeMap<(String, usize, usize), TrafficEntry> = BTreeMap::new();
        for e in self.traffic.drain(..).chain(other.traffic.iter().cloned()) {
            let key = (e.phase.clone(), e.src, e.dst);
            match traffic.get_mut(&key) {
                Some(sum) => {
                    sum.bytes += e.bytes;
                    sum.messages += e.messages;
                }
                None => {
                    traffic.insert(key, e);
                }
            }
        }
        self.traffic = traffic.into_values().collect();

        let mut numbered: BTreeMap<(u64, CollectiveKind), CollectiveRecord> = BTreeMap::new();
        let mut unnumbered = Vec::new();
        for record in self.collectives.drain(..).chain(other.collectives.iter().cloned()) {
            let Some(seq) = record.seq else {
                unnumbered.push(record);
                continue;
            };
            match numbered.get_mut(&(seq, record.kind)) {
                Some(merged) => {
                    merged.payload_bytes = merged.payload_bytes.max(record.payload_bytes);
                    merged.sends.extend(record.sends);
                    merged.sends.sort_unstable();
                }
                None => {
                    numbered.insert((seq, record.kind), record);
                }
            }
        }
        self.collectives = numbered.into_values().chain(unnumbered).collect();
        Ok(())
    }

    /// Merges snapshots of disjoint rank sets.
    pub fn merge_all<'a>(snapshots: impl IntoIterator<Item = &'a LedgerSnapshot>) -> Result<Self, LedgerError> {
        let mut merged = LedgerSnapshot::default();
        for s in snapshots {
            merged.merge(s)?;
        }
        Ok(merged)
    }

    /// The traffic and calls recorded after `earlier`, an earlier snapshot of the same ledger
    /// (e.g. `comm.ledger()` taken at the start of an epoch).
    pub fn delta_since(&self, earlier: &LedgerSnapshot) -> Result<LedgerSnapshot, LedgerError> {
        if self.ranks != earlier.ranks {
            return Err(LedgerError::DifferentRanks { later: self.ranks.clone(), earlier: earlier.ranks.clone() });
        }
        let n = earlier.collectives.len();
        if n > self.collectives.len() || (n > 0 && self.collectives[n - 1] != earlier.collectives[n - 1]) {
            return Err(LedgerError::NotAPrefix {
                detail: format!("{n} earlier calls vs {} later calls", self.collectives.len()),
            });
        }
        let before: BTreeMap<(&str, usize, usize), &TrafficEntry> =
            earlier.traffic.iter().map(|e| ((e.phase.as_str(), e.src, e.dst), e)).collect();
        let mut traffic = Vec::new();
        let mut matched = 0;
        for e in &self.traffic {
            let (bytes, messages) = match before.get(&(e.phase.as_str(), e.src, e.dst)) {
                Some(old) if old.bytes > e.bytes || old.messages > e.messages => {
                    return Err(LedgerError::NotAPrefix {
                        detail: format!("traffic {} -> {} in `{}` shrank", e.src, e.dst, e.phase),
                    });
                }
                Some(old) => {
                    matched += 1;
                    (e.bytes - old.bytes, e.messages - old.messages)
                }
                None => (e.bytes, e.messages),
            };
            if messages > 0 {
                traffic.push(TrafficEntry { bytes, messages, ..e.clone() });
            }
        }
        if matched != before.len() {
            return Err(LedgerError::NotAPrefix {
                detail: "the earlier snapshot has traffic the later one lacks".into(),
            });
        }
        Ok(LedgerSnapshot { ranks: self.ranks.clone(), traffic, collectives: self.collectives[n..].to_vec() })
    }
}

/// Counts of one (src, dst) pair in one phase.
#[derive(Debug, Clone, Copy)]
struct Counts {
    link: LinkClass,
    bytes: u64,
    messages: u64,
}

/// The live ledger of one rank.
#[derive(Debug)]
pub(crate) struct Ledger {
    rank: usize,
    traffic: BTreeMap<String, BTreeMap<usize, Counts>>,
    collectives: Vec<CollectiveRecord>,
}

/// A position in one rank's ledger (the records made so far), from
/// [`crate::Communicator::ledger_mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerMark(usize);

/// Index of an open [`CollectiveRecord`] in a rank's [`Ledger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordId(usize);

impl Ledger {
    pub(crate) fn new(rank: usize) -> Self {
        Self { rank, traffic: BTreeMap::new(), collectives: Vec::new() }
    }

    /// Starts the record of one call; its messages are added with [`Ledger::record_send`].
    pub(crate) fn open(&mut self, seq: Option<u64>, kind: CollectiveKind, phase: &str, payload_bytes: u64) -> RecordId {
        self.collectives.push(CollectiveRecord {
            seq,
            kind,
            phase: phase.to_owned(),
            payload_bytes,
            sends: Vec::new(),
        });
        RecordId(self.collectives.len() - 1)
    }

    /// Adds `bytes` to an open record's payload, for calls that learn it as they go.
    pub(crate) fn add_payload(&mut self, id: RecordId, bytes: u64) {
        self.collectives[id.0].payload_bytes += bytes;
    }

    /// Counts one message of `bytes` from this rank to `dst` under the record's phase.
    pub(crate) fn record_send(&mut self, id: RecordId, dst: usize, link: LinkClass, bytes: u64) {
        let record = &mut self.collectives[id.0];
        record.sends.push(PairBytes { src: self.rank, dst, bytes });
        let per_dst = match self.traffic.get_mut(record.phase.as_str()) {
            Some(per_dst) => per_dst,
            None => self.traffic.entry(record.phase.clone()).or_default(),
        };
        let counts = per_dst.entry(dst).or_insert(Counts { link, bytes: 0, messages: 0 });
        counts.bytes += bytes;
        counts.messages += 1;
    }

    /// The current position, for [`Ledger::snapshot_since`].
    pub(crate) fn mark(&self) -> LedgerMark {
        LedgerMark(self.collectives.len())
    }

    /// What was recorded after `mark`: the same as `snapshot().delta_since(&earlier)` for the
    /// snapshot `earlier` taken at `mark`, at a cost proportional to the new records only (a
    /// long run takes one per epoch).
    pub(crate) fn snapshot_since(&self, mark: LedgerMark) -> LedgerSnapshot {
        let records = &self.collectives[mark.0.min(self.collectives.len())..];
        let mut sums: BTreeMap<(&str, usize), (u64, u64)> = BTreeMap::new();
        for record in records {
            for send in &record.sends {
                let (bytes, messages) = sums.entry((record.phase.as_str(), send.dst)).or_default();
                *bytes += send.bytes;
                *messages += 1;
            }
        }
        let traffic = sums
            .into_iter()
            .map(|((phase, dst), (bytes, messages))| TrafficEntry {
                phase: phase.to_owned(),
                src: self.rank,
                dst,
                // Every send of a record was also counted under its (phase, dst).
                link: self.traffic[phase][&dst].link,
                bytes,
                messages,
            })
            .collect();
        LedgerSnapshot { ranks: vec![self.rank], traffic, collectives: records.to_vec() }
    }

    pub(crate) fn snapshot(&self) -> LedgerSnapshot {
        let traffic = self
            .traffic
            .iter()
            .flat_map(|(phase, per_dst)| {
                per_dst.iter().map(move |(&dst, c)| TrafficEntry {
                    phase: phase.clone(),
                    src: self.rank,
                    dst,
                    link: c.link,
                    bytes: c.bytes,
                    messages: c.messages,
                })
            })
            .collect();
        LedgerSnapshot { ranks: vec![self.rank], traffic, collectives: self.collectives.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger_with(rank: usize, seq: u64, sends: &[(usize, LinkClass, u64)]) -> Ledger {
        let mut ledger = Ledger::new(rank);
        let id = ledger.open(Some(seq), CollectiveKind::AllToAll, "fwd/1", 0);
        for &(dst, link, bytes) in sends {
            ledger.record_send(id, dst, link, bytes);
        }
        ledger
    }

    #[test]
    fn merge_sums_traffic_and_joins_records_by_sequence_number() {
        let a = ledger_with(0, 7, &[(1, LinkClass::Intra, 10), (2, LinkClass::Inter, 20)]).snapshot();
        let b = ledger_with(1, 7, &[(0, LinkClass::Intra, 5)]).snapshot();
        let merged = LedgerSnapshot::merge_all([&a, &b]).unwrap();
        assert_eq!(merged.ranks(), &[0, 1]);
        let t = merged.totals();
        assert_eq!((t.bytes_intra, t.bytes_inter, t.messages()), (15, 20, 3));
        assert_eq!(merged.collectives().len(), 1);
        let srcs: Vec<(usize, usize)> = merged.collectives()[0].sends.iter().map(|s| (s.src, s.dst)).collect();
        assert_eq!(srcs, vec![(0, 1), (0, 2), (1, 0)]);
        assert_eq!(merged.bytes_between(0, 2), 20);
    }

    #[test]
    fn merging_a_rank_twice_is_refused() {
        let a = ledger_with(0, 0, &[(1, LinkClass::Intra, 1)]).snapshot();
        let mut m = a.clone();
        assert_eq!(m.merge(&a), Err(LedgerError::OverlappingRanks { rank: 0 }));
    }

    #[test]
    fn delta_keeps_only_later_traffic() {
        let mut ledger = ledger_with(0, 0, &[(1, LinkClass::Intra, 10)]);
        let before = ledger.snapshot();
        let id = ledger.open(Some(1), CollectiveKind::AllToAll, "fwd/1", 0);
        ledger.record_send(id, 1, LinkClass::Intra, 4);
        let id = ledger.open(Some(2), CollectiveKind::Broadcast, "params", 0);
        ledger.record_send(id, 3, LinkClass::Inter, 6);
        let delta = ledger.snapshot().delta_since(&before).unwrap();
        assert_eq!(delta.phase_totals("fwd/1").bytes_intra, 4);
        assert_eq!(delta.phase_totals("params").bytes_inter, 6);
        assert_eq!(delta.collectives().len(), 2);
        assert!(before.delta_since(&ledger.snapshot()).is_err());
    }
}
