//! What `cargo metadata --format-version 1` says about the workspace: its members, every
//! package's declared `rust-version`, and the resolved dependency graph.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The parts of `cargo metadata` tidy reads.
pub(crate) struct Metadata {
    /// Package id → (name, rust-version).
    packages: BTreeMap<String, (String, Option<String>)>,
    /// Workspace member ids.
    members: Vec<String>,
    /// Package id → the ids of its normal (not dev, not build) dependencies.
    normal_deps: BTreeMap<String, Vec<String>>,
}

impl Metadata {
    /// Runs `cargo metadata` in the workspace at `root`.
    pub(crate) fn read(root: &Path) -> Self {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args(["metadata", "--format-version", "1"])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self::parse(&serde_json::from_slice(&output.stdout).unwrap())
    }

    /// Reads `cargo metadata`'s JSON.
    pub(crate) fn parse(json: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let packages = json["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let version = p["rust_version"].as_str().map(str::to_owned);
                (text(&p["id"]), (text(&p["name"]), version))
            })
            .collect();
        let members = json["workspace_members"]
            .as_array()
            .unwrap()
            .iter()
            .map(text)
            .collect();
        let normal_deps = json["resolve"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| {
                let deps = node["deps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|dep| {
                        dep["dep_kinds"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|k| k["kind"].is_null())
                    })
                    .map(|dep| text(&dep["pkg"]))
                    .collect();
                (text(&node["id"]), deps)
            })
            .collect();
        Self {
            packages,
            members,
            normal_deps,
        }
    }

    /// The workspace members' names.
    pub(crate) fn member_names(&self) -> BTreeSet<&str> {
        self.members.iter().map(|id| self.name(id)).collect()
    }

    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.packages.get(id).map_or(id, |(name, _)| name.as_str())
    }

    /// The rust-version every workspace member declares (they inherit the workspace's).
    pub(crate) fn workspace_rust_version(&self) -> String {
        let versions: BTreeSet<&str> = self
            .members
            .iter()
            .filter_map(|id| self.packages.get(id)?.1.as_deref())
            .collect();
        assert_eq!(
            versions.len(),
            1,
            "workspace members declare different rust-versions: {versions:?}"
        );
        versions.first().unwrap().to_string()
    }

    /// Every package that declares a rust-version, with it.
    pub(crate) fn rust_versions(&self) -> impl Iterator<Item = (&str, &str)> {
        self.packages
            .values()
            .filter_map(|(name, v)| Some((name.as_str(), v.as_deref()?)))
    }

    /// When workspace member `from` depends on a package named `to` through normal
    /// dependencies (directly or not), the chain of package names from one to the other.
    /// `Err` when `from` is no workspace member.
    pub(crate) fn dependency_chain(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Option<Vec<String>>, String> {
        let start = self
            .members
            .iter()
            .find(|id| self.name(id) == from)
            .ok_or_else(|| {
                format!("`{from}`, which the invariant is about, is no workspace member")
            })?;
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([start.as_str()]);
        while let Some(id) = queue.pop_front() {
            for dep in self.normal_deps.get(id).into_iter().flatten() {
                if dep == start || came_from.contains_key(dep.as_str()) {
                    continue;
                }
                came_from.insert(dep, id);
                if self.name(dep) == to {
                    let mut chain = vec![self.name(dep).to_owned()];
                    let mut at = dep.as_str();
                    while let Some(&before) = came_from.get(at) {
                        chain.push(self.name(before).to_owned());
                        at = before;
                    }
                    chain.reverse();
                    return Ok(Some(chain));
                }
                queue.push_back(dep);
            }
        }
        Ok(None)
    }
}

/// A version as numbers to compare (`1.94` < `1.94.1` < `1.95`; a missing part is 0).
pub(crate) fn version_key(version: &str) -> Vec<u64> {
    let mut key: Vec<u64> = version
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect();
    while key.last() == Some(&0) {
        key.pop();
    }
    key
}
