//! Tests of `announce_target`.

use super::*;

fn target(channel: &str, to: &str, thread: Option<&str>) -> Option<AnnounceTarget> {
    Some(AnnounceTarget { channel: channel.into(), to: to.into(), thread_id: thread.map(Into::into) })
}

#[test]
fn d18_discord_group_key_targets_channel_dev() {
    assert_eq!(from_key("agent:main:discord:group:dev"), target("discord", "channel:dev", None));
}

#[test]
fn d20_telegram_topic_suffix_becomes_the_thread_id() {
    assert_eq!(from_key("agent:main:telegram:group:-100123:topic:42"), target("telegram", "group:-100123", Some("42")));
}

#[test]
fn non_digit_thread_ids_are_split_off_too() {
    assert_eq!(
        from_key("agent:main:slack:channel:C123:thread:1700000000.123"),
        target("slack", "channel:C123", Some("1700000000.123"))
    );
    assert_eq!(from_key("agent:ops:telegram:group:-1:topic:général"), target("telegram", "group:-1", Some("général")));
}

#[test]
fn topic_is_checked_before_thread() {
    assert_eq!(from_key("telegram:group:g:thread:1:topic:2"), target("telegram", "group:g:thread:1", Some("2")));
}

#[test]
fn a_marker_without_an_id_before_it_stays_part_of_the_id() {
    assert_eq!(from_key("agent:main:telegram:group:topic:42"), target("telegram", "group:topic:42", None));
}

#[test]
fn kind_decides_the_raw_target_except_for_discord_and_slack() {
    assert_eq!(from_key("whatsapp:group:123@g.us"), target("whatsapp", "group:123@g.us", None));
    assert_eq!(from_key("telegram:channel:news"), target("telegram", "channel:news", None));
    assert_eq!(from_key("slack:group:G1"), target("slack", "channel:G1", None));
}

#[test]
fn aliases_and_case_resolve_to_core_channels() {
    assert_eq!(from_key("agent:main:imsg:group:chat1"), target("imessage", "group:chat1", None));
    assert_eq!(from_key("GChat:channel:spaces/x"), target("googlechat", "channel:spaces/x", None));
    assert_eq!(from_key("google-chat:group:g"), target("googlechat", "group:g", None));
}

#[test]
fn unrecognized_channels_are_lower_cased_and_use_the_bare_id() {
    assert_eq!(from_key("agent:main:MatrixX:group:!room:srv"), target("matrixx", "!room:srv", None));
}

#[test]
fn direct_main_and_malformed_keys_have_no_target() {
    for key in ["", "main", "agent:main:main", "agent:main:telegram:dm:1", "telegram:group", "telegram:group:  ", ":::"]
    {
        assert_eq!(from_key(key), None, "{key:?}");
    }
    assert_eq!(from_key("agent:main:discord:Group:dev"), None);
}

#[test]
fn empty_segments_are_dropped_before_parsing() {
    assert_eq!(from_key("agent::main::discord:group::dev"), target("discord", "channel:dev", None));
}
