//! Password hashes: argon2id in the PHC string form (`$argon2id$v=19$m=…`), as
//! `floe hash-password` prints them.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use crate::error::{FloeError, Result};

/// Hashes a password with argon2id and a random salt.
pub fn hash(password: &str) -> Result<String> {
    if password.is_empty() {
        return Err(FloeError::invalid("the password is empty"));
    }
    let salt = SaltString::encode_b64(uuid::Uuid::new_v4().as_bytes())
        .map_err(|e| FloeError::internal(format!("making a salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| FloeError::internal(format!("hashing the password: {e}")))
}

/// Whether `hash` is a password hash Floe can check (the config is checked at start).
pub fn is_valid_hash(hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| parsed.algorithm.as_str().starts_with("argon2"))
}

/// Whether `password` matches `hash`; a malformed hash matches nothing.
pub fn verify(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A hash no password is known for: checked when a login names an unknown user, so
/// that such a login takes as long as a wrong password.
pub fn dummy_hash() -> &'static str {
    static DUMMY: LazyLock<String> =
        LazyLock::new(|| hash(&uuid::Uuid::new_v4().to_string()).unwrap_or_default());
    DUMMY.as_str()
}
