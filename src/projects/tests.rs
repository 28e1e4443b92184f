use super::*;

fn key() -> String {
    format!(
        "{KEY_PREFIX}{}_{}",
        "a".repeat(KEY_ID_HEX),
        "0".repeat(KEY_SECRET_HEX)
    )
}

#[test]
fn headers_are_parsed_strictly() {
    let good = format!("Token {}", key());
    assert!(parse_header(&good).is_ok());
    assert!(parse_header(&format!("token   {}  ", key())).is_ok());
    for bad in [
        String::new(),
        "   ".into(),
        key(),
        format!("Bearer {}", key()),
        "Token".into(),
        "Token ".into(),
        format!("Token {}", &key()[1..]),
        format!("Token {}x", key()),
        format!("Token {}", key().replace('a', "g")),
        format!("Token {}", key().replace(KEY_PREFIX, "mlx_")),
    ] {
        let err = parse_header(&bad).err();
        assert_eq!(err.as_ref().map(Error::status), Some(401), "{bad:?}");
    }
}

#[test]
fn names_are_checked() {
    assert_eq!(check_name("key", "  ci  ").ok().as_deref(), Some("ci"));
    assert!(check_name("key", "").is_err());
    assert!(check_name("key", "a\nb").is_err());
    assert!(check_name("key", &"x".repeat(MAX_NAME_BYTES + 1)).is_err());
}
