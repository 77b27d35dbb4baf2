//! Tokens: the auth file stores only the SHA-256 of each token ([`TokenHash`]); a Hello's token
//! is hashed and compared with every stored hash in constant time ([`TokenHash::ct_eq`],
//! `subtle`), so neither a match's position nor how many bytes of a hash matched shows in the
//! time a Hello takes.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The SHA-256 of a token.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// Hashes a token as the auth file expects (`muster auth hash-token`).
    pub fn of(token: &str) -> Self {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// Parses the auth file's `token_sha256`: 64 hex digits, either case.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).ok()?;
        Some(TokenHash(bytes))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Equality in time independent of the contents.
    pub fn ct_eq(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for TokenHash {
    /// Hashes are not secrets, but logs have no use for them: shortened.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({}…)", &self.to_hex()[..8])
    }
}

/// Which of `hashes` the token hashes to, comparing against every one of them (no early exit).
pub fn find_token<'a>(
    token: &str,
    hashes: impl IntoIterator<Item = &'a TokenHash>,
) -> Option<usize> {
    let presented = TokenHash::of(token);
    let mut found = None;
    for (i, hash) in hashes.into_iter().enumerate() {
        // `found` is set at most once: the file refuses two principals with one token.
        if presented.ct_eq(hash) {
            found = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_the_issue_example() {
        // `echo -n test | sha256sum`, the example hash in the auth file docs.
        assert_eq!(
            TokenHash::of("test").to_hex(),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }

    #[test]
    fn hex_parses_either_case_and_only_64_digits() {
        let lower = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let parsed = TokenHash::from_hex(lower).expect("lower");
        assert_eq!(TokenHash::from_hex(&lower.to_uppercase()), Some(parsed));
        assert_eq!(TokenHash::from_hex(&lower[..62]), None);
        assert_eq!(TokenHash::from_hex(&format!("{lower}00")), None);
        assert_eq!(TokenHash::from_hex(&lower.replace('f', "g")), None);
    }

    #[test]
    fn find_token_names_the_matching_hash_only() {
        let hashes = [TokenHash::of("a"), TokenHash::of("b"), TokenHash::of("c")];
        assert_eq!(find_token("b", &hashes), Some(1));
        assert_eq!(find_token("d", &hashes), None);
        assert_eq!(find_token("", &hashes), None);
    }
}
