//! One worker's pass through the dataflow: each step calls its stage of [`crate::stages`] with
//! that stage's settings, ends the stage on the [`Clock`], and keeps the stage's figures for the
//! summary ([`Figures`]). Every worker calls the steps in the same order: most end at a barrier.

use std::borrow::Cow;
use std::mem::take;
use std::sync::Arc;

use crate::spill::columns::Columns;
use crate::spill::{Scratch, SpillFile, SpillMode};

use timely::worker::Worker;

use super::audit;
use super::clock::{Clock, Phase};
use super::report::{kind_counts, places_and_notes, similarity_histogram, Books, Figures};
use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::Pair;
use crate::config::{Append, AuditPlan, Split};
use crate::config::{PairStage, Plan, VerifyMode, DEFAULT_MEMORY_BUDGET_MIB};
use crate::error::Result;
use crate::exchange;
use crate::exchange::ranks::{self, DocRow, Ranked};
use crate::method::{ColumnRounds, Rounds, Scoring};
use crate::output::{Member, OutputSet, RowFormat};
use crate::progress::Progress;
use crate::stages::changes::{self, Judge};
use crate::stages::kept::KeptSets;
use crate::stages::probe::Batch;
use crate::stages::rank::{self, RankOutput, Signatures};
use crate::stages::read::{RunSpill, Sketched};
use crate::stages::store::{self, StoredRanks, StoredRead, StoredShare};
use crate::stages::{cluster, collapse, corpus, expand, labels, read, verify, write};
use crate::summary::{AuditSummary, Counters, FingerprintSummary};

/// Candidate document pairs, and the groups of identical sketches when they are an output.
pub struct Candidates {
    /// Document pairs, each once (in order only where they spilled).
    pub pairs: PairList,
    /// Exact-duplicate groups `(smallest rank, others)`, for the exact-groups output.
    pub exact: Option<Vec<(u64, Vec<u64>)>>,
}

/// One worker's pass.
pub struct Pass<'a> {
    /// The run's plan.
    pub plan: &'a Plan,
    /// The output set, on worker 0 of process 0.
    pub writer: Option<&'a OutputSet>,
    /// Times, memory, progress, the first error.
    pub clock: Clock,
    /// What the stages found.
    pub figures: Figures,
    /// An audit: the ranks of the stored documents.
    pub stored: Option<StoredRanks>,
    /// The new store segment and its documents, on worker 0 of a run that writes a store.
    pub segment: Option<(Vec<u8>, u64)>,
    /// Where this process's stages spill.
    pub scratch: Arc<Scratch>,
    /// The shingle hashes the read stage kept for verification.
    pub kept: Option<KeptSets>,
    /// The worker that decompresses each shared compressed file, which reads its records again
    /// when their sketcher did not keep them (`read::readers`).
    pub readers: Vec<Option<u32>>,
    /// The ranks of the exact groups' members other than their representatives, sorted, when the
    /// exact groups output lists them and clusters are made: the pairs are expanded in full for
    /// the clusters, and the pairs output and its figures leave out a pair with one of these, as
    /// collapse mode does ([`Pass::shown`]).
    pub collapsed: Vec<u64>,
    /// False if no document read had a URL: the largest clusters' records are not read again
    /// for one (a compressed file would be decompressed again for nothing).
    pub urls_read: bool,
}

impl<'a> Pass<'a> {
    /// The pass of worker `me`, reporting to `progress`.
    pub fn new(
        me: usize,
        plan: &'a Plan,
        outputs: Option<&'a OutputSet>,
        progress: &Arc<Progress>,
        scratch: &Arc<Scratch>,
    ) -> Pass<'a> {
        crate::summary::set_memory_budget(budget(plan));
        if small_input(plan) {
            crate::summary::keep_freed_blocks();
        }
        Pass {
            plan,
            writer: outputs.filter(|_| me == 0),
            clock: Clock::start(me, plan.exec.workers, Arc::clone(progress)),
            figures: Figures::default(),
            stored: None,
            segment: None,
            scratch: Arc::clone(scratch),
            kept: None,
            readers: Vec::new(),
            collapsed: Vec::new(),
            urls_read: true,
        }
    }

    /// Reads this worker's splits into sketched documents and ranks them by id across workers
    /// (duplicate ids skipped). A run in which no record could be used, or whose keep policy
    /// reads a field no document has, is an error on every worker alike.
    pub fn read_and_rank(&mut self, worker: &mut Worker) -> Result<(Books, RankOutput)> {
        let plan = self.plan;
        let mut counters = Counters::new(plan.outputs.skipped.is_some());
        counters.copy_reasons = plan.outputs.corpus_skipped.clone();
        let progress = &self.clock.progress;
        let spills = (self.read_runs(worker.index()), self.kept_room());
        let (mut docs, split_lines) =
            read::read_worker(worker, plan, &mut counters, progress, spills);
        let new = docs.len();
        let mut of_stored = (Vec::new(), Vec::new());
        if let Some(audit) = &plan.audit {
            let stored = self.read_stored(worker, audit, &docs);
            docs.append(stored.docs);
            of_stored = (stored.crawls, stored.labels);
        }
        docs.shrink_to_fit();
        self.kept = docs.kept.take();
        let files = plan.inputs.files.iter();
        let files = files.map(crate::source::InputFile::name).collect();
        let mut shown = Vec::new();
        let unit = plan.inputs.source.entry().split.offset_unit();
        let notes = &counters.notes;
        let places = places_and_notes(worker, (files, unit), split_lines, notes, &mut shown);
        self.clock.stage("read_fingerprint", worker);

        let before = counters.notes.len();
        let documents = plan.outputs.documents.is_some() || plan.writes_store();
        let keep_rows = plan.outputs.fingerprints.is_some() || documents || plan.keeps_urls();
        let reread = plan.verify.is_some_and(|v| v.mode == VerifyMode::Exact)
            || plan.clusters.is_some()
            || documents;
        let signatures = self.signatures(worker, &mut docs)?;
        let counting = (&mut counters, plan.first_new_file());
        let mut ranked = rank::rank(worker, docs, (keep_rows, reread), signatures, counting);
        self.readers = read::readers(plan, worker.peers());
        // Read by no later stage: 16 B a document freed.
        let ranks = take(&mut ranked.ranked.ranks);
        let mut books = Books {
            counters,
            places,
            shown,
        };
        let totals = books.check_usable(worker, plan, before)?;
        // An audit's stored documents are not counted: their URLs are read as before.
        self.urls_read = totals.with_url > 0 || plan.audit.is_some();
        if plan.audit.is_some() {
            let (crawls, labels) = of_stored;
            let ranks = ranks[new..].iter().zip(crawls).zip(labels);
            let mine = ranks
                .filter(|((&r, _), _)| r != ranks::NO_RANK)
                .map(|((&r, s), l)| (r, s, l))
                .collect();
            self.stored = Some(StoredRanks::gather(worker, mine));
        }
        self.clock.stage("rank", worker);
        Ok((books, ranked))
    }

    /// An audit's stored documents that this worker reads. An unreadable segment is the run's
    /// error, kept until the end so that every worker takes part in every exchange; then no
    /// worker keeps any stored document (a worker's documents may need another's signatures).
    fn read_stored(
        &mut self,
        worker: &mut Worker,
        audit: &AuditPlan,
        new: &Sketched,
    ) -> StoredRead {
        let share = StoredShare {
            store: &audit.store,
            files: &audit.segment_files,
            crawls: audit.store.manifest().segment_numbers(),
            urls: self.plan.keeps_urls(),
            content: self.plan.keeps_content(),
            policy: self.plan.clusters.map(|c| c.keep),
        };
        let stored = audit.store.manifest().documents();
        let batch = Batch::gather(worker, self.plan, new, stored);
        let m = self.plan.method.values();
        let read = store::read_stored(worker, &share, batch, m);
        let read = self.clock.keep_value(read);
        let everyone = crate::exchange::all_gather(worker, read.is_some());
        match everyone.iter().all(|&ok| ok) {
            true => read.unwrap_or_default(),
            false => Default::default(),
        }
    }

    /// The run's documents as a new store segment, when the run (not an audit) writes a store
    /// and makes no clusters (else after them: [`Pass::store_clustered`]).
    pub fn store(&mut self, worker: &mut Worker, ranked: &RankOutput) {
        if self.plan.writes_store() && self.plan.audit.is_none() && !self.stores_clusters() {
            let signatures = ranked.signatures.to_pairs();
            let signatures = self.clock.keep_value(signatures).unwrap_or_default();
            let rows = Self::rows(&mut self.clock, &ranked.ranked);
            self.segment = store::segment(worker, &ranked.ranked, &rows, &signatures, None, None);
        }
        self.clock.stage("store", worker);
    }

    /// The cold bookkeeping of the owned ranks written to spill files (every worker calls it
    /// together, once the rank stage and the store are done), each when it passes an eighth of
    /// this worker's share of the values' budget: the origins, looked up once by verification in
    /// rank order and walked by the stages after it; the names and keep keys, which nothing
    /// reads before the clusters ([`Pass::load_cold`]); the documents' rows, read back by the
    /// stages after verification that read them, or freed when none does.
    pub fn spill_cold(&mut self, worker: &mut Worker, ranked: &mut Ranked) -> Result<()> {
        let me = worker.index();
        let what = (format!("origins-w{me}"), "the documents' origins");
        let some = !ranked.origins.is_empty();
        let origins = self.spill_cold_over((some, ranked.origins.bytes()), what, |f| {
            ranked.origins.spill(f)
        });
        let bytes = ranked.cold_bytes();
        let what = (format!("names-w{me}"), "the documents' ids and keep keys");
        let cold = origins.and_then(|o| {
            let names = self.spill_cold_over((bytes > 0, bytes), what, |f| ranked.spill_cold(f))?;
            Ok(o.unwrap_or(0) + names.unwrap_or(0))
        });
        let cold = cold.and_then(|c| Ok(c + self.spill_rows(me, &mut ranked.rows)?));
        let bytes = exchange::all_ok(worker, cold)?;
        self.figures.spilled.push(("rank".into(), bytes));
        Ok(())
    }

    /// The documents' rows freed when no stage after the rank stage's outputs reads them, else
    /// spilled by the rule of [`Pass::spill_cold_over`]; returns the bytes written.
    fn spill_rows(&self, me: usize, rows: &mut ranks::Rows) -> Result<u64> {
        if !self.plan.reads_rows_later() {
            *rows = Default::default();
        }
        let bytes = rows.held_bytes();
        let what = (
            format!("rows-w{me}"),
            "the documents' URLs and content hashes",
        );
        let spilled = self.spill_cold_over((bytes > 0, bytes), what, |f| rows.spill(f))?;
        Ok(spilled.unwrap_or(0))
    }

    /// Hands `spill` a new spill file (`name`, and `what` for a full disk's message) when there
    /// is `some` bookkeeping of `bytes` and they pass an eighth of this worker's values share
    /// (always with `spill = "always"`): the rule of the bookkeeping that no stage reads for a
    /// while (the origins, the ids and keep keys, the exact groups' members). `None` if it stays
    /// held.
    fn spill_cold_over<T>(
        &self,
        (some, bytes): (bool, u64),
        (name, what): (String, &str),
        spill: impl FnOnce(SpillFile) -> Result<T>,
    ) -> Result<Option<T>> {
        if !some || !self.scratch.wanted(bytes, self.values_share() / 8) {
            return Ok(None);
        }
        spill(self.scratch.file(&name, bytes, what)?).map(Some)
    }

    /// Spilled bookkeeping read back after verification: the names and keep keys, and the
    /// origins for the stages that walk them (the clusters' URLs, the corpus, the documents
    /// output, the store), or the origins dropped with their file when none does (every worker
    /// calls it together).
    pub fn load_cold(&mut self, worker: &mut Worker, ranked: &mut Ranked) -> Result<()> {
        let plan = self.plan;
        let o = &plan.outputs;
        let walked = plan.clusters.is_some()
            || o.corpus.is_some()
            || o.documents.is_some()
            || plan.writes_store();
        let loaded = match walked {
            true => ranked.origins.load(),
            false => {
                ranked.origins = Default::default();
                Ok(())
            }
        };
        let loaded = loaded.and_then(|()| ranked.load_cold());
        exchange::all_ok(worker, loaded)
    }

    /// True if the segment the run writes records its clusters (it makes them).
    fn stores_clusters(&self) -> bool {
        self.plan.pairs.is_some() && self.plan.clusters.is_some()
    }

    /// The run's documents as a new store segment with their clusters' labels, when the run (not
    /// an audit) writes a store and makes clusters.
    pub fn store_clustered(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        members: &[Member],
        signatures: &[(u64, Vec<u32>)],
    ) {
        if self.plan.writes_store() && self.plan.audit.is_none() && self.stores_clusters() {
            let labels = labels::labels(worker, ranked, members, &|_| None, &|_| true);
            let rows = Self::rows(&mut self.clock, ranked);
            let made = store::segment(worker, ranked, &rows, signatures, None, Some(&labels));
            self.segment = made;
            self.clock.stage("store", worker);
        }
    }

    /// The signatures a new segment will store, kept past the rounds (which consume theirs): an
    /// appending audit's, those of its new documents' keys; a run's that stores its clusters, all
    /// of them (MinHash; else none).
    pub fn new_signatures(
        &mut self,
        keyed: &[(u64, u64)],
        signatures: &Signatures,
    ) -> Vec<(u64, Vec<u32>)> {
        if !self.plan.writes_store() || (self.stored.is_none() && !self.stores_clusters()) {
            return Vec::new();
        }
        let all = self
            .clock
            .keep_value(signatures.to_pairs())
            .unwrap_or_default();
        let Some(stored) = self.stored.as_ref() else {
            return all;
        };
        let mut keys: Vec<u64> = keyed
            .iter()
            .filter(|(_, r)| !stored.contains(*r))
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        all.into_iter()
            .filter(|(k, _)| keys.binary_search(k).is_ok())
            .collect()
    }

    /// This worker's [`DocRow`]s, read back whole when spilled. An unreadable spill file is the
    /// run's error, remembered: the caller goes on with no rows, so that every worker still takes
    /// part in every exchange.
    fn rows<'r>(clock: &mut Clock, ranked: &'r Ranked) -> Cow<'r, [DocRow]> {
        clock
            .keep_value(ranked.rows.range(0..ranked.rows.len()))
            .unwrap_or_default()
    }

    /// The audit's figures, begun.
    fn audit_figures(&mut self) -> &mut AuditSummary {
        self.figures.audit.get_or_insert_with(AuditSummary::default)
    }

    /// An audit's URLs, compared with the stored ones and written, when asked for: `pairs` are
    /// the audit's verified pairs (every worker calls it together).
    pub fn changes(&mut self, worker: &mut Worker, ranked: &Ranked, pairs: &PairList) {
        let plan = self.plan;
        // The last stage that reads the kept shingle hashes: freed when it ends.
        let kept = take(&mut self.kept);
        let Some(stored) = self
            .stored
            .as_ref()
            .filter(|_| plan.outputs.compares_urls())
        else {
            self.clock.stage("changes", worker);
            return;
        };
        let rows = Self::rows(&mut self.clock, ranked);
        let mut urls = changes::pair_up(worker, ranked, &rows, &|r| stored.crawl(r));
        let matches = pairs
            .each()
            .filter(|p| stored.contains(p.a) != stored.contains(p.b));
        let mut same = changes::scored(worker, std::mem::take(&mut urls.same), matches);
        if self
            .clock
            .keep_value(exchange::all_ok(worker, pairs.check()))
            .is_none()
        {
            self.clock.stage("changes", worker);
            return;
        }
        let exact = plan.verify.filter(|v| v.mode == VerifyMode::Exact);
        if let Some(v) = exact {
            let unscored = same.iter().filter(|s| !s.unchanged && s.score.is_none());
            let pairs = unscored
                .map(|s| Pair::new(s.ends().0, s.ends().1, 0))
                .collect();
            let all = crate::config::Verification {
                threshold: 0.0,
                ..v
            };
            let rooms = [PairRoom::held(), PairRoom::held()];
            let verified = Self::exact_scores(
                (plan, &mut self.clock, &self.scratch),
                (kept.as_ref(), &self.readers),
                worker,
                ranked,
                (PairList::unsorted(pairs), rooms),
                all,
            );
            // Held pairs (`PairRoom::held`): taking them cannot fail.
            let verified =
                verified.map_or_else(Vec::new, |(kept, _)| kept.into_vec().unwrap_or_default());
            same = changes::scored(worker, same, verified.into_iter());
        }
        let judge = Judge {
            exact: exact.map(|v| v.threshold),
            distance: plan.method.distance(),
        };
        changes::judge_all(&mut same, &judge);
        urls.same = same;
        let without_url = ranked.owned().zip(rows.iter());
        // New documents: the read stage kept no blank URL.
        let without_url = without_url.filter(|(r, row)| row.url.is_none() && !stored.contains(*r));
        let counts = changes::counts(worker, &urls, without_url.count() as u64);
        self.audit_figures().urls = Some(counts);
        let o = &plan.outputs;
        let formats = write::UrlOutputs {
            changes: o.changes.as_deref().map(RowFormat::of),
            new: o.new.as_deref().map(RowFormat::of),
            gone: o.gone.as_deref().map(RowFormat::of),
        };
        let written = write::urls(worker, ranked, urls, &judge, formats, self.writer);
        self.clock.keep(written);
        self.clock.stage("changes", worker);
    }

    /// An audit's decision on each new document, written when asked for, and the new segment of
    /// the documents it appends to the store (every worker calls it together).
    pub fn decisions(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        members: &[Member],
        signatures: &[(u64, Vec<u32>)],
    ) {
        let plan = self.plan;
        let Some(stored) = self.stored.take() else {
            self.clock.stage("decisions", worker);
            return;
        };
        let is_stored = |r: u64| stored.contains(r);
        if plan.clusters.is_some() {
            let format = plan.outputs.decisions.as_deref().map(RowFormat::of);
            let counts = write::decisions(worker, ranked, members, &is_stored, format, self.writer);
            self.audit_figures().decisions = self.clock.keep_value(counts);
        }
        if let Some(append) = plan.audit.as_ref().and_then(|a| a.append) {
            let dropped = |r: u64| {
                let at = members.binary_search_by_key(&r, |m| m.rank);
                at.is_ok_and(|i| !members[i].is_representative())
            };
            let include = |r: u64| !is_stored(r) && (append == Append::All || !dropped(r));
            let of = |r: u64| stored.label(r);
            let labels = labels::labels(worker, ranked, members, &of, &include);
            let rows = Self::rows(&mut self.clock, ranked);
            let made = store::segment(
                worker,
                ranked,
                &rows,
                signatures,
                Some(&include),
                Some(&labels),
            );
            self.segment = made;
            let appended = self.segment.as_ref().map(|(_, n)| *n);
            self.audit_figures().appended = appended;
        }
        self.stored = Some(stored);
        self.clock.stage("decisions", worker);
    }

    /// `pairs` scored by exact Jaccard under `v` (those reaching its threshold kept), with the
    /// stage's figures; `None` after an error, which the clock keeps (every worker calls it
    /// together).
    fn exact_scores(
        (plan, clock, scratch): (&Plan, &mut Clock, &Arc<Scratch>),
        (kept, readers): (Option<&KeptSets>, &[Option<u32>]),
        worker: &mut Worker,
        ranked: &Ranked,
        (pairs, rooms): (PairList, [PairRoom; 2]),
        v: crate::config::Verification,
    ) -> Option<(PairList, verify::VerifyStats)> {
        let budget = budget(plan);
        let reading = verify::Reading {
            inputs: &plan.inputs,
            content: &plan.content,
            shingle: v.shingle,
            kept,
            readers,
            workers: plan.exec.workers,
        };
        let [candidates, kept] = rooms;
        let room = verify::Room {
            budget,
            workers: plan.exec.workers,
            scratch,
            candidates,
            kept,
        };
        let found = verify::verify(worker, reading, ranked, pairs, v, room);
        clock.keep_value(found)
    }

    /// An audit's candidates: the pairs of two stored documents dropped (their audit was the
    /// run that stored them), in `room`.
    fn audited(&self, pairs: PairList, room: PairRoom) -> Result<PairList> {
        match &self.stored {
            Some(stored) => pairs.retain(room, |p| !stored.joins_stored(p)),
            None => Ok(pairs),
        }
    }

    /// The fingerprints and documents outputs, when asked for.
    pub fn write_fingerprints(&mut self, worker: &mut Worker, ranked: &Ranked) {
        let outputs = &self.plan.outputs;
        if let Some(path) = &outputs.fingerprints {
            let written = write::fingerprints(worker, ranked, RowFormat::of(path), self.writer);
            self.clock.keep(written);
        }
        if let Some(path) = &outputs.documents {
            let sources = self.plan.inputs.canonical_paths();
            let format = RowFormat::of(path);
            let written = write::documents(worker, ranked, &sources, format, self.writer);
            self.clock.keep(written);
        }
        self.clock.stage("write_fingerprints", worker);
    }

    /// Candidate document pairs: identical sketches collapsed into groups, the method's rounds
    /// over the distinct sketches, sketch pairs expanded into document pairs.
    pub fn candidates(
        &mut self,
        worker: &mut Worker,
        stage: &PairStage,
        keyed: Vec<(u64, u64)>,
        signatures: Signatures,
    ) -> Result<Candidates> {
        let plan = self.plan;
        let method = plan.method.as_ref();
        self.clock.enter(Phase::Collapse);
        let (groups, total) = collapse::collapse(worker, keyed);
        self.figures.fingerprints = Some(FingerprintSummary {
            distinct: total.distinct,
            exact_duplicate_groups: total.groups,
            documents_in_exact_groups: total.docs_in_groups,
            largest_exact_group: total.largest,
        });
        // Every worker computes the same plan from the same global count and the least room
        // any process has left of its budget (the bookkeeping of the documents is resident).
        let left = crate::summary::budget_left(stage.memory_budget);
        let left = exchange::least(worker, left);
        let rounds = method.rounds(total.distinct, plan.exec.processes, left)?;
        let values = self.values(worker, (&groups, total.distinct), signatures, &*rounds)?;
        let mut groups = groups;
        let members = self.spill_members(worker, &mut groups)?;
        self.clock.stage("collapse", worker);

        if worker.index() == 0 && plan.verbose {
            crate::say!("{}", rounds.reasoning());
        }
        let sections = rounds.sections();
        (self.figures.layout, self.figures.bands) = (sections.tables, sections.bands);
        self.clock.enter(Phase::Rounds);
        let found = self.run_rounds(worker, &*rounds, (&groups.fps, &values), left)?;
        drop(values);
        let loaded = members.map_or(Ok(()), |m| m.load(&mut groups));
        exchange::all_ok(worker, loaded)?;
        self.figures.comparisons = found.comparisons;
        self.figures.largest_group = found.largest_group;
        self.figures.band_stats = found.bands;
        self.clock.stage("tables", worker);

        self.clock.enter(Phase::Pairs);
        let collapse = plan.outputs.exact_groups.is_some();
        // Clusters are made over every document pair (a group member's pairs are its
        // representative's): collapsed pairs changed the star split's clusters and what it kept.
        let expand_in_full = !collapse || plan.clusters.is_some();
        let identical = method.identical(self.estimates());
        let taken = (self.budget_left(), found.pairs.held_bytes());
        let room = self.pair_room(worker.index(), "expand", taken);
        let spilled = room.clone();
        let pairs = expand::expand(
            worker,
            &groups,
            found.pairs,
            (!expand_in_full, identical),
            room.clone(),
        );
        let pairs = exchange::all_ok(worker, pairs.and_then(|p| self.audited(p, room)))?;
        let spilled = spilled.spilled_bytes();
        self.figures.spilled.push(("expand".into(), spilled));
        let exact = collapse.then(|| expand::exact_groups(&groups));
        if collapse && expand_in_full {
            self.collapsed = collapsed_members(worker, exact.as_deref().unwrap_or_default());
        }
        drop(groups);
        self.clock.stage("expand", worker);
        Ok(Candidates { pairs, exact })
    }

    /// The candidate pairs of the sketches of `keys` with their `values` (every worker calls it
    /// together), in half of what one part of a round leaves of the `left` bytes of the budget.
    fn run_rounds(
        &mut self,
        worker: &mut Worker,
        rounds: &dyn Rounds,
        (keys, values): (&[u64], &Values<'_>),
        left: u64,
    ) -> Result<crate::method::Found> {
        let shown = Arc::clone(&self.clock.progress);
        let mut progress = move |done, total| {
            // A round frees what the next does not reuse: the rounds' peak grew round by round.
            crate::summary::release_freed_memory();
            shown.round(done, total)
        };
        let scoring = self.scoring();
        let left = left.saturating_sub(rounds.part_bytes());
        let room = self.pair_room(worker.index(), "tables", (left, 0));
        let spilled = room.clone();
        let found = match values {
            Values::Held(v) => rounds.run(worker, (keys, v), scoring, room, &mut progress),
            Values::Spilled(c, by) => {
                by.run_columns(worker, (keys, c), scoring, room, &mut progress)
            }
        };
        let found = exchange::all_ok(worker, found)?;
        let spilled = spilled.spilled_bytes();
        self.figures.spilled.push(("tables".into(), spilled));
        Ok(found)
    }

    /// The members of this worker's groups written to a spill file while the band rounds run
    /// (which read the groups' keys only), when they pass an eighth of this worker's values share
    /// (every worker calls it together).
    fn spill_members(
        &mut self,
        worker: &mut Worker,
        groups: &mut collapse::Groups<u64>,
    ) -> Result<Option<collapse::SpilledMembers>> {
        let some = (!groups.is_empty(), groups.members_bytes());
        let what = (
            format!("groups-w{}", worker.index()),
            "the exact groups' members",
        );
        let spilled = self.spill_cold_over(some, what, |f| groups.spill_members(f));
        let spilled = exchange::all_ok(worker, spilled)?;
        let bytes = spilled.as_ref().map_or(0, collapse::SpilledMembers::bytes);
        self.figures.spilled.push(("collapse".into(), bytes));
        Ok(spilled)
    }

    /// The values of this worker's distinct sketches for `rounds` (none for simhash): held, or
    /// spilled by column group when the rounds read them so and they pass this worker's share
    /// of the budget, a quarter of it over the process's workers (every worker calls it
    /// together).
    fn values<'r>(
        &mut self,
        worker: &mut Worker,
        (groups, distinct): (&collapse::Groups<u64>, u64),
        signatures: Signatures,
        rounds: &'r dyn Rounds,
    ) -> Result<Values<'r>> {
        let m = self.plan.method.values();
        if m == 0 {
            return Ok(Values::Held(Vec::new()));
        }
        let bytes = distinct * 4 * m as u64 / worker.peers() as u64;
        let share = self.values_share();
        // Each key range's signatures are held at once: an eighth of the share, or less.
        let mut ranges = bytes.div_ceil((share / 8).max(1)).clamp(1, 4096) as usize;
        let by = rounds.by_columns(self.scoring());
        let Some(by) = by.filter(|_| self.scratch.wanted(bytes, share)) else {
            let held = Vec::with_capacity(groups.len() * m);
            let held = collapse::signatures(worker, groups, signatures, ranges, held);
            return Ok(Values::Held(exchange::all_ok(worker, held)?));
        };
        if self.scratch.mode() == SpillMode::Always {
            ranges = ranges.max(8);
        }
        let name = format!("values-w{}", worker.index());
        let file = self
            .scratch
            .file(&name, bytes, "the band rounds' sketch values");
        let file = exchange::all_ok(worker, file)?;
        let into = Columns::new(file, m, by.width());
        let spilled = collapse::signatures(worker, groups, signatures, ranges, into);
        let columns = exchange::all_ok(worker, spilled)?;
        self.figures
            .spilled
            .push(("tables".into(), columns.bytes()));
        Ok(Values::Spilled(columns, by))
    }

    /// MinHash: the signature of each distinct key of this worker's documents, taken from them;
    /// in a spill file in key order when the read stage spilled them in runs (merged here), or
    /// when they pass this worker's share of the budget and the run finds pairs (the one stage
    /// that reads them back) and writes no store (every worker calls it together).
    fn signatures(&mut self, worker: &mut Worker, docs: &mut Sketched) -> Result<Signatures> {
        let m = self.plan.method.values();
        if m == 0 {
            return Ok(Signatures::default());
        }
        let runs = exchange::all_ok(worker, docs.runs.take().transpose())?;
        let (values, keys) = (take(&mut docs.values), take(&mut docs.value_keys));
        let made = match runs {
            Some(mut runs) => runs.write(&keys, &values).and_then(|()| {
                let bytes = runs.bytes();
                self.figures.spilled.push(("read".into(), bytes));
                Signatures::merged(runs, m, self.signatures_file(worker.index(), bytes)?)
            }),
            None => {
                let given = take(&mut docs.signatures);
                self.spilled_if_over(worker.index(), Signatures::of(&keys, values, m, given))
            }
        };
        let signatures = exchange::all_ok(worker, made)?;
        self.figures
            .spilled
            .push(("rank".into(), signatures.spilled_bytes()));
        Ok(signatures)
    }

    /// `signatures` written to a spill file when they pass this worker's share of the budget and
    /// only a pairs stage reads them back ([`Pass::signatures_read_once`]).
    fn spilled_if_over(&self, me: usize, mut signatures: Signatures) -> Result<Signatures> {
        let bytes = signatures.held_bytes();
        if self.signatures_read_once() && self.scratch.wanted(bytes, self.values_share()) {
            signatures.spill(self.signatures_file(me, bytes)?)?;
        }
        Ok(signatures)
    }

    /// The spill file of worker `me`'s signatures, for `bytes` of them.
    fn signatures_file(&self, me: usize, bytes: u64) -> Result<SpillFile> {
        let name = format!("signatures-w{me}");
        self.scratch.file(&name, bytes, "the documents' signatures")
    }

    /// True if the signatures are read back once, in key order, by the stage that finds pairs:
    /// the run finds pairs and writes no store (a store segment is made from them in memory).
    fn signatures_read_once(&self) -> bool {
        self.plan.pairs.is_some() && !self.plan.writes_store()
    }

    /// Where the read stage spills the documents' signatures in sorted runs, and past how many
    /// bytes held: a run that finds pairs over MinHash values, writes no store and audits
    /// nothing, past the values' share (a 256th of it with `spill = "always"`, so that small
    /// inputs make several runs).
    fn read_runs(&self, me: usize) -> Option<RunSpill> {
        let plan = self.plan;
        let wanted =
            plan.method.values() > 0 && self.signatures_read_once() && plan.audit.is_none();
        let share = self.values_share();
        let bytes = match self.scratch.mode() {
            SpillMode::Never => return None,
            SpillMode::Always => (share / 256).max(4096),
            SpillMode::Auto => share,
        };
        wanted.then(|| RunSpill {
            scratch: Arc::clone(&self.scratch),
            bytes,
            worker: me,
        })
    }

    /// The shingle length of verification's sets and the bytes of their hashes the read stage
    /// keeps a worker, so that verification reads no record again: an eighth of the process's
    /// budget over its workers (or four times the input, if less), when verification is exact,
    /// `spill` is not `"always"` (which reads every record again), and the input (four times a
    /// compressed file) fits that eighth.
    /// Keeping costs every document and reading again only those in candidate pairs: on a
    /// larger input, of which only part could be kept, keeping was slower (docs/PERFORMANCE.md).
    fn kept_room(&self) -> Option<(usize, u64)> {
        let v = self.plan.verify.filter(|v| v.mode == VerifyMode::Exact)?;
        let keeps = small_input(self.plan) && self.scratch.mode() != SpillMode::Always;
        // Reserved up front: at most what the hashes of the whole input take at 2 bytes a token.
        let share = budget(self.plan) / 8 / self.plan.exec.workers as u64;
        let input = input_bytes(self.plan);
        keeps.then_some((v.shingle, share.min(input.saturating_mul(4))))
    }

    /// Where worker `me`'s pairs spill in `stage`, and past how many held: half of what the
    /// process has `left` of its budget as the stage begins, over its workers (an eighth of the
    /// budget over them at least), and the bytes `given_back` as the stage reads the pairs it
    /// turns into these (a 256th of that eighth with `spill = "always"`, so that small inputs
    /// make several runs).
    fn pair_room(&self, me: usize, stage: &str, (left, given_back): (u64, u64)) -> PairRoom {
        let budget = budget(self.plan);
        let workers = self.plan.exec.workers as u64;
        let bytes = match self.scratch.mode() {
            SpillMode::Never => return PairRoom::held(),
            SpillMode::Always => (budget / 8 / workers / 256).max(2048),
            SpillMode::Auto => (budget / 8).max(left / 2) / workers + given_back,
        };
        PairRoom {
            records: (bytes / std::mem::size_of::<Pair>() as u64).max(1) as usize,
            scratch: Some(Arc::clone(&self.scratch)),
            name: format!("pairs-{stage}-w{me}"),
            written: Default::default(),
        }
    }

    /// What the process has left of its budget now ([`crate::summary::budget_left`]).
    fn budget_left(&self) -> u64 {
        crate::summary::budget_left(budget(self.plan))
    }

    /// A worker's share of the budget for the sketch values (signatures, band keys): a quarter
    /// of the process's budget over its workers.
    fn values_share(&self) -> u64 {
        budget(self.plan) / 4 / self.plan.exec.workers as u64
    }

    /// True if pairs carry an estimate: the method gives one and no exact verification follows.
    fn estimates(&self) -> bool {
        self.plan.method.estimates()
            && self
                .plan
                .verify
                .is_none_or(|v| v.mode == VerifyMode::Estimate)
    }

    /// How the rounds score their pairs: estimated when no exact verification follows, and
    /// filtered by the threshold in estimate mode.
    fn scoring(&self) -> Scoring {
        Scoring {
            estimate: self.estimates(),
            threshold: self
                .plan
                .verify
                .filter(|v| v.mode == VerifyMode::Estimate)
                .map(|v| v.threshold),
        }
    }

    /// The candidates whose exact Jaccard reaches the threshold, when verification is exact
    /// (else the candidates as they are).
    pub fn verify(&mut self, worker: &mut Worker, ranked: &Ranked, pairs: PairList) -> PairList {
        let plan = self.plan;
        let me = worker.index();
        // The kept pairs grow as the candidates are taken (their room given back).
        let taken = (self.budget_left(), pairs.held_bytes());
        let rooms = [
            self.pair_room(me, "candidates", taken),
            self.pair_room(me, "kept", taken),
        ];
        let pairs = match plan.verify.filter(|v| v.mode == VerifyMode::Exact) {
            None => pairs,
            Some(v) => Self::exact_scores(
                (plan, &mut self.clock, &self.scratch),
                (self.kept.as_ref(), &self.readers),
                worker,
                ranked,
                (pairs, rooms),
                v,
            )
            .map_or_else(PairList::default, |(kept, stats)| {
                self.figures.verify = Some(stats);
                kept
            }),
        };
        let shown = pairs.each().filter(|p| self.shown(p));
        self.figures.by_similarity = similarity_histogram(worker, shown);
        let shown = pairs.each().filter(|p| self.shown(p));
        self.figures.by_kind = kind_counts(worker, shown);
        self.clock.keep(pairs.check());
        self.clock.stage("verify", worker);
        pairs
    }

    /// Clusters over the pairs (expanded in full), when asked for: the members of the ranks this
    /// worker owns.
    pub fn clusters(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        pairs: &PairList,
    ) -> Vec<Member> {
        let members = match self.plan.clusters {
            None => Vec::new(),
            Some(c) => {
                let mut more: Vec<cluster::Link> = Vec::new();
                let stored = self.stored.as_ref();
                if let Some(s) = stored.filter(|_| c.split == Split::None) {
                    more.extend(s.cluster_edges(worker, pairs.each()));
                }
                let edges = cluster::Edges { pairs, more };
                let is_stored = |r: u64| stored.is_some_and(|s| s.contains(r));
                let held = stored.map(|_| &is_stored as &dyn Fn(u64) -> bool);
                let room = self.pair_room(worker.index(), "clusters", (self.budget_left(), 0));
                // The star split's places, on every worker when they fit a sixteenth of the
                // budget over the workers (never with `spill = "always"`, the least memory).
                let table_room = match self.scratch.mode() {
                    SpillMode::Always => 0,
                    _ => self.values_share() / 4,
                };
                let rooms = (&room, table_room);
                let made = cluster::clusters(worker, ranked, edges, (c, rooms), held);
                self.figures
                    .spilled
                    .push(("clusters".into(), room.spilled_bytes()));
                self.clock.keep(pairs.check());
                let Some((members, stats)) = self.clock.keep_value(made) else {
                    self.clock.stage("clusters", worker);
                    return Vec::new();
                };
                let f = &mut self.figures;
                let readers = self.urls_read.then_some(&self.readers[..]);
                let reading = (&self.plan.inputs, readers);
                f.largest = cluster::name_largest(worker, reading, ranked, &stats.top);
                f.clusters = Some(stats);
                let first = self.plan.first_new_file();
                let inputs = &self.plan.inputs;
                f.by_file = corpus::file_counts(worker, inputs, first, ranked, &members);
                members
            }
        };
        self.clock.stage("clusters", worker);
        members
    }

    /// The deduplicated corpus, when asked for.
    pub fn corpus(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        members: &[Member],
        copy_at: &[crate::source::Location],
    ) {
        if let Some(path) = &self.plan.outputs.corpus {
            let inputs = &self.plan.inputs;
            let first = self.plan.first_new_file();
            let written = corpus::write(
                worker,
                inputs,
                first,
                path,
                ranked,
                members,
                copy_at,
                self.writer,
            );
            self.figures.corpus = self.clock.keep_value(written);
        }
        self.clock.stage("corpus", worker);
    }

    /// The pairs and exact groups outputs, and the cluster outputs when there are clusters.
    pub fn write_pairs(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        pairs: PairList,
        exact: Option<Vec<(u64, Vec<u64>)>>,
        members: &[Member],
    ) {
        self.clock.enter(Phase::Write);
        let o = &self.plan.outputs;
        let formats = (format_of(&o.pairs), format_of(&o.exact_groups));
        let k = self.plan.method.distance();
        let taken = (self.budget_left(), pairs.held_bytes());
        let room = self.pair_room(worker.index(), "write", taken);
        let spilled = room.clone();
        let pairs = self.collapse(worker, pairs, &room);
        let counts = match self.stored {
            None => write::pairs(
                worker,
                ranked,
                ("pairs", room),
                pairs,
                exact,
                (k, self.measure()),
                formats,
                self.writer,
            ),
            Some(_) => self.write_audit_pairs(worker, ranked, pairs, room),
        };
        if let Some((by_distance, spread)) = self.clock.keep_value(counts) {
            self.figures.by_distance = Some(by_distance);
            self.figures.written_spread = spread;
        }
        if self.plan.clusters.is_some() {
            let formats = write::ClusterOutputs {
                clusters: o.clusters.as_deref().map(RowFormat::of),
                keep: o.keep.as_deref().map(RowFormat::of),
                drop: o.drop.as_deref().map(RowFormat::of),
            };
            let written = write::clusters(worker, ranked, members, formats, self.writer);
            self.clock.keep(written);
        }
        let spilled = spilled.spilled_bytes();
        self.figures.spilled.push(("write_pairs".into(), spilled));
        self.clock.stage("write_pairs", worker);
    }

    /// What a verified pair's similarity measures (Jaccard unless verification measures
    /// containment).
    fn measure(&self) -> crate::text::Measure {
        let v = self.plan.verify.filter(|v| v.mode == VerifyMode::Exact);
        v.map_or(crate::text::Measure::Jaccard, |v| v.measure)
    }

    /// True if pair `p` is one the pairs output lists: not one of a member of an exact group other
    /// than its representative, when the pairs were expanded in full for the clusters.
    fn shown(&self, p: &Pair) -> bool {
        let c = &self.collapsed;
        c.is_empty() || (c.binary_search(&p.a).is_err() && c.binary_search(&p.b).is_err())
    }

    /// `pairs` without those the exact groups output stands for, when they were expanded in full
    /// for the clusters (every worker calls it together; `collapsed` is the same on each).
    fn collapse(&mut self, worker: &mut Worker, pairs: PairList, room: &PairRoom) -> PairList {
        if self.collapsed.is_empty() {
            return pairs;
        }
        let kept = pairs.retain(room.clone(), |p| self.shown(p));
        let kept = exchange::all_ok(worker, kept);
        self.clock.keep_value(kept).unwrap_or_default()
    }

    /// An audit's pairs, written apart: its matches (new document first) and its batch pairs,
    /// with the audit's figures; the counts by distance of both (every worker calls it together).
    fn write_audit_pairs(
        &mut self,
        worker: &mut Worker,
        ranked: &Ranked,
        pairs: PairList,
        room: PairRoom,
    ) -> Result<(Vec<u64>, bool)> {
        let (plan, stored) = (self.plan, self.stored.as_ref().expect("an audit"));
        let split = pairs.partition([room.clone(), room.clone()], |p| stored.is_match(p));
        let [matches, batch] = exchange::all_ok(worker, split)?;
        let figures = audit::summary(worker, plan, stored, &matches, batch.len())?;
        let found = self.figures.audit.take().unwrap_or_default();
        self.figures.audit = Some(AuditSummary {
            urls: found.urls,
            decisions: found.decisions,
            appended: found.appended,
            ..figures
        });
        let o = &plan.outputs;
        let (k, w) = ((plan.method.distance(), self.measure()), self.writer);
        let formats = (format_of(&o.matches), format_of(&o.batch_pairs));
        let to = |name| (name, room.clone());
        let found = write::pairs(worker, ranked, to("matches"), matches, None, k, formats, w);
        let formats = (formats.1, formats.1);
        let batch = write::pairs(
            worker,
            ranked,
            to("batch_pairs"),
            batch,
            None,
            k,
            formats,
            w,
        );
        let ((found, spread), (batch, batch_spread)) = (found?, batch?);
        let by_distance = found.iter().zip(batch).map(|(x, y)| x + y).collect();
        Ok((by_distance, spread || batch_spread))
    }

    /// The skipped-records output, in input order, when asked for; the notes are dropped.
    pub fn write_skipped(&mut self, worker: &mut Worker, books: &mut Books) {
        if self.plan.outputs.skipped.is_some() {
            let rows = std::mem::take(&mut books.counters.notes)
                .iter()
                .map(|n| n.row(&books.places.files, &books.places.lines))
                .collect();
            let written = write::skipped(worker, rows, self.writer);
            self.clock.keep(written);
        }
        books.counters.notes.clear();
    }
}

/// The process's memory budget in bytes.
fn budget(plan: &Plan) -> u64 {
    let pairs = plan.pairs.as_ref();
    pairs.map_or(DEFAULT_MEMORY_BUDGET_MIB << 20, |p| p.memory_budget)
}

/// True if the run's input ([`input_bytes`]) fits an eighth of its budget: nothing such a run
/// holds comes near the budget (it keeps its shingle hashes, and its allocator its freed blocks).
fn small_input(plan: &Plan) -> bool {
    input_bytes(plan) <= budget(plan) / 8
}

/// The bytes of the run's input, a compressed file counted four times its size.
fn input_bytes(plan: &Plan) -> u64 {
    let files = plan.inputs.files.iter();
    files
        .map(|f| match f.compression {
            crate::source::Compression::None => f.size,
            _ => f.size.saturating_mul(4),
        })
        .sum()
}

/// The row format of a pairs output's `path` (tab-separated when it is not asked for).
fn format_of(path: &Option<std::path::PathBuf>) -> RowFormat {
    path.as_deref().map_or(RowFormat::Tsv, RowFormat::of)
}

/// The values of a worker's distinct sketches, as the rounds read them.
enum Values<'r> {
    /// In memory, row after row.
    Held(Vec<u32>),
    /// In a spill file by column group, for rounds that read them so.
    Spilled(Columns, &'r dyn ColumnRounds),
}

/// Every worker's exact groups' members other than their representatives (`groups` is this
/// worker's), sorted, on every worker (every worker calls it together).
fn collapsed_members(worker: &mut Worker, groups: &[(u64, Vec<u64>)]) -> Vec<u64> {
    let mine: Vec<u64> = groups.iter().flat_map(|(_, m)| m[1..].to_vec()).collect();
    let mut all: Vec<u64> = exchange::all_gather(worker, mine).concat();
    all.sort_unstable();
    all
}
