//! The settings of the cluster stage: how a cluster's representative is chosen and how
//! components are cut. The stage itself is `stages/cluster/`; the keep key of a document,
//! `stages/keep.rs`.

/// Clusters: connected components over the pairs, a representative per cluster.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClusterPlan {
    /// How the representative is chosen.
    pub keep: KeepPolicy,
    /// How components are cut into clusters.
    pub split: Split,
}

/// How a cluster's representative is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepPolicy {
    /// The smallest id.
    First,
    /// The most tokens (the text the sketch saw; for HTML, after boilerplate removal).
    Longest,
    /// The latest timestamp (`WARC-Date`, or the JSON Lines field named by the policy).
    Newest,
    /// The earliest timestamp.
    Oldest,
    /// The largest number in a JSON Lines field (a quality score).
    Highest,
}

impl KeepPolicy {
    /// Parses `first`, `longest`, `newest`, `oldest` or `highest`.
    pub fn parse(s: &str) -> Option<KeepPolicy> {
        Some(match s {
            "first" => KeepPolicy::First,
            "longest" => KeepPolicy::Longest,
            "newest" => KeepPolicy::Newest,
            "oldest" => KeepPolicy::Oldest,
            "highest" => KeepPolicy::Highest,
            _ => return None,
        })
    }

    /// Its name in a job file.
    pub fn name(self) -> &'static str {
        match self {
            KeepPolicy::First => "first",
            KeepPolicy::Longest => "longest",
            KeepPolicy::Newest => "newest",
            KeepPolicy::Oldest => "oldest",
            KeepPolicy::Highest => "highest",
        }
    }

    /// True if the rule reads a field of the record (a timestamp or a number).
    pub fn needs_field(self) -> bool {
        matches!(
            self,
            KeepPolicy::Newest | KeepPolicy::Oldest | KeepPolicy::Highest
        )
    }
}

/// How clusters are cut.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Split {
    /// Connected components (transitive closure): a chain A~B~C is one cluster.
    #[default]
    None,
    /// Star clusters: in keep-policy order, the best document not yet taken becomes a
    /// representative and takes every document paired with it directly. Every dropped document is
    /// then a verified near-duplicate of the one kept in its place.
    Star,
}

impl Split {
    /// Parses `none` or `star`.
    pub fn parse(s: &str) -> Option<Split> {
        match s {
            "none" => Some(Split::None),
            "star" => Some(Split::Star),
            _ => None,
        }
    }

    /// Its name in a job file.
    pub fn name(self) -> &'static str {
        match self {
            Split::None => "none",
            Split::Star => "star",
        }
    }
}
