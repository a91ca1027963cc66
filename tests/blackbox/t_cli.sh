# The binary's surface: usage, version, unknown commands.

test_no_arguments_prints_usage() {
    run "$KEEL"
    expect_rc 2
    expect_err "usage: keel"
}

test_help_lists_commands() {
    run "$KEEL" --help
    expect_rc 0
    expect_out "policy"
    expect_out "replay"
}

test_version() {
    run "$KEEL" version
    expect_rc 0
    expect_out "keel "
}

test_unknown_command() {
    run "$KEEL" frobnicate
    expect_rc 2
    expect_err 'unknown command "frobnicate"'
}

test_bad_keel_now_is_named() {
    KEEL_NOW=yesterday run "$KEEL" policy explain "hi"
    expect_rc 2
    expect_err "KEEL_NOW"
}
