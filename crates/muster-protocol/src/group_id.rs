//! What a valid group id is (protocol §6.2): a rule of the wire, checked alike by the
//! coordinator before a request reaches a group, by FindCoordinator in the session, and by
//! anyone who wants to refuse a bad id before sending it.

use crate::ErrorCode;

/// Longest group id, in bytes.
pub const MAX_GROUP_ID_BYTES: usize = 255;

/// Protocol §6.2: 1..=255 bytes of UTF-8, no control characters; else INVALID_GROUP_ID.
pub fn validate_group_id(group_id: &str) -> Result<(), ErrorCode> {
    if group_id.is_empty()
        || group_id.len() > MAX_GROUP_ID_BYTES
        || group_id.chars().any(char::is_control)
    {
        Err(ErrorCode::InvalidGroupId)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_id_validation() {
        assert_eq!(validate_group_id(""), Err(ErrorCode::InvalidGroupId));
        assert_eq!(validate_group_id(&"g".repeat(255)), Ok(()));
        assert_eq!(
            validate_group_id(&"g".repeat(256)),
            Err(ErrorCode::InvalidGroupId)
        );
        // 255 bytes, counted in bytes not characters.
        assert_eq!(
            validate_group_id(&"é".repeat(128)),
            Err(ErrorCode::InvalidGroupId)
        );
        assert_eq!(validate_group_id("a\nb"), Err(ErrorCode::InvalidGroupId));
        assert_eq!(validate_group_id("a\u{7f}"), Err(ErrorCode::InvalidGroupId));
        assert_eq!(validate_group_id("\0"), Err(ErrorCode::InvalidGroupId));
        assert_eq!(validate_group_id("orders-consumers.v2 ü"), Ok(()));
    }
}
