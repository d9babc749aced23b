//! SCRAM credentials (RFC 5802 / RFC 7677), as Kafka keeps them: per user
//! and mechanism a salt, an iteration count, StoredKey and ServerKey. The
//! password itself is never stored; PLAIN logins are checked by deriving
//! StoredKey from the offered password and the stored salt.
//!
//! Kept in `<data dir>/__security/scram.json`, written as a temp file that is
//! fsynced, renamed over it, and made durable with a directory fsync. In cluster mode the data dir is the shared volume, so
//! every broker reads the same file; a broker re-reads it when its
//! modification time changes, so a credential altered on one broker applies
//! to new logins on all. Writers take an exclusive `flock` on the file's
//! lock file for the read-modify-write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use anyhow::Context as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's bounds on SCRAM iterations.
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;

/// A SCRAM mechanism (wire codes as Kafka's `ScramMechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(c: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == c)
    }

    /// Hi(password, salt, i): PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    fn hmac(self, key: &[u8], msg: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|m| m.chain_update(msg).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            ScramMechanism::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|m| m.chain_update(msg).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// The stored credential for a salted password.
    pub fn credential(
        self,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = self.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: self.hash(&client_key),
            server_key: self.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }
}

/// What is stored per user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

mod b64 {
    use super::B64;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s.as_bytes()).map_err(serde::de::Error::custom)
    }
}

type Users = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    users: Users,
}

#[derive(Debug, Default)]
struct Loaded {
    users: Users,
    mtime: Option<SystemTime>,
}

/// Why a credential change was refused (KIP-554's per-user errors).
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("the user name is empty")]
    EmptyName,
    #[error("Too few iterations: {0} (at least {MIN_ITERATIONS})")]
    TooFewIterations(u32),
    #[error("Too many iterations: {0} (at most {MAX_ITERATIONS})")]
    TooManyIterations(u32),
    #[error("Attempt to delete a user credential that does not exist")]
    NotFound,
    #[error("storing credentials: {0:#}")]
    Io(anyhow::Error),
}

/// The credential store.
#[derive(Debug)]
pub struct Credentials {
    path: Option<PathBuf>,
    loaded: RwLock<Loaded>,
}

impl Credentials {
    /// No users (nobody can authenticate).
    pub fn empty() -> Self {
        Credentials {
            path: None,
            loaded: RwLock::new(Loaded::default()),
        }
    }

    /// The store in `data_dir`; a missing file is an empty store, a corrupt
    /// one an error.
    pub fn open(data_dir: &Path) -> anyhow::Result<Self> {
        let c = Credentials {
            path: Some(data_dir.join("__security").join("scram.json")),
            loaded: RwLock::new(Loaded::default()),
        };
        c.reload()?;
        Ok(c)
    }

    fn mtime(&self) -> Option<SystemTime> {
        let p = self.path.as_ref()?;
        std::fs::metadata(p).and_then(|m| m.modified()).ok()
    }

    fn read_file(path: &Path) -> anyhow::Result<Users> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let f: File = serde_json::from_slice(&bytes)
                    .with_context(|| format!("parsing {}", path.display()))?;
                Ok(f.users)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Users::new()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn reload(&self) -> anyhow::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mtime = self.mtime();
        let users = Self::read_file(path)?;
        let mut l = self.loaded.write().unwrap_or_else(|p| p.into_inner());
        *l = Loaded { users, mtime };
        Ok(())
    }

    /// Re-reads the file if another broker (or `kaas user set`) changed it.
    fn refresh(&self) {
        let now = self.mtime();
        let stale = {
            let l = self.loaded.read().unwrap_or_else(|p| p.into_inner());
            l.mtime != now
        };
        if stale && let Err(e) = self.reload() {
            tracing::warn!(error = %format!("{e:#}"), "could not re-read the SCRAM credentials; keeping the ones loaded");
        }
    }

    /// The credential of `user` for `mech`.
    pub fn get(&self, user: &str, mech: ScramMechanism) -> Option<ScramCredential> {
        self.refresh();
        let l = self.loaded.read().unwrap_or_else(|p| p.into_inner());
        l.users.get(user).and_then(|m| m.get(&mech)).cloned()
    }

    /// Every user with its mechanisms and iteration counts.
    pub fn describe(&self) -> BTreeMap<String, Vec<(ScramMechanism, u32)>> {
        self.refresh();
        let l = self.loaded.read().unwrap_or_else(|p| p.into_inner());
        l.users
            .iter()
            .map(|(u, m)| {
                (
                    u.clone(),
                    m.iter().map(|(k, c)| (*k, c.iterations)).collect(),
                )
            })
            .collect()
    }

    /// Checks a PLAIN login against any of the user's SCRAM credentials, in
    /// constant time per comparison.
    pub fn verify_password(&self, user: &str, password: &[u8]) -> bool {
        self.refresh();
        let creds: Vec<(ScramMechanism, ScramCredential)> = {
            let l = self.loaded.read().unwrap_or_else(|p| p.into_inner());
            l.users
                .get(user)
                .map(|m| m.iter().map(|(k, c)| (*k, c.clone())).collect())
                .unwrap_or_default()
        };
        if creds.is_empty() {
            // An unknown name costs what a known one with the default
            // iterations does: the answer's timing does not tell names apart.
            std::hint::black_box(ScramMechanism::Sha512.salted_password(
                password,
                b"kaas: no such user",
                MIN_ITERATIONS,
            ));
            return false;
        }
        // One derivation suffices: the strongest mechanism the user has.
        let Some((mech, cred)) = creds.into_iter().last() else {
            return false;
        };
        let salted = mech.salted_password(password, &cred.salt, cred.iterations);
        let derived = mech.credential(&cred.salt, &salted, cred.iterations);
        constant_time_eq(&derived.stored_key, &cred.stored_key)
    }

    /// Sets `user`'s credential for `mech` from a password (`kaas user set`).
    pub fn set_password(
        &self,
        user: &str,
        mech: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<(), CredentialError> {
        check_iterations(iterations)?;
        let mut salt = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut salt[..]);
        let salted = mech.salted_password(password.as_bytes(), &salt, iterations);
        self.upsert(user, mech, mech.credential(&salt, &salted, iterations))
    }

    /// Stores a credential the client derived (AlterUserScramCredentials).
    pub fn upsert(
        &self,
        user: &str,
        mech: ScramMechanism,
        cred: ScramCredential,
    ) -> Result<(), CredentialError> {
        if user.is_empty() {
            return Err(CredentialError::EmptyName);
        }
        check_iterations(cred.iterations)?;
        self.modify(|users| {
            users.entry(user.to_owned()).or_default().insert(mech, cred);
            Ok(())
        })
    }

    /// Removes `user`'s credential for `mech`.
    pub fn delete(&self, user: &str, mech: ScramMechanism) -> Result<(), CredentialError> {
        self.modify(|users| {
            let m = users.get_mut(user).ok_or(CredentialError::NotFound)?;
            m.remove(&mech).ok_or(CredentialError::NotFound)?;
            if m.is_empty() {
                users.remove(user);
            }
            Ok(())
        })
    }

    fn modify(
        &self,
        f: impl FnOnce(&mut Users) -> Result<(), CredentialError>,
    ) -> Result<(), CredentialError> {
        let Some(path) = &self.path else {
            let mut l = self.loaded.write().unwrap_or_else(|p| p.into_inner());
            return f(&mut l.users);
        };
        let io = |e: anyhow::Error| CredentialError::Io(e);
        let dir = path.parent().context("credentials path").map_err(io)?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating {}", dir.display()))
            .map_err(io)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("scram.lock"))
            .context("opening the credentials lock")
            .map_err(io)?;
        let _guard = crate::security::flock::Exclusive::take(&lock).map_err(io)?;
        let mut users = Self::read_file(path).map_err(io)?;
        f(&mut users)?;
        let bytes = serde_json::to_vec_pretty(&File { users })
            .context("encoding")
            .map_err(io)?;
        crate::log::atomic_file::write_atomically(path, &bytes)
            .and_then(|()| crate::log::sync::sync_dir(dir))
            .with_context(|| format!("writing {}", path.display()))
            .map_err(io)?;
        self.reload().map_err(io)?;
        Ok(())
    }
}

fn check_iterations(i: u32) -> Result<(), CredentialError> {
    if i < MIN_ITERATIONS {
        return Err(CredentialError::TooFewIterations(i));
    }
    if i > MAX_ITERATIONS {
        return Err(CredentialError::TooManyIterations(i));
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    /// The shortest of five runs of `f`.
    fn fastest(f: impl Fn() -> bool) -> std::time::Duration {
        (0..5)
            .map(|_| {
                let t = std::time::Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    }

    #[test]
    fn a_plain_login_for_an_unknown_user_costs_what_a_known_users_does() {
        let c = Credentials::empty();
        c.set_password("alice", ScramMechanism::Sha512, "alice-secret", 4096)
            .unwrap();
        let known = fastest(|| c.verify_password("alice", b"wrong"));
        let unknown = fastest(|| c.verify_password("mallory", b"wrong"));
        assert!(
            unknown * 3 >= known,
            "unknown user {unknown:?}, known user {known:?}: the time tells names apart"
        );
    }

    #[test]
    fn a_password_is_never_stored_and_plain_checks_against_the_scram_credential() {
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::open(dir.path()).unwrap();
        c.set_password("alice", ScramMechanism::Sha512, "alice-secret", 4096)
            .unwrap();
        let file = std::fs::read_to_string(dir.path().join("__security/scram.json")).unwrap();
        assert!(!file.contains("alice-secret"));
        assert!(c.verify_password("alice", b"alice-secret"));
        assert!(!c.verify_password("alice", b"alice-secreT"));
        assert!(!c.verify_password("bob", b"alice-secret"));
        // A second store on the same directory sees it (another broker).
        let c2 = Credentials::open(dir.path()).unwrap();
        assert_eq!(
            c2.get("alice", ScramMechanism::Sha512).unwrap().iterations,
            4096
        );
    }

    #[test]
    fn rfc7677_test_vector_derives_the_same_keys() {
        // RFC 7677 §3: user "user", password "pencil", salt
        // W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations; the server signature
        // it shows follows from this ServerKey.
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let m = ScramMechanism::Sha256;
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let cred = m.credential(&salt, &salted, 4096);
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let sig = m.hmac(&cred.server_key, auth.as_bytes());
        assert_eq!(
            B64.encode(sig),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn iterations_outside_kafkas_bounds_are_refused() {
        let c = Credentials::empty();
        assert!(matches!(
            c.set_password("a", ScramMechanism::Sha256, "p", 100),
            Err(CredentialError::TooFewIterations(100))
        ));
        assert!(matches!(
            c.set_password("a", ScramMechanism::Sha256, "p", 20000),
            Err(CredentialError::TooManyIterations(20000))
        ));
        assert!(matches!(
            c.delete("a", ScramMechanism::Sha256),
            Err(CredentialError::NotFound)
        ));
    }
}
