//! Tests of `outbox`.

use super::*;

#[test]
fn backoff_doubles_from_the_configured_wait_and_stops_at_a_minute() {
    assert_eq!(backoff_after(1, 1000), 1000);
    assert_eq!(backoff_after(2, 1000), 2000);
    assert_eq!(backoff_after(3, 1000), 4000);
    assert_eq!(backoff_after(7, 1000), 60_000);
    assert_eq!(backoff_after(200, 1000), 60_000);
    assert_eq!(backoff_after(1, 0), 0);
}
