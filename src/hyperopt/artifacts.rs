//! Trials' files as Optuna artifacts: a store in the layout of Optuna's `FileSystemArtifactStore` (each file
//! at `DIR/ARTIFACT_ID`, the id a random UUID) and the link `optuna.artifacts.upload_artifact` writes, the
//! trial system attribute `artifacts:ARTIFACT_ID` holding `{"artifact_id", "filename", "mimetype",
//! "encoding"}`. So `optuna.artifacts.get_all_artifact_meta`, `download_artifact` and optuna-dashboard find a
//! trial's checkpoint and trade ledger from any host that mounts the store.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Error;

/// The prefix of an artifact link's key (Optuna's `ARTIFACTS_ATTR_PREFIX`).
pub const ARTIFACTS_ATTR_PREFIX: &str = "artifacts:";

/// What Optuna records of an artifact (its `ArtifactMeta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactMeta {
    /// The id (a UUID; the file's name in the store).
    pub artifact_id: String,
    /// The uploaded file's name.
    pub filename: String,
    /// Its MIME type.
    pub mimetype: String,
    /// Its content encoding (none for tradesim's files).
    pub encoding: Option<String>,
}

impl ArtifactMeta {
    /// The attribute's JSON as Python's `json.dumps(dataclasses.asdict(meta))` writes it.
    pub fn to_json(&self) -> String {
        let text = |s: &str| serde_json::Value::from(s).to_string();
        let encoding = self.encoding.as_deref().map_or_else(|| "null".to_owned(), text);
        format!(
            "{{\"artifact_id\": {}, \"filename\": {}, \"mimetype\": {}, \"encoding\": {encoding}}}",
            text(&self.artifact_id),
            text(&self.filename),
            text(&self.mimetype)
        )
    }

    /// Reads an attribute's JSON (`None` when it is not an artifact's meta).
    pub fn from_json(json: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_str).map(str::to_owned);
        Some(Self {
            artifact_id: field("artifact_id")?,
            filename: field("filename")?,
            mimetype: field("mimetype")?,
            encoding: field("encoding"),
        })
    }
}

/// A file-system artifact store (`--artifacts DIR`, or `artifacts` in `[study]`), with the test split's bar
/// times for the ledgers' time columns (set by the job).
#[derive(Clone, Debug)]
pub struct ArtifactStore {
    dir: PathBuf,
    /// RFC 3339 time of each bar of the test split.
    pub test_times: Vec<String>,
}

impl ArtifactStore {
    /// The store at `dir` (created when missing).
    pub fn new(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Output(format!("artifact store {}: cannot create it: {e}", dir.display())))?;
        Ok(Self { dir: dir.to_path_buf(), test_times: Vec::new() })
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where artifact `id` lies.
    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(id)
    }

    /// Stores `bytes` as a new artifact named `filename` (written beside, synced, then renamed into place:
    /// a file under an id is always whole); its meta, for the link.
    pub fn put(&self, filename: &str, bytes: &[u8], mimetype: &str) -> Result<ArtifactMeta, Error> {
        let id = uuid4();
        let path = self.path(&id);
        let tmp = self.dir.join(format!(".{id}.partial"));
        let failed =
            |e: std::io::Error| Error::Output(format!("artifact store {}: {filename}: {e}", self.dir.display()));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            // A failed write leaves nothing behind (a killed process can still leave its `.partial` file).
            let _ = std::fs::remove_file(&tmp);
            return Err(failed(e));
        }
        Ok(ArtifactMeta {
            artifact_id: id,
            filename: filename.to_owned(),
            mimetype: mimetype.to_owned(),
            encoding: None,
        })
    }
}

/// A random (version 4) UUID, as Python's `str(uuid.uuid4())` writes it.
fn uuid4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_in_pythons_layout() {
        let m = ArtifactMeta {
            artifact_id: uuid4(),
            filename: "trial-3 \"x\".csv".to_owned(),
            mimetype: "text/csv".to_owned(),
            encoding: None,
        };
        let json = m.to_json();
        assert!(json.starts_with("{\"artifact_id\": \"") && json.ends_with(", \"encoding\": null}"), "{json}");
        assert_eq!(ArtifactMeta::from_json(&json), Some(m));
        assert_eq!(ArtifactMeta::from_json("{\"filename\": \"x\"}"), None);
    }

    #[test]
    fn ids_are_version_4_uuids() {
        let (a, b) = (uuid4(), uuid4());
        assert_ne!(a, b);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{a}");
        assert!(parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]), "{a}");
    }

    #[test]
    fn a_stored_file_is_whole_under_its_id() {
        let dir = std::env::temp_dir().join(format!("tradesim-artifacts-unit-{}", std::process::id()));
        let store = ArtifactStore::new(&dir).unwrap();
        let m = store.put("trial-0.safetensors", b"weights", "application/octet-stream").unwrap();
        assert_eq!(std::fs::read(store.path(&m.artifact_id)).unwrap(), b"weights");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no partial file left");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
