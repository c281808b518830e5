//! Metadata patterns, as JDBC and ADBC write them.

use floe::sql::metadata::like_matches;

#[test]
fn like_patterns_match_as_in_sql() {
    assert!(like_matches("order%", "orders"));
    assert!(like_matches("order%", "order"));
    assert!(like_matches("%", ""));
    assert!(like_matches("o_der_", "orders"));
    assert!(!like_matches("o_der", "orders"));
    assert!(like_matches("order\\_lines", "order_lines"));
    assert!(!like_matches("order\\_lines", "orderXlines"));
    assert!(like_matches("100\\%", "100%"));
    assert!(like_matches("ünï%", "ünïcode"));
    // Many wildcards stay cheap.
    let pattern = "%a".repeat(40) + "%b";
    assert!(!like_matches(&pattern, &"a".repeat(200)));
}
