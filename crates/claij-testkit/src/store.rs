//! [`TestStore`]: where one test keeps its runs, on either backend.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::postgres::{self, TestDatabase};

/// A store backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        })
    }
}

/// A throwaway store location: a SQLite file in a fresh temporary directory, or a fresh
/// database on the shared PostgreSQL test cluster. Removed (file) or dropped (database)
/// when this is dropped.
pub struct TestStore {
    url: String,
    backend: Backend,
    place: Place,
}

enum Place {
    Sqlite {
        dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(TestDatabase),
}

impl TestStore {
    /// A SQLite store: `sqlite:DIR/data/claij.db` in a new temporary directory, in a
    /// subdirectory that does not exist yet (opening the store creates it). Panics if no
    /// temporary directory can be made.
    pub fn sqlite() -> TestStore {
        let dir = tempfile::tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        let path = dir.path().join("data").join("claij.db");
        TestStore {
            url: format!("sqlite:{}", path.display()),
            backend: Backend::Sqlite,
            place: Place::Sqlite { dir, path },
        }
    }

    /// A PostgreSQL store: a fresh database on the shared test cluster (started if
    /// needed). Panics, saying how to install PostgreSQL, when its server is missing.
    pub fn postgres() -> TestStore {
        TestStore::from_database(postgres::database())
    }

    /// A store on `backend`.
    pub fn new(backend: Backend) -> TestStore {
        match backend {
            Backend::Sqlite => TestStore::sqlite(),
            Backend::Postgres => TestStore::postgres(),
        }
    }

    /// A store in an existing test database.
    pub fn from_database(database: TestDatabase) -> TestStore {
        TestStore {
            url: database.url(),
            backend: Backend::Postgres,
            place: Place::Postgres(database),
        }
    }

    /// The store URL (`sqlite:PATH` or `postgres://…`), as `claij_store::open` and
    /// `claij --store` take it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Which backend it is on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SQLite file (`None` on PostgreSQL).
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.place {
            Place::Sqlite { path, .. } => Some(path),
            Place::Postgres(_) => None,
        }
    }

    /// The temporary directory holding the SQLite file (`None` on PostgreSQL): room for
    /// whatever else the test writes.
    pub fn dir(&self) -> Option<&Path> {
        match &self.place {
            Place::Sqlite { dir, .. } => Some(dir.path()),
            Place::Postgres(_) => None,
        }
    }

    /// The PostgreSQL test database (`None` on SQLite).
    pub fn database(&self) -> Option<&TestDatabase> {
        match &self.place {
            Place::Sqlite { .. } => None,
            Place::Postgres(db) => Some(db),
        }
    }
}

impl fmt::Debug for TestStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}
