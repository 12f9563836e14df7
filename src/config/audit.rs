//! A plan against a sketch store: the parameters a store pins, and an audit's plan (the new
//! documents, and the stored ones located in their source files).

use std::path::{Path, PathBuf};

use super::{Append, AuditPlan, Plan, VerifyMode};
use crate::error::Result;
use crate::source::files::{FileStamp, InputFile};
use crate::store::{same_parameters, Store};

impl Plan {
    /// True if the run appends documents to a store: a run with a store, or an audit that
    /// appends its new documents.
    pub fn writes_store(&self) -> bool {
        match &self.audit {
            None => self.store.is_some(),
            Some(a) => a.append.is_some(),
        }
    }

    /// The index of the first input file the run reads whole: after an audit's stored documents'
    /// source files (read again only, never copied or counted), else 0.
    pub fn first_new_file(&self) -> usize {
        self.audit.as_ref().map_or(0, |a| a.stored_files)
    }

    /// True if the documents' URLs are read: an output lists them, a store keeps them, or an
    /// audit compares them.
    pub fn keeps_urls(&self) -> bool {
        let o = &self.outputs;
        o.fingerprints.is_some()
            || o.documents.is_some()
            || o.compares_urls()
            || self.writes_store()
    }

    /// True if the documents' content hashes are kept: the documents output lists them, a store
    /// keeps them, or an audit compares them.
    pub fn keeps_content(&self) -> bool {
        self.outputs.documents.is_some()
            || self.outputs.compares_urls()
            || self.writes_store()
            || self.rereads_stored()
    }

    /// True if a stage after the outputs that list documents (written once the rank stage is
    /// done) reads the documents' rows: a store segment, an audit's URL changes, or its
    /// verification of stored documents (their content hashes).
    pub fn reads_rows_later(&self) -> bool {
        self.outputs.compares_urls() || self.writes_store() || self.rereads_stored()
    }

    /// True if the run is an audit whose exact verification reads stored documents again: their
    /// content hashes say whether a source file still holds the text that was stored.
    fn rereads_stored(&self) -> bool {
        self.audit.is_some() && self.verify.is_some_and(|v| v.mode == VerifyMode::Exact)
    }

    /// What a match depends on, which a store pins: how records are read and their text made,
    /// the method and every parameter of it, the longest record.
    pub fn store_parameters(&self) -> Vec<String> {
        let i = &self.inputs;
        let mut lines = i.source.describe();
        if i.source.entry().text {
            lines.push(crate::store::content_parameter(&format!(
                "content = {:?}",
                self.content
            )));
            lines.push(crate::store::tokenizer_parameter());
        }
        lines.push(format!("method = {}", self.method.name()));
        lines.extend(self.method.describe());
        lines.push(format!("max_record_bytes = {}", i.max_record_bytes));
        lines
    }

    /// Takes the method a store keeps when verification is exact ([`crate::method::Method::for_store`]:
    /// MinHash's band keys), unless the run's store holds the method's whole values (a store made
    /// by an estimating run, or before band keys were kept, which still appends and audits as it
    /// was made).
    pub fn fit_store(&mut self) {
        let Some(dir) = &self.store else { return };
        if !self.verify.is_some_and(|v| v.mode == VerifyMode::Exact) {
            return;
        }
        let held = Store::open(dir)
            .ok()
            .map(|s| s.manifest().parameters.clone());
        if let Some(whole) = self.method.with_whole_values() {
            let keys = std::mem::replace(&mut self.method, whole);
            if held
                .as_deref()
                .is_some_and(|h| same_parameters(h, &self.store_parameters()))
            {
                return;
            }
            self.method = keys;
        }
        let Some(stored) = self.method.for_store() else {
            return;
        };
        if held
            .as_deref()
            .is_some_and(|h| same_parameters(h, &self.store_parameters()))
        {
            return;
        }
        self.method = stored;
    }

    /// Refuses an output inside the store's directory (which holds the store alone: an output
    /// there was mixed with the store's files) and a store inside the corpus directory (which a
    /// commit replaces whole). Before any work.
    pub fn check_store_apart(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        // A store names each document's source by its path as text, to read it again.
        let mut paths = self.inputs.files.iter().map(InputFile::canonical_path);
        let not_text = paths.find(|p| p.to_str().is_none());
        if let Some(f) = not_text.filter(|_| self.writes_store()) {
            crate::bail!(
                Input,
                "{} cannot go into the store {}: its path is not valid UTF-8, and a store names \
                 each document's source file as text to read it again; rename it (convmv does) \
                 or run without a store",
                f.to_string_lossy(),
                store.display()
            );
        }
        let real = crate::output::paths::resolved;
        let store_real = real(store)?;
        for (name, path) in self.outputs.requests() {
            if path == Path::new("-") {
                continue;
            }
            let output = real(&path)?;
            crate::ensure!(
                !output.starts_with(&store_real),
                Output,
                "output {name} ({}) lies inside the store {}: a store's directory holds the \
                 store alone; give the outputs another directory",
                path.display(),
                store.display()
            );
            crate::ensure!(
                name != "corpus" || !store_real.starts_with(&output),
                Output,
                "the store {} lies inside the corpus directory {}: committing the corpus would \
                 replace it; choose paths outside each other",
                store.display(),
                path.display()
            );
        }
        Ok(())
    }

    /// The files of the run's store that exist: its manifest and segments.
    pub fn store_files(&self) -> Vec<PathBuf> {
        let Some(dir) = &self.store else {
            return Vec::new();
        };
        let mut files = vec![dir.join(crate::store::MANIFEST)];
        let segments = std::fs::read_dir(dir.join(crate::store::SEGMENTS));
        files.extend(segments.into_iter().flatten().flatten().map(|e| e.path()));
        files.retain(|f| f.is_file());
        files
    }

    /// The source files of the documents the run's store holds, if it exists: an audit reads
    /// their text again, so no output may replace them (a run appending to the store, whose
    /// corpus directory held an earlier run's sources, would have).
    pub fn store_sources(&self) -> Vec<PathBuf> {
        let Some(store) = self.store.as_deref().and_then(|d| Store::open(d).ok()) else {
            return Vec::new();
        };
        let (sources, _) = store.manifest().united_sources();
        sources.into_iter().map(PathBuf::from).collect()
    }

    /// This plan as an audit of its inputs against the store in `dir`: the store must have been
    /// made with this plan's parameters. The stored documents' source files lead the input files,
    /// to be read again where exact verification needs their text (they must then still be
    /// there, unchanged); they are not read whole.
    pub fn audit_against(mut self, dir: &Path, append: Option<Append>) -> Result<Plan> {
        crate::ensure!(
            append != Some(Append::Kept) || self.clusters.is_some(),
            Config,
            "--append keeps the documents the audit keeps, which its clusters decide: set \
             [output] decisions (or corpus), or give --append all"
        );
        let store = Store::open(dir)?;
        self.store = Some(dir.to_path_buf());
        self.fit_store();
        store.check_parameters(&self.store_parameters())?;
        let (sources, segment_files) = store.manifest().united_sources();
        let rereads = self.verify.is_some_and(|v| v.mode == VerifyMode::Exact);
        let mut stored = sources
            .iter()
            .map(|p| stored_file(Path::new(p), rereads))
            .collect::<Result<Vec<_>>>()?;
        if rereads {
            self.inputs.source.open(&mut stored)?;
        }
        let stored_files = stored.len();
        stored.append(&mut self.inputs.files);
        self.inputs.files = stored;
        self.store = Some(dir.to_path_buf());
        self.audit = Some(AuditPlan {
            store,
            stored_files,
            segment_files,
            append,
        });
        Ok(self)
    }
}

/// A stored document's source file; it must exist when the audit reads stored text again.
fn stored_file(path: &Path, rereads: bool) -> Result<InputFile> {
    let missing = |e: std::io::Error| {
        crate::error::Error::Input(format!(
            "{} holds stored documents, and exact verification reads their text again, but it \
             cannot be read: {e} (put it back; a store made by an estimating run can be \
             audited with [verify] mode = \"estimate\" instead)",
            path.display()
        ))
    };
    let (size, compression, stamp) = match std::fs::metadata(path) {
        Ok(m) => {
            let compression = crate::source::files::sniff(path).map_err(missing)?;
            (m.len(), compression, Some(FileStamp::of(&m)))
        }
        Err(e) if rereads => return Err(missing(e)),
        Err(_) => (0, crate::source::files::Compression::None, None),
    };
    Ok(InputFile {
        path: PathBuf::from(path),
        size,
        compression,
        row_groups: Vec::new(),
        stamp,
    })
}
