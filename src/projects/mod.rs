//! Projects and API keys: one process serving many tenants.
//!
//! A [`Projects`] registry lives in a directory: `registry.db` holds the projects and their
//! keys, and each project's memories, configuration, credits and history live in a database
//! file of its own under `projects/`. A [`Memory`] obtained for a project, from
//! [`Projects::authenticate`] or [`Projects::memory`], is an ordinary handle on that file:
//! nothing it can be asked (an id, a filter, an export) reaches another project's data,
//! because that data is in another file.
//!
//! A program that serves one tenant needs none of this: [`Memory::open`] on a file is that
//! file's one, implicit project.
//!
//! ```no_run
//! # async fn run() -> memlane::Result<()> {
//! use memlane::Projects;
//!
//! let projects = Projects::open("tenants").await?;
//! let acme = projects.create_project("Acme support bot").await?;
//! let key = projects.create_key(&acme.id, "production").await?;
//! println!("shown once: {}", key.key);
//!
//! // In a request handler, with the request's Authorization header:
//! let memory = projects.authenticate(&format!("Token {}", key.key)).await?;
//! memory.add("I'm allergic to peanuts").user("customer-42").infer(false).await?;
//!
//! projects.revoke_key(&key.info.id).await?;
//! # Ok(()) }
//! ```
//!
//! Keys look like `mlk_<16 hex id>_<64 hex secret>`. The secret is 256 bits from the
//! operating system's random source; only its SHA-256 is stored, compared in constant time.
//! The whole key is returned once, by [`Projects::create_key`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::IndexParams;
use crate::llm::Llm;
use crate::memory::Memory;
use crate::rerank::Reranker;

/// The fixed prefix of every API key.
pub const KEY_PREFIX: &str = "mlk_";

/// Hex digits of a key's public id.
const KEY_ID_HEX: usize = 16;
/// Hex digits of a key's secret.
const KEY_SECRET_HEX: usize = 64;
/// Bytes of a project or key name.
pub const MAX_NAME_BYTES: usize = 200;

/// A project: a tenant with its own memories, configuration, credits and keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Project {
    /// `prj_` and 16 hex digits.
    pub id: String,
    /// The operator's name for it.
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// What is known about an API key; never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    /// The key's public id (also the part of the key after [`KEY_PREFIX`]).
    pub id: String,
    /// The project it opens.
    pub project_id: String,
    /// The operator's name for it.
    pub name: String,
    /// The key's start, to recognise it in a list: `mlk_<id>_…`.
    pub display: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key opens nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key just created: the only time the whole key is available.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct NewApiKey {
    /// The key to hand to the client, `mlk_…`. Not stored anywhere: keep it now.
    pub key: String,
    /// The key's record.
    pub info: ApiKey,
}

impl std::fmt::Debug for NewApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewApiKey")
            .field("key", &"<redacted>")
            .field("info", &self.info)
            .finish()
    }
}

/// A registry of projects and their API keys in a directory. Cheap to clone.
#[derive(Clone)]
pub struct Projects {
    inner: Arc<Inner>,
}

struct Inner {
    location: Location,
    registry: Registry,
    template: Template,
    open: tokio::sync::Mutex<HashMap<String, Memory>>,
}

/// How each project's [`Memory`] is built.
#[derive(Default, Clone)]
struct Template {
    embedder: Option<Arc<dyn Embedder>>,
    llm: Option<Arc<dyn Llm>>,
    reranker: Option<Arc<dyn Reranker>>,
    params: IndexParams,
}

impl std::fmt::Debug for Projects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projects")
            .field("location", &self.inner.location)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Projects`] registry: where it lives, and the models every project uses.
#[must_use]
pub struct ProjectsBuilder {
    location: Location,
    template: Template,
}

/// Where a registry keeps projects, keys and memories.
#[derive(Clone)]
enum Location {
    /// `registry.db` and `projects/<id>.db` in a directory.
    Dir(PathBuf),
    /// A PostgreSQL server (its connection string) and the connections to open at most.
    #[cfg(feature = "postgres")]
    Postgres(String, usize),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
            // The connection string may hold a password.
            #[cfg(feature = "postgres")]
            Location::Postgres(..) => f.write_str("Postgres(<connection string>)"),
        }
    }
}

impl std::fmt::Debug for ProjectsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectsBuilder")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl ProjectsBuilder {
    /// Every project embeds with this embedder (default: as [`Memory::builder`]).
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.template.embedder = Some(embedder);
        self
    }

    /// Every project extracts with this language model (default: none).
    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.template.llm = Some(llm);
        self
    }

    /// Every project re-scores text searches with this reranker (default: none).
    pub fn reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.template.reranker = Some(reranker);
        self
    }

    /// Every project's vector index uses these parameters.
    pub fn index_params(mut self, params: IndexParams) -> Self {
        self.template.params = params;
        self
    }

    /// Opens the registry, creating the directory and its database (or the server's
    /// registry tables) if needed.
    pub async fn build(self) -> Result<Projects> {
        let registry = match &self.location {
            Location::Dir(dir) => Registry::sqlite(dir.clone()).await?,
            #[cfg(feature = "postgres")]
            Location::Postgres(url, connections) => Registry::Postgres(Box::new(
                postgres::PgRegistry::connect(url, *connections).await?,
            )),
        };
        Ok(Projects {
            inner: Arc::new(Inner {
                location: self.location,
                registry,
                template: self.template,
                open: tokio::sync::Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Projects {
    /// Opens (or creates) the registry in `dir` with the default models.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Projects> {
        Projects::builder(dir).build().await
    }

    /// A builder for a registry in `dir`.
    pub fn builder(dir: impl AsRef<Path>) -> ProjectsBuilder {
        ProjectsBuilder {
            location: Location::Dir(dir.as_ref().to_path_buf()),
            template: Template::default(),
        }
    }

    /// A builder for a registry on a PostgreSQL server (feature `postgres`): projects and
    /// keys in the schema `memlane_registry`, each project's memories in a schema of its
    /// own, every project on one pool of at most `connections` connections. Every host
    /// that opens the same database shares the projects and keys, and reads them at each
    /// call: a key created or revoked on one host is honoured by all at their next call.
    #[cfg(feature = "postgres")]
    pub fn postgres(url: impl Into<String>, connections: usize) -> ProjectsBuilder {
        ProjectsBuilder {
            location: Location::Postgres(url.into(), connections),
            template: Template::default(),
        }
    }

    /// Creates a project. Its database is created when it is first used.
    pub async fn create_project(&self, name: &str) -> Result<Project> {
        let name = check_name("project", name)?;
        let project = Project {
            id: format!("prj_{}", hex(&random::<8>()?)),
            name,
            created_at: crate::record::now(),
        };
        self.inner.registry.insert_project(&project).await?;
        Ok(project)
    }

    /// Every project, oldest first.
    pub async fn projects(&self) -> Result<Vec<Project>> {
        self.inner.registry.projects().await
    }

    /// One project; a 404 for an unknown id.
    pub async fn project(&self, id: &str) -> Result<Project> {
        self.inner
            .registry
            .project(id)
            .await?
            .ok_or_else(|| Error::Unknown {
                detail: format!("no project {id:?}"),
            })
    }

    /// Creates an API key for a project. The returned [`NewApiKey::key`] is the only copy.
    pub async fn create_key(&self, project_id: &str, name: &str) -> Result<NewApiKey> {
        let name = check_name("key", name)?;
        let project = self.project(project_id).await?;
        let id = hex(&random::<{ KEY_ID_HEX / 2 }>()?);
        let secret = hex(&random::<{ KEY_SECRET_HEX / 2 }>()?);
        let info = ApiKey {
            display: format!("{KEY_PREFIX}{id}_…"),
            id,
            project_id: project.id,
            name,
            created_at: crate::record::now(),
            revoked_at: None,
        };
        self.inner
            .registry
            .insert_key(&info, digest(&secret))
            .await?;
        Ok(NewApiKey {
            key: format!("{KEY_PREFIX}{}_{secret}", info.id),
            info,
        })
    }

    /// A project's keys, revoked ones included, oldest first.
    pub async fn keys(&self, project_id: &str) -> Result<Vec<ApiKey>> {
        self.project(project_id).await?;
        self.inner.registry.keys(project_id).await
    }

    /// Revokes a key by its id: from now on it opens nothing. Revoking twice keeps the first
    /// time. A 404 for an unknown id.
    pub async fn revoke_key(&self, key_id: &str) -> Result<ApiKey> {
        self.inner
            .registry
            .revoke(key_id, Utc::now().timestamp_micros())
            .await?
            .ok_or_else(|| Error::Unknown {
                detail: format!("no API key with id {key_id:?}"),
            })
    }

    /// The project an `Authorization` header value (`Token <key>`) opens, and its
    /// [`Memory`]. A missing, malformed, unknown or revoked key is a 401 whose `detail` says
    /// which, without telling whether an unknown key's id exists.
    pub async fn authenticate(&self, authorization: &str) -> Result<Memory> {
        let project = self.authorize(authorization).await?;
        self.memory(&project).await
    }

    /// The id of the project an `Authorization` header value opens (see
    /// [`authenticate`](Self::authenticate)).
    pub async fn authorize(&self, authorization: &str) -> Result<String> {
        let (id, secret) = parse_header(authorization)?;
        let presented = digest(secret);
        let found = self.inner.registry.lookup(id).await?;
        // An unknown id is compared against a dummy hash, so both paths do the same work.
        let (project, stored, revoked) = found.unwrap_or_default();
        let stored: [u8; 32] = stored.try_into().unwrap_or([0xff; 32]);
        let matches: bool = presented.ct_eq(&stored).into();
        if !matches || project.is_empty() {
            return Err(unauthorized(
                "unknown API key: check that the whole key was copied, or create a new one",
            ));
        }
        if let Some(at) = revoked {
            let at = DateTime::<Utc>::from_timestamp_micros(at)
                .map_or_else(|| "earlier".to_string(), |t| t.to_rfc3339());
            return Err(unauthorized(&format!(
                "this API key was revoked ({at}); use another key of the project"
            )));
        }
        Ok(project)
    }

    /// The [`Memory`] of a project, opened on first use and shared afterwards. A 404 for an
    /// unknown project.
    pub async fn memory(&self, project_id: &str) -> Result<Memory> {
        let mut open = self.inner.open.lock().await;
        if let Some(memory) = open.get(project_id) {
            return Ok(memory.clone());
        }
        let project = self.project(project_id).await?;
        let template = &self.inner.template;
        let mut builder = self
            .inner
            .registry
            .place(&project.id, Memory::builder())
            .await?
            .index_params(template.params)
            .project(&project.id);
        if let Some(e) = &template.embedder {
            builder = builder.embedder(Arc::clone(e));
        }
        if let Some(l) = &template.llm {
            builder = builder.llm(Arc::clone(l));
        }
        if let Some(r) = &template.reranker {
            builder = builder.reranker(Arc::clone(r));
        }
        let memory = builder.build().await?;
        open.insert(project.id, memory.clone());
        Ok(memory)
    }

    /// The database file of a project, for a registry in a directory (`None` on a
    /// PostgreSQL server, where a project is a schema).
    pub fn project_path(&self, project_id: &str) -> Option<PathBuf> {
        match &self.inner.location {
            Location::Dir(dir) => Some(Registry::project_path(dir, project_id)),
            #[cfg(feature = "postgres")]
            Location::Postgres(..) => None,
        }
    }
}

/// Splits `Token mlk_<id>_<secret>` into the id and the secret.
fn parse_header(header: &str) -> Result<(&str, &str)> {
    let header = header.trim();
    if header.is_empty() {
        return Err(unauthorized(
            "missing API key: send the header Authorization: Token <API key>",
        ));
    }
    let (scheme, key) = header.split_once(' ').unwrap_or((header, ""));
    if !scheme.eq_ignore_ascii_case("token") {
        return Err(unauthorized(
            "the Authorization header must use the Token scheme: Authorization: Token <API key>",
        ));
    }
    let key = key.trim();
    let shape = key
        .strip_prefix(KEY_PREFIX)
        .and_then(|rest| rest.split_once('_'))
        .filter(|(id, secret)| {
            id.len() == KEY_ID_HEX
                && secret.len() == KEY_SECRET_HEX
                && id
                    .bytes()
                    .chain(secret.bytes())
                    .all(|b| b.is_ascii_hexdigit())
        });
    shape.ok_or_else(|| {
        unauthorized(&format!(
            "malformed API key: a key is {KEY_PREFIX} followed by {KEY_ID_HEX} hex digits, '_' \
             and {KEY_SECRET_HEX} hex digits"
        ))
    })
}

fn unauthorized(detail: &str) -> Error {
    Error::Unauthorized {
        detail: detail.to_string(),
    }
}

fn check_name(what: &str, name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(Error::invalid_field(
            "name",
            format!(
                "a {what} name is 1 to {MAX_NAME_BYTES} bytes of text without control characters"
            ),
        ));
    }
    Ok(name.to_string())
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::internal(format!("the system's random source failed: {e}")))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(feature = "postgres")]
mod postgres;
mod registry;
#[cfg(test)]
mod tests;

use registry::Registry;
