//! Saved plans (`plan -out FILE`) and their binding to one state version and one manifest.
//!
//! A saved plan is only safe to apply against exactly the world it was made for: the same state
//! history (lineage), the same version of it (serial), the same manifest and variables (hash), and
//! the same dsinfra. [`check_binding`] refuses anything else, saying what moved and what to do.

use serde_json::Value;

use super::Plan;
use crate::state::{DSINFRA_VERSION, State};

/// The saved-plan file format this build writes and the newest it reads.
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// Why a saved plan cannot be applied any more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StalePlan {
    /// Made by another dsinfra version.
    #[error(
        "the saved plan was made by dsinfra {saved}, this is dsinfra {current}: run `dsinfra plan -out` again"
    )]
    OtherVersion {
        /// Version in the plan.
        saved: String,
        /// This build.
        current: String,
    },
    /// Made against another state history.
    #[error(
        "the saved plan was made against state lineage {saved}, but the state now has lineage {current} (it was replaced or belongs to another experiment): run `dsinfra plan -out` again"
    )]
    OtherLineage {
        /// Lineage in the plan.
        saved: String,
        /// Lineage of the state now.
        current: String,
    },
    /// The state changed since.
    #[error(
        "the saved plan was made against state serial {saved}, the state is now at serial {current}: run `dsinfra plan -out` again"
    )]
    OtherSerial {
        /// Serial in the plan.
        saved: u64,
        /// Serial of the state now.
        current: u64,
    },
    /// The manifest or its variables changed since.
    #[error(
        "the manifest or its variables changed since the plan was saved (hash {saved} then, {current} now): run `dsinfra plan -out` again"
    )]
    ManifestChanged {
        /// Short hash in the plan.
        saved: String,
        /// Short hash now.
        current: String,
    },
}

/// Why a file is not a saved plan this build can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanFileError {
    /// Not JSON, or not a plan.
    #[error("{file} is not a saved dsinfra plan: {message}")]
    Corrupt {
        /// The file as named by the user.
        file: String,
        /// What the parser found.
        message: String,
    },
    /// Written by a newer dsinfra.
    #[error(
        "{file} is a saved plan of format {found}, but this dsinfra reads format {supported} at most: apply it with the dsinfra that made it, or run `dsinfra plan -out` again"
    )]
    NewerFormat {
        /// The file.
        file: String,
        /// Its format.
        found: u64,
        /// The newest this build reads.
        supported: u32,
    },
}

fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

/// Check that `saved` was made against `state` as it is now and against the manifest whose hash is
/// `manifest_hash`. A state that was never saved (serial 0) has a fresh lineage on every run, so
/// lineages are compared only once the state exists.
pub fn check_binding(saved: &Plan, state: &State, manifest_hash: &str) -> Result<(), StalePlan> {
    let binding = &saved.binding;
    if binding.dsinfra_version != DSINFRA_VERSION {
        return Err(StalePlan::OtherVersion {
            saved: binding.dsinfra_version.clone(),
            current: DSINFRA_VERSION.to_owned(),
        });
    }
    if binding.serial > 0 && state.serial > 0 && binding.lineage != state.lineage {
        return Err(StalePlan::OtherLineage {
            saved: binding.lineage.clone(),
            current: state.lineage.clone(),
        });
    }
    if binding.serial != state.serial {
        return Err(StalePlan::OtherSerial {
            saved: binding.serial,
            current: state.serial,
        });
    }
    if binding.manifest_hash != manifest_hash {
        return Err(StalePlan::ManifestChanged {
            saved: short(&binding.manifest_hash),
            current: short(manifest_hash),
        });
    }
    Ok(())
}

impl Plan {
    /// The plan as a saved-plan file (pretty JSON, final newline).
    ///
    /// # Panics
    ///
    /// Never: every map in it has string keys, so serialisation cannot fail.
    pub fn to_saved_json(&self) -> String {
        let mut text =
            serde_json::to_string_pretty(self).expect("a Plan always serialises: keys are strings");
        text.push('\n');
        text
    }

    /// Read a saved-plan file; `file` names it in errors.
    pub fn from_saved_json(text: &str, file: &str) -> Result<Self, PlanFileError> {
        let corrupt = |err: serde_json::Error| PlanFileError::Corrupt {
            file: file.to_owned(),
            message: err.to_string(),
        };
        let raw: Value = serde_json::from_str(text).map_err(corrupt)?;
        if let Some(found) = raw.get("format_version").and_then(Value::as_u64)
            && found > u64::from(PLAN_FORMAT_VERSION)
        {
            return Err(PlanFileError::NewerFormat {
                file: file.to_owned(),
                found,
                supported: PLAN_FORMAT_VERSION,
            });
        }
        serde_json::from_str(text).map_err(corrupt)
    }
}
